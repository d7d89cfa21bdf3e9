"""`uidx db`: the embedded PostgreSQL cluster, the schema migrations, backups.

Without DATABASE_URL, uidx keeps its own PostgreSQL cluster in
`<uidx home>/postgres`, reached through a unix socket only (see
`usenet_indexer.store.pgcluster`). `start`, `stop` and `status` act on that
cluster; `psql`, `migrate`, `dump` and `restore` use DATABASE_URL when it is
set, else the cluster (started for the command when it is stopped, and
stopped again after).

`dump FILE` writes the database as pg_dump's custom format (`-` for standard
output); `restore FILE` loads such a dump into an empty database (a new
home's: any uidx command may have migrated it already), then migrates it to
this uidx and analyzes it. Stop the coordinators and prefetchers first.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from usenet_indexer.commands import Output, output, seconds
from usenet_indexer.config import from_process
from usenet_indexer.errors import ConfigError, DatabaseError
from usenet_indexer.store import backup
from usenet_indexer.store.database import migrate_named
from usenet_indexer.store.pgcluster import Cluster, ClusterStatus, database_url

# The exit status of `uidx db status` when the server does not run, as
# pg_ctl status and systemctl status have it.
NOT_RUNNING = 3


@attrs.frozen
class Locations:
    """Where uidx keeps its data, and the database server to use."""

    home: Path
    database_url: str | None  # DATABASE_URL; None for the embedded cluster


def resolve_locations(args: argparse.Namespace) -> Locations:
    """The uidx home (--home, else the settings' home) and DATABASE_URL.

    Args:
        args: parsed arguments (home, config).

    Returns:
        The locations.

    Raises:
        ConfigError: the home is a file.
    """
    settings = from_process(args.config)
    home: Path = args.home or settings.home
    if home.exists() and not home.is_dir():
        raise ConfigError("--home" if args.home else "home", f"{home} is not a directory")
    return Locations(home=home.absolute(), database_url=settings.database_url or None)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `uidx db` and its subcommands.

    Args:
        subparsers: the `uidx` subcommand registry.
    """
    parser = subparsers.add_parser(
        "db",
        help="the embedded PostgreSQL cluster and migrations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--home",
        type=Path,
        help="the uidx home folder (default: the settings' home: $UIDX_HOME, else /var/lib/uidx as root, else ~/.local/share/uidx)",
    )
    actions = parser.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    _add(actions, common, "start", _start, "make the cluster if needed and start it")
    actions.choices["start"].add_argument(
        "--timeout",
        # pg_ctl waits whole seconds (0: not at all); a day is more than any start takes.
        type=seconds(1, 86_400),
        default=60.0,
        help="seconds to wait for it, 1 to 86400 (default 60)",
    )
    _add(actions, common, "stop", _stop, "stop the cluster")
    actions.choices["stop"].add_argument(
        "--mode",
        choices=("smart", "fast", "immediate"),
        default="fast",
        help="fast (default) ends open sessions, smart waits for them, immediate crashes it",
    )
    _add(
        actions,
        common,
        "status",
        _status,
        f"show the cluster's state (exit {NOT_RUNNING}: stopped)",
    )
    _add(actions, common, "psql", _psql, "run psql on the uidx database")
    actions.choices["psql"].add_argument(
        "psql_args", nargs=argparse.REMAINDER, help="arguments for psql (after --)"
    )
    _add(actions, common, "migrate", _migrate, "apply the schema migrations not applied yet")
    _add(actions, common, "dump", _dump, "write the database to a file (pg_dump's custom format)")
    actions.choices["dump"].add_argument(
        "file", type=Path, metavar="FILE", help="where the dump goes ('-': standard output)"
    )
    _add(
        actions,
        common,
        "restore",
        _restore,
        "load a dump into an empty database, then migrate it",
    )
    actions.choices["restore"].add_argument(
        "file", type=Path, metavar="FILE", help="a dump of `uidx db dump`"
    )
    parser.set_defaults(run=run)


def _add(
    actions: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    name: str,
    action: Callable[[argparse.Namespace, Locations], int],
    help_text: str,
) -> None:
    description = f"{help_text[0].upper()}{help_text[1:]}."
    parser = actions.add_parser(name, parents=[common], help=help_text, description=description)
    parser.set_defaults(db_action=action)


def run(args: argparse.Namespace) -> int:
    """Run one `uidx db` subcommand.

    Args:
        args: parsed arguments (db_action and its options).

    Returns:
        The exit status: 0, or 3 from `status` when the cluster does not run.

    Raises:
        ConfigError: the PostgreSQL binaries are not installed.
        DatabaseError: the server cannot be started, stopped or reached, a
            migration failed, pg_dump or pg_restore failed, or a restore's
            database is not empty.
        SchemaMismatch: a newer uidx migrated the database (or the dump's).
        InputError: a restore's file is not a dump of a uidx database.
        OutputError: a dump's file cannot be written.
    """
    action: Callable[[argparse.Namespace, Locations], int] = args.db_action
    return action(args, resolve_locations(args))


def _cluster(locations: Locations) -> Cluster:
    return Cluster(locations.home / "postgres")


def _start(args: argparse.Namespace, locations: Locations) -> int:
    cluster = _cluster(locations)
    try:
        cluster.start(timeout_seconds=args.timeout)
    except DatabaseError as error:
        # Left running, not stopped: a server that is slow to start (recovery
        # after a crash) finishes in its own time, and stopping it would undo that.
        if not cluster.status().running:
            raise
        raise DatabaseError(
            f"{error}\nPostgreSQL is running, and may still be starting:"
            " `uidx db status` shows it, `uidx db stop` stops it"
        ) from error
    print(_describe(cluster.status()))
    return 0


def _stop(args: argparse.Namespace, locations: Locations) -> int:
    cluster = _cluster(locations)
    cluster.stop(mode=args.mode)
    print(_describe(cluster.status()))
    return 0


def _status(args: argparse.Namespace, locations: Locations) -> int:
    status = _cluster(locations).status()
    print(_describe(status))
    return 0 if status.running else NOT_RUNNING


def _describe(status: ClusterStatus) -> str:
    state = f"running (pid {status.pid})" if status.running else status.state
    version = f"PostgreSQL {status.data_version}" if status.data_version else "-"
    return "\n".join(
        [
            f"state:       {state}",
            f"data folder: {status.data_dir}",
            f"socket:      {status.socket_dir}",
            f"version:     {version}",
            f"binaries:    {status.bindir or '-'}",
        ]
    )


def _psql(args: argparse.Namespace, locations: Locations) -> int:
    url, cluster = database_url(locations.database_url, locations.home)
    if cluster is None:
        argv = ["psql", url]
    elif not cluster.status().running:
        raise DatabaseError(f"the cluster in {cluster.data_dir} does not run: uidx db start")
    else:
        argv = cluster.psql_args()
    extra: list[str] = args.psql_args
    argv += extra[1:] if extra[:1] == ["--"] else extra
    sys.stdout.flush()
    try:
        os.execvp(argv[0], argv)  # replaces this process: psql owns the terminal
    except OSError as error:
        raise DatabaseError(f"cannot run {argv[0]}: {error}") from error


def _migrate(args: argparse.Namespace, locations: Locations) -> int:
    with _database(locations) as (url, cluster):
        applied = migrate_named(url, cluster)
    print("\n".join(f"applied {name}" for name in applied) or "nothing to apply")
    return 0


@contextmanager
def _database(locations: Locations, *, make: bool = True) -> Iterator[tuple[str, Cluster | None]]:
    """DATABASE_URL, else the embedded cluster: a stopped one runs just for the
    command and is stopped again; with `make` False, a home without a cluster is
    refused rather than given a new one."""
    url, cluster = database_url(locations.database_url, locations.home)
    if cluster is not None and not make and not cluster.initialized:
        raise DatabaseError(
            f"no database in {cluster.data_dir}: is it the right home (--home, UIDX_HOME)?"
        )
    started = cluster is not None and not cluster.status().running
    if cluster is not None and started:
        cluster.start()
    try:
        yield url, cluster
    finally:
        if cluster is not None and started:
            cluster.stop()


def _dump(args: argparse.Namespace, locations: Locations) -> int:
    began = time.monotonic()
    # The file first: one that cannot be written is said before a cluster starts.
    with output(args.file) as out, _database(locations, make=False) as (url, cluster):
        target = backup.Target(url, cluster)
        applied = backup.applied_migrations(target)
        _say("dump", f"dumping {target.shown} to {out.shown}")
        written = _Counted(out)
        try:
            tables = backup.dump(target, written.write, _progress("dump", written))
        except DatabaseError as error:
            raise DatabaseError(f"{out.shown} not written: {error}") from error
    last = applied[max(applied)] if applied else "none"
    _say(
        "dump",
        f"{tables} tables (schema at {last}) written to {out.shown},"
        f" {written.size / 1e6:,.1f} MB in {time.monotonic() - began:.1f} s",
    )
    return 0


def _restore(args: argparse.Namespace, locations: Locations) -> int:
    began = time.monotonic()
    url, cluster = database_url(locations.database_url, locations.home)
    # The file first: a wrong one is said before a cluster is made or started.
    dump = backup.check_dump(backup.Target(url, cluster), args.file)
    with _database(locations) as (url, cluster):
        restored = backup.restore(backup.Target(url, cluster), dump, _progress("restore"))
    for name in restored.migrations:
        _say("restore", f"applied {name}")
    _say(
        "restore",
        f"{restored.tables} tables restored from {args.file} (schema at {restored.last})"
        f" in {time.monotonic() - began:.1f} s",
    )
    return 0


@attrs.define(eq=False)
class _Counted:
    """An output that counts what it is given (for the progress lines)."""

    out: Output
    size: int = 0

    def write(self, data: bytes) -> None:
        self.out.write(data)
        self.size += len(data)


def _progress(action: str, written: _Counted | None = None) -> Callable[[str], None]:
    def say(step: str) -> None:
        size = f" ({written.size / 1e6:,.1f} MB written)" if written is not None else ""
        _say(action, f"{step}{size}")

    return say


def _say(action: str, text: str) -> None:
    # On stderr: a dump may go to standard output.
    print(f"uidx db {action}: {text}", file=sys.stderr, flush=True)
