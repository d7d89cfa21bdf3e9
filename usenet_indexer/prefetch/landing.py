"""Landing a chunk: its file made whole and its index row written, as one step.

Theory of operation
-------------------
When the last slice of a chunk is in, the chunk is committed to the spool
store (a folder: its temporary file fsynced and renamed; S3: one conditional
PUT, spool/s3.py) and its index row written (`ON CONFLICT DO NOTHING`), in one
thread call: a cancellation cannot come between the rename and the row, so a
cancelled or killed prefetcher leaves no chunk half-written and no row
naming a file that is not whole (a temporary file of a dead writer is
removed at the next start). A chunk the server has no article of is
recorded as a gap: a row without a file.

A connection lands a chunk read whole in a background task (`land_later`)
while it already asks for the next one, so the server is not left idle; the
job stays in flight until it landed, then goes back to the scheduler
(listed again if it did not land).

The landing counts the chunks that did not land in a row (`refusals`, back
to 0 when a chunk is stored): those the spool store refused and those whose
index row the database refused after the chunk was stored. While it is not 0
the connections pause between chunks (connection.py): a chunk that did not
land is fetched again, and without a pause a store that is down (S3
unreachable, keys revoked, a full disk) or a database that refuses the rows
(its disk full, a statement timeout) had each connection fetch the same
chunks from its provider again and again at full speed, spending the
provider's bandwidth and quota on lines thrown away. The health report says
"writes failing" with the reason meanwhile. The log says it once per run of
refusals (a warning with the first one's error; the others at debug level),
and once more when a chunk lands again: one line per chunk and retry buried
the cause under its repeats.
"""

from __future__ import annotations

import logging

import attrs
import psycopg
import trio

from usenet_indexer.errors import SpoolStoreError
from usenet_indexer.prefetch.events import Landed, NotLanded, Observer, ignore
from usenet_indexer.prefetch.servers import ServerState
from usenet_indexer.prefetch.work import SharedWork
from usenet_indexer.spool.plan import ChunkJob
from usenet_indexer.spool.store import ChunkSink
from usenet_indexer.store.spool import SpoolChunk, SpoolIndex
from usenet_indexer.wire.frames import Codec

logger = logging.getLogger(__name__)


@attrs.define(eq=False)
class Landing:
    """Chunks into the spool store and its index, for every connection."""

    spool: SpoolIndex
    work: SharedWork
    observe: Observer = ignore
    # Why the last chunk did not land (None: it did).
    failing: str | None = None
    # Chunks that did not land in a row (0 once one is stored): while not 0, the
    # connections pause between chunks (the retry policy's delay for it).
    refusals: int = 0

    def refused(self, what: str, error: BaseException) -> None:
        """A chunk did not land (`what`: the chunk, and what was refused): the health
        report says why until one is stored, and the connections pause between chunks
        meanwhile. Logged as a warning at the first refusal of a run, with the error
        (later ones at debug level: the same cause, retried)."""
        why = f"{type(error).__name__}: {error}"
        # One line for the health report (a database error adds CONTEXT lines).
        self.failing = why.strip().splitlines()[0]
        self.refusals += 1
        if self.refusals == 1:
            logger.warning(
                "%s: %s; chunks are fetched again after a growing pause until one lands",
                *(what, why),
                exc_info=error,
            )
        else:
            logger.debug("%s (%d in a row): %s", what, self.refusals, why)

    def landed(self) -> None:
        """A chunk was stored and indexed: the store and the database take chunks again."""
        if self.refusals:
            logger.info("chunks land again, after %d that did not", self.refusals)
        self.failing = None
        self.refusals = 0

    async def land(self, job: ChunkJob, state: ServerState, writer: ChunkSink | None) -> None:
        """File and row of `job` (no writer, or no lines: a gap), in one thread call.

        Raises:
            psycopg.Error: the database refused or dropped the row.
            SpoolStoreError: the spool's object store refused the chunk.
        """
        lines = await trio.to_thread.run_sync(self._store, job, writer)
        state.chunks += 1
        self.observe(Landed(job, state.config.server, lines, gap=lines == 0))

    async def land_later(
        self, job: ChunkJob, clipped: ChunkJob, state: ServerState, writer: ChunkSink | None
    ) -> None:
        """Land `clipped` (the part of `job` the server has); then `job` is done, landed or not."""
        try:
            await self.land(clipped, state, writer)
        except (psycopg.Error, SpoolStoreError, OSError) as error:
            # The spool store refused the chunk (SpoolStoreError), the spool folder
            # cannot take it (OSError: a full disk, a folder gone), or the database
            # refused its row once it was stored (psycopg.Error): listed again.
            span = f"{job.group} {job.first}-{job.last}"
            if isinstance(error, psycopg.Error):
                what = f"{span}: not indexed: the database refused its row"
            else:
                what = f"{span}: not indexed: the spool did not take it"
            state.failed(error)
            self.refused(what, error)
            self.observe(NotLanded(job, state.config.server, str(error)))
        else:
            if writer is not None and writer.lines:
                # Only a chunk stored says the store takes chunks again: a gap
                # wrote nothing to it (a backfill below the low water marks lands
                # gaps all the while, and the report flapped to ok between them).
                self.landed()
        finally:
            if writer is not None:
                writer.abort()
            self.work.done(job)  # landed or not: a chunk that did not land is listed again

    def _store(self, job: ChunkJob, writer: ChunkSink | None) -> int:
        if writer is None or writer.lines == 0:
            return self._store_gap(job)
        path, size, codec = writer.commit()
        chunk = SpoolChunk(job.first, job.last, int(codec), str(path), writer.lines)
        span = (job.group, job.first, job.last)
        if self.spool.add_new(job.group_id, chunk, size):
            logger.info("%s %d-%d: %d lines, %.1f MB", *span, writer.lines, size / 1e6)
        else:
            # Said where its row was added (another writer, or an earlier try whose
            # answer was lost): once a chunk, as a gap.
            logger.debug(
                "%s %d-%d: indexed already; this landing's %d lines, %.1f MB not added",
                *(*span, writer.lines, size / 1e6),
            )
        return writer.lines

    def _store_gap(self, job: ChunkJob) -> int:
        chunk = SpoolChunk(job.first, job.last, int(Codec.NONE), None, 0)
        span = (job.group, job.first, job.last)
        if self.spool.add_new(job.group_id, chunk, 0):
            logger.info("%s %d-%d: no articles on the server (a gap)", *span)
        else:
            # Said where it was recorded (another writer, or an earlier try): once a gap.
            logger.debug("%s %d-%d: a gap recorded already", *span)
        return 0
