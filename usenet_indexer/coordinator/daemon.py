"""The coordinator process: database, migrations, pool, the node API, signals.

Start-up runs in order and fails loudly: the database (the embedded cluster
is started when DATABASE_URL is not set, and stopped on exit if this process
started it), the migrations, the pool, then the node API. SIGINT, SIGTERM or
SIGHUP stops accepting, lets requests in flight finish (server.GRACEFUL_SECONDS),
and then closes the pool and the cluster, shielded and time-limited, so a
second signal or a hung server cannot leave the cluster running.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator
from functools import partial

import trio

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.coordinator.catalog_builder import (
    BuilderHealth,
    CatalogDue,
    build_catalog_forever,
)
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.spool.store import open_spool
from usenet_indexer.store.database import migrate_url
from usenet_indexer.store.health import HealthStore
from usenet_indexer.store.heartbeat import beat_forever
from usenet_indexer.store.pgcluster import database_url, start_if_stopped
from usenet_indexer.store.pool import open_pool
from usenet_indexer.supervisor.parent import watch_parent

logger = logging.getLogger(__name__)

# Closing the pool waits for its connections; stopping the cluster for
# PostgreSQL's fast shutdown. Either taking longer means something hangs.
CLOSE_POOL_SECONDS = 10.0
STOP_CLUSTER_SECONDS = 60.0

# SIGHUP too: the terminal or ssh session of a foreground `uidx coordinator` was
# closed. gunicorn reloads on SIGHUP; uidx has no reload, and a clean stop (the
# embedded PostgreSQL stopped) is what an operator expects, not a process killed
# by the signal's default action with its cluster left running.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def run_coordinator(
    settings: Settings,
    *,
    fenced: bool = True,
    parent_fd: int | None = None,
    listen_fd: int | None = None,
    metrics_fd: int | None = None,
) -> None:
    """Run the coordinator until SIGINT, SIGTERM or SIGHUP, or until its supervisor dies.

    Args:
        settings: the coordinator's settings.
        fenced: False only for the chaos script's negative control
            (`uidx coordinator --unsafe-no-fence`; see `BatchStore.fenced`).
        parent_fd: the supervisor's pipe (`--parent-fd`): its end stops the
            coordinator as SIGTERM does.
        listen_fd: a listening socket to serve on (the supervisor's, shared by
            its coordinator processes) instead of binding `settings.listen`.
        metrics_fd: the same for `settings.metrics_listen`.

    Raises:
        ConfigError: no DATABASE_URL and no PostgreSQL binaries; the listen
            address cannot be bound (this one inside exception groups, from
            the nurseries: see `errors.sole_error`); an S3 spool's bucket is
            missing or refuses the keys.
        DatabaseError: the database cannot be started, reached or migrated.
        SpoolStoreError: an S3 spool's endpoint cannot be reached.
    """
    url, cluster = database_url(settings.database_url, settings.home)
    started = await trio.to_thread.run_sync(start_if_stopped, cluster)
    try:
        await trio.to_thread.run_sync(migrate_url, url)
        pool = await trio.to_thread.run_sync(open_pool, url, settings)
        try:
            if not fenced:
                logger.warning("batches are stored WITHOUT the fence (a test-only switch)")
            stores = Stores.from_pool(
                pool, fenced=fenced, pure=settings.pure_indexer, edge_builds=settings.edge_builds
            )
            # An S3 spool's bucket and keys, once, before any edge is served.
            await trio.to_thread.run_sync(open_spool(settings).check)
            await _serve_until_signal(settings, stores, parent_fd, listen_fd, metrics_fd)
        finally:
            with trio.move_on_after(CLOSE_POOL_SECONDS, shield=True):
                await trio.to_thread.run_sync(pool.close)
    finally:
        if started is not None:
            with trio.move_on_after(STOP_CLUSTER_SECONDS, shield=True):
                await trio.to_thread.run_sync(started.stop)
                logger.info("embedded PostgreSQL in %s stopped", started.data_dir)


async def _serve_until_signal(
    settings: Settings,
    stores: Stores,
    parent_fd: int | None,
    listen_fd: int | None,
    metrics_fd: int | None,
) -> None:
    shutdown = trio.Event()
    # Opened before serving, so a signal during start-up is not lost.
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            due = CatalogDue()
            await nursery.start(
                partial(
                    serve,
                    settings,
                    stores,
                    shutdown=shutdown,
                    catalog_due=due,
                    listen_fd=listen_fd,
                    metrics_fd=metrics_fd,
                )
            )
            builder = trio.CancelScope()
            building = BuilderHealth()
            nursery.start_soon(_cancellable, builder, stores.build, due, settings, building)
            beating = trio.CancelScope()
            nursery.start_soon(_beating, beating, stores.health, building)
            stop = trio.Event()
            # What stops it: a signal, or the supervisor's end; both watchers
            # go once either has spoken, then the server drains.
            async with trio.open_nursery() as watchers:
                if parent_fd is not None:
                    await watchers.start(watch_parent, parent_fd, stop.set)
                watchers.start_soon(_first_signal, signals, stop)
                await stop.wait()
                watchers.cancel_scope.cancel()
            builder.cancel()
            beating.cancel()  # its rows taken away: a clean stop is not silence
            shutdown.set()


async def _cancellable(
    scope: trio.CancelScope,
    catalog: CatalogBuild,
    due: CatalogDue,
    settings: Settings,
    health: BuilderHealth,
) -> None:
    with scope:
        await build_catalog_forever(
            catalog,
            due,
            every_seconds=settings.catalog_build_seconds,
            quiet_seconds=settings.catalog_quiet_seconds,
            health=health,
        )


async def _beating(scope: trio.CancelScope, health: HealthStore, building: BuilderHealth) -> None:
    with scope:
        await beat_forever(health, "coordinator", building.observed)


async def _first_signal(signals: AsyncIterator[int], stop: trio.Event) -> None:
    async for signum in signals:
        logger.info("%s: shutting down", signal.Signals(signum).name)
        stop.set()
        return
