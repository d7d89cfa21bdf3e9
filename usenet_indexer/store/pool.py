"""The coordinator's connection pool, with the session settings every connection gets."""

from __future__ import annotations

import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings
from usenet_indexer.store import arrays

# Connections kept open: one per worker thread of the API and a few for
# operator commands; PostgreSQL itself is the limit, not the pool.
POOL_MAX = 16
# How long a caller waits for a connection: past it a request gets 503 rather
# than hanging while the database is down (psycopg_pool's default is 30 s).
GET_TIMEOUT_SECONDS = 5.0


def open_pool(url: str, settings: Settings, *, max_size: int = POOL_MAX) -> ConnectionPool:
    """A pool whose sessions cannot pin a range: statement and idle-in-transaction timeouts set.

    Args:
        url: the conninfo or URL of the database.
        settings: statement_timeout_seconds and idle_in_transaction_timeout_seconds.
        max_size: the most connections open at once.

    Returns:
        An open pool (close it, or use it as a context manager).
    """
    statement_ms = int(settings.statement_timeout_seconds * 1000)
    idle_ms = int(settings.idle_in_transaction_timeout_seconds * 1000)

    def configure(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        # Outside a transaction: between two SETs of one transaction the session
        # is idle in it, and a short idle timeout ended it there under load.
        conn.autocommit = True
        conn.execute(f"SET statement_timeout = {statement_ms}")
        conn.execute(f"SET idle_in_transaction_session_timeout = {idle_ms}")
        # Plan each statement for its own parameters. psycopg prepares a statement
        # run five times, and PostgreSQL may then keep one generic plan for it,
        # which for `key = ANY($1)` cannot see how many keys come: the catalog
        # build's look-ups by key became sequential scans (10 ms a call against
        # 0.4; PostgreSQL's time over a 1M-line run of batches and builds fell
        # from 20.8 to 9.5 s with custom plans). Planning costs ~0.1 ms a call.
        conn.execute("SET plan_cache_mode = force_custom_plan")
        # Timestamps in UTC, whatever zone the server's initdb found (the embedded
        # cluster's is UTC; a DATABASE_URL's may keep summer time): psycopg hands
        # timestamptz in the session's zone, and Python subtracts and compares two
        # datetimes of one zone by their wall clocks, an hour off across its
        # autumn change (the catalog's lag, the sweep's pace: helper-104).
        conn.execute("SET TimeZone = 'UTC'")
        conn.autocommit = False

    return ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        configure=configure,
        open=True,
        timeout=GET_TIMEOUT_SECONDS,
        name="uidx",
        # Array parameters made whole (store/arrays.py) go on every connection.
        kwargs={"application_name": "uidx", "context": arrays.adapters()},
    )
