"""The coordinator's database dumped and restored (`uidx db dump` and `uidx db restore`).

Theory of operation
-------------------
A dump is `pg_dump --format=custom` of the uidx database: the embedded
cluster's (through its socket, with the cluster's own pg_dump) or
DATABASE_URL's. Its bytes go to the caller's writer (commands/db.py writes
the file whole or not at all); pg_dump's verbose lines give the progress
(each table as its rows are read).

A restore is `pg_restore --single-transaction` into a database that holds
nothing of its own:

- The dump is looked at first: pg_dump's custom format, with uidx's
  `schema_migrations` in it, whose migrations this uidx must know (a dump of
  a newer uidx is refused as a newer database is, `check_applied`), before
  the database is touched.
- The database must be empty. One that holds a uidx schema whose every
  table is empty counts as empty: any uidx command (`uidx status`, a
  coordinator started too early) migrates an empty database as it opens it,
  and pg_restore then failed on the tables it made. That schema is dropped
  (`DROP SCHEMA public CASCADE`, its extensions with it) and the public
  schema made again, so the database holds exactly what the dump holds.
  `pg_restore --clean` was the other way: it drops only the objects the
  dump holds, so a schema migrated by another uidx version keeps objects
  the dump lacks beside the restored ones (and the next migration fails on
  them), and it would as readily drop a database full of data, which a
  restore must refuse.
- Rows anywhere, other schemas' tables, or another session on the
  database (a coordinator, a prefetcher, a command) are refused in one line
  before anything changes.
- The restore holds the migrations' advisory lock (store/migrate.py's
  LOCK_KEY) from the check to the end, on a session of its own: a uidx
  process that starts meanwhile waits to migrate until the restored
  `schema_migrations` is there, then applies only what the dump lacks.
  The restore itself migrates an older dump to this uidx's schema, and
  analyzes the restored tables (pg_restore leaves the planner no
  statistics; searches rely on index plans).

pg_restore runs with `--no-owner --no-privileges`: a dump of DATABASE_URL's
database (its own roles) restores into the embedded cluster (role `uidx`)
and back. A password in DATABASE_URL reaches the tools as PGPASSWORD, never
on their command line.
"""

from __future__ import annotations

import collections
import os
import re
import stat
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import attrs
import psycopg
from psycopg import conninfo, sql

from usenet_indexer.errors import DatabaseError, InputError
from usenet_indexer.store.migrate import LOCK_KEY, check_applied, load_migrations, migrate
from usenet_indexer.store.pgcluster import Cluster, client_tool

# pg_dump's custom format begins with these bytes.
CUSTOM_FORMAT_MAGIC = b"PGDMP"
# The bytes of a dump read from pg_dump at a time.
BLOCK_BYTES = 1 << 20
# The last lines of a tool's stderr kept for its error message.
TAIL_LINES = 40
# How long looking at a dump's table of contents or its migrations may take
# (they are read from the file's start and one table's data); a restore or a
# dump takes as long as it takes.
LOOK_SECONDS = 300.0

Progress = Callable[[str], None]

# The verbose lines that are progress, and how they are shown.
_DUMP_PROGRESS = ((re.compile(r'pg_dump: dumping contents of table "(.+)"'), "dumping table {}"),)
_RESTORE_PROGRESS = (
    (re.compile(r'pg_restore: processing data for table "(.+)"'), "restoring table {}"),
    (re.compile(r'pg_restore: creating INDEX "(.+)"'), "indexing {}"),
)
# The relations of a database that are not PostgreSQL's own.
_RELATIONS = """
    SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
      AND n.nspname NOT IN ('pg_catalog', 'information_schema')
      AND n.nspname NOT LIKE 'pg\\_toast%%' AND n.nspname NOT LIKE 'pg\\_temp\\_%%'
    ORDER BY 1, 2
"""
_TABLES = """
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1
"""
_OTHER_SESSIONS = """
    SELECT count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
      AND backend_type = 'client backend'
"""
_APPLIED = "SELECT version, name FROM schema_migrations ORDER BY version"


@attrs.frozen
class Target:
    """The database a dump reads or a restore writes.

    Attributes:
        url: its conninfo or URL (may hold a password).
        cluster: the embedded cluster it is in; None for DATABASE_URL's.
    """

    url: str
    cluster: Cluster | None

    @property
    def shown(self) -> str:
        """The database as messages name it (no password)."""
        if self.cluster is not None:
            return f"the embedded PostgreSQL in {self.cluster.data_dir}"
        parts = conninfo.conninfo_to_dict(self.url)
        where = f" on {parts['host']}" if parts.get("host") else ""
        return f"DATABASE_URL's database {parts.get('dbname', '')}{where}".replace("  ", " ")

    def tool(self, name: str) -> str:
        """pg_dump or pg_restore: the cluster's own, else one for DATABASE_URL's server."""
        return self.cluster.tool(name) if self.cluster is not None else client_tool(name)

    def dbname_and_env(self) -> tuple[str, dict[str, str]]:
        """The `--dbname` of a tool (no password) and its environment (PGPASSWORD)."""
        parts = conninfo.conninfo_to_dict(self.url)
        password = parts.pop("password", None)
        env = dict(os.environ)
        if password is not None:
            env["PGPASSWORD"] = str(password)
        return conninfo.make_conninfo("", **parts), env


@attrs.frozen
class Restored:
    """What a restore did."""

    tables: int  # tables whose rows were restored
    migrations: tuple[str, ...]  # applied after it (an older dump brought up to date)
    last: str  # the schema's last migration now


def applied_migrations(target: Target) -> dict[int, str]:
    """The database's `schema_migrations` (version -> file name).

    Raises:
        DatabaseError: it cannot be reached, or holds no uidx schema.
    """
    try:
        with psycopg.connect(target.url, autocommit=True) as conn:
            found = conn.execute("SELECT to_regclass('public.schema_migrations')").fetchone()
            if found is None or found[0] is None:
                raise DatabaseError(
                    f"{target.shown} holds no uidx schema (no schema_migrations): nothing to"
                    " dump; is it the right UIDX_HOME (--home) or DATABASE_URL?"
                )
            return {int(v): str(n) for v, n in conn.execute(_APPLIED).fetchall()}
    except psycopg.Error as error:
        raise DatabaseError(f"cannot read {target.shown}: {_one_line(str(error))}") from error


def dump(target: Target, write: Callable[[bytes], object], progress: Progress) -> int:
    """Dump the database with pg_dump's custom format into `write`; how many tables.

    Args:
        target: the database.
        write: takes the dump's bytes in order (raises to stop the dump).
        progress: told each table as pg_dump reads it.

    Raises:
        DatabaseError: pg_dump failed (its error in one line).
    """
    dbname, env = target.dbname_and_env()
    argv = [target.tool("pg_dump"), "--format=custom", "--verbose", "--no-password"]
    return _run_tool([*argv, f"--dbname={dbname}"], env, write, progress, _DUMP_PROGRESS)


@attrs.frozen
class DumpFile:
    """A dump seen to be one of a uidx database this uidx can restore.

    Attributes:
        path: the file.
        applied: the migrations its database had applied (version -> file name).
    """

    path: Path
    applied: Mapping[int, str]


def check_dump(target: Target, path: Path) -> DumpFile:
    """Look at a dump before anything is restored (the database is not touched).

    Raises:
        InputError: the file cannot be read, is not pg_dump's custom format, or is
            not a dump of a uidx database (the message names it).
        SchemaMismatch: its database was migrated by a newer uidx.
    """
    try:
        with path.open("rb") as stream:
            regular = stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
            head = stream.read(len(CUSTOM_FORMAT_MAGIC)) if regular else b""
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from error
    if not regular:
        # pg_restore reads it three times (its list, its migrations, the restore).
        raise InputError(f"cannot read {path}: is not a regular file")
    if head != CUSTOM_FORMAT_MAGIC:
        raise InputError(
            f"{path} is not a dump of `uidx db dump` (pg_dump's custom format begins with"
            f" {CUSTOM_FORMAT_MAGIC.decode()})"
        )
    pg_restore = target.tool("pg_restore")
    listed = _look(pg_restore, path, "--list")
    if not re.search(r"^\d+; \d+ \d+ TABLE DATA public schema_migrations ", listed, re.M):
        raise InputError(f"{path} is a dump of a database with no uidx schema in it")
    applied = _copied_rows(_look(pg_restore, path, "--data-only", "--table=schema_migrations"))
    check_applied(applied, load_migrations(), where=f"the dump {path}")
    return DumpFile(path, applied)


def restore(target: Target, dump: DumpFile, progress: Progress) -> Restored:
    """Restore a dump into the empty database, then migrate and analyze it.

    Args:
        target: the database (empty, or holding only an empty uidx schema).
        dump: the dump, as `check_dump` found it.
        progress: told each table and index as pg_restore makes it, and the steps.

    Raises:
        DatabaseError: the database is not empty, another session uses it, or
            pg_restore failed (rolled back whole: nothing was restored).
    """
    known = load_migrations()
    try:
        with psycopg.connect(target.url, autocommit=True) as conn:
            # Held on this session to the end: migrators wait for the restore.
            conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
            _make_empty(conn, target, progress)
            progress(f"restoring {dump.path} into {target.shown}")
            dbname, env = target.dbname_and_env()
            argv = [target.tool("pg_restore"), "--verbose", "--no-owner", "--no-privileges"]
            argv += ["--single-transaction", "--exit-on-error", "--no-password"]
            argv += [f"--dbname={dbname}", str(dump.path)]
            try:
                tables = _run_tool(argv, env, None, progress, _RESTORE_PROGRESS)
            except DatabaseError as error:
                # One transaction: rolled back whole.
                raise DatabaseError(
                    f"{dump.path} not restored, nothing of it kept: {error}"
                ) from error
            progress("migrating" if len(dump.applied) < len(known) else "checking the schema")
            migrations = tuple(migrate(conn))
            progress("analyzing the restored tables")
            conn.execute("ANALYZE")
    except psycopg.Error as error:
        raise DatabaseError(
            f"cannot restore into {target.shown}: {_one_line(str(error))}"
        ) from error
    return Restored(tables, migrations, known[-1].name)


def _make_empty(conn: psycopg.Connection[Any], target: Target, progress: Progress) -> None:
    """Refuse a database with anything of its own; drop an empty uidx schema."""
    (others,) = conn.execute(_OTHER_SESSIONS).fetchone() or (0,)
    if others:
        raise DatabaseError(
            f"{target.shown} is in use by {others} other sessions (a coordinator, a prefetcher,"
            " a command?): stop them, then restore"
        )
    relations = conn.execute(_RELATIONS).fetchall()
    if not relations:
        return
    foreign = [f"{schema}.{name}" for schema, name in relations if schema != "public"]
    tables = [name for (name,) in conn.execute(_TABLES).fetchall()]
    held = foreign or [name for name in tables if name != "schema_migrations" and _rows(conn, name)]
    if held or "schema_migrations" not in tables:
        what = held[0] if held else relations[0][1]
        raise DatabaseError(
            f"{target.shown} is not empty ({what} holds data): restore into an empty"
            " database (a new UIDX_HOME, or a new database for DATABASE_URL)"
        )
    # Only an empty uidx schema, which a uidx command made as it opened the database.
    progress("dropping the empty uidx schema a uidx command made as it opened the database")
    with conn.transaction():
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
        conn.execute("GRANT USAGE ON SCHEMA public TO PUBLIC")


def _rows(conn: psycopg.Connection[Any], table: str) -> bool:
    query = sql.SQL("SELECT EXISTS (SELECT FROM public.{})").format(sql.Identifier(table))
    row = conn.execute(query).fetchone()
    return bool(row and row[0])


def _look(pg_restore: str, path: Path, *options: str) -> str:
    """pg_restore's text of the dump (`--list`, or a table's data as SQL) on stdout."""
    try:
        done = subprocess.run(
            [pg_restore, *options, "--file=-", str(path)],
            capture_output=True,
            text=True,
            timeout=LOOK_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InputError(f"cannot read {path} with {pg_restore}: {error}") from error
    if done.returncode != 0:
        raise InputError(f"{path} cannot be read as a dump: {_errors(done.stderr.splitlines())}")
    return done.stdout


def _copied_rows(text: str) -> dict[int, str]:
    """The (version, name) rows of schema_migrations in pg_restore's COPY text."""
    rows: dict[int, str] = {}
    inside = False
    for line in text.splitlines():
        if line.startswith("COPY public.schema_migrations "):
            inside = True
        elif inside and line == "\\.":
            break
        elif inside:
            version, name, *_ = line.split("\t")
            rows[int(version)] = name
    return rows


def _run_tool(
    argv: list[str],
    env: Mapping[str, str],
    write: Callable[[bytes], object] | None,
    progress: Progress,
    patterns: Iterable[tuple[re.Pattern[str], str]],
) -> int:
    """Run pg_dump or pg_restore: its output to `write`, its verbose lines that
    `patterns` match to `progress`; how many lines the first pattern matched (tables).

    Raises:
        DatabaseError: it failed (its error lines, in one line).
    """
    shown = list(patterns)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    seen = [0]
    name = Path(argv[0]).name
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if write is not None else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=dict(env),
        )
    except OSError as error:
        raise DatabaseError(f"cannot run {name}: {error.strerror or error}") from error
    with process:
        assert process.stderr is not None
        reader = threading.Thread(
            target=_read_lines, args=(process.stderr, tail, progress, shown, seen), daemon=True
        )
        reader.start()
        try:
            if write is not None:
                assert process.stdout is not None
                while block := process.stdout.read(BLOCK_BYTES):
                    write(block)
        except BaseException:
            process.kill()
            raise
        finally:
            process.wait()
            reader.join()
    if process.returncode != 0:
        raise DatabaseError(f"{name} failed (exit {process.returncode}): {_errors(tail)}")
    return seen[0]


def _read_lines(
    stream: IO[bytes],
    tail: collections.deque[str],
    progress: Progress,
    patterns: list[tuple[re.Pattern[str], str]],
    seen: list[int],
) -> None:
    # In a thread of its own: stderr read while stdout is, so neither pipe fills.
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        tail.append(line)
        for index, (pattern, shown) in enumerate(patterns):
            if (match := pattern.fullmatch(line)) is not None:
                seen[0] += index == 0
                progress(shown.format(match.group(1)))


def _errors(lines: Iterable[str]) -> str:
    """A tool's error lines as one line (its last lines when it named none)."""
    kept = list(lines)
    errors = [line for line in kept if ": error: " in line or "FATAL" in line]
    return _one_line(" ".join(errors or kept[-3:])) or "no message"


def _one_line(text: str) -> str:
    return " ".join(text.split())
