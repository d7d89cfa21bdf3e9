"""The coordinator process: database, migrations, pool, the node API, signals.

Start-up runs in order and fails loudly: the database (the embedded cluster
is started when DATABASE_URL is not set, and stopped on exit if this process
started it, or took it over from one killed before: store/clusterowner.py),
the migrations, the pool, then the node API. SIGINT, SIGTERM or
SIGHUP stops accepting, lets requests in flight finish (server.GRACEFUL_SECONDS),
and then closes the pool and the cluster, shielded and time-limited, so a
second signal or a hung server cannot leave the cluster running. The signals
are received from the first moment: a stop during start-up cancels the
migration in progress in the server (rolled back) and closes what was opened
the same way.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator
from functools import partial

import attrs
import trio
from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.coordinator.catalog_builder import (
    BuilderHealth,
    CatalogDue,
    build_catalog_forever,
    sweep_catalog_forever,
)
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.errors import DatabaseError
from usenet_indexer.spool.store import open_spool
from usenet_indexer.store.clusterowner import OwnedCluster, start_if_stopped
from usenet_indexer.store.database import MigrationCancel, migrate_named
from usenet_indexer.store.health import HealthStore
from usenet_indexer.store.heartbeat import beat_forever
from usenet_indexer.store.pgcluster import Cluster, database_url
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.sweep import SweepStore
from usenet_indexer.supervisor.arbiter import STOP_SIGNALS
from usenet_indexer.supervisor.parent import watch_parent

logger = logging.getLogger(__name__)

# Closing the pool waits for its connections; stopping the cluster for
# PostgreSQL's fast shutdown. Either taking longer means something hangs.
CLOSE_POOL_SECONDS = 10.0
STOP_CLUSTER_SECONDS = 60.0
# A migration cancelled by a stop ends within a moment of the server's cancel;
# if it has not after this long, start-up waits for it as for any thread (the
# cluster's fast stop then ends it anyway).
CANCEL_MIGRATIONS_SECONDS = 30.0
# A cancel that came between two statements is sent again after this long.
CANCEL_AGAIN_SECONDS = 1.0


async def run_coordinator(
    settings: Settings,
    *,
    fenced: bool = True,
    parent_fd: int | None = None,
    listen_fd: int | None = None,
    metrics_fd: int | None = None,
) -> None:
    """Run the coordinator until SIGINT, SIGTERM or SIGHUP, or until its supervisor dies.

    A stop during start-up (the migrations may take minutes) ends it there:
    what was opened is closed and the cluster this process started stopped,
    as after serving.

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
    stop = trio.Event()
    # Opened before anything starts: a signal during start-up is the stop it
    # asks for, not the default action that killed the process and left the
    # cluster it had started running (nobody stopped it after: the next start
    # found it running, so did not own it).
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as watchers:
            # What stops it: a signal, or the supervisor's end; both watchers
            # go once either has spoken, or once the coordinator is done.
            if parent_fd is not None:
                await watchers.start(watch_parent, parent_fd, stop.set)
            watchers.start_soon(_first_signal, signals, stop)
            opened = _Opened()
            try:
                stores = await _start_up(settings, stop, opened, fenced)
                if stores is not None:
                    await _serve_until(stop, settings, stores, listen_fd, metrics_fd)
            finally:
                await opened.close()
            watchers.cancel_scope.cancel()


@attrs.define(eq=False)
class _Opened:
    """What start-up has opened so far; closed (shielded, time-limited) however it ends."""

    started: OwnedCluster | None = None  # the cluster this process started (or took over)
    pool: ConnectionPool | None = None

    async def close(self) -> None:
        if self.pool is not None:
            with trio.move_on_after(CLOSE_POOL_SECONDS, shield=True):
                await trio.to_thread.run_sync(self.pool.close)
        if self.started is not None:
            with trio.move_on_after(STOP_CLUSTER_SECONDS, shield=True):
                await trio.to_thread.run_sync(self.started.stop)
                logger.info("embedded PostgreSQL in %s stopped", self.started.data_dir)


async def _start_up(
    settings: Settings, stop: trio.Event, opened: _Opened, fenced: bool
) -> Stores | None:
    """The database started, migrated and pooled (in `opened`), and the spool checked:
    the stores; None once `stop` is set, which cancels what is in progress.

    A step in a worker thread is not abandoned: it ends first (a cluster whose
    start was cut short would be running with nobody to stop it)."""
    stores: Stores | None = None
    url, cluster = database_url(settings.database_url, settings.home)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_when_set, stop, nursery.cancel_scope)
        opened.started = await trio.to_thread.run_sync(start_if_stopped, cluster)
        await _migrate(url, cluster, stop)
        opened.pool = await trio.to_thread.run_sync(open_pool, url, settings)
        if not fenced:
            logger.warning("batches are stored WITHOUT the fence (a test-only switch)")
        stores = Stores.from_pool(
            opened.pool, fenced=fenced, pure=settings.pure_indexer, edge_builds=settings.edge_builds
        )
        # An S3 spool's bucket and keys, once, before any edge is served.
        await trio.to_thread.run_sync(open_spool(settings).check)
        nursery.cancel_scope.cancel()
    if stop.is_set():
        logger.info("stopped during start-up")
        return None
    return stores


async def _cancel_when_set(stop: trio.Event, scope: trio.CancelScope) -> None:
    await stop.wait()
    scope.cancel()


async def _migrate(url: str, cluster: Cluster | None, stop: trio.Event) -> None:
    """The migrations, cut short by `stop`: the one in progress is cancelled in the
    server (rolled back), not waited for; start-up's cancellation then follows."""
    cancel = MigrationCancel()
    ended = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_migrations, stop, cancel, ended)
        try:
            await trio.to_thread.run_sync(partial(migrate_named, url, cluster, cancel=cancel))
        except DatabaseError:
            if not cancel.requested:
                raise
            logger.info("the migrations were cancelled and rolled back")
        finally:
            ended.set()
            nursery.cancel_scope.cancel()


async def _cancel_migrations(stop: trio.Event, cancel: MigrationCancel, ended: trio.Event) -> None:
    await stop.wait()
    # Shielded from start-up's cancellation, which the same stop brings, and
    # time-limited. Asked again every second while the migrations run: a cancel
    # that reaches the server between two statements cancels nothing.
    with trio.move_on_after(CANCEL_MIGRATIONS_SECONDS, shield=True):
        while not ended.is_set():
            await trio.to_thread.run_sync(cancel.request)
            with trio.move_on_after(CANCEL_AGAIN_SECONDS):
                await ended.wait()


async def _serve_until(
    stop: trio.Event,
    settings: Settings,
    stores: Stores,
    listen_fd: int | None,
    metrics_fd: int | None,
) -> None:
    shutdown = trio.Event()
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
        sweeper = trio.CancelScope()
        if settings.catalog_sweep_hours > 0:
            nursery.start_soon(_sweeping, sweeper, stores.sweeps, due, settings)
        beating = trio.CancelScope()
        nursery.start_soon(_beating, beating, stores.health, building)
        await stop.wait()
        builder.cancel()
        sweeper.cancel()
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


async def _sweeping(
    scope: trio.CancelScope, sweeps: SweepStore, due: CatalogDue, settings: Settings
) -> None:
    with scope:
        await sweep_catalog_forever(
            sweeps,
            due,
            hours=settings.catalog_sweep_hours,
            every_seconds=settings.catalog_build_seconds,
            behind_seconds=settings.catalog_max_lag_seconds,
        )


async def _beating(scope: trio.CancelScope, health: HealthStore, building: BuilderHealth) -> None:
    with scope:
        await beat_forever(health, "coordinator", building.observed)


async def _first_signal(signals: AsyncIterator[int], stop: trio.Event) -> None:
    async for signum in signals:
        logger.info("%s: shutting down", signal.Signals(signum).name)
        stop.set()
        return
