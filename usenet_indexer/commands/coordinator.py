"""`uidx coordinator`: the node API, newznab API, status page and catalog build
on the PostgreSQL catalog.

Uses DATABASE_URL when it is set, else the embedded cluster (started for
the run and stopped after it, unless `uidx db start` started it; one that a
coordinator killed with SIGKILL left running is taken over and stopped after
the run), applies the migrations, and serves on UIDX_LISTEN until SIGINT,
SIGTERM or SIGHUP.

--processes N (0 = one per core; default: the processes setting) runs N
coordinator processes under the supervisor (under systemd, NOTIFY_SOCKET set,
even one), which owns the embedded cluster: a worker's crash or kill -9 and
its restart leave it running, and it is stopped with the supervisor. The
supervisor binds UIDX_LISTEN
once and every process accepts on that one socket (the kernel hands each
connection to one of them), so edges, the *arr programs and the status page
see one address. Nothing lives only in one process: leases, batches and the
catalog are in PostgreSQL, and the catalog build is shared out by poster
(coordinator/catalog_build.py), so coordinators on several machines against
one PostgreSQL work the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from functools import partial

import trio

from usenet_indexer.config import Settings, from_process
from usenet_indexer.errors import ConfigError, run_reporting
from usenet_indexer.fdlimit import allow_open_files
from usenet_indexer.mallocpolicy import keep_freed_memory
from usenet_indexer.store.clusterowner import start_if_stopped
from usenet_indexer.store.database import check_schema_named
from usenet_indexer.store.pgcluster import database_url
from usenet_indexer.supervisor.entry import (
    add_worker_arguments,
    global_argv,
    is_worker,
    resolve_processes,
    supervised,
)
from usenet_indexer.supervisor.startup import StartupSignals, StartupStopped, stop_signals

logger = logging.getLogger(__name__)

LISTEN_FD_OPTION = "--listen-fd"
METRICS_FD_OPTION = "--metrics-fd"


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
    parser.add_argument(
        "--processes",
        type=int,
        help="coordinator processes on one port (0 = one per core; default: the processes setting)",
    )
    # The supervisor's listening socket, inherited by its workers.
    parser.add_argument(LISTEN_FD_OPTION, type=int, help=argparse.SUPPRESS)
    parser.add_argument(METRICS_FD_OPTION, type=int, help=argparse.SUPPRESS)
    add_worker_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the coordinator until SIGINT, SIGTERM or SIGHUP.

    Args:
        args: parsed arguments (config).

    Returns:
        0 after a clean shutdown.

    Raises:
        ConfigError: bad settings, the listen address cannot be bound, or no
            DATABASE_URL and no PostgreSQL binaries.
        DatabaseError: the database cannot be started, reached or migrated.
        SchemaMismatch: a newer uidx migrated the database.
    """
    settings = from_process(args.config)
    processes = args.processes if args.processes is not None else settings.processes
    if processes < 0:
        raise ConfigError("--processes", "must be 0 (one per core) or more")
    argv = [*global_argv(args), "coordinator"]
    fenced = not args.unsafe_no_fence
    if not fenced:
        argv.append("--unsafe-no-fence")
    work = partial(
        run_worker,
        settings,
        fenced=fenced,
        parent_fd=args.parent_fd,
        listen_fd=args.listen_fd,
        metrics_fd=args.metrics_fd,
    )
    count = resolve_processes(processes)
    if is_worker(args) or (count == 1 and not settings.notify_socket):
        # One process, which starts and stops the cluster itself.
        return work()
    # A supervisor (several workers, or one under systemd, which the supervisor
    # reports READY=1 for and restarts): it binds the address and starts the
    # embedded cluster once, before the workers, which would race for both; the
    # cluster outlives a worker's crash (even kill -9) and its restart, and is
    # stopped with the supervisor. It also reads the schema before any worker starts:
    # a database a newer uidx migrated, or none that answers, is said once (each
    # worker said it, the supervisor halting at the first 78 or after a crash loop).
    # A stop signal from here on ends it through the stack, which stops the cluster.
    with stop_signals() as signals:
        try:
            with contextlib.ExitStack() as stack:
                fd = stack.enter_context(_listening("listen", settings.listen)).fileno()
                fds = [fd]
                argv += [LISTEN_FD_OPTION, str(fd)]
                if settings.metrics_listen:
                    metrics = stack.enter_context(
                        _listening("metrics_listen", settings.metrics_listen)
                    )
                    fds.append(metrics.fileno())
                    argv += [METRICS_FD_OPTION, str(metrics.fileno())]
                stack.enter_context(_database_for_workers(settings, signals))
                signals.check()
                return supervised(
                    args,
                    count,
                    argv,
                    work,
                    notify_socket=settings.notify_socket,
                    inherit_fds=tuple(fds),
                    signals=signals.received,
                )
        except StartupStopped as stopped:
            logger.info("supervisor %d: %s: stopped", os.getpid(), stopped)
            return 0


@contextlib.contextmanager
def _listening(key: str, listen: str) -> Iterator[socket.socket]:
    """A listening socket the coordinator processes share, on `listen` (host:port), the
    value of the setting `key` (named by its errors)."""
    host, _, port_text = listen.rpartition(":")
    host = host.strip("[]")  # never empty: the settings refuse an empty host
    try:
        port = int(port_text)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (ValueError, OSError) as error:
        raise ConfigError(key, f"cannot listen on {listen}: {error}") from error
    family, kind, proto, _, address = infos[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(1024)
    except OSError as error:
        listener.close()
        raise ConfigError(key, f"cannot listen on {listen}: {error.strerror or error}") from error
    listener.set_inheritable(True)
    with listener:
        yield listener


@contextlib.contextmanager
def _database_for_workers(settings: Settings, signals: StartupSignals) -> Iterator[None]:
    """The embedded cluster started here (not by each worker), when no DATABASE_URL is set
    and it is not running already, and stopped after the workers; the database's schema
    checked.

    The workers migrate: after READY=1, which systemd waits for only so long (an
    upgrade's migration may take minutes). They check the schema again, which a
    worker started again after a newer uidx migrated needs.

    Raises:
        SchemaMismatch: a newer uidx migrated the database (said once, here; no
            worker started).
        DatabaseError: the database cannot be reached.
        StartupStopped: a stop signal came.
    """
    url, cluster = database_url(settings.database_url, settings.home)
    started = start_if_stopped(cluster)
    try:
        with signals.interruptible():
            check_schema_named(url, cluster)
        yield
    finally:
        if started is not None:
            started.stop()
            logger.info("embedded PostgreSQL in %s stopped", started.data_dir)


def run_worker(
    settings: Settings,
    *,
    fenced: bool = True,
    parent_fd: int | None = None,
    listen_fd: int | None = None,
    metrics_fd: int | None = None,
) -> int:
    """One coordinator in this process until stopped (a signal, or the supervisor's end); 0."""
    # Imported here: a supervisor never serves (the daemon's imports, hypercorn,
    # jinja2, the catalog's code, are a worker's own).
    from usenet_indexer.coordinator.daemon import run_coordinator

    # Before any thread exists: one arena, large buffers reused (mallocpolicy.py).
    keep_freed_memory()
    # A descriptor per edge connection: the soft limit (often 1,024) up to the hard one.
    allow_open_files()
    # A start-up error comes out of the nurseries wrapped: reported bare.
    run = partial(
        run_coordinator,
        settings,
        fenced=fenced,
        parent_fd=parent_fd,
        listen_fd=listen_fd,
        metrics_fd=metrics_fd,
    )
    run_reporting(lambda: trio.run(run))
    return 0
