"""The prefetcher's NNTP servers as last reported, for `uidx status`."""

from __future__ import annotations

from datetime import datetime

import attrs
from psycopg_pool import ConnectionPool

_REPORT = """
    INSERT INTO nntp_servers AS s (server, connections, connection_limit, lines,
                                   lines_per_second, compression, errors, last_error, updated_at)
    VALUES (%(server)s, %(connections)s, %(limit)s, %(lines)s, %(rate)s, %(compression)s,
            %(errors)s, %(last_error)s, now())
    ON CONFLICT (server) DO UPDATE SET
        connections = excluded.connections, connection_limit = excluded.connection_limit,
        lines = excluded.lines, lines_per_second = excluded.lines_per_second,
        compression = excluded.compression, errors = excluded.errors,
        last_error = excluded.last_error, updated_at = excluded.updated_at
"""
_LIST = """
    SELECT server, connections, connection_limit, lines, lines_per_second, compression,
           errors, last_error, updated_at
    FROM nntp_servers ORDER BY server
"""


@attrs.frozen
class ServerReport:
    """One server as the prefetcher sees it: totals since the prefetcher started."""

    server: str
    connections: int
    connection_limit: int
    lines: int
    lines_per_second: float
    compression: str | None
    errors: int
    last_error: str | None
    updated_at: datetime | None = None


@attrs.define(eq=False)
class ServerStore:
    pool: ConnectionPool

    def report(self, reports: list[ServerReport]) -> None:
        """Replace the servers' rows with these figures."""
        rows = [
            {
                "server": r.server,
                "connections": r.connections,
                "limit": r.connection_limit,
                "lines": r.lines,
                "rate": r.lines_per_second,
                "compression": r.compression,
                "errors": r.errors,
                "last_error": r.last_error,
            }
            for r in reports
        ]
        with self.pool.connection() as conn, conn.cursor() as cursor:
            cursor.executemany(_REPORT, rows)

    def list(self) -> list[ServerReport]:
        with self.pool.connection() as conn:
            return [ServerReport(*row) for row in conn.execute(_LIST).fetchall()]
