"""scripts/bench-store: storing batches, catalog size, and leases, on a private PostgreSQL.

- Generates overview data with the project's generator and indexes it into
  real batches of --batch-articles articles (>= 1000 release chunks each).
- Packs and encodes each batch as an edge does (packed.pack_batch, the
  batch wire), then, as the coordinator does, decodes and checks the body
  (batchwire.decode_body, decode_batch) and stores it through BatchStore
  (one fenced transaction per batch). Each step is timed on its own; the
  figure of the issue is the store: ms per release chunk (the earlier
  system: 1.24 ms; target <= 0.05 ms). `ms_per_release_chunk_received` is
  everything the coordinator does with a batch body (decode, check, store).
- Catalog bytes per stored segment: releases, files and fragments with
  their indexes and TOAST, over the segments stored (target <= 25 B).
- Leases per second with 8 nodes leasing concurrently (threads), each
  lease its own transaction.
- Baseline in the same run: the round trip of `SELECT 1` on the same pool,
  so that figures can be compared across noisy runs.

The last line printed is one JSON object: {"bench": "store", ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings, default
from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.catalog import CatalogStore
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.testing.postgres import running_server
from usenet_indexer.wire.batchwire import compress_body, decode_batch, decode_body, encode_batch
from usenet_indexer.wire.packed import pack_batch

TTL = 900.0


def batches_of(articles: int, batch_articles: int, seed: int) -> tuple[str, list[Batch]]:
    generated = generate(GeneratorConfig(articles=articles, seed=seed))
    numbered = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    first = int(numbered[0].split(b"\t", 1)[0])
    indexer = RangeIndexer(group=generated.truth.group, first=first)
    batches: list[Batch] = []
    step = 20_000
    for start in range(0, len(numbered), step):
        part = numbered[start : start + step]
        indexer.add_data(b"\n".join(part), int(part[-1].split(b"\t", 1)[0]) + 1)
        if indexer.pending_articles >= batch_articles:
            batches.append(indexer.take())
    last = indexer.finish()
    if last.releases:
        batches.append(last)
    return generated.truth.group, batches


def round_trip_seconds(pool: ConnectionPool, count: int = 500) -> float:
    with pool.connection() as conn:
        started = time.perf_counter()
        for _ in range(count):
            conn.execute("SELECT 1").fetchone()
        return (time.perf_counter() - started) / count


def leases_per_second(pool: ConnectionPool, nodes: int, ranges: int) -> float:
    groups, node_store, range_store = GroupStore(pool), NodeStore(pool), RangeStore(pool)
    group = groups.add("bench.leases")
    range_store.plan(group, 0, ranges * 100 - 1, 100)
    ids = [node_store.authenticate(node_store.create(f"lease-{i}")) for i in range(nodes)]
    start = threading.Barrier(nodes + 1)

    def lease_all(node_id: int) -> None:
        start.wait()
        while range_store.lease(node_id, TTL) is not None:
            pass

    threads = [threading.Thread(target=lease_all, args=(n,)) for n in ids if n is not None]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return ranges / (time.perf_counter() - began)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--articles", type=int, default=1_000_000)
    parser.add_argument("--batch-articles", type=int, default=default("batch_articles"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(
        f"bench-store: generating and indexing {args.articles:,} articles",
        file=sys.stderr,
        flush=True,
    )
    group_name, batches = batches_of(args.articles, args.batch_articles, args.seed)
    with (
        running_server() as server,
        server.fresh_database() as url,
        open_pool(url, Settings(home=Path("/nonexistent")), max_size=12) as pool,
    ):
        round_trip = round_trip_seconds(pool)
        groups, nodes, ranges = GroupStore(pool), NodeStore(pool), RangeStore(pool)
        store, catalog = BatchStore(pool), CatalogStore(pool)
        group = groups.add(group_name)
        ranges.plan(
            group, batches[0].first, batches[-1].next - 1, batches[-1].next - batches[0].first
        )
        node_id = nodes.authenticate(nodes.create("bench"))
        assert node_id is not None
        lease = ranges.lease(node_id, TTL)
        assert lease is not None
        chunks = 0
        seconds = packing = decoding = 0.0
        for batch in batches:
            started = time.perf_counter()
            body = compress_body(
                encode_batch(pack_batch(batch), range_id=lease.range_id, epoch=lease.epoch)
            )
            packed_at = time.perf_counter()
            document = decode_body(
                body, content_encoding="gzip", max_body_bytes=1 << 30, max_inflated_bytes=1 << 31
            )
            wire = decode_batch(document)
            decoded_at = time.perf_counter()
            stored = store.store(node_id, wire.range_id, wire.epoch, wire.batch, len(body), TTL)
            took = time.perf_counter() - decoded_at
            packing += packed_at - started
            decoding += decoded_at - packed_at
            seconds += took
            chunks += stored.release_chunks
            print(
                f"bench-store: batch of {stored.release_chunks:,} release chunks, "
                f"{stored.segments:,} segments, {len(body) / 1e6:.1f} MB: "
                f"edge packs in {(packed_at - started) * 1000:.0f} ms, coordinator decodes in "
                f"{(decoded_at - packed_at) * 1000:.0f} ms, stores in {took * 1000:.0f} ms",
                file=sys.stderr,
                flush=True,
            )
        with pool.connection() as conn:
            conn.autocommit = True
            for table in ("releases", "fragments"):
                conn.execute(f"VACUUM ANALYZE {table}")
            conn.autocommit = False
        size, segments = catalog.bytes_per_segment()
        leases = leases_per_second(pool, nodes=8, ranges=4000)
    result = {
        "bench": "store",
        "batches": len(batches),
        "release_chunks": chunks,
        "ms_per_release_chunk": round(seconds / chunks * 1000, 4),
        "ms_per_release_chunk_received": round((decoding + seconds) / chunks * 1000, 4),
        "ms_per_release_chunk_edge_packing": round(packing / chunks * 1000, 4),
        "ms_per_release_chunk_earlier_system": 1.24,
        "catalog_bytes_per_segment": round(size / segments, 2),
        "segments": segments,
        "leases_per_s_8_nodes": round(leases),
        "round_trip_ms": round(round_trip * 1000, 4),
        "store_per_chunk_in_round_trips": round(seconds / chunks / round_trip, 3),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
