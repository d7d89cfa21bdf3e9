"""scripts/bench-entries: what a catalog build spends per release on its rows and probes.

A catalog build makes a row of every release it merges (core/catalog.py's
`entry`: its category, core/categories.py; its state, core/completion.py)
and asks which segment of it to probe next (`more_probes`). This times
those over the releases real data makes, in this process, with no database:
`uidx generate` data of both profiles (default and posting-tools), indexed
and merged as `uidx index` does (commands/index.py), each release once, no
memo (what a build does for a release it has not seen). Best of --repeat,
in thread CPU time.

The last line printed is one JSON object: {"bench": "entries", ...}, each
figure in microseconds per release.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from usenet_indexer.commands.index import index_files
from usenet_indexer.core import catalog as core
from usenet_indexer.core.categories import categorise
from usenet_indexer.core.completion import judge
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.core.renames import Shown, apply
from usenet_indexer.synth.generator import GeneratorConfig, generate

PROFILES = ("default", "posting-tools")


def releases_of(articles: int, seed: int, work: Path) -> list[CatalogRelease]:
    """The kept releases both profiles' data make, merged as `uidx index` merges."""
    found: list[CatalogRelease] = []
    for profile in PROFILES:
        path = work / f"{profile}.txt"
        lines = generate(GeneratorConfig(articles=articles, seed=seed, profile=profile)).lines
        path.write_bytes(b"".join(line + b"\r\n" for line in lines))
        merger, _stats = index_files([path])
        found += [s.release for s in core.kept(apply(list(merger.releases()), {}))]
    return found


def best(repeat: int, count: int, work: Callable[[], object]) -> float:
    """The least thread CPU of `repeat` runs of `work`, in microseconds per release."""
    least = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        work()
        least = min(least, time.thread_time() - started)
    return round(least * 1e6 / max(1, count), 2)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--articles", type=int, default=300_000, help="generated articles per profile (300k)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each, the best kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-entries-") as name:
        releases = releases_of(args.articles, args.seed, Path(name))
    shown = [Shown(r) for r in releases]
    now = datetime.now(UTC)
    changed = {key: now for r in releases for key in r.sources}
    names = [(r.name, r.groups, tuple(f.name for f in r.files)) for r in releases]
    count = len(releases)
    figures = {
        "categorise_us": best(args.repeat, count, lambda: [categorise(*n) for n in names]),
        "judge_us": best(
            args.repeat, count, lambda: [judge(r.files, r.files_announced) for r in releases]
        ),
        "entry_us": best(
            args.repeat, count, lambda: [core.entry(s, changed, {}, None) for s in shown]
        ),
        "more_probes_us": best(args.repeat, count, lambda: core.more_probes(shown, {}, {})),
    }
    print(json.dumps({"bench": "entries", "releases": count, **figures}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
