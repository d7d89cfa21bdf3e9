"""What a daemon command calls first: run under the supervisor, or be a worker.

A daemon command (`uidx edge`, `uidx coordinator`, `uidx prefetch`) adds the
workers' hidden arguments to its parser and, in `run(args)`, returns
`supervised(...)`. In the supervisor process that starts N fresh
interpreters running the same command with `--report-fd FD --worker-slot N
--parent-fd FD` appended; in a worker (the arguments are there) or when one process is
enough, it runs the worker itself::

    def add_parser(subparsers):
        parser = subparsers.add_parser("edge", ...)
        parser.add_argument("--processes", type=int, ...)
        add_worker_arguments(parser)

    def run(args):
        settings = from_process(args.config)
        return supervised(
            args,
            args.processes if args.processes is not None else settings.processes,
            [*global_argv(args), "edge", ...the command's own options...],
            lambda: _run_worker(args, settings),
        )

The worker marks are arguments, not environment variables: config.py is the
one reader of the environment, and a worker's command line says what it is.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from usenet_indexer.supervisor import arbiter
from usenet_indexer.supervisor.policy import DEFAULT_POLICY, RestartPolicy
from usenet_indexer.supervisor.report import REPORT_FD_OPTION

WORKER_SLOT_OPTION = "--worker-slot"
PARENT_FD_OPTION = "--parent-fd"


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the hidden `--worker-slot N`, `--parent-fd FD` and `--report-fd FD` to a
    daemon's parser.

    They become `args.worker_slot`, `args.parent_fd` and `args.report_fd` (None
    when absent); only the supervisor passes them (report.py: `--report-fd`).

    Args:
        parser: the daemon command's parser.
    """
    parser.add_argument(WORKER_SLOT_OPTION, type=int, help=argparse.SUPPRESS)
    parser.add_argument(PARENT_FD_OPTION, type=int, help=argparse.SUPPRESS)
    parser.add_argument(REPORT_FD_OPTION, type=int, help=argparse.SUPPRESS)


def resolve_processes(processes: int, cpu_count: int | None = None) -> int:
    """How many workers `--processes N` means: N, or one per core for 0.

    Args:
        processes: the setting (0 = one per core).
        cpu_count: the cores; None for `os.cpu_count()`.

    Returns:
        At least 1.
    """
    if processes > 0:
        return processes
    cores = cpu_count if cpu_count is not None else os.cpu_count()
    return max(1, cores or 1)


def global_argv(args: argparse.Namespace) -> list[str]:
    """The global `uidx` options of `args` (-v, --config) as a worker needs them."""
    argv: list[str] = []
    if getattr(args, "verbose", False):
        argv.append("-v")
    if getattr(args, "config", None) is not None:
        argv += ["--config", os.fspath(args.config)]
    return argv


def worker_command(worker_argv: Sequence[str]) -> tuple[str, ...]:
    """A worker's command line: a fresh interpreter running `uidx <worker_argv>`."""
    return (sys.executable, "-m", "usenet_indexer", *worker_argv)


def is_worker(args: argparse.Namespace) -> bool:
    """Whether this process is a worker started by a supervisor."""
    return getattr(args, "worker_slot", None) is not None


def supervised(
    args: argparse.Namespace,
    processes: int,
    worker_argv: Sequence[str],
    run_worker: Callable[[], int],
    *,
    notify_socket: str = "",
    grace_seconds: float = 30.0,
    policy: RestartPolicy = DEFAULT_POLICY,
    done: Callable[[], bool] | None = None,
    environment: Mapping[str, str] | None = None,
    always_supervise: bool = False,
    stop_last: frozenset[int] = frozenset(),
    inherit_fds: tuple[int, ...] = (),
    signals: collections.deque[int] | None = None,
) -> int:
    """Run `run_worker` here, or run the supervisor over worker processes.

    This process runs the worker itself when it is a worker (`--worker-slot`
    given), or when one process is asked for and systemd is not waiting for
    READY. Otherwise it becomes the supervisor: `processes` fresh
    interpreters run `uidx <worker_argv> --worker-slot N --parent-fd FD`.
    Under systemd (`notify_socket` set) the supervisor runs even for one
    worker: it is what reports READY=1 and STOPPING=1, restarts a crashed
    worker and keeps a range from being lost to a crash.

    Args:
        args: the command's parsed arguments (with `add_worker_arguments`).
        processes: workers wanted; 0 = one per core.
        worker_argv: the `uidx` arguments of a worker: the global options
            (`global_argv(args)`), the command and its options, without
            `--processes` (harmless if left in: workers ignore it).
        run_worker: runs one worker in this process, returns its exit status.
        notify_socket: $NOTIFY_SOCKET from the settings; empty otherwise.
        grace_seconds: how long a stop waits before SIGKILL.
        policy: restart pauses and halting limits.
        done: asked every few seconds by the supervisor; True stops the
            workers (`--exit-when-done`).
        environment: variables added to the workers' environment.
        always_supervise: run the supervisor even for one worker (workers
            of different roles, as in `uidx standalone`).
        stop_last: slots stopped only once the others are gone (the
            standalone coordinator, which the edges need to give back).
        inherit_fds: file descriptors the workers inherit (the coordinators'
            one listening socket).
        signals: the stop signals the command's start-up recorded
            (`startup.StartupSignals.received`), which the supervisor takes as
            its own queue: one that came after the command's last look stops it.

    Returns:
        The worker's exit status, or the supervisor's: 0 after a stop,
        78 (EXIT_STARTUP_ERROR) when a worker could not start, 1 after a
        crash loop.
    """
    if is_worker(args):
        return run_worker()
    count = resolve_processes(processes)
    if count == 1 and not notify_socket and not always_supervise:
        return run_worker()
    options = arbiter.ArbiterOptions(
        command=worker_command(worker_argv),
        processes=count,
        grace_seconds=grace_seconds,
        policy=policy,
        notify_socket=notify_socket,
        done=done,
        environment=dict(environment or {}),
        stop_last=stop_last,
        inherit_fds=inherit_fds,
    )
    return arbiter.run(options, signals)
