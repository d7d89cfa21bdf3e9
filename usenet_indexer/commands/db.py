"""`uidx db`: the embedded PostgreSQL cluster and the schema migrations.

Without DATABASE_URL, uidx keeps its own PostgreSQL cluster in
`<uidx home>/postgres`, reached through a unix socket only (see
`usenet_indexer.store.pgcluster`). `start`, `stop` and `status` act on that
cluster; `psql` and `migrate` use DATABASE_URL when it is set, else the
cluster.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

import attrs

from usenet_indexer.commands import seconds
from usenet_indexer.config import from_process
from usenet_indexer.errors import ConfigError, DatabaseError
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
        DatabaseError: the server cannot be started, stopped or reached, or a
            migration failed.
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
    url, cluster = database_url(locations.database_url, locations.home)
    # A stopped embedded cluster runs just for this and is stopped again.
    started = cluster is not None and not cluster.status().running
    if cluster is not None and started:
        cluster.start()
    try:
        applied = migrate_named(url, cluster)
    finally:
        if cluster is not None and started:
            cluster.stop()
    print("\n".join(f"applied {name}" for name in applied) or "nothing to apply")
    return 0
