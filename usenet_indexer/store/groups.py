"""The groups the coordinator indexes."""

from __future__ import annotations

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.errors import UidxError

_ADD = "INSERT INTO groups (name, backfill_days, low, high) VALUES (%s, %s, %s, %s) RETURNING id"
_BY_NAME = "SELECT id FROM groups WHERE name = %s"
_GET = "SELECT id, name, backfill_days, low, high FROM groups WHERE name = %s"
_SET_WATERMARKS = "UPDATE groups SET low = %s, high = %s WHERE id = %s"
_LIST = """
    SELECT g.name, g.backfill_days, g.low, g.high,
           count(r.id), count(r.id) FILTER (WHERE r.state = 'done'),
           coalesce(sum(r.resume - r.first_article), 0),
           coalesce(sum(r.last_article - r.first_article + 1), 0),
           max(r.resume) FILTER (WHERE r.resume > r.first_article) - 1
    FROM groups g LEFT JOIN ranges r ON r.group_id = g.id
    GROUP BY g.id ORDER BY g.name
"""


class GroupExists(UidxError):
    """A group of that name exists already."""


class UnknownGroup(UidxError):
    """No group of that name."""


@attrs.frozen
class Group:
    """A group's own row: its id, backfill and the water marks last seen."""

    id: int
    name: str
    backfill_days: int | None
    low: int | None
    high: int | None


@attrs.frozen
class GroupRow:
    """A group as `uidx groups list` shows it."""

    name: str
    backfill_days: int | None
    low: int | None
    high: int | None
    ranges: int
    ranges_done: int
    articles_indexed: int
    articles_planned: int
    indexed_to: int | None  # the highest resume point of its ranges, less one

    @property
    def lag(self) -> int | None:
        """Articles on the server above what is indexed (None while `high` is unknown)."""
        if self.high is None:
            return None
        return max(
            0, self.high - (self.indexed_to if self.indexed_to is not None else (self.low or 1) - 1)
        )


@attrs.define(eq=False)
class GroupStore:
    pool: ConnectionPool

    def add(
        self,
        name: str,
        *,
        backfill_days: int | None = None,
        low: int | None = None,
        high: int | None = None,
    ) -> int:
        """Add a group; returns its id.

        Raises:
            GroupExists: the group is there already.
        """
        try:
            with self.pool.connection() as conn:
                row = conn.execute(_ADD, (name, backfill_days, low, high)).fetchone()
        except psycopg.errors.UniqueViolation as error:
            raise GroupExists(f"group {name!r} exists already") from error
        assert row is not None
        group_id: int = row[0]
        return group_id

    def id_of(self, name: str) -> int:
        """Raises UnknownGroup when there is no such group."""
        with self.pool.connection() as conn:
            row = conn.execute(_BY_NAME, (name,)).fetchone()
        if row is None:
            raise UnknownGroup(f"no group {name!r} (uidx groups add {name})")
        group_id: int = row[0]
        return group_id

    def get(self, name: str) -> Group:
        """Raises UnknownGroup when there is no such group."""
        with self.pool.connection() as conn:
            row = conn.execute(_GET, (name,)).fetchone()
        if row is None:
            raise UnknownGroup(f"no group {name!r} (uidx groups add {name})")
        return Group(*row)

    def set_watermarks(self, group_id: int, low: int, high: int) -> None:
        """Store the server's low and high water marks (what GROUP said last).

        Raises:
            UnknownGroup: there is no group with that id.
        """
        with self.pool.connection() as conn:
            updated = conn.execute(_SET_WATERMARKS, (low, high, group_id)).rowcount
        if updated != 1:
            raise UnknownGroup(f"no group with id {group_id}")

    def list(self) -> list[GroupRow]:
        with self.pool.connection() as conn:
            return [GroupRow(*row) for row in conn.execute(_LIST).fetchall()]
