"""`uidx edge`: index ranges for the coordinator.

Needs COORDINATOR_URL and NODE_TOKEN only (environment or settings file).
Leases a range, streams its chunks, indexes them, posts a batch every
--batch-articles articles and finishes the range; then the next one. With
nothing to do it asks again every idle_seconds; --ranges N stops after N
ranges, or as soon as there is nothing to do.

SIGTERM, SIGINT or SIGHUP: the current chunk is indexed, what is indexed is
posted and the range is given back (the next worker resumes from the last
stored batch); an edge waiting for work stops at once. A second signal stops
at once, still giving the range back.

--processes N (0 = one per core; default: the processes setting) runs N
worker processes under the supervisor, which restarts a crashed worker,
halts on a start-up error (a rejected token, bad settings) and forwards
the signals; a worker exits when the supervisor dies.
"""

from __future__ import annotations

import argparse
from functools import partial

from usenet_indexer.commands import non_negative_int, positive_int
from usenet_indexer.config import Settings, default, from_process
from usenet_indexer.edge.options import EdgeOptions
from usenet_indexer.supervisor.entry import add_worker_arguments, global_argv, supervised


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `uidx edge`.

    Args:
        subparsers: the `uidx` subcommand registry.
    """
    parser = subparsers.add_parser(
        "edge",
        help="index ranges for the coordinator (needs COORDINATOR_URL and NODE_TOKEN)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--ranges", type=positive_int, help="stop after N ranges, or when there is nothing to do"
    )
    parser.add_argument(
        "--batch-articles",
        type=positive_int,
        help="articles per posted batch (default: the batch_articles setting,"
        f" {default('batch_articles')})",
    )
    parser.add_argument(
        "--processes",
        type=non_negative_int,
        help="worker processes (0 = one per core; default: the processes setting)",
    )
    add_worker_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run one edge worker until SIGTERM/SIGINT/SIGHUP, or until --ranges are done.

    Args:
        args: parsed arguments (config, ranges, batch_articles).

    Returns:
        0.

    Raises:
        ConfigError: bad settings; COORDINATOR_URL or NODE_TOKEN missing.
        NodeApiError: the token was refused, or (with --ranges) leasing failed.
    """
    settings = from_process(args.config)
    # Checked before any worker starts: a mistake stops the supervisor at once.
    options = EdgeOptions.from_settings(
        settings, ranges=args.ranges, batch_articles=args.batch_articles
    )
    argv = [*global_argv(args), "edge"]
    if args.ranges is not None:
        argv += ["--ranges", str(args.ranges)]
    if args.batch_articles is not None:
        argv += ["--batch-articles", str(args.batch_articles)]
    processes = args.processes if args.processes is not None else settings.processes
    return supervised(
        args,
        processes,
        argv,
        partial(run_worker, settings, options, args.parent_fd, args.report_fd),
        notify_socket=settings.notify_socket,
    )


def run_worker(
    settings: Settings,
    options: EdgeOptions,
    parent_fd: int | None,
    report_fd: int | None = None,
) -> int:
    """One worker in this process (edge/process.py); 78 when the coordinator refuses its
    token."""
    # Imported here: a supervisor never indexes (trio, httpx and the indexer are a
    # worker's own, ~17 MB of a supervisor's memory).
    from usenet_indexer.edge.process import run_worker as run_in_this_process

    return run_in_this_process(settings, options, parent_fd, report_fd)
