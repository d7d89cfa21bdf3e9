"""scripts/bench-index: `uidx index` against a bare split loop over the same lines.

Generates >= 1M overview lines with the project's generator, then, in one
invocation and alternating so both see the same machine state:

- the baseline: the same lines, already in memory as one str, split on
  "\\n" and each line on "\\t" (the least any Python indexer must do);
- the command: `uidx index FILE --out ...` as a subprocess, timed whole
  (interpreter start, reading and inflating the gzip file, indexing,
  merging, writing the JSONL), with its peak RSS and CPU time from wait4.

The best of --repeat runs of each is kept. Then the output of the last run
is scored against the generator's truth (segments in the right file, files
in the right release, wrong merges, drops, probes).

The last line printed is one JSON object: {"bench": "index", ...}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from usenet_indexer.config import default
from usenet_indexer.synth.truth import Truth, score
from usenet_indexer.testing.processes import compile_bytecode

ROOT = Path(__file__).resolve().parent.parent
UIDX = [sys.executable, "-m", "usenet_indexer"]


# The baseline runs in a child of its own, like the command, so that neither
# inherits the other's memory (a forked child's peak RSS starts at its parent's).
SPLIT_LOOP = """
import gzip, sys, time
text = gzip.decompress(open(sys.argv[1], "rb").read()).decode("utf-8", "surrogateescape")
started = time.perf_counter()
cpu = time.process_time()
count = 0
for line in text.split("\\n"):
    line.split("\\t")
    count += 1
print(count, time.perf_counter() - started, time.process_time() - cpu)
"""


def split_loop(source: Path) -> tuple[int, float, float]:
    """Lines, seconds and CPU seconds of the bare loop: the lines in memory, split
    on "\\n", each on "\\t"."""
    result = subprocess.run(
        [sys.executable, "-c", SPLIT_LOOP, str(source)], capture_output=True, text=True, check=True
    )
    count, seconds, cpu_seconds = result.stdout.split()
    return int(count), float(seconds), float(cpu_seconds)


def run_index(
    source: Path, out: Path, batch_articles: int
) -> tuple[float, float, float, dict[str, object]]:
    """Seconds, CPU seconds and peak RSS (MB) of one `uidx index` run, and its summary."""
    command = [
        *UIDX,
        "index",
        str(source),
        "--out",
        str(out),
        "--quiet",
        "--batch-articles",
        str(batch_articles),
    ]
    started = time.perf_counter()
    child = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"uidx index failed ({child.returncode}):\n{errors}")
    summary_line = next(
        line for line in reversed(errors.splitlines()) if line.startswith('{"summary"')
    )
    return (
        seconds,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,
        json.loads(summary_line),
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--lines", type=int, default=1_000_000, help="generated overview lines (default 1M)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each, the best is kept (default 3)"
    )
    parser.add_argument("--batch-articles", type=int, default=default("batch_articles"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    compile_bytecode()  # timed as an installed uidx runs: see its docstring
    with tempfile.TemporaryDirectory(prefix="bench-index-") as folder:
        work = Path(folder)
        source, truth_path, out = (
            work / "overview.gz",
            work / "truth.jsonl.gz",
            work / "releases.jsonl",
        )
        print(f"bench-index: generating {args.lines:,} articles", file=sys.stderr, flush=True)
        subprocess.run(
            [*UIDX, "generate", "--articles", str(args.lines), "--seed", str(args.seed),
             "--out", str(source), "--truth", str(truth_path)],
            check=True,
        )  # fmt: skip
        best_split = best_index = best_split_cpu = best_index_cpu = float("inf")
        cpu = rss = 0.0
        summary: dict[str, object] = {}
        for attempt in range(1, args.repeat + 1):
            lines, seconds, split_cpu = split_loop(source)
            best_split = min(best_split, seconds)
            best_split_cpu = min(best_split_cpu, split_cpu)
            index_seconds, cpu_seconds, peak, summary = run_index(source, out, args.batch_articles)
            if index_seconds < best_index:
                best_index, cpu = index_seconds, cpu_seconds
            best_index_cpu = min(best_index_cpu, cpu_seconds)
            rss = max(rss, peak)
            print(
                f"bench-index: run {attempt}: split {lines / seconds:,.0f} lines/s, "
                f"uidx index {lines / index_seconds:,.0f} lines/s ({peak:.0f} MB)",
                file=sys.stderr,
                flush=True,
            )
        with gzip.open(truth_path, "rb") as stream:
            truth = Truth.load(stream)
        with out.open("rb") as stream:
            releases = [json.loads(line) for line in stream]
        figures = score(releases, truth).as_dict()
    result = {
        "bench": "index",
        "lines": lines,
        "lines_per_s": round(lines / best_index),
        "split_lines_per_s": round(lines / best_split),
        "ratio": round(best_split / best_index, 3),
        # The same ratio in CPU seconds (the best of each): steadier than wall
        # time on a machine shared with other work.
        "cpu_ratio": round(best_split_cpu / best_index_cpu, 3),
        "index_only_lines_per_s": summary.get("lines_per_s"),
        "cpu_s_per_1m_lines": round(cpu / lines * 1e6, 3),
        "peak_rss_mb": round(rss, 1),
        "batch_articles": args.batch_articles,
        "releases": summary.get("releases"),
        "chunks_per_release": summary.get("chunks_per_release"),
        "quality": figures,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
