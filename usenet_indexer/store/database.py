"""Opening the coordinator's database for a command: resolve, start, migrate, pool."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings
from usenet_indexer.errors import DatabaseError
from usenet_indexer.store.migrate import migrate
from usenet_indexer.store.pgcluster import database_url
from usenet_indexer.store.pool import open_pool

log = logging.getLogger(__name__)


def migrate_url(url: str) -> list[str]:
    """Apply uidx's migrations to the database at `url`; returns what was applied.

    Raises:
        DatabaseError: the database cannot be reached or migrated.
    """
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            return migrate(conn)
    except psycopg.Error as error:
        # One line: libpq adds its hint on a line of its own ("\tIs the server running...").
        said = " ".join(str(error).split())
        raise DatabaseError(f"cannot migrate the database: {said}") from error


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
    try:
        applied = migrate_url(url)
    except DatabaseError as error:
        if cluster is None:  # the operator's DATABASE_URL: say which setting to look at
            raise DatabaseError(f"DATABASE_URL: {error}") from error
        raise
    if applied:
        log.info("applied migrations: %s", ", ".join(applied))
    with open_pool(url, settings, max_size=max_size) as pool:
        yield pool
