"""Schema migrations and the fresh-database-per-test fixtures, on a real PostgreSQL."""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import TupleRow

from usenet_indexer.errors import DatabaseError, SchemaMismatch
from usenet_indexer.store.database import MigrationCancel, migrate_url
from usenet_indexer.store.migrate import Migration, check_schema, load_migrations, migrate

# Seconds a test waits for its threads; far above what they need.
THREAD_DEADLINE_SECONDS = 30


def _applied(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")
        return [(version, name) for version, name in rows]


def _exists(conn: psycopg.Connection[TupleRow], table: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    assert row is not None
    return bool(row[0])


def test_uidx_migrations_ship_with_the_package() -> None:
    migrations = load_migrations()
    assert migrations[0] == Migration(1, "0001_core.sql", migrations[0].sql)
    assert [m.version for m in migrations] == sorted({m.version for m in migrations})


def test_migrate_from_empty_then_again(pg_empty_url: str) -> None:
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        assert migrate(conn) == [m.name for m in load_migrations()]
        assert migrate(conn) == []
        for table in ("groups", "nodes", "ranges", "schema_migrations"):
            assert _exists(conn, table)
    assert _applied(pg_empty_url) == [(m.version, m.name) for m in load_migrations()]


def test_migrate_works_on_a_connection_without_autocommit(pg_empty_url: str) -> None:
    with psycopg.connect(pg_empty_url) as conn:
        assert migrate(conn) == [m.name for m in load_migrations()]
    assert len(_applied(pg_empty_url)) == len(load_migrations())


def test_a_cancelled_migration_is_rolled_back_and_named(pg_empty_url: str) -> None:
    first = Migration.from_file("0001_first.sql", "CREATE TABLE first (a int);")
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        with pytest.raises(DatabaseError, match=r"0001_first\.sql was cancelled"):
            migrate(conn, [first], cancelled=lambda: True)
        assert not _exists(conn, "first")


def test_a_migration_is_named_before_it_runs(
    pg_empty_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An upgrade's index over a big catalog runs for minutes before the
    # coordinator serves: the log says which migration it waits for then, not
    # only once it is done.
    slow = Migration.from_file("0001_slow_index.sql", "CREATE TABLE slow (a int);")
    said_before: list[str] = []

    def running() -> bool:  # asked just before the migration's statements
        said_before.extend(r.getMessage() for r in caplog.records)
        return False

    caplog.set_level(logging.INFO, logger="usenet_indexer.store.migrate")
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        assert migrate(conn, [slow], cancelled=running) == ["0001_slow_index.sql"]
    assert any("0001_slow_index.sql" in line for line in said_before), said_before


def test_migrations_cancelled_before_they_begin_apply_nothing(pg_empty_url: str) -> None:
    # A coordinator stopped while it connects: the first migration is not begun.
    cancel = MigrationCancel()
    cancel.request()
    with pytest.raises(DatabaseError, match=r"0001_core\.sql was cancelled"):
        migrate_url(pg_empty_url, cancel=cancel)
    with psycopg.connect(pg_empty_url) as conn:
        assert not _exists(conn, "groups")


def test_concurrent_migrators_apply_each_file_once(pg_empty_url: str) -> None:
    # The slow file keeps the first migrator inside its transaction while the
    # second one arrives; without the lock both would apply it.
    migrations = (
        *load_migrations(),
        Migration.from_file("9001_slow.sql", "SELECT pg_sleep(0.3); CREATE TABLE slow (a int);"),
    )
    both_ready = threading.Barrier(2, timeout=THREAD_DEADLINE_SECONDS)

    def migrator() -> list[str]:
        with psycopg.connect(pg_empty_url, autocommit=True) as conn:
            both_ready.wait()
            return migrate(conn, migrations)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(migrator) for _ in range(2)]
        results = [future.result(timeout=THREAD_DEADLINE_SECONDS) for future in futures]
    assert sorted(results[0] + results[1]) == sorted(m.name for m in migrations)
    assert _applied(pg_empty_url) == [(m.version, m.name) for m in migrations]


def test_failing_migration_rolls_back_whole(pg_empty_url: str) -> None:
    core = load_migrations()
    broken = Migration.from_file("9001_broken.sql", "CREATE TABLE half_done (a int); SELECT 1/0;")
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        with pytest.raises(DatabaseError, match=r"9001_broken\.sql .*division by zero"):
            migrate(conn, (*core, broken))
        assert not _exists(conn, "half_done")
        assert _exists(conn, "groups")  # the files before it stay applied
        assert _applied(pg_empty_url) == [(m.version, m.name) for m in core]

        fixed = Migration.from_file("9001_broken.sql", "CREATE TABLE half_done (a int);")
        assert migrate(conn, (*core, fixed)) == ["9001_broken.sql"]
        assert _exists(conn, "half_done")


def test_a_database_a_newer_uidx_migrated_is_refused_naming_its_file(pg_empty_url: str) -> None:
    """A newer uidx applied a migration this one does not know: this one refuses to
    migrate (or use) the database, naming that file and saying to upgrade, and applies
    none of its own missing files; it went on with a warning, on a schema it did not
    know."""
    migrations = load_migrations()
    newer = f"{migrations[-1].version + 1:04d}_from_a_newer_uidx.sql"
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        migrate(conn, migrations[:3])
        conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
            (migrations[-1].version + 1, newer),
        )
        with pytest.raises(SchemaMismatch) as refused:
            migrate(conn)
    said = str(refused.value)
    assert f"migrated by a newer uidx: its migration {newer} is not one this uidx knows" in said
    assert f"(its last is {migrations[-1].name})" in said
    assert "upgrade uidx" in said
    assert [name for _, name in _applied(pg_empty_url)] == [
        *(m.name for m in migrations[:3]),
        newer,
    ]


def test_check_schema_refuses_what_migrate_refuses_and_applies_nothing(
    pg_empty_url: str,
) -> None:
    """What a supervisor asks before it starts workers that migrate: a new database
    passes (nothing is made in it), so does one this uidx migrated part way or whole; a
    newer uidx's or another build's is refused as migrate refuses it."""
    migrations = load_migrations()
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        check_schema(conn)
        assert not _exists(conn, "schema_migrations")
        migrate(conn, migrations[:3])
        check_schema(conn)
        assert len(_applied(pg_empty_url)) == 3
        conn.execute("UPDATE schema_migrations SET name = '0002_other.sql' WHERE version = 2")
        with pytest.raises(SchemaMismatch, match=r"applied as 0002_other\.sql"):
            check_schema(conn)
        conn.execute("DELETE FROM schema_migrations WHERE version = 2")
        newer = f"{migrations[-1].version + 1:04d}_from_a_newer_uidx.sql"
        conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
            (migrations[-1].version + 1, newer),
        )
        with pytest.raises(SchemaMismatch, match=re.escape(f"a newer uidx: its migration {newer}")):
            check_schema(conn)
    assert len(_applied(pg_empty_url)) == 3


def test_a_known_version_applied_under_another_name_is_refused(pg_empty_url: str) -> None:
    """Another build's migration of the same number (a branch, a file replaced before a
    release) is not this uidx's: its schema may differ, so it is refused too."""
    migrations = load_migrations()
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        migrate(conn, migrations[:3])
        conn.execute("UPDATE schema_migrations SET name = '0002_other.sql' WHERE version = 2")
        with pytest.raises(SchemaMismatch) as refused:
            migrate(conn)
    assert (
        f"migration 2 was applied as 0002_other.sql, and this uidx's is {migrations[1].name}"
        in str(refused.value)
    )
    assert len(_applied(pg_empty_url)) == 3


def test_migrate_refuses_a_connection_inside_a_transaction(pg_empty_url: str) -> None:
    with psycopg.connect(pg_empty_url) as conn:
        conn.execute("SELECT 1")  # opens a transaction (no autocommit)
        with pytest.raises(ValueError, match="outside a transaction"):
            migrate(conn)


def test_load_migrations_from_a_folder(tmp_path: Path) -> None:
    (tmp_path / "0002_second.sql").write_text("SELECT 2;")
    (tmp_path / "0001_first.sql").write_text("SELECT 1;")
    (tmp_path / "README.txt").write_text("not a migration")
    assert load_migrations(tmp_path) == (
        Migration(1, "0001_first.sql", "SELECT 1;"),
        Migration(2, "0002_second.sql", "SELECT 2;"),
    )
    (tmp_path / "0002_again.sql").write_text("SELECT 2;")
    with pytest.raises(DatabaseError, match="share version 2"):
        load_migrations(tmp_path)


@pytest.mark.parametrize("name", ["1_short.sql", "0001-dash.sql", "0001_Upper.sql", "0001_.sql"])
def test_misnamed_migration_is_refused(name: str) -> None:
    with pytest.raises(DatabaseError, match=r"0001_some_name\.sql"):
        Migration.from_file(name, "SELECT 1;")


# Both runs write the same unique row: they pass only if each test has a
# database of its own.
@pytest.mark.parametrize("run", [1, 2])
def test_each_test_gets_a_fresh_migrated_database(
    pg_conn: psycopg.Connection[TupleRow], run: int
) -> None:
    assert _applied(pg_conn.info.dsn) == [(m.version, m.name) for m in load_migrations()]
    pg_conn.execute("INSERT INTO groups (name) VALUES ('alt.binaries.test')")
    assert pg_conn.execute("SELECT count(*) FROM groups").fetchone() == (1,)


def test_ranges_keep_their_resume_point_inside_the_range(
    pg_conn: psycopg.Connection[TupleRow],
) -> None:
    group = pg_conn.execute("INSERT INTO groups (name) VALUES ('a.b') RETURNING id").fetchone()
    assert group is not None
    insert = (
        "INSERT INTO ranges (group_id, first_article, last_article, resume) VALUES (%s, 10, 20, %s)"
    )
    pg_conn.execute(insert, (group[0], 21))  # one past the end: the range is done
    with pytest.raises(psycopg.errors.CheckViolation):
        pg_conn.execute(insert, (group[0], 22))
    row = pg_conn.execute("SELECT state, epoch, batches, headers FROM ranges").fetchone()
    assert row == ("planned", 0, 0, 0)


def test_0027_gives_each_stored_release_its_whole_span_as_one_chunk(pg_empty_url: str) -> None:
    # A catalog stored before release_times: each dated release gets one row of
    # its first to last date (the closure reads it as before until it is built
    # again), undated ones none, and no release is marked no album's.
    migrations = load_migrations()
    before = [m for m in migrations if m.version < 27]
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        migrate(conn, before)
        conn.execute(
            "INSERT INTO releases (key, name, head_name, poster, groups, posted, latest,"
            " files_announced) VALUES"
            " (%s, 'a', NULL, 'yenc@power-post.org', '{g}', 1700000000, 1700090000, 13),"
            " (%s, 'b', 'b', 'x@y', '{g}', 1700000500, NULL, NULL),"
            " (%s, 'c', 'c', 'x@y', '{g}', 0, 0, 2)",
            (bytes(16), b"\x02" * 16, b"\x03" * 16),
        )
        migrate(conn)
        rows = conn.execute(
            "SELECT key, poster, files_announced, posted, latest FROM release_times ORDER BY key"
        ).fetchall()
        marked = conn.execute("SELECT count(*) FROM releases WHERE no_album").fetchone()
    assert rows == [
        (bytes(16), "yenc@power-post.org", 13, 1700000000, 1700090000),
        (b"\x02" * 16, "x@y", None, 1700000500, None),
    ]
    assert marked == (0,)


def test_0034_dates_a_release_dated_past_now_when_it_was_stored(pg_empty_url: str) -> None:
    # Rows a build wrote before core/catalog.seen_by: one dated ten years ahead (a
    # poster's clock) is dated when its articles were stored, as the next build of its
    # keys would date it; the others keep their dates.
    stored, ahead = 1_700_000_000, int(time.time()) + 10 * 365 * 86_400
    migrations = load_migrations()
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        migrate(conn, [m for m in migrations if m.version < 34])
        conn.execute(
            "INSERT INTO catalog (guid, name, search_name, category, size, files, poster,"
            " groups, posted, completion, probe_candidate, sources, shown, changed_at)"
            " SELECT g, g, g, 5040, 1, 1, 'p', '{g}', posted, 1, false, '{}', true,"
            " to_timestamp(%s + 0.75)"
            " FROM (VALUES ('ahead', %s), ('past', %s)) AS r (g, posted)",
            (stored, ahead, stored - 600),
        )
        migrate(conn)
        rows = conn.execute("SELECT guid, posted FROM catalog ORDER BY guid").fetchall()
    assert rows == [("ahead", stored), ("past", stored - 600)]


def test_a_migrator_waiting_for_another_says_so(pg_empty_url: str) -> None:
    """A command or coordinator started while another process applies a long
    migration says it waits for it (it waited in silence), then goes on."""
    from usenet_indexer.store.migrate import LOCK_KEY

    said = threading.Event()

    class Told(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting for the migration (or restore) another process" in record.getMessage():
                said.set()

    told = Told(logging.INFO)
    log = logging.getLogger("usenet_indexer.store.migrate")
    log.addHandler(told)
    level = log.level
    log.setLevel(logging.INFO)
    one = Migration.from_file("0001_one.sql", "CREATE TABLE one (a int);")
    applied: list[list[str]] = []

    def migrating() -> None:
        with psycopg.connect(pg_empty_url, autocommit=True) as conn:
            applied.append(migrate(conn, [one]))

    try:
        with psycopg.connect(pg_empty_url) as holder:  # its transaction holds the lock
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            waiter = threading.Thread(target=migrating)
            waiter.start()
            assert said.wait(30)
            assert applied == []  # still waiting
            holder.rollback()
        waiter.join(30)
    finally:
        log.removeHandler(told)
        log.setLevel(level)
    assert applied == [["0001_one.sql"]]
