"""scripts/bench-prefetch: the spool-prefetcher against a bare OVER reader, on INN2.

In one invocation, against a private INN2 on loopback (scripts/newsd) with
--articles generated articles in one group (posted with TAKETHIS, or an
already running newsd folder reused with --newsd), and a private PostgreSQL:

- the baseline: a bare pipelined OVER reader. N trio tasks, each with its
  own `connect()` connection (compression as the client negotiates it by
  default: COMPRESS DEFLATE on INN2, the same as the prefetcher's), each
  taking the next 10k-article slice of one shared list through
  `over_text_pipelined` (the client's default depth; the reply as blocks of
  text, as the prefetcher reads it) and only counting the lines;
- the prefetcher: a fresh database with the group planned as ranges of
  --range-articles, a fresh spool folder, and `Prefetcher` with N
  connections on the one server and its default slice (10k) and chunk (50k)
  sizes, until every article is in the spool (the observe callback says
  when; no polling). Its chunks are counted and sized from the spool index.

Both are timed whole, connections and all, and give overview lines/s per
connection. They alternate (baseline then prefetcher for each N, the other
way round in the next round) --repeat times; the best run of each is kept.
ratio_N = prefetcher / baseline; `ratio` is the worst of them. Other
sessions load the machine in bursts, so `ratio_paired_N` is given too: the
median over the rounds of prefetcher / baseline of the same round (the two
runs of a pair follow each other, so they mostly meet the same load).

Targets (issue 4): ratio >= 0.95; spool bytes per overview line <= 60.

`--spool s3` (issue 27) adds, for each N, a prefetcher run into an S3 spool
on a private S3 server (SeaweedFS, testing/objectstore.py; a fresh prefix
each run), and prints its lines/s against the folder spool's
(`s3_ratio_N`, best against best; `s3_ratio` the worst; target >= 0.9).

CPU: this process's user + system time (all threads: the event loop and the
compression threads) during the prefetcher's runs, per 1M lines. INN2's own
CPU (nnrpd reading its overview and deflating) and PostgreSQL's are not in
it. INN2's is reported apart (`inn2_cpu_...`: the CPU time of the nnrpd
processes the reader daemon forked and reaped, from /proc): on this test rig
the server shares the machine's cores with the client, so every CPU second
the prefetcher spends beyond the bare reader is taken from nnrpd once the
cores are busy, and the ratio follows the total CPU per line.

The last line printed is one JSON object: {"bench": "prefetch", ...}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
import trio
from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings, load
from usenet_indexer.nntp.client import Slice, connect
from usenet_indexer.nntp.errors import NoSuchGroup
from usenet_indexer.prefetch.daemon import Prefetcher
from usenet_indexer.prefetch.events import Landed
from usenet_indexer.prefetch.options import PrefetchOptions
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.spool.plan import slices
from usenet_indexer.spool.store import SpoolStore, open_spool
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.spool import SpoolIndex
from usenet_indexer.testing.objectstore import ObjectStore, running_object_store
from usenet_indexer.testing.postgres import PgServer, running_server

ROOT = Path(__file__).resolve().parent.parent
NEWSD = [sys.executable, str(ROOT / "scripts" / "newsd")]
GROUP = "alt.binaries.uidx.bench"
# The prefetcher's defaults; the baseline reads the same slices.
DEFAULTS = PrefetchOptions(Path())
# Installing inn2 takes about a minute on a fresh machine; posting 1M ~1 min.
START_TIMEOUT_SECONDS = 600
POST_SECONDS_PER_MILLION = 600
# A run that takes longer than this is stuck (1M lines take ~10-40 s here).
RUN_TIMEOUT_SECONDS = 1800
# How long nnrpd may take to reap the children of the connections just closed.
REAP_SECONDS = 5.0


def log(message: str) -> None:
    print(f"bench-prefetch: {message}", file=sys.stderr, flush=True)


def cpu_seconds() -> float:
    """This process's user + system CPU time, all threads included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@attrs.frozen
class Run:
    """One timed run: `lines` overview lines through `connections` connections."""

    mode: str  # "baseline" or "prefetch"
    connections: int
    lines: int
    seconds: float
    cpu_seconds: float
    compression: str | None
    server_cpu_seconds: float | None = None  # INN2's nnrpd, when it could be read
    spool_bytes: int = 0
    chunks: int = 0

    @property
    def per_connection(self) -> float:
        """Overview lines per second per connection."""
        return self.lines / self.seconds / self.connections

    @property
    def cpu_per_million(self) -> float:
        return self.cpu_seconds / self.lines * 1e6


@attrs.frozen
class Target:
    """The measured articles: [first, last] of `group` on the server at `url`."""

    url: str
    group: str
    first: int
    last: int
    reader_pid: int  # nnrpd -D: it forks one child per connection and reaps it

    @property
    def articles(self) -> int:
        return self.last - self.first + 1


# --- INN2: started and fed, or reused ----------------------------------------------


def newsd(*args: str, timeout: float) -> dict[str, Any]:
    """Run scripts/newsd; its JSON answer (exits with its message when it fails)."""
    done = subprocess.run([*NEWSD, *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"bench-prefetch: scripts/newsd {args[0]} failed:\n{done.stderr}")
    answer: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    return answer


@contextlib.contextmanager
def news_server(args: argparse.Namespace) -> Iterator[Target]:
    """The INN2 to read from, with at least --articles articles in --group."""
    if args.newsd is not None:
        folder = Path(args.newsd).resolve()
        state = json.loads((folder / "newsd.json").read_text())
        log(f"reusing the INN2 running under {folder}")
        yield feed(folder, state, args)
        return
    folder = Path(tempfile.mkdtemp(prefix="uidx-bench-newsd-"))
    folder.chmod(0o755)  # INN2 runs as `news`
    try:
        state = newsd("start", str(folder), "--groups", args.group, timeout=START_TIMEOUT_SECONDS)
        try:
            yield feed(folder, state, args)
        finally:
            if args.keep_newsd:
                log(f"INN2 left running: reuse it with --newsd {folder}")
            else:
                newsd("stop", str(folder), timeout=60)
    finally:
        if not args.keep_newsd:
            shutil.rmtree(folder, ignore_errors=True)


def feed(folder: Path, state: dict[str, Any], args: argparse.Namespace) -> Target:
    """Post what the group lacks of --articles; the target is its first --articles articles."""
    user, password = state.get("user"), state.get("password")
    credentials = f"{quote(user)}:{quote(password)}@" if user and password else ""
    url = f"nntp://{credentials}{state['host']}:{state['port']}"
    count, low, high = trio.run(group_status, url, args.group)
    have = high - low + 1 if count else 0
    if have < args.articles:
        missing = args.articles - have
        log(f"posting {missing:,} articles to {args.group} with TAKETHIS")
        # A seed of its own: message-ids of articles posted before must not repeat.
        posted = newsd(
            "post", str(folder), "--group", args.group, "--articles", str(missing),
            "--seed", str(args.seed + have), timeout=POST_SECONDS_PER_MILLION * (1 + missing / 1e6),
        )  # fmt: skip
        log(f"posted: {posted['articles_per_second']:,} articles/s")
        count, low, high = trio.run(group_status, url, args.group)
    if high - low + 1 < args.articles:
        raise SystemExit(f"bench-prefetch: {args.group} has {low}-{high}, fewer than asked")
    return Target(url, args.group, low, low + args.articles - 1, int(state["pids"]["nnrpd"]))


def reaped_cpu_seconds(pid: int) -> float | None:
    """The CPU time of the reaped children of `pid`, once all are reaped; None if unreadable.

    nnrpd -D forks a child per connection; the children of a run have quit
    (QUIT) when the run returns, and their time counts once their parent
    has reaped them (cutime and cstime in /proc/PID/stat).
    """
    proc = Path(f"/proc/{pid}")
    deadline = time.monotonic() + REAP_SECONDS
    try:
        while (proc / "task" / str(pid) / "children").read_text().strip():
            if time.monotonic() > deadline:
                return None
            time.sleep(0.01)
        # The fields after "(comm)" start at field 3 (state); cutime is 16, cstime 17.
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def with_server_cpu(target: Target, before: float | None, run: Run) -> Run:
    after = reaped_cpu_seconds(target.reader_pid)
    if before is None or after is None:
        return run
    return attrs.evolve(run, server_cpu_seconds=after - before)


async def group_status(url: str, group: str) -> tuple[int, int, int]:
    async with connect(url) as client:
        try:
            return await client.group(group)
        except NoSuchGroup:
            raise SystemExit(
                f"bench-prefetch: the server has no {group}: start it with --groups {group}"
            ) from None


# --- the two contenders -------------------------------------------------------------


async def baseline(target: Target, connections: int) -> Run:
    """N connections taking the next slice of one shared list; lines only counted."""
    todo: Iterator[Slice] = iter(slices(target.first, target.last, DEFAULTS.slice_articles))
    lines = 0
    compression: set[str | None] = set()

    async def reader() -> None:
        nonlocal lines
        async with connect(target.url) as client:
            compression.add(client.compression)
            await client.group(target.group)
            # over_text_pipelined pulls from the shared iterator whenever it has room
            # in its pipeline: each connection takes the next slice not taken.
            async for _slice, got in client.over_text_pipelined(todo):
                lines += got.lines

    cpu, started = cpu_seconds(), time.perf_counter()
    with trio.fail_after(RUN_TIMEOUT_SECONDS):
        async with trio.open_nursery() as nursery:
            for _ in range(connections):
                nursery.start_soon(reader)
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    if lines != target.articles:
        raise SystemExit(f"bench-prefetch: the baseline read {lines:,} lines")
    return Run("baseline", connections, lines, seconds, cpu, one(compression))


def prefetch(
    server: PgServer,
    target: Target,
    connections: int,
    args: argparse.Namespace,
    s3: ObjectStore | None = None,
) -> Run:
    """The prefetcher with N connections, from a fresh database into a fresh spool
    (a folder, or a fresh prefix of `s3`'s bucket)."""
    with (
        server.fresh_database() as database,
        open_pool(database, Settings(home=Path("/nonexistent"))) as pool,
        spool_folder(args.spool_root) as spool_dir,
    ):
        group_id = GroupStore(pool).add(target.group)
        RangeStore(pool).plan(group_id, target.first, target.last, args.range_articles)
        spool: SpoolStore | Path = spool_dir
        if s3 is not None:
            prefix = f"bench-{secrets.token_hex(4)}"
            environment = {"UIDX_HOME": str(spool_dir), **s3.environment(prefix)}
            spool = open_spool(load(environment))
        options = PrefetchOptions(spool)
        state = ServerState.of(server_configs([target.url], connections)[0])
        run = trio.run(fetch_all, pool, options, state, target)
        chunks, size, lines = SpoolIndex(pool).size()
    if lines != target.articles or run.lines != target.articles:
        raise SystemExit(f"bench-prefetch: the spool has {lines:,} lines, landed {run.lines:,}")
    return attrs.evolve(run, spool_bytes=size, chunks=chunks)


async def fetch_all(
    pool: ConnectionPool,
    options: PrefetchOptions,
    state: ServerState,
    target: Target,
) -> Run:
    """Run the prefetcher until every article of the target has landed."""
    covered = 0
    lines = 0
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered, lines
        if isinstance(event, Landed):
            covered += event.job.last - event.job.first + 1
            lines += event.lines
            if covered >= target.articles:
                done.set()

    prefetcher = Prefetcher(pool, options, [state], observe)
    cpu, started = cpu_seconds(), time.perf_counter()
    with trio.fail_after(RUN_TIMEOUT_SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(prefetcher.run)
            await done.wait()
            seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
            nursery.cancel_scope.cancel()
    return Run("prefetch", state.config.connections, lines, seconds, cpu, state.compression)


@contextlib.contextmanager
def spool_folder(root: str | None) -> Iterator[Path]:
    """A fresh spool folder on disk (as the real spool is: fsync costs what it costs)."""
    folder = Path(tempfile.mkdtemp(prefix="uidx-bench-spool-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def one(values: set[str | None]) -> str | None:
    if len(values) != 1:
        raise SystemExit(f"bench-prefetch: connections used different compression: {values}")
    return next(iter(values))


# --- the runs, alternating ------------------------------------------------------------


def measure(args: argparse.Namespace, target: Target) -> dict[str, list[Run]]:
    """Every (mode, N) --repeat times, alternating which goes first."""
    runs: dict[str, list[Run]] = {}
    with running_server() as server, contextlib.ExitStack() as stack:
        s3 = stack.enter_context(running_object_store()) if args.spool == "s3" else None
        for round_ in range(args.repeat):
            for connections in args.connections:
                order = ["baseline", "prefetch", *(["prefetch-s3"] if s3 else [])]
                if round_ % 2:
                    order.reverse()
                for mode in order:
                    before = reaped_cpu_seconds(target.reader_pid)
                    if mode == "baseline":
                        run = trio.run(baseline, target, connections)
                    elif mode == "prefetch-s3":
                        run = prefetch(server, target, connections, args, s3)
                    else:
                        run = prefetch(server, target, connections, args)
                    run = with_server_cpu(target, before, run)
                    runs.setdefault(f"{mode}_{connections}", []).append(run)
                    log(
                        f"round {round_ + 1}/{args.repeat}: {mode:8} x{connections}: "
                        f"{run.lines:,} lines in {run.seconds:.2f} s, "
                        f"{run.per_connection:,.0f} lines/s per connection, "
                        f"CPU {run.cpu_per_million:.2f} s per 1M lines"
                        f" (INN2: {per_million(run.server_cpu_seconds, run.lines)})"
                    )
    return runs


def per_million(seconds: float | None, lines: int) -> str:
    return "?" if seconds is None else f"{seconds / lines * 1e6:.2f}"


def server_cpu_per_million(runs: list[Run]) -> float | None:
    known = [run for run in runs if run.server_cpu_seconds is not None]
    if not known:
        return None
    seconds = sum(run.server_cpu_seconds or 0.0 for run in known)
    return round(seconds / sum(run.lines for run in known) * 1e6, 3)


def best(runs: list[Run]) -> Run:
    return max(runs, key=lambda run: run.per_connection)


def report(args: argparse.Namespace, target: Target, runs: dict[str, list[Run]]) -> dict[str, Any]:
    result: dict[str, Any] = {"bench": "prefetch", "articles": target.articles}
    ratios: dict[int, float] = {}
    rows = []
    for n in args.connections:
        base, pre = best(runs[f"baseline_{n}"]), best(runs[f"prefetch_{n}"])
        ratios[n] = pre.per_connection / base.per_connection
        result[f"lines_per_second_baseline_{n}"] = round(base.per_connection)
        result[f"lines_per_second_prefetch_{n}"] = round(pre.per_connection)
        result[f"ratio_{n}"] = round(ratios[n], 3)
        pairs = zip(runs[f"prefetch_{n}"], runs[f"baseline_{n}"], strict=True)
        paired = statistics.median(p.per_connection / b.per_connection for p, b in pairs)
        result[f"ratio_paired_{n}"] = round(paired, 3)
        rows.append((n, base, pre, ratios[n]))
        if f"prefetch-s3_{n}" in runs:
            s3_best = best(runs[f"prefetch-s3_{n}"])
            result[f"lines_per_second_prefetch_s3_{n}"] = round(s3_best.per_connection)
            result[f"s3_ratio_{n}"] = round(s3_best.per_connection / pre.per_connection, 3)
    s3_ratios = [value for key, value in result.items() if key.startswith("s3_ratio_")]
    if s3_ratios:
        result["s3_ratio"] = min(s3_ratios)
    prefetched = [
        run for key, group in runs.items() if key.startswith("prefetch_") for run in group
    ]
    baselines = [run for key, group in runs.items() if key.startswith("baseline") for run in group]
    last = prefetched[-1]
    compression = one({run.compression for run in prefetched})
    base_compression = one({run.compression for run in baselines})
    cpu = sum(r.cpu_seconds for r in prefetched) / sum(r.lines for r in prefetched) * 1e6
    base_cpu = sum(r.cpu_seconds for r in baselines) / sum(r.lines for r in baselines) * 1e6
    result.update(
        ratio=round(min(ratios.values()), 3),
        spool_bytes_per_line=round(last.spool_bytes / last.lines, 2),
        # This process only (event loop and compression threads); INN2's
        # nnrpd and PostgreSQL run in processes of their own and are excluded.
        cpu_seconds_per_million_lines=round(cpu, 3),
        cpu_seconds_per_million_lines_baseline=round(base_cpu, 3),
        inn2_cpu_seconds_per_million_lines_prefetch=server_cpu_per_million(prefetched),
        inn2_cpu_seconds_per_million_lines_baseline=server_cpu_per_million(baselines),
        compression=compression,
        compression_baseline=base_compression,
        same_compression=compression == base_compression,
        spool_chunks=last.chunks,
        slice_articles=DEFAULTS.slice_articles,
        chunk_articles=DEFAULTS.chunk_articles,
        range_articles=args.range_articles,
        repeat=args.repeat,
        targets={"ratio": 0.95, "spool_bytes_per_line": 60},
    )
    table(rows, result)
    return result


def table(rows: list[tuple[int, Run, Run, float]], result: dict[str, Any]) -> None:
    out = [
        "",
        f"{'conns':>5}  {'baseline l/s/conn':>17}  {'prefetch l/s/conn':>17}  {'ratio':>5}"
        f"  {'paired':>6}"
        f"  {'baseline s':>10}  {'prefetch s':>10}  {'CPU s/1M base':>13}  {'CPU s/1M pref':>13}",
    ]
    for n, base, pre, ratio in rows:
        out.append(
            f"{n:>5}  {base.per_connection:>17,.0f}  {pre.per_connection:>17,.0f}  {ratio:>5.3f}"
            f"  {result[f'ratio_paired_{n}']:>6.3f}"
            f"  {base.seconds:>10.2f}  {pre.seconds:>10.2f}"
            f"  {base.cpu_per_million:>13.2f}  {pre.cpu_per_million:>13.2f}"
        )
    out += [
        f"worst ratio {result['ratio']} (target >= 0.95); "
        f"spool {result['spool_bytes_per_line']} B per line (target <= 60) "
        f"in {result['spool_chunks']} chunks; compression: prefetcher "
        f"{result['compression']}, baseline {result['compression_baseline']}",
        f"CPU s per 1M lines over all runs: this process {result['cpu_seconds_per_million_lines']}"
        f" (baseline {result['cpu_seconds_per_million_lines_baseline']}); INN2 (excluded"
        f" above) {result['inn2_cpu_seconds_per_million_lines_prefetch']}"
        f" (baseline {result['inn2_cpu_seconds_per_million_lines_baseline']})",
        "",
    ]
    print("\n".join(out), file=sys.stderr, flush=True)


def connection_counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: connection counts, e.g. 1,4,8")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--articles", type=int, default=1_000_000)
    parser.add_argument("--connections", type=connection_counts, default=[1, 4, 8])
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best run is kept")
    parser.add_argument("--range-articles", type=int, default=250_000)
    parser.add_argument("--group", default=GROUP)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--newsd", help="a folder of a running `scripts/newsd start` to reuse")
    parser.add_argument("--spool-root", help="where the spool folders go (default: $TMPDIR)")
    parser.add_argument("--keep-newsd", action="store_true", help="leave the INN2 started here")
    parser.add_argument(
        "--spool",
        choices=("folder", "s3"),
        default="folder",
        help="s3: also prefetch into an S3 spool (a private SeaweedFS) and print the ratio",
    )
    args = parser.parse_args()
    # The prefetcher's warnings (retries, fallbacks) are worth seeing; its per-chunk lines not.
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    with news_server(args) as target:
        log(
            f"{target.articles:,} articles {target.first}-{target.last} of {target.group}; "
            f"connections {args.connections}, {args.repeat} rounds"
        )
        runs = measure(args, target)
    result = report(args, target, runs)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
