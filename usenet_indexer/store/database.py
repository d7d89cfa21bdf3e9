"""Opening the coordinator's database for a command: resolve, start, migrate, pool."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings
from usenet_indexer.errors import DatabaseError
from usenet_indexer.store.migrate import check_schema, migrate
from usenet_indexer.store.pgcluster import Cluster, database_url
from usenet_indexer.store.pool import open_pool

log = logging.getLogger(__name__)


# How long a cancel request may take to reach the server (a local socket, or
# the network to DATABASE_URL's host).
CANCEL_TIMEOUT_SECONDS = 5.0


@attrs.define(eq=False)
class MigrationCancel:
    """Cuts short a `migrate_url(url, cancel=...)` running in another thread.

    A stop during a coordinator's start-up should not wait for a migration
    that may take minutes (an index over the whole catalog). `request()`
    sends the server a cancel for the statement running, and the migrations
    not begun are not begun: the one in progress is rolled back whole (each
    is one transaction) and `migrate_url` raises DatabaseError. psycopg
    cancels by itself only when the waiting thread gets a KeyboardInterrupt
    (a supervisor's start-up: supervisor/startup.py); a trio task cannot
    raise one in a worker thread. A cancel that reaches the server between
    two statements cancels nothing, so a caller asks again while the
    migrations still run.
    """

    requested: bool = False
    _conn: psycopg.Connection[Any] | None = None
    _lock: threading.Lock = attrs.Factory(threading.Lock)

    def request(self) -> None:
        """Cancel (thread-safe; blocks up to CANCEL_TIMEOUT_SECONDS)."""
        with self._lock:  # the connection is not closed meanwhile
            self.requested = True
            if self._conn is None:
                return
            try:
                self._conn.cancel_safe(timeout=CANCEL_TIMEOUT_SECONDS)
            except psycopg.Error as error:
                log.warning("cannot cancel the migration in progress: %s", error)

    @contextmanager
    def _watching(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        with self._lock:
            self._conn = conn
        try:
            yield
        finally:
            with self._lock:
                self._conn = None


def migrate_url(url: str, *, cancel: MigrationCancel | None = None) -> list[str]:
    """Apply uidx's migrations to the database at `url`; returns what was applied.

    Args:
        url: the database.
        cancel: what another thread may cut the migrations short with.

    Raises:
        DatabaseError: the database cannot be reached or migrated, or the
            migrations were cancelled.
    """
    cancel = cancel or MigrationCancel()
    try:
        with psycopg.connect(url, autocommit=True) as conn, cancel._watching(conn):
            return migrate(conn, cancelled=lambda: cancel.requested)
    except psycopg.Error as error:
        # One line: libpq adds its hint on a line of its own ("\tIs the server running...").
        said = " ".join(str(error).split())
        raise DatabaseError(f"cannot migrate the database: {said}") from error


def migrate_named(
    url: str, cluster: Cluster | None, *, cancel: MigrationCancel | None = None
) -> list[str]:
    """`migrate_url(url)` for a command or daemon; what was applied.

    Args:
        url: the database.
        cluster: the embedded cluster `url` is on; None when it is DATABASE_URL's.
        cancel: as `migrate_url`'s.

    Raises:
        DatabaseError: as `migrate_url`; about the operator's DATABASE_URL, the
            message names that setting.
    """
    try:
        return migrate_url(url, cancel=cancel)
    except DatabaseError as error:
        if cluster is None and not (
            cancel and cancel.requested
        ):  # the operator's DATABASE_URL: say which setting to look at
            raise DatabaseError(f"DATABASE_URL: {error}") from error
        raise


def check_schema_named(url: str, cluster: Cluster | None) -> None:
    """Refuse the database at `url` when another uidx migrated it; nothing is applied.

    Args:
        url: the database.
        cluster: the embedded cluster `url` is on; None when it is DATABASE_URL's.

    Raises:
        SchemaMismatch: a newer (or another) uidx migrated it (`migrate.check_applied`).
        DatabaseError: it cannot be reached; about the operator's DATABASE_URL, the
            message names that setting.
    """
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            check_schema(conn)
    except psycopg.Error as error:
        said = " ".join(str(error).split())
        setting = "DATABASE_URL: " if cluster is None else ""
        raise DatabaseError(f"{setting}cannot read the database's migrations: {said}") from error


@contextmanager
def opened(settings: Settings, *, max_size: int = 4) -> Iterator[ConnectionPool]:
    """A pool on the coordinator's database, migrated.

    With no DATABASE_URL the embedded cluster under the uidx home is used;
    an operator command starts it when it is not running and leaves it
    running (`uidx db stop` stops it), since the coordinator shares it.

    Raises:
        DatabaseError, ConfigError: the cluster cannot start or migrate.
    """
    url, cluster = database_url(settings.database_url, settings.home)
    if cluster is not None and not cluster.status().running:
        log.info("starting the embedded PostgreSQL in %s (uidx db stop stops it)", cluster.data_dir)
        cluster.start()
    applied = migrate_named(url, cluster)
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    with open_pool(url, settings, max_size=max_size) as pool:
        yield pool
