"""`uidx coordinator`: the node API on the coordinator's PostgreSQL catalog.

Uses DATABASE_URL when it is set, else the embedded cluster (started for
the run and stopped after it, unless `uidx db start` started it), applies the
migrations, and serves the node API on UIDX_LISTEN until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
from functools import partial

import trio

from usenet_indexer.config import Settings, from_process
from usenet_indexer.coordinator.daemon import run_coordinator
from usenet_indexer.errors import run_reporting
from usenet_indexer.supervisor.entry import add_worker_arguments, global_argv, supervised


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `uidx coordinator`.

    Args:
        subparsers: the `uidx` subcommand registry.
    """
    parser = subparsers.add_parser(
        "coordinator",
        help="serve the node API on the PostgreSQL catalog",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Test-only: the negative control of scripts/chaos stores batches without
    # the fence, to show that the checker finds what the fence prevents.
    parser.add_argument("--unsafe-no-fence", action="store_true", help=argparse.SUPPRESS)
    add_worker_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the coordinator until SIGINT or SIGTERM.

    Args:
        args: parsed arguments (config).

    Returns:
        0 after a clean shutdown.

    Raises:
        ConfigError: bad settings, the listen address cannot be bound, or no
            DATABASE_URL and no PostgreSQL binaries.
        DatabaseError: the database cannot be started, reached or migrated.
    """
    settings = from_process(args.config)
    # One process: several would race for the listen port and the embedded
    # cluster. Under systemd the supervisor runs it, reporting READY=1.
    argv = [*global_argv(args), "coordinator"]
    fenced = not args.unsafe_no_fence
    if not fenced:
        argv.append("--unsafe-no-fence")
    return supervised(
        args,
        1,
        argv,
        partial(run_worker, settings, fenced=fenced, parent_fd=args.parent_fd),
        notify_socket=settings.notify_socket,
    )


def run_worker(settings: Settings, *, fenced: bool = True, parent_fd: int | None = None) -> int:
    """One coordinator in this process until stopped (a signal, or the supervisor's end); 0."""
    # A start-up error comes out of the nurseries wrapped: reported bare.
    run = partial(run_coordinator, settings, fenced=fenced, parent_fd=parent_fd)
    run_reporting(lambda: trio.run(run))
    return 0
