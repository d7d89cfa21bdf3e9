"""The spool's chunk index: which compressed chunk files hold which articles of a group.

The prefetcher writes a chunk file whole (temporary name, fsync, rename) and
only then its row here, so a row always names a complete file; a row without
a path is a gap (articles the server does not have), recorded, never skipped.
A row whose file was lost after all (the spool's disk, a database restored
without its spool, an object deleted by hand) is forgotten when a stream or an
edge meets the loss (`forget_lost`), and its articles are fetched again: the
spool is a cache of the NNTP servers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.spool.leftovers import ChunkKey, Leftover
from usenet_indexer.spool.plan import ChunkJob, WantedRange

_FROM = """
    SELECT first_article, last_article, codec, path, lines FROM spool_chunks
    WHERE group_id = %(group)s AND last_article >= %(article)s AND first_article <= %(last)s
    ORDER BY first_article
    LIMIT %(limit)s
"""
_ADD = """
    INSERT INTO spool_chunks (group_id, first_article, last_article, codec, path, lines, bytes)
    VALUES (%s, %s, %s, %s, %s, %s, %s)
"""
# The prefetcher's: a chunk another writer indexed first stays as it is.
_ADD_NEW = _ADD + " ON CONFLICT (group_id, first_article) DO NOTHING"
# Each chunk indexed is announced in its transaction (delivered at commit):
# the coordinator's waiting streams wake at once (coordinator/landings.py).
LANDED_CHANNEL = "uidx_spool_landed"
LISTEN_LANDED = f"LISTEN {LANDED_CHANNEL}"
_NOTIFY_LANDED = "SELECT pg_notify(%s, %s)"
# Ranges to index (neither done nor parked) that still miss part of [resume,
# last]: leased ones first (an edge waits for them), then in plan order.
_WANTED = """
    SELECT r.id, r.group_id, g.name, r.first_article, r.last_article, r.resume,
           r.state = 'leased' AND r.deadline >= now() AS leased
    FROM ranges r JOIN groups g ON g.id = r.group_id
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(least(s.last_article, r.last_article)
                            - greatest(s.first_article, r.resume) + 1), 0) AS have
        FROM spool_chunks s
        WHERE s.group_id = r.group_id
          AND s.last_article >= r.resume AND s.first_article <= r.last_article
    ) covered
    WHERE r.state IN ('planned', 'leased') AND r.resume <= r.last_article AND g.enabled
      AND covered.have < r.last_article - r.resume + 1
    -- Leased ranges first (an edge waits), then the live head, then in plan order.
    ORDER BY leased DESC, (r.kind <> 'live'), r.planned_at, r.id
    LIMIT %(limit)s
"""
_COVERED = """
    SELECT DISTINCT s.group_id, s.first_article, s.last_article
    FROM spool_chunks s JOIN ranges r ON r.group_id = s.group_id
    WHERE r.id = ANY(%(ranges)s)
      AND s.last_article >= r.resume AND s.first_article <= r.last_article
    UNION
    SELECT c.group_id, c.first_article, c.last_article
    FROM spool_claims c JOIN ranges r ON r.group_id = c.group_id
    WHERE r.id = ANY(%(ranges)s) AND c.claimant <> %(claimant)s AND c.until > now()
      AND c.last_article >= r.resume AND c.first_article <= r.last_article
"""
# Claims: what a prefetcher is about to fetch (see migrations/0023_spool_claims.sql).
_CLAIM_LOCK = "SELECT pg_advisory_xact_lock(6, %(group)s::int)"
_DROP_MINE = """
    DELETE FROM spool_claims
    WHERE claimant = %(claimant)s
      AND NOT (group_id, first_article) IN (SELECT * FROM unnest(%(keep_groups)s::bigint[],
                                                                %(keep_firsts)s::bigint[]))
"""
_DROP_LAPSED = "DELETE FROM spool_claims WHERE until < now() - interval '1 hour'"
_OTHERS = """
    SELECT group_id, first_article, last_article FROM spool_claims
    WHERE group_id = ANY(%(groups)s) AND claimant <> %(claimant)s AND until > now()
"""
_CLAIM = """
    INSERT INTO spool_claims (group_id, first_article, last_article, claimant, until)
    VALUES (%(group)s, %(first)s, %(last)s, %(claimant)s,
            now() + make_interval(secs => %(ttl)s))
    ON CONFLICT (group_id, first_article, claimant) DO UPDATE
        SET last_article = excluded.last_article, until = excluded.until
"""
_RENEW = """
    UPDATE spool_claims SET until = now() + make_interval(secs => %(ttl)s)
    WHERE claimant = %(claimant)s
"""
_RELEASE = "DELETE FROM spool_claims WHERE claimant = %(claimant)s"


def _overlapping(group: str, first: str, last: str) -> str:
    """The ranges overlapping the articles first..last of a group (SQL expressions of
    the query around it), by position: the one starting nearest at or below `first`,
    if it reaches it, and those starting inside (ranges never overlap;
    ranges_group_first finds them), not by reading the group's every range."""
    return f"""
        SELECT first_article, last_article, resume FROM (
            (SELECT first_article, last_article, resume FROM ranges
             WHERE group_id = {group} AND first_article <= {first}
             ORDER BY first_article DESC LIMIT 1)
            UNION ALL
            SELECT first_article, last_article, resume FROM ranges
            WHERE group_id = {group} AND first_article > {first} AND first_article <= {last}
        ) near WHERE near.last_article >= {first}"""


def _coverage(group: str, first: str, last: str) -> str:
    """Of the articles first..last: how many are planned (in a range), and whether a
    range still needs some (its resume point at or below its part of them)."""
    return f"""
        SELECT coalesce(sum(least(r.last_article, {last})
                            - greatest(r.first_article, {first}) + 1), 0) AS planned,
               coalesce(bool_or(r.resume <= least(r.last_article, {last})), false) AS needed
        FROM ({_overlapping(group, first, last)}) r"""


# Chunks no stream will read again: every article of theirs is in a range, and
# each range they overlap is past them (its resume point beyond the chunk's part
# of it; a resume point only moves forward, a done range's is past its end). A
# chunk may hold the end of one range and the start of the next (`uidx spool
# import` cuts a dump whatever the ranges): it goes once both are past it.
# Articles in no range are kept (they may be planned yet). Gaps go too; what is
# left of a range is fetched again if it is ever re-planned. The ranges a chunk
# overlaps are found by position (`_overlapping`).
_SWEEPABLE = f"""
    SELECT s.group_id, s.first_article, s.path FROM spool_chunks s
    CROSS JOIN LATERAL ({_coverage("s.group_id", "s.first_article", "s.last_article")}) overlap
    WHERE overlap.planned = s.last_article - s.first_article + 1 AND NOT overlap.needed
    ORDER BY s.group_id, s.first_article
"""
# A chunk whose bytes are gone (a spool lost, a database restored without it): its
# row is forgotten so the prefetcher fetches its articles again, but only while a
# range still needs them (its resume point at or below the chunk's part of it:
# the ranges found as _SWEEPABLE finds them). A chunk no range needs any more was
# deleted by the sweep, rightly; its row goes with the sweep's next round. The
# path must match: a row landed again meanwhile names a new chunk. Several chunks
# of a group at once (a range's, found gone together), by the primary key.
_FORGET_LOST = f"""
    DELETE FROM spool_chunks s
    USING unnest(%(firsts)s::bigint[], %(paths)s::text[]) AS lost(first, path)
    WHERE s.group_id = %(group)s AND s.first_article = lost.first AND s.path = lost.path
      AND EXISTS (
        SELECT 1 FROM ({_overlapping("s.group_id", "s.first_article", "s.last_article")}) r
        WHERE r.resume <= least(r.last_article, s.last_article)
      )
"""
_STILL_THERE = """
    SELECT 1 FROM spool_chunks WHERE group_id = %(group)s AND first_article = %(first)s
      AND path = %(path)s
"""
_FORGET = """
    DELETE FROM spool_chunks s USING unnest(%s::bigint[], %s::bigint[]) AS f(g, a)
    WHERE s.group_id = f.g AND s.first_article = f.a
"""
# The rows that may be the first of a group to hold articles of [first, last]:
# the one starting last before `first` (it holds some if it reaches `first`)
# and the first starting within. Two probes of the primary key: chunks do not
# overlap (prefetchers fetch what no chunk and no other's claim covers, an
# import refuses what this finds), so no row before the first of these
# reaches `first`.
_SPOOLED_IN = """
    (SELECT first_article, last_article, codec, path, lines FROM spool_chunks
     WHERE group_id = %(group)s AND first_article < %(first)s
     ORDER BY first_article DESC LIMIT 1)
    UNION ALL
    (SELECT first_article, last_article, codec, path, lines FROM spool_chunks
     WHERE group_id = %(group)s AND first_article BETWEEN %(first)s AND %(last)s
     ORDER BY first_article LIMIT 1)
"""
_PATH_AT = "SELECT path FROM spool_chunks WHERE group_id = %s AND first_article = %s"
# What the index says of stored chunks (spool/leftovers.py), those not indexed
# under their own key: the row at their group's first article (by the primary
# key), and the ranges they overlap, found as _SWEEPABLE finds them.
_LEFTOVERS = f"""
    SELECT k.i, g.id IS NOT NULL, s.first_article IS NOT NULL, s.path,
           coalesce(overlap.planned, 0), coalesce(overlap.needed, false)
    FROM unnest(%(names)s::text[], %(firsts)s::bigint[], %(lasts)s::bigint[], %(keys)s::text[])
         WITH ORDINALITY AS k(name, first, last, key, i)
    LEFT JOIN groups g ON g.name = k.name
    LEFT JOIN spool_chunks s ON s.group_id = g.id AND s.first_article = k.first
    LEFT JOIN LATERAL ({_coverage("g.id", "k.first", "k.last")}) overlap ON true
    WHERE s.path IS DISTINCT FROM k.key
"""
# Stored chunks looked up per query (a bucket is listed whole, hourly).
_LEFTOVERS_BATCH = 5_000
_SIZE = "SELECT count(*), coalesce(sum(bytes), 0)::bigint, coalesce(sum(lines), 0)::bigint FROM spool_chunks"


@attrs.frozen
class SpoolChunk:
    """A chunk of a group's articles [first, last]; path None for a gap."""

    first: int
    last: int
    codec: int
    path: str | None
    lines: int


@attrs.define(eq=False)
class SpoolIndex:
    pool: ConnectionPool

    def chunks_from(self, group_id: int, article: int, last: int, limit: int) -> list[SpoolChunk]:
        """The chunks covering [article, last], in article order, at most `limit`."""
        args = {"group": group_id, "article": article, "last": last, "limit": limit}
        with self.pool.connection() as conn:
            return [SpoolChunk(*row) for row in conn.execute(_FROM, args).fetchall()]

    def add(self, group_id: int, chunk: SpoolChunk, size: int) -> None:
        """Index a chunk whose file is complete (or a gap), and announce it."""
        with self.pool.connection() as conn:
            conn.execute(
                _ADD,
                (group_id, chunk.first, chunk.last, chunk.codec, chunk.path, chunk.lines, size),
            )
            conn.execute(_NOTIFY_LANDED, (LANDED_CHANNEL, str(group_id)))

    def spooled_in(self, group_id: int, first: int, last: int) -> SpoolChunk | None:
        """The group's first chunk or gap, in article order, that holds articles of
        [first, last]; None when the spool has none of them."""
        args = {"group": group_id, "first": first, "last": last}
        with self.pool.connection() as conn:
            rows = conn.execute(_SPOOLED_IN, args).fetchall()
        held = [SpoolChunk(*row) for row in rows if row[1] >= first]
        return min(held, key=lambda chunk: chunk.first, default=None)

    def path_at(self, group_id: int, first: int) -> str | None:
        """The file of the group's chunk that starts at `first` (None: no such chunk, or a gap)."""
        with self.pool.connection() as conn:
            row = conn.execute(_PATH_AT, (group_id, first)).fetchone()
        return None if row is None else row[0]

    def add_new(self, group_id: int, chunk: SpoolChunk, size: int) -> bool:
        """Index a chunk unless one starting at the same article is there; True if added.

        An added chunk is announced (see LANDED_CHANNEL).
        """
        row = (group_id, chunk.first, chunk.last, chunk.codec, chunk.path, chunk.lines, size)
        with self.pool.connection() as conn:
            added = conn.execute(_ADD_NEW, row).rowcount == 1
            if added:
                conn.execute(_NOTIFY_LANDED, (LANDED_CHANNEL, str(group_id)))
            return added

    def wanted(self, limit: int) -> list[WantedRange]:
        """At most `limit` ranges that miss spool chunks, most wanted first."""
        with self.pool.connection() as conn:
            rows = conn.execute(_WANTED, {"limit": limit}).fetchall()
        return [WantedRange(*row) for row in rows]

    def covered(
        self, ranges: list[WantedRange], claimant: str = ""
    ) -> dict[int, list[tuple[int, int]]]:
        """Per group, the (first, last) of the chunks and gaps inside these ranges' rest,
        and of the live claims of prefetchers other than `claimant`."""
        covered: dict[int, list[tuple[int, int]]] = {}
        if not ranges:
            return covered
        args = {"ranges": [r.range_id for r in ranges], "claimant": claimant}
        with self.pool.connection() as conn:
            rows = conn.execute(_COVERED, args).fetchall()
        for group_id, first, last in rows:
            covered.setdefault(group_id, []).append((first, last))
        return covered

    def claim(
        self,
        claimant: str,
        jobs: Sequence[ChunkJob],
        keep: Sequence[ChunkJob],
        ttl_seconds: float,
        choose: Callable[[dict[int, list[tuple[int, int]]]], list[ChunkJob]],
    ) -> list[ChunkJob]:
        """Claim for `claimant` the jobs `choose` picks, given the other prefetchers'
        live claims in their groups (taken under a per-group lock, so two prefetchers
        never claim overlapping articles); its claims other than those of `keep` (its
        chunks in flight) are dropped first. Returns what `choose` picked."""
        groups = sorted({job.group_id for job in jobs})
        keep_args = {
            "claimant": claimant,
            "keep_groups": [job.group_id for job in keep],
            "keep_firsts": [job.first for job in keep],
        }
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(_DROP_MINE, keep_args)
            conn.execute(_DROP_LAPSED)
            for group in groups:  # in order: two claimers never wait on each other in a cycle
                conn.execute(_CLAIM_LOCK, {"group": group})
            others: dict[int, list[tuple[int, int]]] = {}
            if groups:
                rows = conn.execute(_OTHERS, {"groups": groups, "claimant": claimant})
                for group_id, first, last in rows.fetchall():
                    others.setdefault(group_id, []).append((first, last))
            chosen = choose(others)
            with conn.cursor() as cur:
                cur.executemany(
                    _CLAIM,
                    [
                        {
                            "group": job.group_id,
                            "first": job.first,
                            "last": job.last,
                            "claimant": claimant,
                            "ttl": float(ttl_seconds),
                        }
                        for job in chosen
                    ],
                )
        return chosen

    def renew_claims(self, claimant: str, ttl_seconds: float) -> None:
        """The claimant's claims last `ttl_seconds` from now (it is alive)."""
        with self.pool.connection() as conn:
            conn.execute(_RENEW, {"claimant": claimant, "ttl": float(ttl_seconds)})

    def release_claims(self, claimant: str) -> None:
        """A prefetcher that stops cleanly gives its claims back."""
        with self.pool.connection() as conn:
            conn.execute(_RELEASE, {"claimant": claimant})

    def sweepable(self) -> list[tuple[int, int, str | None]]:
        """The chunks nobody will read again: (group id, first article, path or None
        for a gap), below the resume point of every range they overlap (see _SWEEPABLE)."""
        with self.pool.connection() as conn:
            return [(int(r[0]), int(r[1]), r[2]) for r in conn.execute(_SWEEPABLE).fetchall()]

    def forget(self, chunks: Sequence[tuple[int, int, str | None]]) -> int:
        """Remove the index rows of `chunks` (as `sweepable` gave them, their files
        deleted); how many were there."""
        with self.pool.connection() as conn:
            done = conn.execute(_FORGET, ([c[0] for c in chunks], [c[1] for c in chunks]))
            return done.rowcount

    def leftovers(self, chunks: Sequence[ChunkKey]) -> list[Leftover]:
        """What the index says of each stored chunk not indexed under its own key
        (spool/leftovers.py decides which are dead); those indexed are left out."""
        found: list[Leftover] = []
        with self.pool.connection() as conn:
            for start in range(0, len(chunks), _LEFTOVERS_BATCH):
                part = chunks[start : start + _LEFTOVERS_BATCH]
                args = {
                    "names": [c.group for c in part],
                    "firsts": [c.first for c in part],
                    "lasts": [c.last for c in part],
                    "keys": [c.key for c in part],
                }
                for i, known, row, path, planned, needed in conn.execute(_LEFTOVERS, args):
                    found.append(Leftover(part[i - 1], known, row, path, int(planned), needed))
        return found

    def forget_lost(self, group_id: int, first: int, path: str) -> bool:
        """Forget the row of a chunk whose bytes are gone from the spool, if a range
        still needs it (see _FORGET_LOST): the prefetcher then fetches its articles
        again, and a stream waits for them as for any chunk not spooled yet.

        Args:
            group_id, first: the chunk's row.
            path: its key, as the row names it (a row landed again is left alone).

        Returns:
            True when no row names that chunk any more (forgotten now, or before);
            False when its row stays: no range needs its articles.
        """
        args = {"group": group_id, "first": first, "path": path}
        with self.pool.connection() as conn:
            if self._forget_lost(conn, group_id, [(first, path)]) == 1:
                return True
            return conn.execute(_STILL_THERE, args).fetchone() is None

    def forget_lost_each(self, group_id: int, chunks: Sequence[tuple[int, str]]) -> int:
        """`forget_lost` for several chunks of a group, in one statement.

        Args:
            group_id: their group.
            chunks: (first article, key) of each, as their rows name them.

        Returns:
            How many rows were forgotten (a row whose chunk no range needs stays).
        """
        with self.pool.connection() as conn:
            return self._forget_lost(conn, group_id, chunks)

    @staticmethod
    def _forget_lost(
        conn: psycopg.Connection[Any], group_id: int, chunks: Sequence[tuple[int, str]]
    ) -> int:
        args = {
            "group": group_id,
            "firsts": [first for first, _ in chunks],
            "paths": [path for _, path in chunks],
        }
        return conn.execute(_FORGET_LOST, args).rowcount

    def size(self) -> tuple[int, int, int]:
        """(chunks, bytes, lines) in the spool."""
        with self.pool.connection() as conn:
            row = conn.execute(_SIZE).fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])
