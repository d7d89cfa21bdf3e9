"""`uidx standalone`: the whole indexer on one machine, under one supervisor.

Runs the coordinator (the embedded PostgreSQL unless DATABASE_URL is set),
the spool-prefetcher (against the NNTP servers of UIDX_NNTP) and edge
workers (--processes N, 0 = one per core, the default), each a worker
process of one supervisor: worker 0 is the coordinator, worker 1 the
prefetcher, the others are edges. The edges are the node `standalone`,
which gets a fresh token at every start (passed to them in their
environment, never on a command line).

It indexes what is planned (`uidx groups add`, `uidx ranges plan`);
--exit-when-done stops it once every planned range is done (or parked as
failed: then it says so and exits 1) and the probes that come after are
done too: every candidate probed or given up, and the catalog built from
what they found (the obfuscated releases renamed). That wait goes on while
the probe queue moves, saying every few seconds how many candidates are
left, and ends after --probe-stall-seconds without progress. For scripts
and tests. SIGTERM, SIGINT or SIGHUP (its terminal closed) stops every
worker as their own commands do: the edges give their ranges back.

Where to look afterwards: `uidx status`, and `uidx catalog export --out FILE`
(the schema of `uidx index`).
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import socket
import sys
import time
from collections.abc import Callable
from datetime import datetime

import attrs

from usenet_indexer.commands import coordinator as coordinator_command
from usenet_indexer.commands import edge as edge_command
from usenet_indexer.commands import non_negative_int
from usenet_indexer.commands import prefetch as prefetch_command
from usenet_indexer.config import Settings, from_process
from usenet_indexer.core.drain import Drained, DrainWatch, Queue
from usenet_indexer.edge.options import EdgeOptions
from usenet_indexer.errors import ConfigError
from usenet_indexer.prefetch.daemon import PrefetchOptions
from usenet_indexer.prefetch.servers import server_configs
from usenet_indexer.store.catalog import CatalogTable
from usenet_indexer.store.clusterowner import start_if_stopped
from usenet_indexer.store.database import migrate_url
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.pgcluster import database_url
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.probes import ProbeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.supervisor.entry import (
    add_worker_arguments,
    global_argv,
    resolve_processes,
    supervised,
)
from usenet_indexer.supervisor.startup import StartupStopped, stop_signals

logger = logging.getLogger(__name__)

NODE_NAME = "standalone"
COORDINATOR_SLOT = 0
PREFETCH_SLOT = 1
FIRST_EDGE_SLOT = 2
# How long a standalone edge waits for the coordinator's port before it
# starts anyway (and retries with backoff), and how often it looks.
COORDINATOR_START_SECONDS = 120.0
LISTENER_POLL_SECONDS = 0.2
# --exit-when-done gives up on a probe queue that has not moved for this long:
# longer than a retry's longest pause (240 s) and a dead prober's lease (300 s).
PROBE_STALL_SECONDS = 600


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `uidx standalone`."""
    parser = subparsers.add_parser(
        "standalone",
        help="coordinator, prefetcher and edges together on one machine",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--processes",
        type=non_negative_int,
        default=0,
        help="edge worker processes (0 = one per core, the default)",
    )
    parser.add_argument(
        "--exit-when-done",
        action="store_true",
        help="stop once every planned range is done and the probes after them are (nothing"
        " planned: stop at once; exit 1 when ranges were parked as failed instead)",
    )
    parser.add_argument(
        "--probe-stall-seconds",
        type=non_negative_int,
        default=PROBE_STALL_SECONDS,
        help="with --exit-when-done: stop waiting for the probe queue once it has not moved"
        f" for this long (default {PROBE_STALL_SECONDS}; 0: do not wait for the probes)",
    )
    add_worker_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the indexer until SIGTERM/SIGINT/SIGHUP, or until the planned ranges are done.

    Raises:
        ConfigError: no NNTP server, or a bad setting (named).
        DatabaseError: the database cannot be started, reached or migrated.
    """
    settings = from_process(args.config)
    server_configs(settings.nntp, settings.nntp_connections)
    PrefetchOptions.from_settings(settings)
    if args.worker_slot is not None:
        return _run_worker(settings, args.worker_slot, args.parent_fd, args.report_fd)
    edges = resolve_processes(args.processes)
    if settings.listen_host_port[1] == 0:
        raise ConfigError("listen", "uidx standalone needs a fixed port: its edges connect to it")
    url, cluster = database_url(settings.database_url, settings.home)
    # Before the cluster starts: a stop signal during start-up (the migrations
    # may take minutes) ends it through the `finally:` that stops the cluster.
    with stop_signals() as signals:
        try:
            started = start_if_stopped(cluster)
            try:
                signals.check()
                with signals.interruptible():
                    migrate_url(url)
                with open_pool(url, settings, max_size=1) as pool:
                    token = NodeStore(pool).rotate(NODE_NAME)
                    ranges = RangeStore(pool)
                    if args.exit_when_done and ranges.progress().planned == 0:
                        print("nothing is planned: see `uidx groups add` and `uidx ranges plan`")
                        return 0
                    done = (
                        _work_done(args, settings, ranges, CatalogTable(pool), ProbeStore(pool))
                        if args.exit_when_done
                        else None
                    )
                    signals.check()
                    status = supervised(
                        args,
                        FIRST_EDGE_SLOT + edges,
                        [*global_argv(args), "standalone"],
                        lambda: 0,  # never called: always_supervise
                        notify_socket=settings.notify_socket,
                        done=done,
                        environment={
                            "COORDINATOR_URL": coordinator_url(settings.listen),
                            "NODE_TOKEN": token,
                        },
                        always_supervise=True,
                        # The edges give their ranges back to a coordinator still up.
                        stop_last=frozenset({COORDINATOR_SLOT}),
                        signals=signals.received,
                    )
                    parked = ranges.progress().parked if status == 0 else 0
            finally:
                if started is not None:
                    started.stop()
                    logger.info("embedded PostgreSQL in %s stopped", started.data_dir)
        except StartupStopped as stopped:
            logger.info("supervisor %d: %s: stopped", os.getpid(), stopped)
            return 0
    if status == 0:
        home = "" if settings.database_url else f"UIDX_HOME={settings.home} "
        print(
            f"Where to look: `{home}uidx status` (groups, ranges, nodes, servers) and"
            f" `{home}uidx catalog export --out catalog.jsonl` (the schema of `uidx index`)."
        )
        if args.exit_when_done and parked:
            print(
                f"uidx standalone: {parked} ranges are parked as failed, not indexed: see"
                f" `{home}uidx status`, then `{home}uidx ranges retry`",
                file=sys.stderr,
            )
            return 1
        left = done.left if done is not None else None
        if left is not None and left.candidates:
            print(
                f"uidx standalone: {left.candidates} probe candidates are left unprobed (the"
                f" probe queue stood still for {args.probe_stall_seconds} s): see `{home}uidx"
                " status`; the next run probes them",
                file=sys.stderr,
            )
    return status


def _work_done(
    args: argparse.Namespace,
    settings: Settings,
    ranges: RangeStore,
    catalog: CatalogTable,
    probes: ProbeStore,
) -> _WorkDone:
    """The arbiter's done check for --exit-when-done: the probes waited for, unless they
    are off (probe_share = 0: no prober runs) or --probe-stall-seconds is 0."""
    waits = settings.probe_share > 0 and args.probe_stall_seconds > 0
    return _WorkDone(
        ranges, catalog, probes if waits else None, DrainWatch(float(args.probe_stall_seconds))
    )


@attrs.define(eq=False)
class _WorkDone:
    """--exit-when-done: every range done or parked, then the probe queue drained and the
    catalog built from it (core/drain.py decides; its lines are logged).

    Without probes to wait for, the keys pending when the ranges were all done
    (the last batches', and probes' outcomes until then) are waited for, not
    the keys a probe marks later.
    """

    ranges: RangeStore
    catalog: CatalogTable
    probes: ProbeStore | None
    watch: DrainWatch
    clock: Callable[[], float] = time.monotonic
    # What the probe queue held when the wait ended (None: not waited for).
    left: Queue | None = None
    _ranges_done_at: datetime | None = None

    def __call__(self) -> bool:
        if self._ranges_done_at is None:
            if not self.ranges.all_done():
                return False
            self._ranges_done_at = self.catalog.now()
        if self.probes is None:
            return not self.catalog.any_pending(self._ranges_done_at)
        decision = self.watch.observe(self.probes.queue(), self.clock())
        if not isinstance(decision, Drained):
            if decision.line is not None:
                logger.info("%s", decision.line)
            return False
        logger.log(logging.WARNING if decision.stalled else logging.INFO, "%s", decision.line)
        self.left = decision.left
        return True


def coordinator_url(listen: str) -> str:
    """The URL the edges use for the coordinator's `listen` address."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _run_worker(settings: Settings, slot: int, parent_fd: int | None, report_fd: int | None) -> int:
    if slot == COORDINATOR_SLOT:
        return coordinator_command.run_worker(settings, parent_fd=parent_fd)
    if slot == PREFETCH_SLOT:
        return prefetch_command.run_worker(settings, parent_fd)
    if not settings.coordinator_url or not settings.node_token:
        raise ConfigError("node_token", "a standalone edge is started by `uidx standalone`")
    options = EdgeOptions.from_settings(settings, ranges=None, batch_articles=None)
    # The coordinator (worker 0) starts its database first: wait for its port
    # rather than through the edge's backoff, so that every edge starts at once.
    if not _wait_for_listener(*settings.listen_host_port, COORDINATOR_START_SECONDS, parent_fd):
        logger.warning("the supervisor is gone (parent pipe fd %s closed): stopping", parent_fd)
        return 0
    return edge_command.run_worker(settings, options, parent_fd, report_fd)


def _wait_for_listener(host: str, port: int, seconds: float, parent_fd: int | None) -> bool:
    """Until something accepts on host:port, or `seconds` passed (then the edge's retries go
    on); False when the supervisor is gone meanwhile (its pipe `parent_fd` readable: see
    supervisor/parent.py), which stops the worker as it would once started."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host or "127.0.0.1", port), timeout=1.0):
                return True
        except OSError:
            watched = [parent_fd] if parent_fd is not None else []
            if select.select(watched, [], [], LISTENER_POLL_SECONDS)[0]:
                return False
    logger.warning("the coordinator does not listen on %s:%d yet; the edge retries", host, port)
    return True
