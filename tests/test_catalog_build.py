"""The searchable catalog follows the stored batches, release by release.

Generated lines are indexed as an edge would (a batch every 2,000 lines)
and stored in a real PostgreSQL; after each batch the catalog takes in
what the batch touched (`build_pending`). The rows must be those a whole
rebuild makes, complete releases must be listed at once, incomplete ones
only once quiet, and a grab must survive the rebuilds.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.store.catalog import CatalogStore, Search
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.ranges import Finish
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.wire.packed import pack_batch

TTL = 900.0
HOUR = 3600.0


def batches_of_generated(
    stores: Stores, articles: int, seed: int, every: int, profile: str = "default"
) -> Iterator[int]:
    """Index generated lines as one edge, storing a batch every `every` lines; yields the
    batches stored so far after each (the range is finished with the last)."""
    generated = generate(GeneratorConfig(articles=articles, seed=seed, profile=profile))
    lines = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    numbers = [int(line.split(b"\t", 1)[0]) for line in lines]
    group = GroupStore(stores.ranges.pool).add(generated.truth.group)
    low, high = min(numbers), max(numbers)
    stores.ranges.plan(group, low, high, high - low + 1)
    node_id = stores.nodes.authenticate(stores.nodes.create("edge"))
    assert node_id is not None
    lease = stores.ranges.lease(node_id, TTL)
    assert lease is not None
    indexer = RangeIndexer(group=lease.group, first=lease.next)
    for at, start in enumerate(range(0, len(lines), every), 1):
        part = lines[start : start + every]
        last = start + every >= len(lines)
        end = high + 1 if last else numbers[start + len(part) - 1] + 1
        indexer.add_data(b"\n".join(part), end)
        batch = indexer.finish() if last else indexer.take()
        stores.batches.store(node_id, lease.range_id, lease.epoch, pack_batch(batch), 0, TTL)
        if last:
            assert stores.ranges.finish(node_id, lease.range_id, lease.epoch) is Finish.OK
        yield at


def catalog_rows(stores: Stores) -> dict[str, tuple[object, ...]]:
    """Every catalog row by guid, as a user sees it (and whether it is shown)."""
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute(
            "SELECT guid, name, category, size, files, poster, groups, posted, completion,"
            " sources, shown FROM catalog"
        ).fetchall()
    return {str(r[0]): tuple(r[1:]) for r in rows}


@pytest.mark.parametrize("profile", ["default", "posting-tools"])
def test_release_by_release_the_catalog_is_what_a_whole_rebuild_makes(
    stores: Stores, profile: str
) -> None:
    # Small batches: an upload's parts (linked per poster) come in different batches.
    for _ in batches_of_generated(stores, 12_000, seed=3, every=700, profile=profile):
        stores.catalog.build_pending(quiet_seconds=0)
    assert stores.catalog.build_pending(quiet_seconds=0).keys == 0  # nothing left pending
    followed = catalog_rows(stores)
    built = stores.catalog.build(quiet_seconds=0)
    assert catalog_rows(stores) == followed
    kept = [r for r in CatalogStore(stores.catalog.pool).export() if r.dropped is None]
    assert built.releases == len(kept) == len(followed) > 20
    assert {r.key.hex() for r in kept} == set(followed)


def test_a_complete_release_is_listed_at_once_an_incomplete_one_once_quiet(
    stores: Stores,
) -> None:
    for _ in batches_of_generated(stores, 12_000, seed=4, every=3_000):
        stores.catalog.build_pending(quiet_seconds=HOUR)
    rows = catalog_rows(stores)
    complete = {guid for guid, row in rows.items() if float(str(row[7])) >= 1.0}
    incomplete = set(rows) - complete
    assert complete, "the generator posts complete uploads"
    assert incomplete, "and incomplete ones"
    assert {guid for guid, row in rows.items() if row[-1]} == complete
    _total, page = stores.catalog.search(Search(limit=1000))
    assert {row.guid for row in page} == complete
    assert stores.catalog.counts() == (len(complete), len(incomplete))
    # Nothing new: quiet for 0 s is quiet enough, and every release is listed.
    assert stores.catalog.build_pending(quiet_seconds=0).shown == len(incomplete)
    assert stores.catalog.counts() == (len(rows), 0)
    # Once listed, it stays listed, even with a long quiet time again.
    stores.catalog.build(quiet_seconds=HOUR)
    assert stores.catalog.counts() == (len(rows), 0)


def test_a_grab_survives_the_builds(stores: Stores) -> None:
    batches = batches_of_generated(stores, 8_000, seed=5, every=2_500)
    next(batches)
    stores.catalog.build_pending(quiet_seconds=0)
    early = set(catalog_rows(stores))
    for guid in early:
        stores.catalog.grab(guid)
    for _ in batches:
        stores.catalog.build_pending(quiet_seconds=0)
    stores.catalog.build(quiet_seconds=0)
    kept = early & set(catalog_rows(stores))
    assert len(kept) > 5
    for guid in kept:
        row = stores.catalog.row(guid)
        assert row is not None
        assert row.item.grabs == 1


def test_the_keys_a_batch_marks_are_pending_until_a_build_takes_them(stores: Stores) -> None:
    batches = batches_of_generated(stores, 4_000, seed=6, every=2_000)
    assert stores.batches.pending_keys() == 0
    next(batches)
    with stores.catalog.pool.connection() as conn:
        marked = conn.execute("SELECT count(DISTINCT release_key) FROM fragments").fetchone()
    assert marked is not None
    assert stores.batches.pending_keys() == marked[0] > 0
    stores.catalog.build_pending(quiet_seconds=HOUR)
    assert stores.batches.pending_keys() == 0
