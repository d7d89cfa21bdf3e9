"""A leased range's spool chunks as one stream of frames.

Theory of operation
-------------------
The stream starts at the lease's resume point and walks the range's
articles. Each step is one worker-thread hop (`SpoolReader.next_frame`):
check that the node still holds the range with the lease's epoch, look up
the spool chunk that holds the next article, and read its file. Then:

- a chunk or a gap: send it (a chunk of an S3 spool as a LINK: a presigned
  URL the edge reads it from; of a folder spool as a CHUNK: its bytes); the
  next article is the one after its last;
- nothing there yet (the prefetcher has not written it): wait until a chunk
  lands (coordinator/landings.py: a notification from whoever indexed it)
  or `poll_seconds` pass, then look again; send a KEEPALIVE whenever
  nothing was sent for `keepalive_seconds`, so the edge's read timeout and
  any proxy see a live stream; when the server stops (`Landings.stop`), end
  with an ERROR frame at once rather than hold the stop for its graceful
  period (the chunk may be minutes away);
- a chunk whose file is gone (a folder spool's file lost: a disk, a
  database restored without its spool): its index row is forgotten
  (`SpoolIndex.forget_lost`), so the prefetcher fetches it again, and the
  stream waits for it as for a chunk not there yet. The range's next chunks
  are asked of the store at once, and those gone forgotten too (lost.py: a
  spool lost whole is fetched again at once, not chunk by chunk). Nothing is
  counted: the spool is a cache of the servers, and the loss is not the
  range's.
  (An S3 spool's chunk gone is met by the edge, whose report the node API
  checks with the store: coordinator/http/node.py.)
- the lease lost, a chunk that cannot be read, the database gone: an ERROR
  frame ends the stream (the edge stops the range or retries). A failure
  at the range's own articles is counted as a refusal on the range: a
  chunk that is there but cannot be read, a chunk the index answers that
  does not hold the article, any other error of ours at that article (a
  bug). The next lease streams the same articles and meets the same
  failure, so three leases in a row park the range with the reason, as a
  refused batch does, instead of its being leased and given back for ever.
  The lease lost, the database gone and a chunk this process has no file
  descriptor (or memory) to open (EMFILE: more edge connections than its
  open-file limit) are not the range's doing, and are not counted.

After the frame that reaches the range's last article comes END. Sending
awaits the peer (ASGI `send` is back-pressured), so at most one chunk is in
memory per stream.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable

import attrs
import psycopg
import trio

from usenet_indexer.coordinator.landings import Landings
from usenet_indexer.coordinator.lost import forget_lost_after
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.errors import HOST_LIMITS, SpoolStoreError
from usenet_indexer.spool.store import SpoolStore
from usenet_indexer.store.ranges import Lease
from usenet_indexer.store.spool import SpoolChunk
from usenet_indexer.wire.frames import Codec, Frame, FrameKind

logger = logging.getLogger(__name__)

# The most of an exception's text kept in the reason counted on a range (shown by
# `uidx status`, sent in the ERROR frame, which holds 1 KiB): its start says what.
MAX_PROBLEM_CHARS = 400

# The ERROR frame of a stream that waits for a chunk when the server stops.
STOPPING = "the coordinator is stopping"

SendFrame = Callable[[Frame], Awaitable[None]]

# Counts a refusal of a range's work (node, range, epoch, reason; in a worker
# thread) and answers what to tell the node: NodeApi's, which parks the range
# at the limit.
Refuse = Callable[[int, int, int, str], str]


def _positive(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, not {value}")


@attrs.frozen
class StreamTiming:
    """How a stream waits for chunks that are not in the spool yet.

    Attributes:
        keepalive_seconds: the longest silence before a KEEPALIVE frame; well
            under the edge's read timeout and the idle timeouts of proxies.
        poll_seconds: how often a waiting stream asks the spool index for the
            next chunk when no landing woke it (the net beneath the
            notifications: while the coordinator cannot listen, streams poll).
    """

    keepalive_seconds: float = attrs.field(default=5.0, validator=_positive)
    poll_seconds: float = attrs.field(default=1.0, validator=_positive)

    @property
    def wait_seconds(self) -> float:
        """The sleep between two polls: a keepalive is never late by more than this."""
        return min(self.keepalive_seconds, self.poll_seconds)


class Pending(enum.Enum):
    """The next chunk is not in the spool yet."""

    PENDING = "pending"


PENDING = Pending.PENDING


@attrs.frozen
class SpoolReader:
    """The blocking half of a stream: lease check, index lookup, chunk read or link.

    Attributes:
        stores: the ranges store (lease check) and the spool index.
        spool: where the chunks are (a folder's are read and sent, an S3
            spool's are sent as links).
    """

    stores: Stores
    spool: SpoolStore
    refuse: Refuse

    def next_frame(self, node_id: int, lease: Lease, article: int) -> Frame | Pending:
        """The frame that holds `article`, PENDING, or an ERROR frame (run in a thread).

        Args:
            node_id: the node streaming.
            lease: the lease the stream began with (its epoch must still hold).
            article: the next article to send, within the lease's range.

        Returns:
            A CHUNK or GAP frame holding `article`; PENDING when the spool does
            not have it yet; an ERROR frame when the stream must stop.
        """
        try:
            return self._next_frame(node_id, lease, article)
        except Exception as error:
            # Not the database's unavailability (handled below): ours, at this
            # range's articles, and met again by the next lease: counted.
            logger.error(
                "%s: stream failed at article %d", _where(node_id, lease), article, exc_info=error
            )
            problem = f"{type(error).__name__}: {error}"[:MAX_PROBLEM_CHARS]
            return self._refused(
                node_id, lease, f"the stream failed at article {article}: {problem}"
            )

    def _next_frame(self, node_id: int, lease: Lease, article: int) -> Frame | Pending:
        where = _where(node_id, lease)
        try:
            held = self.stores.ranges.held(node_id, lease.range_id)
            if held is None or held.epoch != lease.epoch:
                logger.info("%s: lease lost, stream stopped at article %d", where, article)
                return Frame.error(f"the lease of range {lease.range_id} is lost")
            chunks = self.stores.spool.chunks_from(lease.group_id, article, lease.last, 1)
        except psycopg.OperationalError as error:
            # A pool timeout is an OperationalError too.
            logger.warning("%s: database unavailable, stream stopped: %s", where, error)
            return Frame.error("the coordinator's database is unavailable; try again later")
        if not chunks or chunks[0].first > article:
            return PENDING
        return self._frame(chunks[0], article, node_id, lease)

    def _frame(
        self, chunk: SpoolChunk, article: int, node_id: int, lease: Lease
    ) -> Frame | Pending:
        span = f"spool chunk {chunk.first}..{chunk.last}"
        if chunk.last < article:
            # The index answered a chunk before the one asked for: sending it
            # would not move the stream on.
            logger.error("%s: %s does not hold article %d", _where(node_id, lease), span, article)
            return self._refused(node_id, lease, f"{span} does not hold article {article}")
        if chunk.path is None:
            return Frame.gap(chunk.first, chunk.last)
        try:
            codec = Codec(chunk.codec)
            url = self.spool.presign(chunk.path)
            if url is not None:
                return Frame.link(chunk.first, chunk.last, url, codec=codec)
            payload = self.spool.read(chunk.path)
        except FileNotFoundError:
            return self._lost(chunk, chunk.path, node_id, lease)
        except OSError as error:
            if error.errno in HOST_LIMITS:  # the edge gives it back, leased again
                return _out_of(error, span, node_id, lease)
            logger.error("%s: %s cannot be sent: %s", _where(node_id, lease), span, error)
            return self._refused(node_id, lease, f"{span} cannot be read")
        except (ValueError, SpoolStoreError) as error:
            logger.error("%s: %s cannot be sent: %s", _where(node_id, lease), span, error)
            # Counted on the range: the edge gives it back and the next lease
            # streams the same chunk, so a chunk that cannot be read parks the
            # range instead of being asked for every idle_seconds for ever.
            return self._refused(node_id, lease, f"{span} cannot be read")
        return Frame.chunk(chunk.first, chunk.last, payload, codec=codec)

    def _lost(self, chunk: SpoolChunk, path: str, node_id: int, lease: Lease) -> Frame | Pending:
        """A chunk whose file is gone: forgotten and fetched again, the stream waiting
        for it (PENDING); counted as before when its row stays (no range needs it:
        not this lease's stream, which is at or past the range's resume point)."""
        where, span = _where(node_id, lease), f"spool chunk {chunk.first}..{chunk.last}"
        try:
            forgotten = self.stores.spool.forget_lost(lease.group_id, chunk.first, path)
        except psycopg.OperationalError as error:
            logger.warning("%s: database unavailable, stream stopped: %s", where, error)
            return Frame.error("the coordinator's database is unavailable; try again later")
        if not forgotten:
            logger.error("%s: %s is gone from %s", where, span, self.spool.describe())
            return self._refused(node_id, lease, f"{span} cannot be read: it is gone")
        logger.warning(
            "%s: %s is gone from %s: its index row is forgotten, the prefetcher fetches it"
            " again and the stream waits for it",
            *(where, span, self.spool.describe()),
        )
        # Seldom alone (a spool lost whole): the range's next chunks are asked at once.
        forget_lost_after(
            self.stores.spool, self.spool, lease.group_id, chunk.last, lease.last, where
        )
        return PENDING

    def _refused(self, node_id: int, lease: Lease, reason: str) -> Frame:
        """The ERROR frame of a failure at the range's articles, counted on the range."""
        try:
            return Frame.error(self.refuse(node_id, lease.range_id, lease.epoch, reason))
        except psycopg.OperationalError as error:
            # Not counted this time; the edge gives the range back all the same.
            logger.warning("%s: cannot count the failure: %s", _where(node_id, lease), error)
            return Frame.error(reason)


def _out_of(error: OSError, span: str, node_id: int, lease: Lease) -> Frame:
    """The ERROR frame of a chunk this process has no descriptor or memory to read now:
    not counted on the range (it is the host's limit, not the chunk's)."""
    logger.warning(
        "%s: %s cannot be opened now: %s; not counted on the range. Too many"
        " connections for the coordinator's open-file limit? Raise it (LimitNOFILE)",
        *(_where(node_id, lease), span, error),
    )
    return Frame.error(f"the coordinator cannot open {span} now: {error.strerror}")


def _where(node_id: int, lease: Lease) -> str:
    return f"range {lease.range_id} epoch {lease.epoch} of node {node_id}"


@attrs.frozen
class Streamed:
    """What one stream sent, for its log line."""

    chunks: int
    gaps: int
    payload_bytes: int
    ending: str


@attrs.frozen
class RangeStream:
    """Streams one leased range from its resume point (see the module docstring).

    Attributes:
        reader: the blocking lookups, run in worker threads.
        limiter: the worker threads shared with every other database call.
        timing: keepalive and poll intervals.
        landings: spool chunks landed (counted by `listen_for_landings`).
    """

    reader: SpoolReader
    limiter: trio.CapacityLimiter
    timing: StreamTiming
    landings: Landings

    async def run(self, node_id: int, lease: Lease, send: SendFrame) -> Streamed:
        """Send the range's frames until END or an ERROR frame.

        Args:
            node_id: the node streaming.
            lease: the node's lease, as checked before the response started.
            send: sends one frame (awaits the peer).

        Returns:
            What was sent.
        """
        article = lease.next
        chunks = gaps = payload_bytes = 0
        quiet_since = trio.current_time()
        while article <= lease.last:
            # Taken before the look: a chunk landing after it ends the wait.
            mark = self.landings.mark(lease.group_id)
            step = await trio.to_thread.run_sync(
                self.reader.next_frame, node_id, lease, article, limiter=self.limiter
            )
            if step is PENDING:
                if self.landings.stopping:
                    # The chunk may be minutes away (the live head): not worth
                    # holding the server's stop for; the edge gives the range back.
                    await send(Frame.error(STOPPING))
                    return Streamed(chunks, gaps, payload_bytes, f"error: {STOPPING}")
                quiet_since = await self._wait(send, quiet_since, lease.group_id, mark)
                continue
            await send(step)
            if step.kind == FrameKind.ERROR:
                return Streamed(chunks, gaps, payload_bytes, f"error: {step.message}")
            chunks += step.kind in {FrameKind.CHUNK, FrameKind.LINK}
            gaps += step.kind == FrameKind.GAP
            payload_bytes += len(step.payload)
            article = step.last + 1
            quiet_since = trio.current_time()
        await send(Frame.end(lease.last))
        return Streamed(chunks, gaps, payload_bytes, "end")

    async def _wait(
        self, send: SendFrame, quiet_since: float, group_id: int, mark: tuple[int, int]
    ) -> float:
        # Returns when the stream last sent something.
        if trio.current_time() - quiet_since >= self.timing.keepalive_seconds:
            await send(Frame.keepalive())
            quiet_since = trio.current_time()
        with trio.move_on_after(self.timing.wait_seconds):
            await self.landings.wait_since(group_id, mark)
        return quiet_since
