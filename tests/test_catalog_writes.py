"""What the catalog build costs PostgreSQL (issue 25): catalog_keys follows the rows
a build writes, per statement, a written row is not written a second time, and the
stored fragments are read back as bytes, not hex.

A build writes its rows with `CatalogStore.write` (one INSERT ... ON CONFLICT, a
DELETE of the rows no longer made); catalog_keys, which the build's look-ups read
(which rows a release key went into), must follow every insert, change of sources
and delete, without a plpgsql call and an INSERT per row, and without a foreign-key
check that locks each catalog row again (FOR KEY SHARE writes the row's xmax, and
WAL for it).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import attrs
import psycopg
import pytest
from psycopg import pq
from psycopg_pool import ConnectionPool
from test_catalog_build import batches_of_generated

from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.catalog import CatalogEntry
from usenet_indexer.store import arrays
from usenet_indexer.store import catalog as sql
from usenet_indexer.store.catalog import CatalogStore

CHANGED_AT = datetime(2026, 1, 1, tzinfo=UTC)


def key(n: int) -> bytes:
    return hashlib.md5(f"release {n}".encode()).digest()


def entry(n: int, sources: tuple[bytes, ...]) -> CatalogEntry:
    name = f"Show.Number.{n}.S01E{1 + n % 9:02d}.1080p.WEB.x264-GROUP"
    return CatalogEntry(
        guid=sources[0].hex(),
        name=name,
        search_name=name.lower().replace(".", " "),
        category=5040,
        size=1_000_000 + n,
        files=10,
        poster="poster@example.com",
        groups=("alt.binaries.test",),
        posted=1_700_000_000 + n,
        completion=1.0,
        season=1,
        episode=1 + n % 9,
        probe_candidate=False,
        sources=sources,
        changed_at=CHANGED_AT,
        state="whole",
    )


def keys_kept(conn: psycopg.Connection[tuple[object, ...]]) -> set[tuple[bytes, str]]:
    rows = conn.execute(
        "SELECT k.key, c.guid FROM catalog_keys AS k JOIN catalog AS c ON c.id = k.catalog_id"
    ).fetchall()
    return pairs(rows)


def keys_of_rows(conn: psycopg.Connection[tuple[object, ...]]) -> set[tuple[bytes, str]]:
    rows = conn.execute("SELECT DISTINCT k, guid FROM catalog, unnest(sources) AS k").fetchall()
    return pairs(rows)


def pairs(rows: list[tuple[object, ...]]) -> set[tuple[bytes, str]]:
    found = set()
    for k, guid in rows:
        assert isinstance(k, bytes)
        found.add((k, str(guid)))
    return found


def test_catalog_keys_follow_the_rows_a_build_inserts_changes_and_deletes(
    stores: Stores,
) -> None:
    first = [entry(n, (key(n), key(n + 1000))) for n in range(200)]
    stores.catalog.write(first, 0, {}, None)
    with stores.catalog.pool.connection() as conn:
        assert keys_kept(conn) == keys_of_rows(conn)
        assert conn.execute("SELECT count(*) FROM catalog_keys").fetchone() == (400,)
    # A build over the first 100 rows' keys (a build merges every key of a row it
    # touches: its closure's row look-ups): rows 0-49 get a third source and lose
    # one, rows 50-99 are no longer made (deleted), rows 100-199 are not its business.
    again = [entry(n, (key(n), key(n + 2000))) for n in range(50)]
    merged = [key(n) for n in range(100)] + [key(n + 1000) for n in range(100)]
    stores.catalog.write(again, 0, {}, merged)
    with stores.catalog.pool.connection() as conn:
        kept = keys_kept(conn)
        assert kept == keys_of_rows(conn)
        assert (key(3), key(3).hex()) in kept
        assert (key(2003), key(3).hex()) in kept
        assert (key(1003), key(3).hex()) not in kept
        assert not any(guid == key(70).hex() for _, guid in kept)
        # No key left for a deleted row (the foreign key's cascade did it before).
        assert conn.execute(
            "SELECT count(*) FROM catalog_keys WHERE catalog_id NOT IN (SELECT id FROM catalog)"
        ).fetchone() == (0,)
        assert len(kept) == 50 * 2 + 100 * 2


def test_catalog_keys_follow_a_statement_of_many_rows_without_a_loop_over_both_tables(
    stores: Stores, pg_url: str
) -> None:
    """The trigger finds the rows whose sources changed by a set difference of the
    statement's old and new rows, never a nested loop of one over the other. Its plans
    are made once per session, at its first call (a statement without parameters keeps
    its generic plan), with the transition tables of that call: a session whose first
    call changed one row kept a loop of `was` over `became`, quadratic in the rows every
    later build wrote (2.8 s of PostgreSQL's time in 6 statements at 20M articles).
    Read from the trigger's own plans (auto_explain, its log sent to this session)."""
    rows = 2_000
    stores.catalog.write([entry(n, (key(n), key(n + 10_000))) for n in range(rows)], 0, {}, None)
    plans: list[str] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        conn.execute("SET auto_explain.log_min_duration = 0")
        conn.execute("SET auto_explain.log_nested_statements = on")
        # The session's first call changes one row: its plans are made for that.
        conn.execute(
            "UPDATE catalog SET sources = ARRAY[sources[1], decode(md5(guid), 'hex')]"
            " WHERE guid = %s",
            (key(9).hex(),),
        )
        conn.execute("SET client_min_messages = log")
        # Every row's second source changes, in one statement (as a build's upsert does),
        # and one row's sources stay as they were.
        conn.execute(
            "UPDATE catalog SET sources = CASE WHEN guid = %s THEN sources"
            " ELSE ARRAY[sources[1], decode(md5(guid), 'hex')] END",
            (key(7).hex(),),
        )
        conn.execute("SET client_min_messages = notice")
        kept = keys_kept(conn)
        assert kept == keys_of_rows(conn)
    assert len(kept) == 2 * rows
    assert (key(10_007), key(7).hex()) in kept
    assert (key(10_008), key(8).hex()) not in kept
    moved = [plan for plan in plans if "catalog_keys" in plan and "Tuplestore" in plan]
    assert len(moved) == 2, plans  # the trigger's DELETE and INSERT
    for plan in moved:
        assert not loops_over_both(plan), plan


def test_catalog_keys_follow_a_few_rows_after_a_statement_of_many_without_reading_every_key(
    stores: Stores, pg_url: str
) -> None:
    """The other way round from the test above: a session whose first call changed every
    row (a whole build's write) kept plans made for that many rows, and the trigger's
    DELETE then read the whole of catalog_keys (a hash of it, or 0025's merge join along
    catalog_keys_row up to the highest id changed) for every later call, however few its
    rows: 104 ms for a change of 2 rows at 400k keys, against 1.2 ms planned for them,
    growing with the catalog. Read from the trigger's own plans (auto_explain, analyzed):
    a later call of 2 rows reads their keys only."""
    rows = 2_000
    stores.catalog.write([entry(n, (key(n), key(n + 10_000))) for n in range(rows)], 0, {}, None)
    plans: list[str] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE catalog")
        conn.execute("ANALYZE catalog_keys")
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        # The session's first call changes every row: its plans are made for that.
        conn.execute("UPDATE catalog SET sources = ARRAY[sources[1], decode(md5(guid), 'hex')]")
        conn.execute("LOAD 'auto_explain'")
        conn.execute("SET auto_explain.log_min_duration = 0")
        conn.execute("SET auto_explain.log_nested_statements = on")
        conn.execute("SET auto_explain.log_analyze = on")
        conn.execute("SET client_min_messages = log")
        # The two newest rows (the highest ids: the far end of catalog_keys_row).
        conn.execute(
            "UPDATE catalog SET sources = ARRAY[sources[1], decode(md5(guid || 'again'), 'hex')]"
            " WHERE guid = ANY(%s)",
            ([key(rows - 2).hex(), key(rows - 1).hex()],),
        )
        conn.execute("SET client_min_messages = notice")
        assert keys_kept(conn) == keys_of_rows(conn)
    moved = [plan for plan in plans if "catalog_keys" in plan and "Tuplestore" in plan]
    assert len(moved) == 2, plans  # the trigger's DELETE and INSERT
    for plan in moved:
        assert keys_read(plan) <= 2 * 2, plan  # the 2 rows' keys, 2 each


def keys_read(plan: str) -> int:
    """The rows an analyzed EXPLAIN text's scans of catalog_keys (a table scan, an
    index scan or a bitmap heap scan, not a bitmap index scan) returned, all loops."""
    scans = re.findall(r"Scan(?: using \w+)? on catalog_keys \w+ .*?rows=(\d+) loops=(\d+)\)", plan)
    return sum(int(rows) * int(loops) for rows, loops in scans)


def loops_over_both(plan: str) -> bool:
    """Whether a Nested Loop in an EXPLAIN text has both of its inputs scan a transition
    table (directly: the loop of one over the other)."""
    lines = plan.splitlines()
    for at, line in enumerate(lines):
        if "Nested Loop" not in line:
            continue
        depth = len(line) - len(line.lstrip(" \t->"))
        inputs = [
            below
            for below in lines[at + 1 :]
            if below.lstrip().startswith("->") and len(below) - len(below.lstrip(" \t->")) > depth
        ]
        first = [i for i in inputs if "->" in i]
        child_depth = min((len(i) - len(i.lstrip(" \t->")) for i in first), default=0)
        children = [i for i in first if len(i) - len(i.lstrip(" \t->")) == child_depth][:2]
        if len(children) == 2 and all("Named Tuplestore Scan" in c for c in children):
            return True
    return False


def test_a_build_does_not_write_over_a_row_of_keys_beside_its_own(stores: Stores) -> None:
    """A guid is its release's key: a build's row under the guid of a row the catalog has
    from keys beside the build's (an edge's hijack, or a closure short of that row's keys)
    leaves the row as it was; the keys of both are pending again, the rest is written."""
    stores.catalog.write([entry(n, (key(n), key(n + 1000))) for n in range(10)], 0, {}, None)
    with stores.catalog.pool.connection() as conn:
        before = conn.execute("SELECT guid, name, sources FROM catalog ORDER BY guid").fetchall()
    stray = attrs.evolve(entry(0, (key(0),)), guid=key(5).hex(), name="Someone.Else")
    mine = entry(1, (key(1), key(1001)))
    written = stores.catalog.write([stray, mine], 0, {}, [key(0), key(1000), key(1), key(1001)])
    assert written.held == (key(5).hex(),)
    with stores.catalog.pool.connection() as conn:
        after = conn.execute("SELECT guid, name, sources FROM catalog ORDER BY guid").fetchall()
        pending = {bytes(k) for (k,) in conn.execute("SELECT key FROM catalog_pending")}
    # Row 5 as it was; row 0 no longer made (pruned); row 1 made again as it was.
    assert [r for r in after if r[0] == key(5).hex()] == [r for r in before if r[0] == key(5).hex()]
    assert [r for r in before if r[0] != key(0).hex()] == after
    assert pending == {key(0), key(5), key(1005)}


_COUNTED = """
    SELECT count(*) FILTER (WHERE shown AND state = 'whole'),
           count(*) FILTER (WHERE shown AND state = 'repairable'),
           count(*) FILTER (WHERE shown AND state = 'broken'),
           count(*) FILTER (WHERE NOT shown)
    FROM catalog
"""


def test_the_release_counts_follow_every_change_of_the_catalog_without_reading_it(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`uidx status`, the page and /metrics read the releases by state from what each
    change appended (migration 0031), not from a scan of the catalog per scrape; the
    figures are what counting the catalog gives after builds, prunes, rows shown once
    quiet, grabs, folds and a whole rebuild."""
    monkeypatch.setattr(sql, "_FOLD_ROWS", 3)  # fold at nearly every write

    def as_counted() -> tuple[int, ...]:
        with stores.catalog.pool.connection() as conn:
            row = conn.execute(_COUNTED).fetchone()
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql._STATES))
        assert "on catalog " not in plan, plan
        assert row is not None
        return tuple(int(n) for n in row)

    def figures() -> tuple[int, ...]:
        s = stores.catalog.states()
        return (s.whole, s.repairable, s.broken, s.waiting)

    def made(n: int) -> CatalogEntry:
        state = ("whole", "repairable", "broken")[n % 3]
        return attrs.evolve(entry(n, (key(n),)), state=state, completion=1.0 if n % 2 else 0.5)

    year = 365 * 24 * 3600.0
    stores.catalog.write([made(n) for n in range(60)], year, {}, None)  # halves quiet
    assert figures() == as_counted() != (0, 0, 0, 0)
    # A build of some rows' keys: some made again changed, some no longer made.
    again = [attrs.evolve(made(n), state="broken") for n in range(0, 30, 2)]
    stores.catalog.write(again, year, {}, [key(n) for n in range(30)])
    assert figures() == as_counted()
    stores.catalog.grab(key(1).hex())
    stores.catalog.show_quiet(0)  # every row quiet long enough now
    assert figures() == as_counted()
    assert figures()[3] == 0
    stores.catalog.write([made(n) for n in range(100, 110)], 0, {}, None)  # a whole rebuild
    assert figures() == as_counted() == (3, 4, 3, 0)
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute("SELECT count(*) FROM catalog_counts").fetchone()
    assert rows is not None
    assert rows[0] <= 4 + 3  # folded: a row per (state, shown), and what came since


def test_a_build_writes_each_catalog_row_once(stores: Stores) -> None:
    # A foreign key from catalog_keys locked every catalog row again, once per key
    # (FOR KEY SHARE: the row's xmax and a WAL record), and a row trigger ran a
    # plpgsql call and an INSERT per row: both gone.
    stores.catalog.write([entry(n, (key(n), key(n + 1000))) for n in range(300)], 0, {}, None)
    with stores.catalog.pool.connection() as conn:
        locked = conn.execute("SELECT count(*) FROM catalog WHERE xmax <> '0'").fetchone()
        per_row = conn.execute(
            "SELECT count(*) FROM pg_trigger"
            " WHERE tgrelid IN ('catalog'::regclass, 'catalog_keys'::regclass)"
            " AND tgtype & 1 = 1"  # TRIGGER_TYPE_ROW
        ).fetchone()
    assert locked == (0,)
    assert per_row == (0,)


def test_a_grab_touches_no_key(stores: Stores) -> None:
    stores.catalog.write([entry(n, (key(n),)) for n in range(5)], 0, {}, None)
    with stores.catalog.pool.connection() as conn:
        before = conn.execute("SELECT ctid::text FROM catalog_keys ORDER BY key").fetchall()
    stores.catalog.grab(key(2).hex())
    with stores.catalog.pool.connection() as conn:
        after = conn.execute("SELECT ctid::text FROM catalog_keys ORDER BY key").fetchall()
    assert after == before


def test_the_build_reads_stored_fragments_as_bytes_not_hex(
    stores: Stores, pg_url: str, tmp_path: Path
) -> None:
    for _ in batches_of_generated(stores, 3_000, seed=7, every=3_000):
        pass
    with stores.catalog.pool.connection() as conn:
        keys = [bytes(r[0]) for r in conn.execute("SELECT key FROM releases LIMIT 20")]
    assert keys
    # libpq's own record of the protocol (PQtrace) on the one connection of a pool.
    trace = tmp_path / "libpq.trace"
    with (
        trace.open("w") as sink,
        ConnectionPool(
            pg_url, min_size=1, max_size=1, kwargs={"context": arrays.adapters()}
        ) as pool,
    ):
        with pool.connection() as conn:
            conn.pgconn.trace(sink.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        store = CatalogStore(pool)
        assert len({c.key for c in store.chunks(keys)}) == len(keys)
        assert len(list(store.chunks())) >= len(keys)
        with pool.connection() as conn:
            conn.pgconn.untrace()
    # Each fragments query's answer: its columns' format codes end the
    # RowDescription (1: binary, 0: text).
    text = trace.read_text()
    answers = re.findall(
        r'(?:Parse\t "[^"]*"|Query\t) "SELECT release_key,[^"\n]* packed FROM fragments[^\n]*\n'
        r"(?:.*\n)*?B\t\d+\tRowDescription\t ([^\n]*)",
        text,
    )
    assert len(answers) == 2, answers
    for description in answers:
        assert description.endswith(" 1"), description
        assert re.fullmatch(r'\d "release_key" .* "packed" .* 1', description), description


# How a batch marks a key pending (store/batches.py's _PENDING, less its columns).
_UPSERT_PENDING = (
    "INSERT INTO catalog_pending (key) VALUES (%s)"
    " ON CONFLICT (key) DO UPDATE SET seq = nextval('catalog_pending_seq')"
)


def until_waiting_for_a_lock(
    pg_url: str, builder: threading.Thread, failed: list[BaseException], pids: list[int] | None
) -> None:
    """Return once the server says a connection waits for a lock: one of `pids` (filled
    by the `builder` thread), or any when None; the builder must not have ended."""
    with psycopg.connect(pg_url, autocommit=True) as watch:
        while True:
            if pids is None or pids:
                rows = watch.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND (%s::int[] IS NULL OR pid = ANY(%s::int[]))",
                    (pids, pids),
                ).fetchall()
                if rows:
                    return
            assert builder.is_alive(), failed
            watch.execute("SELECT pg_sleep(0.01)")


def race_with_a_batch(
    pg_url: str, low: bytes, high: bytes, build: Callable[[], None], pids: list[int] | None
) -> None:
    """A batch marks `low` pending and holds it; `build` runs in a thread until the server
    says it waits for a lock (`until_waiting_for_a_lock`: one of `pids`, filled by the
    build, or any connection when None); then the batch marks `high` and commits (key
    order, as every batch). The build must end by itself, without a database error."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            build()
        except psycopg.Error as error:
            failed.append(error)

    with psycopg.connect(pg_url) as batch:
        batch.execute(_UPSERT_PENDING, (low,))
        builder = threading.Thread(target=run)
        builder.start()
        until_waiting_for_a_lock(pg_url, builder, failed, pids)
        batch.execute(_UPSERT_PENDING, (high,))
        batch.commit()
        builder.join(timeout=30)
    assert not builder.is_alive()
    assert failed == []


def pending_keys(pg_url: str) -> set[bytes]:
    with psycopg.connect(pg_url) as conn:
        return {bytes(k) for (k,) in conn.execute("SELECT key FROM catalog_pending")}


def test_a_build_taking_pending_keys_never_deadlocks_with_a_batch_marking_them(
    stores: Stores, pg_url: str
) -> None:
    # A batch upserts its keys into catalog_pending in key order; a build deletes
    # the keys it took. Here the batch holds the first key when the build starts
    # (keys handed in the other order) and then wants the second: the build must
    # wait for the first instead of holding the second (a deadlock, once a 503).
    low, high = sorted([key(1), key(2)])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO catalog_pending (key) VALUES (%s), (%s)", (low, high))
        rows = conn.execute("SELECT key, seq FROM catalog_pending").fetchall()
    seqs: dict[bytes, int] = {bytes(k): int(seq) for k, seq in rows}
    build_pid: list[int] = []

    def build() -> None:
        with psycopg.connect(pg_url) as conn, conn.transaction():
            build_pid.append(conn.info.backend_pid)
            conn.execute(sql._PENDING_DONE, ([high, low], [seqs[high], seqs[low]]))

    # The build waits for what the batch holds.
    race_with_a_batch(pg_url, low, high, build, build_pid)
    # Both were marked again by the batch meanwhile: both stay pending.
    assert pending_keys(pg_url) == {low, high}


def test_a_build_holding_a_row_never_deadlocks_with_a_batch_marking_its_keys(
    stores: Stores, pg_url: str
) -> None:
    # A build whose row the catalog has from keys beside its own (held: not written
    # over) marks the keys of both pending again. The build took `high` (pending,
    # deleted as built); a batch has marked `low` and goes on to mark `high` (key
    # order, as every batch). Marked in the build's own transaction, after it
    # deleted `high`, the build waited for `low` while the batch waited for `high`:
    # a deadlock, one of them refused (a 503 for a batch). Marked after the rows
    # are committed, the batch marks `high` and commits, then the build marks both.
    low, high = sorted([key(1), key(2)])
    stores.catalog.write([attrs.evolve(entry(1, (high, low)), guid="ab" * 16)], 0, {}, None)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO catalog_pending (key) VALUES (%s)", (high,))
        row = conn.execute("SELECT seq FROM catalog_pending WHERE key = %s", (high,)).fetchone()
    assert row is not None
    held: list[tuple[str, ...]] = []

    def build() -> None:
        # The row made again of `high` alone, under the stored row's guid.
        made = attrs.evolve(entry(1, (high,)), guid="ab" * 16)
        held.append(stores.catalog.write([made], 0, {high: int(row[0])}, [high]).held)

    # The build (a connection of its pool's, so any) waits for what the batch holds (`low`).
    race_with_a_batch(pg_url, low, high, build, None)
    assert held == [("ab" * 16,)]
    assert pending_keys(pg_url) == {low, high}
