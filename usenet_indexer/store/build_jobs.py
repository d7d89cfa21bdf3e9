"""Catalog builds done by edges: the jobs handed out, and who asks for them.

A job (`build_jobs`, migration 0029) is what a coordinator took for an edge
to merge: the build shards its closure reached (reserved until it expires:
no other builder, local or remote, takes them meanwhile), the pending keys
it took with their seq, and every key it merges again. The edge's rows come
back by the job's id and are written only while the job is the edge's and
unexpired; a job that expired (the edge died, stalled or was cut off) is
deleted and its keys, never taken out of `catalog_pending`, are built again
by whoever takes them next.

Shards are reserved on the connection that holds the shards' advisory locks
(store/catalog.py's ShardLocks), so a reservation and a lock are never
taken apart: a builder first locks a shard, then asks whether a job holds
it.

`nodes.build_asked_at` says when a node last asked for a build: while one
asks, coordinators leave fresh pending keys to the edges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import psycopg

from usenet_indexer.core.catalog import Scope
from usenet_indexer.store import arrays

_RESERVE = """
    INSERT INTO build_jobs (node_id, shards, pending, seqs, keys, scope_lows, scope_highs,
                            expires_at)
    VALUES (%s, %s, %b, %s, %b, %s, %s, now() + make_interval(secs => %s))
    RETURNING id
"""
_RESERVED = """
    SELECT DISTINCT s FROM build_jobs, unnest(shards) AS s
    WHERE expires_at > now() AND s = ANY(%s)
"""
_EXPIRED = "DELETE FROM build_jobs WHERE expires_at <= now()"
_JOB = """
    SELECT shards, pending, seqs, keys, scope_lows, scope_highs FROM build_jobs
    WHERE id = %s AND node_id = %s AND expires_at > now()
"""
_CLAIM = "DELETE FROM build_jobs WHERE id = %s AND node_id = %s AND expires_at > now()"
_DROP = "DELETE FROM build_jobs WHERE id = %s AND node_id = %s"
_DROP_ALL = "DELETE FROM build_jobs"
# At most one write every few seconds per node, however often it asks.
_ASKED = """
    UPDATE nodes SET build_asked_at = now()
    WHERE id = %s AND (build_asked_at IS NULL OR build_asked_at < now() - interval '5 seconds')
"""
_ASKING = (
    "SELECT EXISTS (SELECT FROM nodes WHERE build_asked_at > now() - make_interval(secs => %s))"
)


@attrs.frozen
class Job:
    """A job as reserved: its shards, the pending keys it took (with their seq), the
    keys it merges again, and the scope its rows are written in (None: none)."""

    shards: frozenset[int]
    pending: Mapping[bytes, int]
    keys: frozenset[bytes]
    scope: Scope | None = None


@attrs.define(eq=False)
class BuildJobs:
    """The build_jobs table, on one connection (a ShardLocks' own)."""

    _conn: psycopg.Connection[Any]

    def reserve(
        self,
        node_id: int,
        shards: Iterable[int],
        pending: Mapping[bytes, int],
        keys: Sequence[bytes],
        lease_seconds: float,
        scope: Scope | None = None,
    ) -> int:
        """Reserve `shards` for a job of `node_id` until `lease_seconds` from now; its id."""
        lows = None if scope is None else arrays.int8s(scope.lows)
        highs = None if scope is None else arrays.int8s(scope.highs)
        row = self._conn.execute(
            _RESERVE,
            (node_id, sorted(shards), arrays.keys(pending), arrays.int8s(pending.values()), arrays.keys(keys),
             lows, highs, float(lease_seconds)),
        ).fetchone()  # fmt: skip
        assert row is not None  # INSERT ... RETURNING gives its row
        return int(row[0])

    def reserved(self, shards: Iterable[int]) -> set[int]:
        """Those of `shards` an unexpired job holds."""
        return {int(s) for (s,) in self._conn.execute(_RESERVED, (sorted(shards),)).fetchall()}

    def forget_expired(self) -> int:
        """Delete the jobs that expired; how many."""
        return int(self._conn.execute(_EXPIRED).rowcount)

    def job(self, job_id: int, node_id: int) -> Job | None:
        """Job `job_id` of `node_id`, if it is still the node's and unexpired."""
        # Binary: the keys as they are, not hex both ways (25k keys: 20 -> 11 ms).
        row = self._conn.execute(_JOB, (job_id, node_id), binary=True).fetchone()
        if row is None:
            return None
        shards, pending, seqs, keys, lows, highs = row
        return Job(
            shards=frozenset(int(s) for s in shards),
            pending={bytes(k): int(s) for k, s in zip(pending, seqs, strict=True)},
            keys=frozenset(bytes(k) for k in keys),
            scope=None if lows is None else Scope(tuple(zip(lows, highs, strict=True))),
        )

    def claim(self, job_id: int, node_id: int) -> bool:
        """End job `job_id` of `node_id` (its rows are being written); False when it
        was no longer the node's or had expired."""
        return bool(self._conn.execute(_CLAIM, (job_id, node_id)).rowcount)

    def drop(self, job_id: int, node_id: int) -> bool:
        """End job `job_id` of `node_id` unwritten (its edge gave it back: its keys, still
        pending, go to the next builder at once); False when it was not the node's (or
        had ended already)."""
        return bool(self._conn.execute(_DROP, (job_id, node_id)).rowcount)

    def drop_all(self) -> int:
        """End every job (a whole build replaces what they would write); how many."""
        return int(self._conn.execute(_DROP_ALL).rowcount)

    def asked(self, node_id: int) -> None:
        """`node_id` asked for a build now."""
        self._conn.execute(_ASKED, (node_id,))

    def edges_asking(self, within_seconds: float) -> bool:
        """Whether a node asked for a build in the last `within_seconds`."""
        row = self._conn.execute(_ASKING, (float(within_seconds),)).fetchone()
        return bool(row and row[0])
