"""The arbiter: starts worker processes, keeps their number up, stops them.

Theory of operation
-------------------
Modelled on gunicorn's arbiter, in plain `os`/`signal`/`subprocess`/`select`
because it runs before any `trio.run` (a process must never fork inside a
running trio loop: python-trio/trio#464). Every worker is a fresh
interpreter started with `subprocess.Popen`, with `--report-fd FD
--worker-slot N --parent-fd FD` appended to its command line.

- Signals: the handlers only append the signal number to a queue; the
  wake-up fd (`signal.set_wakeup_fd`, a non-blocking self-pipe) makes the
  `select` of the loop return, so a signal that arrives just before the loop
  sleeps is not missed.
- The loop, every time it wakes: handle the queued signals; reap the workers
  that ended (`Popen.poll`, a `waitpid(pid, WNOHANG)`, on SIGCHLD and on
  every wake-up); ask the policy (policy.py) what to do with each slot;
  start the workers whose pause is over; SIGKILL the workers left when the
  grace period of a stop is over. It sleeps until the next signal, the next
  restart or the kill deadline.
- Stopping: SIGTERM or SIGINT is forwarded to every worker (each gives its
  range back), once per signal received, so a second Ctrl-C reaches the
  workers as a second signal ("stop now"). SIGHUP stops them too, forwarded
  as SIGTERM (see STOP_SIGNALS). Workers run in their own process
  group, so a terminal's Ctrl-C reaches them once, through the arbiter. After
  `grace_seconds` the workers left get SIGKILL. The arbiter exits when the
  last one is gone. Slots named in `stop_last` (`uidx standalone`'s
  coordinator) get the signals only once every other worker
  is gone: an edge giving its range back and posting its last batch needs
  the coordinator it talks to.
- Parent death: one pipe whose write end only the arbiter holds; every
  worker gets the read end (`pass_fds`). When the arbiter dies, even by
  SIGKILL, the kernel closes the write end and each worker's read end turns
  readable (EOF): `parent.watch_parent` stops the worker. No polling.
- Start-up errors: a worker that cannot start writes why on the report
  pipe (report.py) before it exits 78; the loop reads it when it wakes and
  before it reaps, and says each distinct reason once (in the halt line):
  N workers refused the same token say so once, not N times.
- systemd: READY=1 once the workers are started, STOPPING=1 when the stop
  begins (notify.py).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from types import FrameType

import attrs

from usenet_indexer.supervisor.notify import READY, STOPPING, sd_notify
from usenet_indexer.supervisor.policy import (
    DEFAULT_POLICY,
    Halt,
    Restart,
    RestartPolicy,
    Retire,
    WorkerExit,
    decide,
)
from usenet_indexer.supervisor.report import REPORT_FD_OPTION, decode_report

logger = logging.getLogger(__name__)

# The signals that stop a uidx daemon: the supervisor (which forwards them to
# its workers), and a worker or a daemon run as one process (coordinator,
# prefetcher, edge), which stops the same way on each of them. SIGHUP is what a
# process gets when the ssh session or terminal it runs in is closed, and what
# operators send by habit (`systemctl kill -s HUP`, `kill -HUP`). gunicorn reloads on SIGHUP;
# uidx has no reload, and what an operator expects then is a clean stop
# (ranges given back, chunks in flight abandoned, the embedded PostgreSQL
# stopped), not a process killed by the signal's default action.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# A stop signal the workers are sent in its place: SIGTERM stops them as well,
# and they have no business with a terminal they are not attached to.
FORWARDED_AS: dict[int, int] = {signal.SIGHUP: signal.SIGTERM}

# Exits kept per slot for the policy: it only looks at the latest streak,
# which halts at a handful; the doubling is capped long before 32.
HISTORY_LENGTH = 32

# The status of a stop: the workers were told to stop, whatever they exited with.
EXIT_STOPPED = 0

# The most of an unfinished report line kept (report.py's lines are 512 bytes at
# most): a worker writing garbage cannot grow the arbiter's buffer.
MAX_REPORT_BUFFER_BYTES = 65536


@attrs.frozen
class ArbiterOptions:
    """What the arbiter runs and how.

    Attributes:
        command: a worker's command line; `--report-fd FD --worker-slot N
            --parent-fd FD` is appended for each worker.
        processes: how many workers (at least 1).
        grace_seconds: how long a stop waits for the workers before SIGKILL
            (30 s: a worker posts what it has indexed and gives its range
            back; systemd's TimeoutStopSec must be longer).
        policy: restart pauses and halting limits.
        notify_socket: $NOTIFY_SOCKET when run by systemd; empty otherwise.
    """

    command: tuple[str, ...]
    processes: int
    grace_seconds: float = 30.0
    policy: RestartPolicy = DEFAULT_POLICY
    notify_socket: str = ""
    # Asked every done_poll_seconds: True stops the workers as SIGTERM would
    # (`uidx standalone --exit-when-done`); a failing check is logged and retried.
    # The check is one small query; every 0.5 s, the work's end is noticed
    # within half a second (at 2 s this wait was most of a stop).
    done: Callable[[], bool] | None = None
    done_poll_seconds: float = 0.5
    # Variables added to the workers' environment (the standalone edges' token).
    environment: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    # Slots stopped only once the other workers are gone (see the docstring).
    stop_last: frozenset[int] = frozenset()
    # File descriptors every worker inherits (the coordinators' listening socket).
    inherit_fds: tuple[int, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError("processes must be at least 1")
        if not self.command:
            raise ValueError("the worker command is empty")


@attrs.define(eq=False)
class _Worker:
    slot: int
    process: subprocess.Popen[bytes]
    started_at: float


@attrs.define(eq=False)
class Arbiter:
    """Runs the workers of one daemon (see the module's docstring).

    Build it with `Arbiter.from_options` and call `run()` once, in the main
    thread (signal handlers can only be set there).
    """

    options: ArbiterOptions
    clock: Callable[[], float] = time.monotonic
    workers: dict[int, _Worker] = attrs.Factory(dict)
    pending: dict[int, float] = attrs.Factory(dict)  # slot -> when to restart it
    history: dict[int, collections.deque[WorkerExit]] = attrs.Factory(dict)
    signals: collections.deque[int] = attrs.Factory(collections.deque)
    kill_at: float | None = None  # set when a stop begins
    killed: bool = False
    exit_status: int = EXIT_STOPPED
    _wake_read: int = -1
    _parent_read: int = -1
    _report_read: int = -1
    _report_write: int = -1
    _report_buffer: bytes = b""
    # The start-up errors the workers reported (pid -> reason), until reaped.
    _reports: dict[int, str] = attrs.Factory(dict)
    # The reasons logged already: each is said once.
    _said: set[str] = attrs.Factory(set)
    _next_done_check: float = 0.0
    # The stop signals the stop_last slots are still owed, in order.
    _owed: list[int] = attrs.Factory(list)

    @classmethod
    def from_options(
        cls, options: ArbiterOptions, signals: collections.deque[int] | None = None
    ) -> Arbiter:
        """An arbiter for `options`, not started; `signals` is its queue of received
        signals when the command recorded some before (supervisor/startup.py)."""
        if signals is None:
            return cls(options)
        return cls(options, signals=signals)

    @property
    def stopping(self) -> bool:
        """Whether a stop (signal or halt) has begun."""
        return self.kill_at is not None

    def run(self) -> int:
        """Start the workers and supervise them until they are all gone.

        Returns:
            0 after a stop by SIGTERM/SIGINT/SIGHUP or once every worker finished
            its work; the policy's status after a halt (78 for a worker's
            start-up error, 1 for a crash loop).
        """
        wake_read, wake_write = os.pipe()
        parent_read, parent_write = os.pipe()
        report_read, report_write = os.pipe()
        os.set_blocking(wake_read, False)
        os.set_blocking(wake_write, False)
        os.set_blocking(report_read, False)
        self._wake_read, self._parent_read = wake_read, parent_read
        self._report_read, self._report_write = report_read, report_write
        previous = self._install_handlers(wake_write)
        try:
            return self._run()
        finally:
            self._kill_all()  # only if something above went wrong
            previous.restore()
            for fd in (wake_read, wake_write, parent_read, parent_write, report_read, report_write):
                os.close(fd)

    def _run(self) -> int:
        # A stop the command's start-up recorded in the queue (after its last
        # look, before these handlers) is taken before any worker starts.
        self._handle_signals()
        if not self.stopping:
            self._start_workers()
        while self.workers or (self.pending and not self.stopping):
            self._wait()
            self._handle_signals()
            self._reap()
            self._stop_the_last()
            self._restart_due()
            self._kill_late()
            self._check_done()
        logger.info("supervisor %d: all workers gone, exit %d", os.getpid(), self.exit_status)
        return self.exit_status

    def _start_workers(self) -> None:
        for slot in range(self.options.processes):
            self._spawn(slot)
        logger.info(
            "supervisor %d: %d workers started: %s",
            os.getpid(),
            len(self.workers),
            " ".join(f"{w.slot}:{w.process.pid}" for w in self.workers.values()),
        )
        if not self.stopping:  # a worker that cannot even be spawned halts
            sd_notify(self.options.notify_socket, READY)

    # -- the loop's steps

    def _wait(self) -> None:
        deadlines = [*self.pending.values()]
        if self.kill_at is not None and not self.killed:
            deadlines.append(self.kill_at)
        if self.options.done is not None and not self.stopping:
            deadlines.append(self._next_done_check)
        timeout = max(0.0, min(deadlines) - self.clock()) if deadlines else None
        if self.signals:
            timeout = 0.0
        readable, _, _ = select.select([self._wake_read, self._report_read], [], [], timeout)
        if self._wake_read in readable:
            _drain(self._wake_read)
        if self._report_read in readable:
            self._read_reports()

    def _handle_signals(self) -> None:
        while self.signals:
            signum = self.signals.popleft()
            if signum in STOP_SIGNALS:
                self._stop(
                    FORWARDED_AS.get(signum, signum),
                    reason=f"{signal.Signals(signum).name} received",
                )
            # SIGCHLD only wakes the loop; _reap looks at every worker.

    def _read_reports(self) -> None:
        # Non-blocking, and never at end of file: the arbiter holds the write end too.
        # One read of a pipe's whole capacity (64 KiB on Linux): all that is in it, and
        # a worker that kept writing could not keep the loop here.
        with contextlib.suppress(BlockingIOError):
            self._report_buffer += os.read(self._report_read, 65536)
        *lines, self._report_buffer = self._report_buffer.split(b"\n")
        if len(self._report_buffer) > MAX_REPORT_BUFFER_BYTES:
            self._report_buffer = b""
        for line in lines:
            report = decode_report(line)
            if report is not None:
                self._reports[report[0]] = report[1]

    def _reap(self) -> None:
        # A worker writes its report before it exits: read now, it is in the pipe.
        self._read_reports()
        for slot, worker in list(self.workers.items()):
            status = worker.process.poll()
            if status is None:
                continue
            del self.workers[slot]
            now = self.clock()
            exit = WorkerExit(slot, worker.process.pid, status, worker.started_at, now)
            self._on_exit(exit, now)

    def _on_exit(self, exit: WorkerExit, now: float) -> None:
        history = self.history.setdefault(exit.slot, collections.deque(maxlen=HISTORY_LENGTH))
        reason = self._reports.pop(exit.pid, None)
        new = reason is not None and reason not in self._said
        said = self._say_once(reason)
        if self.stopping:
            logger.log(
                logging.ERROR if new else logging.INFO,
                "worker %d (pid %d) stopped: %s%s",
                *(exit.slot, exit.pid, _describe(exit.status), said),
            )
            return
        decision = decide(exit, history, now, self.options.policy)
        history.append(exit)
        if isinstance(decision, Restart):
            logger.warning(
                "worker %d (pid %d) %s after %.1f s; restarting in %.2f s%s",
                exit.slot,
                exit.pid,
                _describe(exit.status),
                exit.ran_seconds,
                decision.after_seconds,
                said,
            )
            self.pending[exit.slot] = now + decision.after_seconds
        elif isinstance(decision, Retire):
            logger.info("worker %d (pid %d) finished its work (exit 0)", exit.slot, exit.pid)
        else:
            self._halt(decision, said)

    def _say_once(self, reason: str | None) -> str:
        """What a worker's exit line adds for its reported start-up error: the
        reason the first time, a pointer to it after (every worker of a supervisor
        is refused the same token at once)."""
        if reason is None:
            return ""
        if reason in self._said:
            return " (the same start-up error as above)"
        self._said.add(reason)
        return f": {reason}"

    def _restart_due(self) -> None:
        if self.stopping:
            self.pending.clear()
            return
        now = self.clock()
        for slot, due in list(self.pending.items()):
            if due <= now and not self.stopping:  # a failed start halts
                del self.pending[slot]
                self._spawn(slot)
                if slot in self.workers:
                    logger.info(
                        "worker %d restarted (pid %d)", slot, self.workers[slot].process.pid
                    )

    def _kill_late(self) -> None:
        if self.kill_at is None or self.killed or self.clock() < self.kill_at:
            return
        self.killed = True
        for worker in self.workers.values():
            logger.warning(
                "worker %d (pid %d) still running %g s after the stop: SIGKILL",
                worker.slot,
                worker.process.pid,
                self.options.grace_seconds,
            )
        self._kill_all()

    def _check_done(self) -> None:
        if self.options.done is None or self.stopping or self.clock() < self._next_done_check:
            return
        self._next_done_check = self.clock() + self.options.done_poll_seconds
        try:
            done = self.options.done()
        except Exception as error:  # the database, say: logged, asked again next time
            logger.warning(
                "supervisor %d: cannot tell whether the work is done: %s", os.getpid(), error
            )
            return
        if done:
            self._stop(signal.SIGTERM, reason="the work is done")

    # -- actions

    def _spawn(self, slot: int) -> None:
        command = [
            *self.options.command,
            REPORT_FD_OPTION,
            str(self._report_write),
            "--worker-slot",
            str(slot),
            "--parent-fd",
            str(self._parent_read),
        ]
        try:
            # process_group=0: a terminal's Ctrl-C reaches the workers once,
            # forwarded by the arbiter, not twice.
            environment = (
                {**os.environ, **self.options.environment} if self.options.environment else None
            )
            process = subprocess.Popen(
                command,
                pass_fds=(self._parent_read, self._report_write, *self.options.inherit_fds),
                process_group=0,
                env=environment,
            )
        except OSError as error:
            self._halt(Halt(f"cannot start worker {slot}: {error}", 1))
            return
        self.workers[slot] = _Worker(slot, process, self.clock())
        logger.debug("worker %d started (pid %d): %s", slot, process.pid, command)

    def _stop(self, signum: int, *, reason: str) -> None:
        if not self.stopping:
            logger.info(
                "supervisor %d: %s; stopping %d workers (SIGKILL after %g s)",
                os.getpid(),
                reason,
                len(self.workers),
                self.options.grace_seconds,
            )
            sd_notify(self.options.notify_socket, STOPPING)
            self.kill_at = self.clock() + self.options.grace_seconds
            self.pending.clear()
        self._owed.append(signum)
        for worker in self.workers.values():
            if worker.slot not in self.options.stop_last:
                _send(worker, signum)
        self._stop_the_last()

    def _stop_the_last(self) -> None:
        """Send the stop_last slots what they are owed, once the other workers are gone."""
        if not self._owed or any(s not in self.options.stop_last for s in self.workers):
            return
        for signum in self._owed:
            for worker in self.workers.values():
                _send(worker, signum)
        self._owed.clear()

    def _halt(self, decision: Halt, said: str = "") -> None:
        logger.error("supervisor %d halts: %s%s", os.getpid(), decision.reason, said)
        if self.exit_status == EXIT_STOPPED:
            self.exit_status = decision.exit_status
        self._stop(signal.SIGTERM, reason="halting")

    def _kill_all(self) -> None:
        for worker in self.workers.values():
            _send(worker, signal.SIGKILL)

    def _install_handlers(self, wake_write: int) -> _Handlers:
        def enqueue(signum: int, frame: FrameType | None) -> None:
            # Only enqueue: the loop decides (it runs outside the handler).
            self.signals.append(signum)

        previous = _Handlers(signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False))
        for signum in (*STOP_SIGNALS, signal.SIGCHLD):
            previous.handlers[signum] = signal.signal(signum, enqueue)
        return previous


@attrs.define(eq=False)
class _Handlers:
    # What the arbiter replaced, put back when it returns (tests run it in-process).
    wakeup_fd: int
    handlers: dict[signal.Signals, signal._HANDLER] = attrs.Factory(dict)

    def restore(self) -> None:
        for signum, handler in self.handlers.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self.wakeup_fd)


def run(options: ArbiterOptions, signals: collections.deque[int] | None = None) -> int:
    """Run an arbiter for `options` (see `Arbiter.run` and `Arbiter.from_options`)."""
    return Arbiter.from_options(options, signals).run()


def _send(worker: _Worker, signum: int) -> None:
    # Popen.send_signal polls first and sends nothing to a reaped worker
    # (its pid may belong to another process by now).
    worker.process.send_signal(signum)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"


__all__: Sequence[str] = ("Arbiter", "ArbiterOptions", "run")
