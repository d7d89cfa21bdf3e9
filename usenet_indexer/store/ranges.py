"""Planned article ranges and their fenced leases.

Theory of operation
-------------------
A range is planned, leased, done, or failed (parked). A lease goes to the
oldest plan that is neither done nor parked and not held by a live lease
(`FOR UPDATE SKIP LOCKED`, so concurrent nodes never wait on each other nor
get the same range), and raises the range's epoch: every later call of the
holder names the epoch, and a call naming an older one (a node that lost its
lease while stopped, or slowed down past its deadline) changes nothing and
gets 409. Deadlines use the database's clock, never a node's. A lease with
no batch or heartbeat until its deadline passes to the next node, which
resumes at the resume point (the last stored batch's end).

Parking. A range whose holder's work the coordinator refuses (a batch past
the range's end, a finish before it) is given back by the edge and leased
again at once; if the refusal comes from the range itself, that loops for
ever. So each such refusal of the holder is counted on the range row
(`refuse`), a stored batch or a finish sets the count back to 0, and the
`refusals_to_park`-th refusal in a row parks the range: state 'failed', no
holder, the reason kept. Nothing leases a parked range until `uidx ranges
retry` (`retry`) plans it again.

Stopping. An edge told to stop gives its ranges back with `stopping`, which
counts a stop on its node row first, committed before the range is planned
again. Its lease call, held open for new work, may still be looking when the
range comes back planned (the coordinator has not yet seen the call's
connection close): the call remembers the count its first look saw (`look`),
and leases nothing once the count has moved, so the range is not leased
straight back to the node that is going away.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core.follow import Kind
from usenet_indexer.errors import UidxError

# Oldest first, or (backfill) newest first: ranges are leased in plan order.
_PLAN = """
    INSERT INTO ranges (group_id, first_article, last_article, resume, kind)
    -- f + least(...), not least(f + size - 1, ...): near a bigint's end f + size overflows.
    SELECT %(group)s, f, f + least(%(size)s::bigint - 1, %(last)s::bigint - f), f, %(kind)s
    FROM generate_series(%(first)s::bigint, %(last)s::bigint, %(size)s::bigint)
         WITH ORDINALITY AS s(f, n)
    ORDER BY CASE WHEN %(newest_first)s THEN -n ELSE n END
    RETURNING id
"""
# Heard by waiting lease calls (coordinator/landings.py): work is there.
PLANNED_CHANNEL = "uidx_ranges_planned"
_NOTIFY_PLANNED = "SELECT pg_notify(%s, %s)"
_OVERLAP = """
    -- By position (ranges_group_first), not by reading the group's every range: one
    -- starting inside [first, last], or the nearest starting below reaching into it
    -- (ranges never overlap: this check, under the group's lock, keeps them so).
    (SELECT id, first_article, last_article FROM ranges
     WHERE group_id = %(group)s AND first_article BETWEEN %(first)s AND %(last)s
     ORDER BY first_article LIMIT 1)
    UNION ALL
    (SELECT id, first_article, last_article FROM (
         SELECT id, first_article, last_article FROM ranges
         WHERE group_id = %(group)s AND first_article < %(first)s
         ORDER BY first_article DESC LIMIT 1
     ) below
     WHERE last_article >= %(first)s)
    LIMIT 1
"""
_LEASE = """
    WITH node AS (
        -- Never to a revoked node (one revoked while its lease call waited): the
        -- share lock waits for a revoke in progress (store/nodes.py) and then sees it.
        SELECT id, stops FROM nodes WHERE id = %(node)s AND revoked_at IS NULL FOR KEY SHARE
    ), candidate AS (
        SELECT r.id FROM ranges r JOIN groups g ON g.id = r.group_id
        WHERE r.state IN ('planned', 'leased') AND (r.state = 'planned' OR r.deadline < now())
          AND g.enabled
          -- Nothing to a node that said it stops since the call began (see _STOPPED).
          AND EXISTS (SELECT FROM node WHERE %(stops)s::bigint IS NULL OR stops = %(stops)s)
        -- The live head first (see core/follow.py), then in plan order.
        ORDER BY (r.kind <> 'live'), r.planned_at, r.id
        LIMIT 1
        FOR UPDATE OF r SKIP LOCKED
    ), leased AS (
        UPDATE ranges r
        SET state = 'leased', holder = %(node)s, epoch = r.epoch + 1,
            deadline = now() + make_interval(secs => %(ttl)s)
        FROM candidate, groups g
        WHERE r.id = candidate.id AND g.id = r.group_id
        RETURNING r.id, g.name, g.id, r.first_article, r.last_article, r.resume, r.epoch
    )
    SELECT node.stops, leased.* FROM node LEFT JOIN leased ON true
"""
_HEARTBEAT = """
    UPDATE ranges SET deadline = now() + make_interval(secs => %(ttl)s)
    WHERE id = %(range)s AND epoch = %(epoch)s AND holder = %(node)s AND state = 'leased'
"""
_FINISH = """
    UPDATE ranges SET state = 'done', finished_at = now(), deadline = NULL,
        refusals = 0, refusal = NULL
    WHERE id = %(range)s AND epoch = %(epoch)s AND holder = %(node)s AND state = 'leased'
      AND resume > last_article
"""
_HELD_BY = """
    SELECT r.resume > r.last_article FROM ranges r
    WHERE id = %(range)s AND epoch = %(epoch)s AND holder = %(node)s AND state = 'leased'
"""
_RELEASE = """
    UPDATE ranges SET state = 'planned', holder = NULL, deadline = NULL
    WHERE id = %(range)s AND epoch = %(epoch)s AND holder = %(node)s AND state = 'leased'
"""
# A release as the node stops counts the stop first, committed on its own: a lease
# that sees the range planned sees the count moved too. Not in the release's
# statement: it held the range's row while it waited for the node's, the other way
# round from a revoke (store/nodes.py: the node's row, then its ranges), and the two
# deadlocked. Nor first in its transaction: the node's row, held while the release
# waits for the range's (a batch being stored), would stall every call of the node
# (`NodeStore.authenticate` writes last_seen there).
_STOPPED = "UPDATE nodes SET stops = stops + 1 WHERE id = %(node)s"
_HELD = """
    SELECT r.id, g.name, g.id, r.first_article, r.last_article, r.resume, r.epoch
    FROM ranges r JOIN groups g ON g.id = r.group_id
        JOIN nodes n ON n.id = r.holder AND n.revoked_at IS NULL
    WHERE r.id = %(range)s AND r.holder = %(node)s AND r.state = 'leased'
"""
_STATES = """
    -- The done ranges from their counts (migrations/0032_range_scale.sql), the others
    -- by ranges_open: a scrape never reads every range ever done.
    SELECT g.name, s.state, s.n, s.indexed, s.articles, s.expired
    FROM (
        SELECT group_id, state, count(*) AS n,
               coalesce(sum(resume - first_article), 0)::bigint AS indexed,
               coalesce(sum(last_article - first_article + 1), 0)::bigint AS articles,
               count(*) FILTER (WHERE state = 'leased' AND deadline < now()) AS expired
        FROM ranges WHERE state <> 'done' GROUP BY group_id, state
        UNION ALL
        SELECT group_id, 'done', ranges, indexed, articles, 0
        FROM range_done WHERE ranges > 0
    ) s JOIN groups g ON g.id = s.group_id
    ORDER BY g.name, s.state
"""


_PROGRESS = """
    SELECT count(*) FILTER (WHERE state IN ('planned', 'leased')),
           count(*) + (SELECT coalesce(sum(ranges), 0) FROM range_done)::bigint,
           count(*) FILTER (WHERE state = 'failed')
    FROM ranges WHERE state <> 'done'
"""
# One refusal of the holder's work counted; the limit-th in a row parks the range.
_REFUSE = """
    UPDATE ranges SET refusals = refusals + 1, refusal = %(reason)s,
        state = CASE WHEN refusals + 1 >= %(limit)s THEN 'failed' ELSE state END,
        holder = CASE WHEN refusals + 1 >= %(limit)s THEN NULL ELSE holder END,
        deadline = CASE WHEN refusals + 1 >= %(limit)s THEN NULL ELSE deadline END,
        failed_at = CASE WHEN refusals + 1 >= %(limit)s THEN now() ELSE failed_at END
    WHERE id = %(range)s AND epoch = %(epoch)s AND holder = %(node)s AND state = 'leased'
    RETURNING refusals, state = 'failed'
"""
_PARKED = """
    SELECT r.id, g.name, r.first_article, r.last_article, r.resume, r.refusals,
           coalesce(r.refusal, ''), r.failed_at
    FROM ranges r JOIN groups g ON g.id = r.group_id
    WHERE r.state = 'failed' ORDER BY r.id
"""
_RETRY = """
    UPDATE ranges SET state = 'planned', refusals = 0, refusal = NULL, failed_at = NULL
    WHERE state = 'failed' AND (%(all)s OR id = ANY(%(ids)s::bigint[]))
    RETURNING id, group_id
"""
_STATE_OF = "SELECT id, state FROM ranges WHERE id = ANY(%s::bigint[])"


class PlanOverlap(UidxError):
    """A planned range would overlap one planned before."""


class NotParked(UidxError):
    """`uidx ranges retry` named a range that does not exist or is not parked."""


class Finish(enum.Enum):
    """What a finish call did."""

    OK = "ok"
    LOST = "lost"  # not the holder, or a stale epoch: 409
    INCOMPLETE = "incomplete"  # the resume point is not past the range's end: 409


@attrs.frozen
class Lease:
    """A range granted to a node, from its resume point (`next`)."""

    range_id: int
    group: str
    group_id: int
    first: int
    last: int
    next: int
    epoch: int

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.range_id,
            "group": self.group,
            "first": self.first,
            "last": self.last,
            "next": self.next,
            "epoch": self.epoch,
        }


@attrs.frozen
class Look:
    """One look of a held lease call (`RangeStore.look`).

    Attributes:
        lease: the range leased, or None.
        stops: the node's stop count as this look saw it; a look that leased
            nothing because the count moved returns the new count.
    """

    lease: Lease | None
    stops: int | None


@attrs.frozen
class Progress:
    """Ranges planned in all, those left to index (planned or leased), and those parked."""

    planned: int
    not_done: int
    parked: int = 0


@attrs.frozen
class Refusal:
    """A refusal counted on a range: the refusals in a row, and whether it is parked now."""

    refusals: int
    parked: bool


@attrs.frozen
class ParkedRange:
    """A range parked after refusals in a row (state 'failed'), for `uidx status`.

    Attributes:
        range_id, group, first, last: the range.
        resume: its resume point (what its stored batches reached).
        refusals: the refusals in a row that parked it.
        reason: the last refusal's answer.
        failed_at: when it was parked.
    """

    range_id: int
    group: str
    first: int
    last: int
    resume: int
    refusals: int
    reason: str
    failed_at: datetime


@attrs.frozen
class RangeStateRow:
    """Ranges of one group in one state, for `uidx status`."""

    group: str
    state: str
    ranges: int
    articles_indexed: int
    articles: int
    expired: int


@attrs.define(eq=False)
class RangeStore:
    pool: ConnectionPool

    def plan(
        self,
        group_id: int,
        first: int,
        last: int,
        size: int,
        *,
        kind: Kind = Kind.MANUAL,
    ) -> list[int]:
        """Plan [first, last] as ranges of `size` articles; returns their ids in lease order
        (oldest first; newest first for the backfill).

        Args:
            group_id, first, last, size: what to plan.
            kind: who plans it (the follower's live head is leased first).

        Raises:
            PlanOverlap: part of [first, last] is planned already.
            ValueError: first > last or size < 1.
        """
        if first > last or size < 1 or first < 0:
            raise ValueError(f"cannot plan {first}..{last} in ranges of {size}")
        args = {
            "group": group_id,
            "first": first,
            "last": last,
            "size": size,
            "kind": kind.value,
            "newest_first": kind is Kind.BACKFILL,
        }
        with self.pool.connection() as conn, conn.transaction():
            # One planner at a time per group: the overlap check then holds.
            conn.execute("SELECT pg_advisory_xact_lock(1, %s::int)", (group_id % (1 << 31),))
            clash = conn.execute(_OVERLAP, args).fetchone()
            if clash is not None:
                raise PlanOverlap(f"range {clash[0]} ({clash[1]}..{clash[2]}) is planned already")
            ids = [row[0] for row in conn.execute(_PLAN, args).fetchall()]
            conn.execute(_NOTIFY_PLANNED, (PLANNED_CHANNEL, str(group_id)))
            return ids

    def lease(self, node_id: int, ttl_seconds: float) -> Lease | None:
        """The oldest range nobody holds, leased to this node with a new epoch; None if none."""
        return self.look(node_id, ttl_seconds, None).lease

    def look(self, node_id: int, ttl_seconds: float, stops: int | None) -> Look:
        """A lease (as `lease`) for one look of a held lease call.

        Args:
            stops: the node's stop count its call's first look saw (`Look.stops`);
                None for the first look. Once the count has moved (the node gave a
                range back as it stops, see `release`), nothing is leased.
        """
        args = {"node": node_id, "ttl": ttl_seconds, "stops": stops}
        with self.pool.connection() as conn:
            row = conn.execute(_LEASE, args).fetchone()
        if row is None:  # revoked, or no such node
            return Look(None, stops)
        return Look(Lease(*row[1:]) if row[1] is not None else None, int(row[0]))

    def heartbeat(self, node_id: int, range_id: int, epoch: int, ttl_seconds: float) -> bool:
        """Move the lease's deadline; False when the lease is lost."""
        args = {"node": node_id, "range": range_id, "epoch": epoch, "ttl": ttl_seconds}
        with self.pool.connection() as conn:
            return conn.execute(_HEARTBEAT, args).rowcount == 1

    def finish(self, node_id: int, range_id: int, epoch: int) -> Finish:
        """Mark the range done; it must be held with this epoch and indexed to its end."""
        args = {"node": node_id, "range": range_id, "epoch": epoch}
        with self.pool.connection() as conn:
            if conn.execute(_FINISH, args).rowcount == 1:
                return Finish.OK
            held = conn.execute(_HELD_BY, args).fetchone()
        return Finish.LOST if held is None else Finish.INCOMPLETE

    def release(self, node_id: int, range_id: int, epoch: int, *, stopping: bool = False) -> bool:
        """Give the range back (planned again, resume point kept); False when the lease is lost.

        Args:
            stopping: the node gives it back because it stops: its lease calls
                held open meanwhile lease nothing more (`look`), even when the
                lease is lost.
        """
        args = {"node": node_id, "range": range_id, "epoch": epoch}
        with self.pool.connection() as conn:
            if stopping:
                conn.execute(_STOPPED, args)
                conn.commit()  # before the range is planned (see _STOPPED)
            return conn.execute(_RELEASE, args).rowcount == 1

    def refuse(
        self, node_id: int, range_id: int, epoch: int, reason: str, limit: int
    ) -> Refusal | None:
        """Count a refusal of the holder's work on the range; park it at `limit` in a row.

        Args:
            node_id, range_id, epoch: the call refused (only the holder's count).
            reason: the refusal's answer (kept on the range).
            limit: the refusals in a row that park the range (state 'failed').

        Returns:
            The count and whether the range is parked now; None when the node
            does not hold the range with that epoch (nothing is counted).
        """
        args = {"node": node_id, "range": range_id, "epoch": epoch, "reason": reason}
        with self.pool.connection() as conn:
            row = conn.execute(_REFUSE, {**args, "limit": limit}).fetchone()
        return None if row is None else Refusal(int(row[0]), bool(row[1]))

    def parked(self) -> list[ParkedRange]:
        """The parked ranges (state 'failed'), by id."""
        with self.pool.connection() as conn:
            return [ParkedRange(*row) for row in conn.execute(_PARKED).fetchall()]

    def retry(self, range_ids: Sequence[int] | None) -> list[int]:
        """Plan parked ranges again (refusals back to 0), from their resume points.

        Args:
            range_ids: the ranges to put back; None for every parked range.

        Returns:
            The ids put back, in order.

        Raises:
            NotParked: a range named does not exist or is not parked (then
                none is put back).
        """
        args = {"all": range_ids is None, "ids": list(range_ids or ())}
        with self.pool.connection() as conn, conn.transaction():
            rows = conn.execute(_RETRY, args).fetchall()
            back = sorted(int(row[0]) for row in rows)
            missing = sorted(set(range_ids or ()) - set(back))
            if missing:
                found = conn.execute(_STATE_OF, (missing,)).fetchall()
                states = {int(str(i)): str(state) for i, state in found}
                raise NotParked(_not_parked(missing, states))
            for group_id in sorted({int(row[1]) for row in rows}):
                conn.execute(_NOTIFY_PLANNED, (PLANNED_CHANNEL, str(group_id)))
        return back

    def held(self, node_id: int, range_id: int) -> Lease | None:
        """The lease if this node holds the range now."""
        with self.pool.connection() as conn:
            row = conn.execute(_HELD, {"node": node_id, "range": range_id}).fetchone()
        return Lease(*row) if row is not None else None

    def states(self) -> list[RangeStateRow]:
        with self.pool.connection() as conn:
            return [RangeStateRow(*row) for row in conn.execute(_STATES).fetchall()]

    def lowest_planned(self, group_id: int) -> int | None:
        """The lowest first article of the group's ranges (any state); None when none."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT min(first_article) FROM ranges WHERE group_id = %s", (group_id,)
            ).fetchone()
        lowest: int | None = row[0] if row is not None else None
        return lowest

    def progress(self) -> Progress:
        """How many ranges are planned in all, left to index, and parked."""
        with self.pool.connection() as conn:
            row = conn.execute(_PROGRESS).fetchone()
        assert row is not None
        return Progress(planned=int(row[1]), not_done=int(row[0]), parked=int(row[2]))

    def all_done(self) -> bool:
        """Whether ranges are planned and none is left to index: each is done or parked
        (a parked range waits for an operator, so waiting for it would never end)."""
        progress = self.progress()
        return progress.planned > 0 and progress.not_done == 0


def _not_parked(missing: Sequence[int], states: dict[int, str]) -> str:
    said = [
        f"range {i} is {states[i]}" if i in states else f"there is no range {i}" for i in missing
    ]
    return "; ".join(said) + " (only a failed range is retried; none was)"
