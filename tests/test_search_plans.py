"""The plans of the searches that grow with the catalog (issue 27: search at catalog
scale), read from EXPLAIN ANALYZE on a catalog of realistic shape: scene-style TV and
film names, a show's releases spread over the whole catalog, as scripts/bench-search
makes them at 2M-10M rows (200k here keep the test short).

- tvsearch (q, season and episode): one scan of catalog_words_episode intersects the
  show's words with the episode inside the index; the heap is read for the matches
  only, never for every release of the show, nor for a bitmap of that episode of
  every show (catalog_episode's, ANDed with the words': 20 ms at 2M rows).
- q of two words (a show): the bitmaps give every match; only their ids and dates are
  sorted and counted (the total), and whole rows are read for the page only.
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
           1700000000 + i * 31, 1.0, season, episode, false, ARRAY[decode(md5(i::text), 'hex')]
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
_RELEASES_OF = "SELECT count(*) FROM catalog WHERE name LIKE %s"


def _analyzed(conn: psycopg.Connection[Any], query: pgsql.Composable, params: list[object]) -> Any:
    explain = pgsql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + query
    row = psycopg.ClientCursor(conn).execute(explain, params).fetchone()
    assert row is not None
    return row[0][0]["Plan"]


def _nodes(plan: Any) -> Iterator[Any]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _bitmap_page(conn: psycopg.Connection[Any], search: Search) -> Any:
    """The plan of the page the bitmaps serve a search with words (catalog._BITMAP_COUNTED)."""
    conditions = [*catalog._word_conditions(query_words(search.words), partial=False)]
    where, params = catalog._where([*conditions, *catalog._filters(search)])
    query = pgsql.SQL(catalog._BITMAP_COUNTED).format(where)
    return _analyzed(conn, query, [catalog._COUNT_MAX, *params, search.limit + 1, search.offset])


def _kinds(plan: Any) -> list[str]:
    return [node["Node Type"] for node in _nodes(plan)]


def test_tvsearch_and_a_two_word_q_read_bounded_plans(filled: Stores) -> None:
    with filled.catalog.pool.connection() as conn:
        # An episode of a show somewhere in the middle of the catalog, and all its releases.
        row = conn.execute(_AN_EPISODE, (ROWS // 2,)).fetchone()
        assert row is not None
        first, second, season, episode = row
        episode_of = f"{first}.{second}.S{season:02d}E{episode:02d}."
        counted = conn.execute(_RELEASES_OF, (episode_of + "%",)).fetchone()
    assert counted is not None
    show = f"{first} {second}"
    tvsearch = Search(words=show, categories=(5000,), season=season, episode=episode)
    total, rows = filled.catalog.search(tvsearch)
    assert total == len(rows) == counted[0] > 1  # a few releases of one episode of one show
    assert all(r.item.name.startswith(episode_of) for r in rows)
    q = Search(words=show)
    q_total, q_rows = filled.catalog.search(q)
    assert len(q_rows) == 100  # the show: more than a page
    assert q_total > 100
    with filled.catalog.pool.connection() as conn:
        episode_plan = _bitmap_page(conn, tvsearch)
        q_plan = _bitmap_page(conn, q)

    # tvsearch: one scan of catalog_words_episode with the words, season and episode.
    kinds = _kinds(episode_plan)
    assert "Seq Scan" not in kinds, kinds
    assert "BitmapAnd" not in kinds, kinds  # no bitmap of that episode of every show
    scans = [n for n in _nodes(episode_plan) if n["Node Type"] == "Bitmap Index Scan"]
    assert [n["Index Name"] for n in scans] == ["catalog_words_episode"], scans
    condition = scans[0]["Index Cond"]
    assert "season" in condition, condition
    assert "episode" in condition, condition
    # The index hands on the episode's rows only: none fetched to be thrown away.
    heap = next(n for n in _nodes(episode_plan) if n["Node Type"] == "Bitmap Heap Scan")
    assert scans[0]["Actual Rows"] == heap["Actual Rows"] == total, heap
    assert heap.get("Rows Removed by Filter", 0) == 0, heap

    # q: every match comes from the bitmaps...
    kinds = _kinds(q_plan)
    assert "Seq Scan" not in kinds, kinds
    heap = next(n for n in _nodes(q_plan) if n["Node Type"] == "Bitmap Heap Scan")
    assert heap["Actual Rows"] > 101
    # ... what sorts and counts them all carries a row id and a date, not whole rows...
    every = [
        n
        for n in _nodes(q_plan)
        if n["Node Type"] in ("Sort", "WindowAgg") and n["Plans"][0]["Actual Rows"] > 101
    ]
    assert every, kinds
    assert all(n["Plan Width"] <= 40 for n in every), every
    # ... and whole rows are read for the page only, by id.
    by_id = [n for n in _nodes(q_plan) if n.get("Index Name") == "catalog_pkey"]
    assert by_id, kinds
    assert all(n["Actual Loops"] <= 101 for n in by_id), by_id
