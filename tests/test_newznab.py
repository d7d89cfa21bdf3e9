"""The newznab API at /api, as the downloaders and their automation read it.

Batches of generated lines are stored in a real PostgreSQL, the searchable
catalog is built, and the coordinator serves /api over real HTTP; each test
reads the answers the way Sonarr, Radarr, Prowlarr, NZBHydra2 and SABnzbd
do (XML with ElementTree, the enclosure URL fetched as it is, the NZB
parsed). Errors are HTTP 200 with an error element, never a 5xx.
"""

from __future__ import annotations

import email.utils
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from urllib.parse import parse_qsl
from xml.etree import ElementTree as ET

import attrs
import httpx
import orjson
import pytest
import trio
from test_catalog_build import batches_of_generated
from test_completion import NGPOST, WIN_UNICODE, load
from test_offered import after, replayed, stored_batches

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.newznab import (
    NEWZNAB_NS,
    Item,
    NewznabError,
    Site,
    content_disposition,
    error_xml,
    feed_json,
    feed_xml,
    parse_request,
)
from usenet_indexer.core.nzb import Nzb, parse_nzb
from usenet_indexer.store import catalog
from usenet_indexer.store.catalog import search_name

NS = {"newznab": NEWZNAB_NS}
TTL = 900.0


def store_generated(stores: Stores, articles: int, seed: int) -> int:
    """Index generated lines as an edge would and store the batches; the catalog rows built."""
    for _ in batches_of_generated(stores, articles, seed, every=5_000):
        pass
    return stores.build.everything(quiet_seconds=0).releases


@pytest.fixture
async def api(settings: Settings, stores: Stores) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A client on the coordinator serving the catalog of 20k generated articles, and a key."""
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    key = stores.users.create("sonarr")
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            yield client, key
        nursery.cancel_scope.cancel()


async def get_xml(client: httpx.AsyncClient, **params: str) -> ET.Element:
    response = await client.get("/api", params=params)
    assert response.status_code == 200, response.text
    return ET.fromstring(response.content)


def items(feed: ET.Element) -> list[ET.Element]:
    return feed.findall("./channel/item")


def attrs_of(item: ET.Element) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for attr in item.findall("newznab:attr", NS):
        found.setdefault(attr.get("name", ""), []).append(attr.get("value", ""))
    return found


@pytest.mark.trio
async def test_caps_needs_no_key_and_lists_what_the_arr_programs_read(
    api: tuple[httpx.AsyncClient, str],
) -> None:
    client, _ = api
    caps = await get_xml(client, t="caps")
    limits = caps.find("limits")
    assert limits is not None
    assert 0 < int(limits.get("default", "0")) <= int(limits.get("max", "0"))
    searching = caps.find("searching")
    assert searching is not None
    for mode in ("search", "tv-search", "movie-search"):
        element = searching.find(mode)
        assert element is not None
        assert element.get("available") == "yes"
        assert " " not in element.get("supportedParams", " ")
    tv = searching.find("tv-search")
    assert tv is not None
    assert set(tv.get("supportedParams", "").split(",")) >= {"q", "season", "ep"}
    parents = {int(c.get("id", "0")) for c in caps.findall("./categories/category")}
    assert parents == {1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000}
    tv_subcats = {
        int(s.get("id", "0")) for s in caps.findall("./categories/category[@id='5000']/subcat")
    }
    assert {5030, 5040, 5045} <= tv_subcats


@pytest.mark.trio
async def test_no_key_or_a_wrong_one_is_error_100_with_status_200(
    api: tuple[httpx.AsyncClient, str],
) -> None:
    client, key = api
    for params in (
        {"t": "search"},
        {"t": "search", "apikey": "wrong"},
        {"t": "get", "id": "0" * 32},
    ):
        error = await get_xml(client, **params)
        assert error.tag == "error"
        assert error.get("code") == "100"
    # A node token is no API key.
    assert (await get_xml(client, t="search", apikey="x" + key[1:])).get("code") == "100"


@pytest.mark.trio
async def test_the_newest_feed_pages_and_its_enclosures_fetch_their_nzb(
    api: tuple[httpx.AsyncClient, str],
) -> None:
    """Sonarr's RSS sync: no q, newest first; pages are consecutive slices of one order;
    each enclosure URL works as it is and its NZB matches the item."""
    client, key = api
    feed = await get_xml(client, t="search", apikey=key, extended="1", limit="50")
    response = feed.find("./channel/newznab:response", NS)
    assert response is not None
    total = int(response.get("total", "0"))
    first_page = items(feed)
    # At least what follows the page: exact on the last page.
    assert total > len(first_page) == 50
    last = await get_xml(client, t="search", apikey=key, offset="50", limit="50")
    last_total = last.find("./channel/newznab:response", NS)
    assert last_total is not None
    assert int(last_total.get("total", "0")) == 50 + len(items(last)) < 100
    dates = [email.utils.parsedate_to_datetime(i.findtext("pubDate", "")) for i in first_page]
    assert dates == sorted(dates, reverse=True)
    for item in first_page[:5]:
        # RFC 1123 with the weekday right: "Sun, 06 Jun 2010 17:29:23 +0000".
        text = item.findtext("pubDate", "")
        when = email.utils.parsedate_to_datetime(text)
        assert text == when.strftime("%a, %d %b %Y %H:%M:%S +0000")
    paged = []
    for offset in (0, 7, 14):
        page = await get_xml(client, t="search", apikey=key, limit="7", offset=str(offset))
        paged += [i.findtext("guid") for i in items(page)]
    assert paged == [i.findtext("guid") for i in first_page[:21]]
    for item in first_page[:4]:
        enclosures = item.findall("enclosure")
        assert len(enclosures) == 1
        enclosure = enclosures[0]
        assert enclosure.get("type") == "application/x-nzb"
        found = attrs_of(item)
        assert found["size"] == [enclosure.get("length")]
        assert all(c.isdigit() and int(c) >= 1000 for c in found["category"])
        url = enclosure.get("url", "")
        assert f"apikey={key}" in url
        nzb_response = await client.get(url)
        assert nzb_response.status_code == 200
        assert nzb_response.headers["content-disposition"].startswith("attachment; filename=")
        nzb = parse_nzb(nzb_response.content)
        assert len(nzb.files) == int(found["files"][0])
        size = sum(s.bytes for f in nzb.files for s in f.segments)
        assert abs(size - int(found["size"][0])) <= 0.05 * int(found["size"][0])
    details = await get_xml(
        client, t="details", apikey=key, id=first_page[0].findtext("guid", ""), extended="1"
    )
    assert attrs_of(items(details)[0])["grabs"] == ["1"]


async def pages_of(
    client: httpx.AsyncClient, limit: int, **params: str
) -> tuple[list[int], list[str]]:
    """Every page of a query, as NZBHydra2 pages one (on while offset + items < total):
    each page's total, and the guids of all the pages in order."""
    totals: list[int] = []
    guids: list[str] = []
    while True:
        page = await get_xml(client, **params, limit=str(limit), offset=str(len(guids)))
        response = page.find("./channel/newznab:response", NS)
        assert response is not None
        totals.append(int(response.get("total", "-1")))
        assert int(response.get("offset", "-1")) == len(guids)
        found = [i.findtext("guid", "") for i in items(page)]
        guids += found
        if not found or len(guids) >= totals[-1]:
            return totals, guids


@pytest.mark.trio
async def test_a_query_has_one_total_on_every_page(
    api: tuple[httpx.AsyncClient, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """NZBHydra2 pages by the total: every page of a query says the same one, and it is
    the number of releases the pages hold (no word, a word, a category)."""
    client, key = api
    newest = items(await get_xml(client, t="search", apikey=key))
    # The word most of the newest names have, and their commonest category.
    words = Counter(w for i in newest for w in set(search_name(i.findtext("title", "")).split()))
    word = next(w for w, _ in words.most_common() if len(w) > 2)
    category = Counter(attrs_of(i)["category"][-1] for i in newest).most_common(1)[0][0]
    for query in ({}, {"q": word}, {"cat": category}):
        totals, guids = await pages_of(client, 7, t="search", apikey=key, **query)
        assert len(totals) >= 2, query  # more than one page: the test means something
        assert set(totals) == {len(guids)}, (query, totals)
        assert len(set(guids)) == len(guids)
        whole = items(await get_xml(client, t="search", apikey=key, limit="100", **query))
        if len(whole) < 100:
            assert guids == [i.findtext("guid") for i in whole]
    # Past the count's cap the total says "at least the cap", the same on every page.
    monkeypatch.setattr(catalog, "_COUNT_MAX", 10)
    for offset in ("0", "5", "9", "20", "100"):
        feed = await get_xml(client, t="search", apikey=key, limit="5", offset=offset)
        response = feed.find("./channel/newznab:response", NS)
        assert response is not None
        assert response.get("total") == "10", offset
    # A page past the end still tells the query's total.
    past = await get_xml(client, t="search", apikey=key, q=word, offset="5000")
    response = past.find("./channel/newznab:response", NS)
    assert response is not None
    assert items(past) == []
    assert response.get("total") == str(min(10, len(guids)))


@pytest.mark.trio
async def test_season_and_episode_attrs_are_numbers(api: tuple[httpx.AsyncClient, str]) -> None:
    """The attrs as the newznab spec has them: "5", not "S05"."""
    client, key = api
    tv = items(await get_xml(client, t="tvsearch", apikey=key, cat="5000", limit="100"))
    numbered = [attrs_of(i) for i in tv if "season" in attrs_of(i)]
    assert numbered
    for found in numbered:
        assert all(v.isdigit() for v in found["season"] + found.get("episode", [])), found
    first = next(f for f in numbered if "episode" in f)
    season, episode = first["season"][0], first["episode"][0]
    asked = items(
        await get_xml(client, t="tvsearch", apikey=key, season=season, ep=episode, cat="5000")
    )
    assert asked
    assert {(attrs_of(i)["season"][0], attrs_of(i)["episode"][0]) for i in asked} == {
        (season, episode)
    }


@pytest.mark.trio
async def test_details_give_every_attr_a_search_with_extended_gives(
    api: tuple[httpx.AsyncClient, str],
) -> None:
    """t=details (Prowlarr, NZBHydra2 ask it without extended=1) gives the files, the
    grabs and every other attr of `t=search&extended=1`, with the same values."""
    client, key = api
    for item in items(await get_xml(client, t="search", apikey=key, extended="1", limit="5")):
        guid = item.findtext("guid", "")
        for extended in ({}, {"extended": "1"}):
            details = items(await get_xml(client, t="details", apikey=key, id=guid, **extended))
            assert [d.findtext("guid") for d in details] == [guid]
            assert attrs_of(details[0]) == attrs_of(item)
            assert {"files", "grabs", "poster", "usenetdate"} <= set(attrs_of(details[0]))


def nfo_as_nzbhydra2_reads_it(body: bytes) -> str | None:
    """A t=getnfo answer as NZBHydra2's Newznab.getNfo reads it: a body without "<?xml"
    is the NFO; an error element is a failure (raised here); a feed whose
    newznab:response is missing or says total 0 means the item has no NFO (None);
    else the first item's description is the NFO."""
    if b"<?xml" not in body:
        return body.decode()
    root = ET.fromstring(body)
    if root.tag == "error":
        raise AssertionError(f"NZBHydra2 reports a failure: error {root.get('code')}")
    response = root.find("./channel/newznab:response", NS)
    if response is None or response.get("total") == "0":
        return None
    return items(root)[0].findtext("description", "")


@pytest.mark.trio
async def test_getnfo_of_a_release_without_an_nfo_is_an_empty_feed_and_of_none_error_300(
    api: tuple[httpx.AsyncClient, str],
) -> None:
    """NZBHydra2 asks t=getnfo&raw=1 and takes total 0 for "no NFO", an error for a
    failure; newznab's error 300 stays for an id that is no item."""
    client, key = api
    guid = items(await get_xml(client, t="search", apikey=key, limit="1"))[0].findtext("guid")
    assert guid
    for raw in ({"raw": "1"}, {}):
        answer = await client.get("/api", params={"t": "getnfo", "apikey": key, "id": guid, **raw})
        assert answer.status_code == 200
        assert nfo_as_nzbhydra2_reads_it(answer.content) is None
        assert items(ET.fromstring(answer.content)) == []
        unknown = await client.get(
            "/api", params={"t": "getnfo", "apikey": key, "id": "0" * 32, **raw}
        )
        assert ET.fromstring(unknown.content).get("code") == "300"
    as_json = await client.get(
        "/api", params={"t": "getnfo", "apikey": key, "id": guid, "o": "json"}
    )
    assert orjson.loads(as_json.content)["channel"]["response"]["@attributes"]["total"] == "0"


@pytest.mark.trio
async def test_q_words_all_match_and_categories_filter(api: tuple[httpx.AsyncClient, str]) -> None:
    client, key = api
    newest = items(await get_xml(client, t="search", apikey=key))
    name = newest[0].findtext("title", "")
    words = [
        w for w in name.replace(".", " ").replace("-", " ").replace("_", " ").split() if len(w) > 2
    ][:2]
    found = items(await get_xml(client, t="search", apikey=key, q=" ".join(words)))
    assert name in [i.findtext("title") for i in found]
    for item in found:
        title = item.findtext("title", "").lower()
        assert all(w.lower() in title for w in words)
    category = attrs_of(newest[0])["category"][0]
    in_category = items(await get_xml(client, t="search", apikey=key, cat=f"{category},99999"))
    assert in_category
    assert all(category in attrs_of(i)["category"] for i in in_category)


@pytest.mark.trio
async def test_q_as_a_name_is_written_or_cut_short_finds_the_release(
    api: tuple[httpx.AsyncClient, str],
) -> None:
    client, key = api
    name = items(await get_xml(client, t="search", apikey=key))[0].findtext("title", "")
    words = [w for w in search_name(name).split() if len(w) > 4][:2]
    assert words, name
    asked = {
        "dotted": ".".join(w.upper() for w in words),
        "cut short": " ".join(w[:-1] for w in words),
    }
    for how, q in asked.items():
        found = items(await get_xml(client, t="search", apikey=key, q=q))
        assert name in [i.findtext("title") for i in found], (how, q)
    # A typo is no error: an empty feed, HTTP 200, well within a second.
    with trio.fail_after(1):
        assert items(await get_xml(client, t="search", apikey=key, q=words[0] + "qzx")) == []


@pytest.mark.trio
async def test_hostile_values_get_an_error_or_a_sane_feed(
    api: tuple[httpx.AsyncClient, str],
) -> None:
    client, key = api
    cases = {
        (("t", "search"), ("q", "'; DROP TABLE catalog; --")): "rss",
        (("t", "search"), ("q", "a\x00b")): "rss",
        (("t", "search"), ("q", "x" * 4000)): "rss",
        (("t", "search"), ("limit", "100000")): "rss",
        (("t", "search"), ("limit", "abc")): "201",
        (("t", "search"), ("offset", "-1")): "201",
        (("t", "tvsearch"), ("season", "S1x")): "201",
        (("t", "details"), ("id", "../../etc/passwd")): "300",
        (("t", "getnfo"), ("id", "0" * 32)): "300",
        (("t", "nonsense"),): "202",
        (("t", "register"),): "203",
        (("q", "x"),): "200",
        (("t", "details"),): "200",
        (("t", "search"), ("group", "alt.binaries.\x00test")): "rss",
        (("t", "search"), ("apikey", "\x00")): "100",  # the first apikey counts
        (("t", "search"), *((f"x{n}", "1") for n in range(150))): "200",
        # What is asked may be echoed in the error: never what XML cannot hold.
        (("t", "\x01"),): "202",
        (("t", "\ufffe"),): "202",
        # A maxage past every release (days past a bigint's seconds) is no bound.
        (("t", "search"), ("q", "x"), ("maxage", "999999999999999")): "rss",
        (("t", "tvsearch"), ("season", "S1"), ("ep", "05/12")): "201",
        (("t", "tvsearch"), ("season", "2023"), ("ep", "02/30")): "201",
    }
    for pairs, expected in cases.items():
        response = await client.get("/api", params=[*pairs, ("apikey", key)])
        assert response.status_code == 200, (pairs, response.text)
        root = ET.fromstring(response.content)
        if expected == "rss":
            assert root.tag == "rss", pairs
            assert len(items(root)) <= 100
        else:
            assert root.tag == "error", pairs
            assert root.get("code") == expected, pairs
    assert (
        await client.get("/api", params={"t": "get", "id": "f" * 32, "apikey": key})
    ).status_code == 404


@pytest.mark.trio
async def test_json_is_the_xml_one_to_one(api: tuple[httpx.AsyncClient, str]) -> None:
    client, key = api
    xml_items = items(await get_xml(client, t="search", apikey=key, limit="3"))
    response = await client.get(
        "/api", params={"t": "search", "apikey": key, "limit": "3", "o": "json"}
    )
    data = orjson.loads(response.content)
    json_items = data["channel"]["item"]
    assert [i["guid"] for i in json_items] == [i.findtext("guid") for i in xml_items]
    enclosures = [i.find("enclosure") for i in xml_items]
    assert [i["enclosure"]["@attributes"]["length"] for i in json_items] == [
        e.get("length") for e in enclosures if e is not None
    ]
    error = orjson.loads((await client.get("/api", params={"t": "search", "o": "json"})).content)
    assert error["error"]["@attributes"]["code"] == "100"


def test_names_xml_cannot_hold_are_cut_and_the_rest_escaped() -> None:
    item = Item("0" * 32, 'bad\x01na<me> & "x"\ud800', 5040, 10, 1, "p <p@x>", ("g",), 0, 0, 1.0)
    feed = ET.fromstring(
        feed_xml(Site("http://h"), [item], offset=0, total=1, apikey="k", extended=True)
    )
    assert feed.findtext("./channel/item/title") == 'badna<me> & "x"'
    data = orjson.loads(
        feed_json(Site("http://h"), [item], offset=0, total=1, apikey="k", extended=True)
    )
    assert data["channel"]["item"][0]["title"] == 'badna<me> & "x"'


def test_a_content_disposition_holds_one_quoted_name_and_its_rfc_5987_form() -> None:
    """The first filename is the name's own bytes in one quoted string (NZBGet takes
    it up to the closing quote); filename* follows only when that differs from ASCII."""
    assert content_disposition("a b.nzb") == b'attachment; filename="a b.nzb"'
    assert content_disposition("Amélie.nzb") == (
        b"attachment; filename=\"Am\xc3\xa9lie.nzb\"; filename*=UTF-8''Am%C3%A9lie.nzb"
    )
    assert content_disposition('a"b\\c\r\n.nzb') == (
        b"attachment; filename=\"a_b_c__.nzb\"; filename*=UTF-8''a%22b%5Cc%0D%0A.nzb"
    )


def test_feed_links_dates_and_comments_read_back_as_given() -> None:
    """What a client reads of each item's URLs and date, with values that need
    quoting and escaping (feed_xml writes the parts items share once per feed)."""
    site = Site("https://ex.org/idx?a=1&b=<2>", "T&T")
    names = ["Show.Name.S01E02.1080p-GRP", 'a b&c<d>"é漢', "x\ud800y", "100% +1 = ~#/?"]
    posted = [0, 1_700_000_000, 2**31 + 5, 4_102_444_799]
    items = [
        Item(guid, name, 5040, 10, 1, "p", ("g",), when, 0, 1.0)
        for guid, name, when in zip(("0" * 32, "a b+c", "é/?", "+%<&>"), names, posted, strict=True)
    ]
    apikey = "k&y é+%"
    feed = ET.fromstring(feed_xml(site, items, offset=0, total=4, apikey=apikey, extended=False))
    read = feed.findall("./channel/item")
    assert len(read) == len(items)
    for item, element in zip(items, read, strict=True):
        link = element.findtext("link") or ""
        enclosure = element.find("enclosure")
        assert enclosure is not None
        assert enclosure.get("url") == link
        assert element.findtext("guid") == item.guid
        assert link.startswith("https://ex.org/idx?a=1&b=<2>/api?")
        query = dict(parse_qsl(link.split("/api?", 1)[1], keep_blank_values=True))
        assert query == {"t": "get", "id": item.guid, "apikey": apikey}
        comments = element.findtext("comments") or ""
        assert comments.startswith("https://ex.org/idx?a=1&b=<2>/?q=")
        asked = parse_qsl(comments.split("/?q=", 1)[1].join(("q=", "")), errors="replace")
        assert asked == [("q", item.name.encode("utf-8", "replace").decode())]
        date = email.utils.parsedate_to_datetime(element.findtext("pubDate") or "")
        assert date.timestamp() == item.posted
        assert element.findtext("pubDate") == email.utils.format_datetime(date).replace(
            "-0000", "+0000"
        )


def test_requests_are_checked_by_name() -> None:
    request = parse_request(
        {"t": "tvsearch", "q": "Show", "season": "S13", "ep": "E05", "cat": "5000,777,5040"}
    )
    assert (request.season, request.episode, request.categories) == (13, 5, (5000, 5040))
    assert parse_request({"t": "tvsearch", "season": "00"}).season == 0
    assert parse_request({"t": "search", "limit": "5000"}).limit == 100
    with pytest.raises(NewznabError, match="maxage") as raised:
        parse_request({"t": "search", "maxage": "1e9"})
    assert raised.value.code == 201


def test_users_keys_are_stored_hashed_and_revoked(
    stores: Stores, pool: object, tmp_path: Path
) -> None:
    key = stores.users.create("radarr")
    user = stores.users.authenticate(key)
    assert user is not None
    assert (user.name, user.operator) == ("radarr", False)
    with stores.users.pool.connection() as conn:
        stored = [bytes(r[0]) for r in conn.execute("SELECT key_hash FROM api_users").fetchall()]
    assert key.encode() not in stored
    assert stores.nodes.authenticate(key) is None
    stores.users.revoke("radarr")
    assert stores.users.authenticate(key) is None


def insert_rows(stores: Stores, rows: list[tuple[str, int]]) -> None:
    """Catalog rows of (name, posted) as a build leaves them, shown."""
    with stores.catalog.pool.connection() as conn, conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO catalog (guid, name, search_name, category, size, files, poster,"
            " groups, posted, completion, probe_candidate, sources, shown)"
            " VALUES (%s, %s, %s, 5040, 1000, 1, 'p@example.com', ARRAY['alt.binaries.test'],"
            " %s, 1.0, false, ARRAY[]::bytea[], true)",
            [
                (f"{n + 1:032x}", name, search_name(name), posted)
                for n, (name, posted) in enumerate(rows)
            ],
        )


@pytest.mark.trio
async def test_sonarrs_daily_show_search_finds_the_episode_of_that_air_date(
    api: tuple[httpx.AsyncClient, str], stores: Stores
) -> None:
    """Sonarr asks for an episode of a daily show by its air date: `season=yyyy&ep=MM/dd`
    (its NewznabRequestGenerator), with the show's name or its TheTVDB id."""
    client, key = api
    posted = 1_683_900_000
    names = [
        "The.Daily.Talk.2023.05.12.720p.WEB.h264-GRP",
        "The.Daily.Talk.2023.05.11.720p.WEB.h264-GRP",
        "The.Daily.Talk.2023.12.05.1080p.WEB.h264-GRP",
        "Other.Show.2023.05.12.720p.HDTV.x264-GRP",
    ]
    await trio.to_thread.run_sync(
        insert_rows, stores, [(n, posted + i) for i, n in enumerate(names)]
    )
    found = items(
        await get_xml(client, t="tvsearch", apikey=key, cat="5000,5030,5040", extended="1",
                      q="The Daily Talk", season="2023", ep="05/12")
    )  # fmt: skip
    assert [i.findtext("title") for i in found] == [names[0]]
    # The date alone (an id search's words): every show of that day.
    dated = items(await get_xml(client, t="tvsearch", apikey=key, season="2023", ep="5-12"))
    assert {i.findtext("title") for i in dated} == {names[0], names[3]}


@pytest.mark.trio
async def test_sonarrs_daily_season_search_finds_the_episodes_of_that_year(
    settings: Settings, stores: Stores
) -> None:
    """A daily show's seasons are years: Sonarr's season search of one (its
    DailySeasonSearchCriteria) asks `season=yyyy` with no ep, by the show's name or
    its ids. Its episodes' names carry the air date (`Show.2023.05.12`), no season
    number: the year is asked as a word of the name, never as season 2023."""
    posted = 1_683_900_000
    names = [
        "The.Daily.Talk.2023.05.12.720p.WEB.h264-GRP",
        "The.Daily.Talk.2023.01.03.1080p.WEB.h264-GRP",
        "The.Daily.Talk.2022.12.30.720p.WEB.h264-GRP",
        "Other.Show.S01E01.720p.HDTV.x264-GRP",
    ]
    insert_rows(stores, [(n, posted - i) for i, n in enumerate(names)])
    with stores.catalog.pool.connection() as conn:
        conn.execute("UPDATE catalog SET season = 1, episode = 1 WHERE name LIKE 'Other.%'")
    key = stores.users.create("sonarr")
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            found = items(
                await get_xml(client, t="tvsearch", apikey=key, cat="5000,5030,5040",
                              extended="1", offset="0", limit="100", q="The Daily Talk",
                              season="2023")
            )  # fmt: skip
            season_one = items(await get_xml(client, t="tvsearch", apikey=key, season="1"))
        nursery.cancel_scope.cancel()
    assert [i.findtext("title") for i in found] == names[:2]
    assert [i.findtext("title") for i in season_one] == [names[3]]


@pytest.mark.trio
@pytest.mark.parametrize("far", [253_402_351_199, 2**62, -(2**63), 2**63 - 2])
async def test_a_release_dated_past_what_a_date_holds_leaves_feeds_and_searches_working(
    api: tuple[httpx.AsyncClient, str], stores: Stores, far: int
) -> None:
    """A Date header of 31 Dec 9999 -1400 (year 10000 in UTC) or any bigint a node sent:
    the feed (every RSS reader's, newest first), JSON, a q search and the status page
    answer, with the date held at what a date can say."""
    client, key = api
    await trio.to_thread.run_sync(
        insert_rows,
        stores,
        [("Far.Dated.Release.2023.1080p-GRP", far), ("Far.Neighbour-GRP", 1_700_000_000)],
    )
    feed = await get_xml(client, t="search", apikey=key, q="far", limit="100")
    dates = {i.findtext("title"): i.findtext("pubDate") for i in items(feed)}
    assert dates["Far.Neighbour-GRP"] == "Tue, 14 Nov 2023 22:13:20 +0000"
    expected = "Fri, 31 Dec 9999 23:59:59 +0000" if far > 0 else "Mon, 01 Jan 0001 00:00:00 +0000"
    assert dates["Far.Dated.Release.2023.1080p-GRP"] == expected
    newest = await client.get("/api", params={"t": "search", "apikey": key, "o": "json"})
    assert newest.status_code == 200
    for guid in (f"{1:032x}", f"{2:032x}"):
        details = await get_xml(client, t="details", apikey=key, id=guid)
        assert len(items(details)) == 1
    # The status page's recent releases (the newest) list it, dated as the feed dates it.
    operator = stores.users.create("operator", operator=True)
    page = await client.get("/", params={"apikey": operator})
    assert page.status_code == 200, page.text
    assert ("9999-12-31 23:59" in page.text) == (far > 0)


@pytest.mark.trio
async def test_a_release_not_shown_yet_is_no_ones_by_its_guid(
    settings: Settings, stores: Stores
) -> None:
    """A release not shown (incomplete, not quiet yet) is in no feed or search: asked by
    its guid (a release key, which anyone indexing the group can work out), t=details,
    t=get and t=failed do not hand it out either, until it is shown."""
    insert_rows(stores, [("Waiting.Show.S01E01.720p-GRP", int(time.time()) - 60)])
    guid = f"{1:032x}"
    with stores.catalog.pool.connection() as conn:
        conn.execute("UPDATE catalog SET shown = false, completion = 0.5 WHERE guid = %s", (guid,))
    key = stores.users.create("sonarr")

    async def asked(client: httpx.AsyncClient) -> list[tuple[int, bytes]]:
        answers = []
        for function in ("details", "get", "failed"):
            answer = await client.get("/api", params={"t": function, "id": guid, "apikey": key})
            answers.append((answer.status_code, answer.content))
        return answers

    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            hidden = await asked(client)
            with stores.catalog.pool.connection() as conn:
                conn.execute("UPDATE catalog SET shown = true WHERE guid = %s", (guid,))
            details = await get_xml(client, t="details", id=guid, apikey=key)
        nursery.cancel_scope.cancel()
    assert hidden[0] == (200, error_xml(NewznabError(300, "no such item")))
    assert hidden[1] == (404, b"no such item\n")
    assert hidden[2] == (404, b"no such item\n")
    assert [item.findtext("guid") for item in items(details)] == [guid]
    assert not stores.users.failures([guid])


@pytest.mark.trio
async def test_a_release_dated_in_the_future_is_dated_when_it_was_stored(
    settings: Settings, stores: Stores, corpus_dir: Path
) -> None:
    """A poster whose clock is years ahead dates his headers so: the release is dated no
    later than when its articles were stored (the server had them by then), so the
    newest-first feed (Sonarr's RSS sync) lists the releases posted after it first
    instead of holding it at the top for years."""
    now = int(time.time())
    stored = now - 3_600  # when the far-dated upload was stored
    ahead = dated(load(corpus_dir, WIN_UNICODE), now + 10 * 365 * 86_400)
    later = dated(load(corpus_dir, NGPOST), now - 1_800)
    first = replayed([ahead], 1_000)
    future: set[str] = set()
    for at in stored_batches(stores, [first, replayed([later], after(first))]):
        if at == 1:
            with stores.catalog.pool.connection() as conn:
                keys = conn.execute(
                    "UPDATE releases SET updated_at = to_timestamp(%s) RETURNING key", (stored,)
                ).fetchall()
            future = {bytes(key).hex() for (key,) in keys}
    stores.build.everything(quiet_seconds=0)
    key = stores.users.create("sonarr")
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            newest = items(await get_xml(client, t="search", apikey=key))
            guid = next(g for g in (i.findtext("guid", "") for i in newest) if g in future)
            details = items(await get_xml(client, t="details", apikey=key, id=guid))
        nursery.cancel_scope.cancel()
    guids = [i.findtext("guid", "") for i in newest]
    assert guids.index(guid) == len(guids) - 1  # the later upload's files all come first
    shown = email.utils.format_datetime(datetime.fromtimestamp(stored, UTC))
    assert [i.findtext("pubDate") for i in (newest[-1], *details)] == [shown, shown]
    later_dates = {i.findtext("pubDate") for i in newest[:-1]}
    assert later_dates == {email.utils.format_datetime(datetime.fromtimestamp(now - 1_800, UTC))}


def dated(nzb: Nzb, date: int) -> Nzb:
    """The NZB with every file posted at `date`."""
    return attrs.evolve(nzb, files=tuple(attrs.evolve(f, date=date) for f in nzb.files))
