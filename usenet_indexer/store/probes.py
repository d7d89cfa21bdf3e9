"""The probe queue: candidates leased by the prefetcher's prober, and what they found.

Theory of operation
-------------------
A candidate (one per release key: the batches' par2 or nfo segment, or an
archive's first segment that the catalog build adds) is 'new' until a
prober takes it (`take`: the due ones, oldest first, `FOR UPDATE SKIP
LOCKED`, leased until a deadline: a prober that dies gives it back by
expiry). The prober records one outcome (`record`); a missing article or
a provider error is tried again later (`retry`: on another server when
one answered 430, after a growing pause) until `MAX_ATTEMPTS`, then the
candidate is 'failed' with its last outcome: nothing is probed forever.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core.drain import Queue
from usenet_indexer.core.renames import Finding
from usenet_indexer.decode.ids import NO_IDS, MediaIds
from usenet_indexer.store import arrays
from usenet_indexer.store.catalog import MARK_PENDING, NOTIFY_PENDING

# Tries of one candidate before it is given up.
MAX_ATTEMPTS: Final = 4

_TAKE = """
    WITH due AS (
        SELECT release_key, message_id FROM probe_candidates
        WHERE ((state = 'new' AND next_at <= now()) OR (state = 'probing' AND deadline < now()))
          -- Not where it was missing, while a server that was not asked is left.
          AND (NOT %(server)s = ANY(missing_on)
               OR (SELECT count(DISTINCT s) FROM unnest(missing_on) AS s) >= %(servers)s)
        ORDER BY next_at, release_key, message_id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    )
    UPDATE probe_candidates p
    SET state = 'probing', attempts = p.attempts + 1,
        deadline = now() + make_interval(secs => %(lease)s)
    FROM due LEFT JOIN releases r ON r.key = due.release_key
    WHERE p.release_key = due.release_key AND p.message_id = due.message_id
    RETURNING p.release_key, p.message_id, p.file_name, p.attempts,
              coalesce(r.name, '')
"""
_RECORD = """
    UPDATE probe_candidates
    SET state = 'done', outcome = %(outcome)s, detail = %(detail)s, probed_at = now(),
        body_bytes = %(body_bytes)s, found_name = %(name)s, found_files = %(files)s,
        found_sizes = %(sizes)s, found_slice_bytes = %(slice_bytes)s, deadline = NULL,
        found_imdb = %(imdb)s, found_tvdb = %(tvdb)s, found_tvmaze = %(tvmaze)s,
        found_tmdb = %(tmdb)s, found_tmdb_tv = %(tmdb_tv)s
    WHERE release_key = %(key)s AND message_id = %(message_id)s AND state = 'probing'
"""
# The catalog builder applies what was found: the key is marked pending
# (store/catalog.py's MARK_PENDING), and the coordinators hear it (NOTIFY_PENDING):
# a probe's outcome is built in a moment, not at the next tick.
# Again later (a pause that doubles per attempt), or given up at the cap.
_RETRY = """
    UPDATE probe_candidates
    SET state = CASE WHEN attempts >= %(max)s THEN 'failed' ELSE 'new' END,
        outcome = %(outcome)s, detail = %(detail)s, probed_at = now(), deadline = NULL,
        next_at = now() + make_interval(secs => %(pause)s * power(2, attempts - 1)),
        missing_on = CASE WHEN %(server)s::text IS NULL THEN missing_on
                          ELSE array_append(missing_on, %(server)s::text) END
    WHERE release_key = %(key)s AND message_id = %(message_id)s AND state = 'probing'
"""
_GIVE_BACK = """
    UPDATE probe_candidates
    SET state = 'new', attempts = attempts - 1, deadline = NULL, next_at = now()
    WHERE (release_key, message_id) IN (SELECT * FROM unnest(%b::bytea[], %s::text[]))
      AND state = 'probing'
"""
_ADD_MORE = """
    INSERT INTO probe_candidates (release_key, message_id, file_name, source)
    SELECT *, 'build' FROM unnest(%b::bytea[], %s::text[], %s::text[])
    ON CONFLICT DO NOTHING
"""
_CANDIDATES_OF = "SELECT release_key, message_id FROM probe_candidates WHERE release_key = ANY(%b)"
_COUNTS = """
    SELECT state, coalesce(outcome, ''), count(*) FROM probe_candidates
    GROUP BY state, outcome ORDER BY state, outcome
"""
_DUE = """
    SELECT count(*) FROM probe_candidates
    WHERE (state = 'new' AND next_at <= now()) OR (state = 'probing' AND deadline < now())
"""
# The open candidates and the catalog keys waiting for a build, in one snapshot
# (one statement): a build adds its candidates before it deletes its pending
# keys, and a probe's outcome marks its key in the same transaction, so a
# look that finds neither has nothing left coming (core/drain.py).
_QUEUE = """
    SELECT count(*),
           count(*) FILTER (WHERE state = 'new' AND next_at > now()),
           (SELECT count(*) FROM catalog_pending)
    FROM probe_candidates WHERE state IN ('new', 'probing')
"""
# A body that named no release may still have named ids (an NFO's).
_FOUND = """
    SELECT release_key, outcome, found_name, found_files, found_sizes, message_id,
           found_slice_bytes, found_imdb, found_tvdb, found_tvmaze, found_tmdb, found_tmdb_tv
    FROM probe_candidates
    WHERE state = 'done'
      AND (outcome IN ('renamed', 'already_named', 'executable')
           OR num_nonnulls(found_imdb, found_tvdb, found_tvmaze, found_tmdb, found_tmdb_tv) > 0)
"""
_FOUND_OF = _FOUND + " AND release_key = ANY(%b)"


class Outcome(enum.Enum):
    """What one probe came to (the `outcome` column; `uidx_probes_total{outcome=...}`)."""

    RENAMED = "renamed"  # a real name found, other than the release's
    ALREADY_NAMED = "already_named"  # found, and the release had it already
    NO_NAMES = "no_names"  # the body decoded, but named nothing
    ARTICLE_MISSING = "article_missing"  # 430 on every server tried
    BAD_DATA = "bad_data"  # no yEnc, a CRC mismatch, malformed packets, too large
    EXECUTABLE = "executable"  # an archive holding executables only


@attrs.frozen
class ProbeJob:
    """A candidate leased to a prober."""

    release_key: bytes
    message_id: str
    file_name: str
    attempts: int  # this one included
    release_name: str  # the release's name now ('' when unknown)


@attrs.frozen
class ProbeCount:
    state: str
    outcome: str  # '' while none
    candidates: int


@attrs.define(eq=False)
class ProbeStore:
    pool: ConnectionPool

    def take(
        self, limit: int, lease_seconds: float, *, server: str = "", servers: int = 1
    ) -> list[ProbeJob]:
        """Up to `limit` due candidates, leased for `lease_seconds`, for `server` (one of
        `servers`: a candidate missing there waits for the others while some are left)."""
        args = {"limit": limit, "lease": lease_seconds, "server": server, "servers": servers}
        with self.pool.connection() as conn:
            rows = conn.execute(_TAKE, args).fetchall()
        return [ProbeJob(bytes(r[0]), r[1], r[2], r[3], r[4]) for r in rows]

    def record(
        self,
        job: ProbeJob,
        outcome: Outcome,
        *,
        detail: str | None = None,
        body_bytes: int | None = None,
        name: str | None = None,
        files: Sequence[str] = (),
        sizes: Sequence[int] = (),
        slice_bytes: int | None = None,
        ids: MediaIds = NO_IDS,
    ) -> bool:
        """The candidate's outcome (`ids`: those its NFO named); False when its lease had
        passed to another prober."""
        args = {
            "key": job.release_key,
            "message_id": job.message_id,
            "outcome": outcome.value,
            "detail": detail,
            "body_bytes": body_bytes,
            "name": name,
            "files": list(files),
            "sizes": list(sizes),
            "slice_bytes": slice_bytes,
            **attrs.asdict(ids),
        }
        with self.pool.connection() as conn, conn.transaction():
            if conn.execute(_RECORD, args).rowcount != 1:
                return False
            conn.execute(MARK_PENDING, (False, arrays.keys([job.release_key])))
            conn.execute(NOTIFY_PENDING)
            return True

    def retry(
        self,
        job: ProbeJob,
        outcome: Outcome,
        detail: str,
        *,
        server: str | None = None,
        pause_seconds: float = 60.0,
    ) -> bool:
        """Try again later (on another server when `server` answered 430), or give up
        at MAX_ATTEMPTS; False when the lease had passed."""
        args = {
            "key": job.release_key,
            "message_id": job.message_id,
            "outcome": outcome.value,
            "detail": detail,
            "server": server,
            "pause": pause_seconds,
            "max": MAX_ATTEMPTS,
        }
        with self.pool.connection() as conn:
            return conn.execute(_RETRY, args).rowcount == 1

    def give_back(self, jobs: Sequence[ProbeJob]) -> None:
        """Candidates taken and not probed: due again at once, their attempt not counted."""
        with self.pool.connection() as conn:
            conn.execute(
                _GIVE_BACK,
                (
                    arrays.keys([job.release_key for job in jobs]),
                    arrays.texts([job.message_id for job in jobs]),
                ),
            )

    def candidates_by_key(self, keys: Sequence[bytes]) -> dict[bytes, set[str]]:
        """The message-ids asked for (in any state) of each of these release keys."""
        with self.pool.connection() as conn:
            rows = conn.execute(_CANDIDATES_OF, (arrays.keys(keys),)).fetchall()
        asked: dict[bytes, set[str]] = {}
        for key, message_id in rows:
            asked.setdefault(bytes(key), set()).add(str(message_id))
        return asked

    def add_more(self, candidates: Sequence[tuple[bytes, str, str]]) -> int:
        """Candidates (release key, message-id, file name) the catalog build found (an
        archive's first volume, a par2 the nfo's probe did not read); those with a
        candidate already are kept as they are."""
        if not candidates:
            return 0
        keys, ids, names = zip(*candidates, strict=True)
        with self.pool.connection() as conn:
            return conn.execute(
                _ADD_MORE, (arrays.keys(keys), arrays.texts(ids), arrays.texts(names))
            ).rowcount

    def due(self) -> int:
        """Candidates a prober could take now."""
        with self.pool.connection() as conn:
            row = conn.execute(_DUE).fetchone()
        assert row is not None
        return int(row[0])

    def queue(self) -> Queue:
        """What is left of the probe queue: the open candidates (those waiting for a
        later try among them) and the catalog keys waiting for a build."""
        with self.pool.connection() as conn:
            row = conn.execute(_QUEUE).fetchone()
        assert row is not None
        return Queue(candidates=int(row[0]), retrying=int(row[1]), pending=int(row[2]))

    def counts(self) -> list[ProbeCount]:
        """Candidates by state and outcome (for `uidx status` and /metrics)."""
        with self.pool.connection() as conn:
            return [ProbeCount(*row) for row in conn.execute(_COUNTS).fetchall()]

    def found(self, keys: Sequence[bytes] | None = None) -> dict[bytes, list[Finding]]:
        """What the probes found that a catalog build applies, by release key (of `keys`
        only, when given)."""
        with self.pool.connection() as conn:
            rows = (
                conn.execute(_FOUND)
                if keys is None
                else conn.execute(_FOUND_OF, (arrays.keys(keys),))
            ).fetchall()
        found: dict[bytes, list[Finding]] = {}
        for key, outcome, name, files, sizes, message_id, slice_bytes, *ids in rows:
            found.setdefault(bytes(key), []).append(
                Finding(
                    name=None if outcome == Outcome.EXECUTABLE.value else name,
                    files=tuple(files),
                    sizes=tuple(int(s) for s in sizes),
                    executable=outcome == Outcome.EXECUTABLE.value,
                    message_id=message_id,
                    slice_bytes=None if slice_bytes is None else int(slice_bytes),
                    ids=MediaIds(*ids),
                )
            )
        return found
