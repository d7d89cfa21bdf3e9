"""The whole catalog built and exported a slice at a time (coordinator/catalog_whole.py)
is what `CatalogBuild.everything` and `export` make merging everything at once.

Generated lines (both profiles: reposts, albums, floods, interleaved uploads)
are stored as an edge would, probes' findings recorded for the candidates the
builds asked, and then the whole catalog is built both ways from the same
stored state and compared row by row, and exported both ways and compared
line by line; the slices are small, so that a catalog of a few thousand
articles is cut into many.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import attrs
import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool
from test_catalog_build import (
    HOUR,
    batches_of_generated,
    batches_of_lines,
    catalog_rows,
    probes_found,
)
from test_catalog_windows import built_and_rebuilt, posted
from test_range_scale import _rows_read

from usenet_indexer.commands.catalog import Progress
from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_whole import (
    BUILT,
    DATED,
    EXPORTED,
    PENDING,
    PRUNED,
    WholeCatalog,
)
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core import merge
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.store import arrays
from usenet_indexer.store import catalog as catalog_sql
from usenet_indexer.store.batches import ensure_partition
from usenet_indexer.store.pool import open_pool
from usenet_indexer.testing.postgres import PgServer

# A slice of a few releases: the catalogs here are cut into dozens of them.
SMALL_SLICE = 3_000
CLI_SECONDS = 120
# How a whole build deleted the rows of no stored key before it went a page at a
# time: one statement over the whole catalog, each row's keys looked for in every
# group's partition of fragments. The oracle of the pages.
PRUNE_IN_ONE = """
    DELETE FROM catalog AS c
    WHERE NOT EXISTS (SELECT FROM fragments AS f WHERE f.release_key = ANY(c.sources))
"""


def stored(stores: Stores, articles: int, seed: int, profile: str, *, found: bool) -> None:
    """Generated lines stored batch by batch (no build between), and, with `found`, a
    whole build's probe candidates done (their keys pending again)."""
    for _ in batches_of_generated(stores, articles, seed=seed, every=700, profile=profile):
        pass
    if found:
        stores.build.everything(quiet_seconds=0)
        assert len(probes_found(stores)) > 5


def exported_lines(releases: Iterator[CatalogRelease] | list[CatalogRelease]) -> list[bytes]:
    return [orjson.dumps(r.to_json()) for r in releases]


def in_slices(pool: ConnectionPool, segments: int = SMALL_SLICE, most: int = 0) -> WholeCatalog:
    """A whole build or export in slices of `segments`, growing to at most `most` where
    their closures bring more (by default they do not grow: a catalog of a few thousand
    articles is cut into many slices)."""
    return WholeCatalog(pool, slice_segments=segments, most_segments=most or segments)


def rebuilt_both_ways(
    stores: Stores, quiet_seconds: float, whole: WholeCatalog | None = None
) -> tuple[dict[str, tuple[object, ...]], dict[str, tuple[object, ...]]]:
    """The rows `everything` makes from the stored state, and those the slices make
    from the same state with an empty catalog."""
    stores.build.everything(quiet_seconds)
    rows = catalog_rows(stores)
    with stores.catalog.pool.connection() as conn:
        conn.execute("DELETE FROM catalog")
    (whole or in_slices(stores.catalog.pool)).build(quiet_seconds)
    assert not stores.catalog.pending()
    return rows, catalog_rows(stores)


@pytest.mark.parametrize("profile", ["default", "posting-tools"])
def test_a_whole_build_slice_by_slice_makes_what_one_whole_merge_makes(
    stores: Stores, profile: str
) -> None:
    stored(stores, 40_000, 3, profile, found=True)
    whole, sliced = rebuilt_both_ways(stores, quiet_seconds=0)
    assert len(whole) > 100
    assert sliced == whole
    # Again over the catalog it made: nothing changes.
    in_slices(stores.catalog.pool).build(quiet_seconds=0)
    assert catalog_rows(stores) == whole


@pytest.mark.parametrize("seed", [3, 10])
def test_after_the_grouping_changed_a_whole_build_makes_the_new_catalog(
    stores: Stores, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An upgrade changes how parts are joined into uploads: the catalog's rows are
    # those the old code made (here: no part joined to another), and `uidx catalog
    # build` is run to make them again. (The posting tools' uploads come in parts.)
    stored(stores, 40_000, seed, "posting-tools", found=True)
    with monkeypatch.context() as old:
        old.setattr(merge, "link", lambda parts: [[part.key] for part in parts])
        stores.build.everything(quiet_seconds=0)
        before = catalog_rows(stores)
    stores.build.everything(quiet_seconds=0)
    whole = catalog_rows(stores)
    assert len(before) > len(whole)  # parts joined now
    # The export of the new catalog's rows (read after it: a release keeps the key a
    # row of it has, `merge.Pins`; one no row shows, dropped, is keyed as if none did).
    exported = exported_lines(stores.build.export())
    in_slices(stores.catalog.pool).build(quiet_seconds=0)
    assert catalog_rows(stores) == whole
    sliced = in_slices(stores.catalog.pool).export()
    assert sorted(exported_lines(sliced)) == sorted(exported)


def test_a_whole_build_shows_an_incomplete_release_once_quiet_as_a_whole_merge_does(
    stores: Stores,
) -> None:
    stored(stores, 12_000, 5, "default", found=False)
    whole, sliced = rebuilt_both_ways(stores, quiet_seconds=HOUR)
    assert {row[-1] for row in whole.values()} == {True, False}  # complete, and waiting
    assert sliced == whole


@pytest.mark.parametrize("profile", ["default", "posting-tools"])
def test_a_whole_export_slice_by_slice_writes_what_one_whole_merge_makes(
    stores: Stores, profile: str
) -> None:
    stored(stores, 40_000, 4, profile, found=True)
    stores.build.drain(quiet_seconds=0)
    whole = exported_lines(stores.build.export())
    sliced = list(in_slices(stores.catalog.pool).export())
    # The same lines; all oldest first (`export` lists those a probe found
    # executables in or renamed first, each part oldest first).
    assert sorted(exported_lines(sliced)) == sorted(whole)
    assert [r.posted for r in sliced] == sorted(r.posted for r in sliced)
    assert len(whole) > 100


def test_without_findings_a_whole_export_is_the_same_bytes(stores: Stores) -> None:
    stored(stores, 20_000, 6, "posting-tools", found=False)
    whole = exported_lines(stores.build.export())
    assert exported_lines(in_slices(stores.catalog.pool).export()) == whole


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(1, 1 << 20),
    profile=st.sampled_from(["default", "posting-tools"]),
    segments=st.integers(1, 3_000),  # the catalog's ~3k segments in 1 to thousands
    grow=st.booleans(),  # slices as large as what their closure brought (next_budget)
)
def test_any_catalog_cut_into_any_slices_is_built_and_exported_as_a_whole(
    pg_server: PgServer, tmp_path: Path, seed: int, profile: str, segments: int, grow: bool
) -> None:
    with (
        pg_server.fresh_database() as url,
        open_pool(url, Settings(home=tmp_path, listen="127.0.0.1:0")) as pool,
    ):
        stores = Stores.from_pool(pool)
        stored(stores, 4_000, seed, profile, found=True)
        whole = in_slices(pool, segments, 50 * segments if grow else segments)
        rows, sliced = rebuilt_both_ways(stores, quiet_seconds=0, whole=whole)
        assert sliced == rows
        exported = exported_lines(whole.export())
        assert sorted(exported) == sorted(exported_lines(stores.build.export()))


@pytest.mark.parametrize("order", ["in date order", "the part between last"])
def test_an_upload_filled_in_days_later_is_built_and_exported_whole(
    stores: Stores, order: str
) -> None:
    # test_catalog_windows' case: one generation posted over two days, joined with
    # the nfo part posted with its first run, and not with its poster's part of the
    # day between (link reaches a part's first run: merge._first_run_end).
    day, start = 24 * 3600, 1_764_000_000
    poster = "someone <someone@example.com>"
    head = "Show.Name.S01E01.720p.WEB-GRP"
    first = posted(
        head, poster, [(i, f"s.part{i:02}.rar") for i in (1, 2, 3)], 10, at=start, tag="a"
    ) + posted(
        "Show.Name.S01E01.720p.WEB", poster, [(10, "Show.Name.S01E01.720p.WEB-GRP.nfo")], 10,
        at=start + 600, tag="n",
    )  # fmt: skip
    later = posted(
        head, poster, [(i, f"s.part{i:02}.rar") for i in (4, 5, 9)], 10, at=start + 2 * day, tag="b"
    )
    between = posted(
        "Other.Film.2019.1080p-GRP", poster, [(i, f"f.part{i:02}.rar") for i in (6, 7, 8)], 10,
        at=start + day, tag="c",
    )  # fmt: skip
    parts = [first, between, later] if order == "in date order" else [first, later, between]
    _followed, rebuilt = built_and_rebuilt(stores, parts)
    assert sorted(int(str(row[3])) for row in rebuilt.values()) == [3, 7]
    exported = exported_lines(stores.build.export())
    with stores.catalog.pool.connection() as conn:
        conn.execute("DELETE FROM catalog")
    whole = in_slices(stores.catalog.pool, 1)
    whole.build(quiet_seconds=0)
    assert catalog_rows(stores) == rebuilt
    assert exported_lines(whole.export()) == exported


def test_a_whole_build_fills_in_the_latest_dates_and_deletes_the_rows_of_no_stored_key(
    stores: Stores,
) -> None:
    stored(stores, 12_000, 7, "posting-tools", found=False)
    stores.build.drain(quiet_seconds=0)
    with stores.catalog.pool.connection() as conn:
        dates = conn.execute("SELECT key, latest FROM releases ORDER BY key").fetchall()
        times = conn.execute(
            "SELECT key, posted, latest FROM release_times ORDER BY 1, 2"
        ).fetchall()
        # Stored before the latest dates were kept (migration 0013), and a row whose
        # keys are all gone.
        conn.execute("UPDATE releases SET latest = NULL WHERE get_byte(key, 0) < 128")
        conn.execute("UPDATE release_times SET latest = NULL WHERE get_byte(key, 0) % 2 = 0")
        conn.execute(
            "INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups,"
            " posted, completion, probe_candidate, sources, changed_at, state)"
            " SELECT 'ff' || substr(guid, 3), name, search_name, category, size, files, poster,"
            " groups, posted, completion, false, ARRAY['\\x00'::bytea], changed_at, state"
            " FROM catalog LIMIT 1"
        )
    before = catalog_rows(stores)
    built = in_slices(stores.catalog.pool).build(quiet_seconds=0)
    assert built.pruned >= 1
    after = catalog_rows(stores)
    assert after == {g: row for g, row in before.items() if not g.startswith("ff")}
    with stores.catalog.pool.connection() as conn:
        assert conn.execute("SELECT key, latest FROM releases ORDER BY key").fetchall() == dates
        again = conn.execute("SELECT key, posted, latest FROM release_times ORDER BY 1, 2, 3")
        # A time row's latest date unknown becomes its key's latest (as `everything` has it).
        # (Sorted whole: two chunks of a key may start alike, and the rows' order among
        # them is the table's, which the UPDATEs above move.)
        latest: dict[bytes, int] = {bytes(k): int(v) for k, v in dates}
        assert again.fetchall() == sorted(
            (key, start, latest[key] if key[0] % 2 == 0 else end) for key, start, end in times
        )


def test_a_whole_build_lets_another_builder_work_and_waits_for_what_it_holds(
    stores: Stores,
) -> None:
    stored(stores, 12_000, 8, "posting-tools", found=False)
    stores.build.drain(quiet_seconds=0)
    whole = catalog_rows(stores)
    with stores.catalog.pool.connection() as conn:
        conn.execute("DELETE FROM catalog")
        (shard,) = conn.execute(
            "SELECT hashtext(poster) & 63 FROM releases GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
        ).fetchone() or (0,)
    waits = []
    with stores.catalog.shards() as other:
        # Another builder holds a shard of the catalog's keys.
        assert other.try_lock([shard]) == {shard}

        def wait() -> None:
            # The whole build holds no shard while it waits: the other builder
            # takes any it wants, then gives its own up.
            waits.append(shard)
            assert other.try_lock(range(64)) == set(range(64)) - {shard}
            other.unlock()

        attrs.evolve(in_slices(stores.catalog.pool), wait=wait).build(0)
    assert waits
    assert catalog_rows(stores) == whole


def test_the_commands_report_their_progress_and_write_what_the_whole_merges_make(
    pool: ConnectionPool, stores: Stores, pg_url: str, tmp_path: Path
) -> None:
    stored(stores, 20_000, 9, "default", found=False)
    exported = b"".join(line + b"\n" for line in exported_lines(stores.build.export()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.update(DATABASE_URL=pg_url, UIDX_HOME=str(tmp_path / "home"))

    def uidx(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "usenet_indexer", "catalog", *args],
            env=env, capture_output=True, text=True, timeout=CLI_SECONDS, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stderr

    said = uidx("build", "--quiet-seconds", "0")
    releases = stores.catalog.pool.connection
    with releases() as conn:
        (count,) = conn.execute("SELECT count(*) FROM releases").fetchone() or (0,)
    assert re.search(rf"uidx catalog: 0 of {count:,} \(0%\) releases built", said), said
    assert re.search(rf"uidx catalog: {count:,} of {count:,} \(100%\) releases built", said)
    states = stores.catalog.states()
    rows = states.shown + states.waiting
    last = rf"uidx catalog: {rows:,} of {rows:,} \(100%\) catalog rows checked for a stored key"
    assert re.search(last, said), said
    built = catalog_rows(stores)
    stores.build.everything(quiet_seconds=0)
    assert catalog_rows(stores) == built
    out = tmp_path / "catalog.jsonl"
    said = uidx("export", "--out", str(out))
    assert re.search(rf"uidx catalog: 0 of {count:,} \(0%\) releases exported", said), said
    assert f"releases written to {out}" in said
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(exported).digest()


def test_a_progress_line_is_shown_at_once_then_every_few_seconds_and_when_a_phase_ends() -> None:
    out = io.StringIO()
    now = [100.0]
    progress = Progress(out, clock=lambda: now[0])
    for at, done in ((100.0, 0), (101.0, 10), (102.5, 50), (103.0, 60), (105.0, 80)):
        now[0] = at
        progress(BUILT, done, 200)
    now[0] = 106.0
    progress(BUILT, 200, 200, last=True)
    progress(PENDING, 0, 3)  # the next phase: at once, its rate from its start
    now[0] = 106.5
    progress(PENDING, 3, 3)
    progress(PENDING, 3, 3, last=True)
    progress(PRUNED, 0, 0)
    now[0] = 108.5
    progress(PRUNED, 5_000, 0)
    progress(PRUNED, 5_000, 0, last=True)  # that line was just shown
    assert out.getvalue().splitlines() == [
        "uidx catalog: 0 of 200 (0%) releases built",
        "uidx catalog: 50 of 200 (25%) releases built, 20/s",
        "uidx catalog: 80 of 200 (40%) releases built, 16/s",
        "uidx catalog: 200 of 200 (100%) releases built, 33/s",
        "uidx catalog: 0 of 3 (0%) pending keys built",
        "uidx catalog: 3 of 3 (100%) pending keys built, 6/s",
        "uidx catalog: 0 catalog rows checked for a stored key",
        "uidx catalog: 5,000 catalog rows checked for a stored key, 2,500/s",
    ]


def test_an_upload_of_parts_each_joined_to_the_next_is_exported_whole_from_any_catalog(
    stores: Stores,
) -> None:
    # One poster's upload in four parts (each its own key: another head), each posted
    # 25 minutes after the one before: link joins them all, though a window around one
    # part reaches only its neighbours. Exported before any build (no catalog row
    # holds what was joined), in slices of one part: the first slice made the first
    # two parts alone and wrote them, the later ones made what is dated in the first,
    # and the last two parts were written nowhere.
    poster = "someone <someone@example.com>"
    parts = [
        posted(
            f"Part.{n}.Name.2019.1080p-GRP", poster, [(i, f"p{n}.part{i:02}.rar")], 20,
            at=1_764_000_000 + n * 25 * 60, tag=f"t{n}",
        )
        for n, i in enumerate((1, 2, 3, 4))
    ]  # fmt: skip
    lines = [line for part in parts for line in part]
    numbered = [f"{n}\t{line}".encode() for n, line in enumerate(lines, 1000)]
    for _ in batches_of_lines(stores, "alt.binaries.test", numbered, len(numbered)):
        pass
    exported = exported_lines(stores.build.export())
    assert len(exported) == 1  # one upload of four files
    assert exported_lines(in_slices(stores.catalog.pool, 1).export()) == exported
    # A build finds the whole upload through the rows the slices before wrote.
    whole, sliced = rebuilt_both_ways(stores, 0, in_slices(stores.catalog.pool, 1))
    assert sliced == whole


def test_keys_stored_before_each_chunks_dates_were_kept_are_sliced_by_their_dates(
    stores: Stores,
) -> None:
    # Migration 0027 gave each release stored before it one time row, its whole span,
    # whatever fragments it had: such a key has fewer time rows than fragments, as a
    # key with an undated chunk has, and went to the first slice with the undated
    # releases (an upgraded catalog's keys of many batches in one slice).
    stored(stores, 12_000, 7, "posting-tools", found=False)
    stores.build.drain(quiet_seconds=0)
    rows = catalog_rows(stores)
    exported = exported_lines(stores.build.export())
    with stores.catalog.pool.connection() as conn:
        conn.execute("DELETE FROM release_times")
        conn.execute(
            "INSERT INTO release_times (key, poster, files_announced, posted, latest)"
            " SELECT key, poster, files_announced, posted, latest FROM releases WHERE posted > 0"
        )
        (several,) = conn.execute(
            "SELECT count(*) FROM (SELECT FROM fragments GROUP BY release_key"
            " HAVING count(*) > 1) AS k"
        ).fetchone() or (0,)
    assert several > 10
    whole = in_slices(stores.catalog.pool)
    with whole.order.runs(merge.APART_SECONDS) as runs:
        assert min(run.start for run in runs) > 0  # nothing undated
    assert sorted(exported_lines(whole.export())) == sorted(exported)
    with stores.catalog.pool.connection() as conn:
        conn.execute("DELETE FROM catalog")
    whole.build(quiet_seconds=0)
    assert catalog_rows(stores) == rows


def test_undated_releases_are_built_and_exported_once(stores: Stores) -> None:
    # A release of no dated article, and a key whose repost came undated under a
    # posting tool's From: a generation dated 0 of a key whose first run is dated.
    def post(head: str, poster: str, at: int, tag: str, date: str | None = None) -> list[str]:
        return [
            f'{head} [01/02] - "{tag}.rar" yEnc ({k}/2)\t{poster}\t{date or formatdate(at + k)}'
            f"\t<{at}.{k}.{tag}@x.local>\t\t400000\t3100"
            for k in (1, 2)
        ]

    tool = "NewsUP <NewsUP@somewhere.cbr>"
    parts = [
        post("Undated.Thing.2019-GRP", "someone <s@x.local>", 1_764_000_000, "u", "not a date"),
        post("Other.Thing.2019-GRP", "other <o@x.local>", 1_763_000_000, "o"),
        post("Mixed.Thing.2019-GRP", tool, 1_764_000_000, "m"),
        post("Dated.Thing.2019-GRP", "other <o@x.local>", 1_764_100_000, "d"),
        post("Mixed.Thing.2019-GRP", tool, 1_764_200_000, "m", "garbage"),
    ]
    lines = [line for part in parts for line in part]
    numbered = [f"{n}\t{line}".encode() for n, line in enumerate(lines, 1000)]
    for _ in batches_of_lines(stores, "alt.binaries.test", numbered, [len(p) for p in parts]):
        pass
    exported = exported_lines(stores.build.export())
    assert [orjson.loads(line)["posted"] for line in exported].count(0) == 2
    for segments in (1, 2, 3, 1_000):
        whole = in_slices(stores.catalog.pool, segments)
        assert sorted(exported_lines(whole.export())) == sorted(exported)
    rows, sliced = rebuilt_both_ways(stores, 0, in_slices(stores.catalog.pool, 1))
    assert sliced == rows


@attrs.define(eq=False)
class Said:
    """What a whole build or export reported, call by call: (doing, done, total, last)."""

    calls: list[tuple[str, int, int, bool]] = attrs.Factory(list)

    def __call__(self, doing: str, done: int, total: int, *, last: bool = False) -> None:
        self.calls.append((doing, done, total, last))

    def phase(self, doing: str) -> list[tuple[str, int, int, bool]]:
        """The calls of one phase, checked to be in one run, `done` never going back,
        and ended by one last call."""
        at = [n for n, call in enumerate(self.calls) if call[0] == doing]
        assert at == list(range(at[0], at[-1] + 1)), self.calls
        calls = [self.calls[n] for n in at]
        assert [c[3] for c in calls] == [False] * (len(calls) - 1) + [True], calls
        assert [c[1] for c in calls] == sorted(c[1] for c in calls), calls
        return calls


def test_each_phase_of_a_whole_build_and_export_reports_as_it_goes_and_once_ended(
    stores: Stores,
) -> None:
    stored(stores, 12_000, 11, "default", found=False)
    pool = stores.catalog.pool
    with pool.connection() as conn:
        conn.execute("UPDATE releases SET latest = NULL WHERE get_byte(key, 0) < 128")
        undated = conn.execute("SELECT count(*) FROM releases WHERE latest IS NULL").fetchone()
        (releases,) = conn.execute("SELECT count(*) FROM releases").fetchone() or (0,)
        keys = [bytes(k) for (k,) in conn.execute("SELECT key FROM releases LIMIT 40")]
    said = Said()

    def progress(doing: str, done: int, total: int, *, last: bool = False) -> None:
        said(doing, done, total, last=last)
        if (doing, last) == (BUILT, True):  # batches stored meanwhile mark keys pending
            with pool.connection() as conn:
                conn.execute(catalog_sql.MARK_PENDING, (False, arrays.keys(keys)))

    whole = attrs.evolve(in_slices(pool), prune_rows=20)
    whole.build(quiet_seconds=0, progress=progress)
    rows = len(catalog_rows(stores))
    assert list(dict.fromkeys(c[0] for c in said.calls)) == [DATED, BUILT, PENDING, PRUNED]
    assert undated is not None
    assert said.phase(DATED)[-1] == (DATED, undated[0], 0, True)
    assert said.phase(BUILT)[-1] == (BUILT, releases, releases, True)
    pending = said.phase(PENDING)
    assert pending[0] == (PENDING, 0, len(keys), False)
    assert pending[-1][1:] == (pending[-1][1], pending[-1][1], True)
    assert pending[-1][1] >= len(keys)
    pruned = said.phase(PRUNED)
    assert len(pruned) > rows // 20  # a page at a time, each reported
    assert pruned[-1] == (PRUNED, rows, rows, True)
    exported = Said()
    assert len(list(whole.export(exported))) > 0
    assert exported.phase(EXPORTED)[-1] == (EXPORTED, releases, releases, True)


def _stored_keys(conn: psycopg.Connection[Any], keys: list[bytes], groups: int) -> None:
    """Keys stored as a batch stores them: a releases row and a fragment in one of
    `groups` groups' partitions each (the fragment's bytes are never read here)."""
    for group in range(1, groups + 1):
        ensure_partition(conn, group)
    conn.execute(
        "INSERT INTO releases (key, name, poster, groups, posted)"
        " SELECT k, 'r', 'p', ARRAY['g'], 1 FROM unnest(%s::bytea[]) AS k",
        (keys,),
    )
    conn.execute(
        "INSERT INTO fragments (group_id, release_key, range_id, batch_first, files, segments,"
        " packed) SELECT 1 + n %% %s, k, n, n, 1, 1, '\\x00'"
        " FROM unnest(%s::bytea[]) WITH ORDINALITY AS f(k, n)",
        (groups, keys),
    )


_CATALOG_ROW = """
    INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups,
                         posted, completion, probe_candidate, sources)
    VALUES (%s, 'r', 'r', 2000, 1, 1, 'p', ARRAY['g'], 1, 1, false, %s::bytea[])
"""


@pytest.mark.parametrize("seed", range(4))
def test_the_rows_of_no_stored_key_are_deleted_a_page_at_a_time_as_one_statement_did(
    pool: ConnectionPool, seed: int
) -> None:
    rng = random.Random(seed)
    keys = [rng.randbytes(16) for _ in range(300)]
    stored_keys = [k for k in keys if rng.random() < 0.7]
    sources = [rng.sample(keys, rng.randint(0, 4)) for _ in range(rng.randint(0, 700))]
    with pool.connection() as conn:
        _stored_keys(conn, stored_keys, rng.randint(1, 6))
        with conn.cursor() as cursor:
            cursor.executemany(_CATALOG_ROW, [(f"g{n}", s) for n, s in enumerate(sources)])
        conn.execute("DELETE FROM catalog WHERE id %% %s = 0", (rng.randint(2, 9),))  # gaps
        before = {r[0] for r in conn.execute("SELECT id FROM catalog")}
        with conn.transaction(force_rollback=True):
            conn.execute(PRUNE_IN_ONE)
            kept = {r[0] for r in conn.execute("SELECT id FROM catalog")}
    said = Said()
    page = rng.randint(1, 60)
    whole = WholeCatalog(pool, prune_rows=page)
    assert whole.prune(said) == len(before) - len(kept)
    with pool.connection() as conn:
        assert {r[0] for r in conn.execute("SELECT id FROM catalog")} == kept
    assert said.phase(PRUNED)[-1] == (PRUNED, len(before), len(before), True)
    assert len(said.calls) == 2 + len(before) // page


def test_each_page_of_the_prune_reads_its_rows_and_their_keys_only(
    pg_conn: psycopg.Connection[Any],
) -> None:
    """100k rows of two keys each, one in a hundred of no stored key, their keys stored
    in 20 groups: a page of the prune reads its rows and one key of each, at the
    catalog's start, middle and end; one statement over the catalog read it all."""
    rows, page = 100_000, 1_000
    conn = pg_conn
    keys = [hashlib.md5(str(n).encode()).digest() for n in range(1, rows + 2)]
    _stored_keys(conn, keys, 20)
    conn.execute(
        "INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups,"
        " posted, completion, probe_candidate, sources)"
        " SELECT md5(n::text), 'r', 'r', 2000, 1, 1, 'p', ARRAY['g'], 1, 1, false,"
        "        CASE WHEN n %% 100 = 0 THEN ARRAY[decode(md5((-n)::text), 'hex')]"
        "             ELSE ARRAY[decode(md5(n::text), 'hex'), decode(md5((n + 1)::text), 'hex')]"
        "        END"
        " FROM generate_series(1, %s) AS n",
        (rows,),
    )
    conn.execute("ANALYZE")

    def read(statement: str, params: dict[str, object] | None, table: str) -> int:
        with conn.transaction(force_rollback=True):  # EXPLAIN ANALYZE deletes
            return _rows_read(conn, statement, params, table)

    for after in (0, rows // 2, rows - page // 2):
        params: dict[str, object] = {"after": after, "rows": page}
        # The page's ids, its rows, and those deleted (the Delete step counts them).
        assert read(catalog_sql._CATALOG_PRUNE_UNSTORED, params, "catalog") <= 3 * page
        assert read(catalog_sql._CATALOG_PRUNE_UNSTORED, params, "releases") <= page
    assert read(PRUNE_IN_ONE, None, "catalog") == rows


def test_a_whole_build_gives_the_rows_written_before_0044_their_anchors(stores: Stores) -> None:
    """Rows written before migration 0044 have no anchor (their guids are kept only once
    a build writes them again); `uidx catalog build` writes every one, its guid
    unchanged, each anchor a message-id of the row's own release."""
    stored(stores, 12_000, 5, "posting-tools", found=False)
    stores.build.everything(quiet_seconds=0)
    before = catalog_rows(stores)
    with stores.catalog.pool.connection() as conn:
        conn.execute("UPDATE catalog SET anchor = NULL")
    in_slices(stores.catalog.pool).build(quiet_seconds=0)
    assert catalog_rows(stores) == before
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute("SELECT guid, anchor FROM catalog").fetchall()
    assert len(rows) == len(before) > 20
    for guid, anchor in rows:
        row = stores.catalog.row(guid)
        assert row is not None
        release = stores.build.release(row)
        assert release is not None
        assert any(anchor == message_id for f in release.files for _, message_id, _ in f.segments)
