"""The health rows (core/health.py): what each process reports, and since when."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core.health import SILENT_SECONDS, SILENT_SHOWN_SECONDS, Health, Observed, State

_REPORT = """
    INSERT INTO health AS h (component, subject, reporter, state, detail, since, seen_at)
    VALUES (%(component)s, %(subject)s, %(reporter)s, %(state)s, %(detail)s, now(), now())
    ON CONFLICT (component, subject, reporter) DO UPDATE SET
        since = CASE WHEN h.state = excluded.state THEN h.since ELSE excluded.since END,
        state = excluded.state, detail = excluded.detail, seen_at = excluded.seen_at
"""
# What the reporter no longer reports (a group carried again, a server gone
# from its settings) is no longer its to show.
_FORGET_REST = """
    DELETE FROM health WHERE reporter = %(reporter)s AND seen_at < now()
"""
_FORGET = "DELETE FROM health WHERE reporter = %(reporter)s"
# The rows of every reporter silent too long (core/health.SILENT_SHOWN_SECONDS):
# a report rewrites all of its reporter's rows, so they share its heartbeat's
# seen_at. The table holds a few rows per process running or dead within a day,
# so a scan of it is cheap.
_FORGET_SILENT = """
    DELETE FROM health WHERE seen_at < now() - make_interval(secs => %(seconds)s)
"""
_LIST = """
    SELECT component, subject, state, detail, reporter, since, seen_at, now()
    FROM health ORDER BY component, subject, reporter
"""


@attrs.define(eq=False)
class HealthStore:
    pool: ConnectionPool

    def report(self, reporter: str, heartbeat: str, observed: Sequence[Observed]) -> None:
        """Replace what `reporter` reports with `observed` and its heartbeat (component
        `heartbeat`, state ok), in one transaction; a state reported again keeps its
        `since`. The rows of any reporter silent for `SILENT_SHOWN_SECONDS` go (a killed
        process never takes them away itself)."""
        beat = Observed(heartbeat, reporter, State.OK)
        rows = [
            {
                "component": o.component,
                "subject": o.subject,
                "reporter": reporter,
                "state": o.state.value,
                "detail": o.detail,
            }
            for o in (beat, *observed)
        ]
        with self.pool.connection() as conn, conn.transaction():
            with conn.cursor() as cur:
                cur.executemany(_REPORT, rows)
            # now() is the transaction's: every row just written has it.
            conn.execute(_FORGET_REST, {"reporter": reporter})
            conn.execute(_FORGET_SILENT, {"seconds": SILENT_SECONDS + SILENT_SHOWN_SECONDS})

    def forget(self, reporter: str) -> None:
        """A process that stops cleanly takes its rows away."""
        with self.pool.connection() as conn:
            conn.execute(_FORGET, {"reporter": reporter})

    def list(self) -> tuple[list[Health], datetime | None]:
        """Every row as stored, and the database's clock (None: no rows)."""
        with self.pool.connection() as conn:
            rows = conn.execute(_LIST).fetchall()
        now = rows[0][-1] if rows else None
        return [
            Health(str(c), str(s), State(st), str(d), str(r), since, seen)
            for c, s, st, d, r, since, seen, _ in rows
        ], now
