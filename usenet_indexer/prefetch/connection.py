"""One NNTP connection of the prefetcher: connect, GROUP, the chained OVER pipeline.

Theory of operation
-------------------
Every connection takes the next missing chunk from the one scheduler
(leased ranges first, then planned ranges in plan order; see
spool/plan.py), selects the chunk's group (GROUP also refreshes the
server's low and high water marks), and reads the chunk as pipelined OVER
slices, as blocks of text. Once all of a chunk's slices are sent, the
scheduler's next chunk joins the same pipeline when it is of the selected
group and within what GROUP said a moment ago, so the server never waits
between chunks. Each slice is compressed beside the reading of the next (in
a worker thread; isal releases the GIL) into the chunk's temporary file;
a chunk read whole goes to its landing (landing.py). A chunk the server has
no article of is recorded as a gap.

A connection opens when there is work and closes (QUIT) when there is none.
Errors are normal: a dropped or stalled connection gives its chunk back and
retries after a pause that grows (1 s to 60 s); 400/502 ("too many
connections") lowers the server's pool by one; a group the server does not
carry goes to the next server of the settings. While chunks do not land
(the spool store refuses them, or the database their index rows: the
landing's `refusals` in a row), a connection that read
a chunk chains no next one and pauses the same way, for that count, before
it takes one: a refused chunk is listed again, and was otherwise fetched
again and again at full speed. While no server of the prefetcher takes its
login or a connection it claims no chunk (work.py), and a connection with no
chunk tries its server with the same growing pauses until it answers.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, aclosing
from functools import partial

import attrs
import psycopg
import trio

from usenet_indexer.errors import sole_error
from usenet_indexer.nntp.client import NNTPClient, OverviewText, Slice, StreamFactory, connect
from usenet_indexer.nntp.errors import NNTPError, NoSuchGroup, RemoteProtocolError, Unavailable
from usenet_indexer.prefetch.landing import Landing
from usenet_indexer.prefetch.options import PrefetchOptions
from usenet_indexer.prefetch.servers import ServerState
from usenet_indexer.prefetch.work import SharedWork
from usenet_indexer.spool.plan import ChunkJob, clip, slices
from usenet_indexer.spool.store import ChunkSink
from usenet_indexer.store.groups import GroupStore

logger = logging.getLogger(__name__)

# A server's pool lowered by 400/502 gets one connection back per this many
# seconds without another refusal.
POOL_RESTORE_SECONDS = 300.0
# How often a header slot that yields to the prober looks again.
PROBE_YIELD_SECONDS = 1.0


@attrs.define(eq=False)
class _Selected:
    """The group a connection selected last, with what GROUP said, and when."""

    group: str = ""
    low: int = 0
    high: int = 0
    at: float = -math.inf

    def recent(self, group: str, now: float, seconds: float) -> bool:
        """Whether `group` is the one selected, less than `seconds` before `now`."""
        return self.group == group and now - self.at < seconds

    def holds(self, job: ChunkJob, now: float, seconds: float) -> bool:
        """Whether `job` is of the group selected recently, and wholly within its low/high."""
        return (
            self.recent(job.group, now, seconds) and self.low <= job.first <= job.last <= self.high
        )


@attrs.define(eq=False)
class _Fetching:
    """A chunk whose OVER slices are in a connection's pipeline."""

    job: ChunkJob  # as the scheduler gave it
    clipped: ChunkJob  # cut to the server's articles
    unread: int = 0  # slices not read yet
    writer: ChunkSink | None = None  # opened with its first lines
    landing: bool = False  # handed to its landing task, which owns it now


# What the reader hands the writer: a slice's text, or None once the chunk is read whole.
_Item = tuple[_Fetching, OverviewText | None]


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
class Watermarks:
    """Each group's low and high as GROUP said them, written to `groups` when they change."""

    groups: GroupStore
    _written: dict[int, tuple[int, int]] = attrs.field(factory=dict)

    async def note(self, group_id: int, low: int, high: int) -> None:
        """Write the group's low and high, unless they are what was written last."""
        if self._written.get(group_id) != (low, high):
            self._written[group_id] = (low, high)
            await trio.to_thread.run_sync(self.groups.set_watermarks, group_id, low, high)


@attrs.define(eq=False)
class Connection:
    """One connection slot of a server: takes chunks from the shared work and reads them."""

    work: SharedWork
    landing: Landing
    watermarks: Watermarks
    options: PrefetchOptions
    state: ServerState
    index: int  # the server's place in the settings
    slot: int  # which of its connections
    open_stream: Callable[[int], StreamFactory] | None = None  # tests: a fake server per slot
    _failures: int = 0  # in a row
    _held: ChunkJob | None = None  # taken, not handed to _fetch yet
    _group: str = ""  # of the chunk being fetched

    async def run(self) -> None:
        """Fetch until cancelled: connected while there is work for this server."""
        # A chunk's last write, fsync, rename and row go on here while the
        # connection already asks for the next chunk (the server is not left idle).
        async with trio.open_nursery() as landings:
            while True:
                await self._turn(landings)

    async def _turn(self, landings: trio.Nursery) -> None:
        if self.slot >= self.state.limit:
            # Lowered by a 400/502: one connection comes back per quiet interval.
            await trio.sleep(POOL_RESTORE_SECONDS)
            self.state.restore_one(trio.current_time(), POOL_RESTORE_SECONDS)
            return
        if self.slot >= self.state.limit - self.state.probing:
            # The prober holds a connection of this server (prefetch/prober.py).
            await trio.sleep(PROBE_YIELD_SECONDS)
            return
        job = await self.work.take(self.index)
        if job is None:
            if self.state.answering:
                await self.work.idle(self.options.poll_seconds)
            else:
                await self._try_server()
            return
        read = await self._serve(job, landings)
        # After NNTP or database errors of its own; or, having read a chunk, while
        # chunks do not land (a gap asks the server for nothing: no pause for it).
        failures = max(self._failures, self.landing.refusals if read else 0)
        if failures:
            await trio.sleep(self.options.retry.delay(failures))

    async def _serve(self, job: ChunkJob, landings: trio.Nursery) -> bool:
        """Connect; fetch `job`, then each next chunk for this server; QUIT when none is left
        (or, once a chunk was read, while chunks do not land).

        Returns:
            Whether the overview of a chunk was read (not only gaps landed).
        """
        self._held = job
        connected = False
        read = False
        try:
            async with self._connect() as client:
                connected = True
                self.state.connected()
                self.state.open += 1
                try:
                    read = await self._fetch_held(client, landings)
                finally:
                    self.state.open -= 1
        except NoSuchGroup as error:
            logger.warning("%s", error)  # NNTP errors name their server
            self.work.not_on_server(self._group, self.index)
        except (NNTPError, RemoteProtocolError, psycopg.Error) as error:
            self.state.judge(error, connected)
            self._failed(error)
        except OSError as error:
            # A slice the spool cannot take (a full disk, a folder gone): the client
            # turns its own OSErrors into NNTPErrors, so this one is the spool's. The
            # chunk is listed again, and the health report says so until one lands.
            self.landing.refused(f"{self._group}: a chunk not written", error)
            self.state.failed(error)
            read = True
        finally:
            # Landed or not: a chunk that did not land is listed again.
            if self._held is not None:
                self.work.done(self._held)
                self._held = None
        return read

    async def _try_server(self) -> None:
        """The server refused the login or was unreachable (the prefetcher claims nothing
        while all of its servers are so): connect again after a pause that grows; once
        it answers, the work list is read again."""
        await trio.sleep(self.options.retry.delay(max(1, self._failures)))
        try:
            async with self._connect():
                self.state.connected()
        except (NNTPError, RemoteProtocolError) as error:
            self.state.judge(error, False)
            self._failed(error)
            return
        self._failures = 0
        logger.info("%s answers again", self.state.config.server)
        self.work.announce()

    async def _fetch_held(self, client: NNTPClient, landings: trio.Nursery) -> bool:
        # Whether a chunk's overview was read.
        selected = _Selected()
        read = False
        while self._held is not None:
            current, self._held = self._held, None
            self._group = current.group
            # _fetch owns `current` now: it lands, or goes back to the list.
            read |= await self._fetch(client, selected, current, landings)
            # Read after each chunk: a fallback may have switched it off.
            self.state.compression = client.compression
            self._failures = 0
            if read and self.landing.refusals:
                break  # chunks do not land: a pause before the next (_turn)
            self._held = await self.work.take(self.index)
        return read

    def _failed(self, error: NNTPError | RemoteProtocolError | psycopg.Error) -> None:
        self.state.failed(error)
        self._failures += 1
        if isinstance(error, Unavailable):
            limit = self.state.lower_limit(trio.current_time())
            logger.warning("%s; using at most %d connections", error, limit)
        elif isinstance(error, psycopg.Error):
            logger.warning("database: %s", error)
        else:
            logger.warning("%s", error)

    def _connect(self) -> AbstractAsyncContextManager[NNTPClient]:
        opener = self.open_stream(self.slot) if self.open_stream is not None else None
        return connect(
            self.state.config.url,
            ca_file=self.options.ca_file,
            timeout_seconds=self.options.timeout_seconds,
            open_stream=opener,
        )

    async def _fetch(
        self, client: NNTPClient, selected: _Selected, job: ChunkJob, landings: trio.Nursery
    ) -> bool:
        """Fetch a chunk, and in the same pipeline the chunks of its group ready behind it.

        Owns `job` and each chunk it chains: a chunk read whole goes to its
        landing task in `landings` (which owns it then); any other goes back
        to the scheduler's list, its temporary file removed.

        Returns:
            Whether the server was asked for overview lines (False: `job` was a
            gap, or its articles are not there yet).
        """
        chain: list[_Fetching] = []
        try:
            clipped = await self._readable_part(client, selected, job)
            if clipped is not None:
                chain.append(_Fetching(job, clipped))
                await self._read_chain(client, selected, chain, landings)
        finally:
            if not chain:
                self.work.done(job)
            for fetching in chain:
                if not fetching.landing:
                    if fetching.writer is not None:
                        fetching.writer.abort()
                    self.work.done(fetching.job)
        return bool(chain)

    async def _readable_part(
        self, client: NNTPClient, selected: _Selected, job: ChunkJob
    ) -> ChunkJob | None:
        """The part of `job` the server has; None when there is none to read.

        A job wholly below the server's low water mark lands as a gap here; one
        beyond its high water mark waits for the next look at the group.
        """
        now = trio.current_time()
        if selected.recent(job.group, now, self.options.poll_seconds) and job.last <= selected.high:
            low, high = selected.low, selected.high  # selected a moment ago: no round trip
        else:
            _count, low, high = await client.group(job.group)
            self.work.carries(job.group)
            selected.group, selected.low, selected.high, selected.at = job.group, low, high, now
            await self.watermarks.note(job.group_id, low, high)
        if job.last < low:
            await self.landing.land(job, self.state, None)
            return None
        clipped = clip(job, low, high)
        if clipped is None:
            self.work.wait_for_articles(job)
        return clipped

    async def _read_chain(
        self,
        client: NNTPClient,
        selected: _Selected,
        chain: list[_Fetching],
        landings: trio.Nursery,
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
        to_write, written = trio.open_memory_channel[_Item](1)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_chunks, written, landings)
                # Closed here when the loop ends early (a stop, a failed write): the
                # pipeline then marks the connection unusable at once, not whenever
                # the collector finds it (trio's ResourceWarning, seen in a test).
                pieces = client.over_text_pipelined(feed, xover=xover)
                async with to_write, aclosing(pieces):
                    async for piece, text in pieces:
                        await self._received(feed.owner.pop(piece), text, to_write)
                        # Once all is sent, while replies are still to come (after the
                        # last one the pipeline ends: a chunk added then would not be read).
                        if not feed.waiting and any(f.unread for f in chain):
                            self._chain_next(selected, chain, feed)
        except BaseExceptionGroup as group:
            # Reading or writing failed (one at a time): raise it as itself.
            raise sole_error(group) from None

    async def _received(
        self, fetching: _Fetching, text: OverviewText, to_write: trio.MemorySendChannel[_Item]
    ) -> None:
        if text.lines:
            await to_write.send((fetching, text))
            self.state.lines += text.lines
        fetching.unread -= 1
        if not fetching.unread:
            await to_write.send((fetching, None))  # read whole: land it

    def _chain_next(self, selected: _Selected, chain: list[_Fetching], feed: _SliceFeed) -> None:
        if self.landing.refusals:
            return  # chunks do not land: not one more before a pause
        fits = partial(selected.holds, now=trio.current_time(), seconds=self.options.poll_seconds)
        following = self.work.take_now(self.index, fits)
        if following is not None:
            # The landed ones are their landing tasks' now: keep the rest.
            chain[:] = [f for f in chain if not f.landing]
            chain.append(_Fetching(following, following))
            feed.add(chain[-1])

    async def _write_chunks(
        self, items: trio.MemoryReceiveChannel[_Item], landings: trio.Nursery
    ) -> None:
        """Write each chunk's lines as they come; a chunk read whole (None) goes to its landing."""
        async with items:
            async for fetching, text in items:
                if text is None:
                    fetching.landing = True
                    landings.start_soon(
                        self.landing.land_later,
                        fetching.job,
                        fetching.clipped,
                        self.state,
                        fetching.writer,
                    )
                else:
                    await self._write(fetching, text)

    async def _write(self, fetching: _Fetching, text: OverviewText) -> None:
        if fetching.writer is None:
            part = fetching.clipped
            fetching.writer = await trio.to_thread.run_sync(
                self.options.spool.open_chunk, part.group, part.first, part.last
            )
        await trio.to_thread.run_sync(fetching.writer.write, text.blocks, text.lines)
