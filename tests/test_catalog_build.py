"""The searchable catalog follows the stored batches, release by release.

Generated lines are indexed as an edge would (a batch every 2,000 lines)
and stored in a real PostgreSQL; after each batch the catalog takes in
what the batch touched (`CatalogBuild.pending`). The rows must be those a whole
rebuild makes, complete releases must be listed at once, incomplete ones
only once quiet, and a grab must survive the rebuilds.
"""

from __future__ import annotations

import gc
import hashlib
import re
import threading
from collections.abc import Iterator, Sequence
from email.utils import formatdate
from itertools import accumulate, chain, cycle
from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg.pq import TransactionStatus

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import MAX_SHARDS, Built, CatalogBuild
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.batch import ReleaseChunk
from usenet_indexer.core.catalog import SEARCHED_CHARS, searched
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.decode.ids import MediaIds
from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.catalog import SHARDS, CatalogStore, Search
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.probes import Outcome, ProbeStore
from usenet_indexer.store.ranges import Finish
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.testing.postgres import PgServer
from usenet_indexer.wire import fragments
from usenet_indexer.wire.batchwire import decode_batch, encode_batch
from usenet_indexer.wire.packed import PackedBatch, pack_batch, pack_release

TTL = 900.0
HOUR = 3600.0


def batches_of_generated(
    stores: Stores, articles: int, seed: int, every: int, profile: str = "default"
) -> Iterator[int]:
    """Index generated lines as one edge, storing a batch every `every` lines; yields the
    batches stored so far after each (the range is finished with the last)."""
    generated = generate(GeneratorConfig(articles=articles, seed=seed, profile=profile))
    lines = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    yield from batches_of_lines(stores, generated.truth.group, lines, every)


def batches_of_lines(
    stores: Stores, group_name: str, lines: list[bytes], every: int | Sequence[int]
) -> Iterator[int]:
    """Index overview lines as one edge, storing a batch every `every` lines (see above),
    or a batch of each of the sizes `every` lists, in order (the group added unless it
    is there: a later call is a backfill's range)."""
    sizes = [every] * -(-len(lines) // every) if isinstance(every, int) else list(every)
    assert sum(sizes[:-1]) < len(lines) <= sum(sizes), (sizes, len(lines))
    numbers = [int(line.split(b"\t", 1)[0]) for line in lines]
    groups = GroupStore(stores.ranges.pool)
    group = (
        groups.id_of(group_name)
        if any(g.name == group_name for g in groups.list())
        else groups.add(group_name)
    )
    low, high = min(numbers), max(numbers)
    stores.ranges.plan(group, low, high, high - low + 1)
    node_id = stores.nodes.authenticate(stores.nodes.create(f"edge-{low}"))
    assert node_id is not None
    lease = stores.ranges.lease(node_id, TTL)
    assert lease is not None
    indexer = RangeIndexer(group=lease.group, first=lease.next)
    for at, (start, size) in enumerate(zip(accumulate([0, *sizes]), sizes, strict=False), 1):
        part = lines[start : start + size]
        last = start + size >= len(lines)
        end = high + 1 if last else numbers[start + len(part) - 1] + 1
        indexer.add_data(b"\n".join(part), end)
        batch = indexer.finish() if last else indexer.take()
        stores.batches.store(node_id, lease.range_id, lease.epoch, pack_batch(batch), 0, TTL)
        if last:
            assert stores.ranges.finish(node_id, lease.range_id, lease.epoch) is Finish.OK
        yield at


@pytest.mark.parametrize("posted", [2**63 - 2, 2**63 - 1 - 1800, -(2**63)])
def test_files_dated_at_the_ends_of_a_bigint_are_built(
    stores: Stores, posted: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node may send any date a fragment holds (an int8): the closure's windows around
    it stay within PostgreSQL's bigint (they ran past it: a ValueError that ended the
    builder, again after every restart, and a 500 to an edge asking for a build). A row
    is dated no later than when its articles were stored (core/catalog.seen_by)."""
    store = BatchStore.store

    def dated(
        self: BatchStore, node: int, range_id: int, epoch: int, batch: PackedBatch, *rest: Any
    ) -> Any:
        releases = []
        for release in batch.releases:
            files = tuple(
                attrs.evolve(f, posted=posted) for f in fragments.unpack(release.fragment)
            )
            chunk = ReleaseChunk(
                release.key, release.head_name, release.poster, release.groups,
                release.files_announced, files,
            )  # fmt: skip
            releases.append(pack_release(chunk))
        changed = attrs.evolve(batch, releases=tuple(releases))
        return store(self, node, range_id, epoch, changed, *rest)

    monkeypatch.setattr(BatchStore, "store", dated)
    for _ in batches_of_generated(stores, 2_000, seed=4, every=1_000):
        stores.build.drain(quiet_seconds=0)
    assert stores.build.drain(quiet_seconds=0).keys == 0
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute(
            "SELECT posted, floor(extract(epoch FROM changed_at))::bigint FROM catalog"
        ).fetchall()
    assert rows
    assert all(dated == min(posted, stored) for dated, stored in rows)


def test_a_releases_summed_bytes_stop_at_a_bigints_end(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release key's segments and bytes are summed over its batches: held at the
    largest bigint, never an overflow (a 500 to the edge at every try of its range)."""
    store = BatchStore.store

    def huge(
        self: BatchStore, node: int, range_id: int, epoch: int, batch: PackedBatch, *rest: Any
    ) -> Any:
        releases = tuple(attrs.evolve(r, bytes=2**62 + 1) for r in batch.releases)
        return store(self, node, range_id, epoch, attrs.evolve(batch, releases=releases), *rest)

    monkeypatch.setattr(BatchStore, "store", huge)
    # One upload posted into two batches: its key's two chunks summed.
    lines = rar_lines("Some.Movie.2020.1080p.BluRay.x264-GRP", 4, at=1_764_000_000)
    numbered = [f"{n}\t{line}".encode() for n, line in enumerate(lines, 1000)]
    for _ in batches_of_lines(stores, "alt.binaries.movies", numbered, len(lines) // 2):
        pass
    with stores.catalog.pool.connection() as conn:
        summed = conn.execute("SELECT max(chunks), max(bytes) FROM releases")
        assert summed.fetchone() == (2, 2**63 - 1)


def test_a_release_with_thousands_of_old_names_keeps_what_its_row_can_hold(
    stores: Stores,
) -> None:
    """A release renamed by a probe keeps its old names searchable, as many as fit: an
    obfuscated upload of thousands of renamed files made a search name past what a
    tsvector holds (1 MB), a row no build could write."""
    old_names = [f"{n:064x}.bin" for n in range(20_000)]  # 69 characters each: 1.4 MB
    text = searched("Some.Show.S01E02.720p", old_names)
    assert text.startswith("Some.Show.S01E02.720p ")
    assert len(text) <= SEARCHED_CHARS
    assert text.split(" ")[1:] == old_names[: len(text.split(" ")) - 1]
    assert searched("x" * (SEARCHED_CHARS + 5), old_names) == "x" * (SEARCHED_CHARS + 5)
    # The most a tsvector makes of SEARCHED_CHARS: distinct two-letter words, in
    # letters of two bytes each (Cyrillic), as the catalog's words column is made.
    letters = [chr(c) for c in range(0x0430, 0x0430 + 150)]
    words = " ".join(a + b for a in letters for b in letters)[:SEARCHED_CHARS]
    with stores.catalog.pool.connection() as conn:
        row = conn.execute(
            "SELECT length(to_tsvector('simple', %s)), pg_column_size(to_tsvector('simple', %s))",
            (words, words),
        ).fetchone()
    assert row is not None
    assert row[0] > 20_000
    assert row[1] < 1 << 20


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
    for _ in batches_of_generated(stores, 40_000, seed=3, every=300, profile=profile):
        stores.build.drain(quiet_seconds=0)
    assert stores.build.drain(quiet_seconds=0).keys == 0  # nothing left pending
    followed = catalog_rows(stores)
    built = stores.build.everything(quiet_seconds=0)
    assert catalog_rows(stores) == followed
    kept = [r for r in stores.build.export() if r.dropped is None]
    assert built.releases == len(kept) == len(followed) > 20
    assert {r.key.hex() for r in kept} == set(followed)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(1, 1 << 20),
    profile=st.sampled_from(["default", "posting-tools"]),
    cuts=st.lists(st.integers(40, 700), min_size=1, max_size=8),
    pace=st.sampled_from([0.02, 1.0, 3.0, 10.0]),
)
# A case the closure's windows decide: without them (WINDOW_ROUNDS = 0) its catalog
# followed batch by batch is not the rebuilt one.
@example(seed=1, profile="posting-tools", cuts=[40], pace=0.02)
# Uploads posted over hours under a posting tool's From, cut into batches of an hour
# or more (the closure's windows and `_since` around fresh chunks hours after the
# stored ones).
@example(seed=5, profile="posting-tools", cuts=[40, 300, 700], pace=3.0)
@example(seed=5, profile="posting-tools", cuts=[431, 222], pace=10.0)
def test_any_group_cut_into_any_batches_builds_what_a_whole_rebuild_makes(
    pg_server: PgServer, tmp_path: Path, seed: int, profile: str, cuts: list[int], pace: float
) -> None:
    # Whatever the uploads (the generator's interleavings, reposts, albums and
    # floods, seeded), however fast they are posted (0.02 s an article is a day's
    # 4.3M; 10 s spreads 3,000 articles over eight hours) and wherever the batches
    # cut them, the catalog followed build by build is the one a whole rebuild
    # makes: the closure's bounds (windows WINDOW_ROUNDS deep) lose nothing.
    config = GeneratorConfig(articles=3_000, seed=seed, profile=profile, seconds_per_article=pace)
    generated = generate(config)
    lines = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    sizes: list[int] = []
    for size in cycle(cuts):  # the cuts over and over, to the last line
        if sum(sizes) >= len(lines):
            break
        sizes.append(size)
    with (
        pg_server.fresh_database() as url,
        open_pool(url, Settings(home=tmp_path, listen="127.0.0.1:0")) as pool,
    ):
        stores = Stores.from_pool(pool)
        for _ in batches_of_lines(stores, generated.truth.group, lines, sizes):
            stores.build.drain(quiet_seconds=0)
        followed = catalog_rows(stores)
        stores.build.everything(quiet_seconds=0)
        assert catalog_rows(stores) == followed


def probes_found(stores: Stores) -> list[bytes]:
    """Every due probe candidate done, the outcomes taken in turn: a real name (an nfo's,
    and a par2's with its file names and slice size), an archive of executables, a name
    it had already with the ids its NFO named, nothing named; the keys probed."""
    queue = ProbeStore(stores.catalog.pool)
    outcomes = cycle(["renamed", "executable", "already_named", "no_names", "par2"])
    jobs = queue.take(10_000, 600.0, server="a", servers=1)
    for n, (job, outcome) in enumerate(zip(jobs, outcomes, strict=False)):
        name = f"Found.Name.S01E{n % 90 + 1:02}.1080p.WEB-GRP"
        if outcome == "renamed":
            assert queue.record(job, Outcome.RENAMED, name=name)
        elif outcome == "par2":
            files = (f"{name}.mkv", f"{name}.nfo")
            assert queue.record(
                job, Outcome.RENAMED, name=name, files=files, sizes=(1 << 30, 900),
                slice_bytes=1 << 20,
            )  # fmt: skip
        elif outcome == "executable":
            assert queue.record(job, Outcome.EXECUTABLE)
        elif outcome == "already_named":
            assert queue.record(job, Outcome.ALREADY_NAMED, name=name, ids=MediaIds(imdb=n + 1))
        else:
            assert queue.record(job, Outcome.NO_NAMES)
    return [job.release_key for job in jobs]


def test_what_probes_found_of_a_repost_generation_is_in_the_catalog_that_follows(
    stores: Stores,
) -> None:
    # A repost generation's release key (its row's guid) is no stored release key:
    # the builds that follow the batches read what probes found of their keys only,
    # and the catalog kept the generation's old name (and its executables) until a
    # whole rebuild. A build queues a probe under a stored key (renames.probe_key:
    # a generation's own key may change as its chunks come), and what it found
    # names the generation whose segment it is.
    for _ in batches_of_generated(stores, 40_000, seed=3, every=700):
        pass
    stores.build.everything(quiet_seconds=0)
    with stores.catalog.pool.connection() as conn:
        asked = {
            str(m): bytes(k)
            for k, m in conn.execute("SELECT release_key, message_id FROM probe_candidates")
        }
    probed = probes_found(stores)
    with stores.catalog.pool.connection() as conn:
        stored = conn.execute("SELECT key FROM releases WHERE key = ANY(%s)", (probed,))
        assert set(probed) == {bytes(k) for (k,) in stored.fetchall()}
    stores.build.drain(quiet_seconds=0)
    followed = catalog_rows(stores)
    stores.build.everything(quiet_seconds=0)
    assert catalog_rows(stores) == followed
    # The repost generations probed: rows under keys of their own, one of whose
    # segments a probe asked for; their NZBs (the row's release merged again from
    # its keys) are the exported ones.
    exported = {r.key.hex(): r for r in stores.build.export()}
    generations = [
        guid
        for guid, release in exported.items()
        if release.key not in release.sources
        and any(m in asked for f in release.files for _, m, _ in f.segments)
    ]
    assert generations, "a repost generation probed"
    for guid in generations:
        row = stores.catalog.row(guid)
        assert row is not None
        assert stores.build.release(row) == exported[guid]
    # What a probe found names them (test_renames has how).
    assert any(str(followed[guid][0]).startswith("Found.Name.") for guid in generations)


def test_a_batch_the_node_api_stored_is_built_from_what_its_checks_inflated(
    stores: Stores,
) -> None:
    """The node API hands the build what it inflated to check a batch (remember):
    the build's chunks are those files, equal to what the stored fragments unpack to."""
    generated = generate(GeneratorConfig(articles=4_000, seed=5, profile="posting-tools"))
    lines = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    numbers = [int(line.split(b"\t", 1)[0]) for line in lines]
    group = GroupStore(stores.ranges.pool).add(generated.truth.group)
    stores.ranges.plan(group, min(numbers), max(numbers), max(numbers) - min(numbers) + 1)
    node_id = stores.nodes.authenticate(stores.nodes.create("edge"))
    assert node_id is not None
    lease = stores.ranges.lease(node_id, TTL)
    assert lease is not None
    indexer = RangeIndexer(group=lease.group, first=lease.next)
    remembering = CatalogStore(stores.catalog.pool)
    for start in range(0, len(lines), 1_000):
        part = lines[start : start + 1_000]
        indexer.add_data(b"\n".join(part), numbers[start + len(part) - 1] + 1)
        body = encode_batch(pack_batch(indexer.take()), range_id=lease.range_id, epoch=lease.epoch)
        wire = decode_batch(body)  # as the node API checks it: with what it inflated
        assert all(r.inflated for r in wire.batch.releases)
        stores.batches.store(node_id, lease.range_id, lease.epoch, wire.batch, len(body), TTL)
        remembering.remember(lease.range_id, wire.batch.first, wire.batch.releases)
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute("SELECT DISTINCT release_key FROM fragments").fetchall()
    keys = sorted(bytes(key) for (key,) in rows)
    assert len(keys) > 20
    remembered = list(remembering.chunks(keys))
    read = list(CatalogStore(stores.catalog.pool).chunks(keys))
    assert remembered == read
    # Asked again, the same objects: nothing read or unpacked again.
    again = list(remembering.chunks(keys))
    assert all(a.files is b.files for a, b in zip(again, remembered, strict=True))


def test_a_complete_release_is_listed_at_once_an_incomplete_one_once_quiet(
    stores: Stores,
) -> None:
    for _ in batches_of_generated(stores, 12_000, seed=4, every=3_000):
        stores.build.drain(quiet_seconds=HOUR)
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
    assert stores.build.drain(quiet_seconds=0).shown == len(incomplete)
    assert stores.catalog.counts() == (len(rows), 0)
    # Once listed, it stays listed, even with a long quiet time again.
    stores.build.everything(quiet_seconds=HOUR)
    assert stores.catalog.counts() == (len(rows), 0)


def test_a_grab_survives_the_builds(stores: Stores) -> None:
    batches = batches_of_generated(stores, 8_000, seed=5, every=2_500)
    next(batches)
    stores.build.drain(quiet_seconds=0)
    early = set(catalog_rows(stores))
    for guid in early:
        stores.catalog.grab(guid)
    for _ in batches:
        stores.build.drain(quiet_seconds=0)
    stores.build.everything(quiet_seconds=0)
    kept = early & set(catalog_rows(stores))
    assert len(kept) > 5
    for guid in kept:
        row = stores.catalog.row(guid)
        assert row is not None
        assert row.item.grabs == 1


# A catalog of realistic size for the planner: releases of many posters over a
# year (a tenth under a posting tool's shared From), catalog rows of most, and
# statistics taken, as autovacuum would have them.
_REALISTIC = """
    INSERT INTO releases (key, name, head_name, poster, groups, posted, latest, files_announced)
    SELECT decode(md5(n::text), 'hex'), 'r' || n, 'r' || n,
           CASE WHEN n %% 10 = 0 THEN 'yenc@power-post.org' ELSE 'poster' || (n %% 3000) END,
           ARRAY['alt.binaries.test'], 1700000000 + n * 300, 1700000000 + n * 300 + 900, 10
    FROM generate_series(1, %(releases)s) AS n;
    INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups, posted,
                         completion, probe_candidate, sources)
    SELECT md5(n::text), 'r' || n, 'r ' || n, 2000, 1000, 10, 'poster' || (n %% 3000),
           ARRAY['alt.binaries.test'], 1700000000 + n * 300, 1, false,
           ARRAY[decode(md5(n::text), 'hex')]
    FROM generate_series(1, %(releases)s, 2) AS n;
    INSERT INTO release_times (key, poster, files_announced, posted, latest)
    SELECT key, poster, files_announced, posted, latest FROM releases;
    ANALYZE releases; ANALYZE release_times; ANALYZE catalog; ANALYZE catalog_keys;
"""


def _fill_realistic(conn: psycopg.Connection[Any], releases: int) -> None:
    """`_REALISTIC`'s catalog of `releases` releases, analysed."""
    for statement in _REALISTIC.split(";"):
        if statement.strip():
            conn.execute(statement, {"releases": releases})


def _plan(stores: Stores, statement: str, params: tuple[object, ...] | dict[str, object]) -> str:
    with stores.catalog.pool.connection() as conn:
        cursor = psycopg.ClientCursor(conn)
        rows = cursor.execute("EXPLAIN " + statement, params).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def test_the_build_reads_what_a_batch_touched_through_indexes_on_a_realistic_catalog(
    stores: Stores,
) -> None:
    from usenet_indexer.store import catalog as sql

    releases = 100_000
    with stores.catalog.pool.connection() as conn:
        _fill_realistic(conn, releases)
    # A batch's worth of keys and windows: 0.2% of the catalog (a 10M run's batches
    # touched ~1,600 keys; a real catalog holds millions of releases).
    keys = [hashlib.md5(str(n).encode()).digest() for n in range(1000, releases, 500)]
    posters = [f"poster{n % 3000}" for n in range(1000, releases, 500)]
    lows = [1_700_000_000 + n * 300 - 1800 for n in range(1000, releases, 500)]
    highs = [low + 3600 + 900 for low in lows]
    scope = {"keys": keys, "lows": lows[:20], "highs": highs[:20]}
    plans = {
        "spans": _plan(stores, sql._SPANS, (keys,)),
        "rows": _plan(stores, sql._ROW_KEYS, (keys,)),
        "windows": _plan(stores, sql._WINDOW_KEYS, (posters, lows, highs)),
        # Under a posting tool's From: a release only with a chunk near the window.
        "windows near runs": _plan(
            stores, sql._WINDOW_KEYS_NEAR_RUNS, (["yenc@power-post.org"] * len(lows), lows, highs)
        ),
        "album windows": _plan(
            stores,
            sql._ALBUM_WINDOW_KEYS_NEAR_RUNS,
            (["yenc@power-post.org"] * len(lows), [10] * len(lows), lows, highs),
        ),
        # A second poster's chunks under another poster's key (migration 0047).
        "others windows": _plan(stores, sql._OTHERS_WINDOW_KEYS, (posters, lows, highs)),
        "others album windows": _plan(
            stores,
            sql._OTHERS_ALBUM_WINDOW_KEYS,
            (["yenc@power-post.org"] * len(lows), [10] * len(lows), lows, highs),
        ),
        # A pending build's: the rows of a tool's From near its batch only (Scope).
        "scoped rows": _plan(stores, sql._SCOPED_ROW_KEYS, scope),
        "row spans": _plan(stores, sql._ROW_SPANS, scope),
        "changed": _plan(stores, sql._CHANGED_OF, (keys,)),
        "fragments": _plan(stores, sql._FRAGMENTS_OF, (keys,)),
        "fragment ids": _plan(stores, sql._FRAGMENT_IDS_OF, (keys,)),
    }
    with stores.catalog.pool.connection() as conn, conn.transaction():
        conn.execute(sql._CATALOG_TEMP)
        plans["prune"] = _plan_in(conn, sql._CATALOG_PRUNE_OF, (keys,))
        # The rows a build made again, some under guids the catalog has.
        conn.execute("INSERT INTO catalog_new SELECT * FROM catalog ORDER BY id LIMIT 300")
        conn.execute("ANALYZE catalog_new")
        plans["held rows"] = _plan_in(conn, sql._HELD_ROWS, (keys,))
        # What a pending build made across its scope's edge, and beyond it.
        conn.execute(sql._CATALOG_OUT_TEMP)
        conn.execute("INSERT INTO catalog_out SELECT * FROM catalog ORDER BY id DESC LIMIT 30")
        conn.execute("ANALYZE catalog_out")
        skipped = {"skipped": [hashlib.md5(str(n).encode()).hexdigest() for n in range(1, 600, 3)]}
        plans["scoped prune"] = _plan_in(conn, sql._CATALOG_PRUNE_SCOPED, {**scope, **skipped})
        plans["crossing changed"] = _plan_in(conn, sql._OUT_CHANGED, ())
        plans["skipped changed"] = _plan_in(conn, sql._SKIPPED_CHANGED, {**scope, **skipped})
    # The batch's keys pending, as a stored batch marks them: which shards they
    # are in, which of them a builder's shards hold, and which have no release.
    with stores.catalog.pool.connection() as conn:
        conn.execute("INSERT INTO catalog_pending (key) SELECT unnest(%s::bytea[])", (keys,))
        conn.execute("ANALYZE catalog_pending")
    plans["pending shards"] = _plan(stores, sql._PENDING_SHARDS, (0.0,))
    plans["pending in shards"] = _plan(stores, sql._PENDING_IN, ([1, 5, 9],))
    plans["orphans"] = _plan(stores, sql._ORPHANS, ())
    for name, plan in plans.items():
        scanned = re.findall(r"Seq Scan on (\w+)", plan)
        assert not set(scanned) & {
            "releases",
            "release_times",
            "catalog",
            "catalog_keys",
            "fragments",
        }, (name, plan)
    assert "releases_span" in plans["windows"], plans["windows"]
    assert "releases_span" in plans["windows near runs"], plans["windows near runs"]
    assert "release_times_key" in plans["windows near runs"], plans["windows near runs"]
    assert "releases_span" in plans["album windows"], plans["album windows"]
    assert "release_times_span" in plans["others windows"], plans["others windows"]
    assert "release_times_span" in plans["others album windows"], plans["others album windows"]
    assert "catalog_keys_pkey" in plans["rows"], plans["rows"]
    assert "catalog_pkey" in plans["rows"], plans["rows"]
    for name in ("scoped rows", "row spans", "scoped prune"):
        assert "catalog_keys_pkey" in plans[name], (name, plans[name])
        assert "catalog_pkey" in plans[name], (name, plans[name])
    assert "catalog_guid_key" in plans["crossing changed"], plans["crossing changed"]
    assert "catalog_guid_key" in plans["skipped changed"], plans["skipped changed"]
    assert "catalog_guid_key" in plans["held rows"], plans["held rows"]
    assert "hashed SubPlan" in plans["held rows"], plans["held rows"]


def test_a_large_closure_reads_its_keys_dates_by_key_not_by_hashing_every_date(
    stores: Stores,
) -> None:
    # Late in a long run one closure round reads thousands of keys' spans (5k of a
    # 242k-release catalog at 40M generated lines): release_times is then read key
    # by key through its index, never hashed whole (that grows with the catalog).
    from usenet_indexer.store import catalog as sql

    releases = 100_000
    with stores.catalog.pool.connection() as conn:
        _fill_realistic(conn, releases)
    # 5% of the stored releases, and as many keys that are not stored (repost keys).
    keys = [hashlib.md5(str(n).encode()).digest() for n in range(1, releases, 40)]
    keys += [hashlib.md5(str(n).encode()).digest() for n in range(releases + 1, 2 * releases, 40)]
    plan = _plan(stores, sql._SPANS, (keys,))
    assert "Seq Scan on release_times" not in plan, plan
    assert "release_times_key" in plan, plan
    spans = stores.catalog.spans(keys)
    assert len(spans) == len(keys) // 2
    assert all(span.times for span in spans.values()), "every stored key has its dates"


def test_the_builds_look_ups_stay_on_their_indexes_when_run_again_and_again(
    stores: Stores,
) -> None:
    # As the build runs them: server-side parameters, prepared once they have run
    # five times (psycopg), on a catalog the size of a 1M-line run's.
    from usenet_indexer.store import catalog as sql

    with stores.catalog.pool.connection() as conn:
        _fill_realistic(conn, 7_000)
        for size in (3, 40, 200, 1, 12, 600, 40, 5, 40, 40):
            keys = [hashlib.md5(str(n).encode()).digest() for n in range(1, 7_000, 7_000 // size)]
            conn.execute(sql._SPANS, (keys,), prepare=True).fetchall()
            conn.execute(sql._ROW_KEYS, (keys,), prepare=True).fetchall()
        plans = conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        ).fetchall()
        assert len(plans) == 2, plans
        for statement, generic, custom in plans:
            assert (generic, custom) == (0, 10), statement


def _plan_in(
    conn: psycopg.Connection[Any], statement: str, params: tuple[object, ...] | dict[str, object]
) -> str:
    rows = psycopg.ClientCursor(conn).execute("EXPLAIN " + statement, params).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def test_the_catalog_lag_is_read_through_an_index_not_a_scan_of_the_pending_keys(
    stores: Stores,
) -> None:
    # The coordinator reads the oldest pending key's age about once a second
    # (store/builds.py `_BEHIND`, the batches' pacing and /metrics); batches and
    # builds churn catalog_pending, and a scan of it cost 2.6 ms a read at 20M
    # articles. Migration 0040's index on `since` answers it at once.
    from usenet_indexer.store import builds

    with stores.catalog.pool.connection() as conn:
        conn.execute(
            "INSERT INTO catalog_pending (key, shard, since) SELECT decode(md5(i::text), 'hex'),"
            " i % 64, now() - make_interval(secs => i) FROM generate_series(1, 20000) AS i"
        )
        conn.execute("ANALYZE catalog_pending")
    plan = _plan(stores, builds.BEHIND, ())
    assert "catalog_pending_since" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert stores.builds.behind() == pytest.approx(20000, abs=60)


def test_two_builders_share_the_pending_keys_and_make_what_one_whole_build_makes(
    stores: Stores,
) -> None:
    for _ in batches_of_generated(stores, 12_000, seed=5, every=700, profile="posting-tools"):
        pass
    pending = len(stores.catalog.pending())
    builders = [CatalogBuild(stores.catalog.pool), CatalogBuild(stores.catalog.pool)]
    taken: list[list[Built]] = [[], []]
    start = threading.Barrier(2)

    def build(at: int) -> None:
        start.wait()
        # Each builds until nothing is pending (a busy answer: the other holds a
        # shard this one's keys reach; it asks again). Bounded: never a hang.
        for _ in range(10_000):
            built = builders[at].pending(quiet_seconds=0)
            taken[at].append(built)
            if not built.more and not built.busy:
                return
        raise AssertionError("the builders never got through the pending keys")

    threads = [threading.Thread(target=build, args=(at,)) for at in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not stores.catalog.pending()
    # Both built, and no pending key was taken twice.
    assert all(any(b.pending for b in builds) for builds in taken)
    assert sum(b.pending for builds in taken for b in builds) == pending
    followed = catalog_rows(stores)
    stores.build.everything(quiet_seconds=0)
    assert catalog_rows(stores) == followed


def test_the_keys_a_batch_marks_are_pending_until_a_build_takes_them(stores: Stores) -> None:
    batches = batches_of_generated(stores, 4_000, seed=6, every=2_000)
    assert not stores.catalog.pending()
    next(batches)
    with stores.catalog.pool.connection() as conn:
        marked = conn.execute("SELECT count(DISTINCT release_key) FROM fragments").fetchone()
    assert marked is not None
    assert len(stores.catalog.pending()) == marked[0] > 0
    stores.build.drain(quiet_seconds=HOUR)
    assert not stores.catalog.pending()


def test_a_builders_shard_locks_hold_no_transaction_open(stores: Stores) -> None:
    # A transaction left open on the lock's connection while the build works on
    # others is ended by idle_in_transaction_session_timeout, and the lock with it
    # (a 10M run's long build lost its lock so, and the coordinator its worker).
    with stores.catalog.shards() as locks:
        assert locks.try_lock([1, 2]) == {1, 2}
        assert locks._conn.info.transaction_status == TransactionStatus.IDLE
        with stores.catalog.shards() as other:
            assert other.try_lock([2, 3]) == {3}
    with stores.catalog.shards() as again:
        assert again.try_lock([1, 2, 3]) == {1, 2, 3}


def test_a_pending_key_no_release_has_is_built_from_its_rows_sources(stores: Stores) -> None:
    # A probe's outcome marks the key of the generation it probed; a repost merged
    # from its first key's chunks has no stored release of its own (its row's guid).
    for _ in batches_of_generated(stores, 6_000, seed=4, every=3_000):
        pass
    stores.build.drain(quiet_seconds=0)
    before = catalog_rows(stores)
    guid = next(iter(before))
    orphan = bytes.fromhex(guid)
    with stores.catalog.pool.connection() as conn:
        conn.execute("DELETE FROM catalog_pending")
        assert conn.execute("SELECT count(*) FROM releases WHERE key = %s", (orphan,)).fetchone()
        conn.execute("DELETE FROM releases WHERE key = %s", (orphan,))
        conn.execute("INSERT INTO catalog_pending (key) VALUES (%s)", (orphan,))
    built = stores.build.drain(quiet_seconds=0)
    assert not stores.catalog.pending()  # never left waiting (--exit-when-done waits for it)
    assert built.pending == 1


def album_lines(artist: str, album: str, tracks: int, *, at: int) -> list[str]:
    """An album as PowerPost posts it with its defaults: one file per track, no head.

    `(????) [05/13] - "05-artist-title.mp3" yEnc (1/4)` under its default From,
    the files in the order of their names (the playlist, cover and nfo first).
    """
    names = sorted(
        [f"00-{artist}-{album}.{ext}" for ext in ("jpg", "m3u", "nfo")]
        + [f"{n:02}-{artist}-track_{n}.mp3" for n in range(1, tracks + 1)]
    )
    lines = []
    for i, name in enumerate(names, 1):
        for k in range(1, 5):
            date = at + 30 * i + k
            lines.append(
                f'(????) [{i:02}/{len(names)}] - "{name}" yEnc ({k}/4)'
                f"\tYenc@power-post.org (Yenc-PP-A&A)\t{formatdate(date)}"
                f"\t<{date}.{i}.{k}@eu.news.astraweb.com>\t\t250000\t1950"
            )
    return lines


def built_batch_by_batch(stores: Stores, lines: list[str], every: int) -> list[int]:
    """Number the lines, store them in batches of `every` lines and build after each
    batch, as the coordinator's builder does; the keys each build merged."""
    numbered = [f"{n}\t{line}".encode() for n, line in enumerate(lines, 1000)]
    return [
        stores.build.drain(quiet_seconds=0).keys
        for _ in batches_of_lines(stores, "alt.binaries.sounds.mp3", numbered, every)
    ]


def test_an_album_stored_in_two_batches_is_one_row_and_the_next_album_another(
    stores: Stores,
) -> None:
    start = 1_764_000_000
    first = album_lines("massive_attack", "mezzanine-web-1998-grp", 10, at=start)
    second = album_lines("portishead", "dummy-web-1994-grp", 10, at=start + 30 * 14)
    # Cut inside each album: the catalog takes in each batch as it comes.
    built_batch_by_batch(stores, [*first, *second], every=23)
    rows = catalog_rows(stores)
    assert sorted((row[3], row[4]) for row in rows.values()) == [
        (13, "Yenc@power-post.org (Yenc-PP-A&A)"),
        (13, "Yenc@power-post.org (Yenc-PP-A&A)"),
    ]
    assert sorted(str(row[0]) for row in rows.values()) == [
        "00-massive_attack-mezzanine-web-1998-grp",
        "00-portishead-dummy-web-1994-grp",
    ]
    stores.build.everything(quiet_seconds=0)
    assert catalog_rows(stores) == rows


def rar_lines(name: str, volumes: int, *, at: int) -> list[str]:
    """A rar upload as PowerPost posts it with its defaults: its volumes and par2
    under the default From, no head (`(????) [03/12] - "name.part03.rar" yEnc (1/2)`)."""
    names = [f"{name}.par2", *(f"{name}.part{v:02}.rar" for v in range(1, volumes + 1))]
    lines = []
    for i, file_name in enumerate(names, 1):
        for k in range(1, 3):
            date = at + 20 * i + k
            lines.append(
                f'(????) [{i:02}/{len(names)}] - "{file_name}" yEnc ({k}/2)'
                f"\tYenc@power-post.org (Yenc-PP-A&A)\t{formatdate(date)}"
                f"\t<{date}.{i}.{k}.{name}@powerpost2000AA.local>\t\t400000\t3100"
            )
    return lines


def test_an_albums_track_brings_back_only_album_parts_of_a_busy_default_from(
    stores: Stores,
) -> None:
    # Under PowerPost's default From, thousands of unrelated uploads an hour:
    # link joins only an album's parts there, so a batch with an album's track
    # must not merge again the rar uploads posted beside it (issue 25: the
    # build's cost follows the batch), and the album is still one row.
    start = 1_764_000_000
    rars = [
        line
        for n in range(12)
        for line in rar_lines(f"Some.Movie.{n}.2019.1080p.BluRay.x264-GRP", 4 + n % 3, at=start + n)
    ]
    album = album_lines("massive_attack", "mezzanine-web-1998-grp", 10, at=start + 600)
    # The album's first files with the rars, the rest later.
    merged = built_batch_by_batch(stores, [*rars, *album], every=len(rars) + 20)
    with stores.catalog.pool.connection() as conn:
        marked = conn.execute("SELECT name FROM releases WHERE no_album").fetchall()
    assert sorted(name for (name,) in marked) == sorted(
        f"Some.Movie.{n}.2019.1080p.BluRay.x264-GRP" for n in range(12)
    )
    rows = catalog_rows(stores)
    albums = [row for row in rows.values() if str(row[0]).startswith("00-massive_attack")]
    assert [row[3] for row in albums] == [13]
    # The second batch holds only album files: its build merged the album's
    # parts (the tracks are a key each), none of the twelve rar uploads.
    assert merged[1] <= 13, merged
    stores.build.everything(quiet_seconds=0)
    assert catalog_rows(stores) == rows


def test_an_album_posted_again_a_day_later_does_not_bring_back_the_day_between(
    stores: Stores,
) -> None:
    # The same album uploaded again under PowerPost's default From a day later:
    # the same file names, so the same keys. Its second post's build merges
    # the album's keys, not another album of that M posted in between
    # (issue 25: a poster's uploads of other hours are not read again).
    start = 1_764_000_000
    first = album_lines("massive_attack", "mezzanine-web-1998-grp", 10, at=start)
    between = album_lines("portishead", "dummy-web-1994-grp", 10, at=start + 12 * 3600)
    again = album_lines("massive_attack", "mezzanine-web-1998-grp", 10, at=start + 24 * 3600)
    merged = built_batch_by_batch(stores, [*first, *between, *again], every=len(first))
    assert merged[1] == merged[2] == merged[0], merged  # the album's own keys
    rows = catalog_rows(stores)
    assert sorted((str(row[0]), row[3]) for row in rows.values()) == [
        ("00-massive_attack-mezzanine-web-1998-grp", 13),
        ("00-massive_attack-mezzanine-web-1998-grp", 13),
        ("00-portishead-dummy-web-1994-grp", 13),
    ]
    stores.build.everything(quiet_seconds=0)
    assert catalog_rows(stores) == rows


def test_no_automatic_garbage_collection_runs_while_a_build_merges(stores: Stores) -> None:
    # A build makes many objects and no cycles: collections during it would only walk
    # the process's heap (gcpolicy). They run again once it is done.
    collections: list[str] = []
    builder = threading.get_ident()

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and threading.get_ident() == builder:
            collections.append(phase)

    batches = batches_of_generated(stores, 20_000, seed=4, every=20_000, profile="posting-tools")
    next(batches)
    assert gc.isenabled()
    gc.callbacks.append(seen)
    try:
        built = stores.build.drain(0)
    finally:
        gc.callbacks.remove(seen)
    assert built.keys > 100
    # At most the one each build's end lets happen (a drain builds SHARDS // MAX_SHARDS
    # times at most); a build with the collector on met 11 here.
    assert len(collections) <= SHARDS // MAX_SHARDS
    assert gc.isenabled()


def posted_daily(tags: str) -> list[list[bytes]]:
    """A poster's upload of the same files (test_reposts' FILES) posted again every day,
    new message-ids each time (tagged by each of `tags`): one release key, a generation
    an upload. Each upload's overview lines, in order."""
    from test_indexer import upload
    from test_reposts import FILES, HEAD, dated

    day = 24 * 60 * 60 * 10  # articles: `dated` gives a second every ten
    return [
        [dated(text).encode() for text in upload(1_000 + n * day, HEAD, FILES, tag=f"{tag}.")]
        for n, tag in enumerate(tags)
    ]


def test_a_backfill_leaves_every_stored_uploads_guid_and_nzb(stores: Stores) -> None:
    """Four uploads of one release key (a poster's same files posted again days apart),
    the later three indexed and built first, grabbed, then the earliest backfilled. A
    grab's guid must still give the upload it gave: every stored upload keeps its row,
    grab and NZB, the release key's guid among them (its row's anchor: migration 0044);
    the backfilled earliest upload gets a guid of its own."""
    uploads = posted_daily("abcd")

    def by_upload() -> dict[str, tuple[str, list[str]]]:
        """Each row's upload (the tag of its NZB's message-ids): its guid and message-ids."""
        found = {}
        for guid in catalog_rows(stores):
            row = stores.catalog.row(guid)
            assert row is not None
            release = stores.build.release(row)
            assert release is not None
            ids = [m for f in release.files for _, m, _ in f.segments]
            [tag] = {m[:1] for m in ids}
            found[tag] = (guid, ids)
        return found

    for _ in batches_of_lines(stores, "alt.binaries.test", [*chain(*uploads[1:])], 3):
        pass
    stores.build.drain(quiet_seconds=0)
    before = by_upload()
    assert sorted(before) == ["b", "c", "d"]
    for guid, _ in before.values():
        stores.catalog.grab(guid)
    for _ in batches_of_lines(stores, "alt.binaries.test", uploads[0], 10_000):
        pass
    stores.build.drain(quiet_seconds=0)
    after = by_upload()
    assert sorted(after) == ["a", "b", "c", "d"]
    assert {tag: after[tag] for tag in "bcd"} == before
    for tag in "bcd":
        row = stores.catalog.row(after[tag][0])
        assert row is not None
        assert row.item.grabs == 1
    assert after["a"][0] not in {guid for guid, _ in before.values()}
    stores.build.everything(quiet_seconds=0)
    assert by_upload() == after

    # Exported as the catalog keys them, and (pinned=False) as a merge of the stored
    # chunks alone keys them, as `uidx index` does (bench-edge compares those): the
    # earliest upload under the release key, each later one a repost of it.
    def uploads_by_key(releases: list[CatalogRelease]) -> dict[bytes, tuple[str, bool]]:
        return {
            r.key: ("".join(sorted({m[:1] for f in r.files for _, m, _ in f.segments})),
                    r.repost_of is not None)
            for r in releases
        }  # fmt: skip

    pinned = uploads_by_key(stores.build.export())
    assert {key.hex() for key in pinned} == {guid for guid, _ in after.values()}
    unpinned = uploads_by_key(stores.build.export(pinned=False))
    [release_key] = [key for key, (_, repost) in unpinned.items() if not repost]
    assert unpinned[release_key] == ("a", False)
    assert pinned[release_key] == ("b", True)  # the row's guid the backfill kept


def test_a_catalog_of_positional_generation_keys_is_built_again_under_their_own(
    stores: Stores,
) -> None:
    """Migration 0043: rows of later generations stored under the n-th repost key (as
    builds before it keyed them) are pending again, and the build that follows makes
    the rows a whole rebuild makes; the earliest generation keeps its guid and grab."""
    from usenet_indexer.core.reposts import repost_key
    from usenet_indexer.store.migrate import load_migrations

    lines = [*chain(*posted_daily("abcd"))]
    for _ in batches_of_lines(stores, "alt.binaries.test", lines, 3):
        pass
    stores.build.drain(quiet_seconds=0)
    built = catalog_rows(stores)
    assert len(built) == 4
    by_date = sorted(built, key=lambda guid: stores.catalog.row(guid).item.posted)  # type: ignore[union-attr]
    first = bytes.fromhex(by_date[0])
    positional = [first]
    for _ in by_date[1:]:
        positional.append(repost_key(positional[-1]))
    stores.catalog.grab(by_date[0])
    with stores.catalog.pool.connection() as conn:
        for guid, old in zip(by_date[1:], positional[1:], strict=True):
            conn.execute("UPDATE catalog SET guid = %s WHERE guid = %s", (old.hex(), guid))
        conn.execute("DELETE FROM catalog_pending")
        [migration] = [m for m in load_migrations() if m.version == 43]
        conn.execute(migration.sql)
    stores.build.drain(quiet_seconds=0)
    followed = catalog_rows(stores)
    assert set(followed) == set(built)
    assert not {old.hex() for old in positional[1:]} & set(followed)
    row = stores.catalog.row(by_date[0])
    assert row is not None
    assert row.item.grabs == 1
    stores.build.everything(quiet_seconds=0)
    assert catalog_rows(stores) == followed


def test_a_generation_a_new_upload_leaves_as_it_was_is_not_written_again(
    stores: Stores,
) -> None:
    """A new upload under a release key (a repost a day later) changes its key's chunks,
    not the earlier uploads' rows: those are neither written again (no new row version:
    its indexes' entries, the catalog_keys trigger) nor dated as changed."""
    uploads = posted_daily("abcd")

    def versions() -> dict[str, tuple[str, object]]:
        with stores.catalog.pool.connection() as conn:
            rows = conn.execute("SELECT guid, xmin::text, changed_at FROM catalog").fetchall()
        return {str(guid): (str(version), changed) for guid, version, changed in rows}

    for _ in batches_of_lines(stores, "alt.binaries.test", [*chain(*uploads[:3])], 3):
        pass
    stores.build.drain(quiet_seconds=0)
    before = versions()
    assert len(before) == 3
    for _ in batches_of_lines(stores, "alt.binaries.test", uploads[3], 10_000):
        pass
    built = stores.build.drain(quiet_seconds=0)
    assert built.pending == 1  # the release key: the new upload came under it
    after = versions()
    assert len(after) == 4
    assert {guid: after[guid] for guid in before} == before


def test_what_probes_found_of_a_positional_generation_key_survives_migration_0043(
    stores: Stores,
) -> None:
    """A repost's row under its positional key (the release key's repost
    key, no stored key: each upload indexed in a range of its own), its par2 probed
    under that key (as builds before 0043 queued it: `renames.more_probe` gives the
    row's key) and renamed. Migration 0043 builds it again under a key of its own: what
    the probe found must still name it (a probe is not asked again)."""
    from usenet_indexer.core.reposts import repost_key
    from usenet_indexer.store.migrate import load_migrations

    uploads = posted_daily("ab")
    for lines in uploads:  # a range each: every chunk under the release key
        for _ in batches_of_lines(stores, "alt.binaries.test", lines, 10_000):
            pass
    stores.build.drain(quiet_seconds=0)
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute("SELECT guid, posted FROM catalog ORDER BY posted").fetchall()
        assert len(rows) == 2
        first, later = (str(guid) for guid, _ in rows)
        positional = repost_key(bytes.fromhex(first))
        assert not conn.execute("SELECT FROM releases WHERE key = %s", (positional,)).fetchone()
        # The catalog as a build before 0043 left it, and the probe it queued.
        conn.execute("UPDATE catalog SET guid = %s WHERE guid = %s", (positional.hex(), later))
        conn.execute("DELETE FROM catalog_pending")
    par2 = "b.show.s01e01.par2.1@ex"
    queue = ProbeStore(stores.catalog.pool)
    queue.add_more([(positional, par2, "show.s01e01.par2")])
    jobs = [j for j in queue.take(100, 600.0) if j.release_key == positional]
    assert [j.message_id for j in jobs] == [par2]
    real = "Real.Show.S01E01.1080p.WEB-DL-GRP"
    files = (f"{real}.part1.rar", f"{real}.part2.rar", f"{real}.par2")
    assert queue.record(jobs[0], Outcome.RENAMED, name=real, files=files, sizes=(0, 0, 0))
    with stores.catalog.pool.connection() as conn:
        conn.execute("DELETE FROM catalog_pending")
        [migration] = [m for m in load_migrations() if m.version == 43]
        conn.execute(migration.sql)
    stores.build.drain(quiet_seconds=0)
    with stores.catalog.pool.connection() as conn:
        names = {str(g): str(n) for g, n in conn.execute("SELECT guid, name FROM catalog")}
    assert len(names) == 2
    assert positional.hex() not in names
    assert names[first] == "Show.S01E01.1080p.WEB-DL-GRP"  # test_reposts' HEAD
    [name] = [n for g, n in names.items() if g != first]
    assert name == real, "what the probe found of the repost is lost with its old key"
    # ... and nothing asks the same segment again under the new key.
    with stores.catalog.pool.connection() as conn:
        asked = conn.execute(
            "SELECT count(*) FROM probe_candidates WHERE message_id = %s", (par2,)
        ).fetchone()
    assert asked == (1,)


def two_posters_of_one_name() -> list[bytes]:
    """Two posters upload one scene release at once under Nyuu's default subject (no
    head: its files are keyed by their names, not by poster, subject.py's headless
    basis), their articles interleaved, each its own article sizes and message-ids."""
    date = formatdate(1_764_500_000, usegmt=True)
    lines = []
    number = 1000
    for k in range(1, 11):
        for poster, size in (
            ("amy <amy@example.org>", 700_000),
            ("bob <bob@example.net>", 500_000),
        ):
            for i in (1, 2):
                name = f"Some.Movie.2020.1080p.BluRay.x264-GRP.part0{i}.rar"
                fields = [
                    str(number), f'[{i}/2] - "{name}" yEnc ({k}/10)', poster, date,
                    f"<{poster[:3]}.{i}.{k}@example>", "", str(size), str(size // 128),
                    f"Xref: news.example.com alt.binaries.test:{number}",
                ]  # fmt: skip
                lines.append("\t".join(fields).encode())
                number += 1
    return lines


@pytest.mark.parametrize("every", [1000, 7])
def test_two_posters_uploads_of_one_name_keep_their_posters_whatever_the_batch_cuts(
    stores: Stores, every: int
) -> None:
    # What `uidx index` makes of the lines (one merge of their chunks as indexed), and
    # what the catalog makes of them batch by batch: each upload its own release under
    # its own poster, no repost of the other. bench-edge at 4M lines found 18 such
    # releases (the generator's Latin-1 subjects of common names, by different posters).
    lines = two_posters_of_one_name()
    indexer = RangeIndexer(group="alt.binaries.test", first=1000)
    indexer.add_data(b"\n".join(lines) + b"\n", 1000 + len(lines))
    merger = ReleaseMerger()
    merger.add_all(indexer.finish().releases)

    def uploads(releases: list[CatalogRelease]) -> list[tuple[str, bool, set[str]]]:
        return sorted(
            (r.poster, r.repost_of is not None, {s[1][:3] for f in r.files for s in f.segments})
            for r in releases
            if r.dropped is None
        )

    wanted = uploads(list(merger.releases()))
    assert wanted == [
        ("amy <amy@example.org>", False, {"amy"}),
        ("bob <bob@example.net>", False, {"bob"}),
    ]
    for _ in batches_of_lines(stores, "alt.binaries.test", lines, every):
        stores.build.drain(quiet_seconds=0)
    assert uploads(stores.build.export()) == wanted
