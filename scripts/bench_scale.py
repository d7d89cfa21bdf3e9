"""scripts/bench-scale: what a coordinator, its edges and PostgreSQL spend per 1M lines
(issue 25), and whether the catalog build stays as cheap late in a long run as early.

It does what an operator does, each step a `uidx` command as a subprocess,
on a private PostgreSQL (`testing.postgres.running_server`, a fresh database):

- `uidx generate --articles N --profile posting-tools` (or --overview FILE, any
  overview dump, gaps and all);
- `uidx groups add --unchecked`, `uidx spool import`, `uidx nodes create`;
- `uidx ranges plan --from A --to B --size S`: one call when the spool's
  chunks fall on the range ends, else one call per range cut at a chunk's end
  (a stream sends whole chunks: one crossing a range's end would overrun it);
- `uidx coordinator` as a process of its own, then `uidx edge --processes P`
  (a supervisor over P worker processes), both until every range is done;
  the edge is then stopped (SIGTERM), and the coordinator once the catalog
  build has caught up: no row left in `catalog_pending` after the last
  stored batch, so the last batch's build is counted.

While it runs a line on stderr every few seconds: ranges done, batches
stored, keys pending. CPU: the edge's and the coordinator's from wait4 on
each (the supervisor reaps its workers, so their CPU is in its figure), and
of the coordinator's, its system time and page faults (a large buffer
faulted in anew each time was 21% of its CPU before mallocpolicy.py);
PostgreSQL's from /proc: its postmaster, the backends it reaped and its live
children, less this script's own polling connection. Per build: the
coordinator's log line `catalog built: pending=... cpu_s=...`
(coordinator/catalog_builder.py, the build's thread CPU); the first and the
last tenth of the builds that took pending keys, in CPU ms per pending key
(the target), and beside it per key merged and keys merged per pending key
(a build merges its keys' neighbours in ranges stored before it, which the
first builds, on an empty catalog, do not have); and `build_series`, each
build's pending and merged keys and CPU ms per pending and per merged key, in
order (a run has a handful of builds: its first tenth is one build).
`build_again` and `build_again_series`: of the keys each build merged
beyond its pending ones, how many the repost chains, the catalog rows and
the posters' windows found (core/catalog.Again, from the build's log line
or its build job's `offered` line); `build_beyond_keys`: the keys builds marked
pending again for rows of a tool's From made otherwise beyond their dates
(core/catalog.Scope: each is built again with every row of its read).
The catalog lag is from the last batch's `stored_at` to the first poll that
saw `catalog_pending` empty after it (both on the database's clock; polls
1 s apart while the edges work, 0.2 s once every range is done).

`--spool s3` (issue 27) puts the spool in a private S3 server (SeaweedFS,
`testing.objectstore`): `uidx spool import` and the coordinator get its
settings, the edge still only COORDINATOR_URL and NODE_TOKEN, and reads the
chunks through the presigned links the stream hands it, so the coordinator
is out of the data path (issue 27's target there: <= 0.2 CPU-s per 1M).

`--edge-builds` (the setting's default) / `--no-edge-builds` sets the
coordinator's `edge_builds` (the edges merge the catalog builds: they are
then stopped once the catalog caught up, not when the ranges are done). `--catalog-max-lag S` sets the coordinator's `catalog_max_lag_seconds`
(default: the setting's, 5): a stored batch's answer waits while the catalog
build is more than S seconds behind, so the edges (on this machine, sharing
its cores with the coordinator) go at the build's pace; 0 never holds, and
the build then works off after the last batch what piled up meanwhile.

The logs must have no ERROR line, traceback or 5xx answer (`testing.logcheck`).

Targets (issue 25): coordinator <= 0.4 CPU-s per 1M lines, every build
included; the last 10% of builds <= 1.25x the first 10% per pending key;
catalog lag after the last stored batch <= 10 s; PostgreSQL <= 1 CPU-s per
1M lines.

The last line printed is one JSON object: {"bench": "scale", ...}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import psycopg

from usenet_indexer.config import default
from usenet_indexer.testing.logcheck import file_problems
from usenet_indexer.testing.processes import (
    child_env,
    compile_bytecode,
    free_port,
    wait_until_answering,
)

UIDX = [sys.executable, "-m", "usenet_indexer"]
GROUP = "alt.binaries.test"  # `uidx generate`'s default group
STARTUP_SECONDS = 60.0
STOP_SECONDS = 60.0
# The catalog must catch up within this after the last range is done; the
# target is 10 s, so a build that never ends fails the bench rather than hang it.
CATALOG_SECONDS = 600.0
# Polls while the edges work (cheap, but PostgreSQL's CPU is measured), and
# once every range is done (the catalog lag is read to this precision).
POLL_SECONDS = 1.0
CATCH_UP_POLL_SECONDS = 0.2
PROGRESS_SECONDS = 5.0
TICKS = os.sysconf("SC_CLK_TCK")

# The goals of issue 25: (figure, sense, bound).
TARGETS = (
    ("coordinator_cpu_s_per_1m", "<=", 0.4),
    ("build_cpu_last_over_first", "<=", 1.25),
    ("catalog_lag_s", "<=", 10.0),
    ("postgres_cpu_s_per_1m", "<=", 1.0),
)

_BUILT = re.compile(
    r"catalog built: pending=(\d+) merged=(\d+) written=(\d+) shown=(\d+) "
    r"cpu_s=([\d.]+) wall_s=([\d.]+)"
)
# What a build merged again beyond its pending keys, by what found them: the
# coordinator's own build's line, or an edge's build job's as it is offered.
_AGAIN = re.compile(r"merged again(?: \(|: )chains (\d+), rows (\d+), windows (\d+)")
# The keys a build marked pending again for rows made otherwise beyond its dates
# (core/catalog.Scope): each is built again with every row of its read.
_BEYOND = re.compile(r"(\d+) keys built again beyond its dates")

_POLL = """
    SELECT (SELECT count(*) FILTER (WHERE state = 'done') FROM ranges),
           (SELECT count(*) FROM ranges),
           (SELECT count(*) FROM batches),
           (SELECT max(stored_at) FROM batches),
           (SELECT count(*) FROM catalog_pending),
           clock_timestamp()
"""


def log(message: str) -> None:
    print(f"bench-scale: {message}", file=sys.stderr, flush=True)


# --- the operator's commands ---------------------------------------------------------


def uidx(arguments: Sequence[str], env: Mapping[str, str], errors: Path) -> str:
    """Run one `uidx` command to its end; its stdout. A failure ends the bench."""
    with errors.open("ab") as stream:
        done = subprocess.run(
            [*UIDX, *arguments], env=env, stdout=subprocess.PIPE, stderr=stream, check=False
        )
    if done.returncode != 0:
        tail = errors.read_text(errors="replace")[-4000:]
        raise SystemExit(f"bench-scale: uidx {' '.join(arguments)} failed:\n{tail}")
    return done.stdout.decode()


def spool_chunks(database_url: str) -> list[tuple[int, int, int]]:
    """(first, last, lines) of the spool's chunks, in article order."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT first_article, last_article, lines FROM spool_chunks ORDER BY first_article"
        ).fetchall()
    return [(int(first), int(last), int(lines)) for first, last, lines in rows]


def range_cuts(chunks: Sequence[tuple[int, int, int]], size: int) -> list[tuple[int, int]]:
    """Ranges of at least `size` articles (the last may be shorter), each ending at a
    chunk's end, so that no chunk crosses a range's end."""
    cuts: list[tuple[int, int]] = []
    start = chunks[0][0]
    for _, last, _ in chunks:
        if last - start + 1 >= size:
            cuts.append((start, last))
            start = last + 1
    if start <= chunks[-1][1]:
        cuts.append((start, chunks[-1][1]))
    return cuts


def plan_ranges(
    cuts: Sequence[tuple[int, int]], size: int, env: Mapping[str, str], home: Path
) -> None:
    """`uidx ranges plan`: once over the whole span when the cuts are its even ones."""
    low, high = cuts[0][0], cuts[-1][1]
    even = all(first == low + i * size for i, (first, _) in enumerate(cuts))
    spans = [(low, high, size)] if even else [(a, b, b - a + 1) for a, b in cuts]
    for first, last, articles in spans:
        uidx(
            ["ranges", "plan", GROUP, "--from", str(first), "--to", str(last),
             "--size", str(articles)],
            env, home / "setup.err",
        )  # fmt: skip


# --- processes and their CPU ---------------------------------------------------------


def started(
    command: Sequence[str], env: Mapping[str, str], errors: Path
) -> subprocess.Popen[bytes]:
    with errors.open("wb") as stream:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stream)


@attrs.frozen
class Usage:
    """What a stopped child and every descendant it reaped used (wait4's rusage)."""

    cpu: float  # user and system seconds
    system: float  # of them, the kernel's (page faults, system calls)
    page_faults: int  # minor and major


def stopped(child: subprocess.Popen[bytes], what: str, *, signalled: bool = False) -> Usage:
    """SIGTERM (unless `signalled` already), then wait4 (SIGKILL after STOP_SECONDS): what
    the child and every descendant it reaped used (a supervisor reaps its workers)."""
    if child.returncode is not None:
        raise SystemExit(f"bench-scale: {what} ended before it was stopped")
    if not signalled:
        child.send_signal(signal.SIGTERM)
    timer = threading.Timer(STOP_SECONDS, child.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(child.pid, 0)
    finally:
        timer.cancel()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"bench-scale: {what} exited {child.returncode} when stopped")
    return Usage(usage.ru_utime + usage.ru_stime, usage.ru_stime, usage.ru_minflt + usage.ru_majflt)


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after "pid (comm) ": fields 3 on (state, ppid, ...), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def own_cpu(pid: int) -> float:
    """A live process's own CPU seconds (utime + stime), 0 when it is gone."""
    fields = stat_fields(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / TICKS


def postgres_cpu(data_directory: str) -> float | None:
    """CPU seconds of the PostgreSQL server: the postmaster, the backends it reaped
    (cutime, cstime) and its live children. None when it is not on this machine."""
    try:
        postmaster = int((Path(data_directory) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    fields = stat_fields(postmaster)
    if fields is None:
        return None
    ticks = sum(int(field) for field in fields[11:15])
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            child = stat_fields(int(entry.name))
            if child is not None and child[1] == str(postmaster):
                ticks += int(child[11]) + int(child[12])
    return ticks / TICKS


# --- the run -------------------------------------------------------------------------


@attrs.frozen
class Poll:
    """What one look at the database saw."""

    done: int
    ranges: int
    batches: int
    last_stored_at: datetime | None
    pending: int
    at: datetime  # the database's clock

    @classmethod
    def of(cls, conn: psycopg.Connection[Any]) -> Poll:
        row = conn.execute(_POLL).fetchone()
        assert row is not None
        return cls(int(row[0]), int(row[1]), int(row[2]), row[3], int(row[4]), row[5])

    def describe(self) -> str:
        return (
            f"ranges {self.done}/{self.ranges} done, {self.batches} batches stored, "
            f"{self.pending:,} keys pending"
        )


@attrs.define(eq=False)
class Watch:
    """The polls of one run: progress on stderr, and when the catalog caught up."""

    conn: psycopg.Connection[Any]
    last: Poll | None = None
    # The first poll that saw nothing pending after the newest batch it saw.
    empty_since: datetime | None = None
    _said: float = 0.0

    def poll(self) -> Poll:
        now = self.last = Poll.of(self.conn)
        if now.pending or now.last_stored_at is None:
            self.empty_since = None
        elif self.empty_since is None or self.empty_since < now.last_stored_at:
            self.empty_since = now.at
        if time.monotonic() - self._said >= PROGRESS_SECONDS:
            log(now.describe())
            self._said = time.monotonic()
        return now


def wait_for(
    watch: Watch,
    done: Callable[[Poll], bool],
    children: Mapping[str, subprocess.Popen[bytes]],
    seconds: float,
    every: float,
    what: str,
) -> Poll:
    """Poll until `done(poll)`; a child that exits or the deadline ends the bench."""
    deadline = time.monotonic() + seconds
    while True:
        now = watch.poll()
        if done(now):
            return now
        for name, child in children.items():
            if child.poll() is not None:
                raise SystemExit(f"bench-scale: {name} exited ({child.returncode}) too early")
        if time.monotonic() > deadline:
            raise SystemExit(f"bench-scale: {what} within {seconds:.0f} s: {now.describe()}")
        time.sleep(every)


@attrs.frozen
class Spent:
    """The CPU seconds of a run, and what the catalog and the builds did."""

    wall_seconds: float
    coordinator_usage: Usage
    coordinator_startup: float  # its CPU until it answered, before any edge
    edge: float
    postgres: float | None
    catalog_lag: float
    last: Poll

    @property
    def coordinator(self) -> float:
        return self.coordinator_usage.cpu


def run(
    args: argparse.Namespace,
    database_url: str,
    data_directory: str,
    home: Path,
    token: str,
    spool_env: Mapping[str, str],
) -> Spent:
    """Coordinator (its spool: `spool_env`'s) and edges up until every range is done and
    the catalog caught up."""
    listen = f"127.0.0.1:{free_port()}"
    url = f"http://{listen}"
    postgres_before = postgres_cpu(data_directory)
    began = time.monotonic()
    coordinator = started(
        [*UIDX, "coordinator", "--processes", str(args.coordinator_processes)],
        child_env(
            DATABASE_URL=database_url,
            UIDX_HOME=str(home),
            UIDX_LISTEN=listen,
            UIDX_CATALOG_MAX_LAG_SECONDS=str(args.catalog_max_lag),
            UIDX_EDGE_BUILDS="true" if args.edge_builds else "false",
            **spool_env,
        ),
        home / "coordinator.err",
    )
    try:
        wait_until_answering(
            coordinator, url, home / "coordinator.err", who="bench-scale", seconds=STARTUP_SECONDS
        )
        startup_cpu = own_cpu(coordinator.pid)
        edge = started(
            [*UIDX, "edge", "--processes", str(args.edge_processes),
             "--batch-articles", str(args.batch_articles)],
            child_env(COORDINATOR_URL=url, NODE_TOKEN=token, UIDX_HOME=str(home)),
            home / "edge.err",
        )  # fmt: skip
        try:
            with psycopg.connect(database_url, autocommit=True) as conn:
                backend = conn.info.backend_pid  # its CPU is the bench's, not the product's
                watch = Watch(conn)
                both = {"the coordinator": coordinator, "the edge": edge}
                wait_for(
                    watch, lambda p: p.ranges > 0 and p.done == p.ranges, both,
                    args.timeout, POLL_SECONDS, "not every range was done",
                )  # fmt: skip
                # Stopped at once, reaped once the catalog caught up (an idle edge
                # may take a while to stop: that is no part of the catalog's lag);
                # with edge builds, once the catalog caught up (they build it).
                if not args.edge_builds:
                    edge.send_signal(signal.SIGTERM)
                    log(f"every range done in {time.monotonic() - began:.1f} s; the edge stops")
                last = wait_for(
                    watch, lambda p: p.pending == 0, both if args.edge_builds else
                    {"the coordinator": coordinator},
                    CATALOG_SECONDS, CATCH_UP_POLL_SECONDS, "the catalog did not catch up",
                )  # fmt: skip
                log(f"the catalog caught up; {last.describe()}")
                if args.edge_builds:
                    edge.send_signal(signal.SIGTERM)
                poller_cpu = own_cpu(backend)
            edge_cpu = stopped(edge, "the edge", signalled=True).cpu
        finally:
            if edge.returncode is None:
                edge.kill()
                edge.wait()
        # The last build's log line follows its commit by a moment.
        time.sleep(1.0)
        wall = time.monotonic() - began
        coordinator_usage = stopped(coordinator, "the coordinator")
    finally:
        if coordinator.returncode is None:
            coordinator.kill()
            coordinator.wait()
    assert last.last_stored_at is not None
    assert watch.empty_since is not None
    time.sleep(0.5)  # the postmaster reaps the closed connections' backends
    postgres_after = postgres_cpu(data_directory)
    postgres = (
        None
        if postgres_before is None or postgres_after is None
        else postgres_after - postgres_before - poller_cpu
    )
    lag = (watch.empty_since - last.last_stored_at).total_seconds()
    return Spent(wall, coordinator_usage, startup_cpu, edge_cpu, postgres, lag, last)


# --- the figures ---------------------------------------------------------------------


@attrs.frozen
class Build:
    """One `catalog built:` line of the coordinator's log."""

    pending: int
    merged: int
    written: int
    shown: int
    cpu_seconds: float
    wall_seconds: float


def builds(coordinator_log: Path) -> list[Build]:
    found = _BUILT.finditer(coordinator_log.read_text(errors="replace"))
    return [
        Build(int(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[5]), float(m[6])) for m in found
    ]


def merged_again(coordinator_log: Path) -> dict[str, Any]:
    """The keys builds merged again beyond their pending ones, by what found them
    (core/catalog.Again): the totals, and each build's [chains, rows, windows]."""
    found = [
        [int(m[1]), int(m[2]), int(m[3])]
        for m in _AGAIN.finditer(coordinator_log.read_text(errors="replace"))
    ]
    return {
        "build_again": {
            way: sum(build[i] for build in found)
            for i, way in enumerate(("chains", "rows", "windows"))
        },
        "build_again_series": found,
        "build_beyond_keys": sum(
            int(m[1]) for m in _BEYOND.finditer(coordinator_log.read_text(errors="replace"))
        ),
    }


def ms_per_key(part: Sequence[Build], *, merged: bool = False) -> float:
    """CPU milliseconds per pending key (`merged`: per key merged) over some builds."""
    keys = sum(b.merged if merged else b.pending for b in part)
    return 1000 * sum(b.cpu_seconds for b in part) / keys if keys else 0.0


def merged_per_pending(part: Sequence[Build]) -> float:
    """Keys merged per pending key over some builds: how far the closure reached."""
    pending = sum(b.pending for b in part)
    return sum(b.merged for b in part) / pending if pending else 0.0


def build_figures(all_builds: Sequence[Build]) -> dict[str, Any]:
    """The first and last tenth (at least one) of the builds that took pending keys."""
    taking = [b for b in all_builds if b.pending > 0]
    tenth = max(1, math.ceil(len(taking) / 10))
    early, late = taking[:tenth], taking[-tenth:]
    first, last = ms_per_key(early), ms_per_key(late)
    # Per key merged, and how many keys were merged per pending key: a build's
    # cost is its merged keys', and a late build merges its batch's neighbours
    # in ranges stored before it (the closure's windows and rows) where the
    # first builds, on an empty catalog, find none.
    first_merged, last_merged = ms_per_key(early, merged=True), ms_per_key(late, merged=True)
    return {
        "builds": len(all_builds),
        "builds_with_pending": len(taking),
        "builds_per_tenth": tenth,
        "build_cpu_s": round(sum(b.cpu_seconds for b in all_builds), 3),
        "build_wall_s": round(sum(b.wall_seconds for b in all_builds), 3),
        "build_pending_keys": sum(b.pending for b in all_builds),
        "build_merged_keys": sum(b.merged for b in all_builds),
        "build_rows_written": sum(b.written for b in all_builds),
        "build_cpu_first_10pct": round(first, 4),
        "build_cpu_last_10pct": round(last, 4),
        "build_cpu_last_over_first": round(last / first, 3) if first else None,
        "build_cpu_ms_per_merged_key_first": round(first_merged, 4),
        "build_cpu_ms_per_merged_key_last": round(last_merged, 4),
        "build_merged_per_pending_first": round(merged_per_pending(early), 3),
        "build_merged_per_pending_last": round(merged_per_pending(late), 3),
        # Every build that took pending keys, in order: [pending, merged, CPU ms per
        # pending key, per key merged]. With a handful of builds a run, the first
        # tenth is one build on an empty catalog; the series shows where the cost
        # per key goes between it and the last.
        "build_series": [
            [
                b.pending,
                b.merged,
                round(1000 * b.cpu_seconds / b.pending, 4),
                round(1000 * b.cpu_seconds / b.merged, 4) if b.merged else 0.0,
            ]
            for b in taking
        ],
    }


def targets(figures: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each goal of issue 25: the figure's value, the goal and whether it is met."""
    table = {}
    for figure, sense, bound in TARGETS:
        value = figures[figure]
        met = None if value is None else value <= bound
        table[figure] = {"value": value, "goal": f"{sense} {bound}", "met": met}
    return table


# --- the bench -----------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--articles", type=int, default=10_000_000, help="generated articles (default 10M)"
    )
    source.add_argument("--overview", type=Path, help="an overview dump to import instead")
    parser.add_argument(
        "--size", type=int, default=1_000_000, help="articles per range (default 1M)"
    )
    parser.add_argument(
        "--edge-processes", type=int, default=2, help="`uidx edge --processes` (default 2)"
    )
    parser.add_argument(
        "--coordinator-processes",
        type=int,
        default=1,
        help="`uidx coordinator --processes` (default 1, as the issue's figures)",
    )
    parser.add_argument(
        "--chunk-articles", type=int, default=100_000, help="articles per spool chunk (100000)"
    )
    parser.add_argument("--batch-articles", type=int, default=default("batch_articles"))
    parser.add_argument(
        "--spool",
        choices=("folder", "s3"),
        default="folder",
        help="s3: the spool in a private S3 server; edges read chunks by presigned links",
    )
    parser.add_argument(
        "--catalog-max-lag",
        type=float,
        default=default("catalog_max_lag_seconds"),
        help="the coordinator's catalog_max_lag_seconds (0: batches never held)",
    )
    parser.add_argument(
        "--edge-builds",
        action=argparse.BooleanOptionalAction,
        default=default("edge_builds"),
        help="the coordinator's edge_builds: edges merge the catalog builds",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--logs", type=Path, help="a folder to keep the logs in (coordinator, edge, setup)"
    )
    parser.add_argument(
        "--timeout", type=float, default=4 * 3600.0, help="seconds until every range is done"
    )
    args = parser.parse_args()
    if (
        min(
            args.articles,
            args.size,
            args.edge_processes,
            args.coordinator_processes,
            args.chunk_articles,
        )
        < 1
    ):
        parser.error(
            "--articles, --size, --edge-processes, --coordinator-processes, --chunk-articles: >= 1"
        )
    if args.overview is not None and not args.overview.is_file():
        parser.error(f"--overview: {args.overview} is not a file")
    return bench(args)


@contextlib.contextmanager
def database() -> Iterator[tuple[str, str]]:
    """A fresh database on a private server: its URL and the server's data directory."""
    from usenet_indexer.testing.postgres import running_server

    with running_server() as server, server.fresh_database() as url:
        shown = server.admin.execute("SHOW data_directory").fetchone()
        yield url, str(shown[0]) if shown is not None else ""


def bench(args: argparse.Namespace) -> int:
    from usenet_indexer.testing.objectstore import running_object_store

    compile_bytecode()  # timed as an installed uidx runs: see its docstring
    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-") as folder,
        database() as (url, data),
        contextlib.ExitStack() as stack,
    ):
        home = Path(folder)
        spool_env: dict[str, str] = {}
        if args.spool == "s3":
            spool_env = stack.enter_context(running_object_store()).environment("bench-scale")
        env = child_env(DATABASE_URL=url, UIDX_HOME=str(home), **spool_env)
        began = time.perf_counter()
        dump = args.overview
        if dump is None:
            dump = home / "overview.gz"
            log(f"uidx generate --articles {args.articles:,} --profile posting-tools")
            uidx(
                ["generate", "--articles", str(args.articles), "--profile", "posting-tools",
                 "--seed", str(args.seed), "--out", str(dump)],
                env, home / "setup.err",
            )  # fmt: skip
        uidx(["groups", "add", GROUP, "--unchecked"], env, home / "setup.err")
        log(f"uidx spool import {dump}")
        uidx(
            ["spool", "import", "--group", GROUP, "--chunk-articles", str(args.chunk_articles),
             str(dump)],
            env, home / "setup.err",
        )  # fmt: skip
        token = uidx(["nodes", "create", "bench-scale"], env, home / "setup.err").split()[0]
        chunks = spool_chunks(url)
        if not chunks:
            raise SystemExit(f"bench-scale: {dump} has no overview lines")
        cuts = range_cuts(chunks, args.size)
        plan_ranges(cuts, args.size, env, home)
        lines = sum(count for _, _, count in chunks)
        log(
            f"ready in {time.perf_counter() - began:.1f} s: {lines:,} lines in "
            f"{len(chunks)} spool chunks, {len(cuts)} ranges; coordinator and "
            f"{args.edge_processes} edge processes start"
        )
        try:
            spent = run(args, url, data, home, token, spool_env)
        finally:
            if args.logs is not None:
                args.logs.mkdir(parents=True, exist_ok=True)
                for name in ("coordinator.err", "edge.err", "setup.err"):
                    with contextlib.suppress(FileNotFoundError):
                        shutil.copyfile(home / name, args.logs / name.replace(".err", ".log"))
        # A 5xx that the edge's retry hid is still a defect: the logs say it.
        found = file_problems(home / "coordinator.err", home / "edge.err")
        if found:
            raise SystemExit(
                f"bench-scale: ERROR lines or 5xx answers in the logs:\n{found.describe()}"
            )
        built = builds(home / "coordinator.err")
        again = merged_again(home / "coordinator.err")
        if not any(b.pending for b in built):
            raise SystemExit(
                "bench-scale: no `catalog built: pending=N` line in the coordinator's log"
            )
    per_1m = 1_000_000 / lines
    figures: dict[str, Any] = {
        "coordinator_cpu_s_per_1m": round(spent.coordinator * per_1m, 3),
        "edge_cpu_s_per_1m": round(spent.edge * per_1m, 3),
        "postgres_cpu_s_per_1m": None
        if spent.postgres is None
        else round(spent.postgres * per_1m, 3),
        "edge_cores_per_coordinator_core": round(spent.edge / spent.coordinator, 2),
        **build_figures(built),
        **again,
        "catalog_lag_s": round(spent.catalog_lag, 2),
    }
    result = {
        "bench": "scale",
        "lines": lines,
        **figures,
        "targets": targets(figures),
        "coordinator_cpu_s": round(spent.coordinator, 2),
        "coordinator_startup_cpu_s": round(spent.coordinator_startup, 2),
        "coordinator_system_cpu_s": round(spent.coordinator_usage.system, 2),
        "coordinator_page_faults": spent.coordinator_usage.page_faults,
        "edge_cpu_s": round(spent.edge, 2),
        "postgres_cpu_s": None if spent.postgres is None else round(spent.postgres, 2),
        "run_s": round(spent.wall_seconds, 1),
        "ranges": spent.last.ranges,
        "batches": spent.last.batches,
        "range_articles": args.size,
        "edge_processes": args.edge_processes,
        "coordinator_processes": args.coordinator_processes,
        "batch_articles": args.batch_articles,
        "spool": args.spool,
        "catalog_max_lag_seconds": args.catalog_max_lag,
        "edge_builds": args.edge_builds,
        "source": str(args.overview)
        if args.overview
        else f"generated posting-tools seed {args.seed}",
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
