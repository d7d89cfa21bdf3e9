"""The cost of fencing: batches stored per second with and without the fence.

The same batches (indexed in this process from the chaos run's part files,
one range per part) are stored through `BatchStore` on a fresh database
each time, fenced and unfenced in turn, `rounds` times each; the best rate
of each is kept. Only the store is timed: leasing and planning come before.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import attrs
import psycopg

from chaos.prepare import GROUP, Part, create_database
from usenet_indexer.config import Settings
from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.migrate import migrate
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.wire.packed import PackedBatch, pack_batch

TTL_SECONDS = 600.0


@attrs.frozen
class FenceCost:
    """Batches per second stored with the fence and without it."""

    batches: int
    fenced_per_second: float
    unfenced_per_second: float

    @property
    def ratio(self) -> float:
        """Fenced over unfenced: 1.0 means fencing costs nothing."""
        return self.fenced_per_second / self.unfenced_per_second


def batches_of(parts: Sequence[Part], batch_articles: int) -> list[list[PackedBatch]]:
    """Each part indexed into batches of about `batch_articles` articles, packed as edges send them."""
    out: list[list[PackedBatch]] = []
    for part in parts:
        lines = [line for line in part.path.read_bytes().splitlines() if line]
        indexer = RangeIndexer(group=GROUP, first=part.first)
        batches: list[Batch] = []
        for start in range(0, len(lines), batch_articles):
            block = lines[start : start + batch_articles]
            numbers = [int(h) for h in (line.split(b"\t", 1)[0] for line in block) if h.isdigit()]
            if not numbers:
                continue
            indexer.add_data(b"\n".join(block) + b"\n", numbers[-1] + 1)
            if indexer.pending_articles >= batch_articles:
                batches.append(indexer.take())
        last = indexer.finish()
        if last.next > last.first:
            batches.append(last)
        out.append([pack_batch(batch) for batch in batches])
    return out


def _store_all(
    admin_url: str,
    url: str,
    name: str,
    ranges: Sequence[Part],
    batches: Sequence[Sequence[PackedBatch]],
    fenced: bool,
) -> float:
    create_database(admin_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    with open_pool(url, Settings(home=Path("/nonexistent")), max_size=2) as pool:
        group_id = GroupStore(pool).add(GROUP)
        plans = RangeStore(pool)
        for part in ranges:
            plans.plan(group_id, part.first, part.last, part.last - part.first + 1)
        nodes = NodeStore(pool)
        node_id = nodes.authenticate(nodes.create("fence-cost"))
        assert node_id is not None
        leases = [plans.lease(node_id, TTL_SECONDS) for _ in ranges]
        store = BatchStore(pool, fenced=fenced)
        started = time.perf_counter()
        for lease, range_batches in zip(leases, batches, strict=True):
            assert lease is not None
            for batch in range_batches:
                store.store(node_id, lease.range_id, lease.epoch, batch, 0, TTL_SECONDS)
        return time.perf_counter() - started


def fence_cost(
    admin_url: str, url_of: dict[str, str], parts: Sequence[Part], batch_articles: int, rounds: int
) -> FenceCost:
    """Store the parts' batches fenced and unfenced, `rounds` times each, alternating.

    Args:
        admin_url: the cluster's admin database (to create the databases).
        url_of: database name -> conninfo, for "fence_cost_fenced" and "fence_cost_unfenced".
        parts: the ranges.
        batch_articles: articles per batch.
        rounds: runs of each.

    Returns:
        The best rate of each.
    """
    batches = batches_of(parts, batch_articles)
    count = sum(len(b) for b in batches)
    best = {True: 0.0, False: 0.0}
    for _ in range(rounds):
        for fenced in (True, False):
            name = "fence_cost_fenced" if fenced else "fence_cost_unfenced"
            seconds = _store_all(admin_url, url_of[name], name, parts, batches, fenced)
            best[fenced] = max(best[fenced], count / seconds)
    return FenceCost(count, best[True], best[False])
