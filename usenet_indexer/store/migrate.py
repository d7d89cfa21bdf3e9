"""Versioned schema migrations: numbered SQL files, each applied once, in order.

Theory of operation
-------------------
The files are `usenet_indexer/store/migrations/NNNN_name.sql`. `migrate` applies
the ones a database has not seen, one transaction per file; that transaction
also inserts the file's row in `schema_migrations`, so a file is either
applied and recorded or neither. Each transaction starts by taking a
transaction-level advisory lock and only then reads what is applied: two
processes migrating at once (two coordinators starting) queue on the lock,
and the second finds the first's work done. The lock goes with the
transaction, so a crashed migrator never leaves it held.

Before anything is applied, what the database has applied is held against
the files this uidx knows (`check_applied`): a version above its last one
(a newer uidx migrated the database) or a known version recorded under
another file's name (another build's migration) is refused, naming the
file, with SchemaMismatch. An older uidx on a newer schema would read and
write tables whose meaning changed; it used to go on with a warning.
`check_schema` asks the same and applies nothing: a supervisor asks it
before it starts workers that migrate, so a mismatch is said once, not by
each of them.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import attrs
import psycopg
from psycopg import pq

from usenet_indexer.errors import DatabaseError, SchemaMismatch

logger = logging.getLogger(__name__)

MIGRATIONS_PACKAGE = "usenet_indexer.store.migrations"
FILE_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
# The advisory lock of migrations: any constant that no other code of ours
# locks; these are the bytes of "uidxmigr". Advisory locks are per database.
LOCK_KEY = int.from_bytes(b"uidxmigr", "big")

APPLIED = "SELECT version, name FROM schema_migrations"
# Whether schema_migrations exists (where CREATE_TABLE would make it): NULL if not.
EXISTS = "SELECT to_regclass('schema_migrations')"

CREATE_TABLE = b"""
CREATE TABLE IF NOT EXISTS schema_migrations (
    version int PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


@attrs.frozen
class Migration:
    """One SQL file of the schema."""

    version: int
    name: str  # the file name, "0001_core.sql"
    sql: str

    @classmethod
    def from_file(cls, name: str, sql: str) -> Migration:
        """A migration from its file name and text.

        Args:
            name: the file name, `NNNN_name.sql` (lower case, digits, underscores).
            sql: the statements.

        Returns:
            The migration; its version is the number the name starts with.

        Raises:
            DatabaseError: the name does not follow the pattern.
        """
        match = FILE_NAME.fullmatch(name)
        if match is None:
            raise DatabaseError(f"migration {name}: the name must look like 0001_some_name.sql")
        return cls(version=int(match.group(1)), name=name, sql=sql)


def load_migrations(source: Traversable | None = None) -> tuple[Migration, ...]:
    """Read the migrations of a folder or package, in version order.

    Args:
        source: where the `.sql` files are (a package's files or a plain
            folder, e.g. a `pathlib.Path`); None for uidx's own migrations.

    Returns:
        The migrations, by version.

    Raises:
        DatabaseError: a `.sql` file is misnamed, or two share a version.
    """
    folder = resources.files(MIGRATIONS_PACKAGE) if source is None else source
    found = [
        Migration.from_file(entry.name, entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    ]
    return _checked(found)


def migrate(
    conn: psycopg.Connection[Any],
    migrations: Sequence[Migration] | None = None,
    *,
    cancelled: Callable[[], bool] = lambda: False,
) -> list[str]:
    """Apply the migrations the database has not seen yet, each in its own transaction.

    Safe to run from several processes at once, and again: a second run
    applies nothing.

    Args:
        conn: a connection that is not inside a transaction (autocommit or idle).
        migrations: what to apply; None for uidx's own (`load_migrations()`).
        cancelled: asked before each migration's statements (see
            `database.MigrationCancel`): True rolls it back and raises.

    Returns:
        The file names applied now, in order (empty when none were missing).

    Raises:
        DatabaseError: a migration failed or was cancelled (rolled back whole;
            the message names the file), or the migrations are misnamed or
            duplicated.
        SchemaMismatch: the database was migrated by another uidx (`check_applied`);
            nothing was applied.
        ValueError: the connection is inside a transaction.
        psycopg.Error: the connection failed (not a migration).
    """
    wanted = load_migrations() if migrations is None else _checked(migrations)
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        # Inside a transaction ours would become savepoints, and the lock and
        # every file would commit only with the caller's transaction.
        raise ValueError("migrate needs a connection outside a transaction")
    applied: list[str] = []
    while (name := _apply_next(conn, wanted, cancelled)) is not None:
        applied.append(name)
        logger.info("migration %s applied", name)
    return applied


def _apply_next(
    conn: psycopg.Connection[Any], wanted: Sequence[Migration], cancelled: Callable[[], bool]
) -> str | None:
    # One transaction: lock, see what is applied, apply the first missing file.
    with conn.transaction():
        got = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (LOCK_KEY,)).fetchone()
        if not (got and got[0]):
            # Another process migrates (an upgrade's index over a big catalog can take
            # minutes): said once, not waited for in silence.
            logger.info("waiting for the migration (or restore) another process is applying")
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        conn.execute(CREATE_TABLE)
        done = _applied(conn)
        check_applied(done, wanted)
        pending = [m for m in wanted if m.version not in done]
        if not pending:
            return None
        migration = pending[0]
        # Said before it runs: an index over a big catalog takes minutes, during
        # which a coordinator or a command waits with nothing else to show.
        logger.info("applying migration %s", migration.name)
        if cancelled():
            # Asked last thing before the statements that may take minutes: a
            # cancel sent to the server between two statements cancels nothing.
            raise DatabaseError(f"migration {migration.name} was cancelled")
        # The caller's statement_timeout covered the wait for the lock; an
        # index build on a big table may rightly take longer than it.
        conn.execute("SET LOCAL statement_timeout = 0")
        try:
            # Bytes and no parameters: psycopg sends the file as one simple
            # query, which may hold many statements.
            conn.execute(migration.sql.encode())
        except psycopg.Error as error:
            raise DatabaseError(
                f"migration {migration.name} failed and was rolled back: {error}"
            ) from error
        conn.execute(
            "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
            (migration.version, migration.name),
        )
    return migration.name


def check_schema(
    conn: psycopg.Connection[Any], migrations: Sequence[Migration] | None = None
) -> None:
    """Refuse a database another uidx migrated (`check_applied`), applying nothing.

    A database with no `schema_migrations` yet has applied nothing: it passes.

    Args:
        conn: a connection.
        migrations: this uidx's; None for `load_migrations()`.

    Raises:
        SchemaMismatch: as `check_applied`.
        DatabaseError: the migrations are misnamed or duplicated.
        psycopg.Error: the connection failed.
    """
    known = load_migrations() if migrations is None else _checked(migrations)
    found = conn.execute(EXISTS).fetchone()
    if found is not None and found[0] is not None:
        check_applied(_applied(conn), known)


def _applied(conn: psycopg.Connection[Any]) -> dict[int, str]:
    return {int(version): str(name) for version, name in conn.execute(APPLIED).fetchall()}


def _checked(migrations: Sequence[Migration]) -> tuple[Migration, ...]:
    ordered = tuple(sorted(migrations, key=lambda m: m.version))
    for before, after in itertools.pairwise(ordered):
        if before.version == after.version:
            raise DatabaseError(
                f"migrations {before.name} and {after.name} share version {before.version}"
            )
    return ordered


def check_applied(
    applied: Mapping[int, str], known: Sequence[Migration], *, where: str = "the database"
) -> None:
    """Refuse a database whose applied migrations are not all this uidx's.

    Args:
        applied: the database's `schema_migrations`, version -> file name.
        known: this uidx's migrations.
        where: the database as the message names it (a dump's: "the dump FILE").

    Raises:
        SchemaMismatch: a version this uidx does not know (above its last one: a
            newer uidx; between two of its own: another build), or a known
            version applied under another file name. The message names the
            database's file and says to upgrade uidx.
    """
    names = {m.version: m.name for m in known}
    last = max(names, default=0)
    unknown = sorted(version for version in applied if version not in names)
    if unknown:
        version = unknown[-1]
        newer = "a newer uidx" if version > last else "another uidx"
        raise SchemaMismatch(
            f"{where} was migrated by {newer}: its migration {applied[version]} is not"
            f" one this uidx knows (its last is {names.get(last, 'none')}); upgrade uidx to"
            " the version that applied it (coordinators and prefetchers are upgraded together)"
        )
    for version, name in sorted(applied.items()):
        if names[version] != name:
            raise SchemaMismatch(
                f"{where} was migrated by another uidx: migration {version} was applied"
                f" as {name}, and this uidx's is {names[version]}; upgrade uidx to the version"
                " that applied it (coordinators and prefetchers are upgraded together)"
            )
