"""The groups the coordinator indexes."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
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
           coalesce(d.ranges, 0) + o.ranges, coalesce(d.ranges, 0),
           coalesce(d.indexed, 0) + o.indexed, coalesce(d.articles, 0) + o.articles,
           top.resume - 1,
           g.enabled, g.followed_to, g.backfill_floor, g.quirk, g.quirk_at,
           -- The live head is indexed up to the first live article not indexed.
           coalesce(o.live_resume - 1, live.last_article),
           backfill.first_article,
           -- How long the oldest live work has waited since the follower saw it.
           CASE WHEN live.last_article IS NOT NULL
                THEN coalesce(extract(epoch FROM now() - o.live_planned_at), 0)
           END::float8
    FROM groups g
        -- The done ranges counted (migrations/0032_range_scale.sql); the others read
        -- by ranges_open, and the ends by position: nothing here reads every done range.
        LEFT JOIN range_done d ON d.group_id = g.id
        CROSS JOIN LATERAL (
            -- sum(bigint) is numeric: bigint keeps the figures ints.
            SELECT count(*) AS ranges,
                   coalesce(sum(resume - first_article), 0)::bigint AS indexed,
                   coalesce(sum(last_article - first_article + 1), 0)::bigint AS articles,
                   min(resume) FILTER (WHERE kind = 'live') AS live_resume,
                   min(planned_at) FILTER (WHERE kind = 'live') AS live_planned_at
            FROM ranges WHERE group_id = g.id AND state <> 'done'
        ) o
        -- The highest resume point past its range's start: that of the highest such
        -- range (ranges never overlap, and a resume point stays within its range).
        LEFT JOIN LATERAL (
            SELECT resume FROM ranges WHERE group_id = g.id AND resume > first_article
            ORDER BY last_article DESC LIMIT 1
        ) top ON true
        LEFT JOIN LATERAL (
            SELECT last_article FROM ranges WHERE group_id = g.id AND kind = 'live'
            ORDER BY last_article DESC LIMIT 1
        ) live ON true
        -- (The lowest by its last article is the lowest: ranges never overlap.)
        LEFT JOIN LATERAL (
            SELECT first_article FROM ranges
            WHERE group_id = g.id AND kind = 'backfill' AND state = 'done'
            ORDER BY last_article LIMIT 1
        ) backfill ON true
    ORDER BY g.name
"""


# The enabled groups as the follower needs them (prefetch/follower.py).
_FOLLOWED = """
    SELECT g.id, g.name, g.backfill_days, g.backfill_floor, g.backfill_checked_at,
           g.followed_to, top.last_article, own.reached,
           -- Parked ranges wait for an operator, not for an edge: they do not hold
           -- the next backfill slice back.
           o.backfill_waiting, o.waiting_from, g.high, coalesce(near.planned, '{}')
    FROM groups g
        -- Each by an index (migrations/0032_range_scale.sql): a poll reads the plan's
        -- ends and the ranges it may meet, never every range the group has done.
        LEFT JOIN LATERAL (
            SELECT max(last_article) AS last_article FROM ranges WHERE group_id = g.id
        ) top ON true
        -- The lowest of its live and its backfill ranges (by ranges_group_kind: the lowest
        -- by its last article is the lowest, ranges never overlap).
        CROSS JOIN LATERAL (
            SELECT least(
                (SELECT first_article FROM ranges WHERE group_id = g.id AND kind = 'live'
                 ORDER BY last_article LIMIT 1),
                (SELECT first_article FROM ranges WHERE group_id = g.id AND kind = 'backfill'
                 ORDER BY last_article LIMIT 1)) AS reached
        ) own
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE kind = 'backfill' AND state IN ('planned', 'leased'))
                       AS backfill_waiting,
                   min(resume) AS waiting_from
            FROM ranges WHERE group_id = g.id AND state <> 'done'
        ) o
        -- Where the backfill may still plan: from the floor (any article while none is
        -- stored: the poll finds it) up to below its own ranges.
        CROSS JOIN LATERAL (
            SELECT coalesce(g.backfill_floor, 0) AS floor,
                   coalesce(own.reached - 1, g.followed_to, top.last_article) AS upper
        ) below
        -- The ranges the follower plans around (core/follow.py's GroupView.planned):
        -- those above what it follows (its mark; a group never polled is followed from
        -- the plan's top, above which there is none), and those below its own that the
        -- backfill may reach, down to the floor (ranges planned by hand). Those by
        -- position, as the ranges overlapping floor..upper: the ones starting inside and
        -- the nearest starting below the floor if it reaches it (ranges never overlap),
        -- not every range below the follower's (a history planned by hand before the
        -- group was followed, most of it below the floor).
        LEFT JOIN LATERAL (
            SELECT array_agg(ARRAY[first_article, last_article] ORDER BY first_article)
                       AS planned
            FROM (
                SELECT first_article, last_article FROM ranges
                WHERE group_id = g.id AND last_article > coalesce(g.followed_to, top.last_article)
                UNION
                SELECT first_article, last_article FROM ranges
                WHERE group_id = g.id AND g.backfill_days IS NOT NULL
                  AND first_article BETWEEN below.floor AND below.upper
                UNION
                SELECT first_article, last_article FROM (
                    SELECT first_article, last_article FROM ranges
                    WHERE group_id = g.id AND g.backfill_days IS NOT NULL
                      AND first_article < below.floor
                    ORDER BY first_article DESC LIMIT 1
                ) straddling
                WHERE last_article >= below.floor AND first_article <= below.upper
            ) met
        ) near ON true
    WHERE g.enabled
    ORDER BY g.name
"""
_SET_FLOOR = "UPDATE groups SET backfill_floor = %s, backfill_checked_at = now() WHERE id = %s"
_SET_FOLLOWED = "UPDATE groups SET followed_to = %s WHERE id = %s"
_SET_QUIRK = "UPDATE groups SET quirk = %s, quirk_at = now() WHERE id = %s"
_SET_ENABLED = "UPDATE groups SET enabled = %s WHERE name = %s"
# A new backfill_days: the floor is searched again at the next poll.
_SET_BACKFILL = """
    UPDATE groups SET backfill_days = %s, backfill_floor = NULL, backfill_checked_at = NULL
    WHERE name = %s
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


def _pairs(rows: Sequence[Sequence[int]]) -> tuple[tuple[int, int], ...]:
    return tuple((int(first), int(last)) for first, last in rows)


@attrs.frozen
class FollowedGroup:
    """An enabled group with what the follower plans from (see core/follow.py)."""

    id: int
    name: str
    backfill_days: int | None
    backfill_floor: int | None
    backfill_checked_at: datetime | None
    followed_to: int | None
    top: int | None  # the highest planned article, of any range
    reached: int | None  # the lowest article of the follower's own ranges (live, backfill)
    backfill_waiting: int  # backfill ranges planned or leased (not done, not parked)
    waiting_from: int | None  # the lowest resume point of the ranges not done
    high: int | None  # the high water mark stored last (at `groups add`, or a poll)
    # The ranges the follower plans around, (first, last) in article order: see
    # core/follow.py's GroupView.planned.
    planned: tuple[tuple[int, int], ...] = attrs.field(converter=_pairs)


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
    enabled: bool = True
    followed_to: int | None = None  # the follower's mark (None: never polled)
    backfill_floor: int | None = None  # the backfill's target article
    quirk: str | None = None  # the latest oddity a server showed
    quirk_at: datetime | None = None
    head_indexed_to: int | None = None  # the live head: indexed up to here
    backfill_reached: int | None = None  # the lowest article of a done backfill range
    lag_seconds: float | None = None  # how long the oldest live work waits (None: no live)

    @property
    def checked(self) -> bool:
        """Whether a server has answered GROUP for it (an unchecked group may not exist)."""
        return self.checked_at is not None

    @property
    def state(self) -> str:
        """What `uidx status` shows: "disabled", "checked", or "unchecked" without a
        GROUP answer."""
        if not self.enabled:
            return "disabled"
        return "checked" if self.checked else "unchecked"

    @property
    def lag(self) -> int | None:
        """Articles on the server above what is indexed (None while `high` is unknown):
        above the live head where the daemon follows the group."""
        if self.high is None:
            return None
        indexed = self.head_indexed_to if self.head_indexed_to is not None else self.indexed_to
        return max(0, self.high - (indexed if indexed is not None else (self.low or 1) - 1))


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

    def followed(self) -> builtins.list[FollowedGroup]:
        """The enabled groups, by name, with their plan's ends."""
        with self.pool.connection() as conn:
            return [FollowedGroup(*row) for row in conn.execute(_FOLLOWED).fetchall()]

    def set_floor(self, group_id: int, floor: int) -> None:
        """Store the backfill's floor, as found just now."""
        with self.pool.connection() as conn:
            conn.execute(_SET_FLOOR, (floor, group_id))

    def set_followed(self, group_id: int, followed_to: int) -> None:
        """Store the follower's mark (when it plans nothing; `RangeStore.plan` otherwise)."""
        with self.pool.connection() as conn:
            conn.execute(_SET_FOLLOWED, (followed_to, group_id))

    def note_quirk(self, group_id: int, quirk: str) -> None:
        """Store the latest oddity a server showed for the group."""
        with self.pool.connection() as conn:
            conn.execute(_SET_QUIRK, (quirk, group_id))

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Enable or disable a group (a disabled one is neither followed nor leased).

        Raises:
            UnknownGroup: no such group.
        """
        self._update(_SET_ENABLED, (enabled, name), name)

    def set_backfill(self, name: str, days: int | None) -> None:
        """Set how far back the daemon backfills (None: no backfill).

        Raises:
            UnknownGroup: no such group.
        """
        self._update(_SET_BACKFILL, (days, name), name)

    def _update(self, statement: str, args: tuple[object, ...], name: str) -> None:
        with self.pool.connection() as conn:
            if conn.execute(statement, args).rowcount != 1:
                raise UnknownGroup(f"no group {name!r} (uidx groups add {name})")
