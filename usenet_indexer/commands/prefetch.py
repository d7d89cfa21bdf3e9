"""`uidx prefetch`: fill the coordinator's spool from the NNTP servers of the settings.

Reads the servers from UIDX_NNTP (or `nntp` in the settings file), for
example `nntps://user:pass@news.example.com:563?connections=20`; a group is
fetched from the first server that carries it. Connects to the coordinator's
PostgreSQL (DATABASE_URL, or the embedded cluster the coordinator runs) and
writes compressed chunks into $UIDX_HOME/spool: leased ranges first, from
their resume point, then planned ranges in plan order.

SIGTERM, SIGINT or SIGHUP: chunks in flight are abandoned (never
half-written); the next start fetches them again. Runs one process (under the supervisor
when systemd starts it).
"""

from __future__ import annotations

import argparse
from functools import partial

import trio

from usenet_indexer.config import Settings, from_process
from usenet_indexer.errors import run_reporting
from usenet_indexer.prefetch.daemon import PrefetchOptions, run_prefetcher
from usenet_indexer.prefetch.servers import server_configs
from usenet_indexer.supervisor.entry import add_worker_arguments, global_argv, supervised


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `uidx prefetch`."""
    parser = subparsers.add_parser(
        "prefetch",
        help="fill the spool from the NNTP servers (UIDX_NNTP)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_worker_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Prefetch until SIGTERM, SIGINT or SIGHUP.

    Raises:
        ConfigError: no NNTP server, a bad server URL or prefetch setting.
    """
    settings = from_process(args.config)
    # Checked before any worker starts: a mistake stops the supervisor at once.
    PrefetchOptions.from_settings(settings)
    server_configs(settings.nntp, settings.nntp_connections)
    argv = [*global_argv(args), "prefetch"]
    return supervised(
        args,
        1,
        argv,
        partial(run_worker, settings, args.parent_fd),
        notify_socket=settings.notify_socket,
    )


def run_worker(settings: Settings, parent_fd: int | None) -> int:
    """One prefetcher in this process until it is stopped; 0."""
    run_reporting(lambda: trio.run(partial(run_prefetcher, settings, parent_fd=parent_fd)))
    return 0
