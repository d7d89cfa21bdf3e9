"""The spool-prefetcher process: NNTP connections filling the coordinator's spool.

Theory of operation
-------------------
Every connection takes the next missing chunk from one `Scheduler` (leased
ranges first, then planned ranges in plan order; see plan.py), selects the
chunk's group (GROUP also refreshes the server's low and high water marks),
and reads the chunk as pipelined OVER slices, as blocks of text. Once all
of a chunk's slices are sent, the scheduler's next chunk joins the same
pipeline when it is of the selected group and within what GROUP said a
moment ago, so the server never waits between chunks. Each slice is
compressed beside the reading of the next (in a worker thread; isal
releases the GIL) into the chunk's temporary file;
when the last slice is in, the file is fsynced and renamed and its index row
written, in one thread call, so a cancelled or killed prefetcher leaves no
chunk half-written and no row naming a file that is not whole. A chunk the
server has no article of is recorded as a gap.

A connection opens when there is work and closes (QUIT) when there is none.
Errors are normal: a dropped or stalled connection gives its chunk back and
retries after a pause that grows (1 s to 60 s); 400/502 ("too many
connections") lowers the server's pool by one; a group the server does not
carry goes to the next server of the settings.

A housekeeping task reports each server's figures (for `uidx status`) and
sweeps the chunks that no stream will read again (below their range's
resume point), deleting their files after their rows.

Several prefetcher processes would fetch the same chunks (the index keeps
one); run one per coordinator.
"""

from __future__ import annotations

import logging
import math
import signal
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import attrs
import psycopg
import trio
from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.errors import ConfigError, DatabaseError, sole_error
from usenet_indexer.nntp.client import NNTPClient, OverviewText, Slice, StreamFactory, connect
from usenet_indexer.nntp.errors import NNTPError, NoSuchGroup, RemoteProtocolError, Unavailable
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.spool.files import ChunkWriter, remove_temporary_files
from usenet_indexer.spool.plan import ChunkJob, clip, slices, work_list
from usenet_indexer.store.database import migrate_url
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.pgcluster import database_url
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.servers import ServerReport, ServerStore
from usenet_indexer.store.spool import SpoolChunk, SpoolIndex
from usenet_indexer.supervisor.parent import watch_parent
from usenet_indexer.wire.frames import Codec

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Ranges looked at per refresh of the work list (each gives many chunks).
WANTED_RANGES = 32
# How often the servers' figures go to the database, and the sweep runs.
REPORT_SECONDS = 5.0
# A server's pool lowered by 400/502 gets one connection back per this many
# seconds without another refusal.
POOL_RESTORE_SECONDS = 300.0
# Waiting for the coordinator's database at start-up.
DATABASE_WAIT_SECONDS = 2.0
CLOSE_POOL_SECONDS = 10.0


@attrs.frozen
class PrefetchOptions:
    """What the prefetcher needs of the settings."""

    spool_dir: Path
    slice_articles: int = 10_000
    chunk_articles: int = 50_000
    poll_seconds: float = 5.0
    budget_bytes: int = 0
    ca_file: str | None = None
    timeout_seconds: float = 60.0
    # Pauses after failures of a connection in a row: 1, 2, 4 ... 60 s, for ever.
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    report_seconds: float = REPORT_SECONDS

    @classmethod
    def from_settings(cls, settings: Settings) -> PrefetchOptions:
        for key in ("prefetch_slice_articles", "prefetch_chunk_articles"):
            if getattr(settings, key) < 1:
                raise ConfigError(key, "must be at least 1")
        return cls(
            settings.home / "spool",
            settings.prefetch_slice_articles,
            settings.prefetch_chunk_articles,
            settings.prefetch_poll_seconds,
            settings.spool_budget_bytes,
            settings.nntp_ca_file or None,
            settings.nntp_timeout_seconds,
        )


@attrs.frozen
class Landed:
    """A chunk in the spool (path None: a gap), for observers."""

    job: ChunkJob
    server: str
    lines: int
    gap: bool


@attrs.frozen
class Reported:
    """The servers' figures went to the database, and the spool was swept."""

    servers: list[ServerReport]
    swept: int


Observer = Callable[[object], None]


@attrs.define(eq=False)
class Scheduler:
    """The work list shared by all connections: which chunk each takes next."""

    spool: SpoolIndex
    options: PrefetchOptions
    servers: int
    observe: Observer = lambda _event: None
    _queue: list[ChunkJob] = attrs.field(factory=list)
    _refreshed_at: float = -math.inf
    _in_flight: dict[tuple[int, int], ChunkJob] = attrs.field(factory=dict)
    _home: dict[str, int] = attrs.field(factory=dict)
    _not_before: dict[int, float] = attrs.field(factory=dict)
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    async def take(self, server: int) -> ChunkJob | None:
        """The next chunk for a connection of this server, or None when there is none now."""
        async with self._lock:
            stale = trio.current_time() - self._refreshed_at >= self.options.poll_seconds
            job = None if stale else self._pop(server)
            if job is None:
                await self._refresh()
                job = self._pop(server)
            if job is not None:
                self._hand_out(job)
            return job

    def done(self, job: ChunkJob) -> None:
        """The connection is through with the job (landed or not: a failed one is listed again)."""
        self._in_flight.pop(job.key, None)

    def wait_for_articles(self, job: ChunkJob) -> None:
        """The server has none of the job's articles yet: ask about its group again later."""
        self._not_before[job.group_id] = trio.current_time() + self.options.poll_seconds
        self._queue = [j for j in self._queue if j.group_id != job.group_id]

    def not_on_server(self, group: str, server: int) -> None:
        """The server does not carry the group: the next server of the settings gets it."""
        self._home[group] = server + 1
        if server + 1 >= self.servers:
            logger.error("no NNTP server carries %s: its ranges cannot be fetched", group)

    def take_now(self, server: int, fits: Callable[[ChunkJob], bool]) -> ChunkJob | None:
        """The next chunk for this server if it `fits`, from the list as it is; else None.

        No database look: None as well when the list is due for a refresh.
        """
        stale = trio.current_time() - self._refreshed_at >= self.options.poll_seconds
        if stale or self._lock.locked():
            return None
        position = self._find(server)
        if position is None or not fits(self._queue[position]):
            return None
        job = self._queue.pop(position)
        self._hand_out(job)
        return job

    def _hand_out(self, job: ChunkJob) -> None:
        self._in_flight[job.key] = job
        self.observe(job)

    def _pop(self, server: int) -> ChunkJob | None:
        position = self._find(server)
        return None if position is None else self._queue.pop(position)

    def _find(self, server: int) -> int | None:
        now = trio.current_time()
        for position, job in enumerate(self._queue):
            if self._home.get(job.group, 0) != server:
                continue
            if self._not_before.get(job.group_id, -math.inf) > now or job.key in self._in_flight:
                continue
            return position
        return None

    async def _refresh(self) -> None:
        self._refreshed_at = trio.current_time()
        busy = list(self._in_flight.values())
        try:
            queue, over_budget = await trio.to_thread.run_sync(self._work, busy)
        except psycopg.Error as error:
            logger.warning("cannot read the work list from the database: %s", error)
            self._queue = []
            return
        if over_budget:
            queue = [job for job in queue if job.leased]
        self._queue = [job for job in queue if self._home.get(job.group, 0) < self.servers]

    def _work(self, busy: list[ChunkJob]) -> tuple[list[ChunkJob], bool]:
        wanted = self.spool.wanted(WANTED_RANGES)
        jobs = work_list(wanted, self.spool.covered(wanted), self.options.chunk_articles, busy=busy)
        over = bool(self.options.budget_bytes) and self.spool.size()[1] >= self.options.budget_bytes
        return jobs, over


@attrs.define
class _Selected:
    """The group a connection selected last, with what GROUP said, and when."""

    group: str = ""
    low: int = 0
    high: int = 0
    at: float = -math.inf

    def recent(self, group: str, now: float, seconds: float) -> bool:
        """Whether `group` is the one selected, less than `seconds` before `now`."""
        return self.group == group and now - self.at < seconds


@attrs.define(eq=False)
class _Fetching:
    """A chunk whose OVER slices are in a connection's pipeline."""

    job: ChunkJob  # as the scheduler gave it
    clipped: ChunkJob  # cut to the server's articles
    unread: int = 0  # slices not read yet
    writer: ChunkWriter | None = None  # opened with its first lines
    landing: bool = False  # handed to its landing task, which owns it now


class _SliceFeed:
    """The slices of a connection's chunks, in order, as `over_pipelined` pulls them.

    An iterator that can run dry and be added to again: the pipeline takes
    what is there whenever it has room, so a chunk added before the last
    one's slices are all read keeps the server busy across the boundary.
    """

    def __init__(self, slice_articles: int) -> None:
        self._slice_articles = slice_articles
        self._waiting: deque[Slice] = deque()
        self.owner: dict[Slice, _Fetching] = {}

    def add(self, fetching: _Fetching) -> None:
        pieces = slices(fetching.clipped.first, fetching.clipped.last, self._slice_articles)
        fetching.unread = len(pieces)
        self._waiting.extend(pieces)
        self.owner.update(dict.fromkeys(pieces, fetching))

    @property
    def waiting(self) -> int:
        """Slices not sent yet."""
        return len(self._waiting)

    def __iter__(self) -> _SliceFeed:
        return self

    def __next__(self) -> Slice:
        if not self._waiting:
            raise StopIteration
        return self._waiting.popleft()


@attrs.define(eq=False)
class Prefetcher:
    """The connections of every server, the scheduler and the housekeeping."""

    pool: ConnectionPool
    options: PrefetchOptions
    servers: list[ServerState]
    observe: Observer = lambda _event: None
    open_stream: Callable[[int], StreamFactory] | None = None  # tests: a fake server per slot
    _scheduler: Scheduler = attrs.field(init=False)
    _spool: SpoolIndex = attrs.field(init=False)
    _groups: GroupStore = attrs.field(init=False)
    _watermarks: dict[int, tuple[int, int]] = attrs.field(init=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        self._spool = SpoolIndex(self.pool)
        self._groups = GroupStore(self.pool)
        self._scheduler = Scheduler(self._spool, self.options, len(self.servers), self.observe)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetch until cancelled."""
        removed = await trio.to_thread.run_sync(remove_temporary_files, self.options.spool_dir)
        if removed:
            logger.info("removed %d temporary files of a writer that died", removed)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._housekeeping)
            for index, state in enumerate(self.servers):
                for slot in range(state.config.connections):
                    nursery.start_soon(self._connection, index, state, slot)
            task_status.started()

    # -- one connection ---------------------------------------------------------

    async def _connection(self, index: int, state: ServerState, slot: int) -> None:
        failures = 0
        group = ""  # of the chunk being fetched
        # A chunk's last write, fsync, rename and row go on here while the
        # connection already asks for the next chunk (the server is not left idle).
        async with trio.open_nursery() as landing:
            while True:
                if slot >= state.limit:
                    # Lowered by a 400/502: one connection comes back per quiet interval.
                    await trio.sleep(POOL_RESTORE_SECONDS)
                    state.restore_one(trio.current_time(), POOL_RESTORE_SECONDS)
                    continue
                job = await self._scheduler.take(index)
                if job is None:
                    await trio.sleep(self.options.poll_seconds)
                    continue
                try:
                    async with self._connect(state, slot) as client:
                        state.open += 1
                        selected = _Selected()
                        try:
                            while job is not None:
                                current, job = job, None
                                group = current.group
                                # _fetch owns `current` now: it lands, or goes back to the list.
                                await self._fetch(client, selected, state, current, index, landing)
                                # Read after each chunk: a fallback may have switched it off.
                                state.compression = client.compression
                                failures = 0
                                job = await self._scheduler.take(index)
                        finally:
                            state.open -= 1
                except NoSuchGroup as error:
                    logger.warning("%s", error)  # NNTP errors name their server
                    self._scheduler.not_on_server(group, index)
                except Unavailable as error:
                    state.failed(error)
                    failures += 1
                    limit = state.lower_limit(trio.current_time())
                    logger.warning("%s; using at most %d connections", error, limit)
                except (NNTPError, RemoteProtocolError) as error:
                    state.failed(error)
                    failures += 1
                    logger.warning("%s", error)
                except psycopg.Error as error:
                    state.failed(error)
                    failures += 1
                    logger.warning("database: %s", error)
                finally:
                    # Landed or not: a chunk that did not land is listed again.
                    if job is not None:
                        self._scheduler.done(job)
                if failures:
                    await trio.sleep(self.options.retry.delay(failures))

    def _connect(self, state: ServerState, slot: int) -> AbstractAsyncContextManager[NNTPClient]:
        opener = self.open_stream(slot) if self.open_stream is not None else None
        return connect(
            state.config.url,
            ca_file=self.options.ca_file,
            timeout_seconds=self.options.timeout_seconds,
            open_stream=opener,
        )

    async def _fetch(
        self,
        client: NNTPClient,
        selected: _Selected,
        state: ServerState,
        job: ChunkJob,
        index: int,
        landing: trio.Nursery,
    ) -> None:
        """Fetch a chunk, and in the same pipeline the chunks of its group ready behind it.

        Owns `job` and each chunk it chains: a chunk read whole goes to its
        landing task in `landing` (which owns it then); any other goes back
        to the scheduler's list, its temporary file removed.
        """
        chain: list[_Fetching] = []
        try:
            clipped = await self._readable_part(client, selected, state, job)
            if clipped is not None:
                chain.append(_Fetching(job, clipped))
                await self._read_chain(client, selected, state, chain, index, landing)
        finally:
            if not chain:
                self._scheduler.done(job)
            for fetching in chain:
                if not fetching.landing:
                    if fetching.writer is not None:
                        fetching.writer.abort()
                    self._scheduler.done(fetching.job)

    async def _readable_part(
        self, client: NNTPClient, selected: _Selected, state: ServerState, job: ChunkJob
    ) -> ChunkJob | None:
        """The part of `job` the server has; None when there is none to read.

        A job wholly below the server's low water mark lands as a gap here; one
        beyond its high water mark waits for the next look at the group.
        """
        now = trio.current_time()
        if selected.recent(job.group, now, self.options.poll_seconds):
            low, high = selected.low, selected.high  # selected a moment ago: no round trip
        else:
            _count, low, high = await client.group(job.group)
            selected.group, selected.low, selected.high, selected.at = job.group, low, high, now
            await self._note_watermarks(job.group_id, low, high)
        if job.last < low:
            await self._land(job, state, None)
            return None
        clipped = clip(job, low, high)
        if clipped is None:
            self._scheduler.wait_for_articles(job)
        return clipped

    async def _read_chain(
        self,
        client: NNTPClient,
        selected: _Selected,
        state: ServerState,
        chain: list[_Fetching],
        index: int,
        landing: trio.Nursery,
    ) -> None:
        """Read the chain's chunks as one OVER pipeline, adding chunks while it runs.

        Once every slice of the chain is sent, the scheduler's next chunk for
        this server joins it if it is of the selected group and wholly within
        what GROUP said a moment ago (no round trip): the server then never
        waits for the next command between two chunks.

        A slice is compressed and written (in a thread, by `_write_chunks`)
        while the next is read: the socket is read all the time, so the
        server never waits on a full socket buffer. At most one slice waits.
        """
        feed = _SliceFeed(self.options.slice_articles)
        feed.add(chain[0])
        xover = not client.capabilities.has("OVER")
        to_write, written = trio.open_memory_channel[tuple[_Fetching, OverviewText | None]](1)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_chunks, state, written, landing)
                async with to_write:
                    async for piece, text in client.over_text_pipelined(feed, xover=xover):
                        fetching = feed.owner.pop(piece)
                        if text.lines:
                            await to_write.send((fetching, text))
                            state.lines += text.lines
                        fetching.unread -= 1
                        if not fetching.unread:
                            await to_write.send((fetching, None))  # read whole: land it
                        # Once all is sent, while replies are still to come (after the
                        # last one the pipeline ends: a chunk added then would not be read).
                        if not feed.waiting and any(f.unread for f in chain):
                            following = self._following(index, selected)
                            if following is not None:
                                # The landed ones are their landing tasks' now: keep the rest.
                                chain[:] = [f for f in chain if not f.landing]
                                chain.append(_Fetching(following, following))
                                feed.add(chain[-1])
        except BaseExceptionGroup as group:
            # Reading or writing failed (one at a time): raise it as itself.
            raise sole_error(group) from None

    def _following(self, index: int, selected: _Selected) -> ChunkJob | None:
        now = trio.current_time()

        def fits(job: ChunkJob) -> bool:
            return (
                selected.recent(job.group, now, self.options.poll_seconds)
                and selected.low <= job.first <= job.last <= selected.high
            )

        return self._scheduler.take_now(index, fits)

    async def _write_chunks(
        self,
        state: ServerState,
        items: trio.MemoryReceiveChannel[tuple[_Fetching, OverviewText | None]],
        landing: trio.Nursery,
    ) -> None:
        """Write each chunk's lines as they come; a chunk read whole (None) goes to its landing."""
        async with items:
            async for fetching, text in items:
                if text is None:
                    fetching.landing = True
                    landing.start_soon(
                        self._land_later, fetching.job, fetching.clipped, state, fetching.writer
                    )
                    continue
                if fetching.writer is None:
                    part = fetching.clipped
                    fetching.writer = await trio.to_thread.run_sync(
                        ChunkWriter.open, self.options.spool_dir, part.group, part.first, part.last
                    )
                await trio.to_thread.run_sync(fetching.writer.write, text.blocks, text.lines)

    async def _land_later(
        self, job: ChunkJob, clipped: ChunkJob, state: ServerState, writer: ChunkWriter | None
    ) -> None:
        try:
            await self._land(clipped, state, writer)
        except psycopg.Error as error:
            state.failed(error)
            logger.warning("%s %d-%d: not indexed: %s", job.group, job.first, job.last, error)
        finally:
            if writer is not None:
                writer.abort()
            self._scheduler.done(job)  # landed or not: a chunk that did not land is listed again

    async def _land(self, job: ChunkJob, state: ServerState, writer: ChunkWriter | None) -> None:
        # One thread call: a cancellation cannot come between the rename and the row.
        lines = await trio.to_thread.run_sync(self._store, job, writer)
        state.chunks += 1
        self.observe(Landed(job, state.config.server, lines, gap=lines == 0))

    def _store(self, job: ChunkJob, writer: ChunkWriter | None) -> int:
        if writer is None or writer.lines == 0:
            chunk = SpoolChunk(job.first, job.last, int(Codec.NONE), None, 0)
            self._spool.add_new(job.group_id, chunk, 0)
            logger.info(
                "%s %d-%d: no articles on the server (a gap)", job.group, job.first, job.last
            )
            return 0
        path, size, codec = writer.commit()
        chunk = SpoolChunk(job.first, job.last, int(codec), str(path), writer.lines)
        if not self._spool.add_new(job.group_id, chunk, size):
            logger.warning("%s %d-%d: indexed by another writer", job.group, job.first, job.last)
        logger.info(
            "%s %d-%d: %d lines, %.1f MB", job.group, job.first, job.last, writer.lines, size / 1e6
        )
        return writer.lines

    async def _note_watermarks(self, group_id: int, low: int, high: int) -> None:
        if self._watermarks.get(group_id) != (low, high):
            self._watermarks[group_id] = (low, high)
            await trio.to_thread.run_sync(self._groups.set_watermarks, group_id, low, high)

    # -- housekeeping -----------------------------------------------------------

    async def _housekeeping(self) -> None:
        last = trio.current_time()
        try:
            while True:
                await trio.sleep(self.options.report_seconds)
                last = await self._report_and_sweep(last)
        finally:
            # The last figures and sweep when stopped (shielded, time-limited).
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_POOL_SECONDS):
                await self._report_and_sweep(last)

    async def _report_and_sweep(self, last: float) -> float:
        now = trio.current_time()
        reports = [state.report(now - last) for state in self.servers]
        try:
            await trio.to_thread.run_sync(ServerStore(self.pool).report, reports)
            swept = await trio.to_thread.run_sync(sweep_spool, self._spool, self.options.spool_dir)
        except psycopg.Error as error:
            logger.warning("housekeeping: database unavailable: %s", error)
            return now
        if swept:
            logger.info("removed %d spool chunks below their ranges' resume points", swept)
        self.observe(Reported(reports, swept))
        return now


def sweep_spool(spool: SpoolIndex, spool_dir: Path) -> int:
    """Remove the chunks no stream will read again: rows first, then files; returns how many."""
    rows = spool.sweep()
    for path, _size in rows:
        if path is not None:
            (spool_dir / path).unlink(missing_ok=True)
    return len(rows)


async def run_prefetcher(settings: Settings, *, parent_fd: int | None = None) -> None:
    """`uidx prefetch`: wait for the coordinator's database, then fetch until stopped.

    Stops on SIGINT or SIGTERM, or when the supervisor dies (`parent_fd`).

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
                options.spool_dir,
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
