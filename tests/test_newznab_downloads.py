"""An NZB as SABnzbd and NZBGet fetch it, a failed download as they report it, and the
daily limits per key as the *arr programs, Prowlarr and NZBHydra2 read them.

A catalog of generated lines is built in a real PostgreSQL and the coordinator
serves /api over real HTTP. The downloaders read the X-DNZB headers of the NZB
(SABnzbd: Name, Category, Details, Failure, Password; NZBGet: Category, and
Failure, which its FailureLink script calls with GET after a failed download,
maybe with `&corrupt=true`, and reads the answer as another release's NZB when
it starts with "<?xml"). A limit reached is newznab error 500 "Request limit
reached" or 501 "Download limit reached", HTTP 200, with Retry-After.
"""

from __future__ import annotations

import email.message
import time
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from urllib.parse import quote
from xml.etree import ElementTree as ET

import attrs
import httpx
import pytest
import trio
from probe_tools import require_tool
from test_newznab import NS, attrs_of, get_xml, items, store_generated

from usenet_indexer.cli import main
from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.categories import CATEGORIES
from usenet_indexer.core.newznab import usage_day
from usenet_indexer.core.nzb import parse_nzb
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.users import DailyLimits, UserStore
from usenet_indexer.testing.nzbget import running_nzbget
from usenet_indexer.testing.processes import free_port

DEADLINE_SECONDS = 120
ARTICLES = 8_000


@pytest.fixture
def catalog(stores: Stores) -> Stores:
    """The stores, with a catalog of generated releases built."""
    assert store_generated(stores, ARTICLES, 11) > 20
    return stores


@asynccontextmanager
async def serving(settings: Settings, stores: Stores) -> AsyncIterator[httpx.AsyncClient]:
    """A client on the coordinator serving `stores` with `settings`."""
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=30) as client:
            yield client
        nursery.cancel_scope.cancel()


def filename_of(disposition: str) -> str:
    """The file name of a Content-Disposition, as a MIME parser (FailureLink's) reads it."""
    message = email.message.Message()
    message["content-disposition"] = disposition
    name = message.get_param("filename", header="content-disposition")
    assert isinstance(name, str), disposition
    return name


def seconds_to_utc_midnight() -> float:
    return 86_400 - time.time() % 86_400


def assert_limit_error(response: httpx.Response, code: str, description: str) -> None:
    """A newznab error with status 200 and a Retry-After until the UTC day ends."""
    assert response.status_code == 200
    error = ET.fromstring(response.content)
    assert (error.tag, error.get("code"), error.get("description")) == ("error", code, description)
    retry = int(response.headers["retry-after"])
    assert 0 < retry <= 86_400
    assert abs(retry - seconds_to_utc_midnight()) < 5


@pytest.mark.trio
async def test_an_nzb_comes_with_the_dnzb_headers_and_its_failure_url_records_a_failure(
    settings: Settings, catalog: Stores
) -> None:
    stores = catalog
    sab, nzbget = stores.users.create("sabnzbd"), stores.users.create("nzbget")
    with trio.fail_after(DEADLINE_SECONDS):
        async with serving(settings, stores) as client:
            feed = await get_xml(client, t="search", apikey=sab, extended="1", limit="10")
            # No limits set: no limits reported (NZBHydra2 would take any number for one).
            assert feed.find("./channel/newznab:apilimits", NS) is None
            item = items(feed)[0]
            title, guid = item.findtext("title", ""), item.findtext("guid", "")
            enclosure = item.find("enclosure")
            assert enclosure is not None
            nzb = await client.get(enclosure.get("url", ""))
            assert nzb.status_code == 200
            headers = nzb.headers
            # SABnzbd names the job after X-DNZB-Name (adding .nzb); NZBGet and
            # FailureLink after the Content-Disposition's file name.
            assert headers["x-dnzb-name"] == title
            assert filename_of(headers["content-disposition"]) == f"{title}.nzb"
            # "Parent > Sub", as newznab indexers send it (SABnzbd maps it by prefix).
            category = int(attrs_of(item)["category"][-1])
            assert headers["x-dnzb-category"].split(" > ") == CATEGORIES[category].split("/")
            # Nothing knows a password: none is sent.
            assert "x-dnzb-password" not in headers
            assert "retry-after" not in headers  # SABnzbd would fetch it again later
            assert parse_nzb(nzb.content).files
            # The details URL works as it is: the item, every attr.
            details = await get_xml(client, **dict(httpx.URL(headers["x-dnzb-details"]).params))
            (detailed,) = items(details)
            assert detailed.findtext("guid") == guid
            assert attrs_of(detailed)["grabs"] == ["1"]
            assert attrs_of(detailed)["failed"] == ["0"]

            async def report(url: str) -> httpx.Response:
                # As FailureLink calls it: GET, its own User-Agent, maybe &corrupt=true.
                return await client.get(url, headers={"user-agent": "NZBGet (FailureLink)"})

            async def failed() -> list[str]:
                found = items(await get_xml(client, t="details", apikey=sab, id=guid))
                return attrs_of(found[0])["failed"]

            failure_url = headers["x-dnzb-failure"]
            answer = await report(failure_url)
            assert answer.status_code == 200
            # Not "<?xml": FailureLink would queue that as another release's NZB.
            assert not answer.content.startswith(b"<?xml")
            assert await failed() == ["1"]
            assert (await report(failure_url + "&corrupt=true")).status_code == 200
            assert await failed() == ["1"]  # one user's reports count once
            # Another downloader's NZB carries its own key in its failure URL.
            other = await client.get(enclosure.get("url", "").replace(sab, nzbget))
            assert other.headers["x-dnzb-failure"] != failure_url
            assert (await report(other.headers["x-dnzb-failure"])).status_code == 200
            assert await failed() == ["2"]
            # In a feed too, with extended=1; another release has none.
            again = items(await get_xml(client, t="search", apikey=sab, extended="1", limit="10"))
            by_guid = {i.findtext("guid"): attrs_of(i)["failed"] for i in again}
            assert by_guid[guid] == ["2"]
            assert set(map(tuple, (v for g, v in by_guid.items() if g != guid))) == {("0",)}
            # An unknown release is 404, a wrong key error 100; neither records anything.
            unknown = failure_url.replace(guid, "f" * 32)
            assert (await report(unknown)).status_code == 404
            wrong = await report(failure_url.replace(sab, "x" * len(sab)))
            assert ET.fromstring(wrong.content).get("code") == "100"
    with stores.users.pool.connection() as conn:
        rows = conn.execute(
            "SELECT u.name, f.guid, f.reports, f.corrupt FROM download_failures f"
            " JOIN api_users u ON u.id = f.user_id ORDER BY u.name"
        ).fetchall()
    assert rows == [("nzbget", guid, 1, False), ("sabnzbd", guid, 2, True)]


def dnzb_as_sabnzbd_reads_them(url: str) -> dict[str, str]:
    """The X-DNZB headers of an NZB as SABnzbd reads them: urllib's http.client, which
    takes a header's bytes for Latin-1 (NZBGet's Latin1ToUtf8 does the same)."""
    with urllib.request.urlopen(url, timeout=30) as response:
        return {
            name.lower(): value
            for name, value in response.headers.items()
            if name.lower().startswith("x-dnzb-")
        }


@pytest.mark.trio
async def test_a_name_beyond_ascii_reaches_sabnzbd_and_nzbget_as_it_is_listed(
    settings: Settings, catalog: Stores
) -> None:
    """SABnzbd names the job after X-DNZB-Name: a name with accents (Latin-1 holds
    them) reads as the feed lists it, not as its UTF-8 bytes taken for Latin-1
    (`AmÃ©lie`); one beyond Latin-1 still comes as UTF-8 (no byte form reads
    right there; a Latin-1 reader's text turns back into it)."""
    stores = catalog
    key = stores.users.create("sabnzbd")
    names = ("Die.fabelhafte.Welt.der.Amélie.2001.German.1080p.BluRay.x264-GRP",
             "Sen.to.Chihiro.千と千尋の神隠し.2001.1080p.BluRay.x264-GRP")  # fmt: skip
    with trio.fail_after(DEADLINE_SECONDS):
        async with serving(settings, stores) as client:
            feed = await get_xml(client, t="search", apikey=key, limit="2")
            guids = [item.findtext("guid", "") for item in items(feed)]
            with stores.catalog.pool.connection() as conn:
                for guid, name in zip(guids, names, strict=True):
                    conn.execute("UPDATE catalog SET name = %s WHERE guid = %s", (name, guid))
            listed = items(await get_xml(client, t="search", apikey=key, limit="2"))
            assert [item.findtext("title") for item in listed] == list(names)
            urls = [item.find("enclosure").get("url", "") for item in listed]  # type: ignore[union-attr]
            read = [await trio.to_thread.run_sync(dnzb_as_sabnzbd_reads_them, u) for u in urls]
    assert read[0]["x-dnzb-name"] == names[0]
    assert read[1]["x-dnzb-name"].encode("latin-1").decode("utf-8") == names[1]
    for headers in read:
        assert headers["x-dnzb-failure"].isascii()


def filename_as_nzbget_reads_it(response: httpx.Response) -> str:
    """The file name of an answer's Content-Disposition as NZBGet's WebDownloader takes
    it: the header's bytes as they came, the value after the first "filename" and its
    "=", up to the closing quote; NZBGet keeps text in UTF-8 and converts nothing."""
    (value,) = [v for k, v in response.headers.raw if k.lower() == b"content-disposition"]
    after = value[value.index(b"filename") :]
    quoted = after[after.index(b"=") + 1 :].lstrip(b" ")
    assert quoted.startswith(b'"'), value
    return quoted[1 : quoted.index(b'"', 1)].decode("utf-8")


@pytest.mark.trio
async def test_nzbget_names_a_job_fetched_by_url_as_the_release_is_listed(
    settings: Settings, catalog: Stores, tmp_path: Path
) -> None:
    """NZBGet names a job it fetches by URL after the Content-Disposition's first
    `filename=`, its bytes taken as UTF-8 (no charset conversion, no RFC 5987): a
    name beyond ASCII comes through whole, not with "_" where a "?" stood in
    (`Am_lie`). Checked as its code reads the header, and by Debian's NZBGet."""
    require_tool("nzbget", "nzbget", "scripts/ensure-nzbget")
    stores = catalog
    key = stores.users.create("nzbget")
    names = ("Die.fabelhafte.Welt.der.Amélie.2001.German.1080p.BluRay.x264-GRP",
             "Sen.to.Chihiro.千と千尋の神隠し.2001.1080p.BluRay.x264-GRP")  # fmt: skip
    with trio.fail_after(DEADLINE_SECONDS):
        async with serving(settings, stores) as client:
            feed = await get_xml(client, t="search", apikey=key, limit="2")
            guids = [item.findtext("guid", "") for item in items(feed)]
            with stores.catalog.pool.connection() as conn:
                for guid, name in zip(guids, names, strict=True):
                    conn.execute("UPDATE catalog SET name = %s WHERE guid = %s", (name, guid))
            listed = items(await get_xml(client, t="search", apikey=key, limit="2"))
            assert [item.findtext("title") for item in listed] == list(names)
            urls = [item.find("enclosure").get("url", "") for item in listed]  # type: ignore[union-attr]
            answers = [await client.get(url) for url in urls]
            assert [filename_as_nzbget_reads_it(a) for a in answers] == [f"{n}.nzb" for n in names]
            # A browser, or any RFC 6266 reader, takes the RFC 5987 form.
            for answer, name in zip(answers, names, strict=True):
                assert (
                    f"filename*=UTF-8''{quote(name)}.nzb" in answer.headers["content-disposition"]
                )
            # Debian's NZBGet fetches them itself; added paused, it needs no news server.
            news_port = free_port()  # nothing listens: no download is started
            async with running_nzbget(
                tmp_path / "nzbget", news_host="127.0.0.1", news_port=news_port
            ) as nzbget:
                ids = [await nzbget.add_url(url, paused=True) for url in urls]
                jobs = await nzbget.queued(ids, seconds=DEADLINE_SECONDS / 2)
    assert [jobs[i] for i in ids] == list(names)


@pytest.mark.trio
async def test_daily_limits_are_errors_500_and_501_with_retry_after(
    settings: Settings, catalog: Stores
) -> None:
    stores = catalog
    limited = attrs.evolve(settings, api_requests_per_day=3, api_grabs_per_day=1)
    sonarr, radarr = stores.users.create("sonarr"), stores.users.create("radarr")
    stores.users.set_limits("radarr", {"requests_per_day": 0})  # its own: none
    with trio.fail_after(DEADLINE_SECONDS):
        async with serving(limited, stores) as client:
            urls = []
            for n in (1, 2):
                feed = await get_xml(client, t="search", apikey=sonarr, limit="5")
                reported = feed.find("./channel/newznab:apilimits", NS)
                assert reported is not None
                assert reported.attrib["apicurrent"] == str(n)
                assert (reported.attrib["apimax"], reported.attrib["grabmax"]) == ("3", "1")
                assert reported.attrib["grabcurrent"] == "0"
                assert reported.attrib["apioldesttime"].endswith("00:00:00 +0000")
                urls = [i.find("enclosure").get("url", "") for i in items(feed)]  # type: ignore[union-attr]
            # Details count too, caps does not.
            guid = httpx.URL(urls[0]).params["id"]
            assert items(await get_xml(client, t="details", apikey=sonarr, id=guid))
            assert (await get_xml(client, t="caps")).tag == "caps"
            for params in (
                {"t": "search"},
                {"t": "tvsearch", "q": "x"},
                {"t": "details", "id": guid},
            ):
                refused = await client.get("/api", params={**params, "apikey": sonarr})
                assert_limit_error(refused, "500", "Request limit reached")
            as_json = await client.get(
                "/api", params={"t": "search", "apikey": sonarr, "o": "json"}
            )
            assert as_json.json()["error"]["@attributes"]["code"] == "500"
            assert "retry-after" in as_json.headers
            # Downloads have their own limit: one NZB, then 501.
            first = await client.get(urls[0])
            assert first.status_code == 200
            assert parse_nzb(first.content).files
            assert_limit_error(await client.get(urls[1]), "501", "Download limit reached")
            # Another key has its own count, and radarr its own limit (none) of requests.
            for _ in range(5):
                feed = await get_xml(client, t="search", apikey=radarr, limit="1")
                reported = feed.find("./channel/newznab:apilimits", NS)
                assert reported is not None
                assert "apimax" not in reported.attrib
                assert reported.attrib["grabmax"] == "1"
            assert (await client.get(urls[1].replace(sonarr, radarr))).status_code == 200
    listed = {row.name: row for row in stores.users.list()}
    assert (listed["sonarr"].requests_today, listed["sonarr"].grabs_today) == (3, 1)
    assert (listed["radarr"].requests_today, listed["radarr"].grabs_today) == (5, 1)
    assert listed["radarr"].requests_per_day == 0
    assert listed["sonarr"].requests_per_day is None


@pytest.mark.trio
async def test_a_limit_holds_under_concurrent_requests(settings: Settings, catalog: Stores) -> None:
    """Several requests of one key at once (Prowlarr searches in parallel; several
    coordinator processes share the count): exactly the limit are answered."""
    stores = catalog
    key = stores.users.create("prowlarr")
    codes: list[str] = []

    async def ask(client: httpx.AsyncClient) -> None:
        response = await client.get("/api", params={"t": "search", "apikey": key, "limit": "1"})
        root = ET.fromstring(response.content)
        codes.append(root.get("code", "") if root.tag == "error" else root.tag)

    limited = attrs.evolve(settings, api_requests_per_day=5)
    with trio.fail_after(DEADLINE_SECONDS):
        async with serving(limited, stores) as client, trio.open_nursery() as nursery:
            for _ in range(12):
                nursery.start_soon(ask, client)
    assert sorted(codes) == ["500"] * 7 + ["rss"] * 5


def test_uidx_users_limits_sets_a_users_own_and_list_shows_them(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    assert main(["users", "create", "sonarr"]) == 0
    key = capsys.readouterr().out.splitlines()[0]
    assert (
        main(["users", "limits", "sonarr", "--requests-per-day", "2", "--grabs-per-day", "0"]) == 0
    )
    assert capsys.readouterr().out == "sonarr: requests per day: 2, grabs per day: none\n"
    with open_pool(pg_url, Settings(home=tmp_path)) as pool:
        users = UserStore(pool)
        user = users.authenticate(key)
        assert user is not None
        today = usage_day(time.time())
        defaults = DailyLimits(requests=100, grabs=1)
        taken = [users.take(user.id, grab=False, defaults=defaults, day=today) for _ in "abc"]
        # Its own limit (2) wins over the default (100): the third is refused.
        assert [t is not None for t in taken] == [True, True, False]
        for _ in range(3):  # and its own "none" over the default grabs (1)
            assert users.take(user.id, grab=True, defaults=defaults, day=today) is not None
    assert main(["users", "list"]) == 0
    (row,) = capsys.readouterr().out.splitlines()[1:]
    assert "2 (2), 3 NZB (none)" in row
    assert main(["users", "limits", "sonarr", "--requests-per-day", "default"]) == 0
    assert capsys.readouterr().out == "sonarr: requests per day: default\n"
    with pytest.raises(SystemExit):
        main(["users", "limits", "sonarr", "--grabs-per-day", "-1"])
    assert main(["users", "limits", "nobody", "--grabs-per-day", "1"]) != 0
