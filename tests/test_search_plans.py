"""The plans of the searches that grow with the catalog (issue 27: search at catalog
scale), read from EXPLAIN ANALYZE on a catalog of realistic shape: scene-style TV and
film names, a show's releases spread over the whole catalog, as scripts/bench-search
makes them at 2M-10M rows (200k here, over 30 periods of ~24 days, keep the test short).

- q (whole words): catalog_search_keys' keys of each period, newest first; only the
  matches of the periods walked are read, and the walk stops once it has the page
  and the count (1,000): a common word's search reads a few periods, not its every
  release; a show's reads that show's releases, never the other releases of its words.
- tvsearch (q, season and episode): the season's keys of the show's words: the heap is
  read for that season's releases of the show only, never for every release of the
  show, nor for a bitmap of that episode of every show.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql

from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.store import catalog
from usenet_indexer.store.catalog import Search, query_words

ROWS = 200_000
APART = 310  # seconds between two releases: 200k over 30 periods (2**21 s each)
SHOW_FIRST = ("atlas", "crimson", "hidden", "silent", "wild", "shadow", "storm", "winter",
              "signal", "north", "tiger", "dragon", "broken", "raven", "velvet", "river")  # fmt: skip
SHOW_SECOND = ("empire", "garden", "kingdom", "station", "bridge", "tower", "castle",
               "palace", "doctor", "agent", "hunter", "pilot", "valley", "forest")  # fmt: skip
GROUPS = ("KILLERS", "NTb", "playWEB", "ION10", "CMRG", "EDITH", "SPARKS", "FLUX")
# Six in ten releases are episodes (a show of two words, SxxEyy, source and codec
# tags, a group), the others films (three words and a year); a show's episodes are
# posted all along the catalog, as a long-running show's are.
_FILL = """
    INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups, posted,
                         completion, season, episode, probe_candidate, sources)
    SELECT md5(i::text), name, lower(regexp_replace(name, '[^A-Za-z0-9]+', ' ', 'g')),
           CASE WHEN tv THEN 5040 ELSE 2040 END, 1048576 * (200 + i %% 5000), 10 + i %% 60,
           'poster' || (i %% 3000) || '@example.com', ARRAY['alt.binaries.multimedia'],
           1700000000 + i * %(apart)s, 1.0, season, episode, false, ARRAY[decode(md5(i::text), 'hex')]
    FROM (
        SELECT i, tv, season, episode,
               CASE WHEN tv THEN
                   initcap((%(first)s::text[])[1 + abs(hashtext(i || 'a')) %% %(nfirst)s]) || '.'
                   || initcap((%(second)s::text[])[1 + abs(hashtext(i || 'b')) %% %(nsecond)s])
                   || '.S' || lpad(season::text, 2, '0') || 'E' || lpad(episode::text, 2, '0')
                   || '.1080p.WEB.h264-' || (%(groups)s::text[])[1 + i %% %(ngroups)s]
               ELSE
                   initcap((%(second)s::text[])[1 + (i * 31) %% %(nsecond)s]) || '.'
                   || initcap((%(first)s::text[])[1 + (i * 17) %% %(nfirst)s]) || '.'
                   || initcap((%(second)s::text[])[1 + (i * 13) %% %(nsecond)s]) || '.'
                   || (1950 + i %% 75) || '.1080p.BluRay.x264-' || (%(groups)s::text[])[1 + i %% %(ngroups)s]
               END AS name
        FROM (
            SELECT i, i %% 10 < 6 AS tv,
                   CASE WHEN i %% 10 < 6 THEN 1 + abs(hashtext(i || 's')) %% 8 END AS season,
                   CASE WHEN i %% 10 < 6 THEN 1 + abs(hashtext(i || 'e')) %% 12 END AS episode
            FROM generate_series(1, %(rows)s::bigint) AS i
        ) AS numbered
    ) AS named
"""  # fmt: skip


@pytest.fixture
def filled(stores: Stores) -> Stores:
    with stores.catalog.pool.connection() as conn:
        conn.execute("SET statement_timeout = 0")  # the rows' index entries take a while
        conn.execute(
            _FILL,
            {
                "rows": ROWS,
                "apart": APART,
                "first": list(SHOW_FIRST),
                "nfirst": len(SHOW_FIRST),
                "second": list(SHOW_SECOND),
                "nsecond": len(SHOW_SECOND),
                "groups": list(GROUPS),
                "ngroups": len(GROUPS),
            },
        )
    # Settled, as autovacuum leaves a catalog (statistics; the GIN pending list merged).
    with stores.catalog.pool.connection() as conn:
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE catalog")
    return stores


_AN_EPISODE = """
    SELECT split_part(name, '.', 1), split_part(name, '.', 2), season, episode
    FROM catalog WHERE season IS NOT NULL AND id >= %s ORDER BY id LIMIT 1
"""
_PERIODS = "SELECT catalog_period(max(posted)) - catalog_period(min(posted)) + 1 FROM catalog"


def _analyzed(conn: psycopg.Connection[Any], query: pgsql.Composable, params: list[object]) -> Any:
    explain = pgsql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + query
    row = psycopg.ClientCursor(conn).execute(explain, params).fetchone()
    assert row is not None
    return row[0][0]["Plan"]


def _nodes(plan: Any) -> Iterator[Any]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _walk_plan(conn: psycopg.Connection[Any], search: Search) -> Any:
    """The plan of the walk a search with words sends (catalog._WALK)."""
    words = query_words(search.words)
    query, params = catalog._walk_statement(words, catalog._filters(search), search)
    return _analyzed(conn, query, params)


def _season_plan(conn: psycopg.Connection[Any], search: Search) -> Any:
    """The plan of a tvsearch's page (its words' season keys, catalog._BITMAP_COUNTED)."""
    assert search.season is not None
    keys = catalog._season_keys(query_words(search.words), search.season)
    where, params = catalog._where([keys, *catalog._filters(search)])
    query = pgsql.SQL(catalog._BITMAP_COUNTED).format(where)
    return _analyzed(conn, query, [catalog._COUNT_MAX, *params, search.limit + 1, search.offset])


def _kinds(plan: Any) -> list[str]:
    return [node["Node Type"] for node in _nodes(plan)]


def _read(plan: Any) -> tuple[int, int]:
    """(catalog pages the keys' bitmaps had the heap read, over every loop; their scans).
    Rows are reported per loop (rounded), pages in all."""
    scans = [n for n in _nodes(plan) if n["Node Type"] == "Bitmap Index Scan"]
    assert {n["Index Name"] for n in scans} == {"catalog_search_keys"}, scans
    heap = [n for n in _nodes(plan) if n["Node Type"] == "Bitmap Heap Scan"]
    assert all(n["Lossy Heap Blocks"] == 0 for n in heap), heap
    return sum(n["Exact Heap Blocks"] for n in heap), sum(n["Actual Loops"] for n in heap)


def _count(conn: psycopg.Connection[Any], where: str, *params: object) -> int:
    row = conn.execute("SELECT count(*) FROM catalog WHERE " + where, params).fetchone()
    assert row is not None
    return int(row[0])


def test_q_and_tvsearch_read_only_what_they_find(filled: Stores) -> None:
    with filled.catalog.pool.connection() as conn:
        # An episode of a show somewhere in the middle of the catalog, and all its releases.
        row = conn.execute(_AN_EPISODE, (ROWS // 2,)).fetchone()
        assert row is not None
        first, second, season, episode = row
        show = f"{first} {second}"
        episode_of = f"{first}.{second}.S{season:02d}E{episode:02d}."
        words = "words @@ plainto_tsquery('simple', %s)"
        releases = _count(conn, words, show)  # the show's, all seasons
        season_releases = _count(conn, words + " AND season = %s", show, season)
        common = _count(conn, words, first)  # the show's first word, in other names too
        spanned = conn.execute(_PERIODS).fetchone()
        assert spanned is not None
        periods = int(spanned[0])
    tvsearch = Search(words=show, categories=(5000,), season=season, episode=episode)
    total, rows = filled.catalog.search(tvsearch)
    assert total == len(rows) == _releases(filled, episode_of) > 1
    assert all(r.item.name.startswith(episode_of) for r in rows)
    rare = f"{show} s{season:02d}e{episode:02d}"  # that episode's name, whatever its season
    r_total, r_rows = filled.catalog.search(Search(words=rare))
    assert r_total == len(r_rows) == _releases(filled, episode_of)
    q_total, q_rows = filled.catalog.search(Search(words=show))
    assert len(q_rows) == 100
    assert q_total == min(releases, catalog._COUNT_MAX)
    c_total, c_rows = filled.catalog.search(Search(words=first))
    assert len(c_rows) == 100
    assert c_total == catalog._COUNT_MAX < common // 5
    with filled.catalog.pool.connection() as conn:
        episode_plan = _season_plan(conn, tvsearch)
        rare_plan = _walk_plan(conn, Search(words=rare))
        q_plan = _walk_plan(conn, Search(words=show))
        common_plan = _walk_plan(conn, Search(words=first))

    # tvsearch: the show's words in that season, one scan of their keys; the heap is
    # read for that season's releases of the show (the episode then filtered).
    assert "Seq Scan" not in _kinds(episode_plan)
    pages, scans = _read(episode_plan)
    assert scans == 1
    assert total <= pages <= season_releases < releases / 4

    # A rare q: every period looked at (fewer than 1,000 match), and only its matches
    # read from the heap...
    assert periods >= 30
    assert "Seq Scan" not in _kinds(rare_plan)
    pages, scans = _read(rare_plan)
    assert scans == periods
    assert 0 < pages <= r_total
    # ... whole rows are read for the page only, by id.
    by_id = [n for n in _nodes(q_plan) if n.get("Index Name") == "catalog_pkey"]
    assert by_id
    assert all(n["Actual Loops"] <= 101 for n in by_id), by_id

    # A show, and a common word: the newest periods until 1,000 are found, not every
    # match: a show's matches and a few periods' of the word (about a row a page).
    pages, walked = _read(q_plan)
    assert catalog._COUNT_MAX * 0.9 <= pages <= releases
    assert walked < periods
    pages, walked = _read(common_plan)
    assert walked < periods / 3
    assert catalog._COUNT_MAX * 0.9 <= pages < common / 5


# Rows written since the catalog was last vacuumed (the builds' rows, between two
# autovacuums): copies of the first rows, posted after the last one.
_WRITTEN = """
    INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups, posted,
                         completion, season, episode, probe_candidate, sources)
    SELECT 'new' || guid, name, search_name, category, size, files, poster, groups,
           posted + (SELECT max(posted) - min(posted) + 60 FROM catalog), completion, season,
           episode, probe_candidate, sources
    FROM catalog WHERE id <= %s
"""


def _index_pages_per_look(stores: Stores, search: Search) -> tuple[float, int]:
    """(pages of catalog_search_keys a walk reads per period looked at, periods)."""
    assert stores.catalog.search(search) == (0, [])
    with stores.catalog.pool.connection() as conn:
        plan = _walk_plan(conn, search)
    scans = [n for n in _nodes(plan) if n["Node Type"] == "Bitmap Index Scan"]
    assert [n["Index Name"] for n in scans] == ["catalog_search_keys"]
    looks = scans[0]["Actual Loops"]
    return (scans[0]["Shared Hit Blocks"] + scans[0]["Shared Read Blocks"]) / looks, looks


def test_a_walk_reads_few_index_pages_per_period_while_rows_are_written(
    filled: Stores,
) -> None:
    # A q of no match looks at every period of the keys, each a few pages of the
    # entry tree; rows written since the vacuum wait in a pending list of 256 kB at
    # most (32 pages), which every look at the index reads whole (the default 4 MB:
    # 5,000 rows of keys, ~200 pages, read at every look).
    rare = Search(words="atlas empire 1951 s01e01")  # a film's year, an episode's number
    settled, periods = _index_pages_per_look(filled, rare)
    with filled.catalog.pool.connection() as conn:
        conn.execute("SET statement_timeout = 0")
        conn.execute(_WRITTEN, (5_000,))
    written, looks = _index_pages_per_look(filled, rare)
    assert periods <= looks <= periods + 1  # and the copies'
    assert written <= settled + 256 // 8 + 1, (settled, written)


def _releases(stores: Stores, prefix: str) -> int:
    with stores.catalog.pool.connection() as conn:
        return _count(conn, "name LIKE %s", prefix + "%")


def test_the_keys_of_a_written_row_are_made_by_built_in_functions(stores: Stores) -> None:
    # PostgreSQL inlines catalog_search_keys (immutable built-ins only) into the index
    # expression as into this SELECT. With a stable function in it (array_to_string,
    # `text || int`) it ran in the SQL function executor for each row written,
    # ~100 us a row (the catalog build's PostgreSQL CPU: 2.0 -> 2.9 s per 1M lines,
    # bench-scale).
    with stores.catalog.pool.connection() as conn:
        explain = "EXPLAIN (VERBOSE, FORMAT JSON) SELECT {} FROM catalog"
        for keys in (
            "catalog_search_keys(words, season, posted)",
            "catalog_query_keys(name, '|' || catalog_period(posted))",
        ):
            row = conn.execute(explain.format(keys)).fetchone()
            assert row is not None
            (output,) = row[0][0]["Plan"]["Output"]
            assert "strip(" in output, output
            assert "catalog_" not in output, output
