"""The coordinator's stores on a real PostgreSQL: plans, fenced leases, batches, the catalog."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import psycopg
import pytest
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from usenet_indexer.commands.index import index_files
from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.store.batches import (
    BatchRejected,
    BatchStore,
    LeaseLost,
    ensure_partition,
)
from usenet_indexer.store.catalog import CatalogStore
from usenet_indexer.store.groups import GroupExists, GroupStore
from usenet_indexer.store.nodes import NodeExists, NodeStore
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import Finish, PlanOverlap, RangeStore
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.wire.packed import pack_batch

TTL = 900.0
EXPIRED = -1.0  # a lease whose deadline is already past, without waiting for one
FIRST = 2**32


@pytest.fixture
def pool(pg_url: str, tmp_path: Path) -> Iterator[ConnectionPool]:
    with open_pool(pg_url, Settings(home=tmp_path)) as pool:
        yield pool


@attrs.frozen
class Stores:
    groups: GroupStore
    nodes: NodeStore
    ranges: RangeStore
    batches: BatchStore
    catalog: CatalogStore


@pytest.fixture
def stores(pool: ConnectionPool) -> Stores:
    return Stores(
        GroupStore(pool), NodeStore(pool), RangeStore(pool), BatchStore(pool), CatalogStore(pool)
    )


def node(stores: Stores, name: str) -> int:
    node_id = stores.nodes.authenticate(stores.nodes.create(name))
    assert node_id is not None
    return node_id


def count(pool: ConnectionPool, table: str) -> int:
    with pool.connection() as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


def test_tokens_authenticate_their_node_until_revoked(stores: Stores) -> None:
    token = stores.nodes.create("edge-1")
    other = stores.nodes.create("edge-2")
    assert stores.nodes.authenticate(token) != stores.nodes.authenticate(other)
    assert stores.nodes.authenticate("not-a-token") is None
    with pytest.raises(NodeExists):
        stores.nodes.create("edge-1")
    assert stores.nodes.revoke("edge-1")
    assert stores.nodes.authenticate(token) is None
    assert not stores.nodes.revoke("edge-1")
    assert [n.name for n in stores.nodes.list()] == ["edge-1", "edge-2"]


def test_revoking_a_node_gives_its_leases_back_and_fences_it(stores: Stores) -> None:
    """`uidx nodes revoke`: the node's edges are refused from now on, so its ranges are
    planned again at once (from their resume points) rather than left leased until
    their deadline; a batch of it still on its way in stores nothing, and nothing is
    leased to it any more (a lease call authenticated before the revoke)."""
    group = stores.groups.add("g")
    [held, other_range] = stores.ranges.plan(group, 0, 199, 100)
    a, b = node(stores, "a"), node(stores, "b")
    lease = stores.ranges.lease(a, TTL)
    assert lease is not None
    assert lease.range_id == held
    stores.batches.store(a, held, lease.epoch, pack_batch(empty_batch(0, 40)), 10, TTL)
    assert stores.nodes.revoke("a")
    with pytest.raises(LeaseLost):
        stores.batches.store(a, held, lease.epoch, pack_batch(empty_batch(40, 60)), 10, TTL)
    assert not stores.ranges.heartbeat(a, held, lease.epoch, TTL)
    assert stores.ranges.lease(a, TTL) is None
    takeover = stores.ranges.lease(b, TTL)
    assert takeover is not None
    assert (takeover.range_id, takeover.next, takeover.epoch) == (held, 40, lease.epoch + 1)
    assert stores.ranges.held(b, other_range) is None  # the other range: still planned
    assert [n.leases for n in stores.nodes.list()] == [0, 1]


def test_plans_cover_the_span_and_never_overlap(stores: Stores) -> None:
    group = stores.groups.add("alt.binaries.test")
    with pytest.raises(GroupExists):
        stores.groups.add("alt.binaries.test")
    ids = stores.ranges.plan(group, FIRST, FIRST + 249, 100)
    assert len(ids) == 3
    with pytest.raises(PlanOverlap):
        stores.ranges.plan(group, FIRST + 200, FIRST + 300, 100)
    n = node(stores, "edge")
    leases = [stores.ranges.lease(n, TTL) for _ in ids]
    assert [(lease.first, lease.last) for lease in leases if lease] == [
        (FIRST, FIRST + 99),
        (FIRST + 100, FIRST + 199),
        (FIRST + 200, FIRST + 249),
    ]
    assert stores.ranges.lease(n, TTL) is None


def test_concurrent_leases_give_each_range_to_one_node(
    stores: Stores, pool: ConnectionPool
) -> None:
    group = stores.groups.add("g")
    stores.ranges.plan(group, 0, 3999, 100)
    nodes = [node(stores, f"edge-{i}") for i in range(8)]
    granted: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(len(nodes))

    def lease_all(node_id: int) -> None:
        start.wait()
        while (lease := stores.ranges.lease(node_id, TTL)) is not None:
            with lock:
                granted.append(lease.range_id)

    threads = [threading.Thread(target=lease_all, args=(n,)) for n in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(granted) == sorted(set(granted))
    assert len(granted) == 40


def test_control_a_lease_without_row_locks_gives_one_range_twice(
    stores: Stores, pg_url: str
) -> None:
    """The exclusivity check can fail: pick-then-grant without FOR UPDATE SKIP LOCKED doubles grants."""
    group = stores.groups.add("g")
    stores.ranges.plan(group, 0, 999, 100)
    nodes = [node(stores, f"edge-{i}") for i in range(2)]
    granted: list[int] = []
    lock = threading.Lock()
    picked = threading.Barrier(2)

    def naive_lease(node_id: int) -> None:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT id FROM ranges WHERE state = 'planned' ORDER BY planned_at, id LIMIT 1"
            ).fetchone()
            assert row is not None
            picked.wait()  # both picked before either grants
            conn.execute(
                "UPDATE ranges SET state = 'leased', holder = %s, epoch = epoch + 1 WHERE id = %s",
                (node_id, row[0]),
            )
            with lock:
                granted.append(row[0])

    threads = [threading.Thread(target=naive_lease, args=(n,)) for n in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(granted) != sorted(set(granted))


def test_an_expired_lease_passes_to_the_next_node_at_the_resume_point(stores: Stores) -> None:
    group = stores.groups.add("g")
    [range_id] = stores.ranges.plan(group, FIRST, FIRST + 999, 1000)
    a, b = node(stores, "a"), node(stores, "b")
    first = stores.ranges.lease(a, EXPIRED)
    assert first is not None
    batch = empty_batch(first.first, first.first + 400)
    stores.batches.store(a, range_id, first.epoch, pack_batch(batch), 10, EXPIRED)
    second = stores.ranges.lease(b, TTL)
    assert second is not None
    assert (second.range_id, second.next, second.epoch) == (range_id, FIRST + 400, first.epoch + 1)
    # The old holder is fenced: every call changes nothing.
    with pytest.raises(LeaseLost):
        stores.batches.store(
            a,
            range_id,
            first.epoch,
            pack_batch(empty_batch(FIRST + 400, FIRST + 500)),
            10,
            TTL,
        )
    assert not stores.ranges.heartbeat(a, range_id, first.epoch, TTL)
    assert not stores.ranges.release(a, range_id, first.epoch)
    assert stores.ranges.finish(a, range_id, first.epoch) is Finish.LOST
    assert stores.ranges.held(b, range_id) == second


def test_the_same_node_re_leasing_its_expired_range_fences_its_old_epoch(stores: Stores) -> None:
    group = stores.groups.add("g")
    [range_id] = stores.ranges.plan(group, 0, 99, 100)
    a = node(stores, "a")
    old = stores.ranges.lease(a, EXPIRED)
    new = stores.ranges.lease(a, TTL)
    assert old is not None
    assert new is not None
    assert new.epoch == old.epoch + 1
    with pytest.raises(LeaseLost):
        stores.batches.store(a, range_id, old.epoch, pack_batch(empty_batch(0, 50)), 10, TTL)
    assert (
        stores.batches.store(
            a, range_id, new.epoch, pack_batch(empty_batch(0, 50)), 10, TTL
        ).already
        is False
    )


def test_a_retried_batch_is_already_stored_and_nothing_doubles(
    stores: Stores, pool: ConnectionPool
) -> None:
    batches = indexed_batches(20_000, 5_000)
    group = stores.groups.add("alt.binaries.test")
    [range_id] = stores.ranges.plan(group, batches[0].first, batches[-1].next - 1, 10**9)
    a = node(stores, "a")
    lease = stores.ranges.lease(a, TTL)
    assert lease is not None
    packed = pack_batch(batches[0])
    stored = stores.batches.store(a, range_id, lease.epoch, packed, 100, TTL)
    rows = {t: count(pool, t) for t in ("releases", "fragments", "batches", "rule_counts")}
    again = stores.batches.store(a, range_id, lease.epoch, packed, 100, TTL)
    assert again.already
    assert (again.release_chunks, again.segments) == (stored.release_chunks, stored.segments)
    assert {t: count(pool, t) for t in rows} == rows


def test_finish_needs_the_end_and_release_keeps_the_resume_point(stores: Stores) -> None:
    group = stores.groups.add("g")
    [range_id] = stores.ranges.plan(group, 0, 99, 100)
    a, b = node(stores, "a"), node(stores, "b")
    lease = stores.ranges.lease(a, TTL)
    assert lease is not None
    stores.batches.store(a, range_id, lease.epoch, pack_batch(empty_batch(0, 60)), 10, TTL)
    assert stores.ranges.finish(a, range_id, lease.epoch) is Finish.INCOMPLETE
    with pytest.raises(BatchRejected):
        stores.batches.store(a, range_id, lease.epoch, pack_batch(empty_batch(60, 101)), 10, TTL)
    assert stores.ranges.release(a, range_id, lease.epoch)
    again = stores.ranges.lease(b, TTL)
    assert again is not None
    assert again.next == 60
    stores.batches.store(b, range_id, again.epoch, pack_batch(empty_batch(60, 100)), 10, TTL)
    assert stores.ranges.finish(b, range_id, again.epoch) is Finish.OK
    assert stores.ranges.lease(a, TTL) is None


def _lock_waiters(watch: psycopg.Connection[TupleRow]) -> int:
    row = watch.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return int(row[0]) if row is not None else 0


def test_a_release_as_its_node_stops_and_a_revoke_of_the_node_do_not_deadlock(
    stores: Stores, pg_url: str
) -> None:
    """A revoke locks its node's row, then gives back the node's ranges; a release as the
    node stops counts the stop on the node's row. Had the release taken the range's row
    first and the node's after (one statement: a CTE), the two held each a row the other
    wanted, and PostgreSQL aborted one after deadlock_timeout (the edge's release a 503,
    or the operator's `uidx nodes revoke` an error). Here a third session holds the
    range's row (as a batch being stored does) while both queue on it."""
    group = stores.groups.add("g")
    [range_id] = stores.ranges.plan(group, 0, 99, 100)
    a = node(stores, "a")
    lease = stores.ranges.lease(a, TTL)
    assert lease is not None
    failed: list[BaseException] = []
    released: list[bool] = []
    revoked: list[bool] = []

    def release() -> None:
        try:
            released.append(stores.ranges.release(a, range_id, lease.epoch, stopping=True))
        except psycopg.Error as error:
            failed.append(error)

    def revoke() -> None:
        try:
            revoked.append(stores.nodes.revoke("a"))
        except psycopg.Error as error:
            failed.append(error)

    threads = [threading.Thread(target=release), threading.Thread(target=revoke)]
    with (
        psycopg.connect(pg_url) as holder,
        psycopg.connect(pg_url, autocommit=True) as watch,
    ):
        holder.execute("SELECT FROM ranges WHERE id = %s FOR NO KEY UPDATE", (range_id,))
        for waiters, thread in enumerate(threads, start=1):
            thread.start()
            # Until the server says it waits for a lock (the range's row, held here).
            deadline = time.monotonic() + 30
            while _lock_waiters(watch) < waiters:
                assert thread.is_alive(), failed
                assert time.monotonic() < deadline
                watch.execute("SELECT pg_sleep(0.01)")
        holder.commit()
        for thread in threads:
            thread.join(30)
            assert not thread.is_alive()
    assert failed == []
    assert (released, revoked) == ([True], [True])
    with stores.ranges.pool.connection() as conn:
        row = conn.execute("SELECT state, holder FROM ranges WHERE id = %s", (range_id,))
        assert row.fetchone() == ("planned", None)


def test_the_catalog_equals_an_offline_index_of_the_same_lines(
    stores: Stores, tmp_path: Path
) -> None:
    """Batches from two ranges and two nodes merge into what `uidx index` makes."""
    generated = generate(GeneratorConfig(articles=30_000, seed=7))
    dump = tmp_path / "overview.txt"
    dump.write_bytes(b"\n".join(generated.lines) + b"\n")
    offline, _ = index_files([dump], batch_articles=10**9)
    numbers = [
        int(line.split(b"\t", 1)[0])
        for line in generated.lines
        if line.split(b"\t", 1)[0].isdigit()
    ]
    low, high = min(numbers), max(numbers)
    group = stores.groups.add(generated.truth.group)
    middle = (low + high) // 2
    stores.ranges.plan(group, low, middle, middle - low + 1)
    stores.ranges.plan(group, middle + 1, high, high - middle)
    leases = []
    for name in ("a", "b"):
        node_id = node(stores, name)
        lease = stores.ranges.lease(node_id, TTL)
        assert lease is not None
        leases.append((node_id, lease))
    # The later range is stored first: the catalog must not depend on the order.
    for node_id, lease in reversed(leases):
        lines = [
            line for line in generated.lines if lease.first <= (_number(line) or -1) <= lease.last
        ]
        indexer = RangeIndexer(group=lease.group, first=lease.next)
        for start in range(0, len(lines), 3_000):
            part = lines[start : start + 3_000]
            end = lease.last + 1 if start + 3_000 >= len(lines) else (_number(part[-1]) or 0) + 1
            indexer.add_data(b"\n".join(part), end)
            batch = indexer.finish() if end == lease.last + 1 else indexer.take()
            stores.batches.store(node_id, lease.range_id, lease.epoch, pack_batch(batch), 0, TTL)
        assert stores.ranges.finish(node_id, lease.range_id, lease.epoch) is Finish.OK
    exported = {r.key: r for r in CatalogBuild(stores.catalog.pool).export()}
    expected = {r.key: r for r in offline.releases()}
    assert exported.keys() == expected.keys()
    for key, release in expected.items():
        got = exported[key]
        assert attrs.evolve(got, chunks=0, name="") == attrs.evolve(release, chunks=0, name=""), (
            release.name
        )
    size, stored = stores.catalog.bytes_per_segment()
    # Stored counts a segment posted twice (a repost in a later batch) twice;
    # the export keeps it once.
    assert stored >= sum(len(f.segments) for r in expected.values() for f in r.files)
    assert size > 0


def _number(line: bytes) -> int | None:
    head = line.split(b"\t", 1)[0]
    return int(head) if head.isdigit() else None


def empty_batch(first: int, next_article: int) -> Batch:
    indexer = RangeIndexer(group="g", first=first)
    indexer.add_data(b"", next_article)
    return indexer.take()


def indexed_batches(articles: int, per_batch: int) -> list[Batch]:
    generated = generate(GeneratorConfig(articles=articles, seed=3))
    lines = [line for line in generated.lines if _number(line) is not None]
    indexer = RangeIndexer(group=generated.truth.group, first=_number(lines[0]) or 0)
    batches = []
    for start in range(0, len(lines), per_batch):
        part = lines[start : start + per_batch]
        indexer.add_data(b"\n".join(part), (_number(part[-1]) or 0) + 1)
        batches.append(indexer.take())
    return batches


def test_each_group_gets_its_partition_checked_per_batch(
    stores: Stores, pool: ConnectionPool
) -> None:
    """A partition is made by the batch that needs it, and made again if it went away."""
    batches = indexed_batches(6_000, 3_000)
    a = node(stores, "a")
    made: list[str] = []
    for name in ("alt.binaries.one", "alt.binaries.two"):
        group = stores.groups.add(name)
        [range_id] = stores.ranges.plan(group, batches[0].first, batches[-1].next - 1, 10**9)
        lease = stores.ranges.lease(a, TTL)
        assert lease is not None
        first, second = (attrs.evolve(batch, group=name) for batch in batches[:2])
        stores.batches.store(a, range_id, lease.epoch, pack_batch(first), 0, TTL)
        made.append(f"fragments_g{group}")
        if name == "alt.binaries.two":
            with pool.connection() as conn:
                conn.execute(f"DROP TABLE fragments_g{group}")
            stores.batches.store(a, range_id, lease.epoch, pack_batch(second), 0, TTL)
    with pool.connection() as conn:
        partitions = [
            row[0]
            for row in conn.execute(
                "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'fragments'::regclass ORDER BY 1"
            ).fetchall()
        ]
    assert partitions == made


def _waits_for_a_lock(pool: ConnectionPool, pid: int) -> bool:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
    return bool(row and row[0])


def test_the_first_batches_of_a_new_group_at_once_make_its_partition_once(
    stores: Stores, pool: ConnectionPool, pg_url: str
) -> None:
    """Two first batches of a new group: the later one uses the partition the first made.

    The later batch looks, finds no partition and waits for the lock while
    the first makes it; once the first commits it must go on, not fail with
    DuplicateTable (the node API answered that with a 500 in scripts/demo).
    """
    group = stores.groups.add("alt.binaries.fresh")
    failed: list[BaseException] = []
    with psycopg.connect(pg_url) as first, psycopg.connect(pg_url) as later:
        ensure_partition(first, group)  # made, not committed: the lock is held

        def make() -> None:
            try:
                ensure_partition(later, group)
                later.commit()
            except BaseException as error:
                failed.append(error)

        thread = threading.Thread(target=make)
        thread.start()
        deadline = time.monotonic() + 30
        while not _waits_for_a_lock(pool, later.info.backend_pid):
            assert thread.is_alive(), failed
            assert time.monotonic() < deadline
        first.commit()
        thread.join(30)
    assert not failed
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'fragments'::regclass"
        ).fetchone()
    assert rows == (1,)
