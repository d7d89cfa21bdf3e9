"""The coordinator's catalog builder: the searchable catalog follows the stored batches.

Every `catalog_build_seconds` it asks whether batches were stored since the
last build and, if so, builds the catalog again (store/catalog.py's
`CatalogTable.build`, in a worker thread). The database down or restarting
is a warning and a try at the next tick, never the coordinator's end.
"""

from __future__ import annotations

import logging
import time

import psycopg
import trio

from usenet_indexer.store.catalog import CatalogTable

logger = logging.getLogger(__name__)


async def build_catalog_forever(
    catalog: CatalogTable,
    every_seconds: float,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Build the catalog whenever batches were stored since the last build; until cancelled."""
    task_status.started()
    built: tuple[int, object] | None = None
    while True:
        try:
            mark = await trio.to_thread.run_sync(catalog.stored_mark)
            if mark != built and mark[0] > 0:
                started = time.monotonic()
                rows = await trio.to_thread.run_sync(catalog.build)
                built = mark
                logger.info(
                    "catalog built: %d releases in %.1f s", rows, time.monotonic() - started
                )
        except psycopg.OperationalError as error:
            logger.warning("catalog build put off: database unavailable: %s", error)
        await trio.sleep(every_seconds)
