"""The processes of a chaos run and what watches them: coordinator, edges, monitor, logs.

Every process is a real `uidx` command started fresh (`python -m
usenet_indexer ...`), its stderr appended to a log file of its own. The
coordinator is waited for until it answers HTTP. The monitor samples the
`ranges` table every SAMPLE_SECONDS on a connection of its own, and gets a
new one when PostgreSQL is away; faults read its latest sample and wait for
conditions on the next ones. The coordinator's log says what it granted,
refused (409) and answered "already stored": `read_log` counts those.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
import httpx
import psycopg
import trio

from chaos.check import RangeRow
from chaos.prepare import UIDX

# How often the monitor reads the ranges: recovery times are measured to this.
SAMPLE_SECONDS = 0.1
# A coordinator starts in about a second on a small machine (imports,
# migrations checked, pool opened); past this something is wrong.
START_SECONDS = 60.0
# SIGTERM first, then SIGKILL after this: an edge gives its range back in time.
STOP_SECONDS = 15.0

_STARTED = time.monotonic()


def log(message: str) -> None:
    """A line of progress on stderr, with the seconds since the script began."""
    print(f"chaos: {time.monotonic() - _STARTED:6.1f} s  {message}", file=sys.stderr, flush=True)


_RANGES = """
    SELECT id, state, holder, epoch, resume,
           state = 'leased' AND deadline > now()
    FROM ranges ORDER BY id
"""


@attrs.define(eq=False)
class Child:
    """One `uidx` process, its log file, and whether it was stopped (SIGSTOP).

    `supervisor`: the process is a supervisor (`uidx coordinator --processes
    N`) whose workers die with it when it is killed.
    """

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    log: Path
    process: trio.Process | None = None
    frozen: bool = False
    supervisor: bool = False

    async def start(self) -> None:
        with self.log.open("ab") as stream:
            self.process = await trio.lowlevel.open_process(
                [*UIDX, *self.argv],
                env=dict(self.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stream,
            )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def kill(self) -> None:
        """SIGKILL, and reap it; a supervisor's workers too, at the same moment.

        Killed alone, a supervisor's workers would see its pipe close and stop
        like on SIGTERM (finishing a build): not a kill -9 of the coordinator.
        The supervisor is stopped first, so that it starts no worker in place
        of those killed (its workers have process groups of their own).
        """
        if self.process is None:
            return
        if self.supervisor and self.running:
            self.process.send_signal(signal.SIGSTOP)
            for pid in await worker_pids(self.process.pid):
                kill_pid(pid)
        self.process.kill()
        await self.process.wait()

    def signal(self, signum: signal.Signals) -> None:
        if self.running and self.process is not None:
            self.process.send_signal(signum)
            self.frozen = signum == signal.SIGSTOP

    async def stop(self) -> int | None:
        """SIGTERM (after SIGCONT if frozen), SIGKILL past STOP_SECONDS; the exit status."""
        if self.process is None:
            return None
        if self.running:
            if self.frozen:
                self.signal(signal.SIGCONT)
            self.process.terminate()
            with trio.move_on_after(STOP_SECONDS):
                await self.process.wait()
            if self.running:
                self.process.kill()
        return await self.process.wait()


async def worker_pids(supervisor: int) -> set[int]:
    """The pids of the supervisor's children (its workers), by `pgrep -P`."""
    done = await trio.run_process(
        ["pgrep", "-P", str(supervisor)], capture_stdout=True, check=False
    )
    return {int(word) for word in done.stdout.split()}


def kill_pid(pid: int) -> None:
    """SIGKILL to `pid`, gone already or not."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


async def wait_answering(child: Child, url: str) -> float:
    """Wait until the coordinator answers HTTP at `url`; the seconds it took.

    Raises:
        SystemExit: it exited, or did not answer within START_SECONDS.
    """
    started = trio.current_time()
    async with httpx.AsyncClient(timeout=1.0) as client:
        while True:
            if not child.running:
                raise SystemExit(f"chaos: {child.name} exited; see {child.log}")
            try:
                await client.get(url)
                return trio.current_time() - started
            except httpx.TransportError:
                if trio.current_time() - started > START_SECONDS:
                    raise SystemExit(
                        f"chaos: {child.name} did not answer; see {child.log}"
                    ) from None
                await trio.sleep(0.05)


@attrs.define(eq=False)
class Monitor:
    """Samples the `ranges` table; faults wait on its samples."""

    url: str
    samples: list[tuple[float, tuple[RangeRow, ...]]] = attrs.field(factory=list)
    failures: int = 0
    _changed: trio.Event = attrs.field(factory=trio.Event)

    @property
    def latest(self) -> tuple[RangeRow, ...]:
        return self.samples[-1][1] if self.samples else ()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        conn: psycopg.Connection[tuple[object, ...]] | None = None
        try:
            while True:
                if conn is None:
                    conn = await trio.to_thread.run_sync(_connect, self.url)
                rows = None
                if conn is not None:
                    try:
                        rows = await trio.to_thread.run_sync(_sample, conn)
                    except psycopg.Error:
                        self.failures += 1
                        conn.close()
                        conn = None
                if rows is not None:
                    self.samples.append((trio.current_time(), rows))
                    self._changed.set()
                    self._changed = trio.Event()
                    if len(self.samples) == 1:
                        task_status.started()
                await trio.sleep(SAMPLE_SECONDS)
        finally:
            if conn is not None:
                conn.close()

    async def until(
        self, condition: Callable[[Sequence[RangeRow]], bool], within: float
    ) -> float | None:
        """Wait until a sample meets the condition; when it did, or None after `within` s."""
        with trio.move_on_after(within):
            while True:
                if self.samples and condition(self.latest):
                    return self.samples[-1][0]
                await self._changed.wait()
        return None


def _connect(url: str) -> psycopg.Connection[tuple[object, ...]] | None:
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=2)
    except psycopg.Error:
        return None


def _sample(conn: psycopg.Connection[tuple[object, ...]]) -> tuple[RangeRow, ...]:
    rows = conn.execute(_RANGES).fetchall()
    return tuple(
        RangeRow(
            range_id=int(str(row[0])),
            state=str(row[1]),
            holder=None if row[2] is None else int(str(row[2])),
            epoch=int(str(row[3])),
            resume=int(str(row[4])),
            live=bool(row[5]),
        )
        for row in rows
    )


_GRANT = re.compile(r"node (\d+) leased range (\d+) epoch (\d+):")
_CONFLICT = re.compile(r"node (\d+) (?:\S+ '[^']*': 409 |\S+ range \d+ epoch \d+: refused)")
_ALREADY = "(already stored: a retry)"


@attrs.frozen
class LogFigures:
    """What the coordinator's log tells.

    Attributes:
        grants: (node, range, epoch) of each lease granted, in order.
        conflicts: 409 answers by node.
        already_stored: batches answered "already stored".

    What the log must not hold (ERROR lines, 5xx answers) is for
    `testing.logcheck` to find.
    """

    grants: tuple[tuple[int, int, int], ...]
    conflicts: Counter[int]
    already_stored: int


def read_log(path: Path) -> LogFigures:
    """The figures of one coordinator log (every restart appends to it)."""
    grants: list[tuple[int, int, int]] = []
    conflicts: Counter[int] = Counter()
    already = 0
    with path.open("r", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            if (grant := _GRANT.search(line)) is not None:
                grants.append((int(grant[1]), int(grant[2]), int(grant[3])))
            elif (conflict := _CONFLICT.search(line)) is not None:
                conflicts[int(conflict[1])] += 1
            elif _ALREADY in line:
                already += 1
    return LogFigures(tuple(grants), conflicts, already)
