"""The side runs of scripts/chaos: the prefetch part, the clock run, and the run on
several machines (chaos_several: its own INN2 and object store).

They need neither the chaos run's processes nor its faults, and they would
not survive its PostgreSQL restarts (nor should their figures mix with its
own): they run on a durable cluster of their own, started in a thread,
concurrently with the chaos run once its edges run (it waits most of the
time then, for leases to pass and processes to start), so that they add
little to its length.
"""

from __future__ import annotations

import contextlib
import random
from functools import partial
from pathlib import Path

import attrs
import psycopg
import trio

from chaos.clock import ClockFigures, clock_run
from chaos.prefetch import NoNewsServer, PrefetchOutcome, prefetch_part
from chaos.prepare import (
    GROUP,
    Part,
    Prepared,
    create_database,
    expected_message_ids,
)
from chaos.procs import log
from chaos.proxy import ReplyDropper
from chaos.run import ChaosConfig, Outcome, Run, chaos_run, conclude
from chaos.several import (
    NoObjectStore,
    SeveralOutcome,
    describe,
    posted_group,
    several_machines,
)
from usenet_indexer.config import Settings
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.migrate import migrate
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.testing.objectstore import running_object_store
from usenet_indexer.testing.postgres import scratch_dir

CLOCK = "clock"
SEVERAL = "several"


@attrs.define(eq=False)
class SideRuns:
    """The prefetch part and the clock run, and what they found.

    Attributes:
        config: the invocation's config (its `prefetch` and seed).
        folder: where their folders go.
        part: the clock run's one range.
        truth: the generator's message-ids (the clock run's catalog figures).
        library: libfaketime (None: the clock run cannot run).
        prefetch: the prefetch part's outcome (None: it did not run).
        not_run: why a side run did not run, by its name.
        clock: the clock run's figures.
        clock_outcome: the clock run's catalog checked.
        several: the run on several machines (None: it did not run).
    """

    config: ChaosConfig
    folder: Path
    part: Part
    truth: frozenset[str]
    library: Path | None
    prefetch: PrefetchOutcome | None = None
    not_run: dict[str, str] = attrs.field(factory=dict)
    clock: ClockFigures | None = None
    clock_outcome: Outcome | None = None
    several: SeveralOutcome | None = None
    cluster: Cluster = attrs.field(init=False)

    async def run(self, after: trio.Event) -> None:
        """Both runs at once, once `after` is set (they compete for the CPU)."""
        await after.wait()
        with scratch_dir() as folder:
            self.cluster = Cluster(folder / "postgres", durable=True)
            try:
                await trio.to_thread.run_sync(self.cluster.start)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._prefetch)
                    nursery.start_soon(self._several)
                    if self.library is None:
                        self.not_run[CLOCK] = "libfaketime is not here and cannot be installed"
                    else:
                        nursery.start_soon(self._clock, self.library)
            finally:
                with trio.CancelScope(shield=True):
                    stop = partial(self.cluster.stop, mode="immediate")
                    await trio.to_thread.run_sync(stop)

    async def _prefetch(self) -> None:
        prefetch = self.config.prefetch
        log(f"prefetch part: {prefetch.articles:,} articles on INN2, {prefetch.kills} kills")
        try:
            self.prefetch = await prefetch_part(
                self.folder / "prefetch", self.cluster, prefetch, self.config.seed
            )
        except NoNewsServer as error:
            self.not_run["prefetch"] = f"INN2 cannot run here: {error}"
            return
        found = self.prefetch.spool
        log(
            f"prefetch part: {found.chunks} chunks, {found.lines:,} lines in "
            f"{self.prefetch.seconds:.1f} s; holes {found.coverage.holes}, overlaps "
            f"{found.coverage.overlaps}, bad lines {found.bad_lines}"
        )

    async def _several(self) -> None:
        config = self.config.several
        log(
            f"several machines: {config.articles:,} articles on INN2, an S3 spool, "
            f"{config.prefetchers} prefetchers, {config.coordinator_processes} coordinator "
            "processes; the store, a prefetcher and a coordinator process killed"
        )
        await trio.to_thread.run_sync(create_database, self.cluster.url("postgres"), SEVERAL)
        with contextlib.ExitStack() as stack:
            try:
                posted = await trio.to_thread.run_sync(
                    stack.enter_context, posted_group(config.articles, config.seed)
                )
                store = await trio.to_thread.run_sync(stack.enter_context, running_object_store())
            except NoNewsServer as error:
                self.not_run[SEVERAL] = f"INN2 cannot run here: {error}"
                return
            except NoObjectStore as error:
                self.not_run[SEVERAL] = f"SeaweedFS cannot run here: {error}"
                return
            try:
                self.several = await several_machines(
                    self.folder / SEVERAL, self.cluster.url(SEVERAL), posted, config,
                    store=store, faults=True,
                )  # fmt: skip
            finally:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(stack.close)
        log(f"several machines: {describe(self.several)}")

    async def _clock(self, library: Path) -> None:
        run = await trio.to_thread.run_sync(self._prepare_clock_run)
        log("clock run: a slow edge leases, an edge two hours ahead takes over")
        self.clock = await clock_run(run, library)
        expected = await trio.to_thread.run_sync(
            expected_message_ids, [self.part], self.config.chunk_articles
        )
        self.clock_outcome = await trio.to_thread.run_sync(
            conclude, run, frozenset(expected), [], self.truth
        )
        found = self.clock
        log(
            f"clock run: slow edge 409s {found.slow_409}, rows {found.slow_rows}; "
            f"offset edge rows {found.offset_rows}; lost {self.clock_outcome.catalog.lost}, "
            f"doubled {self.clock_outcome.catalog.doubled}"
        )

    def _prepare_clock_run(self) -> Run:
        folder = self.folder / CLOCK
        (folder / "home").mkdir(parents=True)
        create_database(self.cluster.url("postgres"), CLOCK)
        prepared = _prepare_clock_database(self.cluster.url(CLOCK), folder / "home", self.part)
        # A dropper that drops nothing: the clock run has no proxy.
        never = ReplyDropper(every=1, limit=0)
        rng = random.Random(self.config.seed)
        return Run(
            CLOCK, self.config, folder, self.cluster, [self.part], prepared, True, rng, never
        )


def _prepare_clock_database(url: str, home: Path, part: Part) -> Prepared:
    """The clock run's database, made in this process (`prepare_database` runs a
    `uidx` command to migrate: a start-up the busy chaos run would pay for).

    Three nodes: the slow edge, the offset edge, and one nobody uses (Run.abuser).
    """
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    with open_pool(url, Settings(home=home), max_size=1) as pool:
        group_id = GroupStore(pool).add(GROUP)
        range_ids = RangeStore(pool).plan(
            group_id, part.first, part.last, part.last - part.first + 1
        )
        nodes = NodeStore(pool)
        tokens = tuple(nodes.create(f"clock-{i}") for i in range(3))
        node_ids = tuple(nodes.authenticate(token) for token in tokens)
    return Prepared(url, tokens, tuple(n for n in node_ids if n is not None), tuple(range_ids))


async def alongside(side: SideRuns, main: Run) -> bool:
    """The chaos run and the side runs at once; whether the chaos run finished its ranges."""
    async with trio.open_nursery() as nursery:
        # After the chaos run's burst: its start-up is its busiest moment.
        nursery.start_soon(side.run, main.burst_done)
        finished: bool = await chaos_run(main)
    return finished
