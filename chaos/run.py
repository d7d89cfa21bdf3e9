"""The runs of scripts/chaos: processes up, faults injected, conclusions drawn.

Theory of operation
-------------------
A `Run` owns one database of the private cluster, its `uidx coordinator`
process, its edges (`uidx edge`, all behind chaos_proxy), the
monitor of its `ranges` table and the tally of what its faults did. Faults
run one after another (`Run.inject`), each waiting for its victim (an edge
that holds a range) and for the recovery (the range leased again under a
newer epoch, or done) before the next; a kind that got no fault that way
(its victim did not come in time) is tried again, up to RETRY_ROUNDS more
times. The spool is fed meanwhile, and its last part waits until the faults
are done so that there is always work in flight. `conclude` reads what the
run left (every stored segment, the `batches` rows, the coordinator's log)
and draws the conclusions with chaos_check's pure functions.
"""

from __future__ import annotations

import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence, Set
from functools import partial
from pathlib import Path
from typing import TypeVar

import attrs
import httpx
import psycopg
import trio
from psycopg_pool import ConnectionPool

from chaos import check as checks
from chaos.abuse import (
    BRUTE_FORCE_TRIES,
    UNKNOWN_TOKEN,
    abuse_requests,
    bad_requests,
    brute_force_request,
    send_bad_requests,
    send_raw,
)
from chaos.check import BatchRow, RangeRow
from chaos.nntp_faults import AUTH, DROP, NNTP_KINDS, REFUSE, STALL
from chaos.prefetch import PrefetchConfig
from chaos.prepare import (
    GROUP,
    Part,
    Prepared,
    spool_import_args,
)
from chaos.procs import (
    SAMPLE_SECONDS,
    Child,
    Monitor,
    kill_pid,
    log,
    read_log,
    wait_answering,
    worker_pids,
)
from chaos.proxy import (
    AFTER_COMMIT,
    BEFORE_POST,
    Ambush,
    ReplyDropper,
    serve_proxy,
)
from chaos.several import SeveralConfig
from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.store.catalog import CatalogStore
from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.store.pool import GET_TIMEOUT_SECONDS, open_pool
from usenet_indexer.testing.logcheck import LogProblems, file_problems
from usenet_indexer.testing.processes import child_env, free_port

API = "/api/v1/node/"
_T = TypeVar("_T")
# Parts of the spool held back until the faults are done: the ranges waiting
# for them keep edges busy, so every fault finds a victim.
HOLD_BACK = 2
# Rounds over the kinds a round of faults left without one (skipped: no victim,
# no batch post, no build in time), while the held-back parts keep edges busy.
RETRY_ROUNDS = 2
# How long a named kill waits for its edge's next batch post before it is skipped:
# while the several-machines run (2 prefetchers, 2 coordinators, the object
# store killed and started) shares the 2 cores, a fresh clone's first run saw
# no batch post within 5 s six times over, and the fault was never injected.
CATCH_SECONDS = 15.0
# Tries of a named kill (another victim each) before it is left skipped.
NAMED_ATTEMPTS = 3
# How long a thawed edge has for its first call, which must be refused.
REFUSAL_SECONDS = 30.0
# How long build_kill9 waits for a catalog build running or keys pending
# before it is skipped: a stored batch marks its keys pending at once, and
# edges store one every second or so while ranges have spool data.
BUILD_WAIT_SECONDS = 10.0
# For this long of it, only a build holding shard locks will do (a build
# takes 0.1-0.5 s here, so the monitor's pace catches one): the kill then
# hits it mid-build when it picks the builder's process. After that, pending
# keys will do too.
BUILD_PREFER_SECONDS = 5.0
# How often it looks: a fifth of the shortest builds seen.
BUILD_POLL_SECONDS = 0.02
# How long the supervisor has to start a worker in place of one killed (its
# first pause is 1 s; a busy machine starts a coordinator in a few seconds).
WORKER_BACK_SECONDS = 30.0
# How long the conclusion waits for shard locks a killed coordinator's
# connection still held (its backend ends once it sees the socket closed).
DRAIN_SECONDS = 10.0
# The kinds of the named kills (issue 6 item 1), by the proxy's point.
NAMED_KILLS = {BEFORE_POST: "edge_kill9_before_post", AFTER_COMMIT: "edge_kill9_after_commit"}
# The kinds that need keys pending (a stored batch): tried again last, after an import.
BUILD_KINDS = frozenset({"build_kill9", "edge_build_kill9"})


@attrs.frozen(kw_only=True)
class ChaosConfig:
    """The size of a run and the faults it injects.

    Attributes:
        articles: generated overview lines.
        ranges: ranges (one spool part each).
        chunk_articles: articles per spool chunk.
        batch_articles: articles per batch an edge posts; equal to
            chunk_articles, so that every chunk is one batch (see
            `chaos_setup.expected_message_ids`).
        edges: edges that keep running after the burst (all behind the proxy).
        burst_edges: edges started at once at the beginning.
        ttl_seconds: the lease TTL (coordinator and edges).
        idle_seconds: an edge's pause after a 204 (its poll).
        feed_seconds: the pause between two spool imports.
        pause_seconds: the longest random pause between two faults.
        kills, stops, coordinator_kills, postgres_restarts, bad_rounds, build_kills:
            faults of each kind (build_kills: kill -9 of one coordinator
            process while a catalog build runs or keys are pending).
        edge_build_kills: kills -9 of an edge while it has a catalog build job.
        coordinator_processes: `uidx coordinator --processes` of the chaos
            run (the controls and the clock run keep one, in-process).
        named_kills: kills -9 of an edge at each named point of a batch post
            (held by the proxy before it reaches the coordinator; after the
            commit, before the answer reaches the edge).
        drop_every, drop_limit: the proxy loses the reply of every n-th batch post, at most so many.
        bomb_bytes: what the gzip bomb inflates to.
        control_ranges: ranges of the negative control.
        fenced_control: also run the negative control's set-up with the fence on.
        fence_rounds: runs of each side of the fence cost.
        burst_processes: after the burst of lease calls, also start
            `burst_edges` edge processes at once.
        seed: the generator's and the faults' seed.
        prefetch: the prefetch part (chaos_prefetch: kill -9, NNTP faults).
        several: the run on several machines (chaos_several: an S3 spool, two
            prefetchers, two coordinator processes; the store, a prefetcher and a
            coordinator process killed).
        deadline_seconds: the longest the chaos run may take to finish its ranges.
        control_deadline_seconds: the same for a control run.
    """

    articles: int
    ranges: int
    chunk_articles: int
    batch_articles: int
    edges: int
    burst_edges: int = 16
    ttl_seconds: float = 3.0
    idle_seconds: float = 0.5
    feed_seconds: float
    pause_seconds: float
    kills: int
    stops: int
    coordinator_kills: int
    postgres_restarts: int
    bad_rounds: int
    build_kills: int
    named_kills: int
    edge_build_kills: int
    drop_every: int
    drop_limit: int
    bomb_bytes: int
    control_ranges: int
    fenced_control: bool
    fence_rounds: int
    burst_processes: bool
    seed: int
    prefetch: PrefetchConfig
    several: SeveralConfig
    deadline_seconds: float = 300.0
    control_deadline_seconds: float = 60.0
    coordinator_processes: int = 2


def check_config(config: ChaosConfig) -> ChaosConfig:
    """The config, if it can work (see ChaosConfig.batch_articles)."""
    if config.batch_articles != config.chunk_articles:
        raise ValueError("batch_articles must equal chunk_articles (one batch per chunk)")
    return config


def short_config(seed: int) -> ChaosConfig:
    """The CI version: 40k articles in 8 ranges, one fault of each kind (two kills).

    The prefetch part: 20k articles on INN2, two kills of the prefetcher and
    one NNTP fault of each kind. The run on several machines: 40k articles on
    INN2 into an S3 spool, one fault of each of its kinds.
    """
    prefetch = PrefetchConfig(
        articles=20_000, range_articles=5_000, chunk_articles=1_000, slice_articles=250,
        connections=4, kills=2, nntp_faults=dict.fromkeys(NNTP_KINDS, 1), spacing=3,
        deadline_seconds=60.0,
    )  # fmt: skip
    return ChaosConfig(
        articles=40_000, ranges=8, chunk_articles=1000, batch_articles=1000, edges=8,
        feed_seconds=1.5, pause_seconds=0.3, kills=2, stops=1, coordinator_kills=1,
        postgres_restarts=1, bad_rounds=1, build_kills=1, named_kills=1, drop_every=2,
        drop_limit=2, edge_build_kills=1,
        bomb_bytes=256 << 20,
        control_ranges=1, fenced_control=False, fence_rounds=1, burst_processes=False,
        seed=seed, prefetch=prefetch,
        several=SeveralConfig(
            articles=40_000, range_articles=10_000, chunk_articles=1_000, slice_articles=250,
            seed=seed,
        ),
    )  # fmt: skip


def long_config(seed: int) -> ChaosConfig:
    """The long version: 400k articles in 24 ranges, many faults at random moments.

    The prefetch part: 200k articles on INN2, eight kills, ten NNTP faults.
    The run on several machines: 120k articles, one fault of each of its kinds.
    """
    # Two 502s of six connections: the pool goes down to four; they all send a GROUP.
    faults = {DROP: 4, REFUSE: 2, AUTH: 2, STALL: 2}
    prefetch = PrefetchConfig(
        articles=200_000, range_articles=20_000, chunk_articles=2_000, slice_articles=500,
        connections=6, kills=8, nntp_faults=faults, spacing=12, deadline_seconds=300.0,
    )  # fmt: skip
    return ChaosConfig(
        articles=400_000, ranges=24, chunk_articles=2000, batch_articles=2000, edges=8,
        feed_seconds=5.0, pause_seconds=3.0, kills=10, stops=3, coordinator_kills=2,
        postgres_restarts=2, bad_rounds=3, build_kills=2, named_kills=3, drop_every=3,
        drop_limit=8, edge_build_kills=2,
        bomb_bytes=1 << 30,
        control_ranges=4, fenced_control=True, fence_rounds=3, burst_processes=True, seed=seed,
        prefetch=prefetch, deadline_seconds=900.0,
        several=SeveralConfig(
            articles=120_000, range_articles=20_000, chunk_articles=2_000, slice_articles=500,
            seed=seed, deadline_seconds=600.0,
        ),
    )  # fmt: skip


@attrs.define(eq=False)
class Edge:
    """An edge process and the node it is."""

    child: Child
    node_id: int


@attrs.define(eq=False)
class Tally:
    """What the faults did, as they happened."""

    faults: Counter[str] = attrs.field(factory=Counter)
    skipped: Counter[str] = attrs.field(factory=Counter)
    recovery: list[float] = attrs.field(factory=list)
    unrecovered: int = 0
    stale: list[tuple[int, int, int, int]] = attrs.field(factory=list)
    stopped_nodes: set[int] = attrs.field(factory=set)
    lease_state_lost: int = 0
    edges_exited: int = 0
    coordinator_restart_seconds: list[float] = attrs.field(factory=list)
    postgres_down_statuses: Counter[int] = attrs.field(factory=Counter)
    postgres_reconnect_seconds: list[float] = attrs.field(factory=list)
    bad_statuses: Counter[int] = attrs.field(factory=Counter)
    # Brute-force rounds that guessed BRUTE_FORCE_TRIES keys without a 429.
    never_throttled: int = 0
    burst: dict[str, float] = attrs.field(factory=dict)


@attrs.define(eq=False)
class Run:
    """One run: its database, coordinator, edges, proxy, monitor and faults."""

    name: str
    config: ChaosConfig
    folder: Path
    cluster: Cluster
    parts: Sequence[Part]
    prepared: Prepared
    fenced: bool
    rng: random.Random
    dropper: ReplyDropper
    # `uidx coordinator --processes`: more than one, a supervisor over workers.
    processes: int = 1
    ambush: Ambush = attrs.field(factory=Ambush)
    port: int = attrs.field(factory=free_port)
    coordinator: Child = attrs.field(init=False)
    monitor: Monitor = attrs.field(init=False)
    edges: list[Edge] = attrs.field(factory=list)
    proxy_port: int = 0
    tally: Tally = attrs.field(factory=Tally)
    db_quiet: trio.Lock = attrs.field(factory=trio.Lock)
    faults_done: trio.Event = attrs.field(factory=trio.Event)
    # Set once its edges run: the side runs (chaos_side) start then.
    burst_done: trio.Event = attrs.field(factory=trio.Event)
    fed: set[int] = attrs.field(factory=set)
    spare_nodes: list[int] = attrs.field(factory=list)
    stopping: bool = False
    # Parts kept from the feed for the named kills, which import them (see
    # `kill_edge_at`); those left are imported with the held-back ones.
    named_parts: list[int] = attrs.field(init=False)
    named_reserved: frozenset[int] = attrs.field(init=False)
    # The parts held back until the faults are done (HOLD_BACK; a named kill
    # may take one, see `_part_for_a_post`).
    held_parts: list[int] = attrs.field(init=False)
    # Kinds that got no fault are being tried again (`_again`).
    retrying: bool = False

    def __attrs_post_init__(self) -> None:
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        argv = ("coordinator",) if self.fenced else ("coordinator", "--unsafe-no-fence")
        if self.processes > 1:
            argv = (*argv, "--processes", str(self.processes))
        env = child_env(
            DATABASE_URL=self.prepared.url,
            UIDX_HOME=str(self.home),
            UIDX_LISTEN=f"127.0.0.1:{self.port}",
            UIDX_LEASE_TTL_SECONDS=str(self.config.ttl_seconds),
            UIDX_MAX_BODY_BYTES=str(self.max_body_bytes),
            UIDX_MAX_INFLATED_BYTES=str(64 << 20),
            # The edges do the catalog builds (edge_build_kill9 kills one mid-job).
            UIDX_EDGE_BUILDS="true",
        )
        self.coordinator = Child(
            "coordinator",
            argv,
            env,
            self.folder / "logs" / "coordinator.log",
            supervisor=self.processes > 1,
        )
        self.monitor = Monitor(self.prepared.url)
        held = max(1, len(self.parts) - HOLD_BACK)
        self.named_parts = list(range(max(1, held - 2 * self.config.named_kills), held))
        self.named_reserved = frozenset(self.named_parts)
        self.held_parts = list(range(held, len(self.parts)))

    @property
    def home(self) -> Path:
        return self.folder / "home"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}{API}"

    @property
    def max_body_bytes(self) -> int:
        return 8 << 20

    @property
    def abuser(self) -> tuple[int, str]:
        return self.prepared.node_ids[-1], self.prepared.tokens[-1]

    # --- processes ---------------------------------------------------------------

    async def start_coordinator(self) -> None:
        await self.coordinator.start()
        await wait_answering(self.coordinator, self.api)

    def edge(self, slot: int, *, clock: Mapping[str, str] | None = None) -> Edge:
        # Every edge goes through the proxy: batch posts of any of them may lose
        # their reply, so replies are lost however the leases fall. `clock`:
        # libfaketime's variables (chaos_clock), to run it on a clock of its own.
        port = self.proxy_port
        env = child_env(
            COORDINATOR_URL=f"http://127.0.0.1:{port}",
            NODE_TOKEN=self.prepared.tokens[slot],
            UIDX_HOME=str(self.home),
            UIDX_LEASE_TTL_SECONDS=str(self.config.ttl_seconds),
            UIDX_IDLE_SECONDS=str(self.config.idle_seconds),
            UIDX_BATCH_ARTICLES=str(self.config.batch_articles),
            **(clock or {}),
        )
        log_file = self.folder / "logs" / f"edge-{slot:02}.log"
        child = Child(f"edge {slot}", ("edge",), env, log_file)
        return Edge(child, self.prepared.node_ids[slot])

    async def import_part(self, index: int) -> None:
        """`uidx spool import` of one part; tried again while the database is away.

        While faults run, an import holds `db_quiet`, so that PostgreSQL is
        not stopped under it (a half-done import cannot be repeated: its
        chunk rows would be there twice); after the faults, imports run at once.
        """
        env = child_env(DATABASE_URL=self.prepared.url, UIDX_HOME=str(self.home))
        argv = [*_uidx_argv(), *spool_import_args(self.parts[index], self.config.chunk_articles)]
        run = partial(
            trio.run_process, argv, env=env, capture_stdout=True, capture_stderr=True, check=False
        )
        while True:
            if self.faults_done.is_set():
                done = await run()
            else:
                async with self.db_quiet:
                    done = await run()
            if done.returncode == 0:
                self.fed.add(self.prepared.range_ids[index])
                return
            log(f"spool import of part {index} failed; again in 1 s")
            await trio.sleep(1.0)

    async def stop_everything(self) -> None:
        self.stopping = True
        async with trio.open_nursery() as nursery:
            for edge in self.edges:
                nursery.start_soon(edge.child.stop)
        await self.coordinator.stop()

    async def kill_everything(self) -> None:
        """SIGKILL whatever still runs (after a failure or an interrupt), shielded."""
        with trio.CancelScope(shield=True):
            for child in [edge.child for edge in self.edges] + [self.coordinator]:
                if child.running:
                    child.signal(signal.SIGCONT)
                    await child.kill()

    def all_done(self, rows: Sequence[RangeRow]) -> bool:
        return bool(rows) and all(row.state == "done" for row in rows)

    # --- the lease burst ---------------------------------------------------------

    async def lease_burst(self) -> None:
        """16 nodes lease at once: one holder per range; the edges start meanwhile.

        `burst_edges` lease calls, one per node, sent together while the
        `edges` edge processes start (they may lease meanwhile too): the
        grants must name distinct ranges, and the `ranges` table must show
        each granted range held by its node under its epoch (then they are
        given back). With `burst_processes`, `burst_edges` edge processes
        are then started at once, and all but `edges` of them stopped (they
        give their ranges back).
        """
        count = self.config.burst_edges if self.config.burst_processes else self.config.edges
        edges = [self.edge(slot) for slot in range(count)]
        if not self.config.burst_processes:
            await self._start(edges)
        grants = await self._burst_requests()
        rows = {row.range_id: row for row in await self._sample_now()}
        mismatched = sum(
            1
            for node, range_id, epoch in grants
            if rows[range_id].holder != node or rows[range_id].epoch != epoch
        )
        ranges = {range_id for _, range_id, _ in grants}
        self.tally.faults["lease_burst"] += 1
        self.tally.burst = {
            "nodes": self.config.burst_edges,
            "granted": len(grants),
            "distinct_ranges": len(ranges),
            "distinct_holders": len({node for node, _, _ in grants}),
            "not_as_granted_in_sql": mismatched,
        }
        log(
            f"lease burst: {self.config.burst_edges} nodes at once, {len(grants)} grants of "
            f"{len(ranges)} distinct ranges; {mismatched} not held as granted (SQL)"
        )
        await self._give_back(grants)
        self.edges = edges
        if not self.config.burst_processes:
            return
        await self._start(edges)
        log(f"lease burst: {count} edge processes started at once")
        wanted = min(count, len(self.parts))
        await self.monitor.until(
            lambda rows: sum(row.state == "leased" and row.live for row in rows) >= wanted, 60.0
        )
        leased = [row for row in self.monitor.latest if row.state == "leased" and row.live]
        self.tally.burst["process_ranges_leased"] = len(leased)
        self.tally.burst["process_distinct_holders"] = len({row.holder for row in leased})
        async with trio.open_nursery() as nursery:
            for edge in edges[self.config.edges :]:
                nursery.start_soon(edge.child.stop)
        self.edges = edges[: self.config.edges]

    async def _start(self, edges: Sequence[Edge]) -> None:
        for edge in edges:
            await edge.child.start()

    async def _burst_requests(self) -> list[tuple[int, int, int]]:
        """One lease call per node, all sent at once; (node, range, epoch) of each grant."""
        go = trio.Event()
        grants: list[tuple[int, int, int]] = []
        limits = httpx.Limits(max_connections=2 * self.config.burst_edges)

        async def lease(
            client: httpx.AsyncClient, slot: int, *, task_status: trio.TaskStatus[None]
        ) -> None:
            headers = {"Authorization": f"Bearer {self.prepared.tokens[slot]}"}
            task_status.started()
            await go.wait()
            response = await client.post("lease", headers=headers)
            if response.status_code == 200:
                document = response.json()["range"]
                grants.append((self.prepared.node_ids[slot], document["id"], document["epoch"]))

        async with (
            httpx.AsyncClient(base_url=self.api, timeout=30.0, limits=limits) as client,
            trio.open_nursery() as nursery,
        ):
            for slot in range(self.config.burst_edges):
                await nursery.start(partial(lease, client, slot))
            go.set()  # every task waits on it: the calls go out together
        return grants

    async def _sample_now(self) -> Sequence[RangeRow]:
        taken = trio.current_time()
        await self.monitor.until(lambda rows: self.monitor.samples[-1][0] > taken, 10.0)
        return self.monitor.latest

    async def _give_back(self, grants: Sequence[tuple[int, int, int]]) -> None:
        tokens = dict(zip(self.prepared.node_ids, self.prepared.tokens, strict=True))
        async with httpx.AsyncClient(base_url=self.api, timeout=30.0) as client:
            for node, range_id, epoch in grants:
                headers = {"Authorization": f"Bearer {tokens[node]}"}
                response = await client.post(
                    f"ranges/{range_id}/release", json={"epoch": epoch}, headers=headers
                )
                response.raise_for_status()

    # --- feeding the spool -------------------------------------------------------

    async def feed(self) -> None:
        """Import the parts one by one; the last HOLD_BACK together once the faults are done."""
        held = max(1, len(self.parts) - HOLD_BACK)
        for index in range(1, held):
            if index in self.named_reserved:
                continue
            await trio.sleep(self.config.feed_seconds)
            await self._import_logged(index)
        await self.faults_done.wait()
        async with trio.open_nursery() as nursery:
            # With the parts the named kills left (one was skipped).
            for index in [*self.named_parts, *self.held_parts]:
                nursery.start_soon(self._import_logged, index)

    async def _import_logged(self, index: int) -> None:
        await self.import_part(index)
        log(f"spool: part {index + 1} of {len(self.parts)} imported")

    # --- faults --------------------------------------------------------------------

    async def inject(self) -> None:
        config = self.config
        kinds = (
            ["edge_kill9"] * config.kills
            + ["edge_sigstop"] * config.stops
            + ["coordinator_kill9"] * config.coordinator_kills
            + ["postgres_restart"] * config.postgres_restarts
            + ["bad_input"] * config.bad_rounds
            + ["build_kill9"] * config.build_kills
            + ["edge_build_kill9"] * config.edge_build_kills
            + [NAMED_KILLS[BEFORE_POST], NAMED_KILLS[AFTER_COMMIT]] * config.named_kills
        )
        self.rng.shuffle(kinds)
        faults: dict[str, Callable[[], Awaitable[None]]] = {
            "edge_kill9": self.kill_edge,
            "edge_sigstop": self.freeze_edge,
            "coordinator_kill9": self.kill_coordinator,
            "postgres_restart": self.restart_postgres,
            "bad_input": self.bad_input,
            "build_kill9": self.kill_builder,
            "edge_build_kill9": self.kill_edge_builder,
            NAMED_KILLS[BEFORE_POST]: partial(self.kill_edge_at, BEFORE_POST),
            NAMED_KILLS[AFTER_COMMIT]: partial(self.kill_edge_at, AFTER_COMMIT),
        }
        for kind in kinds:
            await trio.sleep(self.rng.uniform(0.0, config.pause_seconds))
            await faults[kind]()
        for _ in range(RETRY_ROUNDS):
            missing = checks.not_injected(kinds, self.tally.faults)
            if not missing:
                break
            await self._again(missing, faults)
        self.faults_done.set()

    async def _again(
        self, missing: Sequence[str], faults: Mapping[str, Callable[[], Awaitable[None]]]
    ) -> None:
        """The kinds that got no fault (their victim, batch post or build did not
        come in time), tried again: the run is not done before each got one.

        Those that need an edge holding a range go first, while the held-back
        parts keep ranges waiting; then those that need a batch post, with the
        parts kept from the feed (the last held-back one too: no kind after
        them needs a waiting range): a named kill imports one per try (none
        left: it is skipped at once, nothing would post), and build_kill9 comes
        last, after one more is imported if any is left (the named kills'
        batches may have left keys pending too).
        """
        log(f"no fault yet of {', '.join(missing)}: tried again")
        self.retrying = True
        for kind in sorted(missing, key=retry_rank):
            if kind in NAMED_KILLS.values() and not (self.named_parts or self.held_parts):
                self.tally.skipped[kind] += 1
                log(f"{kind}: no part of the spool left to make a batch post; skipped")
                continue
            if kind in BUILD_KINDS and (part := self._part_for_a_post()) is not None:
                await self._import_logged(part)
            await faults[kind]()

    async def victim(self, kind: str, *, busy: bool) -> tuple[Edge, RangeRow] | None:
        """A running edge, not frozen, holding a range that is not done.

        None (the fault `kind` counted as skipped, and logged) when there is none.

        With `busy`, one whose range has spool data first (it is mid-stream);
        else one whose range waits for the spool first (it cannot finish
        before the fault takes effect).
        """
        choice: list[tuple[Edge, RangeRow]] = []

        def found(rows: Sequence[RangeRow]) -> bool:
            held = {row.holder: row for row in rows if row.live and row.holder is not None}
            choice[:] = [
                (edge, held[edge.node_id])
                for edge in self.edges
                if edge.child.running and not edge.child.frozen
                and edge.node_id in held
            ]  # fmt: skip
            return bool(choice)

        if await self.monitor.until(found, 15.0) is None:
            self.tally.skipped[kind] += 1
            log(f"{kind}: no edge holds a range that is not done; skipped")
            return None
        preferred = [pick for pick in choice if (pick[1].range_id in self.fed) == busy]
        return self.rng.choice(preferred or choice)

    async def kill_edge(self) -> None:
        picked = await self.victim("edge_kill9", busy=True)
        if picked is None:
            return
        edge, row = picked
        killed_at = trio.current_time()
        await edge.child.kill()
        self.tally.faults["edge_kill9"] += 1
        log(f"kill -9 of {edge.child.name} (node {edge.node_id}) holding range {row.range_id}")
        # Its supervisor would start it again: same node, same token.
        await trio.sleep(self.rng.uniform(0.0, 1.0))
        await edge.child.start()
        await self.recovered(row, killed_at)

    async def kill_edge_at(self, point: str) -> None:
        """kill -9 of an edge at a named point of a batch post (chaos_proxy.Ambush).

        The proxy is armed for the next batch post of any running edge, and
        a part kept from the feed is imported, so that the edge holding its
        range posts at once. BEFORE_POST: the proxy holds the post, the edge
        is killed, the post is dropped (nothing of it stored). AFTER_COMMIT:
        the coordinator answered (committed), the edge is killed, the answer
        is dropped; the batch must end up stored once. Then the edge is
        started again (same token) and the range must be taken over, as
        after `kill_edge`. Tried again (with another victim) when no edge
        posted or the answer was not a commit.
        """
        for _ in range(NAMED_ATTEMPTS):
            if await self._kill_edge_at_once(point):
                return

    async def _kill_edge_at_once(self, point: str) -> bool:
        """One try of `kill_edge_at`: whether the kill at the point was injected."""
        kind = NAMED_KILLS[point]
        tokens = dict(zip(self.prepared.tokens, self.prepared.node_ids, strict=True))
        nodes = {edge.node_id: edge for edge in self.edges if edge.child.running}
        armed = [t for t, node in tokens.items() if node in nodes and not nodes[node].child.frozen]
        ambush = self.ambush
        ambush.arm(armed, point)
        part = self._part_for_a_post()
        if part is not None:
            await self._import_logged(part)
        with trio.move_on_after(CATCH_SECONDS):
            await ambush.caught.wait()
        if not ambush.caught.is_set() or ambush.caught_token is None:
            ambush.disarm()
            self.tally.skipped[kind] += 1
            log(f"{kind}: no edge posted a batch in {CATCH_SECONDS} s; skipped")
            return False
        edge = nodes[tokens[ambush.caught_token]]
        killed_at = trio.current_time()
        await edge.child.kill()
        ambush.released.set()
        range_id = ambush.range_id
        injected = point == BEFORE_POST or (ambush.status is not None and ambush.status < 300)
        if injected:
            self.tally.faults[kind] += 1
        else:
            # Not a commit (a 409 or 503): a kill, but not at this point.
            self.tally.skipped[kind] += 1
            self.tally.faults["edge_kill9"] += 1
            log(f"{kind}: the coordinator answered {ambush.status}; counted as edge_kill9")
        log(
            f"kill -9 of {edge.child.name} (node {edge.node_id}) {point.replace('_', ' ')} "
            f"of a batch of range {range_id} (answer {ambush.status})"
        )
        # The range as it was when the edge died: a sample taken after the kill.
        rows = await self._sample_now()
        row = next((r for r in rows if r.range_id == range_id), None)
        await trio.sleep(self.rng.uniform(0.0, 1.0))
        await edge.child.start()
        if row is None:
            log(f"{kind}: range {range_id} not in the ranges table")
            self.tally.unrecovered += 1
            return injected
        await self.recovered(row, killed_at)
        return injected

    def _part_for_a_post(self) -> int | None:
        """A part kept from the feed to import now, so that a batch post comes at once:
        one the named kills kept, else a held-back one while another stays held
        back for the faults after it (any, when kinds are tried again: `_again`)."""
        if self.named_parts:
            return self.named_parts.pop(0)
        if len(self.held_parts) > (0 if self.retrying else 1):
            return self.held_parts.pop(0)
        return None

    async def recovered(self, row: RangeRow, since: float) -> None:
        at = await self.monitor.until(partial(checks.taken_over, row), self.config.ttl_seconds + 30)
        if at is None:
            self.tally.unrecovered += 1
            log(f"range {row.range_id} was not taken over")
            return
        self.tally.recovery.append(at - since)
        log(f"range {row.range_id} taken over after {at - since:.2f} s")

    async def freeze_edge(self) -> None:
        picked = await self.victim("edge_sigstop", busy=False)
        if picked is None:
            return
        edge, row = picked
        frozen_at = trio.current_time()
        edge.child.signal(signal.SIGSTOP)
        self.tally.faults["edge_sigstop"] += 1
        self.tally.stopped_nodes.add(edge.node_id)
        log(f"SIGSTOP of {edge.child.name} (node {edge.node_id}) holding range {row.range_id}")
        # A spare edge to take the range over once the lease runs out.
        if self.spare_nodes:
            slot = self.prepared.node_ids.index(self.spare_nodes.pop())
            spare = self.edge(slot)
            await spare.child.start()
            self.edges.append(spare)
        await self.recovered(row, frozen_at)
        before = await trio.to_thread.run_sync(
            _rows_of, self.prepared.url, row.range_id, row.epoch, edge.node_id
        )
        self.tally.stale.append((row.range_id, row.epoch, edge.node_id, before))
        left = frozen_at + self.config.ttl_seconds + 1.0 - trio.current_time()
        await trio.sleep(max(0.0, left))
        edge.child.signal(signal.SIGCONT)
        log(f"SIGCONT of {edge.child.name} after {trio.current_time() - frozen_at:.1f} s")
        # No other fault before its next call (a heartbeat, a batch, a release)
        # was refused: a kill right after SIGCONT would hide what this checks.
        if await self.until_refused(edge.node_id, REFUSAL_SECONDS):
            log(f"{edge.child.name} (node {edge.node_id}) was refused after SIGCONT")
        else:
            log(f"{edge.child.name} (node {edge.node_id}) made no call in {REFUSAL_SECONDS:.0f} s")

    async def until_refused(self, node_id: int, seconds: float) -> bool:
        """Wait until the coordinator's log shows a 409 to `node_id`; whether it did."""
        with trio.move_on_after(seconds):
            while True:
                if read_log(self.coordinator.log).conflicts[node_id]:
                    return True
                await trio.sleep(0.2)
        return False

    async def kill_coordinator(self) -> None:
        before = self.monitor.latest
        killed_at = trio.current_time()
        await self.coordinator.kill()
        self.tally.faults["coordinator_kill9"] += 1
        log("kill -9 of the coordinator")
        await self.start_coordinator()
        up = trio.current_time()
        self.tally.coordinator_restart_seconds.append(up - killed_at)
        log(f"the coordinator answers again after {up - killed_at:.2f} s")
        await self.monitor.until(lambda rows: self.monitor.samples[-1][0] > up, 10.0)
        self.tally.lease_state_lost += checks.lease_state_lost(before, self.monitor.latest)

    async def kill_builder(self) -> None:
        """kill -9 of one coordinator process (a supervisor's worker) while a catalog
        build runs or keys are pending; the supervisor starts another in its place.

        Skipped when no build or pending key shows up within BUILD_WAIT_SECONDS,
        or the coordinator has no workers (one process). A worker that does not
        come back is counted unrecovered.
        """
        kind = "build_kill9"
        process = self.coordinator.process
        # Found first: the kill follows the sample that saw the build at once.
        workers = set() if process is None else await worker_pids(process.pid)
        if process is None or not workers:
            self.tally.skipped[kind] += 1
            log(f"{kind}: the coordinator has no worker process; skipped")
            return
        state = await trio.to_thread.run_sync(
            _until_building, self.prepared.url, BUILD_WAIT_SECONDS, BUILD_PREFER_SECONDS
        )
        if state is None:
            self.tally.skipped[kind] += 1
            log(f"{kind}: no catalog build nor pending key in {BUILD_WAIT_SECONDS:.0f} s; skipped")
            return
        victim = self.rng.choice(sorted(workers))
        killed_at = trio.current_time()
        kill_pid(victim)
        self.tally.faults[kind] += 1
        pending, building = state
        log(
            f"kill -9 of coordinator worker pid {victim} ({pending} keys pending, "
            f"{building} shard locks held)"
        )
        with trio.move_on_after(WORKER_BACK_SECONDS):
            while True:
                if _replaced(await worker_pids(process.pid), workers, victim):
                    back = trio.current_time() - killed_at
                    log(f"the supervisor started a worker again after {back:.2f} s")
                    return
                await trio.sleep(SAMPLE_SECONDS)
        self.tally.unrecovered += 1
        log(f"{kind}: no worker in place of pid {victim} after {WORKER_BACK_SECONDS:.0f} s")

    async def kill_edge_builder(self) -> None:
        """kill -9 of an edge while it has a catalog build job (edge_builds), then started
        again (same token). Its job's keys stay pending: another builds them once the
        job expires (or the conclusion ends the jobs of the run's stopped edges).

        Skipped when no job shows up within BUILD_WAIT_SECONDS, or its edge is not
        one running here.
        """
        kind = "edge_build_kill9"
        job = await trio.to_thread.run_sync(_until_a_job, self.prepared.url, BUILD_WAIT_SECONDS)
        edges = {e.node_id: e for e in self.edges if e.child.running and not e.child.frozen}
        if job is None or job[1] not in edges:
            self.tally.skipped[kind] += 1
            log(f"{kind}: no build job of a running edge in {BUILD_WAIT_SECONDS:.0f} s; skipped")
            return
        job_id, node_id = job
        edge = edges[node_id]
        await edge.child.kill()
        self.tally.faults[kind] += 1
        log(f"kill -9 of {edge.child.name} (node {node_id}) with build job {job_id} open")
        await trio.sleep(self.rng.uniform(0.0, 1.0))
        await edge.child.start()

    async def restart_postgres(self) -> None:
        async with (
            self.db_quiet,
            httpx.AsyncClient(base_url=self.api, timeout=15.0) as client,
            trio.open_nursery() as probes,
        ):
            stopped_at = trio.current_time()
            await trio.to_thread.run_sync(partial(self.cluster.stop, mode="immediate"))
            self.tally.faults["postgres_restart"] += 1
            log("PostgreSQL stopped (immediate)")
            # Longer than the pool's wait for a connection (store/pool.py): calls
            # then get their 503, where a shorter outage only delays them.
            down_until = stopped_at + self.rng.uniform(
                GET_TIMEOUT_SECONDS + 0.3, GET_TIMEOUT_SECONDS + 1.5
            )
            while trio.current_time() < down_until:
                # In the background: a call waits for a connection up to the
                # pool's timeout before its 503.
                probes.start_soon(self._probe_down, client)
                await trio.sleep(0.25)
            await trio.to_thread.run_sync(self.cluster.start)
            started_at = trio.current_time()
            log(f"PostgreSQL started after {started_at - stopped_at:.1f} s down")
            with trio.move_on_after(60.0):
                while (status := await _probe(client)) != 401:
                    self.tally.postgres_down_statuses[status] += 1
                    await trio.sleep(0.1)
                seconds = trio.current_time() - started_at
                self.tally.postgres_reconnect_seconds.append(seconds)
                log(f"the coordinator reconnected {seconds:.2f} s after the start")

    async def _guess(self, attempt: int, answers: list[int]) -> None:
        request = brute_force_request(attempt)
        answers.append(await trio.to_thread.run_sync(send_raw, "127.0.0.1", self.port, request))

    async def _probe_down(self, client: httpx.AsyncClient) -> None:
        self.tally.postgres_down_statuses[await _probe(client)] += 1

    async def bad_input(self) -> None:
        first = self.parts[0].first
        cases = bad_requests(
            self.prepared.range_ids[0], first, GROUP,
            bomb_bytes=self.config.bomb_bytes, max_body_bytes=self.max_body_bytes,
        )  # fmt: skip
        async with httpx.AsyncClient(base_url=self.api, timeout=60.0) as client:
            statuses = await send_bad_requests(client, self.abuser[1], cases)
        self.tally.faults["bad_input"] += len(cases)
        self.tally.bad_statuses.update(statuses)
        log(f"bad input: {len(cases)} requests, answers {dict(sorted(statuses.items()))}")
        await self.abuse()

    async def abuse(self) -> None:
        """Huge query strings and bodies, then guessed keys until the throttle says 429."""
        statuses: Counter[int] = Counter()
        requests = abuse_requests(self.prepared.range_ids[0])
        for request in requests:
            statuses[await trio.to_thread.run_sync(send_raw, "127.0.0.1", self.port, request)] += 1
        # Guesses ten at a time, as a script would (each refusal past the free
        # ones is slowed), until one is 429: each coordinator process counts
        # its own.
        guesses = 0
        while guesses < BRUTE_FORCE_TRIES and 429 not in statuses:
            answers: list[int] = []
            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    guesses += 1
                    nursery.start_soon(self._guess, guesses, answers)
            statuses.update(answers)
        if 429 not in statuses:
            self.tally.never_throttled += 1
        self.tally.faults["abuse"] += len(requests) + guesses
        self.tally.bad_statuses.update(statuses)
        log(f"abuse: {guesses} guessed keys, answers {dict(sorted(statuses.items()))}")


async def _probe(client: httpx.AsyncClient) -> int:
    # A well-formed token nobody has: the coordinator must ask the database.
    try:
        response = await client.post("lease", headers={"Authorization": f"Bearer {UNKNOWN_TOKEN}"})
    except httpx.TransportError:
        return 0
    return response.status_code


def retry_rank(kind: str) -> int:
    """Where a kind tried again goes (`Run._again`): those that need an edge holding
    a range first, then those that need a batch post (the named kills), then
    build_kill9 (keys pending after a stored batch)."""
    return 2 if kind in BUILD_KINDS else int(kind in NAMED_KILLS.values())


def _uidx_argv() -> list[str]:
    return [sys.executable, "-m", "usenet_indexer"]


def _replaced(workers: Set[int], before: Set[int], victim: int) -> bool:
    """Whether the supervisor has as many workers as before, the victim not among them."""
    return victim not in workers and len(workers) >= len(before)


# Shard locks are session advisory locks (4, shard): store/catalog.py's _LOCK_CLASS.
_BUILD_STATE = """
    SELECT (SELECT count(*) FROM catalog_pending),
           (SELECT count(*) FROM pg_locks
            WHERE locktype = 'advisory' AND classid = 4 AND objsubid = 2 AND granted)
"""


_OPEN_JOB = """
    SELECT id, node_id FROM build_jobs WHERE expires_at > now() ORDER BY id DESC LIMIT 1
"""


def _until_a_job(url: str, within: float) -> tuple[int, int] | None:
    """Wait until an edge has a catalog build job open: (its id, its node); None after
    `within` s. Sync, for a worker thread."""
    return _poll(url, within, _OPEN_JOB, lambda row, _: (int(str(row[0])), int(str(row[1]))))


def _until_building(url: str, within: float, prefer: float) -> tuple[int, int] | None:
    """Wait until a build holds shard locks (or, after `prefer` s, keys are pending):
    (pending keys, shard locks held) then; None after `within` s. Sync, for a worker
    thread."""

    def building(row: tuple[object, ...], waited: float) -> tuple[int, int] | None:
        pending, locks = int(str(row[0])), int(str(row[1]))
        return (pending, locks) if locks or (pending and waited > prefer) else None

    return _poll(url, within, _BUILD_STATE, building)


def _poll(
    url: str,
    within: float,
    query: str,
    answer: Callable[[tuple[object, ...], float], _T | None],
) -> _T | None:
    """Ask `query` every BUILD_POLL_SECONDS until `answer` (of its row and the seconds
    waited) is not None; None after `within` s. On one connection (a new one after an
    error)."""
    began = time.monotonic()
    conn: psycopg.Connection[tuple[object, ...]] | None = None
    try:
        while (waited := time.monotonic() - began) < within:
            try:
                conn = conn or psycopg.connect(url, autocommit=True, connect_timeout=2)
                row = conn.execute(query).fetchone()
            except psycopg.Error:
                if conn is not None:
                    conn.close()
                conn, row = None, None
            if row is not None and (found := answer(row, waited)) is not None:
                return found
            time.sleep(BUILD_POLL_SECONDS)
        return None
    finally:
        if conn is not None:
            conn.close()


def _rows_of(url: str, range_id: int, epoch: int, node_id: int) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM batches WHERE range_id = %s AND epoch = %s AND node_id = %s",
            (range_id, epoch, node_id),
        ).fetchone()
    return int(str(row[0])) if row is not None else 0


# --- the runs ---------------------------------------------------------------------------


async def chaos_run(run: Run) -> bool:
    """The chaos run (see the module docstring); whether every range got done."""
    config = run.config
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(_interrupt_on_sigterm)
            await nursery.start(run.monitor.run)
            await run.start_coordinator()
            proxy = partial(serve_proxy, ("127.0.0.1", run.port), run.dropper, run.ambush)
            run.proxy_port = await nursery.start(proxy)
            await run.lease_burst()
            run.burst_done.set()
            nursery.start_soon(run.feed)
            nursery.start_soon(_watch_edges, run)
            await run.inject()
            done = await run.monitor.until(run.all_done, config.deadline_seconds)
            run.tally.faults["reply_lost"] = run.dropper.dropped
            await run.stop_everything()
            nursery.cancel_scope.cancel()
    finally:
        await run.kill_everything()
    return done is not None


class Interrupted(Exception):
    """SIGTERM: the run stops, its processes are killed, its cluster stopped."""


def interrupt(signum: int, frame: object) -> None:
    """The SIGTERM handler outside trio.run: raise Interrupted where the script is."""
    raise Interrupted(signal.Signals(signum).name)


async def _interrupt_on_sigterm(*, task_status: trio.TaskStatus[None]) -> None:
    # Inside trio.run a handler must not raise (trio's loop would be cut
    # short, and the children left running): the signal is received here.
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            raise Interrupted(signal.Signals(signum).name)


async def _watch_edges(run: Run) -> None:
    # Edges must carry on through every fault: one that exits by itself is counted.
    while not run.stopping:
        for edge in run.edges:
            process = edge.child.process
            if process is not None and process.returncode not in (None, -9):
                run.tally.edges_exited += 1
                log(f"{edge.child.name} exited with {process.returncode}; started again")
                await edge.child.start()
        await trio.sleep(0.5)


async def control_run(run: Run) -> bool:
    """One edge behind the reply-losing proxy, the whole spool there; every range done."""
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(_interrupt_on_sigterm)
            await nursery.start(run.monitor.run)
            await run.start_coordinator()
            proxy = partial(serve_proxy, ("127.0.0.1", run.port), run.dropper)
            run.proxy_port = await nursery.start(proxy)
            run.edges = [run.edge(0)]
            await run.edges[0].child.start()
            done = await run.monitor.until(run.all_done, run.config.control_deadline_seconds)
            await run.stop_everything()
            nursery.cancel_scope.cancel()
    finally:
        await run.kill_everything()
    return done is not None


@attrs.frozen
class Outcome:
    """A run's figures, from the database and the coordinator's log."""

    catalog: checks.CatalogCheck
    chains: checks.ChainCheck
    rows_after_409: int
    conflicts_409: int
    already_stored: int
    log_problems: LogProblems
    grant_violations: int
    same_node_regrants: int
    stopped_edges_409: int
    truth_stored: int
    rebuild: checks.RebuildCheck | None = None


def conclude(
    run: Run,
    expected: Set[str],
    samples: Sequence[Sequence[RangeRow]],
    truth: Set[str],
    *,
    rebuild: bool = False,
) -> Outcome:
    """Read what the run left in the database and its log; draw the conclusions.

    With `rebuild`, also hold the catalog the builders followed to a whole
    rebuild (`followed_and_rebuilt`); its processes must be stopped by then.
    """
    rebuilt = followed_and_rebuilt(run) if rebuild else None
    with open_pool(run.prepared.url, Settings(home=run.home), max_size=2) as pool:
        stored = list(checks.chunk_message_ids(CatalogStore(pool).chunks()))
        with pool.connection() as conn:
            rows = [
                BatchRow(*(int(str(v)) for v in row))
                for row in conn.execute(
                    "SELECT range_id, batch_first, batch_next, epoch, node_id FROM batches"
                ).fetchall()
            ]
            ranges = {
                int(str(r[0])): (int(str(r[1])), int(str(r[2])))
                for r in conn.execute("SELECT id, first_article, last_article FROM ranges")
            }
    catalog = checks.check_catalog(expected, stored)
    truth_stored = len(truth & set(stored))
    chains = checks.check_chains(rows, ranges)
    later = 0
    for range_id, epoch, node_id, before in run.tally.stale:
        later += _rows_of(run.prepared.url, range_id, epoch, node_id) - before
    figures = read_log(run.coordinator.log)
    abuser = run.abuser[0]
    grants = figures.grants
    regrants = sum(
        1
        for (node, range_id, _), (next_node, next_range, _) in _pairs_by_range(grants)
        if node == next_node and range_id == next_range
    )
    return Outcome(
        catalog=catalog,
        chains=chains,
        rows_after_409=later + chains.stale_rows,
        conflicts_409=sum(n for node, n in figures.conflicts.items() if node != abuser),
        already_stored=figures.already_stored,
        log_problems=file_problems(run.coordinator.log),
        grant_violations=checks.grant_violations((r, e) for _, r, e in grants)
        + checks.holder_violations(samples),
        same_node_regrants=regrants,
        stopped_edges_409=sum(figures.conflicts[node] for node in run.tally.stopped_nodes),
        truth_stored=truth_stored,
        rebuild=rebuilt,
    )


# The catalog's columns a user sees (and the sources they were made from), by guid.
_CATALOG_ROWS = """
    SELECT guid, name, size, files, poster, groups, posted, completion, sources FROM catalog
"""


def followed_and_rebuilt(run: Run) -> checks.RebuildCheck:
    """The catalog the builders followed (what is still pending built first) against
    a whole rebuild of the same fragments (`CatalogBuild.everything`)."""
    # A build holds its shard locks on one connection while it reads and writes on others.
    with open_pool(run.prepared.url, Settings(home=run.home), max_size=4) as pool:
        build = CatalogBuild(pool)
        _drain(build)
        followed = _catalog_rows(pool)
        build.everything(quiet_seconds=0)
        rebuilt = _catalog_rows(pool)
    found = checks.check_rebuild(followed, rebuilt)
    log(
        f"{run.name}: catalog followed vs rebuilt: {found.rows} rows; {found.missing} missing, "
        f"{found.extra} extra, {found.changed} changed {list(found.sample)}"
    )
    return found


def _drain(build: CatalogBuild) -> None:
    # A shard may still be locked by the backend of a coordinator killed last
    # (it ends once it sees its client gone): tried again until none is.
    # The jobs of edges that were killed would hold their shards until they expire.
    build.abandon_jobs()
    deadline = time.monotonic() + DRAIN_SECONDS
    while build.drain(quiet_seconds=0).busy and time.monotonic() < deadline:
        time.sleep(0.2)


def _catalog_rows(pool: ConnectionPool) -> dict[str, tuple[object, ...]]:
    with pool.connection() as conn:
        return {str(row[0]): tuple(row[1:]) for row in conn.execute(_CATALOG_ROWS).fetchall()}


def _pairs_by_range(
    grants: Sequence[tuple[int, int, int]],
) -> Iterator[tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """Consecutive grants of each range."""
    last: dict[int, tuple[int, int, int]] = {}
    for grant in grants:
        if grant[1] in last:
            yield last[grant[1]], grant
        last[grant[1]] = grant


# --- the whole invocation -----------------------------------------------------------------
