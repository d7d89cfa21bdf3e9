"""The prefetcher's housekeeping: the servers' figures, and the sweep of the spool.

Theory of operation
-------------------
Every `report_seconds` (5 s), and once more when stopped, a task reports
each server's figures (for `uidx status`: connections, lines, rate,
compression, errors) to `nntp_servers`, and sweeps the chunks that no
stream will read again (below the resume point of every range they overlap),
deleting their files (or objects) first, then their rows (see `sweep_spool`). A
round the database cannot take is skipped (logged); the next one writes the
figures as they are then. At its first round and every `leftovers_seconds`
(an hour) it also lists the spool and deletes the chunks stored but never
indexed that no stream will ever read (`remove_unindexed`,
spool/leftovers.py: a prefetcher killed, or its row refused, between a
chunk's upload and its row, for a chunk whose next fetch has another key).
Each round also reports the prefetcher's health (core/health.py: its
servers, the groups none of them carries and those one carries, its spool)
and renews its claims on the chunks it listed (store/spool.py: they lapse
CLAIM_SECONDS after a prefetcher that was killed); the last one, when
stopped, takes its health rows away. The claims are given back by the
prefetcher itself once every connection has stopped (daemon.py): a
connection cancelled in the middle of a claim finishes it in its worker
thread, so a release before that could leave a claim behind.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

import attrs
import psycopg
import trio
from psycopg_pool import ConnectionPool

from usenet_indexer.core.health import Observed
from usenet_indexer.errors import SpoolStoreError
from usenet_indexer.prefetch.events import Observer, Reported, ignore
from usenet_indexer.prefetch.options import PrefetchOptions
from usenet_indexer.prefetch.servers import ServerState
from usenet_indexer.prefetch.work import CLAIM_SECONDS
from usenet_indexer.spool.leftovers import ChunkKey, dead_keys
from usenet_indexer.spool.store import SpoolStore
from usenet_indexer.store.health import HealthStore
from usenet_indexer.store.heartbeat import forget, report, this_process
from usenet_indexer.store.servers import ServerStore
from usenet_indexer.store.spool import SpoolIndex

logger = logging.getLogger(__name__)

# The last figures and sweep when stopped: shielded, and at most this long.
LAST_ROUND_SECONDS = 10.0


@attrs.define(eq=False)
class Housekeeping:
    """Reports the servers' figures and sweeps the spool, until cancelled."""

    pool: ConnectionPool
    options: PrefetchOptions
    servers: list[ServerState]
    spool: SpoolIndex
    observe: Observer = ignore
    # What the prefetcher sees of its servers, groups and spool, for its health report.
    health: Callable[[], Sequence[Observed]] = tuple
    reporter: str = attrs.field(factory=this_process)
    _health_rows: HealthStore = attrs.field(
        init=False, default=attrs.Factory(lambda self: HealthStore(self.pool), takes_self=True)
    )
    _leftovers_at: float = attrs.field(init=False, default=-math.inf)  # the last look

    async def run(self) -> None:
        """A round every `report_seconds`, and a last one when cancelled."""
        last = trio.current_time()
        try:
            while True:
                await trio.sleep(self.options.report_seconds)
                last = await self._report_and_sweep(last)
        finally:
            # The last figures and sweep when stopped (shielded, time-limited).
            with trio.CancelScope(shield=True), trio.move_on_after(LAST_ROUND_SECONDS):
                await self._report_and_sweep(last, health=False)
            await forget(self._health_rows, self.reporter)  # a clean stop is not silence

    async def _report_and_sweep(self, last: float, *, health: bool = True) -> float:
        now = trio.current_time()
        reports = [state.report(now - last) for state in self.servers]
        if health:
            await report(self._health_rows, self.reporter, "prefetcher", self.health())
        try:
            if health:
                # Alive: its claims hold.
                await trio.to_thread.run_sync(self.spool.renew_claims, self.reporter, CLAIM_SECONDS)
            await trio.to_thread.run_sync(ServerStore(self.pool).report, reports)
            swept = await trio.to_thread.run_sync(sweep_spool, self.spool, self.options.spool)
        except psycopg.Error as error:
            logger.warning("housekeeping: database unavailable: %s", error)
            return now
        except SpoolStoreError as error:
            # Their rows stay: the next sweep deletes them again.
            logger.warning("housekeeping: spool chunks not deleted (tried again later): %s", error)
            return now
        if swept:
            logger.info("removed %d spool chunks below their ranges' resume points", swept)
        if health and now - self._leftovers_at >= self.options.leftovers_seconds:
            self._leftovers_at = now
            await self._remove_unindexed()
        self.observe(Reported(reports, swept))
        return now

    async def _remove_unindexed(self) -> None:
        grace = self.options.leftover_grace_seconds
        try:
            removed = await trio.to_thread.run_sync(
                remove_unindexed, self.spool, self.options.spool, grace
            )
        except (psycopg.Error, SpoolStoreError, OSError) as error:
            logger.warning("housekeeping: chunks never indexed not looked for: %s", error)
            return
        if removed:
            logger.info("removed %d spool chunks stored but never indexed", removed)


def remove_unindexed(spool: SpoolIndex, store: SpoolStore, grace_seconds: float) -> int:
    """Delete the chunks stored at least `grace_seconds` ago that no index row names
    and none ever will (spool/leftovers.py); returns how many.

    Raises:
        psycopg.Error: the index could not be read.
        OSError, SpoolStoreError: the store could not be listed, or refused a delete.
    """
    chunks = [c for c in map(ChunkKey.parse, store.stored(grace_seconds)) if c is not None]
    gone = dead_keys(spool.leftovers(chunks))
    store.delete(gone)
    return len(gone)


def sweep_spool(spool: SpoolIndex, store: SpoolStore) -> int:
    """Remove the chunks no stream will read again: files first, then their rows;
    returns how many.

    The chunks are below the resume point of every range they overlap (store/
    spool.py's _SWEEPABLE), which only moves forward, so a row whose file is gone
    is never read. A file the store did
    not delete keeps its row, and the next sweep tries it again (rows first
    left such objects in an S3 bucket for good when the store was down
    during a sweep: `scripts/chaos`'s "stray objects").

    Raises:
        psycopg.Error: the rows could not be read or removed.
        SpoolStoreError: the object store did not delete some (every row stays).
    """
    chunks = spool.sweepable()
    store.delete([path for _group, _first, path in chunks if path is not None])
    return spool.forget(chunks)
