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

The landing counts the chunks the spool store refused in a row (`refusals`,
back to 0 when a chunk is stored). While it is not 0 the connections pause
between chunks (connection.py): a chunk refused is fetched again, and
without a pause a store that is down (S3 unreachable, keys revoked, a full
disk) had each connection fetch the same chunks from its provider again and
again at full speed, spending the provider's bandwidth and quota on lines
thrown away.
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
    # Why the last chunk could not be written to the spool store (None: it was).
    failing: str | None = None
    # Chunks the spool store refused in a row (0 once one is stored): while not 0,
    # the connections pause between chunks (the retry policy's delay for it).
    refusals: int = 0

    def refused(self, why: str) -> None:
        """The spool store did not take a chunk: the health report says so until one
        is stored, and the connections pause between chunks meanwhile."""
        self.failing = why
        self.refusals += 1

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
        except (psycopg.Error, SpoolStoreError) as error:
            state.failed(error)
            if isinstance(error, SpoolStoreError):
                self.refused(str(error))
            logger.warning("%s %d-%d: not indexed: %s", job.group, job.first, job.last, error)
            self.observe(NotLanded(job, state.config.server, str(error)))
        except OSError as error:
            # The spool cannot take it (a full disk, a folder gone): the chunk is
            # listed again.
            state.failed(error)
            self.refused(f"{type(error).__name__}: {error}")
            logger.warning("%s %d-%d: not written: %s", job.group, job.first, job.last, error)
            self.observe(NotLanded(job, state.config.server, str(error)))
        else:
            if writer is not None and writer.lines:
                # Only a chunk stored says the store takes chunks again: a gap
                # wrote nothing to it (a backfill below the low water marks lands
                # gaps all the while, and the report flapped to ok between them).
                self.failing = None
                self.refusals = 0
        finally:
            if writer is not None:
                writer.abort()
            self.work.done(job)  # landed or not: a chunk that did not land is listed again

    def _store(self, job: ChunkJob, writer: ChunkSink | None) -> int:
        if writer is None or writer.lines == 0:
            return self._store_gap(job)
        path, size, codec = writer.commit()
        chunk = SpoolChunk(job.first, job.last, int(codec), str(path), writer.lines)
        if not self.spool.add_new(job.group_id, chunk, size):
            logger.warning("%s %d-%d: indexed by another writer", job.group, job.first, job.last)
        logger.info(
            "%s %d-%d: %d lines, %.1f MB", job.group, job.first, job.last, writer.lines, size / 1e6
        )
        return writer.lines

    def _store_gap(self, job: ChunkJob) -> int:
        chunk = SpoolChunk(job.first, job.last, int(Codec.NONE), None, 0)
        self.spool.add_new(job.group_id, chunk, 0)
        logger.info("%s %d-%d: no articles on the server (a gap)", job.group, job.first, job.last)
        return 0
