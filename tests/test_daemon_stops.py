"""A stop signal ends `uidx coordinator`, `uidx coordinator --processes 2` and
`uidx standalone` cleanly, whenever it comes: the embedded PostgreSQL the
process started is stopped, no worker outlives the supervisor, and the exit
status is that of a normal stop (0). A coordinator killed with SIGKILL cannot
stop its cluster: its supervisor does (under systemd), or the next start takes
it over and stops it.

Each test runs the real command on a real embedded cluster in a home of its
own, waits for a line of its log, sends the signal and waits for the exit.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from process_logs import log_until

from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.testing.postgres import scratch_dir

# Start-up (initdb, the migrations) and a stop take seconds; these bound them.
START_SECONDS = 180.0
STOP_SECONDS = 120.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(home: Path) -> dict[str, str]:
    mine = {"DATABASE_URL", "COORDINATOR_URL", "NODE_TOKEN", "NOTIFY_SOCKET"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_") and k not in mine}
    return {
        **env,
        "UIDX_HOME": str(home),
        "UIDX_LISTEN": f"127.0.0.1:{_free_port()}",
        # standalone wants a server; its prefetcher only retries against this one.
        "UIDX_NNTP": "nntp://127.0.0.1:9",
    }


def _postgres_of(home: Path) -> list[int]:
    """The processes whose command line names a folder under `home` (a postmaster's
    `-D`), also one made in that folder after it was removed."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone, or not a process
            continue
        if entry.name.isdigit() and any(str(home).encode() in arg for arg in argv):
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# `uidx` with a stand-in for a slow start-up (STAND_IN), in the process the test
# starts (a supervisor's workers are fresh interpreters: they run the real thing).
# "slow-start": the cluster's start (initdb, a crash recovery) is held, once pg_ctl
# has started it, until the test writes a byte to GATE_FD. "slow-migration": a first
# migration that would take ten minutes (as an index over a big catalog can).
STAND_INS = """
import logging, os, sys
from usenet_indexer.cli import main
from usenet_indexer.store import migrate, pgcluster

log = logging.getLogger("stand-in")
if os.environ["STAND_IN"] == "slow-start":
    real_start = pgcluster.Cluster.start
    def start(self, *args, **kwargs):
        real_start(self, *args, **kwargs)
        log.warning("CLUSTER STARTED, HELD")
        os.read(int(os.environ["GATE_FD"]), 1)
    pgcluster.Cluster.start = start
elif os.environ["STAND_IN"] == "slow-migration":
    slow = migrate.Migration.from_file("0000_slow.sql", "SELECT pg_sleep(600)")
    real_load = migrate.load_migrations
    migrate.load_migrations = lambda source=None: (slow, *real_load(source))
    real_apply = migrate._apply_next
    def apply_next(*args):
        log.warning("MIGRATING")
        return real_apply(*args)
    migrate._apply_next = apply_next
sys.exit(main(sys.argv[1:]))
"""


@contextmanager
def _daemon(
    argv: Sequence[str],
    home: Path,
    *,
    stand_in: str = "",
    gate: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """`uidx <argv>` in `home` (`_process`), the home's cluster stopped after whatever
    happened, so that no test leaves one."""
    with _cluster_stopped_after(home), _process(argv, home, stand_in, gate, env) as process:
        yield process


@contextmanager
def _cluster_stopped_after(home: Path) -> Iterator[None]:
    try:
        yield
    finally:
        cluster = Cluster(home / "postgres")
        if cluster.status().running:
            cluster.stop()


@contextmanager
def _process(
    argv: Sequence[str],
    home: Path,
    stand_in: str = "",
    gate: int | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """`uidx <argv>` in `home`, its log on a pipe; killed if a test leaves it running.
    With `stand_in`, one of STAND_INS; `gate` is the read end of its pipe; `env` is
    added to the environment."""
    environment = {**_env(home), **(env or {})}
    program = [sys.executable, "-m", "usenet_indexer"]
    if stand_in:
        environment.update(STAND_IN=stand_in, GATE_FD=str(gate))
        program = [sys.executable, "-c", STAND_INS]
    process = subprocess.Popen(
        [*program, *argv],
        env=environment,
        stderr=subprocess.PIPE,
        pass_fds=() if gate is None else (gate,),
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()


def _stopped(process: subprocess.Popen[bytes], seen: list[str]) -> tuple[int, str]:
    """Wait for the exit; its status and the whole log."""
    assert process.stderr is not None
    try:
        status = process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        status = process.wait()
    return status, "".join(seen) + process.stderr.read().decode(errors="replace")


def _workers(log: Sequence[str]) -> list[int]:
    """The workers' pids of the supervisor's "N workers started: slot:pid ..." line."""
    line = next((line for line in log if "workers started:" in line), "")
    return [int(pid) for pid in re.findall(r"\d+:(\d+)", line.partition("started:")[2])]


DAEMONS = [
    pytest.param(["coordinator"], "node API listening", id="coordinator"),
    pytest.param(["coordinator", "--processes", "2"], "workers started", id="processes-2"),
    pytest.param(["standalone", "--processes", "1"], "workers started", id="standalone"),
]


@pytest.mark.parametrize(("argv", "ready"), DAEMONS)
def test_sighup_stops_a_running_daemon_and_its_cluster(argv: list[str], ready: str) -> None:
    # An ssh session closed under a foreground daemon: the kernel sends SIGHUP to its
    # process group (the supervisor's; its workers have their own).
    with scratch_dir() as home, _daemon(argv, home) as process:
        seen = log_until(process, lambda line: ready in line, START_SECONDS)
        process.send_signal(signal.SIGHUP)
        status, log = _stopped(process, seen)
        assert status == 0, log
        assert "SIGHUP" in log, log
        assert re.search(r"embedded PostgreSQL in \S+ stopped", log), log
        assert not Cluster(home / "postgres").status().running, log
        assert _postgres_of(home) == [], log
        # A worker left starting after its supervisor could make a cluster in the removed
        # home: none is left.
        assert [pid for pid in _workers(seen) if _alive(pid)] == [], log


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda signum: signum.name
)
@pytest.mark.parametrize(("argv", "ready"), DAEMONS)
def test_a_stop_while_the_cluster_starts_stops_it(
    argv: list[str], ready: str, signum: signal.Signals
) -> None:
    # The signal comes while the process starts the cluster; that start ends, and then
    # the stop: the process must not die with the cluster it started left running.
    with scratch_dir() as home:
        gate, release = os.pipe()
        try:
            with _daemon(argv, home, stand_in="slow-start", gate=gate) as process:
                seen = log_until(
                    process, lambda line: "CLUSTER STARTED, HELD" in line, START_SECONDS
                )
                process.send_signal(signum)
                os.write(release, b"x")
                status, log = _stopped(process, seen)
        finally:
            os.close(gate)
            os.close(release)
        assert status == 0, log
        assert ready not in log, log  # stopped before it served or ran workers
        assert re.search(r"embedded PostgreSQL in \S+ stopped", log), log
        assert not Cluster(home / "postgres").status().running, log
        assert _postgres_of(home) == [], log


# `coordinator --processes 2` migrates in its workers, which are stopped as any worker.
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda signum: signum.name)
@pytest.mark.parametrize(("argv", "ready"), [DAEMONS[0], DAEMONS[2]])
def test_a_stop_cuts_a_long_migration_short_and_stops_the_cluster(
    argv: list[str], ready: str, signum: signal.Signals
) -> None:
    # The migration would run for ten minutes: the stop cancels it in the server (it
    # is rolled back whole) instead of waiting for it, then stops the cluster.
    with scratch_dir() as home, _daemon(argv, home, stand_in="slow-migration") as process:
        seen = log_until(process, lambda line: "MIGRATING" in line, START_SECONDS)
        process.send_signal(signum)
        status, log = _stopped(process, seen)
        assert status == 0, log
        assert ready not in log, log
        assert "migration 0000_slow.sql applied" not in log, log
        assert re.search(r"embedded PostgreSQL in \S+ stopped", log), log
        assert not Cluster(home / "postgres").status().running, log
        assert _postgres_of(home) == [], log


# -- a coordinator killed with SIGKILL: nothing of it can stop its cluster then


def test_the_cluster_of_a_coordinator_killed_9_is_stopped_by_the_next_start() -> None:
    # One process, no supervisor: its kill -9 leaves the cluster it started running. The
    # next start takes that cluster over, says so, and stops it as one it started (it
    # left it running for good: the next start found it running, so did not own it).
    with scratch_dir() as home, _cluster_stopped_after(home):
        with _process(["coordinator"], home) as killed:
            log_until(killed, lambda line: "node API listening" in line, START_SECONDS)
            killed.kill()
            killed.wait()
        assert Cluster(home / "postgres").status().running  # nothing could stop it
        with _process(["coordinator"], home) as process:
            seen = log_until(process, lambda line: "node API listening" in line, START_SECONDS)
            process.send_signal(signal.SIGTERM)
            status, log = _stopped(process, seen)
        assert status == 0, log
        assert len(re.findall(rf"left running by process {killed.pid}\b", log)) == 1, log
        assert re.search(r"embedded PostgreSQL in \S+ stopped", log), log
        assert _postgres_of(home) == [], log


@pytest.mark.parametrize("stop", ["during-the-restart-pause", "after-the-restart"])
def test_a_coordinator_worker_killed_9_under_systemd_leaves_no_cluster(stop: str) -> None:
    # Under systemd (NOTIFY_SOCKET) one coordinator runs as a worker of the supervisor,
    # which restarts it after a kill -9. The cluster must outlive the killed worker, and
    # be stopped when the supervisor stops, before or after the restart.
    with scratch_dir() as home, socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(home / "notify"))
        notify = {"NOTIFY_SOCKET": str(home / "notify")}
        with _daemon(["coordinator"], home, env=notify) as process:
            seen = log_until(process, lambda line: "node API listening" in line, START_SECONDS)
            (worker,) = _workers(seen)
            os.kill(worker, signal.SIGKILL)
            seen += log_until(process, lambda line: "restarting in" in line, START_SECONDS)
            if stop == "after-the-restart":
                seen += log_until(process, lambda line: "node API listening" in line, START_SECONDS)
            process.send_signal(signal.SIGTERM)
            status, log = _stopped(process, seen)
            assert status == 0, log
            assert f"worker 0 (pid {worker}) killed by SIGKILL" in log
            restarted = [int(pid) for pid in re.findall(r"worker 0 restarted \(pid (\d+)\)", log)]
            assert len(restarted) == (stop == "after-the-restart"), log
            assert re.search(r"embedded PostgreSQL in \S+ stopped", log), log
            assert _postgres_of(home) == [], log
            assert [pid for pid in [worker, *restarted] if _alive(pid)] == [], log
