"""One edge worker process: `uidx edge`'s worker side (commands/edge.py is the
command line and the supervisor's side, which imports this only in a worker:
a supervisor never indexes, and trio, httpx and the indexer are a worker's own).
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import AsyncIterator
from functools import partial

import trio

from usenet_indexer.config import Settings
from usenet_indexer.core.indexer import indexer_kind
from usenet_indexer.edge import worker
from usenet_indexer.edge.client import NodeApiError
from usenet_indexer.edge.options import EdgeOptions
from usenet_indexer.errors import run_reporting
from usenet_indexer.gcpolicy import no_cyclic_gc
from usenet_indexer.supervisor import EXIT_STARTUP_ERROR
from usenet_indexer.supervisor.arbiter import STOP_SIGNALS
from usenet_indexer.supervisor.parent import watch_parent
from usenet_indexer.supervisor.report import report_startup_error

logger = logging.getLogger(__name__)

# sys.setswitchinterval in a worker process (see run_worker); Python's default is 5 ms.
SWITCH_INTERVAL_SECONDS = 0.0005


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
