"""scripts/bench-edge: an edge's headers/s against `uidx index` over the same lines.

In one invocation, on a private PostgreSQL:

- prepares, in a child process of its own (so that this process stays small:
  a child's peak RSS starts at its parent's): --lines overview lines from
  the project's generator, written once as a gzip dump and once into the
  spool as zlib chunks of --chunk-articles articles (spool_files.write_chunk),
  cut so that no chunk crosses the end of one of the --ranges ranges;
- the baseline: `uidx index DUMP --out /dev/null --quiet` as a subprocess,
  timed whole, with its peak RSS and CPU time from wait4;
- the edge, in a fresh database each time: the group, a node, the ranges
  planned over the whole span and the spool's index rows; `uidx coordinator`
  started as a process of its own (DATABASE_URL, UIDX_HOME, UIDX_LISTEN on a
  free loopback port) and waited for, bounded; then `uidx edge --ranges R
  --batch-articles B` as a subprocess, alone in its process, timed whole
  (interpreter start, leasing, streaming, inflating, indexing, posting,
  finishing) with its peak RSS and CPU; once the catalog build has caught
  up (no row left in `catalog_pending`: the last batch's build is counted),
  the coordinator stopped (SIGTERM) for its CPU time, PostgreSQL's from its
  postmaster's (reaped backends);
- checks: no ERROR line, traceback or 5xx answer in the coordinator's or
  the edge's log (`testing.logcheck`); in a child process, every range is
  done, and the stored chunks merged as `uidx index` merges them (the
  catalog keys a release by a row's guid kept where an earlier upload under
  its key was stored after it: `releases_keeping_a_rows_key`, counted apart)
  against the releases of `uidx index` (keys, and the same content but for
  names and chunk counts, which depend on batch cuts): the releases only one
  side has are counted, and those that differ, and the fields they differ in
  (`releases_differing_fields`: at 4M lines, before each stored chunk kept
  its own poster and M (migration 0047), 18 in `poster` and `repost_of`, two
  posters' uploads of one name; 0 since), a few of each on stderr.

The two alternate --repeat times; the best run of each is kept (the peak
RSS is the highest of all edge runs), and `ratio` is best against best.
`ratio_paired_median` is the median over the runs of each edge run against
the index run just before it: the machines are shared, and their speed
wanders by 10-30% from one minute to the next.

Targets (issue 5): edge headers/s >= 0.9 x `uidx index` lines/s (streaming,
inflating and posting hide behind indexing); <= 300 MB RSS per edge process.

`--spool s3` (issue 27) also writes the chunks into a private S3 server
(SeaweedFS, testing/objectstore.py) and adds, to each run, an edge run on a
coordinator whose spool is that bucket: the stream hands the edge presigned
links and the edge GETs the chunks itself. It prints the S3 run's headers/s
against the folder run's (`s3_ratio`, best against best; target >= 0.9)
and the coordinator's CPU seconds per 1M lines with each spool.

The last line printed is one JSON object: {"bench": "edge", ...}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from usenet_indexer.config import default
from usenet_indexer.testing.logcheck import file_problems
from usenet_indexer.testing.processes import (
    child_env,
    compile_bytecode,
    free_port,
    wait_until_answering,
)

ROOT = Path(__file__).resolve().parent.parent
UIDX = [sys.executable, "-m", "usenet_indexer"]
STARTUP_SECONDS = 60.0
STOP_SECONDS = 30.0
# After the edge ends, the coordinator's catalog builder still merges the last
# batch's keys; it is stopped once that is done (or after this long), so that
# its CPU counts every build.
CATALOG_SECONDS = 300.0


def log(message: str) -> None:
    print(f"bench-edge: {message}", file=sys.stderr, flush=True)


# --- the preparation, in a child process: generated lines, dump, spool files -------


def prepare(args: argparse.Namespace) -> int:
    """Write the dump and the spool's chunk files; print their manifest as JSON.

    Chunks hold --chunk-articles articles and never cross a range's end (a
    stream sends whole chunks: one crossing it would overrun its range).
    """
    from isal import igzip

    from usenet_indexer.config import from_process
    from usenet_indexer.spool.store import FolderSpool, SpoolStore, open_spool
    from usenet_indexer.synth.generator import GeneratorConfig, generate
    from usenet_indexer.wire.frames import Codec

    home = Path(args.prepare)
    # The folder spool, and the S3 one of the environment (--spool s3) with the same keys.
    spools: list[SpoolStore] = [FolderSpool(home / "spool")]
    if args.spool == "s3":
        spools.append(open_spool(from_process()))
    config = GeneratorConfig(articles=args.lines, seed=args.seed, profile=args.profile)
    generated = generate(config)
    lines = generated.lines
    group = generated.truth.group
    # A line without a number (a malformed one) goes with the article before it.
    numbers: list[int] = []
    for line in lines:
        head = line.split(b"\t", 1)[0]
        numbers.append(
            int(head) if head.isdigit() else numbers[-1] if numbers else config.first_article
        )
    if numbers != sorted(numbers):
        raise SystemExit("bench-edge: the generated lines are not in article order")
    low, high = numbers[0], numbers[-1]
    with (home / "overview.gz").open("wb") as stream:
        text = b"".join(line + b"\n" for line in lines)
        stream.write(igzip.compress(text, compresslevel=1))
        del text

    size = -(-(high - low + 1) // args.ranges)
    chunks: list[list[object]] = []  # first, last, codec, path, lines, bytes
    at = 0  # the next line to write
    for first in range(low, high + 1, size):
        last = min(first + size - 1, high)
        for start in range(first, last + 1, args.chunk_articles):
            end = min(start + args.chunk_articles - 1, last)
            begin = at
            while at < len(lines) and numbers[at] <= end:
                at += 1
            if begin == at:  # no article there: a gap, as a prefetcher records it
                chunks.append([start, end, int(Codec.NONE), None, 0, 0])
                continue
            text = b"".join(line + b"\n" for line in lines[begin:at])
            for spool in spools:
                relative, written, codec = spool.write_chunk(group, start, end, text)
            chunks.append([start, end, int(codec), str(relative), at - begin, written])
    if at != len(lines):
        raise SystemExit(f"bench-edge: {len(lines) - at} lines left out of the spool")
    manifest = {"lines": len(lines), "group": group, "first": low, "last": high, "size": size}
    print(json.dumps({**manifest, "chunks": chunks}))
    return 0


@attrs.frozen
class Registered:
    """What the edge needs from a database made ready for one run."""

    token: str
    ranges: int


def register(database_url: str, home: Path, prepared: Mapping[str, Any]) -> Registered:
    """The group, a node, the ranges and the spool's index rows, in a fresh database."""
    from usenet_indexer.config import Settings
    from usenet_indexer.store.groups import GroupStore
    from usenet_indexer.store.nodes import NodeStore
    from usenet_indexer.store.pool import open_pool
    from usenet_indexer.store.ranges import RangeStore
    from usenet_indexer.store.spool import SpoolChunk, SpoolIndex

    with open_pool(database_url, Settings(home=home), max_size=2) as pool:
        group_id = GroupStore(pool).add(prepared["group"])
        token = NodeStore(pool).create("bench-edge")
        ranges = RangeStore(pool).plan(
            group_id, prepared["first"], prepared["last"], prepared["size"]
        )
        spool = SpoolIndex(pool)
        for first, last, codec, path, lines, size in prepared["chunks"]:
            spool.add(group_id, SpoolChunk(first, last, codec, path, lines), size)
    return Registered(token, len(ranges))


# --- child processes, measured ------------------------------------------------------


@attrs.frozen
class Run:
    """One measured child: wall seconds, CPU seconds, peak RSS (MB)."""

    seconds: float
    cpu_seconds: float
    peak_rss_mb: float


def measured(command: Sequence[str], env: Mapping[str, str], errors: Path, timeout: float) -> Run:
    """Run a command to its end, timed whole, its peak RSS and CPU from wait4.

    Its stderr goes to `errors`; a failure (or the timeout) ends the bench.
    """
    with errors.open("wb") as stream:
        started = time.perf_counter()
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stream)
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        tail = errors.read_text(errors="replace")[-4000:]
        raise SystemExit(f"bench-edge: {command[3]} failed ({child.returncode}):\n{tail}")
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


@contextlib.contextmanager
def coordinator(env: Mapping[str, str], errors: Path, url: str) -> Iterator[list[float]]:
    """`uidx coordinator` in a process of its own, answering at `url`.

    Yields a list that holds its CPU seconds once it has stopped (SIGTERM).
    """
    cpu: list[float] = []
    with errors.open("wb") as stream:
        child = subprocess.Popen(
            [*UIDX, "coordinator"], env=env, stdout=subprocess.DEVNULL, stderr=stream
        )
        try:
            wait_until_answering(child, url, errors, who="bench-edge", seconds=STARTUP_SECONDS)
            yield cpu
        finally:
            if child.returncode is None:
                child.send_signal(signal.SIGTERM)
                timer = threading.Timer(STOP_SECONDS, child.kill)
                timer.start()
                try:
                    _, status, usage = os.wait4(child.pid, 0)
                finally:
                    timer.cancel()
                child.returncode = os.waitstatus_to_exitcode(status)
                cpu.append(usage.ru_utime + usage.ru_stime)


def wait_for_catalog(database_url: str) -> None:
    """Until no release key is left in `catalog_pending` (the last build done), bounded."""
    import psycopg

    deadline = time.monotonic() + CATALOG_SECONDS
    with psycopg.connect(database_url, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT count(*) FROM catalog_pending").fetchone()
            if row is not None and row[0] == 0:
                return
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"bench-edge: the catalog did not catch up within {CATALOG_SECONDS:.0f} s"
                )
            time.sleep(0.2)


def postgres_cpu(data_directory: str) -> float | None:
    """CPU seconds of the PostgreSQL server: its postmaster and the backends it has reaped.

    None when the server is not on this machine (UIDX_TEST_DATABASE_URL elsewhere).
    """
    try:
        pid = int((Path(data_directory) / "postmaster.pid").read_text().split()[0])
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError, IndexError):
        return None
    # After "pid (comm) ": state is field 3; utime, stime, cutime, cstime are 14-17.
    fields = stat.rpartition(")")[2].split()
    ticks = sum(int(field) for field in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


# --- the check ----------------------------------------------------------------------


def comparable(release: Mapping[str, Any]) -> str:
    """A release's JSON but for its name and chunk count (batch cuts decide those)."""
    return json.dumps({**release, "name": "", "chunks": 0}, sort_keys=True)


def _first_id(file: Mapping[str, Any]) -> str:
    segments = file.get("segments") or [[0, "", 0]]
    return str(segments[0][1])


def _files_at(releases: Mapping[str, str]) -> dict[str, str]:
    """The release key of each file (by its first segment's message-id)."""
    return {
        _first_id(f): key
        for key, text in releases.items()
        for f in json.loads(text).get("files", [])
    }


def _files_beside(release: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """The files of `release` that `other` has not as they are: name, segments, first id."""

    def seen(r: Mapping[str, Any]) -> set[str]:
        return {
            f"{f.get('name')} ({len(f.get('segments', []))} segments from {_first_id(f)})"
            for f in r.get("files", [])
        }

    return sorted(seen(release) - seen(other))[:4]


def check(args: argparse.Namespace) -> int:
    """In a child process (the catalog is big): every range done (else it exits), and the
    catalog against the `uidx index` output but for names and chunk counts; prints
    {"releases", "differing", "fields": the count of each field that differs, "kept",
    "only_in_catalog", "only_in_index"}."""
    import orjson

    from usenet_indexer.config import Settings
    from usenet_indexer.coordinator.catalog_build import CatalogBuild
    from usenet_indexer.store.pool import open_pool

    with open_pool(args.database_url, Settings(home=Path(args.check)), max_size=2) as pool:
        with pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE state <> 'done'), count(*) FROM ranges"
            ).fetchone()
        assert row is not None
        if row[0] != 0:
            raise SystemExit(f"bench-edge: {row[0]} of {row[1]} ranges are not done")
        build = CatalogBuild(pool)
        # The stored chunks merged as `uidx index` merges them; the catalog keys some
        # releases otherwise (a row's guid kept when an earlier upload under its release
        # key was stored after it: merge._keyed), counted apart.
        exported = {
            release.key.hex(): comparable(json.loads(orjson.dumps(release.to_json())))
            for release in build.export(pinned=False)
        }
        kept = len({r.key.hex() for r in build.export()} - exported.keys())
    with Path(args.index_out).open("rb") as stream:
        wanted = {
            release["key"]: comparable(release) for release in (json.loads(line) for line in stream)
        }
    # A few of the releases only one side has, each with where its files are on the
    # other (by their first segment's message-id), on stderr.
    only = {
        "catalog": exported.keys() - wanted.keys(),
        "index": wanted.keys() - exported.keys(),
    }
    for side, texts, other in (("catalog", exported, wanted), ("index", wanted, exported)):
        where = _files_at(other) if only[side] else {}
        for key in sorted(only[side])[:4]:
            release = json.loads(texts[key])
            files = release.get("files", [])
            there = Counter(where.get(_first_id(f), "nowhere") for f in files)
            log(
                f"only in the {side}: {key} poster {release.get('poster')!r}, posted"
                f" {release.get('posted')}, {len(files)} files (first"
                f" {files[0].get('name') if files else None!r}), repost_of"
                f" {release.get('repost_of')}; where its files are on the other side:"
                f" {dict(there)}"
            )
    differing = [key for key, text in wanted.items() if key in exported and exported[key] != text]
    # Which fields differ, over the releases that do (a release counts once per field).
    fields: Counter[str] = Counter()
    for shown, key in enumerate(differing):
        ours, theirs = json.loads(exported[key]), json.loads(wanted[key])
        fields.update(names := sorted(f for f in ours.keys() | theirs.keys()
                                      if ours.get(f) != theirs.get(f)))  # fmt: skip
        if shown < 4:  # what differs, in a few of them, on stderr
            for name in names:
                if name == "files":  # the files only one side has
                    log(
                        f"release {key}: files {_files_beside(theirs, ours)} in uidx index,"
                        f" {_files_beside(ours, theirs)} in the catalog"
                    )
                    continue
                log(
                    f"release {key}: {name} {str(theirs.get(name))[:200]} in uidx index,"
                    f" {str(ours.get(name))[:200]} in the catalog"
                )
    print(
        json.dumps(
            {
                "releases": len(wanted),
                "differing": len(differing),
                "fields": dict(sorted(fields.items())),
                "kept": kept,
                "only_in_catalog": len(only["catalog"]),
                "only_in_index": len(only["index"]),
            }
        )
    )
    return 0


# --- the bench ----------------------------------------------------------------------


def pure_indexer(args: argparse.Namespace) -> dict[str, str]:
    """The measured runs' setting for --pure-indexer (children get no UIDX_ variable else)."""
    return {"UIDX_PURE_INDEXER": "1"} if args.pure_indexer else {}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--lines", type=int, default=1_000_000, help="generated overview lines (default 1M)"
    )
    parser.add_argument("--ranges", type=int, default=4, help="ranges planned (default 4)")
    parser.add_argument(
        "--chunk-articles", type=int, default=50_000, help="articles per spool chunk (50000)"
    )
    parser.add_argument("--batch-articles", type=int, default=default("batch_articles"))
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each, the best is kept (default 3)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--profile",
        choices=("default", "posting-tools"),
        default="default",
        help="the generator's profile (posting-tools: uploads as the posting tools make them)",
    )
    parser.add_argument(
        "--spool",
        choices=("folder", "s3"),
        default="folder",
        help="s3: also run the edge on an S3 spool (a private SeaweedFS) and print the ratio",
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds a measured run may take"
    )
    parser.add_argument(
        "--pure-indexer",
        action="store_true",
        help="the edge and `uidx index` run the pure-Python indexer loop (UIDX_PURE_INDEXER=1)",
    )
    # The child processes' modes: the folder, the database, the index output.
    parser.add_argument("--prepare", help=argparse.SUPPRESS)
    parser.add_argument("--check", help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--index-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if min(args.lines, args.ranges, args.chunk_articles, args.batch_articles, args.repeat) < 1:
        parser.error("--lines, --ranges, --chunk-articles, --batch-articles, --repeat: >= 1")
    if args.prepare is not None:
        return prepare(args)
    if args.check is not None:
        return check(args)
    return bench(args)


@attrs.frozen
class EdgeRun:
    """One edge run and what the coordinator and PostgreSQL spent meanwhile."""

    run: Run
    coordinator_cpu_seconds: float
    postgres_cpu_seconds: float | None
    releases: int
    differing: int
    # Of the releases that differ, how many differ in each field.
    fields: dict[str, int] = attrs.field(factory=dict)
    # The releases the catalog keys by a row's guid kept, not as `uidx index` does.
    kept: int = 0
    # The releases (by key) only the catalog, or only `uidx index`, has.
    only_in_catalog: int = 0
    only_in_index: int = 0

    def differ(self) -> str:
        """How many releases differ, and in which fields; how many only one side has; how
        many keep a row's key."""
        said = ", ".join(f"{field} {n}" for field, n in self.fields.items())
        only = (
            f"; {self.only_in_catalog} only in the catalog, {self.only_in_index} only in"
            " uidx index's"
            if self.only_in_catalog or self.only_in_index
            else ""
        )
        kept = f"; {self.kept} keep a stored row's key" if self.kept else ""
        return f"{self.differing} differ" + (f" ({said})" if said else "") + only + kept


def edge_run(
    args: argparse.Namespace,
    database_url: str,
    data_directory: str,
    home: Path,
    prepared: Mapping[str, Any],
    index_out: Path,
    spool_env: Mapping[str, str],
) -> EdgeRun:
    """Coordinator up (its spool: `spool_env`'s), one measured `uidx edge` run (with no
    spool setting), coordinator down, the check."""
    registered = register(database_url, home, prepared)
    postgres_before = postgres_cpu(data_directory)
    listen = f"127.0.0.1:{free_port()}"
    url = f"http://{listen}"
    coordinator_env = child_env(
        DATABASE_URL=database_url, UIDX_HOME=str(home), UIDX_LISTEN=listen, **spool_env
    )
    with coordinator(coordinator_env, home / "coordinator.err", url) as coordinator_cpu:
        edge = measured(
            [*UIDX, "edge", "--ranges", str(registered.ranges),
             "--batch-articles", str(args.batch_articles)],
            child_env(COORDINATOR_URL=url, NODE_TOKEN=registered.token, UIDX_HOME=str(home),
                      **pure_indexer(args)),
            home / "edge.err", args.timeout,
        )  # fmt: skip
        wait_for_catalog(database_url)
    if not coordinator_cpu:
        raise SystemExit("bench-edge: the coordinator ended before it was stopped")
    # A 5xx that the edge's retry hid is still a defect: the logs say it.
    found = file_problems(home / "coordinator.err", home / "edge.err")
    if found:
        raise SystemExit(f"bench-edge: ERROR lines or 5xx answers in the logs:\n{found.describe()}")
    time.sleep(0.5)  # the postmaster reaps the coordinator's closed connections
    postgres_after = postgres_cpu(data_directory)
    postgres_seconds = (
        None
        if postgres_before is None or postgres_after is None
        else postgres_after - postgres_before
    )
    for line in (home / "edge.err").read_text(errors="replace").splitlines():
        if ": finished;" in line:
            log(f"  {line.partition('range_runner: ')[2] or line}")
    checked = subprocess.run(
        [sys.executable, __file__, "--check", str(home), "--database-url", database_url,
         "--index-out", str(index_out)],
        env=child_env(), stdout=subprocess.PIPE, text=True, check=True,
    )  # fmt: skip
    figures = json.loads(checked.stdout.splitlines()[-1])
    return EdgeRun(
        edge,
        coordinator_cpu[0],
        postgres_seconds,
        figures["releases"],
        figures["differing"],
        figures["fields"],
        figures["kept"],
        figures["only_in_catalog"],
        figures["only_in_index"],
    )


def bench(args: argparse.Namespace) -> int:
    from usenet_indexer.testing.objectstore import running_object_store
    from usenet_indexer.testing.postgres import running_server

    compile_bytecode()  # timed as an installed uidx runs: see its docstring
    with (
        tempfile.TemporaryDirectory(prefix="bench-edge-") as folder,
        running_server() as server,
        contextlib.ExitStack() as stack,
    ):
        s3_env: dict[str, str] = {}
        if args.spool == "s3":
            s3_env = stack.enter_context(running_object_store()).environment("bench-edge")
        home = Path(folder)
        log(f"generating {args.lines:,} lines; writing the dump and the spool")
        started = time.perf_counter()
        made = subprocess.run(
            [sys.executable, __file__, "--prepare", str(home), "--lines", str(args.lines),
             "--seed", str(args.seed), "--ranges", str(args.ranges),
             "--chunk-articles", str(args.chunk_articles), "--spool", args.spool,
             "--profile", args.profile],
            env=child_env(**s3_env), stdout=subprocess.PIPE, text=True, check=True,
        )  # fmt: skip
        prepared = json.loads(made.stdout.splitlines()[-1])
        lines: int = prepared["lines"]
        log(
            f"prepared in {time.perf_counter() - started:.1f} s: {lines:,} lines, "
            f"{len(prepared['chunks'])} chunks"
        )
        dump = home / "overview.gz"
        index_command = [*UIDX, "index", str(dump), "--quiet",
                         "--batch-articles", str(args.batch_articles)]  # fmt: skip
        # What the catalog is checked against: `uidx index` writing its releases (not timed).
        index_out = home / "releases.jsonl"
        measured(
            [*index_command, "--out", str(index_out)],
            child_env(UIDX_HOME=str(home)), home / "index-check.err", args.timeout,
        )  # fmt: skip
        shown = server.admin.execute("SHOW data_directory").fetchone()
        data_directory = str(shown[0]) if shown is not None else ""

        best_index: Run | None = None
        best_edge: EdgeRun | None = None
        best_s3: EdgeRun | None = None
        edge_rss = 0.0
        paired: list[float] = []  # each run's edge headers/s over its index run's lines/s
        for attempt in range(1, args.repeat + 1):
            index = measured(
                [*index_command, "--out", "/dev/null"],
                child_env(UIDX_HOME=str(home), **pure_indexer(args)), home / "index.err",
                args.timeout,
            )  # fmt: skip
            with server.fresh_database() as database_url:
                edge = edge_run(args, database_url, data_directory, home, prepared, index_out, {})
            if s3_env:
                with server.fresh_database() as database_url:
                    s3 = edge_run(
                        args, database_url, data_directory, home, prepared, index_out, s3_env
                    )
                if best_s3 is None or s3.run.seconds < best_s3.run.seconds:
                    best_s3 = s3
                log(
                    f"run {attempt}: uidx edge on the S3 spool "
                    f"{lines / s3.run.seconds:,.0f} headers/s ({s3.run.seconds:.1f} s, "
                    f"{s3.run.cpu_seconds:.1f} s CPU, {s3.run.peak_rss_mb:.0f} MB), "
                    f"coordinator {s3.coordinator_cpu_seconds:.1f} s CPU; releases: "
                    f"{s3.differ()}"
                )
            if best_index is None or index.seconds < best_index.seconds:
                best_index = index
            if best_edge is None or edge.run.seconds < best_edge.run.seconds:
                best_edge = edge
            edge_rss = max(edge_rss, edge.run.peak_rss_mb)
            paired.append(index.seconds / edge.run.seconds)
            postgres = edge.postgres_cpu_seconds
            log(
                f"run {attempt}: uidx index {lines / index.seconds:,.0f} lines/s "
                f"({index.seconds:.1f} s, {index.cpu_seconds:.1f} s CPU, "
                f"{index.peak_rss_mb:.0f} MB); uidx edge {lines / edge.run.seconds:,.0f} "
                f"headers/s ({edge.run.seconds:.1f} s, {edge.run.cpu_seconds:.1f} s CPU, "
                f"{edge.run.peak_rss_mb:.0f} MB), coordinator "
                f"{edge.coordinator_cpu_seconds:.1f} s CPU, PostgreSQL "
                + ("?" if postgres is None else f"{postgres:.1f}")
                + f" s CPU; of the {edge.releases:,} releases of uidx index, "
                f"{edge.differ()}"
            )
    assert best_index is not None
    assert best_edge is not None
    edge_rate = lines / best_edge.run.seconds
    index_rate = lines / best_index.seconds
    postgres = best_edge.postgres_cpu_seconds
    result = {
        "bench": "edge",
        "lines": lines,
        "profile": args.profile,
        "edge_headers_per_s": round(edge_rate),
        "index_lines_per_s": round(index_rate),
        "ratio": round(edge_rate / index_rate, 3),
        # The median of each run's pair, index then edge, a minute apart: a
        # check on `ratio` (best against best) on a machine whose speed wanders.
        "ratio_paired_median": round(statistics.median(paired), 3),
        "edge_peak_rss_mb": round(edge_rss, 1),
        "edge_cpu_s": round(best_edge.run.cpu_seconds, 2),
        "coordinator_cpu_s": round(best_edge.coordinator_cpu_seconds, 2),
        "postgres_cpu_s": None if postgres is None else round(postgres, 2),
        "edge_s": round(best_edge.run.seconds, 2),
        "index_s": round(best_index.seconds, 2),
        "index_cpu_s": round(best_index.cpu_seconds, 2),
        "index_peak_rss_mb": round(best_index.peak_rss_mb, 1),
        "ranges": args.ranges,
        "chunks": len(prepared["chunks"]),
        "batch_articles": args.batch_articles,
        "repeat": args.repeat,
        "releases": best_edge.releases,
        "releases_differing": best_edge.differing,
        "releases_differing_fields": best_edge.fields,
        "releases_keeping_a_rows_key": best_edge.kept,
        "releases_only_in_catalog": best_edge.only_in_catalog,
        "releases_only_in_index": best_edge.only_in_index,
        "cpus": os.cpu_count(),
        "coordinator_cpu_s_per_1m_lines": round(best_edge.coordinator_cpu_seconds * 1e6 / lines, 2),
    }
    if best_s3 is not None:
        result.update(
            spool="s3",
            s3_edge_headers_per_s=round(lines / best_s3.run.seconds),
            s3_ratio=round(best_edge.run.seconds / best_s3.run.seconds, 3),
            s3_coordinator_cpu_s_per_1m_lines=round(
                best_s3.coordinator_cpu_seconds * 1e6 / lines, 2
            ),
            s3_releases_differing=best_s3.differing,
            s3_releases_differing_fields=best_s3.fields,
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
