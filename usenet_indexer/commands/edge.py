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
import logging
import signal
import sys
from collections.abc import AsyncIterator
from functools import partial

import trio

from usenet_indexer.commands import non_negative_int, positive_int
from usenet_indexer.config import Settings, default, from_process
from usenet_indexer.core.indexer import indexer_kind
from usenet_indexer.edge import worker
from usenet_indexer.edge.client import NodeApiError
from usenet_indexer.edge.options import EdgeOptions
from usenet_indexer.errors import run_reporting
from usenet_indexer.gcpolicy import no_cyclic_gc
from usenet_indexer.supervisor import EXIT_STARTUP_ERROR
from usenet_indexer.supervisor.arbiter import STOP_SIGNALS
from usenet_indexer.supervisor.entry import add_worker_arguments, global_argv, supervised
from usenet_indexer.supervisor.parent import watch_parent
from usenet_indexer.supervisor.report import report_startup_error

logger = logging.getLogger(__name__)

# sys.setswitchinterval in a worker process (see run_worker); Python's default is 5 ms.
SWITCH_INTERVAL_SECONDS = 0.0005


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
    """One worker in this process; 78 when the coordinator refuses its token (said to
    the supervisor through `report_fd` when there is one: it says it once for all its
    workers; logged here otherwise)."""
    # The inflating thread needs the GIL back after each block it inflates,
    # and waits the switch interval each time while the indexing holds it:
    # beside a busy thread a 15 MB chunk took 64-73 ms to inflate with the
    # default 5 ms, 19-23 ms (as alone) with 0.5 ms. The indexing pays only
    # for the switches the other threads ask for.
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    logger.info("indexer: %s", indexer_kind(options.pure_indexer))
    # Collections at the range runner's own points (gcpolicy): not while it indexes.
    with no_cyclic_gc():
        return run_reporting(
            lambda: trio.run(partial(_until_signal, settings, options, parent_fd)),
            partial(_refused_token, report_fd),
        )


def _refused_token(report_fd: int | None, error: BaseException) -> int | None:
    if isinstance(error, NodeApiError) and error.status in (401, 403):
        report_startup_error(report_fd, f"the coordinator refused this node's token: {error}")
        return EXIT_STARTUP_ERROR
    return None


async def _until_signal(settings: Settings, options: EdgeOptions, parent_fd: int | None) -> None:
    stop = trio.Event()
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_on_signals, signals, stop, nursery.cancel_scope)
            if parent_fd is not None:
                # The supervisor died: stop as on SIGTERM, giving the range back.
                await nursery.start(watch_parent, parent_fd, stop.set)
            await worker.run(settings, options=options, stop=stop)
            nursery.cancel_scope.cancel()


async def _on_signals(
    signals: AsyncIterator[int], stop: trio.Event, scope: trio.CancelScope
) -> None:
    # Handlers only enqueue (trio's receiver); the decisions are made here.
    async for signum in signals:
        name = signal.Signals(signum).name
        if not stop.is_set():
            logger.info("%s: stopping after the current chunk; the range goes back", name)
            stop.set()
        else:
            logger.warning("%s again: stopping now; the range goes back", name)
            scope.cancel()
