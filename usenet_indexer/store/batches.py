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

The store takes a batch as checked (`PackedBatch`), with the range and
epoch it names beside it, never in the form it travelled in: decoding a
body is the node API's, so a batch from a test, a benchmark or a future
import path is stored by the same code.

Rows are written set-wise, never per segment, and the edge did the packing
(packed.py): a release chunk arrives as its catalog fragment with the figures
of its release row. Both go in by binary COPY: the release rows into a
temporary table, merged from there into `releases` by one INSERT ... SELECT
(ON CONFLICT DO UPDATE: counters add up, groups union, the earliest file
speaks for the release), the fragments straight into their group's
partition. COPY takes a third of the server time of INSERT ...
unnest(arrays) and needs no array built on either side.

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

from usenet_indexer.errors import UidxError
from usenet_indexer.store import arrays
from usenet_indexer.store.catalog import NOTIFY_PENDING, PENDING_SHARD
from usenet_indexer.wire.packed import PackedBatch, PackedRelease

_ADVANCE = """
    UPDATE ranges
    SET resume = %(next)s, deadline = now() + make_interval(secs => %(ttl)s),
        batches = batches + 1, headers = headers + %(lines)s,
        -- A stored batch ends a run of refusals (store/ranges.py: parking).
        refusals = 0, refusal = NULL
    WHERE id = %(range)s AND epoch = %(epoch)s AND holder = %(node)s AND state = 'leased'
      AND resume = %(first)s AND %(next)s <= last_article + 1
      AND group_id = (SELECT id FROM groups WHERE name = %(group)s)
    RETURNING group_id
"""
# Test-only (fenced=False): no epoch, holder, state or resume point compared.
_ADVANCE_UNFENCED = """
    UPDATE ranges
    SET resume = greatest(resume, %(next)s),
        deadline = now() + make_interval(secs => %(ttl)s),
        batches = batches + 1, headers = headers + %(lines)s
    WHERE id = %(range)s AND %(next)s <= last_article + 1
      AND group_id = (SELECT id FROM groups WHERE name = %(group)s)
    RETURNING group_id
"""
# The range's group, asked only when the fence did not move: a batch of
# another group is refused first, whatever else is wrong with it.
_GROUP_OF = """
    SELECT g.name FROM ranges r JOIN groups g ON g.id = r.group_id WHERE r.id = %(range)s
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
# The release rows of one batch, copied in, merged into releases, gone at commit.
_RELEASES_IN = """
    CREATE TEMPORARY TABLE releases_in (
        k bytea, n text, h text, p text, g text, d int8, m int4, s int8, b int8,
        rp int8, rf bytea, l int8
    ) ON COMMIT DELETE ROWS
"""
_RELEASES_IN_EXISTS = "SELECT to_regclass('pg_temp.releases_in') IS NOT NULL"
_RELEASES_COPY = "COPY releases_in FROM STDIN (FORMAT BINARY)"
_RELEASES_TYPES = (
    "bytea", "text", "text", "text", "text", "int8", "int4", "int8", "int8", "int8", "bytea",
    "int8",
)  # fmt: skip
_RELEASES = """
    INSERT INTO releases AS r (key, name, head_name, poster, groups, posted, files_announced,
                               chunks, segments, bytes, rep_posted, rep_file, latest)
    SELECT k, n, h, p, string_to_array(g, E'\\n'), d, m, 1, s, b, rp, rf, l FROM releases_in
    -- In key order: two batches merging the same releases lock them alike (no deadlock).
    ORDER BY k
    ON CONFLICT (key) DO UPDATE SET
        groups = ARRAY(SELECT DISTINCT x FROM unnest(r.groups || excluded.groups) AS x ORDER BY 1),
        posted = CASE WHEN r.posted = 0 THEN excluded.posted
                      WHEN excluded.posted = 0 THEN r.posted
                      ELSE least(r.posted, excluded.posted) END,
        -- NULL (stored before the column came) stays unknown: `uidx catalog build`.
        latest = CASE WHEN r.latest IS NOT NULL THEN greatest(r.latest, excluded.latest) END,
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
        -- Summed as numeric and held at a bigint's end: never an overflow (a 500).
        segments = least(r.segments::numeric + excluded.segments, 9223372036854775807)::int8,
        bytes = least(r.bytes::numeric + excluded.bytes, 9223372036854775807)::int8,
        updated_at = now()
"""
# When each chunk was posted: the catalog build's closure looks for the
# releases near a touched one by these (store/catalog.py; undated: never joined).
_RELEASE_TIMES = """
    INSERT INTO release_times (key, poster, files_announced, posted, latest)
    SELECT k, p, m, d, l FROM releases_in WHERE d > 0
"""
# The catalog builder merges these keys again (store/catalog.py); in key
# order, as above.
# A notification needs no durability: its commit waits for no WAL flush.
_NO_FLUSH = "SET LOCAL synchronous_commit = off"
# With the dates of the chunks stored (`low`, `high`: what the build's closure
# looks around; NULL, the whole span, where a chunk is undated or the key was
# marked pending otherwise since its last build).
_PENDING = f"""
    INSERT INTO catalog_pending AS c (key, shard, stored, low, high)
    SELECT k, min({PENDING_SHARD.format(poster="p")}), true,
           CASE WHEN bool_and(d > 0 AND l IS NOT NULL) THEN min(d) END,
           CASE WHEN bool_and(d > 0 AND l IS NOT NULL) THEN max(l) END
    FROM releases_in GROUP BY k ORDER BY k
    ON CONFLICT (key) DO UPDATE SET seq = nextval('catalog_pending_seq'),
        shard = excluded.shard, stored = true,
        low = CASE WHEN c.high IS NOT NULL AND excluded.high IS NOT NULL
                   THEN least(c.low, excluded.low) END,
        high = CASE WHEN c.high IS NOT NULL AND excluded.high IS NOT NULL
                    THEN greatest(c.high, excluded.high) END
"""
_FRAGMENTS = """
    COPY fragments (group_id, release_key, range_id, batch_first, files, segments, packed,
                    poster, head_name, files_announced)
    FROM STDIN (FORMAT BINARY)
"""
_FRAGMENT_TYPES = (
    "int8", "bytea", "int8", "int8", "int4", "int4", "bytea", "text", "text", "int4"
)  # fmt: skip
# The group's partition of fragments: looked up per batch; made under a lock
# per group by the first batch that needs it. The look-up after the lock
# cannot be to_regclass again: an advisory lock does not make the backend
# read the catalog changes committed meanwhile, so a second to_regclass saw
# the partition that the batch before had just made as still missing, and
# its CREATE failed with DuplicateTable (a 500 in scripts/demo). CREATE ...
# IF NOT EXISTS locks the schema first, which does read them; the lock keeps
# two CREATEs from racing on the catalog's unique indexes.
_PARTITION_EXISTS = "SELECT to_regclass(%s) IS NOT NULL"
_PARTITION_LOCK = "SELECT pg_advisory_xact_lock(2, %s::int)"
_PARTITION_CREATE = (
    "CREATE TABLE IF NOT EXISTS {name} PARTITION OF fragments FOR VALUES IN ({group}) "
    "WITH (toast_tuple_target = 8160)"
)
# Arrays as binary parameters (%b): a third less time than text ones.
_RULE_COUNTS = """
    INSERT INTO rule_counts (range_id, batch_first, rule, key, releases, segments)
    SELECT %s, %s, * FROM unnest(%b::text[], %b::text[], %b::int4[], %b::int8[])
"""
# One candidate per release key from the batches: the first batch's.
_PROBES = """
    INSERT INTO probe_candidates (release_key, message_id, file_name)
    SELECT * FROM unnest(%b::bytea[], %b::text[], %b::text[]) AS c(k, m, f)
    WHERE NOT EXISTS (SELECT 1 FROM probe_candidates p WHERE p.release_key = c.k)
    ON CONFLICT DO NOTHING
"""


class LeaseLost(UidxError):
    """The caller does not hold the range with that epoch at that resume point (409)."""


class BatchRejected(UidxError):
    """The batch cannot belong to the range it names (422)."""


class WrongGroup(UidxError):
    """The batch names another group than its range's (422). Not a BatchRejected:
    the range's own data cannot cause it (the edge takes the group from its
    lease), so it is not counted against the range."""


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

    def store(
        self,
        node_id: int,
        range_id: int,
        epoch: int,
        batch: PackedBatch,
        body_bytes: int,
        ttl_seconds: float,
    ) -> Stored:
        """Store one batch, fenced; idempotent for a retry of a stored batch.

        Args:
            node_id: the node that sent it (whoever its token says).
            range_id: the range the batch names.
            epoch: the lease's epoch the batch names (the fence compares it).
            batch: the batch as checked (packed: its fragments checked by
                `packed.checked_release`); how it travelled is not the store's.
            body_bytes: the size of the body it came in (kept in `batches`).
            ttl_seconds: the lease's new deadline from now (a batch extends it).

        Returns:
            What was stored, or `already` with what a stored retry had stored.

        Raises:
            LeaseLost: the node does not hold the range with that epoch at the
                batch's first article (and this batch was not stored before).
            BatchRejected: the batch covers no article, or runs past the range's end.
            WrongGroup: the batch is of another group than the range (nothing is
                stored, whatever the lease).
        """
        if batch.next <= batch.first:
            # The fence would match and the batches row could not be written:
            # an empty batch moves nothing, so it is refused before either.
            raise BatchRejected(f"the batch covers no article ({batch.first}..{batch.next})")
        segments = batch.segments
        args: dict[str, object] = {
            "range": range_id,
            "group": batch.group,
            "epoch": epoch,
            "node": node_id,
            "first": batch.first,
            "next": batch.next,
            "lines": batch.lines,
            "ttl": ttl_seconds,
            "chunks": len(batch.releases),
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
            if batch.releases:
                ensure_partition(conn, group_id)
            _write_catalog(conn, group_id, range_id, batch)
        if batch.releases:
            self._notify_pending()
        return Stored(already=False, release_chunks=len(batch.releases), segments=segments)

    def _notify_pending(self) -> None:
        """Every coordinator process hears that keys are pending (one notification per
        batch): its builder and the edges' build asks it holds wake, not only this
        process's. Sent after the batch committed, in a transaction of its own that
        waits for no WAL flush: a transaction that notifies holds a lock of the whole
        cluster through its commit (PostgreSQL's PreCommit_Notify), so a NOTIFY in the
        batch's own transaction made every batch's commit, fsync included, wait for
        every other's. A notification lost to a crash here is covered by the builders'
        timed passes."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(_NO_FLUSH)
            conn.execute(NOTIFY_PENDING)


def _not_advanced(conn: Connection[tuple[object, ...]], args: Mapping[str, object]) -> Stored:
    """Why the fence did not move: a batch of another group, a stored retry, a batch
    past the end, or a lost lease."""
    group = conn.execute(_GROUP_OF, args).fetchone()
    if group is not None and group[0] != args["group"]:
        raise WrongGroup(
            f"group: the batch is of {args['group']}, range {args['range']} is of {group[0]}"
        )
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


def ensure_partition(conn: Connection[tuple[object, ...]], group_id: int) -> None:
    """Make the group's partition of fragments if no batch made it before.

    Safe against batches of the same group in other transactions, also one
    that made the partition after this transaction first looked for it.
    """
    name = partition_name(group_id)
    row = conn.execute(_PARTITION_EXISTS, (name,)).fetchone()
    if row is not None and row[0]:
        return
    conn.execute(_PARTITION_LOCK, (group_id % (1 << 31),))
    statement = sql.SQL(_PARTITION_CREATE).format(
        name=sql.Identifier(name), group=sql.Literal(group_id)
    )
    conn.execute(statement)


def _write_catalog(
    conn: Connection[tuple[object, ...]], group_id: int, range_id: int, batch: PackedBatch
) -> None:
    first = batch.first
    if batch.releases:
        _write_releases(conn, group_id, range_id, first, batch.releases)
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
                arrays.keys([p.release_key for p in probes]),
                arrays.texts([p.message_id for p in probes]),
                arrays.texts([p.file_name for p in probes]),
            ),
        )


def _write_releases(
    conn: Connection[tuple[object, ...]],
    group_id: int,
    range_id: int,
    first: int,
    releases: tuple[PackedRelease, ...],
) -> None:
    exists = conn.execute(_RELEASES_IN_EXISTS).fetchone()
    if exists is None or not exists[0]:
        conn.execute(_RELEASES_IN)
    with conn.cursor().copy(_RELEASES_COPY) as copy:
        copy.set_types(_RELEASES_TYPES)
        for r in releases:
            copy.write_row(
                (
                    r.key,
                    r.name,
                    r.head_name,
                    r.poster,
                    "\n".join(r.groups),
                    r.posted,
                    r.files_announced,
                    r.segments,
                    r.bytes,
                    *r.representative,
                    r.latest,
                )
            )
    conn.execute(_RELEASES)
    conn.execute(_RELEASE_TIMES)
    conn.execute(_PENDING)
    with conn.cursor().copy(_FRAGMENTS) as copy:
        copy.set_types(_FRAGMENT_TYPES)
        for r in releases:
            copy.write_row(
                (group_id, r.key, range_id, first, r.files, r.segments, r.fragment,
                 r.poster, r.head_name, r.files_announced)
            )  # fmt: skip
