"""The spool-prefetcher process: the wiring of its parts, signals, the database wait.

Theory of operation
-------------------
`uidx prefetch` waits for the coordinator's database (the coordinator starts
the embedded cluster and migrates), then runs a `Prefetcher`: per server of
the settings, `connections` tasks (connection.py), each taking its next chunk
from the one work list (work.py over the pure scheduler.py) and landing what
it read (landing.py), beside one housekeeping task (housekeeping.py: the
servers' figures, the sweep of the spool). SIGINT, SIGTERM, SIGHUP or the
death of the supervisor stop it; chunks in flight are abandoned, never
half-written.

Several prefetchers (on one machine or many, each with its own servers)
share the work through PostgreSQL: each lists and claims only the first
few chunks of the work list that no other prefetcher's live claim overlaps
(work.py, store/spool.py's `claim`, under a per-group advisory lock), so no
chunk is fetched twice and none is skipped; a group none of its servers
carries is left to the others, and so is everything while none of its servers
takes its login or a connection (it claims nothing then; its connections try
their servers again, with growing pauses, until one answers); one that stops
cleanly gives its claims back once its connections have stopped; a killed
prefetcher's claims lapse after CLAIM_SECONDS and its chunks are listed
again. Probes are shared the same
way through the probe queue's leases (store/probes.py).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Callable, Iterator

import attrs
import psycopg
import trio
from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings
from usenet_indexer.core.health import Observed, State
from usenet_indexer.errors import DatabaseError
from usenet_indexer.nntp.client import StreamFactory
from usenet_indexer.prefetch.connection import Connection, Watermarks
from usenet_indexer.prefetch.events import Landed, Observer, ignore
from usenet_indexer.prefetch.follower import Follower
from usenet_indexer.prefetch.housekeeping import Housekeeping
from usenet_indexer.prefetch.landing import Landing
from usenet_indexer.prefetch.options import PrefetchOptions
from usenet_indexer.prefetch.prober import Prober
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.prefetch.work import CLAIM_SECONDS, CLAIMS_PER_CONNECTION, SharedWork
from usenet_indexer.store.database import migrate_url
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.heartbeat import this_process
from usenet_indexer.store.pgcluster import database_url
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.probes import ProbeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.spool import SpoolIndex
from usenet_indexer.supervisor.arbiter import STOP_SIGNALS
from usenet_indexer.supervisor.parent import watch_parent

# Landed and PrefetchOptions also from here, where they were before prefetch/ was split.
__all__ = ["Landed", "PrefetchOptions", "Prefetcher", "run_prefetcher"]

logger = logging.getLogger(__name__)

# Waiting for the coordinator's database at start-up.
DATABASE_WAIT_SECONDS = 2.0
CLOSE_POOL_SECONDS = 10.0
# Giving the claims back when stopped.
RELEASE_SECONDS = 5.0


@attrs.define(eq=False)
class Prefetcher:
    """The connections of every server, the scheduler and the housekeeping."""

    pool: ConnectionPool
    options: PrefetchOptions
    servers: list[ServerState]
    observe: Observer = ignore
    open_stream: Callable[[int], StreamFactory] | None = None  # tests: a fake server per slot
    # Its name among prefetchers ("host:pid"): its claims on chunks, its health rows.
    name: str = attrs.field(factory=this_process)
    _work: SharedWork = attrs.field(init=False)
    _landing: Landing = attrs.field(init=False)
    _watermarks: Watermarks = attrs.field(init=False)
    _housekeeping: Housekeeping = attrs.field(init=False)
    _follower: Follower = attrs.field(init=False)
    _prober: Prober = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        spool = SpoolIndex(self.pool)
        connections = sum(state.config.connections for state in self.servers)
        self._work = SharedWork(
            spool,
            self.options,
            len(self.servers),
            self.observe,
            claimant=self.name,
            claim_limit=CLAIMS_PER_CONNECTION * connections,
            answering=lambda: any(state.answering for state in self.servers),
        )
        self._landing = Landing(spool, self._work, self.observe)
        self._watermarks = Watermarks(GroupStore(self.pool))
        self._housekeeping = Housekeeping(
            self.pool, self.options, self.servers, spool, self.observe, self._health, self.name
        )
        self._follower = Follower(
            GroupStore(self.pool),
            RangeStore(self.pool),
            [state.config.url for state in self.servers],
            self.options.follow,
            on_planned=self._work.announce,
            ca_file=self.options.ca_file,
            timeout_seconds=self.options.timeout_seconds,
        )
        self._prober = Prober(
            ProbeStore(self.pool),
            self.servers,
            self.options.probe,
            header_idle=self._work.header_idle,
            ca_file=self.options.ca_file,
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetch until cancelled."""
        await trio.to_thread.run_sync(self.options.spool.check)
        removed = await trio.to_thread.run_sync(self.options.spool.remove_leftovers)
        if removed:
            logger.info("removed %d temporary files of a writer that died", removed)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._housekeeping.run)
                nursery.start_soon(self._follower.run)
                if self.options.probe.share > 0:
                    nursery.start_soon(self._prober.run)
                for connection in self._connections():
                    nursery.start_soon(connection.run)
                task_status.started()
        finally:
            # Every connection has stopped (a claim in flight in a worker thread is
            # done): its chunks go to the other prefetchers at once, not after
            # CLAIM_SECONDS. Shielded, and time-limited of its own.
            with trio.CancelScope(shield=True), trio.move_on_after(RELEASE_SECONDS):
                try:
                    await trio.to_thread.run_sync(
                        self._work.spool.release_claims, self.name, abandon_on_cancel=True
                    )
                except psycopg.Error as error:
                    logger.warning(
                        "claims not given back (they lapse in %.0f s): %s", CLAIM_SECONDS, error
                    )

    def _health(self) -> list[Observed]:
        """What this prefetcher sees: its servers, the groups none of them carries and
        those one of them carries, its spool (core/health.py)."""
        spool = self._landing.failing
        where = self.options.spool.describe()
        # The follower's (a followed group's GROUP) and the connections' (a chunk's), of
        # the groups still enabled (one disabled since is neither fetched nor reported).
        enabled = self._follower.followed
        seen = {
            g: why for g, why in self._work.uncarried.items() if enabled is None or g in enabled
        }
        uncarried = {**self._follower.uncarried, **seen}
        # Said too: another prefetcher's "not carried" is no alarm while this one
        # fetches the group (each has servers of its own).
        fetched = self._work.carried if enabled is None else self._work.carried & enabled
        carried = sorted((self._follower.carried | fetched) - uncarried.keys())
        return [
            *(state.observed() for state in self.servers),
            *(Observed("group", g, State.NOT_CARRIED, why) for g, why in uncarried.items()),
            *(Observed("group", g, State.OK) for g in carried),
            Observed(
                "spool", where, State.OK if spool is None else State.WRITES_FAILING, spool or ""
            ),
        ]

    def _connections(self) -> Iterator[Connection]:
        for index, state in enumerate(self.servers):
            for slot in range(state.config.connections):
                yield Connection(
                    self._work,
                    self._landing,
                    self._watermarks,
                    self.options,
                    state,
                    index,
                    slot,
                    self.open_stream,
                )


async def run_prefetcher(settings: Settings, *, parent_fd: int | None = None) -> None:
    """`uidx prefetch`: wait for the coordinator's database, then fetch until stopped.

    Stops on SIGINT, SIGTERM or SIGHUP, or when the supervisor dies (`parent_fd`).

    Raises:
        ConfigError: no NNTP server, a bad URL or setting.
    """
    options = PrefetchOptions.from_settings(settings)
    configs = server_configs(settings.nntp, settings.nntp_connections)
    servers = [ServerState.of(config) for config in configs]
    url, cluster = database_url(settings.database_url, settings.home)
    stop = trio.Event()
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_fetch, url, cluster is not None, settings, options, servers)
            nursery.start_soon(_on_signals, signals, stop)
            if parent_fd is not None:
                await nursery.start(watch_parent, parent_fd, stop.set)
            logger.info(
                "prefetching from %s into %s",
                ", ".join(f"{c.server} ({c.connections} connections)" for c in configs),
                options.spool.describe(),
            )
            await stop.wait()
            nursery.cancel_scope.cancel()


async def _fetch(
    url: str,
    embedded: bool,
    settings: Settings,
    options: PrefetchOptions,
    servers: list[ServerState],
) -> None:
    await _wait_for_database(url, embedded)
    pool = await trio.to_thread.run_sync(open_pool, url, settings)
    try:
        await Prefetcher(pool, options, servers).run()
    finally:
        with trio.move_on_after(CLOSE_POOL_SECONDS, shield=True):
            await trio.to_thread.run_sync(pool.close)


async def _on_signals(signals: AsyncIterator[int], stop: trio.Event) -> None:
    async for signum in signals:
        logger.info("%s: stopping; chunks in flight are abandoned", signal.Signals(signum).name)
        stop.set()


async def _wait_for_database(url: str, embedded: bool) -> None:
    # The coordinator starts the embedded cluster and migrates; the
    # prefetcher may come up first (uidx standalone, systemd ordering).
    said = False
    while True:
        try:
            await trio.to_thread.run_sync(migrate_url, url)
            return
        except DatabaseError as error:
            if not said:
                where = (
                    "the embedded PostgreSQL (the coordinator starts it)"
                    if embedded
                    else "DATABASE_URL"
                )
                logger.warning("waiting for %s: %s", where, error)
                said = True
        await trio.sleep(DATABASE_WAIT_SECONDS)
