"""One leased range: stream -> inflate -> index -> post batches -> finish.

Theory of operation
-------------------
Five tasks share the range, joined by memory channels of no or one slot
(a send waits until the other side takes the item, or the slot is free),
which is what bounds memory:

    frame reader --Frame--> inflater --Piece--> indexing loop --Batch--> poster
                                                                  heartbeats

- The frame reader decodes frames off the stream, one ahead in the channel
  (compressed); it sets `streamed` when it reads END. A LINK (a chunk of an
  S3 spool) it replaces by the CHUNK it GETs from the link's URL, so the
  chunk's bytes come from the object store, not through the coordinator.
- The inflater inflates each CHUNK in a worker thread (into blocks, see
  chunks.py), so the next chunk inflates while this one is indexed; it then
  waits until the indexing loop takes it: at most one chunk ahead. The
  indexing loop feeds a chunk in parts of about `FEED_BYTES` cut at line
  ends and gives the other tasks a turn after each, so that the stream is
  read ahead.
- The indexing loop feeds the RangeIndexer and hands over a batch every
  `batch_articles` articles. The poster posts batches in order; while one
  is in flight the loop indexes on, and at most one batch waits behind it.
- Heartbeats keep the lease when batches are far apart.

The tail. Ranges overlap at both ends, so that the indexing loop never
waits on the network between them:

- Once the stream has sent its END frame, `run` sets `streamed` and the
  worker leases the next range. The reader reads frames ahead of the
  inflating (two at most, compressed), so it sees the END while this
  range's last chunks are indexed: the next range's lease, stream and first
  inflates go on meanwhile, and are ready when its last batch is taken.
  The next range waits for this one's `indexed` (its `after`) before it
  feeds anything, so it holds at most a chunk being inflated and one
  inflated meanwhile.
- Once the last batch is handed to the poster, the range's indexing is
  done: `indexed` is set, and the next range indexes while this one's last
  post and `finish` go on (a post takes seconds on a busy coordinator). A
  `tail` semaphore (one slot, shared by the worker's ranges) is taken
  first, so at most one range is in its tail while the next one indexes:
  memory stays at two ranges' batches.

Endings. END: the last batch is posted, then `finish`. An ERROR frame or a
broken stream: the current chunk is indexed to its end, what is indexed is
posted, and the range is given back. A chunk this edge cannot read (its
link answered 4xx: 404 gone, 403 refused; it does not inflate) is named in
the give-back, and the coordinator counts it against the range, as it
counts its own ERROR frames at the range's articles: the same failure
several leases in a row parks the range with the reason. A store that does
not answer (5xx or no answer, after the client's tries) is not named: it
comes back, and the range with it. A stop (the stop event) cuts all of it
short at once, a post in flight included, and gives the range back; nothing
more is posted, and the next holder indexes again from the stored resume
point. (A post's answer may be held up to 30 s, see the node API's
`_keep_pace`; a stopping edge is gone within seconds.) The fence makes the
cut safe: the coordinator stores a batch, moving the resume point only
while this lease holds the range, before it holds the answer, and the
release updates the same row; so the batch is stored before the release,
or refused after it (a 409 nobody reads): once or not at all. A 409 from
any call: the lease is lost; everything stops and nothing more is sent (not
even a release). Any other failure: the range is given back. Giving back
runs in `finally:`, shielded and time-limited, so a cancelled worker does
not leave its range leased either: retried for `give_back_seconds` after a
failure, but once the worker is told to stop (before the give-back or
during it) for `stop_give_back_seconds` at most (a try or two): a
coordinator that does not answer (gone, or stopping) lets the lease expire
by itself, and the stopping edge is gone within 2 s. A range cut short from
outside, its stop never set (an outer cancel scope or deadline, a sibling
task that failed, a KeyboardInterrupt where no signal receiver turns Ctrl-C
into a stop), is going the same way: `stop_give_back_seconds` too.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncGenerator
from typing import cast

import attrs
import httpx
import trio

from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.edge.chunks import ChunkError, Piece, line_parts, piece_of, within
from usenet_indexer.edge.client import (
    EdgeLease,
    LeaseLostError,
    NodeApiError,
    NodeClient,
    UnreadableChunk,
    transport_problem,
)
from usenet_indexer.edge.events import EdgeEvent, EventKind, Observer, ignore
from usenet_indexer.edge.options import HEARTBEATS_PER_TTL, EdgeOptions
from usenet_indexer.edge.stopping import cancel_when_set, shielded_within
from usenet_indexer.gcpolicy import collect_all
from usenet_indexer.wire.batchwire import encode_batch
from usenet_indexer.wire.frames import CLOSED, Frame, FrameDecoder, FrameError, FrameKind
from usenet_indexer.wire.packed import pack_batch

logger = logging.getLogger(__name__)

STOPPING = "stopping"
# A chunk's text goes to the indexer in parts of about this many bytes, cut
# at line ends (see _feed): a 15 MB chunk in ~60 parts, about as many turns as
# the reader takes to read a ~1 MB frame in 64 KB reads and start its inflate.
FEED_BYTES = 1 << 18
# A chunk's link answered 4xx: the store refuses it (404: no object; 403: the link
# expired, or the store does not accept the keys or the clock that signed it). Not
# 408 or 429: a store that timed the request out or throttles is away for a while,
# like one answering 5xx.
CLIENT_ERRORS = frozenset(range(400, 500)) - {408, 429}


class Outcome(enum.Enum):
    """How a range ended for this worker."""

    FINISHED = "finished"
    GIVEN_BACK = "given back"
    LOST = "lease lost"
    FAILED = "failed, given back"


@attrs.frozen
class RangeReport:
    """What one range did: the figures of its log line.

    Attributes:
        lease: the range.
        outcome: how it ended.
        reason: why it ended early ("" when finished).
        resume: the resume point after the last batch stored.
        headers: overview lines in the batches stored.
        seconds: from lease to the end.
        release_chunks: release chunks stored (kept by the rules).
        probe_candidates: probe candidates stored.
        posted_bytes: compressed batch bodies posted.
        post_seconds: time spent waiting for batch posts.
    """

    lease: EdgeLease
    outcome: Outcome
    reason: str
    resume: int
    headers: int
    seconds: float
    release_chunks: int
    probe_candidates: int
    posted_bytes: int
    post_seconds: float

    def describe(self) -> str:
        """The range's log line."""
        rate = self.headers / self.seconds if self.seconds > 0 else 0.0
        why = f" ({self.reason}; resume point {self.resume})" if self.reason else ""
        return (
            f"{self.lease}: {self.outcome.value}{why}; {self.headers:,} headers in "
            f"{self.seconds:.1f} s ({rate:,.0f}/s), {self.release_chunks:,} release chunks, "
            f"{self.probe_candidates:,} probe candidates; posted "
            f"{self.posted_bytes / 1e6:.1f} MB in {self.post_seconds:.1f} s"
        )


@attrs.define(eq=False)
class _Tally:
    """What the stored batches add up to (updated by the poster)."""

    resume: int
    headers: int = 0
    release_chunks: int = 0
    probe_candidates: int = 0
    posted_bytes: int = 0
    post_seconds: float = 0.0

    def add(self, batch: Batch, body_bytes: int, seconds: float) -> None:
        self.resume = batch.next
        self.headers += batch.lines
        self.release_chunks += sum(1 for r in batch.releases if r.dropped is None)
        self.probe_candidates += len(batch.probe_candidates)
        self.posted_bytes += body_bytes
        self.post_seconds += seconds


@attrs.define(eq=False)
class RangeRunner:
    """Indexes one leased range (see the module docstring).

    Args:
        client: the node API.
        lease: the range.
        options: batch size, heartbeat interval, caps, the give-back deadline.
        stop: set it to stop at once (a post in flight abandoned) and give the
            range back.
        observe: told of keepalives and stored batches.
        indexed: set once the last batch is handed to the poster (and when
            the range ends): the next range may index.
        streamed: set once the stream has sent its END (and when the range
            ends): the next range may be leased.
        tail: the worker's one tail slot (see the module docstring).
        after: the range before's `indexed`: nothing is fed until it is set.
    """

    client: NodeClient
    lease: EdgeLease
    options: EdgeOptions
    stop: trio.Event
    observe: Observer = ignore
    indexed: trio.Event = attrs.field(factory=trio.Event)
    streamed: trio.Event = attrs.field(factory=trio.Event)
    tail: trio.Semaphore | None = None
    after: trio.Event | None = None
    report: RangeReport | None = attrs.field(init=False, default=None)
    _in_tail: bool = attrs.field(init=False, default=False)
    _indexer: RangeIndexer = attrs.field(init=False)
    _tally: _Tally = attrs.field(init=False)
    _last_contact: float = attrs.field(init=False, default=0.0)
    # The batch being posted, if any: a stop abandons it (see "Endings").
    _posting: Batch | None = attrs.field(init=False, default=None)
    # The chunk that ended the range because it could not be read (given
    # back with it: the coordinator counts it against the range).
    _unreadable: UnreadableChunk | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        lease = self.lease
        self._indexer = RangeIndexer(
            group=lease.group, first=lease.next, rules=lease.rules, pure=self.options.pure_indexer
        )
        self._tally = _Tally(resume=lease.next)

    async def run(self) -> RangeReport:
        """Index the range to its end, or until stopped, the lease is lost, or it fails.

        Returns:
            What the range did (also logged, one line).
        """
        started = self._last_contact = trio.current_time()
        self.observe(EdgeEvent(EventKind.LEASED, self.lease.range_id, self.lease.next))
        # The range's own line comes at its end (report.describe); this one with -v.
        logger.debug("%s: leased, from %d", self.lease, self.lease.next)
        # Until _work returns, an ending (a cancellation included) gives the range back.
        outcome, reason = Outcome.FAILED, "cancelled"
        # Until _work returns or fails by itself: cut short from outside (a cancel, Ctrl-C).
        cut_short = True
        try:
            try:
                outcome, reason = await self._work()
            except* LeaseLostError as group:
                outcome, reason = Outcome.LOST, _reasons(group)
            except* Exception as group:
                outcome, reason = Outcome.FAILED, _reasons(group)
                logger.error("%s: failed", self.lease, exc_info=group)
            cut_short = False
        finally:
            try:
                if outcome in {Outcome.GIVEN_BACK, Outcome.FAILED}:
                    await self._give_back_within(cut_short=cut_short)
                report = self.report = self._report(outcome, reason, trio.current_time() - started)
                log = logger.info if outcome is Outcome.FINISHED else logger.warning
                log("%s", report.describe())
            finally:
                if self._in_tail and self.tail is not None:
                    self.tail.release()
                self.indexed.set()
                self.streamed.set()
        self.observe(EdgeEvent(EventKind.RANGE_DONE, self.lease.range_id, self._tally.resume))
        return report

    async def _indexing_done(self) -> None:
        # The next range may start indexing: wait for the tail slot, then say so.
        if self.tail is not None:
            await self.tail.acquire()
            self._in_tail = True
        self.indexed.set()

    def _report(self, outcome: Outcome, reason: str, seconds: float) -> RangeReport:
        tally = self._tally
        return RangeReport(
            *(self.lease, outcome, reason, tally.resume, tally.headers, seconds),
            *(tally.release_chunks, tally.probe_candidates, tally.posted_bytes),
            tally.post_seconds,
        )

    async def _work(self) -> tuple[Outcome, str]:
        # A stop cancels the indexing, the posting and the heartbeats alike.
        ending: str | None = STOPPING
        with trio.CancelScope() as stopped:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_set, self.stop, stopped)
                nursery.start_soon(self._heartbeats)
                ending = await self._index_and_post()
                nursery.cancel_scope.cancel()
        if stopped.cancelled_caught and self._posting is not None:
            batch = self._posting
            # Stored or not, as the coordinator got it: the release keeps what was.
            ending = f"{STOPPING}; batch {batch.first}..{batch.next - 1} in flight, stored or not"
        if ending is not None:
            return Outcome.GIVEN_BACK, ending
        await self.client.finish(self.lease)
        return Outcome.FINISHED, ""

    async def _give_back_within(self, *, cut_short: bool) -> None:
        # Retried for give_back_seconds after a failure; at a stop, stop_give_back_seconds at
        # most, and the same when cut short from outside (a Cancelled or a KeyboardInterrupt
        # on its way out, or a cancel not delivered yet: the effective deadline passed).
        options = self.options
        seconds, stopping = options.give_back_seconds, options.stop_give_back_seconds
        if cut_short or trio.current_effective_deadline() <= trio.current_time():
            seconds = stopping
        if not await shielded_within(self._give_back, self.stop, seconds, stopping):
            limit = stopping if self.stop.is_set() else seconds
            logger.warning(
                "%s: not given back within %.1f s (the coordinator does not answer);"
                " its lease expires there by itself",
                *(self.lease, limit),
            )

    async def _give_back(self) -> None:
        try:
            await self.client.release(self.lease, self._unreadable, stopping=self.stop.is_set())
        except NodeApiError as error:
            # Lost meanwhile, or the coordinator is away: the lease expires by itself.
            logger.warning("%s: could not give it back: %s", self.lease, error)

    async def _heartbeats(self) -> None:
        # A stored batch moves the deadline too: beat only after a quiet interval.
        interval = self.options.heartbeat_seconds
        if self.lease.ttl_seconds is not None:
            # The coordinator's TTL decides, not this edge's own setting.
            interval = min(interval, self.lease.ttl_seconds / HEARTBEATS_PER_TTL)
        while True:
            await trio.sleep_until(self._last_contact + interval)
            if trio.current_time() >= self._last_contact + interval:
                await self.client.heartbeat(self.lease)
                self._last_contact = trio.current_time()

    async def _index_and_post(self) -> str | None:
        """Index and post; None at the range's end, else why it stopped early."""
        batches, to_post = trio.open_memory_channel[Batch](0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._post_batches, to_post)
            async with batches:
                ending = await self._index(batches)
        return ending

    async def _post_batches(self, batches: trio.MemoryReceiveChannel[Batch]) -> None:
        async for batch in batches:
            await self._post(batch)

    async def _post(self, batch: Batch) -> None:
        lease = self.lease
        # Packed here, not in a worker thread: packing is mostly Python (the
        # GIL), and beside the indexing loop two GIL-bound threads hand the
        # lock back and forth every switch interval. Measured (2 cores, 1M
        # generated lines in 4 ranges, packing each range's batch while the
        # next range is indexed): 4.61 s in a thread, 4.22 s inline.
        body = _body(batch, lease, pure=self.options.pure_indexer)
        posted = trio.current_time()
        self._posting = batch
        answer = await self.client.post_batch(lease, body)
        self._posting = None
        self._last_contact = now = trio.current_time()
        self._tally.add(batch, len(body), now - posted)
        if answer.already:
            logger.info("%s: batch %d..%d was stored before", lease, batch.first, batch.next - 1)
        self.observe(EdgeEvent(EventKind.STORED, lease.range_id, batch.next))

    async def _index(self, batches: trio.MemorySendChannel[Batch]) -> str | None:
        pieces, to_index = trio.open_memory_channel[Piece | str](0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read_stream, pieces)
            ending = await self._consume(to_index, batches)
            # Stopped early: the chunk inflating ahead is not wanted.
            nursery.cancel_scope.cancel()
        # A stopping edge posts nothing more: its answer could be held (see
        # "Endings"), and the next holder indexes it again from the resume point.
        if ending not in {None, STOPPING} and self._indexer.pending_articles:
            await batches.send(self._indexer.take())
        return ending

    async def _consume(
        self,
        to_index: trio.MemoryReceiveChannel[Piece | str],
        batches: trio.MemorySendChannel[Batch],
    ) -> str | None:
        async for piece in to_index:
            if isinstance(piece, str):
                return piece
            if self.after is not None and not self.after.is_set():
                await self.after.wait()
                if self.stop.is_set():
                    return STOPPING
            await self._feed(piece)
            if piece.end:
                batch = self._indexer.finish()
                if batch.next > batch.first or batch.lines:
                    await batches.send(batch)
                await self._indexing_done()
                return None
            if self._indexer.pending_articles >= self.options.batch_articles:
                await batches.send(self._indexer.take())
                # The worker runs without automatic cyclic GC (gcpolicy): collect
                # now, while the batch's open files are gone.
                collect_all()
            if self.stop.is_set():
                return STOPPING
        # The reader ended without END or a reason: it failed, and its error
        # comes out of the nursery (a stop cancels both instead).
        return STOPPING

    async def _feed(self, piece: Piece) -> None:
        indexer = self._indexer
        resume = indexer.resume_point
        # Only the range's own articles: a chunk may begin before the resume
        # point or run past the range's end (chunks.within says why).
        clipped = within(piece, resume, self.lease.last)
        if clipped is None:
            return  # all stored already (the spool was cut differently)
        blocks = clipped.blocks
        # Fed a part at a time, with a turn for the other tasks after each: the
        # stream reader then reads the next frame off the socket and starts
        # inflating it (in a thread) while this chunk is indexed, instead of
        # after it. Not a cancellation point: a chunk is indexed whole, and the
        # resume point moves once, at its end: a part is fed once the next one
        # is cut, and the last one moves it.
        fed: bytes | None = None
        for part in line_parts(blocks, FEED_BYTES):
            if fed is not None:
                indexer.add_data(fed, resume)
                await trio.lowlevel.cancel_shielded_checkpoint()
            fed = part
        indexer.add_data(b"" if fed is None else fed, clipped.next_article)

    async def _read_stream(self, pieces: trio.MemorySendChannel[Piece | str]) -> None:
        # A stop cancels it with the rest of the range (`_work`). Closed without a
        # checkpoint (`with`, not `async with`): the close lets the indexing loop end
        # and cancel this task's nursery, and a checkpoint after it would raise that
        # Cancelled in place of the reader's error (a stream that did not open, a
        # KeyboardInterrupt): the range "given back (stopping)", the error lost.
        with pieces:
            await self._stream_pieces(pieces)

    async def _stream_pieces(self, pieces: trio.MemorySendChannel[Piece | str]) -> None:
        async with self.client.stream(self.lease) as response:
            raw = cast("AsyncGenerator[bytes, None]", response.aiter_raw())
            frames = _FrameSource(raw, FrameDecoder(self.options.max_payload_bytes))
            # Frames are read ahead of the inflating (one waits in the channel,
            # one in the reader's hand): the END is seen while the range's last
            # chunks are indexed, and the next range leased then.
            read, to_inflate = trio.open_memory_channel[_Read](1)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read_frames, frames, read)
                    await self._send_pieces(to_inflate, pieces)
                    nursery.cancel_scope.cancel()
            finally:
                await frames.abandon()
                await raw.aclose()

    async def _read_frames(self, frames: _FrameSource, read: trio.MemorySendChannel[_Read]) -> None:
        # Closed without a checkpoint, as in _read_stream: an error comes out as it is.
        with read:
            try:
                while True:
                    frame = await frames.next()
                    if frame.kind == FrameKind.LINK:
                        frame = await self._fetch(frame)
                    if frame.kind in {FrameKind.END, FrameKind.ERROR}:
                        if frame.kind == FrameKind.END:
                            # Nothing more comes for this range: the next may be leased.
                            self.streamed.set()
                        # Read to the end of the response: a stream read to its
                        # end leaves none of httpx's generators half-done.
                        await frames.closed()
                        await read.send(frame)
                        return
                    await read.send(frame)
            except (FrameError, httpx.TransportError, NodeApiError) as error:
                # In its turn: the frames read before it are indexed first.
                await read.send(error)

    async def _fetch(self, link: Frame) -> Frame:
        # A chunk of an S3 spool, read from its link: the reader's read of
        # its payload, as for a CHUNK that came in the stream.
        try:
            payload = await self.client.chunk(link.url, self.options.max_payload_bytes)
        except NodeApiError as error:
            if error.status not in CLIENT_ERRORS:
                # The store away (5xx, 408, 429 or no answer, after the client's tries):
                # it comes back, and counting that would park sound ranges.
                raise
            # 404: the object is gone; 403: the store refuses the link (keys that may
            # not read, a clock far off, a link expired): the next lease streams the
            # same chunk and gets the same answer, so the give-back names it (the
            # coordinator asks the store: a chunk gone is fetched again, not counted).
            raise _UnreadableLink(link, error) from error
        return Frame.chunk(link.first, link.last, payload, codec=link.codec)

    async def _send_pieces(
        self,
        to_inflate: trio.MemoryReceiveChannel[_Read],
        pieces: trio.MemorySendChannel[Piece | str],
    ) -> None:
        async for frame in to_inflate:
            if isinstance(frame, Exception):
                if isinstance(frame, _UnreadableLink):
                    self._unreadable = frame.chunk
                why = transport_problem(frame) if isinstance(frame, httpx.TransportError) else frame
                await pieces.send(f"the stream broke: {why}")
                return
            if frame.kind == FrameKind.KEEPALIVE:
                resume = self._indexer.resume_point
                self.observe(EdgeEvent(EventKind.KEEPALIVE, self.lease.range_id, resume))
                continue
            if frame.kind == FrameKind.ERROR:
                await pieces.send(f"the coordinator ended the stream: {frame.message}")
                return
            try:
                piece = await trio.to_thread.run_sync(piece_of, frame, self.options.max_text_bytes)
            except ChunkError as error:
                # The same bytes come with every lease: a chunk that does not inflate.
                self._unreadable = UnreadableChunk(frame.first, frame.last, str(error))
                await pieces.send(f"the stream broke: {error}")
                return
            await pieces.send(piece)
            if piece.end:
                return


class _UnreadableLink(NodeApiError):
    """A chunk's link answered 4xx: gone from the spool's store (404), or refused (403)."""

    def __init__(self, link: Frame, error: NodeApiError) -> None:
        super().__init__(error.action, error.status, str(error).removeprefix(f"{error.action}: "))
        self.chunk = UnreadableChunk(link.first, link.last, str(error))


# What the frame reader hands on: a frame, or why the stream broke.
_Read = Frame | FrameError | httpx.TransportError | NodeApiError


@attrs.define(eq=False)
class _FrameSource:
    """Frames from the bytes of a stream response."""

    raw: AsyncGenerator[bytes, None]
    decoder: FrameDecoder

    async def next(self) -> Frame:
        """The next frame; FrameError when the stream ends without one."""
        while True:
            got = self.decoder.next_frame()
            if isinstance(got, Frame):
                return got
            if got is CLOSED:
                raise FrameError("the stream ended after its last frame")
            data = await anext(self.raw, None)
            if data is None:
                self.decoder.receive_eof()
            else:
                self.decoder.receive_data(data)

    async def abandon(self) -> None:
        """Stop reading, wherever the stream is (a stream read to its end: nothing to do).

        A read under a cancelled scope: the Cancelled goes up through httpx's and
        httpcore's generators and ends them. Closed from outside instead, while
        suspended mid-stream (the reader stopped at a chunk link that failed, or
        was cancelled while it waited to hand a frame on), the inner ones would
        be left half-done for the garbage collector.
        """
        with trio.CancelScope() as scope:
            scope.cancel()
            while await anext(self.raw, None) is not None:
                pass

    async def closed(self) -> None:
        """Read what follows the last frame: nothing but the end of the stream."""
        while self.decoder.next_frame() is not CLOSED:
            data = await anext(self.raw, None)
            if data is None:
                self.decoder.receive_eof()
            else:
                self.decoder.receive_data(data)


def _reasons(group: BaseExceptionGroup[Exception]) -> str:
    """The messages of the exceptions in nested nursery groups, for the log line."""
    leaves: list[str] = []
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            leaves.append(_reasons(error))
        else:
            leaves.append(str(error) or type(error).__name__)
    return "; ".join(leaves)


def _body(batch: Batch, lease: EdgeLease, *, pure: bool) -> bytes:
    # Packing the release chunks is the edge's work: the coordinator stores them as they come.
    # No gzip over the document: its fragments are deflated already (see batchwire).
    packed = pack_batch(batch, pure=pure)
    return encode_batch(packed, range_id=lease.range_id, epoch=lease.epoch)
