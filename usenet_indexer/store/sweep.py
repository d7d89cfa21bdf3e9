"""The catalog sweep's row: every stored release key marked pending again, a slice a tick.

What the sweep is for and how it keeps its pace: core/sweep.py. Here: its one
row (`catalog_sweep`, migration 0045; made by the first tick) and the tick, in one transaction that
locks the row first, so coordinator processes on any machine sweep as one
(the second in a tick finds the first's clock moved on and nothing due). The
keys are marked pending by store/catalog.py's MARK_PENDING, `stored` as a batch
marks its own (a build that reaches one through a row or a window leaves it
pending for its own build, migration 0039) but with no dates (the build looks
around each whole span), and every coordinator process hears it
(NOTIFY_PENDING). While the build is behind the batches (store/builds.py's
BEHIND: its oldest pending key waited longer than catalog_max_lag_seconds), a
tick gives way: it marks nothing and leaves the clock where it was, and the row
says since when (`giving_way_since`, migration 0046, for `uidx status`); the
next tick that does not give way clears it.
"""

from __future__ import annotations

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.core.sweep import SweepState, pace
from usenet_indexer.store import arrays
from usenet_indexer.store.builds import BEHIND
from usenet_indexer.store.catalog import MARK_PENDING, NOTIFY_PENDING

# The one row, made by the first tick ever (a database just migrated holds no data).
_MADE = "INSERT INTO catalog_sweep DEFAULT VALUES ON CONFLICT DO NOTHING"
_LOCK = """
    SELECT cycles, cycle_started, after, swept_at, now() FROM catalog_sweep FOR UPDATE
"""
# The row, or (before the first tick) none: a row of nothing yet.
_STATE = """
    SELECT coalesce(s.cycles, 0), s.cycle_started, s.after, s.swept_at, now(),
        s.giving_way_since
    FROM (SELECT) AS one LEFT JOIN catalog_sweep AS s ON true
"""
# The planner's count of stored release keys (pg_class.reltuples, kept by
# autovacuum's analyses: no scan of a table of millions of rows every tick);
# -1 or 0 on a table never analysed, which is counted instead (a new catalog,
# small).
_ESTIMATE = "SELECT reltuples::bigint FROM pg_class WHERE oid = 'releases'::regclass"
_COUNT = "SELECT count(*) FROM releases"
# The next keys in key order after the last one marked (its primary key's index).
_NEXT = """
    SELECT key FROM releases WHERE %(after)s::bytea IS NULL OR key > %(after)s::bytea
    ORDER BY key LIMIT %(limit)s
"""
# Whether a key follows the last one marked (none: the cycle ended with it).
_AFTER = "SELECT EXISTS (SELECT FROM releases WHERE key > %s)"
_BEGIN = "UPDATE catalog_sweep SET swept_at = now(), cycle_started = now()"
# Giving way, since the first tick that did (the ticks after it write nothing).
_GIVES_WAY = """
    UPDATE catalog_sweep SET giving_way_since = now() WHERE giving_way_since IS NULL
"""
_GOES_ON = """
    UPDATE catalog_sweep SET giving_way_since = NULL WHERE giving_way_since IS NOT NULL
"""
_MOVED = """
    UPDATE catalog_sweep SET after = %(after)s, swept_at = %(swept_at)s,
        giving_way_since = NULL,
        cycles = cycles + %(ended)s,
        cycle_started = CASE WHEN %(ended)s > 0 THEN now() ELSE cycle_started END
"""


@attrs.frozen
class Swept:
    """What one tick did.

    Attributes:
        keys: release keys marked pending.
        ended: whether a cycle ended (the last key of the catalog was marked).
        gave_way: whether the tick gave way to the batches (the build behind).
    """

    keys: int
    ended: bool
    gave_way: bool = False


@attrs.define(eq=False)
class SweepStore:
    pool: ConnectionPool

    def tick(self, hours: float, behind_seconds: float = 0.0, tick_seconds: float = 0.0) -> Swept:
        """Mark the keys due now pending (see core/sweep.py's `pace`); the first tick
        ever only starts the clock.

        Args:
            hours: how long one cycle over every stored key takes (> 0).
            behind_seconds: a tick marks nothing while the oldest pending key has
                waited longer than this (the build is behind the batches: the sweep
                gives way, its clock unmoved; 0: never).
            tick_seconds: how often ticks come (core/sweep.py's `pace`).

        Raises:
            psycopg.OperationalError: the database is unavailable.
        """
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(_MADE)
            row = conn.execute(_LOCK).fetchone()
            assert row is not None  # made just above, or before
            _, _, after, swept_at, now = row
            if swept_at is None:
                conn.execute(_BEGIN)
                return Swept(0, ended=False)
            if behind_seconds > 0:
                waited = conn.execute(BEHIND).fetchone()
                if waited is not None and waited[0] is not None and waited[0] > behind_seconds:
                    conn.execute(_GIVES_WAY)
                    return Swept(0, ended=False, gave_way=True)
            estimate = conn.execute(_ESTIMATE).fetchone()
            total = int(estimate[0]) if estimate is not None else 0
            if total <= 0:
                counted = conn.execute(_COUNT).fetchone()
                total = int(counted[0]) if counted is not None else 0
            due = pace(total, hours, swept_at, now, tick_seconds)
            if not due.keys:
                conn.execute(_GOES_ON)
                return Swept(0, ended=False)
            keys = [
                bytes(key)
                for (key,) in conn.execute(
                    _NEXT, {"after": None if after is None else bytes(after), "limit": due.keys}
                )
            ]
            # Fewer than due, or none after the last: the last key of the catalog was
            # marked, the cycle ended (the next starts from the first key at the
            # next tick).
            ended = len(keys) < due.keys or not _exists(conn.execute(_AFTER, (keys[-1],)))
            if keys:
                conn.execute(MARK_PENDING, (True, arrays.keys(keys)))
                conn.execute(NOTIFY_PENDING)
            conn.execute(
                _MOVED,
                {
                    "after": None if ended else keys[-1],
                    "swept_at": due.swept_at,
                    "ended": int(ended),
                },
            )
        return Swept(len(keys), ended=ended)

    def state(self) -> SweepState:
        """Where the sweep is (`uidx status`, the page, /metrics)."""
        with self.pool.connection() as conn:
            row = conn.execute(_STATE).fetchone()
        assert row is not None  # a LEFT JOIN on one row gives one row
        cycles, cycle_started, after, swept_at, now, giving_way_since = row
        return SweepState(
            cycles=int(cycles),
            cycle_started=cycle_started,
            after=None if after is None else bytes(after),
            swept_at=swept_at,
            now=now,
            giving_way_since=giving_way_since,
        )


def _exists(cursor: psycopg.Cursor[tuple[object, ...]]) -> bool:
    row = cursor.fetchone()
    return bool(row and row[0])
