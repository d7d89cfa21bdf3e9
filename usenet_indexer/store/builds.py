"""How the catalog keeps up: the keys waiting for a build, and the builds lately.

Several coordinator processes build the catalog, and `uidx status` is a
process of its own, so what it shows is kept in the database: the pending
keys (`catalog_pending`, with `since`, when each FIRST became pending) and
one `catalog_builds` row per build that did something, written by the
builder of whichever process built (coordinator/catalog_builder.py). Rows
older than `KEEP_SECONDS` are deleted as rows are added, so the table stays
a day's builds long.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs
from psycopg_pool import ConnectionPool

# A day of builds: enough to look back on an evening's trouble; a build every
# half second from several processes is still only ~10^5 small rows.
KEEP_SECONDS = 86_400

_RECORD = """
    INSERT INTO catalog_builds (pending, keys, written, shown, cpu_s, wall_s, host, pid)
    VALUES (%(pending)s, %(keys)s, %(written)s, %(shown)s, %(cpu_s)s, %(wall_s)s,
            %(host)s, %(pid)s)
"""
_FORGET = "DELETE FROM catalog_builds WHERE at < now() - make_interval(secs => %s)"
# The pending keys and the oldest: a scan of the keys waiting, which the
# builds keep few (a growing count is what this is here to show); the status
# page's, now and then. The lag alone (`BEHIND`, about once a second) reads the
# oldest through catalog_pending_since (migration 0040).
_PENDING = """
    SELECT count(*), min(since), now(),
           (SELECT count(*) FROM build_jobs WHERE expires_at > now())
    FROM catalog_pending
"""
# How long the oldest pending key has waited (NULL: none pending), on the database's clock.
BEHIND = """
    SELECT extract(epoch FROM now() - min(since))::float8 FROM catalog_pending
"""
_RECENT = """
    SELECT count(*), coalesce(sum(pending), 0), coalesce(sum(cpu_s), 0), coalesce(sum(keys), 0)
    FROM catalog_builds WHERE at > now() - make_interval(secs => %s)
"""
_LAST = """
    SELECT at, pending, keys, written, shown, cpu_s, wall_s, host, pid
    FROM catalog_builds ORDER BY at DESC, id DESC LIMIT 1
"""


@attrs.frozen
class BuildRecord:
    """One catalog build, as recorded.

    Attributes:
        pending: pending keys taken.
        keys: release keys merged (the closure of the pending ones).
        written: catalog rows inserted or changed.
        shown: rows shown for having gone quiet.
        cpu_s: the building thread's CPU seconds.
        wall_s: seconds from the build's start to its end.
        host: the host name of the process that built.
        pid: its process id.
        at: when it was recorded (database clock); None before it is.
    """

    pending: int
    keys: int
    written: int
    shown: int
    cpu_s: float
    wall_s: float
    host: str
    pid: int
    at: datetime | None = None


@attrs.frozen
class CatalogLag:
    """The catalog's lag and its builds in the lookback, as read in one call.

    Attributes:
        pending_keys: release keys waiting for a build.
        oldest_pending_since: when the oldest of them first became pending.
        lookback_seconds: how far back `builds` counts.
        builds: builds recorded in the lookback (by every coordinator process).
        builds_pending: pending keys those builds took.
        builds_cpu_s: their CPU seconds.
        builds_merged: release keys those builds merged: the pending ones and what
            their closure brought back (`merged_per_pending`).
        last: the last build recorded (within a day); None if none.
        now: the database's clock when asked.
        edge_jobs: builds edges are doing now (edge_builds; store/build_jobs.py).
    """

    pending_keys: int
    oldest_pending_since: datetime | None
    lookback_seconds: float
    builds: int
    builds_pending: int
    builds_cpu_s: float
    last: BuildRecord | None
    now: datetime
    edge_jobs: int = 0
    builds_merged: int = 0

    @property
    def merged_per_pending(self) -> float | None:
        """Keys the recent builds merged per pending key they took (None: none taken):
        1 where batches touch nothing stored before, more the more of what is stored
        each batch brings back (a build's log line says through what)."""
        return self.builds_merged / self.builds_pending if self.builds_pending else None

    @property
    def oldest_pending_seconds(self) -> float | None:
        """How long the oldest pending key has waited; None when none waits."""
        if self.oldest_pending_since is None:
            return None
        return max(0.0, (self.now - self.oldest_pending_since).total_seconds())

    @property
    def last_build_seconds(self) -> float | None:
        """Since the last build was recorded; None without one."""
        if self.last is None or self.last.at is None:
            return None
        return max(0.0, (self.now - self.last.at).total_seconds())


@attrs.define(eq=False)
class BuildStore:
    pool: ConnectionPool

    def record(self, build: BuildRecord) -> None:
        """Add one build's row (and forget the rows older than KEEP_SECONDS)."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(_RECORD, attrs.asdict(build))
            conn.execute(_FORGET, (float(KEEP_SECONDS),))

    def behind(self) -> float | None:
        """Seconds the oldest pending key has waited for a build (None: none pending)."""
        with self.pool.connection() as conn:
            row = conn.execute(BEHIND).fetchone()
        assert row is not None  # an aggregate without GROUP BY gives one row
        return None if row[0] is None else max(0.0, float(row[0]))

    def lag(self, lookback_seconds: float) -> CatalogLag:
        """The pending keys, and the builds recorded in the last `lookback_seconds`."""
        with self.pool.connection() as conn, conn.transaction():
            pending = conn.execute(_PENDING).fetchone()
            recent = conn.execute(_RECENT, (float(lookback_seconds),)).fetchone()
            last = conn.execute(_LAST).fetchone()
        # Aggregates without GROUP BY give one row.
        assert pending is not None
        assert recent is not None
        count, oldest, now, edge_jobs = pending
        builds, taken, cpu_s, merged = recent
        return CatalogLag(
            pending_keys=int(count),
            oldest_pending_since=oldest,
            lookback_seconds=lookback_seconds,
            builds=int(builds),
            builds_pending=int(taken),
            builds_cpu_s=float(cpu_s),
            last=None if last is None else _record_of(last),
            now=now,
            edge_jobs=int(edge_jobs),
            builds_merged=int(merged),
        )


def _record_of(row: tuple[Any, ...]) -> BuildRecord:
    at, pending, keys, written, shown, cpu_s, wall_s, host, pid = row
    return BuildRecord(pending, keys, written, shown, cpu_s, wall_s, host, pid, at=at)
