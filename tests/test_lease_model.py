"""Random call sequences against the real lease and fence SQL (issue 6, item 11).

A Hypothesis state machine drives the real `RangeStore` and `BatchStore` on
PostgreSQL with three nodes and three ranges of 100 articles, and keeps a
pure Python model of what each call must do. The clock is the TTL each call
passes: -1 s makes a deadline that is already past, 900 s one that does not
pass during the test; nothing sleeps.

Calls are made with the (node, range, epoch) of real grants, current or
stale, sometimes tampered with (another node, an epoch not granted yet), and
batches start at the resume point, one behind, one ahead, or repeat the last
stored batch (a retry whose reply was lost); every batch covers at least one
article (an empty one is refused: see the test at the end).
Every answer must be the one the model predicts, and after every step the
database is read back and checked:

- every range's state, holder, epoch, resume point and batch count equal the
  model's; a leased range has one holder and a deadline, a planned one none;
- the stored batches of a range tile [first article, resume point) exactly;
- resume points and epochs never go back, a done range stays done, and a
  range changes holder only with a new epoch (so one grant per epoch);
- a call the model says is fenced (LeaseLost, BatchRejected, already stored,
  a lost heartbeat, release or finish, no lease) changed no row at all.

The negative controls make unfenced changes by SQL and show that the same
checker reports each of them.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

import attrs
import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.store.batches import BatchRejected, BatchStore, LeaseLost, Stored
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.ranges import Finish, RangeStore
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.wire.packed import pack_batch

TTL = 900.0
EXPIRED = -1.0  # a deadline already past when the next call comes
NODES = 3
RANGES = 3
RANGE_SIZE = 100
BODY_BYTES = 10

Connection = psycopg.Connection[TupleRow]


# ---------------------------------------------------------------- batches


@functools.cache
def _overview() -> tuple[str, int, tuple[tuple[int, bytes], ...]]:
    """The group, its lowest article and 300 numbered overview lines from the generator."""
    generated = generate(GeneratorConfig(articles=RANGES * RANGE_SIZE, seed=5))
    lines = tuple((int(line.split(b"\t", 1)[0]), line) for line in generated.lines)
    return generated.truth.group, min(n for n, _ in lines), lines


def low_article() -> int:
    return _overview()[1]


@functools.cache
def make_batch(first: int, next_article: int) -> Batch:
    """The batch of the articles [first, next) with what they hold.

    No rules drop anything, so a stored batch writes releases and fragments
    and a fenced one would show if it wrote any.
    """
    group, _, lines = _overview()
    indexer = RangeIndexer(group=group, first=first, rules=())
    indexer.add_data(
        b"\n".join(line for n, line in lines if first <= n < next_article), next_article
    )
    return indexer.take()


# ---------------------------------------------------------------- snapshots and the checker


@attrs.frozen
class RangeRow:
    id: int
    first: int
    last: int
    resume: int
    state: str
    holder: int | None
    epoch: int
    deadline: datetime | None
    expired: bool
    finished: bool
    batches: int
    headers: int


BatchRow = tuple[int, int, int, int, int]  # range, first, next, node, epoch


@attrs.frozen
class Snapshot:
    """What the lease and fence calls can change, read from the database."""

    ranges: tuple[RangeRow, ...]
    batches: tuple[BatchRow, ...]
    # fragments, releases, sum(releases.chunks), rule_counts, probe_candidates
    catalog: tuple[int, ...]

    def range(self, range_id: int) -> RangeRow:
        return next(r for r in self.ranges if r.id == range_id)


_RANGE_ROWS = """
    SELECT id, first_article, last_article, resume, state, holder, epoch, deadline,
           coalesce(deadline < now(), false), finished_at IS NOT NULL, batches, headers
    FROM ranges ORDER BY id
"""
_BATCH_ROWS = """
    SELECT range_id, batch_first, batch_next, node_id, epoch FROM batches
    ORDER BY range_id, batch_first
"""
_CATALOG = """
    SELECT (SELECT count(*) FROM fragments), (SELECT count(*) FROM releases),
           (SELECT coalesce(sum(chunks), 0) FROM releases), (SELECT count(*) FROM rule_counts),
           (SELECT count(*) FROM probe_candidates)
"""


def snapshot(conn: Connection) -> Snapshot:
    ranges = tuple(RangeRow(*row) for row in conn.execute(_RANGE_ROWS).fetchall())
    batches: tuple[BatchRow, ...] = tuple(
        (int(a), int(b), int(c), int(d), int(e))
        for a, b, c, d, e in conn.execute(_BATCH_ROWS).fetchall()
    )
    row = conn.execute(_CATALOG).fetchone()
    assert row is not None
    return Snapshot(ranges, batches, tuple(int(x) for x in row))


def violations(before: Snapshot | None, after: Snapshot) -> list[str]:
    """What breaks the lease and fence invariants in `after`, and from `before` to `after`."""
    found: list[str] = []
    for r in after.ranges:
        where = f"range {r.id}"
        if r.state == "leased" and (r.holder is None or r.deadline is None):
            found.append(f"{where}: leased without a holder and a deadline")
        if r.state == "planned" and (r.holder is not None or r.deadline is not None):
            found.append(f"{where}: planned but held by {r.holder}")
        if r.state == "done" and (r.resume != r.last + 1 or r.deadline is not None):
            found.append(f"{where}: done at resume point {r.resume} of {r.first}..{r.last}")
        if not r.first <= r.resume <= r.last + 1:
            found.append(f"{where}: resume point {r.resume} outside {r.first}..{r.last + 1}")
        own = [b for b in after.batches if b[0] == r.id]
        edges = [r.first] + [b[2] for b in own]
        if [b[1] for b in own] != edges[:-1] or edges[-1] != r.resume or len(own) != r.batches:
            spans = [(b[1], b[2]) for b in own]
            found.append(f"{where}: batches {spans} do not tile {r.first}..{r.resume}")
    if before is None:
        return found
    now = {r.id: r for r in after.ranges}
    for old in before.ranges:
        new = now.get(old.id)
        where = f"range {old.id}"
        if new is None:
            found.append(f"{where}: gone")
            continue
        if new.resume < old.resume:
            found.append(f"{where}: resume point went back from {old.resume} to {new.resume}")
        if new.epoch < old.epoch:
            found.append(f"{where}: epoch went back from {old.epoch} to {new.epoch}")
        if old.state == "done" and (new.state, new.holder, new.epoch, new.resume) != (
            old.state,
            old.holder,
            old.epoch,
            old.resume,
        ):
            found.append(f"{where}: done, then {new.state} by {new.holder} epoch {new.epoch}")
        if new.holder is not None and new.holder != old.holder and new.epoch == old.epoch:
            found.append(f"{where}: new holder {new.holder} (was {old.holder}) without a new epoch")
    lost = set(before.batches) - set(after.batches)
    if lost:
        found.append(f"stored batches gone or changed: {sorted(lost)}")
    if any(n < o for n, o in zip(after.catalog, before.catalog, strict=True)):
        found.append(f"catalog rows went down: {before.catalog} -> {after.catalog}")
    return found


def fenced_changes(before: Snapshot, after: Snapshot) -> list[str]:
    """Every change between two snapshots: a fenced call must make none."""
    found: list[str] = []
    old = {r.id: r for r in before.ranges}
    for r in after.ranges:
        if old.get(r.id) != r:
            found.append(f"range row changed: {old.get(r.id)} -> {r}")
    if set(old) != {r.id for r in after.ranges}:
        found.append("ranges added or removed")
    if before.batches != after.batches:
        found.append(f"batches changed: {before.batches} -> {after.batches}")
    if before.catalog != after.catalog:
        found.append(f"catalog changed: {before.catalog} -> {after.catalog}")
    return found


# ---------------------------------------------------------------- the model


@attrs.define
class RangeModel:
    id: int
    first: int
    last: int
    resume: int
    state: str = "planned"
    holder: int | None = None
    epoch: int = 0
    expired: bool = False
    batches: int = 0
    last_batch: tuple[int, int] | None = None

    def held(self, node: int, epoch: int) -> bool:
        return self.state == "leased" and self.holder == node and self.epoch == epoch

    def leasable(self) -> bool:
        return self.state == "planned" or (self.state == "leased" and self.expired)


@attrs.frozen
class Grant:
    """A lease as a node got it: later calls name it, current or stale."""

    node: int
    range_id: int
    epoch: int


@attrs.frozen
class Env:
    pool: ConnectionPool
    conn: Connection  # autocommit, for resets and snapshots


_RESET = """
    TRUNCATE groups, nodes, ranges, batches, releases, fragments, rule_counts,
             probe_candidates, spool_chunks RESTART IDENTITY CASCADE
"""
TAMPER = st.sampled_from(["", "", "", "other node", "next epoch"])
TTLS = st.sampled_from([TTL, EXPIRED])


class LeaseMachine(RuleBasedStateMachine):
    """The lease and fence calls against a model of what each must do."""

    grants = Bundle("grants")

    def __init__(self, env: Env) -> None:
        super().__init__()
        self.conn = env.conn
        self.conn.execute(_RESET)
        groups, nodes = GroupStore(env.pool), NodeStore(env.pool)
        self.ranges, self.batches = RangeStore(env.pool), BatchStore(env.pool)
        group = groups.add(_overview()[0])
        self.nodes: list[int] = []
        for i in range(NODES):
            node_id = nodes.authenticate(nodes.create(f"edge-{i}"))
            assert node_id is not None
            self.nodes.append(node_id)
        low = low_article()
        ids = self.ranges.plan(group, low, low + RANGES * RANGE_SIZE - 1, RANGE_SIZE)
        self.model = {
            range_id: RangeModel(range_id, first, first + RANGE_SIZE - 1, first)
            for range_id, first in zip(
                ids, range(low, low + RANGES * RANGE_SIZE, RANGE_SIZE), strict=True
            )
        }
        # Every batch stored: (range, first, next, node, epoch) -> (chunks, segments).
        self.stored: dict[BatchRow, tuple[int, int]] = {}
        self.granted: dict[int, list[int]] = {range_id: [] for range_id in ids}
        self.before = snapshot(self.conn)
        self._check(fenced=False)

    # ------------------------------------------------------------ rules

    @rule(target=grants, node=st.integers(0, NODES - 1), expired=st.booleans())
    def lease(self, node: int, expired: bool) -> object:
        node_id = self.nodes[node]
        candidates = [r for r in sorted(self.model.values(), key=lambda r: r.id) if r.leasable()]
        got = self.ranges.lease(node_id, EXPIRED if expired else TTL)
        if not candidates:
            assert got is None
            self._check(fenced=True)
            return multiple()
        r = candidates[0]
        assert got is not None, f"no lease, expected range {r.id}"
        expected = (r.id, r.first, r.last, r.resume, r.epoch + 1)
        assert (got.range_id, got.first, got.last, got.next, got.epoch) == expected
        r.state, r.holder, r.epoch, r.expired = "leased", node_id, got.epoch, expired
        assert all(e < got.epoch for e in self.granted[r.id]), "an epoch granted twice"
        self.granted[r.id].append(got.epoch)
        self._check(fenced=False)
        return Grant(node_id, r.id, got.epoch)

    @rule(
        grant=grants,
        tamper=TAMPER,
        start=st.sampled_from(["resume", "resume", "retry", "behind", "ahead"]),
        size=st.sampled_from(["end", 1, 13, 50, "past"]),
        ttl=TTLS,
    )
    def store_batch(
        self, grant: Grant, tamper: str, start: str, size: int | str, ttl: float
    ) -> None:
        self._store(grant, tamper, start, size, ttl)

    @rule(grant=grants, size=st.sampled_from(["end", 1, 13, 50, "past"]), ttl=TTLS)
    def store_next_batch(self, grant: Grant, size: int | str, ttl: float) -> None:
        """The common case, as a node works through its lease (stored when the grant is current)."""
        self._store(grant, "", "resume", size, ttl)

    @precondition(lambda self: any(r.state == "leased" for r in self.model.values()))
    @rule(
        index=st.integers(0, RANGES - 1),
        start=st.sampled_from(["resume", "retry"]),
        size=st.sampled_from(["end", 1, 13, 50, "past"]),
        ttl=TTLS,
        then_finish=st.booleans(),
    )
    def holder_works(
        self, index: int, start: str, size: int | str, ttl: float, then_finish: bool
    ) -> None:
        """The range's current holder stores a batch (or retries its last), maybe finishes.

        Grants drawn from the bundle are mostly stale after a few steps; this
        keeps ranges moving to their end and to done.
        """
        leased = [r for _, r in sorted(self.model.items()) if r.state == "leased"]
        r = leased[index % len(leased)]
        assert r.holder is not None
        grant = Grant(r.holder, r.id, r.epoch)
        self._store(grant, "", start, size, ttl)
        if then_finish:
            self.finish(grant, "")

    def _store(self, grant: Grant, tamper: str, start: str, size: int | str, ttl: float) -> None:
        node, epoch = self._tampered(grant, tamper)
        r = self.model[grant.range_id]
        if start == "retry" and r.last_batch is not None:
            first, next_article = r.last_batch
        else:
            first = r.resume + {"behind": -1, "ahead": 1}.get(start, 0)
            if size == "end":
                next_article = max(r.last + 1, first + 1)
            elif size == "past":
                next_article = max(r.last + 2, first + 1)
            else:
                assert isinstance(size, int)
                next_article = first + size
        key: BatchRow = (r.id, first, next_article, node, epoch)
        if r.held(node, epoch) and r.resume == first and next_article <= r.last + 1:
            expected = "stored"
        elif key in self.stored:
            expected = "already"
        elif r.held(node, epoch) and r.resume == first:
            expected = "rejected"
        else:
            expected = "lost"
        packed = pack_batch(make_batch(first, next_article))
        result: Stored | None = None
        try:
            result = self.batches.store(node, r.id, epoch, packed, BODY_BYTES, ttl)
            outcome = "already" if result.already else "stored"
        except LeaseLost:
            outcome = "lost"
        except BatchRejected:
            outcome = "rejected"
        assert outcome == expected, f"batch {key}: {outcome}, expected {expected}"
        if result is not None:
            counts = (result.release_chunks, result.segments)
            if result.already:
                assert counts == self.stored[key]
            else:
                self.stored[key] = counts
                r.resume, r.expired, r.batches = next_article, ttl < 0, r.batches + 1
                r.last_batch = (first, next_article)
        self._check(fenced=expected != "stored")

    @rule(grant=grants, tamper=TAMPER, ttl=TTLS)
    def heartbeat(self, grant: Grant, tamper: str, ttl: float) -> None:
        node, epoch = self._tampered(grant, tamper)
        r = self.model[grant.range_id]
        expected = r.held(node, epoch)
        assert self.ranges.heartbeat(node, r.id, epoch, ttl) is expected
        if expected:
            r.expired = ttl < 0
        self._check(fenced=not expected)

    @rule(grant=grants, tamper=TAMPER)
    def release(self, grant: Grant, tamper: str) -> None:
        node, epoch = self._tampered(grant, tamper)
        r = self.model[grant.range_id]
        expected = r.held(node, epoch)
        assert self.ranges.release(node, r.id, epoch) is expected
        if expected:
            r.state, r.holder, r.expired = "planned", None, False
        self._check(fenced=not expected)

    @rule(grant=grants, tamper=TAMPER)
    def finish(self, grant: Grant, tamper: str) -> None:
        node, epoch = self._tampered(grant, tamper)
        r = self.model[grant.range_id]
        if not r.held(node, epoch):
            expected = Finish.LOST
        elif r.resume > r.last:
            expected = Finish.OK
        else:
            expected = Finish.INCOMPLETE
        assert self.ranges.finish(node, r.id, epoch) is expected
        if expected is Finish.OK:
            r.state, r.expired = "done", False
        self._check(fenced=expected is not Finish.OK)

    # ------------------------------------------------------------ helpers

    def _tampered(self, grant: Grant, tamper: str) -> tuple[int, int]:
        if tamper == "other node":
            return self.nodes[(self.nodes.index(grant.node) + 1) % NODES], grant.epoch
        if tamper == "next epoch":
            return grant.node, grant.epoch + 1
        return grant.node, grant.epoch

    def _check(self, *, fenced: bool) -> None:
        after = snapshot(self.conn)
        problems = violations(self.before, after)
        if fenced:
            problems += fenced_changes(self.before, after)
        for r in self.model.values():
            row = after.range(r.id)
            seen = (row.state, row.holder, row.epoch, row.resume, row.batches)
            wanted = (r.state, r.holder, r.epoch, r.resume, r.batches)
            if seen != wanted:
                problems.append(f"range {r.id}: database {seen}, model {wanted}")
            if r.state == "leased" and row.expired != r.expired:
                problems.append(f"range {r.id}: expired {row.expired}, model {r.expired}")
        stored = set(after.batches)
        if stored != set(self.stored):
            problems.append(f"batches {sorted(stored)}, model {sorted(self.stored)}")
        assert not problems, "\n".join(problems)
        self.before = after


@pytest.fixture
def env(pool: ConnectionPool, pg_conn: Connection) -> Env:
    return Env(pool, pg_conn)


@pytest.mark.slow
def test_random_lease_and_batch_calls_keep_the_fence(env: Env) -> None:
    # Typed loosely: hypothesis' stubs differ between versions (untyped
    # before 6.16x, a class rather than a factory after); a factory is documented.
    run: Any = run_state_machine_as_test
    run(
        lambda: LeaseMachine(env),
        settings=settings(
            max_examples=100,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


# ---------------------------------------------------------------- negative controls


def _one_range_leased(env: Env) -> tuple[LeaseMachine, Grant]:
    """A machine's set-up with range 1 leased by node 1 and a batch of 50 stored."""
    machine = LeaseMachine(env)
    grant = machine.lease(0, False)
    assert isinstance(grant, Grant)
    machine.store_next_batch(grant, 50, TTL)
    return machine, grant


_TAMPERING: dict[str, tuple[str, str]] = {
    "resume back": (
        "UPDATE ranges SET resume = resume - 10 WHERE id = 1",
        "resume point went back",
    ),
    "second holder": (
        "UPDATE ranges SET holder = (SELECT max(id) FROM nodes) WHERE id = 1",
        "without a new epoch",
    ),
    "epoch back": ("UPDATE ranges SET epoch = epoch - 1 WHERE id = 1", "epoch went back"),
    "done before its end": (
        "UPDATE ranges SET state = 'done', deadline = NULL WHERE id = 1",
        "done at resume point",
    ),
    "batch row beyond the resume point": (
        "INSERT INTO batches SELECT range_id, batch_next, batch_next + 5, node_id, epoch, lines,"
        " release_chunks, segments, body_bytes FROM batches",
        "do not tile",
    ),
}


@pytest.mark.parametrize("case", sorted(_TAMPERING))
def test_control_the_checker_reports_an_unfenced_update(env: Env, case: str) -> None:
    """Each invariant can fail: an UPDATE that bypasses the fence is reported."""
    machine, _ = _one_range_leased(env)
    statement, message = _TAMPERING[case]
    env.conn.execute(statement)
    found = violations(machine.before, snapshot(env.conn))
    assert any(message in problem for problem in found), found


def test_control_a_done_range_leased_again_is_reported(env: Env) -> None:
    machine, grant = _one_range_leased(env)
    machine.store_next_batch(grant, "end", TTL)
    machine.finish(grant, "")
    env.conn.execute(
        "UPDATE ranges SET state = 'leased', epoch = epoch + 1,"
        " deadline = now() + interval '1 hour' WHERE id = 1"
    )
    found = violations(machine.before, snapshot(env.conn))
    assert any("done, then leased" in problem for problem in found), found


def test_control_a_write_after_a_fenced_call_is_reported(env: Env) -> None:
    """A stale batch that got LeaseLost but wrote anyway shows as a change."""
    machine, grant = _one_range_leased(env)
    before = machine.before
    with pytest.raises(LeaseLost):
        machine.batches.store(
            grant.node,
            grant.range_id,
            grant.epoch + 1,
            pack_batch(make_batch(low_article() + 50, low_article() + 60)),
            BODY_BYTES,
            TTL,
        )
    # The write a fence exists to stop: the resume point moved for a stale caller.
    env.conn.execute("UPDATE ranges SET resume = resume + 10 WHERE id = 1")
    after = snapshot(env.conn)
    assert fenced_changes(before, after)
    with pytest.raises(AssertionError, match="range row changed"):
        machine._check(fenced=True)


def test_an_empty_batch_at_the_resume_point_changes_nothing(env: Env) -> None:
    machine = LeaseMachine(env)
    grant = machine.lease(0, False)
    assert isinstance(grant, Grant)
    resume = machine.model[grant.range_id].resume
    packed = pack_batch(make_batch(resume, resume))
    with pytest.raises(BatchRejected, match="covers no article"):
        machine.batches.store(grant.node, grant.range_id, grant.epoch, packed, BODY_BYTES, TTL)
    machine._check(fenced=True)
