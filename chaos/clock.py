"""Clocks for scripts/chaos (issue 6, item 9): edges on clocks of their own.

Theory of operation
-------------------
libfaketime (LD_PRELOAD, FAKETIME) gives one process a clock of its own:
its wall clock, its monotonic clock and its sleeps. The wrapper program
`faketime` forks, so a kill -9 of it would miss the edge: the variables
are set on the edge itself.

One small run, a database of its own, one range, two edges:

1. the slow edge (FAKETIME "+0 x0.2": its clock runs at a fifth of the
   real speed, so its heartbeat, due one third of the TTL after its last
   call by its clock, comes after the lease passed by the database's)
   leases the range while the spool holds nothing of it;
2. the offset edge (FAKETIME "+2h": two hours ahead) starts, finds the
   range leased, and takes it over once the slow edge's lease passed
   (deadlines are on the database's clock: the offset changes nothing);
3. the spool is filled; the offset edge indexes the range.

Then: the slow edge got at least one 409 and stored nothing; the offset
edge's batches are stored; the catalog holds exactly what it must.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
import psycopg
import trio

from chaos.check import RangeRow
from chaos.procs import log, read_log
from chaos.run import Run
from usenet_indexer.testing.install import apt_get_install, install_once

OFFSET = "edge_faketime_offset"
SLOW = "edge_slow_clock"
CLOCK_KINDS = (OFFSET, SLOW)
# Two hours ahead; a fifth of the real speed (a 1 s heartbeat interval of a
# 3 s TTL becomes 5 real seconds).
OFFSET_FAKETIME = "+2h"
SLOW_FAKETIME = "+0 x0.2"
# Where Debian's libfaketime puts the library (the MT one: the edge has threads).
LIBRARIES = (
    Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"),
    Path("/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1"),
    Path("/usr/lib/faketime/libfaketimeMT.so.1"),
)
# Where libfaketime leaves its shared memory and semaphores (see remove_shared_memory).
SHARED_MEMORY = Path("/dev/shm")
# Each step's longest wait.
STEP_SECONDS = 60.0


def libfaketime() -> Path | None:
    """libfaketime's library, installed with apt-get when missing and we are root
    (one install at a time on the machine: testing.install).

    Returns:
        Its path, or None when it is not here and cannot be installed.
    """
    if _library() is None and os.geteuid() == 0 and shutil.which("apt-get") is not None:
        install_once(lambda: _library() is not None, _install_faketime)
    return _library()


def _library() -> Path | None:
    return next((path for path in LIBRARIES if path.exists()), None)


def _install_faketime() -> None:
    log("libfaketime is missing: apt-get install -y faketime")
    apt_get_install("faketime")


def remove_shared_memory(pid: int) -> None:
    """Remove what libfaketime made in /dev/shm for a process that is gone.

    It makes a shared memory segment and a semaphore named after the pid,
    and removes them when the process exits, but not after a kill -9.
    """
    for name in (f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"):
        (SHARED_MEMORY / name).unlink(missing_ok=True)


def clock_env(library: Path, spec: str) -> dict[str, str]:
    """The variables that put a process on the clock `spec` (libfaketime's FAKETIME)."""
    return {"LD_PRELOAD": str(library), "FAKETIME": spec}


@attrs.frozen
class ClockFigures:
    """What the clock run found.

    Attributes:
        faults: OFFSET and SLOW, 1 each when the run got that far.
        slow_409: 409 answers to the slow edge.
        slow_rows: batches stored from the slow edge (must be 0).
        offset_rows: batches stored from the offset edge (must be more than 0).
        done: the range got done.
    """

    faults: dict[str, int]
    slow_409: int
    slow_rows: int
    offset_rows: int
    done: bool


async def clock_run(run: Run, library: Path) -> ClockFigures:
    """The clock run (see the module docstring) on a prepared one-range `run`."""
    faults = dict.fromkeys(CLOCK_KINDS, 0)
    done = False
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(run.monitor.run)
            await run.start_coordinator()
            run.proxy_port = run.port  # no proxy: nothing is lost here
            slow = run.edge(0, clock=clock_env(library, SLOW_FAKETIME))
            offset = run.edge(1, clock=clock_env(library, OFFSET_FAKETIME))
            run.edges = [slow, offset]
            await slow.child.start()
            if await run.monitor.until(_held_by(slow.node_id), STEP_SECONDS) is None:
                raise SystemExit("chaos: the slow edge did not lease the range")
            faults[SLOW] += 1
            log(f"clock: the slow edge ({SLOW_FAKETIME}) holds the range; the offset edge starts")
            await offset.child.start()
            if await run.monitor.until(_held_by(offset.node_id), STEP_SECONDS) is not None:
                faults[OFFSET] += 1
                log(f"clock: the offset edge ({OFFSET_FAKETIME}) took the range over")
            await run.import_part(0)
            done = await run.monitor.until(run.all_done, STEP_SECONDS) is not None
            await run.until_refused(slow.node_id, STEP_SECONDS)
            await slow.child.kill()
            await offset.child.stop()
            await run.coordinator.stop()
            nursery.cancel_scope.cancel()
    finally:
        await run.kill_everything()
        for edge in run.edges:
            if edge.child.process is not None:
                remove_shared_memory(edge.child.process.pid)
    slow_rows, offset_rows = await trio.to_thread.run_sync(
        _rows_of_nodes, run.prepared.url, (slow.node_id, offset.node_id)
    )
    conflicts = read_log(run.coordinator.log).conflicts
    return ClockFigures(faults, conflicts[slow.node_id], slow_rows, offset_rows, done)


def _held_by(node_id: int) -> Callable[[Sequence[RangeRow]], bool]:
    def held(rows: Sequence[RangeRow]) -> bool:
        return any(row.holder == node_id and row.live for row in rows)

    return held


def _rows_of_nodes(url: str, nodes: tuple[int, int]) -> tuple[int, int]:
    with psycopg.connect(url) as conn:
        counts: Mapping[int, int] = {
            int(str(node)): int(str(count))
            for node, count in conn.execute(
                "SELECT node_id, count(*) FROM batches WHERE node_id = ANY(%s) GROUP BY node_id",
                (list(nodes),),
            ).fetchall()
        }
    return counts.get(nodes[0], 0), counts.get(nodes[1], 0)
