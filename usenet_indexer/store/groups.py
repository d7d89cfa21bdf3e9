"""The groups the coordinator indexes."""

from __future__ import annotations

from datetime import datetime

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.errors import UidxError

_ADD = """
    INSERT INTO groups (name, backfill_days, low, high, checked_at)
    VALUES (%(name)s, %(backfill_days)s, %(low)s, %(high)s,
            CASE WHEN %(checked)s THEN now() END)
    RETURNING id
"""
_BY_NAME = "SELECT id FROM groups WHERE name = %s"
_GET = "SELECT id, name, backfill_days, low, high, checked_at FROM groups WHERE name = %s"
# Only a server's GROUP answer gives the water marks: storing them checks the group.
_SET_WATERMARKS = "UPDATE groups SET low = %s, high = %s, checked_at = now() WHERE id = %s"
_LIST = """
    SELECT g.name, g.backfill_days, g.low, g.high, g.checked_at,
           count(r.id), count(r.id) FILTER (WHERE r.state = 'done'),
           -- sum(bigint) is numeric: bigint keeps the figures ints.
           coalesce(sum(r.resume - r.first_article), 0)::bigint,
           coalesce(sum(r.last_article - r.first_article + 1), 0)::bigint,
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
    checked_at: datetime | None  # marks last stored from a server's GROUP answer; None: never


@attrs.frozen
class GroupRow:
    """A group as `uidx groups list` and `uidx status` show it."""

    name: str
    backfill_days: int | None
    low: int | None
    high: int | None
    checked_at: datetime | None  # marks last stored from a server's GROUP answer; None: never
    ranges: int
    ranges_done: int
    articles_indexed: int
    articles_planned: int
    indexed_to: int | None  # the highest resume point of its ranges, less one

    @property
    def checked(self) -> bool:
        """Whether a server has answered GROUP for it (an unchecked group may not exist)."""
        return self.checked_at is not None

    @property
    def state(self) -> str:
        """What `uidx status` shows: "checked", or "unchecked" without a GROUP answer."""
        return "checked" if self.checked else "unchecked"

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
        checked: bool = False,
    ) -> int:
        """Add a group; returns its id.

        Args:
            name: the newsgroup.
            backfill_days: how far back `uidx ranges plan` goes by default.
            low: the server's lowest article, if known.
            high: the server's highest article, if known.
            checked: `low` and `high` are a server's GROUP answer of just now;
                otherwise the group is unchecked until `set_watermarks`.

        Raises:
            GroupExists: the group is there already.
        """
        args = {
            "name": name,
            "backfill_days": backfill_days,
            "low": low,
            "high": high,
            "checked": checked,
        }
        try:
            with self.pool.connection() as conn:
                row = conn.execute(_ADD, args).fetchone()
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

        The group is checked from then on (a server carries it).

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
