"""Storing a batch: one transaction, fenced by a compare-and-set on the range.

Theory of operation
-------------------
The first statement of the transaction moves the range's resume point from
the batch's first article to its next, only if the caller holds the range
with the batch's epoch and the resume point is exactly the batch's first
article. If it does not match, nothing is written: either this exact batch
was stored before (a retry whose reply was lost: answered "already stored"
from the `batches` row), or the caller is stale (409). Everything else of
the batch is written in the same transaction, so a batch is stored whole and
once, or not at all.

Rows are written set-wise, never per segment: the releases get one
INSERT ... SELECT FROM unnest(arrays), the arrays built per release chunk,
merging by key (ON CONFLICT DO UPDATE: counters add up, groups union). Each
release chunk's files, with their details and segments, go in as one packed
fragment (fragments.py) through one binary COPY, packed while the COPY runs:
the server stores rows as the next chunks are packed, and COPY takes half
the server time of INSERT ... unnest(bytea[]) (which builds and then splits
one array of megabytes).

`BatchStore.fenced = False` is a test-only switch (the negative control of
scripts/chaos, through the hidden `uidx coordinator --unsafe-no-fence`): the
resume point is moved without the compare-and-set, so neither a stale
caller nor a stored retry is told apart (the primary keys of batches,
fragments and rule_counts then still refuse an exact replay, as a 500: the
negative control drops them too). Never a setting.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
from psycopg import Connection, sql
from psycopg_pool import ConnectionPool

from usenet_indexer import fragments
from usenet_indexer.batch import Batch, ReleaseChunk, representative
from usenet_indexer.batchwire import WireBatch
from usenet_indexer.errors import UidxError
from usenet_indexer.naming import release_name

_ADVANCE = """
    UPDATE ranges
    SET resume = %(next)s, deadline = now() + make_interval(secs => %(ttl)s),
        batches = batches + 1, headers = headers + %(lines)s
    WHERE id = %(range)s AND epoch = %(epoch)s AND holder = %(node)s AND state = 'leased'
      AND resume = %(first)s AND %(next)s <= last_article + 1
    RETURNING group_id
"""
# Test-only (fenced=False): no epoch, holder, state or resume point compared.
_ADVANCE_UNFENCED = """
    UPDATE ranges
    SET resume = greatest(resume, %(next)s),
        deadline = now() + make_interval(secs => %(ttl)s),
        batches = batches + 1, headers = headers + %(lines)s
    WHERE id = %(range)s AND %(next)s <= last_article + 1
    RETURNING group_id
"""
_ALREADY = """
    SELECT release_chunks, segments FROM batches
    WHERE range_id = %(range)s AND batch_first = %(first)s AND batch_next = %(next)s
      AND node_id = %(node)s AND epoch = %(epoch)s
"""
_HELD_AT = """
    SELECT last_article FROM ranges
    WHERE id = %(range)s AND epoch = %(epoch)s AND holder = %(node)s AND state = 'leased'
      AND resume = %(first)s
"""
_BATCH = """
    INSERT INTO batches (range_id, batch_first, batch_next, node_id, epoch, lines,
                         release_chunks, segments, body_bytes)
    VALUES (%(range)s, %(first)s, %(next)s, %(node)s, %(epoch)s, %(lines)s,
            %(chunks)s, %(segments)s, %(body)s)
"""
_RELEASES = """
    INSERT INTO releases AS r (key, name, head_name, poster, groups, posted, files_announced,
                               chunks, segments, bytes, rep_posted, rep_file)
    SELECT k, n, h, p, string_to_array(g, E'\\n'), d, m, 1, s, b, rp, rf
    FROM unnest(%s::bytea[], %s::text[], %s::text[], %s::text[], %s::text[], %s::int8[],
                %s::int4[], %s::int8[], %s::int8[], %s::int8[], %s::bytea[])
         AS t(k, n, h, p, g, d, m, s, b, rp, rf)
    ON CONFLICT (key) DO UPDATE SET
        groups = ARRAY(SELECT DISTINCT x FROM unnest(r.groups || excluded.groups) AS x ORDER BY 1),
        posted = CASE WHEN r.posted = 0 THEN excluded.posted
                      WHEN excluded.posted = 0 THEN r.posted
                      ELSE least(r.posted, excluded.posted) END,
        -- The earliest file speaks for the release (batch.representative).
        head_name = CASE WHEN r.rep_posted IS NULL
                           OR (excluded.rep_posted, excluded.rep_file) < (r.rep_posted, r.rep_file)
                         THEN excluded.head_name ELSE r.head_name END,
        poster = CASE WHEN r.rep_posted IS NULL
                        OR (excluded.rep_posted, excluded.rep_file) < (r.rep_posted, r.rep_file)
                      THEN excluded.poster ELSE r.poster END,
        files_announced = CASE WHEN r.rep_posted IS NULL
                                 OR (excluded.rep_posted, excluded.rep_file)
                                    < (r.rep_posted, r.rep_file)
                               THEN excluded.files_announced ELSE r.files_announced END,
        rep_posted = least(r.rep_posted, excluded.rep_posted),
        rep_file = CASE WHEN r.rep_posted IS NULL
                          OR (excluded.rep_posted, excluded.rep_file) < (r.rep_posted, r.rep_file)
                        THEN excluded.rep_file ELSE r.rep_file END,
        chunks = r.chunks + 1,
        segments = r.segments + excluded.segments,
        bytes = r.bytes + excluded.bytes,
        updated_at = now()
"""
_FRAGMENTS = """
    COPY fragments (group_id, release_key, range_id, batch_first, files, segments, packed)
    FROM STDIN (FORMAT BINARY)
"""
_FRAGMENT_TYPES = ("int8", "bytea", "int8", "int8", "int4", "int4", "bytea")
# The group's partition of fragments: looked up per batch; made under a lock
# per group by the first batch that needs it.
_PARTITION_EXISTS = "SELECT to_regclass(%s) IS NOT NULL"
_PARTITION_LOCK = "SELECT pg_advisory_xact_lock(2, %s::int)"
_PARTITION_CREATE = (
    "CREATE TABLE {name} PARTITION OF fragments FOR VALUES IN ({group}) "
    "WITH (toast_tuple_target = 8160)"
)
_RULE_COUNTS = """
    INSERT INTO rule_counts (range_id, batch_first, rule, key, releases, segments)
    SELECT %s, %s, * FROM unnest(%s::text[], %s::text[], %s::int4[], %s::int8[])
"""
_PROBES = """
    INSERT INTO probe_candidates (release_key, message_id, file_name)
    SELECT * FROM unnest(%s::bytea[], %s::text[], %s::text[])
    ON CONFLICT (release_key) DO NOTHING
"""


class LeaseLost(UidxError):
    """The caller does not hold the range with that epoch at that resume point (409)."""


class BatchRejected(UidxError):
    """The batch cannot belong to the range it names (422)."""


@attrs.frozen
class Stored:
    """What storing a batch did."""

    already: bool
    release_chunks: int
    segments: int


@attrs.define(eq=False)
class BatchStore:
    """Stores batches, fenced (see the module docstring).

    Attributes:
        pool: the coordinator's pool.
        fenced: False only in the chaos script's negative control: batches
            are stored without the compare-and-set and the "already stored"
            answer (the primary keys of batches and fragments still refuse
            an exact replay; the negative control drops them).
    """

    pool: ConnectionPool
    fenced: bool = True

    def store(self, node_id: int, wire: WireBatch, body_bytes: int, ttl_seconds: float) -> Stored:
        """Store one batch, fenced; idempotent for a retry of a stored batch.

        Raises:
            LeaseLost: the node does not hold the range with that epoch at the
                batch's first article (and this batch was not stored before).
            BatchRejected: the batch covers no article, or runs past the range's end.
        """
        batch = wire.batch
        if batch.next <= batch.first:
            # The fence would match and the batches row could not be written:
            # an empty batch moves nothing, so it is refused before either.
            raise BatchRejected(f"the batch covers no article ({batch.first}..{batch.next})")
        kept = [r for r in batch.releases if r.dropped is None]
        segments = batch.segments
        args: dict[str, object] = {
            "range": wire.range_id,
            "epoch": wire.epoch,
            "node": node_id,
            "first": batch.first,
            "next": batch.next,
            "lines": batch.lines,
            "ttl": ttl_seconds,
            "chunks": len(kept),
            "segments": segments,
            "body": body_bytes,
        }
        with self.pool.connection() as conn, conn.transaction():
            advance = _ADVANCE if self.fenced else _ADVANCE_UNFENCED
            advanced = conn.execute(advance, args).fetchone()
            if advanced is None:
                return _not_advanced(conn, args)
            group_id = int(str(advanced[0]))
            conn.execute(_BATCH, args)
            if kept:
                _ensure_partition(conn, group_id)
            _write_catalog(conn, group_id, wire.range_id, batch, kept)
        return Stored(already=False, release_chunks=len(kept), segments=segments)


def _not_advanced(conn: Connection[tuple[object, ...]], args: Mapping[str, object]) -> Stored:
    """Why the fence did not move: a stored retry, a batch past the end, or a lost lease."""
    row = conn.execute(_ALREADY, args).fetchone()
    if row is not None:
        chunks, segments = row
        assert isinstance(chunks, int)
        assert isinstance(segments, int)
        return Stored(already=True, release_chunks=chunks, segments=segments)
    held = conn.execute(_HELD_AT, args).fetchone()
    if held is not None:
        raise BatchRejected(f"the batch runs to {args['next']}, past the range's end {held[0]}")
    raise LeaseLost(
        f"range {args['range']}: not held with epoch {args['epoch']} at {args['first']}"
    )


def partition_name(group_id: int) -> str:
    """The name of a group's partition of fragments."""
    return f"fragments_g{group_id}"


def _ensure_partition(conn: Connection[tuple[object, ...]], group_id: int) -> None:
    """Make the group's partition of fragments if no batch made it before."""
    name = partition_name(group_id)
    row = conn.execute(_PARTITION_EXISTS, (name,)).fetchone()
    if row is not None and row[0]:
        return
    conn.execute(_PARTITION_LOCK, (group_id % (1 << 31),))
    row = conn.execute(_PARTITION_EXISTS, (name,)).fetchone()
    if row is None or not row[0]:
        statement = sql.SQL(_PARTITION_CREATE).format(
            name=sql.Identifier(name), group=sql.Literal(group_id)
        )
        conn.execute(statement)


def _write_catalog(
    conn: Connection[tuple[object, ...]],
    group_id: int,
    range_id: int,
    batch: Batch,
    kept: list[ReleaseChunk],
) -> None:
    first = batch.first
    if kept:
        _write_releases(conn, group_id, range_id, first, kept)
    if batch.rule_counts:
        counts = batch.rule_counts
        conn.execute(
            _RULE_COUNTS,
            (
                range_id,
                first,
                [c.rule for c in counts],
                [c.key for c in counts],
                [c.releases for c in counts],
                [c.segments for c in counts],
            ),
        )
    if batch.probe_candidates:
        probes = batch.probe_candidates
        conn.execute(
            _PROBES,
            (
                [p.release_key for p in probes],
                [p.message_id for p in probes],
                [p.file_name for p in probes],
            ),
        )


def _write_releases(
    conn: Connection[tuple[object, ...]],
    group_id: int,
    range_id: int,
    first: int,
    kept: list[ReleaseChunk],
) -> None:
    keys: list[bytes] = []
    names: list[str] = []
    heads: list[str | None] = []
    posters: list[str] = []
    groups: list[str] = []
    posted: list[int] = []
    announced: list[int | None] = []
    counts: list[int] = []
    sizes: list[int] = []
    fragment_files: list[int] = []
    rep_posted: list[int] = []
    rep_file: list[bytes] = []
    for chunk in kept:
        files = chunk.files
        order = representative(files)
        rep_posted.append(order[0])
        rep_file.append(order[1])
        dated = [f.posted for f in files if f.posted]
        keys.append(chunk.key)
        names.append(release_name(chunk.head_name, ((f.name, f.total_segments) for f in files)))
        heads.append(chunk.head_name)
        posters.append(chunk.poster)
        groups.append("\n".join(chunk.groups))
        posted.append(min(dated) if dated else 0)
        announced.append(chunk.files_announced)
        counts.append(sum([len(f.numbers) for f in files]))
        sizes.append(sum([sum(f.sizes) for f in files]))
        fragment_files.append(len(files))
    conn.execute(
        _RELEASES,
        (
            keys,
            names,
            heads,
            posters,
            groups,
            posted,
            announced,
            counts,
            sizes,
            rep_posted,
            rep_file,
        ),
    )
    # Binary COPY, packing as it goes: the server stores rows while the next
    # chunks are packed (and takes half the time of INSERT ... unnest(bytea[])).
    with conn.cursor().copy(_FRAGMENTS) as copy:
        copy.set_types(_FRAGMENT_TYPES)
        for chunk, key, file_count, segments in zip(
            kept, keys, fragment_files, counts, strict=True
        ):
            copy.write_row(
                (group_id, key, range_id, first, file_count, segments, fragments.pack(chunk.files))
            )
