"""scripts/bench-grouping: one upload, one release? The figures of issue 15.

Two data sets the indexer's rules were not written from, each indexed by
`uidx index --include-dropped` as a subprocess, as a user would run it, and
graded by `usenet_indexer.synth.truth.grouping_score` against its own truth:

- generated: `uidx generate --profile posting-tools` (>= 400k articles by
  default), uploads as the posting tools write them;
- corpus: the real NZBs of ../shared/corpus, each one upload, replayed as
  the overview lines of one group with several uploads in flight at once
  (`usenet_indexer.testing.corpus`).

Per pattern (generated) and per NZB (corpus), what went wrong is printed on
stderr. The last line printed is one JSON object: {"bench": "grouping", ...},
each figure with its goal from the issue's table and whether it is met.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from usenet_indexer.config import default
from usenet_indexer.synth.truth import GroupingScore, Truth, grouping_score, score, wrong_merges
from usenet_indexer.testing.corpus import (
    corpus_truth,
    find_corpus,
    load_corpus,
    nzb_to_overview,
)

ROOT = Path(__file__).resolve().parent.parent
UIDX = [sys.executable, "-m", "usenet_indexer"]
# The corpus replay: one group, article numbers beyond 32 bits, four uploads
# in flight at once (a busy group; the tests use the same).
CORPUS_GROUP = "alt.binaries.corpus"
CORPUS_FIRST_ARTICLE = 7_000_000_000
CORPUS_IN_FLIGHT = 4
# The goal for the real-NZB round trip.
CORPUS_GOAL = (">=", 0.98)


def log(message: str) -> None:
    print(f"bench-grouping: {message}", file=sys.stderr, flush=True)


def run_index(source: Path, out: Path, batch_articles: int) -> dict[str, Any]:
    """Run `uidx index --include-dropped` and return its summary line."""
    command = [
        *UIDX, "index", str(source), "--out", str(out), "--include-dropped", "--quiet",
        "--batch-articles", str(batch_articles),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"uidx index failed ({result.returncode}):\n{result.stderr}")
    line = next(
        line for line in reversed(result.stderr.splitlines()) if line.startswith('{"summary"')
    )
    summary: dict[str, Any] = json.loads(line)
    return summary


def read_releases(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as stream:
        return [json.loads(line) for line in stream]


def generated(
    work: Path, articles: int, seed: int, batch_articles: int, explain: int = 0
) -> dict[str, Any]:
    """Generate the posting-tools profile, index it, grade it."""
    source, truth_path, out = work / "tools.gz", work / "tools.truth.jsonl.gz", work / "tools.jsonl"
    log(f"generating {articles:,} articles (posting-tools profile, seed {seed})")
    subprocess.run(
        [*UIDX, "generate", "--profile", "posting-tools", "--articles", str(articles),
         "--seed", str(seed), "--out", str(source), "--truth", str(truth_path)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    log("indexing them with uidx index")
    started = time.perf_counter()
    summary = run_index(source, out, batch_articles)
    seconds = time.perf_counter() - started
    with gzip.open(truth_path, "rb") as stream:
        truth = Truth.load(stream)
    releases = read_releases(out)
    result = grouping_score(releases, truth)
    print_patterns(result, "pattern")
    for merge in wrong_merges(releases, truth)[:explain]:
        print(json.dumps(merge), file=sys.stderr)
    return {
        "articles": articles,
        "index_seconds": round(seconds, 2),
        "score": result,
        "lenient": score(releases, truth).as_dict(),
        "summary": summary,
    }


def corpus(work: Path, folder: Path, seed: int, batch_articles: int) -> dict[str, Any]:
    """Replay the corpus NZBs as one group's lines, index them, grade them."""
    named = load_corpus(folder / "nzb")
    names, nzbs = [name for name, _ in named], [nzb for _, nzb in named]
    replay = nzb_to_overview(
        nzbs,
        first_article=CORPUS_FIRST_ARTICLE,
        rng=random.Random(seed),
        uploads_in_flight=CORPUS_IN_FLIGHT,
        group=CORPUS_GROUP,
    )
    source, out = work / "corpus.txt", work / "corpus.jsonl"
    source.write_text("".join(line + "\n" for line in replay.lines), encoding="utf-8")
    log(f"indexing {len(replay.lines):,} lines replayed from {len(nzbs)} real NZBs")
    summary = run_index(source, out, batch_articles)
    truth = corpus_truth(nzbs, replay, names)
    result = grouping_score(read_releases(out), truth)
    print_patterns(result, "NZB")
    return {"nzbs": len(nzbs), "lines": len(replay.lines), "score": result, "summary": summary}


def print_patterns(result: GroupingScore, label: str) -> None:
    """What went wrong, by pattern or NZB, on stderr."""
    columns = ("releases", "one_to_one", "split", "wrongly_merged", "absent_or_dropped", "flagged")
    log(f"{label:<58} " + " ".join(f"{c[:12]:>12}" for c in columns))
    for pattern, row in result.by_pattern.items():
        cells = []
        for column in columns:
            value = row.get(column, "")
            if column == "flagged" and "probe_candidates" in row:
                value = f"{row['flagged']}/{row['probe_candidates']}"
            cells.append(f"{value!s:>12}")
        log(f"{pattern[:58]:<58} " + " ".join(cells))


def figures(gen: GroupingScore, real: GroupingScore) -> dict[str, dict[str, Any]]:
    """The issue's table: every figure, its goal and whether it is met."""
    table = gen.goals()
    sense, bound = CORPUS_GOAL
    value = real.files_right_release
    table["corpus_files_in_upload_release"] = {
        "value": round(value, 4),
        "goal": f"{sense} {bound}",
        "met": value >= bound,
    }
    return table


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--articles", type=int, default=400_000, help="generated articles (default 400k)"
    )
    parser.add_argument("--seed", type=int, default=1, help="generator and replay seed (default 1)")
    parser.add_argument("--batch-articles", type=int, default=default("batch_articles"))
    parser.add_argument(
        "--explain",
        type=int,
        default=0,
        metavar="N",
        help="print the first N wrong merges of the generated data on stderr, as JSON lines",
    )
    parser.add_argument(
        "--corpus", type=Path, default=None, help="the corpus folder (default: ../shared/corpus)"
    )
    args = parser.parse_args()
    folder = args.corpus or find_corpus(ROOT)
    if folder is None:
        raise SystemExit("bench-grouping: no corpus (../shared/corpus) found; give --corpus")
    with tempfile.TemporaryDirectory(prefix="bench-grouping-") as name:
        work = Path(name)
        gen = generated(work, args.articles, args.seed, args.batch_articles, args.explain)
        real = corpus(work, folder, args.seed, args.batch_articles)
    gen_score, real_score = gen.pop("score"), real.pop("score")
    result = {
        "bench": "grouping",
        "articles": args.articles,
        "seed": args.seed,
        "batch_articles": args.batch_articles,
        "figures": figures(gen_score, real_score),
        "generated": {
            **gen_score.as_dict(),
            "index_seconds": gen["index_seconds"],
            "not_binary_or_repaired": gen["summary"]["not_binary_or_repaired"],
            "output_releases": gen["lenient"]["counts"]["output_releases"],
            "truth_releases": gen["lenient"]["counts"]["truth_releases"],
        },
        "corpus": {
            "nzbs": real["nzbs"],
            "lines": real["lines"],
            **{k: v for k, v in real_score.as_dict().items() if k != "by_pattern"},
            "not_one_to_one": sorted(
                nzb for nzb, row in real_score.by_pattern.items() if not row.get("one_to_one")
            ),
        },
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
