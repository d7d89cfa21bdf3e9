"""The supervisor: its pure restart policy, and the arbiter with real processes.

The arbiter tests run the supervisor in a process of its own (it sets signal
handlers and gets signals) over tiny worker programs (`python -c ...`). The
workers share the supervisor's stdout, a pipe the test reads: each says
`EVENT SLOT PID` when it starts, gets a signal or sees the supervisor die.
End of file on that pipe means every process holding it is gone. Nothing
sleeps: every wait is on a pipe, a socket or a process, with a timeout, and
every test has a deadline (the `deadline` fixture).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from usenet_indexer.supervisor import arbiter, entry, notify, parent, policy, report, startup
from usenet_indexer.supervisor.policy import (
    EXIT_CRASH_LOOP,
    EXIT_STARTUP_ERROR,
    Halt,
    Restart,
    RestartPolicy,
    Retire,
    WorkerExit,
    decide,
)

# Every test ends within this, whatever hangs.
TEST_DEADLINE_SECONDS = 30

# The longest a single wait may take (a worker starting: a fresh interpreter).
WAIT_SECONDS = 15.0


@pytest.fixture(autouse=True)
def deadline() -> Iterator[None]:
    """Fail a test that runs longer than TEST_DEADLINE_SECONDS."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"the test ran longer than {TEST_DEADLINE_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, TEST_DEADLINE_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- the policy, as pure code

POLICY = RestartPolicy(
    first_delay_seconds=1.0,
    max_delay_seconds=60.0,
    healthy_after_seconds=60.0,
    early_exit_seconds=10.0,
    early_exits_to_halt=5,
)


def runs(*durations: float, status: int = 1, slot: int = 0) -> list[WorkerExit]:
    """Exits of one slot, one after the other, each running `duration` seconds."""
    exits = []
    now = 1000.0
    for pid, ran in enumerate(durations, start=100):
        exits.append(WorkerExit(slot, pid, status, now, now + ran))
        now += ran + 1.0
    return exits


def decide_last(*durations: float, status: int = 1, now_after: float = 0.0) -> policy.Decision:
    *history, last = runs(*durations, status=status)
    return decide(last, history, last.ended_at + now_after, POLICY)


def test_startup_error_halts_whatever_the_history() -> None:
    for durations in [(0.1,), (3600.0,), (30.0, 30.0, 0.1)]:
        decision = decide_last(*durations, status=EXIT_STARTUP_ERROR)
        assert isinstance(decision, Halt)
        assert decision.exit_status == EXIT_STARTUP_ERROR == 78
        assert "start-up error" in decision.reason


def test_clean_exit_retires_the_slot() -> None:
    assert decide_last(0.1, status=0) == Retire()
    assert decide_last(3600.0, status=0) == Retire()


def test_crash_after_a_long_run_restarts_after_the_first_pause() -> None:
    assert decide_last(3600.0) == Restart(1.0)
    assert decide_last(20.0, 20.0, 20.0, 3600.0) == Restart(1.0)


def test_pause_doubles_with_crashes_in_a_row_up_to_the_cap() -> None:
    # 20 s runs: not early (>= 10 s), not healthy (< 60 s).
    delays = []
    for crashes in range(1, 10):
        decision = decide_last(*([20.0] * crashes))
        assert isinstance(decision, Restart)
        delays.append(decision.after_seconds)
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]


def test_healthy_run_resets_the_doubling() -> None:
    assert decide_last(20.0, 20.0, 20.0, 20.0) == Restart(8.0)
    assert decide_last(20.0, 20.0, 20.0, 60.0, 20.0) == Restart(1.0)
    assert decide_last(20.0, 20.0, 20.0, 60.0, 20.0, 20.0) == Restart(2.0)
    assert decide_last(20.0, 20.0, 20.0, 60.0, 20.0, 20.0, 20.0) == Restart(4.0)


def test_early_deaths_in_a_row_halt() -> None:
    for count in range(1, 5):
        decision = decide_last(*([0.5] * count))
        assert isinstance(decision, Restart), count
    halt = decide_last(0.5, 0.5, 0.5, 0.5, 0.5)
    assert isinstance(halt, Halt)
    assert halt.exit_status == EXIT_CRASH_LOOP
    assert "5 times in a row" in halt.reason


def test_a_run_that_was_not_early_breaks_the_streak() -> None:
    assert isinstance(decide_last(0.5, 0.5, 0.5, 0.5, 10.0, 0.5), Restart)
    assert isinstance(decide_last(0.5, 0.5, 10.0, 0.5, 0.5, 0.5, 0.5), Restart)
    assert isinstance(decide_last(0.5, 10.0, 0.5, 0.5, 0.5, 0.5, 0.5), Halt)


def test_killed_by_a_signal_is_a_crash() -> None:
    assert decide_last(3600.0, status=-signal.SIGKILL) == Restart(1.0)
    assert isinstance(decide_last(*([0.1] * 5), status=-signal.SIGSEGV), Halt)


def test_pause_counts_from_the_exit() -> None:
    assert decide_last(20.0, 20.0, 20.0, now_after=3.0) == Restart(1.0)
    assert decide_last(20.0, 20.0, now_after=5.0) == Restart(0.0)


def test_history_of_other_statuses_counts_by_duration() -> None:
    # What counts is how long each run lasted, not how it ended.
    history = runs(0.5, 0.5, 0.5, 0.5, status=-signal.SIGKILL)
    last = WorkerExit(0, 1, 2, 5000.0, 5000.2)
    assert isinstance(decide(last, history, 5000.2, POLICY), Halt)


def test_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="first_delay"):
        RestartPolicy(first_delay_seconds=5.0, max_delay_seconds=1.0)
    with pytest.raises(ValueError, match="first_delay"):
        RestartPolicy(first_delay_seconds=-1.0)
    with pytest.raises(ValueError, match="early_exits_to_halt"):
        RestartPolicy(early_exits_to_halt=0)


def test_default_policy_is_the_documented_one() -> None:
    assert policy.DEFAULT_POLICY == POLICY


durations = st.lists(st.floats(min_value=0.0, max_value=1e6), min_size=1, max_size=80)
statuses = st.integers(min_value=-64, max_value=255)


@given(durations, statuses, st.floats(min_value=0.0, max_value=1e6))
def test_any_history_gets_a_bounded_answer(ran: list[float], status: int, late: float) -> None:
    decision = decide_last(*ran, status=status, now_after=late)
    if status == EXIT_STARTUP_ERROR:
        assert decision == Halt(decision.reason, EXIT_STARTUP_ERROR)  # type: ignore[union-attr]
    elif status == 0:
        assert decision == Retire()
    elif isinstance(decision, Restart):
        assert 0.0 <= decision.after_seconds <= POLICY.max_delay_seconds
    else:
        assert isinstance(decision, Halt)
        early = ran[-POLICY.early_exits_to_halt :]
        assert len(early) == POLICY.early_exits_to_halt
        assert all(r < POLICY.early_exit_seconds for r in early)


@given(st.integers(min_value=1, max_value=200))
def test_pause_is_the_capped_doubling(crashes: int) -> None:
    decision = decide_last(*([30.0] * crashes))
    assert decision == Restart(min(2.0 ** (crashes - 1), 60.0))


# -- sd_notify


def test_sd_notify_without_a_socket_sends_nothing() -> None:
    assert notify.sd_notify("", notify.READY) is False
    assert notify.sd_notify(None, notify.READY) is False


def test_sd_notify_to_an_abstract_socket() -> None:
    name = f"uidx-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        assert notify.sd_notify("@" + name, "READY=1\nSTATUS=ok") is True
        server.settimeout(WAIT_SECONDS)
        assert server.recv(1024) == b"READY=1\nSTATUS=ok"


def test_sd_notify_to_nowhere_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert notify.sd_notify(str(tmp_path / "absent"), notify.READY) is False
    assert "sd_notify" in caplog.text


# -- the worker's side


def test_watch_parent_stops_the_worker_when_the_pipe_closes() -> None:
    read_end, write_end = os.pipe()
    stopped: list[str] = []

    async def main() -> None:
        stop = trio.Event()
        with trio.fail_after(WAIT_SECONDS):
            async with trio.open_nursery() as nursery:
                await nursery.start(parent.watch_parent, read_end, stop.set)
                assert not stop.is_set()
                os.close(write_end)  # the supervisor dies
                await stop.wait()
                stopped.append("stopped")

    try:
        trio.run(main)
    finally:
        os.close(read_end)
    assert stopped == ["stopped"]


# -- the entry point


def test_worker_arguments_are_hidden_options() -> None:
    parser = argparse.ArgumentParser()
    entry.add_worker_arguments(parser)
    assert parser.parse_args([]) == argparse.Namespace(
        worker_slot=None, parent_fd=None, report_fd=None
    )
    args = parser.parse_args(["--report-fd", "8", "--worker-slot", "2", "--parent-fd", "7"])
    assert (args.worker_slot, args.parent_fd, args.report_fd) == (2, 7, 8)
    assert entry.is_worker(args)
    assert "--worker-slot" not in parser.format_help()


def test_processes_zero_is_one_per_core() -> None:
    assert entry.resolve_processes(0, cpu_count=6) == 6
    assert entry.resolve_processes(0) == (os.cpu_count() or 1)
    assert entry.resolve_processes(3, cpu_count=6) == 3


def test_global_argv_and_worker_command() -> None:
    args = argparse.Namespace(verbose=True, config=Path("/etc/uidx/uidx.toml"))
    assert entry.global_argv(args) == ["-v", "--config", "/etc/uidx/uidx.toml"]
    assert entry.global_argv(argparse.Namespace()) == []
    assert entry.worker_command(["edge", "--ranges", "3"]) == (
        sys.executable,
        "-m",
        "usenet_indexer",
        "edge",
        "--ranges",
        "3",
    )


def test_supervised_runs_the_worker_here_in_a_worker_or_for_one_process() -> None:
    worker = argparse.Namespace(worker_slot=1, parent_fd=5)
    assert entry.supervised(worker, 4, ["edge"], lambda: 7) == 7
    single = argparse.Namespace(worker_slot=None, parent_fd=None)
    assert entry.supervised(single, 1, ["edge"], lambda: 8) == 8


def test_supervised_starts_uidx_workers(tmp_path: Path) -> None:
    # Two real `python -m usenet_indexer` workers; `--help` makes each print
    # the usage and exit 0, so they retire and the supervisor returns 0.
    code = (
        "import argparse, sys\n"
        "from usenet_indexer.supervisor.entry import supervised\n"
        "sys.exit(supervised(argparse.Namespace(), 2, ['--help'], lambda: 99))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        timeout=WAIT_SECONDS * 2,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().count("usage: uidx") == 2


# -- the arbiter, with real processes

# Every worker program starts with this: the report fd, its slot and the parent
# fd come last on its command line (`--report-fd FD --worker-slot N --parent-fd FD`).
PRELUDE = """
import os, select, signal, sys
report_fd, slot, parent_fd = int(sys.argv[-5]), int(sys.argv[-3]), int(sys.argv[-1])
def say(event):
    os.write(1, f"{event} {slot} {os.getpid()}\\n".encode())  # one write: atomic
"""

# What the workers without trio wait with.
WAITING = """
# A signal that comes just before select() blocks would be handled only after
# it returns: the wake-up fd makes select() return, and the handler then runs.
wake_read, wake_write = os.pipe()
os.set_blocking(wake_write, False)
signal.set_wakeup_fd(wake_write)
def wait_for_parent_death():
    while parent_fd not in select.select([parent_fd, wake_read], [], [])[0]:
        os.read(wake_read, 64)
"""

SERVE = (
    PRELUDE
    + WAITING
    + """
def on_stop(signum, frame):
    say("term" if signum == signal.SIGTERM else "int")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_stop)
signal.signal(signal.SIGINT, on_stop)
say("ready")
wait_for_parent_death()
say("orphan")
"""
)

CRASH_ONCE = (
    PRELUDE
    + WAITING
    + """
marker = os.path.join(sys.argv[1], f"crashed-{slot}")
if not os.path.exists(marker):
    open(marker, "w").close()
    say("crash")
    sys.exit(3)
"""
    + SERVE.removeprefix(PRELUDE + WAITING)
)

IGNORE_TERM_IN_SLOT_0 = (
    PRELUDE
    + WAITING
    + """
if slot == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    say("ready")
    wait_for_parent_death()
    say("orphan")
    sys.exit(0)
"""
    + SERVE.removeprefix(PRELUDE + WAITING)
)

# Like the edge: the first SIGTERM asks for a graceful stop, the second ends it.
STOP_ON_SECOND_SIGTERM = (
    PRELUDE
    + WAITING
    + """
received = []
def on_term(signum, frame):
    received.append(signum)
    say(f"term{len(received)}")
    if len(received) == 2:
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
say("ready")
wait_for_parent_death()
say("orphan")
"""
)

WATCH_WITH_TRIO = (
    PRELUDE
    + """
import trio
from usenet_indexer.supervisor.parent import watch_parent

async def main():
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(watch_parent, parent_fd, stop.set)
        say("ready")
        await stop.wait()
        say("orphan")

trio.run(main)
"""
)


def exit_with(status: int) -> str:
    return PRELUDE + f"say('start')\nsys.exit({status})\n"


# The supervisor process: an arbiter run from a JSON description.
DRIVER = """
import json, logging, sys
from usenet_indexer.supervisor.arbiter import ArbiterOptions, run
from usenet_indexer.supervisor.policy import RestartPolicy
config = json.loads(sys.argv[1])
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s: %(message)s")
sys.exit(run(ArbiterOptions(
    command=tuple(config["command"]),
    processes=config["processes"],
    grace_seconds=config["grace_seconds"],
    policy=RestartPolicy(**config["policy"]),
    notify_socket=config["notify_socket"],
    stop_last=frozenset(config["stop_last"]),
)))
"""

# Short pauses, so that restarts happen in a test's time.
FAST_POLICY = {
    "first_delay_seconds": 0.05,
    "max_delay_seconds": 0.2,
    "healthy_after_seconds": 60.0,
    "early_exit_seconds": 10.0,
    "early_exits_to_halt": 3,
}


@attrs.frozen
class Event:
    name: str
    slot: int
    pid: int


@attrs.define(eq=False)
class Supervised:
    """A supervisor process and what its workers said on stdout."""

    process: subprocess.Popen[bytes]
    log_path: Path
    buffer: bytes = b""
    events: list[Event] = attrs.Factory(list)

    def next_event(self, timeout: float = WAIT_SECONDS) -> Event | None:
        """The next line the workers wrote; None at end of file (all gone)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        give_up = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, give_up - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no worker output within {timeout} s; log:\n{self.log()}")
            chunk = os.read(fd, 4096)
            if not chunk:
                assert not self.buffer, self.buffer
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        name, slot, pid = line.decode().split()
        event = Event(name, int(slot), int(pid))
        self.events.append(event)
        return event

    def expect(self, name: str, count: int) -> list[Event]:
        """Read until `count` events called `name` have come (others are kept too)."""
        found: list[Event] = []
        while len(found) < count:
            event = self.next_event()
            if event is None:
                raise AssertionError(f"output ended before {count} {name!r}: {self.events}")
            if event.name == name:
                found.append(event)
        return found

    def rest(self) -> list[Event]:
        """Every event until end of file: the supervisor and all workers are gone."""
        while self.next_event() is not None:
            pass
        return self.events

    def named(self, name: str) -> list[Event]:
        return [event for event in self.events if event.name == name]

    def wait(self, timeout: float = WAIT_SECONDS) -> int:
        return self.process.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text()


@pytest.fixture
def supervise(tmp_path: Path) -> Iterator[Callable[..., Supervised]]:
    """Start supervisors; whatever is left is SIGKILLed (its workers follow)."""
    started: list[Supervised] = []

    def start(
        worker: str,
        *,
        processes: int = 1,
        grace_seconds: float = 5.0,
        notify_socket: str = "",
        extra: tuple[str, ...] = (),
        stop_last: tuple[int, ...] = (),
    ) -> Supervised:
        config = {
            "command": [sys.executable, "-c", worker, *extra],
            "processes": processes,
            "grace_seconds": grace_seconds,
            "policy": FAST_POLICY,
            "notify_socket": notify_socket,
            "stop_last": list(stop_last),
        }
        log_path = tmp_path / f"supervisor-{len(started)}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-c", DRIVER, json.dumps(config)],
                stdout=subprocess.PIPE,
                stderr=log,
            )
        supervised = Supervised(process, log_path)
        started.append(supervised)
        return supervised

    yield start
    for supervised in started:
        if supervised.process.poll() is None:
            supervised.process.kill()
            supervised.process.wait(WAIT_SECONDS)
        assert supervised.process.stdout is not None
        supervised.process.stdout.close()


def test_crashed_worker_is_restarted(supervise: Callable[..., Supervised], tmp_path: Path) -> None:
    supervisor = supervise(CRASH_ONCE, processes=2, extra=(str(tmp_path),))
    ready = supervisor.expect("ready", 2)
    crashed = supervisor.named("crash")
    assert sorted(e.slot for e in crashed) == sorted(e.slot for e in ready) == [0, 1]
    assert not {e.pid for e in crashed} & {e.pid for e in ready}
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait() == 0
    assert sorted(e.pid for e in supervisor.expect("term", 2)) == sorted(e.pid for e in ready)
    log = supervisor.log()
    for event in crashed:
        assert f"worker {event.slot} (pid {event.pid}) exited with status 3 after" in log, log
    assert log.count("; restarting in 0.0") == 2, log  # 0.05 s


def test_startup_error_halts_without_restarting(supervise: Callable[..., Supervised]) -> None:
    supervisor = supervise(exit_with(EXIT_STARTUP_ERROR), processes=2)
    assert supervisor.wait() == EXIT_STARTUP_ERROR
    # The other worker may be stopped before it even says "start"; none starts twice.
    slots = [e.slot for e in supervisor.rest()]
    assert slots
    assert len(slots) == len(set(slots))
    assert "halts: worker" in supervisor.log()
    assert "start-up error" in supervisor.log()
    assert "restarting" not in supervisor.log()


# Both workers are refused the same way, and both say so before either exits (slot 0
# waits on a FIFO for slot 1's word that it has): the supervisor's halt cannot stop
# the second before it reports.
SAME_STARTUP_ERROR = (
    PRELUDE
    + """
from usenet_indexer.supervisor.report import report_startup_error
report_startup_error(report_fd, "the coordinator refused this node's token: HTTP 401")
say("reported")
fifo = os.path.join(sys.argv[1], "reported")
if slot == 0:
    with open(fifo, "rb") as other:
        other.read()
else:
    with open(fifo, "wb"):
        pass
sys.exit(78)
"""
)


def test_the_same_startup_error_of_every_worker_is_said_once(
    supervise: Callable[..., Supervised], tmp_path: Path
) -> None:
    os.mkfifo(tmp_path / "reported")
    supervisor = supervise(SAME_STARTUP_ERROR, processes=2, extra=(str(tmp_path),))
    assert supervisor.wait() == EXIT_STARTUP_ERROR
    assert sorted(e.slot for e in supervisor.rest() if e.name == "reported") == [0, 1]
    log = supervisor.log()
    # (The debug lines of the workers' command lines hold the reason too, after a quote.)
    assert log.count(": the coordinator refused") == 1, log
    assert "reported a start-up error (exit status 78): the coordinator refused" in log, log
    # The other one exited 78 too, or the halt's SIGTERM came first.
    assert "(the same start-up error as above)" in log, log


def test_a_startup_error_without_a_supervisor_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("ERROR"):
        report.report_startup_error(None, "refused")
    assert [r.getMessage() for r in caplog.records] == ["refused"]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the supervisor is gone: the write fails, the worker logs it
    caplog.clear()
    with caplog.at_level("ERROR"):
        report.report_startup_error(write_end, "refused again")
    os.close(write_end)
    assert [r.getMessage() for r in caplog.records] == ["refused again"]


def test_report_lines_are_one_bounded_line() -> None:
    line = report.encode_report(42, "two\nlines " + "é" * 1000)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert len(line) <= report.MAX_REPORT_BYTES
    decoded = report.decode_report(line[:-1])
    assert decoded is not None
    assert decoded[0] == 42
    assert decoded[1].startswith("two lines é")
    assert report.decode_report(b"not a pid") is None
    assert report.decode_report(b"12") is None


def test_crash_loop_halts(supervise: Callable[..., Supervised]) -> None:
    supervisor = supervise(exit_with(1), processes=1)
    assert supervisor.wait() == EXIT_CRASH_LOOP
    assert len(supervisor.rest()) == FAST_POLICY["early_exits_to_halt"]
    assert "3 times in a row" in supervisor.log()


def test_workers_that_finish_are_not_restarted(supervise: Callable[..., Supervised]) -> None:
    supervisor = supervise(exit_with(0), processes=2)
    assert supervisor.wait() == 0
    assert sorted(e.slot for e in supervisor.rest()) == [0, 1]
    assert supervisor.log().count("finished its work") == 2


# SIGHUP (the terminal or ssh session closed) stops as SIGTERM does: the workers hear SIGTERM.
@pytest.mark.parametrize(
    ("signum", "said"),
    [(signal.SIGTERM, "term"), (signal.SIGINT, "int"), (signal.SIGHUP, "term")],
)
def test_stop_signal_reaches_every_worker(
    supervise: Callable[..., Supervised], signum: signal.Signals, said: str
) -> None:
    supervisor = supervise(SERVE, processes=3)
    ready = supervisor.expect("ready", 3)
    supervisor.process.send_signal(signum)
    stopped = supervisor.expect(said, 3)
    assert sorted(e.pid for e in stopped) == sorted(e.pid for e in ready)
    assert supervisor.wait() == 0
    assert supervisor.named("orphan") == []
    assert f"{signum.name} received; stopping 3 workers" in supervisor.log()


def test_the_slots_stopped_last_hear_the_stop_once_the_others_are_gone(
    supervise: Callable[..., Supervised],
) -> None:
    """`uidx standalone`: the edges give their ranges back to a coordinator still up."""
    supervisor = supervise(SERVE, processes=3, stop_last=(0,))
    supervisor.expect("ready", 3)
    supervisor.process.send_signal(signal.SIGTERM)
    stopped = supervisor.expect("term", 3)
    assert [e.slot for e in stopped][-1] == 0
    assert sorted(e.slot for e in stopped[:2]) == [1, 2]
    assert supervisor.wait() == 0


def test_every_signal_is_forwarded(supervise: Callable[..., Supervised]) -> None:
    supervisor = supervise(STOP_ON_SECOND_SIGTERM, processes=2)
    supervisor.expect("ready", 2)
    supervisor.process.send_signal(signal.SIGTERM)
    supervisor.expect("term1", 2)
    supervisor.process.send_signal(signal.SIGTERM)
    supervisor.expect("term2", 2)
    assert supervisor.wait() == 0
    assert ": SIGKILL" not in supervisor.log()


def test_worker_ignoring_sigterm_is_killed_after_the_grace_period(
    supervise: Callable[..., Supervised],
) -> None:
    supervisor = supervise(IGNORE_TERM_IN_SLOT_0, processes=2, grace_seconds=0.5)
    ready = supervisor.expect("ready", 2)
    stubborn = next(e for e in ready if e.slot == 0)
    began = time.monotonic()
    supervisor.process.send_signal(signal.SIGTERM)
    assert [e.slot for e in supervisor.expect("term", 1)] == [1]
    assert supervisor.wait() == 0
    assert time.monotonic() - began >= 0.5
    supervisor.rest()  # end of file: the stubborn worker is gone too
    assert supervisor.named("orphan") == []
    log = supervisor.log()
    assert f"worker 0 (pid {stubborn.pid}) still running 0.5 s after the stop: SIGKILL" in log
    assert f"worker 0 (pid {stubborn.pid}) stopped: killed by SIGKILL" in log


def test_workers_exit_when_the_supervisor_is_killed(
    supervise: Callable[..., Supervised],
) -> None:
    supervisor = supervise(WATCH_WITH_TRIO, processes=2)
    ready = supervisor.expect("ready", 2)
    supervisor.process.kill()
    assert supervisor.wait() == -signal.SIGKILL
    orphans = [e for e in supervisor.rest() if e.name == "orphan"]  # then end of file
    assert sorted(e.pid for e in orphans) == sorted(e.pid for e in ready)


def test_systemd_hears_ready_and_stopping(
    supervise: Callable[..., Supervised], tmp_path: Path
) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(path))
        systemd.settimeout(WAIT_SECONDS)
        supervisor = supervise(SERVE, processes=2, notify_socket=str(path))
        assert systemd.recv(1024) == b"READY=1"
        supervisor.expect("ready", 2)
        supervisor.process.send_signal(signal.SIGTERM)
        assert systemd.recv(1024) == b"STOPPING=1"
        assert supervisor.wait() == 0
        assert len(supervisor.expect("term", 2)) == 2


def test_a_stop_queued_before_the_arbiter_runs_starts_no_worker(tmp_path: Path) -> None:
    # `uidx standalone` hands its start-up's queue over: a signal that came after the
    # command's last look stops the supervisor before it starts anything.
    started = tmp_path / "started"
    options = arbiter.ArbiterOptions(
        command=(sys.executable, "-c", f"open({str(started)!r}, 'w').close()"), processes=2
    )
    assert arbiter.run(options, collections.deque([signal.SIGHUP])) == 0
    assert not started.exists()  # a worker started would have been waited for


def test_a_stop_signal_during_start_up_waits_for_a_safe_point() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with startup.stop_signals() as signals:
        signals.check()
        signal.raise_signal(signal.SIGTERM)  # recorded only: the cluster's start goes on
        with pytest.raises(startup.StartupStopped, match="SIGTERM during start-up"):
            signals.check()
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_stop_signal_cuts_an_interruptible_step_short() -> None:
    went_on: list[bool] = []

    def step(signals: startup.StartupSignals) -> None:
        with signals.interruptible():
            signal.raise_signal(signal.SIGHUP)
            went_on.append(True)

    with startup.stop_signals() as signals:
        with pytest.raises(startup.StartupStopped, match="SIGHUP during start-up"):
            step(signals)
        assert went_on == []
        signal.raise_signal(signal.SIGINT)  # out of the step: recorded only (the cleanup's)
        assert list(signals.received) == [signal.SIGHUP, signal.SIGINT]


def test_arbiter_options_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="processes"):
        arbiter.ArbiterOptions(command=("true",), processes=0)
    with pytest.raises(ValueError, match="command"):
        arbiter.ArbiterOptions(command=(), processes=1)


# -- the systemd units

REPO = Path(__file__).resolve().parent.parent
UNITS = sorted((REPO / "systemd").glob("*.service"))


def _service_settings(unit: Path) -> dict[str, str]:
    settings: dict[str, str] = {}
    section = ""
    for line in unit.read_text().splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif "=" in line and not line.startswith("#") and section == "Service":
            key, _, value = line.partition("=")
            settings[key] = value
    return settings


def test_units_let_the_supervisor_stop_the_workers() -> None:
    assert [unit.name for unit in UNITS] == [
        "uidx-coordinator.service",
        "uidx-edge.service",
        "uidx-prefetch.service",
    ]
    for unit in UNITS:
        service = _service_settings(unit)
        assert service["Type"] == "notify", unit
        assert service["KillMode"] == "mixed", unit
        assert float(service["TimeoutStopSec"]) > arbiter.ArbiterOptions(("x",), 1).grace_seconds
        assert service["RestartPreventExitStatus"] == str(EXIT_STARTUP_ERROR), unit
        assert service["Restart"] == "on-failure", unit
        assert service["User"] == "uidx", unit
        assert service["StateDirectory"] == "uidx", unit
        assert service["EnvironmentFile"] == "/etc/uidx/uidx.env", unit
        assert service["ExecStart"].startswith("/usr/local/bin/uidx "), unit


def test_units_pass_systemd_analyze_verify() -> None:
    # Skips itself (exit 0, "SKIPPED") where systemd-analyze cannot run.
    done = subprocess.run(
        [str(REPO / "scripts" / "check-systemd")],
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS * 4,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check-systemd: OK" in done.stdout or "SKIPPED" in done.stdout


def test_a_supervisor_imports_none_of_what_only_its_workers_run() -> None:
    # A supervisor of edges or coordinators only spawns, reaps and forwards signals: the
    # HTTP server, the HTTP client, templates and the indexer are its workers' (a
    # supervisor that imported them held ~17 MB more, and took longer to start).
    probe = (
        "import sys\n"
        "import usenet_indexer.commands.coordinator, usenet_indexer.commands.edge\n"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('hypercorn', 'httpx', 'jinja2', 'prometheus_client') or m in"
        " ('usenet_indexer.coordinator.daemon', 'usenet_indexer.edge.worker',"
        " 'usenet_indexer.core.indexer', 'usenet_indexer.core.merge'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == []
