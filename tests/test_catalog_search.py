"""CatalogTable.search on a real PostgreSQL: how q matches, and pages in order.

Rows are written straight into `catalog` (names chosen for each test), the
way `build` leaves them; search_name comes from the same function.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from psycopg_pool import ConnectionPool

from usenet_indexer.core.categories import season_episode
from usenet_indexer.store.catalog import _COUNT_MAX as COUNT_MAX
from usenet_indexer.store.catalog import CatalogTable, Search, query_words, search_name

INSERT = """
    INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups,
                         posted, completion, season, episode, probe_candidate, sources)
    VALUES (%s, %s, %s, 5040, 1000, 1, 'poster@example.com', ARRAY['alt.binaries.test'],
            %s, 1.0, %s, %s, false, ARRAY[]::bytea[])
"""


def add(
    pool: ConnectionPool,
    names: Sequence[str],
    first_posted: int = 1_700_000_000,
    apart: int = 60,
) -> None:
    """Catalog rows of `names`, each posted `apart` seconds after the one before."""
    with pool.connection() as conn, conn.cursor() as cursor:
        cursor.executemany(
            INSERT,
            [
                (
                    f"{n:032x}",
                    name,
                    search_name(name),
                    first_posted + apart * n,
                    *season_episode(name),
                )
                for n, name in enumerate(names)
            ],
        )


def names(
    table: CatalogTable,
    q: str,
    *,
    offset: int = 0,
    season: int | None = None,
    episode: int | None = None,
) -> list[str]:
    search = Search(words=q, offset=offset, season=season, episode=episode)
    return [row.item.name for row in table.search(search)[1]]


@pytest.fixture
def table(pool: ConnectionPool) -> CatalogTable:
    add(
        pool,
        [
            "Show.Name.S01E02.720p.WEB-DL.DD5.1.H.264-Kitsune",
            "Show.Name.S02E01.1080p.HDTV.x264-KILLERS",
            "Other_Show_S01E02_2160p_WEB_x265-NTb",
            "Dead.Ends.1999.1080p.BluRay.x264-SPARKS",
            "Deadline.2012.720p.BluRay.x264-SPARKS",
            "Ab.Road.S01E05.720p.HDTV.x264-BS",
            "Abc.Road.S01E06.720p.HDTV.x264-BS",
        ],
    )
    return CatalogTable(pool)


def test_q_is_split_as_names_are(table: CatalogTable) -> None:
    kitsune = "Show.Name.S01E02.720p.WEB-DL.DD5.1.H.264-Kitsune"
    for q in ("show.name s01e02", "SHOW_NAME S01E02", "Show-Name S01E02", "web-dl kitsune"):
        assert names(table, q) == [kitsune], q
    assert query_words("Show.Name  SHOW-name_s01") == ("show", "name", "s01")
    assert query_words("... -- __") == ()


def test_every_word_must_match_and_a_repeat_counts_once(table: CatalogTable) -> None:
    assert names(table, "show name") == [
        "Show.Name.S02E01.1080p.HDTV.x264-KILLERS",
        "Show.Name.S01E02.720p.WEB-DL.DD5.1.H.264-Kitsune",
    ]
    assert names(table, "show show s01e02") == [
        "Other_Show_S01E02_2160p_WEB_x265-NTb",
        "Show.Name.S01E02.720p.WEB-DL.DD5.1.H.264-Kitsune",
    ]
    assert names(table, "show name 2160p") == []


def test_partial_words_are_found_when_no_name_has_every_word_whole(table: CatalogTable) -> None:
    assert names(table, "show s01e0") == [
        "Other_Show_S01E02_2160p_WEB_x265-NTb",
        "Show.Name.S01E02.720p.WEB-DL.DD5.1.H.264-Kitsune",
    ]
    assert names(table, "kitsu") == ["Show.Name.S01E02.720p.WEB-DL.DD5.1.H.264-Kitsune"]
    assert names(table, "dead 1080") == ["Dead.Ends.1999.1080p.BluRay.x264-SPARKS"]
    assert names(table, "deadl") == ["Deadline.2012.720p.BluRay.x264-SPARKS"]
    # Whole words first: "dead" is a word of one name, so "Deadline" is not added.
    assert names(table, "dead") == ["Dead.Ends.1999.1080p.BluRay.x264-SPARKS"]
    # Words of one or two characters stay whole (pg_trgm takes no trigram from them).
    assert names(table, "ab road s01e0") == ["Ab.Road.S01E05.720p.HDTV.x264-BS"]


def test_tvsearch_takes_the_season_and_episode_beside_the_words(table: CatalogTable) -> None:
    assert names(table, "show name", season=1, episode=2) == [
        "Show.Name.S01E02.720p.WEB-DL.DD5.1.H.264-Kitsune"
    ]
    assert names(table, "show", season=2) == ["Show.Name.S02E01.1080p.HDTV.x264-KILLERS"]
    assert names(table, "road", season=1, episode=7) == []
    assert names(table, "abc roa", season=1, episode=6) == ["Abc.Road.S01E06.720p.HDTV.x264-BS"]


def test_a_page_past_the_whole_word_matches_takes_no_partial_ones(table: CatalogTable) -> None:
    assert names(table, "dead", offset=1) == []
    assert names(table, "deadl", offset=1) == []
    assert table.search(Search(words="deadl", offset=1)) == (1, [])


def test_a_typo_or_hostile_q_finds_nothing_without_an_error(table: CatalogTable) -> None:
    for q in ("shwo nmae", "'; DROP TABLE catalog; --", "a:* & !b", "x" * 256, "zz9%"):
        assert names(table, q) == [], q
    # No letter or digit, no word: the newest feed, as for no q.
    for q in ("", "%", "_", "\\", "..."):
        assert len(names(table, q)) == 7, q


# Rows a minute apart (a few hours: one period of catalog_search_keys), or a fifth of
# a period apart (3000 rows over 600 periods, ~24 days each: the walk goes through
# hundreds of them, its pages and counts across their bounds).
APART = [60, 2**21 // 5]


@pytest.mark.parametrize("apart", APART)
@pytest.mark.parametrize("analyzed", [False, True])
@pytest.mark.parametrize("limit", [1, 10, 100])
def test_pages_are_newest_first_whatever_plan_serves_them(
    pool: ConnectionPool, limit: int, analyzed: bool, apart: int
) -> None:
    # 3000 rows: "every" is in all of them (its pages come from the newest rows),
    # "tenth" in one of ten, "sparse" in one of 150 (too few among the newest:
    # the bitmaps serve it), "old" only in the oldest 40 (none among the newest).
    made = []
    for n in range(3000):
        words = ["every", f"r{n}"]
        words += ["tenth"] * (n % 10 == 3) + ["sparse"] * (n % 150 == 7) + ["old"] * (n < 40)
        made.append(".".join(words))
    add(pool, made, apart=apart)
    if analyzed:  # the planner's guesses, from statistics, decide whether the newest are looked at
        with pool.connection() as conn:
            conn.execute("ANALYZE catalog")
    table = CatalogTable(pool)
    for q in ("every", "tenth", "sparse", "old", "tenth sparse", "spars", "tent old"):
        wanted = query_words(q)
        expected = [
            name
            for name in reversed(made)
            if all(any(w in part for part in name.split(".")) for w in wanted)
        ]
        for offset in (0, limit, 5 * limit, 39, 200, 2999):
            total, rows = table.search(Search(words=q, limit=limit, offset=offset))
            assert [r.item.name for r in rows] == expected[offset : offset + limit], (q, offset)
            # Every page, one past the end too, says how many match, up to the cap.
            assert total == min(len(expected), COUNT_MAX), (q, offset)


@pytest.mark.parametrize("apart", APART)
def test_maxage_and_the_episode_are_asked_beside_the_words(
    pool: ConnectionPool, apart: int
) -> None:
    # 600 episodes of two shows over seasons 1-5, posted in order; maxage (since)
    # cuts the oldest off, a tvsearch takes its season's and episode's rows only.
    made = [
        f"{'Atlas.Empire' if n % 3 else 'Crimson.Tower'}.S{1 + n // 120:02d}E{1 + n % 24:02d}"
        ".1080p.WEB.h264-NTb"
        for n in range(600)
    ]
    first = 1_700_000_000
    add(pool, made, first_posted=first, apart=apart)
    table = CatalogTable(pool)
    atlas = [name for name in reversed(made) if name.startswith("Atlas.")]
    since = first + apart * 450
    total, rows = table.search(Search(words="atlas empire", since=since, limit=100))
    assert [r.item.name for r in rows] == [n for n in made[450:] if n.startswith("Atlas.")][::-1]
    assert total == len(rows) == 100  # 150 newest rows, two thirds of them Atlas's
    for season, episode in ((1, 2), (3, None), (5, 24), (6, 1)):
        total, rows = table.search(Search(words="atlas", season=season, episode=episode))
        wanted = [
            name
            for name in atlas
            if season_episode(name)[0] == season and episode in (None, season_episode(name)[1])
        ]
        assert [r.item.name for r in rows] == wanted[:100], (season, episode)
        assert total == min(len(wanted), COUNT_MAX), (season, episode)
