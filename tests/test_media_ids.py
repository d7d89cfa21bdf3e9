"""Ids from NFOs: what probes read, what the catalog keeps, what Radarr and Sonarr search by.

End to end: a film and a show posted whole under their names, and an episode
posted by ngPost under random names, each with a real PAR2 set and an NFO
that links the film's IMDb and TMDB pages or the show's TheTVDB and TVmaze
pages (as scene and P2P NFOs write them), go yEnc-encoded to a private INN2.
A one-shot `uidx standalone` indexes them, probes one NFO of each film and
show, and the coordinator's /api, over real HTTP, finds them as Radarr asks
(`t=movie&imdbid=` with the `tt` taken off, `tmdbid`) and as Sonarr asks
(`t=tvsearch&tvdbid=&season=&ep=`, `tvmazeid`); the items carry the ids as
attrs. The pure parts (request parsing, caps, attrs, which NFO to probe, the
probe's verdict) and the search by id (its plan) are tested on their own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import attrs
import httpx
import psycopg
import pytest
import trio
from psycopg import sql as pgsql
from psycopg_pool import ConnectionPool
from running import own_news_server, rows
from test_newznab import NS, attrs_of, get_xml, insert_rows, items
from test_probes_e2e import GROUP, RUN_SECONDS, posted_and_planned
from test_renames import file, release
from test_standalone import assert_clean_log

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.catalog import CatalogEntry, entry, more_probes
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.core.newznab import (
    SEARCH_MODES,
    Item,
    NewznabError,
    Site,
    caps_xml,
    feed_xml,
    parse_request,
)
from usenet_indexer.core.probing import Verdict, examine
from usenet_indexer.core.renames import Finding, Shown, apply, ids_probe, more_probe
from usenet_indexer.decode.ids import MediaIds
from usenet_indexer.store import catalog
from usenet_indexer.store.catalog import CatalogTable, Search
from usenet_indexer.testing.newsd_private import PrivateNewsServer
from usenet_indexer.testing.obfuscated import Built, ToolMissing, build
from usenet_indexer.testing.yenc import yenc_article

HOUR = 3600
FILM = "Dune.Part.Two.2024.1080p.BluRay.x264-SPARKS"
FILM_LINKS = (
    "IMDb    : https://www.imdb.com/title/tt15239678/",
    "TMDb    : https://www.themoviedb.org/movie/693134-dune-part-two",
)
SHOW = "Slow.Horses.S04E02.1080p.WEB.H264-NTb"
SHOW_LINKS = (
    "TVDB    : https://thetvdb.com/?tab=series&id=364196",
    "TVmaze  : https://www.tvmaze.com/shows/40289/slow-horses",
)
HIDDEN_LINKS = ("Link    : https://thetvdb.com/series/371980",)


# ---------------------------------------------------------------------------
# End to end: INN2, a one-shot run, the HTTP API


@pytest.fixture
def news() -> Iterator[PrivateNewsServer]:
    with own_news_server(GROUP, "uidx-newsd-ids-") as server:
        yield server


@pytest.fixture
def uploads(tmp_path: Path) -> list[Built]:
    start = int(time.time()) - 8 * HOUR
    try:
        return [
            build(tmp_path / "files", "plain", 0, seed=9, posted=start, name=FILM,
                  links=FILM_LINKS),
            build(tmp_path / "files", "plain", 1, seed=9, posted=start + 2 * HOUR, name=SHOW,
                  links=SHOW_LINKS),
            # Random names, the par2 set too: its probe renames it, then its NFO is read.
            build(tmp_path / "files", "ngpost", 2, seed=9, posted=start + 4 * HOUR,
                  links=HIDDEN_LINKS),
        ]  # fmt: skip
    except ToolMissing as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))


@pytest.fixture
async def indexed(
    news: PrivateNewsServer,
    uploads: list[Built],
    pg_url: str,
    settings: Settings,
    stores: Stores,
    tmp_path: Path,
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """The uploads posted, indexed and probed by a one-shot run; a client on the
    coordinator's /api over that catalog, and an API key."""
    env = posted_and_planned(
        news, uploads, pg_url, tmp_path / "home", UIDX_CATALOG_QUIET_SECONDS="0"
    )
    run = [sys.executable, "-m", "usenet_indexer", "standalone", "--exit-when-done"]
    one_shot = partial(
        subprocess.run, [*run, "--processes", "1"], env=env, capture_output=True, text=True,
        timeout=RUN_SECONDS,
    )  # fmt: skip
    done = await trio.to_thread.run_sync(one_shot)
    assert done.returncode == 0, done.stderr[-4000:]
    assert_clean_log(done.stderr)
    key = stores.users.create("radarr")
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=30) as client:
            yield client, key
        nursery.cancel_scope.cancel()


def titles(feed: ET.Element) -> list[str]:
    return [item.findtext("title", "") for item in items(feed)]


@pytest.mark.trio
async def test_radarr_and_sonarr_find_releases_by_the_ids_their_nfos_link(
    indexed: tuple[httpx.AsyncClient, str], uploads: list[Built], pg_url: str
) -> None:
    client, key = indexed
    with trio.fail_after(60):
        # Radarr: the IMDb id's digits ("tt" taken off), with its categories and extended=1.
        film = await get_xml(client, t="movie", imdbid="15239678", cat="2000", extended="1",
                             apikey=key)  # fmt: skip
        assert titles(film) == [FILM]
        ids = attrs_of(items(film)[0])
        assert (ids["imdb"], ids["tmdbid"]) == (["15239678"], ["693134"])
        assert "tvdbid" not in ids
        for asked in ({"imdbid": "tt15239678"}, {"tmdbid": "693134"}):
            assert titles(await get_xml(client, t="movie", apikey=key, **asked)) == [FILM]
        # Another film's id, or q and an id that do not meet: nothing.
        assert titles(await get_xml(client, t="movie", imdbid="0133093", apikey=key)) == []
        assert titles(await get_xml(client, t="movie", imdbid="15239678", q="matrix",
                                    apikey=key)) == []  # fmt: skip
        assert titles(await get_xml(client, t="movie", imdbid="15239678", q="dune",
                                    apikey=key)) == [FILM]  # fmt: skip

        # Sonarr: the TheTVDB id with the season and episode, or the TVmaze id.
        show = await get_xml(client, t="tvsearch", tvdbid="364196", season="4", ep="2",
                             apikey=key)  # fmt: skip
        assert titles(show) == [SHOW]
        ids = attrs_of(items(show)[0])
        assert (ids["tvdbid"], ids["tvmazeid"]) == (["364196"], ["40289"])
        assert titles(await get_xml(client, t="tvsearch", tvmazeid="40289", apikey=key)) == [SHOW]
        assert titles(await get_xml(client, t="tvsearch", tvdbid="364196", season="3",
                                    apikey=key)) == []  # fmt: skip
        # The obfuscated upload, renamed by its par2, then its NFO read.
        hidden = next(u for u in uploads if u.kind == "ngpost")
        assert titles(await get_xml(client, t="tvsearch", tvdbid="371980", apikey=key)) == [
            hidden.real_name
        ]
        # A bad id is named in a newznab error, HTTP 200.
        error = await get_xml(client, t="movie", imdbid="tt15x", apikey=key)
        assert (error.tag, error.get("code")) == ("error", "201")
        assert "imdbid" in error.get("description", "")

    # The probes stayed bounded: one NFO for each well-named film or show, nothing else;
    # the obfuscated upload's par2 index, then its NFO.
    probed = {
        str(name): str(files).split("/")
        for name, files in rows(
            pg_url,
            "SELECT r.name, string_agg(p.file_name, '/' ORDER BY p.file_name) "
            "FROM probe_candidates p JOIN releases r ON r.key = p.release_key GROUP BY r.name",
        )
    }
    assert probed[FILM] == [f"{FILM}.nfo"]
    assert probed[SHOW] == [f"{SHOW}.nfo"]
    # The well-named releases keep their names (their NFO was read for the ids only).
    names = {str(name) for (name,) in rows(pg_url, "SELECT name FROM catalog")}
    assert {FILM, SHOW, hidden.real_name} <= names


# ---------------------------------------------------------------------------
# Requests, caps and attrs (pure)


def test_id_parameters_are_read_as_radarr_and_sonarr_send_them() -> None:
    assert parse_request({"t": "movie", "imdbid": "0133093"}).ids == MediaIds(imdb=133093)
    assert parse_request({"t": "movie", "imdbid": "tt0133093"}).ids == MediaIds(imdb=133093)
    assert parse_request({"t": "movie", "imdbid": " TT0133093 "}).ids == MediaIds(imdb=133093)
    assert parse_request({"t": "movie", "tmdbid": "603"}).ids == MediaIds(tmdb=603)
    sonarr = parse_request(
        {"t": "tvsearch", "tvdbid": "81189", "tvmazeid": "169", "season": "1", "ep": "2"}
    )
    assert (sonarr.ids, sonarr.season, sonarr.episode) == (MediaIds(tvdb=81189, tvmaze=169), 1, 2)
    # None asked: empty, or 0 (a client's "unknown").
    assert parse_request({"t": "tvsearch", "tvdbid": "", "imdbid": "0"}).ids == MediaIds()
    for name, value in (
        ("imdbid", "nm0000206"),
        ("imdbid", "tt"),
        ("imdbid", "123456789"),
        ("tvdbid", "-5"),
        ("tvmazeid", "169.0"),
        ("tmdbid", "603-the-matrix"),
    ):
        with pytest.raises(NewznabError, match=name) as raised:
            parse_request({"t": "movie", name: value})
        assert raised.value.code == 201


def test_caps_offer_the_ids_each_search_takes() -> None:
    caps = ET.fromstring(caps_xml(Site("http://h")))
    offered = {
        mode.tag: mode.get("supportedParams", "").split(",")
        for mode in caps.findall("./searching/*")
    }
    assert offered["movie-search"] == ["q", "imdbid", "tmdbid"]
    assert offered["tv-search"] == ["q", "season", "ep", "tvdbid", "tvmazeid", "imdbid"]
    assert offered["search"] == ["q"]
    assert set(offered) == set(SEARCH_MODES)


def test_items_carry_the_ids_as_radarr_and_sonarr_read_them() -> None:
    item = Item("0" * 32, FILM, 2040, 10, 1, "p", ("g",), 0, 0, 1.0,
                ids=MediaIds(imdb=133093, tmdb=603))  # fmt: skip
    bare = Item("1" * 32, SHOW, 5040, 10, 1, "p", ("g",), 0, 0, 1.0)
    feed = ET.fromstring(
        feed_xml(Site("http://h"), [item, bare], offset=0, total=2, apikey="k", extended=False)
    )
    with_ids, without = (attrs_of(i) for i in items(feed))
    # `imdb`: 7 digits at least, no "tt" (Radarr parses it as a number).
    assert (with_ids["imdb"], with_ids["tmdbid"]) == (["0133093"], ["603"])
    assert not {"imdb", "tvdbid", "tvmazeid", "tmdbid"} & without.keys()


# ---------------------------------------------------------------------------
# Probes: what an NFO tells, which NFO is read (pure)


def test_an_nfo_body_tells_its_ids_with_or_without_a_release_name() -> None:
    text = f"  Release : {FILM}\r\n  {FILM_LINKS[0]}\r\n  {FILM_LINKS[1]}\r\n"
    found = examine(yenc_article(text.encode("cp437"), f"{FILM}.nfo".encode()), f"{FILM}.nfo",
                    FILM)  # fmt: skip
    assert found.verdict is Verdict.ALREADY_NAMED
    assert found.ids == MediaIds(imdb=15239678, tmdb=693134)
    links_only = examine(
        yenc_article(f"{SHOW_LINKS[0]}\r\n".encode(), b"info.nfo"), "info.nfo", SHOW
    )
    assert (links_only.verdict, links_only.ids) == (Verdict.NO_NAMES, MediaIds(tvdb=364196))


def well_named(name: str, *extra: str) -> CatalogRelease:
    """A release posted under its real name (no probe asked by the indexer): its video
    and the `extra` files (an NFO, a par2 index)."""
    made = [file(f"{name}.mkv", 20, index=1), *(file(n, 1, size=3_000) for n in extra)]
    return attrs.evolve(release(b"w" * 16, name, *made), probe_candidate=False)


def test_a_film_or_a_show_has_its_nfo_probed_once_and_nothing_else() -> None:
    film = well_named(FILM, f"{FILM}.nfo", f"{FILM}.par2")
    nfo = next(f for f in film.files if f.name.endswith(".nfo"))
    first = nfo.segments[0][1]
    assert more_probes([Shown(film)], {}, {}) == [(film.key, first, nfo.name)]
    # Once asked, never again, and its par2 is not read for it: the name stands.
    assert more_probes([Shown(film)], {film.key: {first}}, {}) == []
    assert more_probe(film, {first}, {}) is None
    # Music, software, books: no id to find, no probe.
    assert ids_probe(film, set(), 3010) is None
    assert ids_probe(film, set(), 4050) is None
    assert ids_probe(film, set(), 5040) is not None
    # A release without an NFO: nothing to read.
    assert more_probes([Shown(well_named(FILM, f"{FILM}.par2"))], {}, {}) == []


def test_a_well_named_release_keeps_its_name_and_takes_its_nfos_ids() -> None:
    film = well_named(FILM, f"{FILM}.nfo")
    nfo = next(f for f in film.files if f.name.endswith(".nfo"))
    # Its NFO names it otherwise (a group's habit): the ids count, the name not.
    finding = Finding("Dune.2.2024.BluRay-SPARKS", message_id=nfo.segments[0][1],
                      ids=MediaIds(imdb=15239678))  # fmt: skip
    (shown,) = apply([film], {film.key: [finding]})
    assert shown.release.name == FILM
    entry: CatalogEntry = catalog_entry(shown, {film.key: [finding]})
    assert entry.ids == MediaIds(imdb=15239678)
    # A finding of another upload's segment (a key shared by two uploads) is not its.
    other = Finding(None, message_id="elsewhere@x", ids=MediaIds(imdb=1))
    assert catalog_entry(Shown(film), {film.key: [other]}).ids == MediaIds()


def catalog_entry(shown: Shown, found: dict[bytes, list[Finding]]) -> CatalogEntry:
    return entry(shown, {k: datetime.now(UTC) for k in shown.release.sources}, found)


# ---------------------------------------------------------------------------
# The search by id (a real PostgreSQL)

ROWS = 20_000
_FILL = """
    INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups, posted,
                         completion, probe_candidate, sources, shown, imdb, tvdb)
    SELECT md5(n::text), 'Film.' || n || '.2020.1080p.BluRay.x264-GRP',
           'film ' || n || ' 2020 1080p bluray x264 grp', 2040, 1000, 3, 'p', ARRAY['a.b.x'],
           1700000000 + n, 1, false, ARRAY[decode(md5(n::text), 'hex')], true,
           -- One film in five has an IMDb id, shared by its reposts (n %% 1000).
           CASE WHEN n %% 5 = 0 THEN 1000000 + n %% 1000 END,
           CASE WHEN n %% 7 = 0 THEN 300000 + n %% 500 END
    FROM generate_series(1, %(rows)s) AS n
"""


@pytest.fixture
def ids_table(pool: ConnectionPool) -> CatalogTable:
    with pool.connection() as conn:
        conn.execute(_FILL, {"rows": ROWS})
        conn.execute("ANALYZE catalog")
    return CatalogTable(pool)


def test_a_search_by_id_finds_its_rows_by_the_partial_index(
    ids_table: CatalogTable, pool: ConnectionPool
) -> None:
    wanted = 1_000_000 + 235
    expected = [f"Film.{n}.2020.1080p.BluRay.x264-GRP" for n in range(ROWS, 0, -1)
                if n % 5 == 0 and n % 1000 == 235]  # fmt: skip
    assert len(expected) == ROWS // 1000  # 235, 1235, ... 19235
    total, page = ids_table.search(Search(ids=MediaIds(imdb=wanted)))
    assert [r.item.name for r in page] == expected
    assert total == len(expected)
    assert page[0].item.ids.imdb == wanted
    # With q too: both must match.
    first = expected[0].split(".")[1]
    total, page = ids_table.search(Search(words=first, ids=MediaIds(imdb=wanted)))
    assert [r.item.name for r in page] == [expected[0]]
    # Two ids (one title's, as Radarr and Sonarr send them): either matches.
    total, page = ids_table.search(Search(ids=MediaIds(imdb=wanted, tvdb=1)))
    assert [r.item.name for r in page] == expected
    assert total == len(expected)
    imdb_or_tvdb = [
        f"Film.{n}.2020.1080p.BluRay.x264-GRP"
        for n in range(ROWS, 0, -1)
        if (n % 5 == 0 and n % 1000 == 235) or (n % 7 == 0 and n % 500 == 7)
    ]
    total, page = ids_table.search(Search(ids=MediaIds(imdb=wanted, tvdb=300_007)))
    assert [r.item.name for r in page] == imdb_or_tvdb[:100]
    assert total == len(imdb_or_tvdb)
    with pool.connection() as conn:
        plan = _plan(conn, Search(ids=MediaIds(imdb=wanted)))
        assert "catalog_imdb" in plan, plan
        assert "Seq Scan" not in plan, plan
        plan = _plan(conn, Search(ids=MediaIds(tvdb=300_007)))
        assert "catalog_tvdb" in plan, plan
        plan = _plan(conn, Search(ids=MediaIds(imdb=wanted, tvdb=300_007)))
        assert "catalog_imdb" in plan, plan
        assert "catalog_tvdb" in plan, plan
        assert "Seq Scan" not in plan, plan


def _plan(conn: psycopg.Connection[Any], search: Search) -> str:
    """The plan of the page a search by id without words reads (store/catalog.py's
    _id_page)."""
    where, params = catalog._where(catalog._filters(search))
    page = pgsql.SQL("EXPLAIN " + catalog._BITMAP_PAGE).format(where)
    found = psycopg.ClientCursor(conn).execute(page, [*params, 101, 0]).fetchall()
    return "\n".join(str(r[0]) for r in found)


# The names and ids of releases whose NFOs named some of their film's or show's ids.
_NAMED = (
    ("The.Matrix.1999.1080p.BluRay.x264-GRP", 2040, {"imdb": 133093}),
    ("The.Matrix.1999.2160p.UHD.BluRay.x265-GRP", 2045, {"imdb": 133093, "tmdb": 603}),
    ("The.Matrix.1999.720p.WEB.h264-GRP", 2040, {"tmdb": 603}),
    ("Heat.1995.1080p.BluRay.x264-GRP", 2040, {"imdb": 113277, "tmdb": 949}),
    ("Slow.Horses.S04E02.1080p.WEB.H264-NTb", 5040, {"tvdb": 364196}),
    ("Slow.Horses.S04E02.720p.WEB.H264-NTb", 5040, {"tvmaze": 40289}),
    ("Slow.Horses.S04E02.2160p.WEB.H265-NTb", 5045, {"imdb": 5875444, "tvdb": 364196}),
    ("Slow.Horses.S04E03.1080p.WEB.H264-NTb", 5040, {"tvdb": 364196}),
)


@pytest.mark.trio
async def test_the_ids_of_one_film_or_show_asked_together_find_a_release_naming_any(
    settings: Settings, stores: Stores
) -> None:
    """Radarr sends every id it knows of a film in one request (`tmdbid=603&imdbid=0133093`,
    its NewznabRequestGenerator's aggregated id search, as caps offers both), Sonarr
    and Prowlarr every id of a show (`tvdbid=&imdbid=&tvmazeid=` with season and
    ep): ids of one title, any of which a release's NFO may have named. A release
    naming one of them is found; a page that missed it would end the search there
    (a tier with results is the last one they ask)."""
    rows = [(name, 1_700_000_000 + n) for n, (name, _, _) in enumerate(_NAMED)]
    insert_rows(stores, rows)
    with stores.catalog.pool.connection() as conn:
        for n, (name, category, ids) in enumerate(_NAMED):
            episode = re.search(r"S(\d\d)E(\d\d)", name)
            season, number = (None, None) if episode is None else map(int, episode.groups())
            conn.execute(
                "UPDATE catalog SET category = %s, imdb = %s, tvdb = %s, tvmaze = %s, tmdb = %s,"
                " season = %s, episode = %s WHERE guid = %s",
                (category, ids.get("imdb"), ids.get("tvdb"), ids.get("tvmaze"), ids.get("tmdb"),
                 season, number, f"{n + 1:032x}"),
            )  # fmt: skip
    key = stores.users.create("radarr")
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(partial(serve, settings, stores))
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
                radarr = await get_xml(client, t="movie", cat="2000,2040,2045", extended="1",
                                       apikey=key, offset="0", limit="100", tmdbid="603",
                                       imdbid="0133093")  # fmt: skip
                sonarr = await get_xml(client, t="tvsearch", cat="5000,5040,5045", extended="1",
                                       apikey=key, offset="0", limit="100", tvdbid="364196",
                                       imdbid="tt5875444", tvmazeid="40289", season="4",
                                       ep="2")  # fmt: skip
                # Another title's ids find none of these.
                other = await get_xml(client, t="movie", apikey=key, tmdbid="1", imdbid="2")
            nursery.cancel_scope.cancel()
    assert titles(radarr) == [name for name, _, _ in _NAMED[2::-1]]
    response = radarr.find("./channel/newznab:response", NS)
    assert response is not None
    assert response.get("total") == "3"
    assert titles(sonarr) == [name for name, _, _ in _NAMED[6:3:-1]]
    assert titles(other) == []
