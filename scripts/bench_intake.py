"""scripts/bench-intake: what the coordinator's batch intake spends per release, in this process.

Generates --articles overview lines (posting-tools profile), indexes them as
an edge does (RangeIndexer fed in spool chunks, a batch taken every
--batch-articles articles, `pack_batch`, `encode_batch`: edge/range_runner.py's
`_body`), then times what the coordinator does with each body before its
COPY (coordinator/http/node.py `_decode_and_store`): `decode_body`,
`decode_batch` (msgpack, every check, every fragment decompressed and
checked) and the range check, with its release checks compiled
(`_fastfragments.ReleaseChecks`) and pure (`decode_batch(pure=True)`, the
oracle). Thread CPU, the least of --repeat runs over all bodies, automatic
GC off (as the node API runs it); per release and per 1M lines.

The last line printed is one JSON object: {"bench": "intake", ...}.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable

from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.wire.batchwire import decode_batch, decode_body, encode_batch
from usenet_indexer.wire.packed import pack_batch

RANGE_ID = 1
# The spool's chunk (bench-scale's --chunk-articles default): what an edge feeds at once.
CHUNK_LINES = 100_000
# The node API's default caps (config.py max_body_bytes, max_inflated_bytes).
MAX_BODY = 256 << 20
MAX_INFLATED = 2 << 30


def bodies(articles: int, batch_articles: int, seed: int) -> list[bytes]:
    """The batch bodies an edge posts for `articles` generated lines."""
    generated = generate(GeneratorConfig(articles=articles, seed=seed, profile="posting-tools"))
    lines = generated.lines
    first = int(lines[0].split(b"\t", 1)[0])
    indexer = RangeIndexer(group=generated.truth.group, first=first)
    found = []
    for at in range(0, len(lines), CHUNK_LINES):
        chunk = lines[at : at + CHUNK_LINES]
        indexer.add_data(b"\n".join(chunk) + b"\n", int(chunk[-1].split(b"\t", 1)[0]) + 1)
        if indexer.pending_articles >= batch_articles:
            found.append(encode_batch(pack_batch(indexer.take()), range_id=RANGE_ID, epoch=1))
    found.append(encode_batch(pack_batch(indexer.finish()), range_id=RANGE_ID, epoch=1))
    return found


def intake(body: bytes, *, pure: bool) -> int:
    """node.py's `_decode_and_store` up to the store: the releases decoded."""
    document = decode_body(
        body, content_encoding=None, max_body_bytes=MAX_BODY, max_inflated_bytes=MAX_INFLATED
    )
    wire = decode_batch(document, pure=pure)
    if wire.range_id != RANGE_ID:
        raise SystemExit(f"bench-intake: a batch for range {wire.range_id}")
    return len(wire.batch.releases)


def least(repeat: int, work: Callable[[], object]) -> float:
    """The least thread CPU seconds of `repeat` runs of `work`."""
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        work()
        best = min(best, time.thread_time() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--articles", type=int, default=1_000_000, help="generated lines (1M)")
    parser.add_argument(
        "--batch-articles", type=int, default=500_000, help="articles per batch (500k)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=7, help="runs of each, the best kept")
    args = parser.parse_args()
    found = bodies(args.articles, args.batch_articles, args.seed)
    releases = sum(intake(body, pure=True) for body in found)
    gc.disable()  # as the node API decodes a batch (coordinator/http/node.py _run_heavy)
    figures: dict[str, float] = {}
    for name, pure in (("compiled", False), ("pure", True)):
        seconds = least(args.repeat, lambda pure=pure: [intake(b, pure=pure) for b in found])
        figures[f"{name}_us_per_release"] = round(seconds * 1e6 / max(1, releases), 2)
        figures[f"{name}_cpu_s_per_1m"] = round(seconds * 1e6 / args.articles, 4)
    gc.enable()
    print(
        json.dumps(
            {
                "bench": "intake",
                "articles": args.articles,
                "bodies": len(found),
                "body_bytes": sum(map(len, found)),
                "releases": releases,
                **figures,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
