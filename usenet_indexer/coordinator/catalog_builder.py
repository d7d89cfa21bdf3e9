"""The coordinator's catalog builder: the searchable catalog follows the stored batches.

A stored batch marks its release keys pending (in its own transaction) and,
when the node API of this process stored it, pokes the builder's
`CatalogDue`; so a release is in the catalog a moment after the batch that
made it whole, not at the next tick. The builder then merges again what is
pending (store/catalog.py's `CatalogTable.build_pending`, in a worker
thread), at most once per `settle_seconds` so that a burst of batches is one
build. Every `every_seconds` it builds anyway: batches stored through
another coordinator process, and releases that went quiet (shown after
`quiet_seconds` without a chunk, complete or not). The database down or
restarting is a warning and a try at the next tick, never the coordinator's
end.
"""

from __future__ import annotations

import logging
import time

import attrs
import psycopg
import trio

from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.catalog import Built, CatalogTable

logger = logging.getLogger(__name__)

# A burst of batches (the edges of one range, one after another) is merged
# in one build: the builder waits this long after a poke before it builds.
SETTLE_SECONDS = 0.5


@attrs.define(eq=False)
class CatalogDue:
    """Batches were stored: the builder should look (trio side; `due` from any task)."""

    _event: trio.Event = attrs.field(factory=trio.Event)

    def due(self) -> None:
        self._event.set()

    async def wait(self, seconds: float) -> None:
        """Until poked, or `seconds` passed; the poke is then taken."""
        with trio.move_on_after(seconds):
            await self._event.wait()
        self._event = trio.Event()


async def build_catalog_forever(
    catalog: CatalogTable,
    due: CatalogDue,
    *,
    every_seconds: float,
    quiet_seconds: float,
    settle_seconds: float = SETTLE_SECONDS,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Build what batches touched whenever poked or every `every_seconds`; until cancelled."""
    task_status.started()
    while True:
        try:
            started = time.monotonic()
            pending, built, cpu = await trio.to_thread.run_sync(_measured, catalog, quiet_seconds)
            if built.keys or built.shown:
                # One line per build, in a form scripts/bench-scale parses.
                logger.info(
                    "catalog built: pending=%d merged=%d written=%d shown=%d "
                    "cpu_s=%.3f wall_s=%.3f",
                    *(pending, built.keys, built.releases, built.shown, cpu),
                    time.monotonic() - started,
                )
        except psycopg.OperationalError as error:
            logger.warning("catalog build put off: database unavailable: %s", error)
        await due.wait(every_seconds)
        await trio.sleep(settle_seconds)


def _measured(catalog: CatalogTable, quiet_seconds: float) -> tuple[int, Built, float]:
    """One build, in the worker thread: the keys pending just before it, what it did,
    and the CPU seconds of this thread alone (the event loop runs on meanwhile)."""
    pending = BatchStore(catalog.pool).pending_keys()
    started = time.thread_time()
    built = catalog.build_pending(quiet_seconds)
    return pending, built, time.thread_time() - started
