"""The newznab API as Sonarr, Radarr, Prowlarr, NZBHydra2 and SABnzbd read it, end to end.

A realistic generated group (uidx's generator: TV, movies, music, books,
floods, reposts), dated over two days, is posted to a private INN2; `uidx
standalone` indexes it all (no operator command but the group and the
plan), its coordinator building the searchable catalog as the batches are
stored; then `uidx coordinator` serves it, and each program's requests are played the way its own code makes
and reads them: caps -> RSS without q -> search -> tvsearch -> get ->
enclosure URL -> NZB parsed. Every item must parse and every NZB match its
item (file count, size within 5%); the coordinator's log stays clean.
"""

from __future__ import annotations

import email.utils
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from xml.etree import ElementTree as ET

import attrs
import httpx
import pytest
from process_logs import log_until
from test_edge import offline_index
from test_standalone import Posted, posted_group, standalone_env

from usenet_indexer.core.completion import State, judge
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.core.newznab import NEWZNAB_NS
from usenet_indexer.core.nzb import parse_nzb
from usenet_indexer.testing.logcheck import problems
from usenet_indexer.testing.newsd_private import PrivateNewsServer

GROUP = "alt.binaries.uidx.api"
ARTICLES = 60_000
SEED = 21
RUN_SECONDS = 240


@pytest.fixture(scope="module")
def posted() -> Iterator[Posted]:
    def post(server: PrivateNewsServer) -> None:
        server.post(GROUP, ARTICLES, seed=SEED, days=2, end=int(time.time()), timeout_seconds=600)

    with posted_group(GROUP, "uidx-newsd-api-", post) as found:
        yield found


def _uidx(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "usenet_indexer", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def assert_clean_log(err: str) -> None:
    found = problems(err.splitlines())
    assert not found, found.describe()


NZB_CATEGORIES = "5000,5030,5040,5045,2000,2040,2045,3000,7000,8000"


def _get_xml(client: httpx.Client, **params: str) -> ET.Element:
    response = client.get("/api", params=params)
    assert response.status_code == 200, response.text[:500]
    root = ET.fromstring(response.content)
    assert root.tag != "error", response.text[:500]
    return root


@attrs.frozen
class _FeedItem:
    title: str
    guid: str
    url: str
    length: int
    size: int
    date: datetime
    categories: tuple[int, ...]
    files: int
    season: str | None
    episode: str | None


def _item(element: ET.Element) -> _FeedItem:
    """An item as Sonarr's NewznabRssParser reads it: title, guid, download URL (the
    enclosure), size (newznab:attr size, else the enclosure's length), date, categories."""
    found: dict[str, list[str]] = {}
    for attr in element.findall("newznab:attr", {"newznab": NEWZNAB_NS}):
        found.setdefault(attr.get("name", ""), []).append(attr.get("value", ""))
    (enclosure,) = element.findall("enclosure")
    return _FeedItem(
        title=element.findtext("title", ""),
        guid=element.findtext("guid", ""),
        url=enclosure.get("url", ""),
        length=int(enclosure.get("length", "-1")),
        size=int(found["size"][0]),
        date=email.utils.parsedate_to_datetime(element.findtext("pubDate", "")),
        categories=tuple(int(c) for c in found["category"]),
        files=int(found.get("files", ["0"])[0]),
        season=found.get("season", [None])[0],
        episode=found.get("episode", [None])[0],
    )


def _items(feed: ET.Element) -> list[_FeedItem]:
    return [_item(element) for element in feed.findall("./channel/item")]


def _sabnzbd_fetches(client: httpx.Client, item: _FeedItem) -> None:
    """SABnzbd: the URL as it is, the name from Content-Disposition, the NZB parsed;
    it must match its item (file count, size within 5%)."""
    response = client.get(item.url)
    assert response.status_code == 200
    disposition = response.headers["content-disposition"]
    assert re.match(
        r"attachment; filename=\"[^\"]+\.nzb\"(; filename\*=UTF-8''\S+\.nzb)?$", disposition
    ), disposition
    nzb = parse_nzb(response.content)
    assert len(nzb.files) == item.files
    assert item.size == item.length
    size = sum(s.bytes for f in nzb.files for s in f.segments)
    assert abs(size - item.size) <= 0.05 * item.size
    for file in nzb.files:
        assert len({s.number for s in file.segments}) == len(file.segments)
        assert all("<" not in s.message_id for s in file.segments)


def test_the_arr_programs_and_sabnzbd_read_the_catalog_through_the_newznab_api(
    posted: Posted, pg_url: str, tmp_path: Path
) -> None:
    expected = offline_index(tmp_path, list(posted.lines))
    # Every release listed as soon as it is stored, complete or not (the
    # generated group has incomplete uploads): the clients check them all.
    env = standalone_env(posted, pg_url, tmp_path, UIDX_CATALOG_QUIET_SECONDS="0")
    for command in (["groups", "add", GROUP], ["ranges", "plan", GROUP, "--from", "1", "--to",
                    str(len(posted.lines)), "--size", "20000"]):  # fmt: skip
        done = _uidx(env, *command)
        assert done.returncode == 0, done.stderr
    standalone = subprocess.run(
        [sys.executable, "-m", "usenet_indexer", "standalone", "--exit-when-done",
         "--processes", "2"],
        env=env, capture_output=True, text=True, timeout=RUN_SECONDS,
    )  # fmt: skip
    assert standalone.returncode == 0, standalone.stderr[-4000:]
    assert_clean_log(standalone.stderr)
    key = _uidx(env, "users", "create", "arr").stdout.splitlines()[0]
    coordinator = subprocess.Popen(
        [sys.executable, "-m", "usenet_indexer", "coordinator"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        # With no operator command: the catalog was built as the batches were stored.
        log = log_until(coordinator, lambda line: "node API listening" in line, 120)
        with httpx.Client(base_url=f"http://{env['UIDX_LISTEN']}", timeout=60) as client:
            _play_the_clients(client, key, expected)
    finally:
        coordinator.terminate()
        _, rest = coordinator.communicate(timeout=60)
    assert_clean_log("".join(log) + rest.decode())


def _play_the_clients(client: httpx.Client, key: str, expected: list[CatalogRelease]) -> None:
    # What is offered: the releases kept that a downloader can finish (broken ones are
    # not, unless offer_broken_releases: tests/test_offered.py).
    kept = [
        r
        for r in expected
        if r.dropped is None and judge(r.files, r.files_announced).state is not State.BROKEN
    ]
    assert len(kept) < len([r for r in expected if r.dropped is None])  # some are broken
    # Sonarr, Radarr, Prowlarr: caps first (Test), no key needed.
    caps = _get_xml(client, t="caps")
    tv = caps.find("./searching/tv-search")
    assert tv is not None
    assert tv.get("available") == "yes"
    assert {"q", "season", "ep"} <= set(tv.get("supportedParams", "").split(","))
    listed = {int(c.get("id", "0")) for c in caps.iter() if c.tag in ("category", "subcat")}
    # Sonarr's RSS sync: tvsearch without q, newest first.
    rss = _items(_get_xml(client, t="tvsearch", cat="5000,5030,5040,5045", extended="1",
                          apikey=key, offset="0", limit="100"))  # fmt: skip
    assert rss
    assert all(set(i.categories) <= listed for i in rss)
    assert all(5000 in i.categories for i in rss)
    dates = [i.date for i in rss]
    assert dates == sorted(dates, reverse=True)
    # Sonarr's episode search: the show name, season and episode of an item.
    episode = next(i for i in rss if i.season and i.episode)
    show = re.split(r"[._ ]S\d", episode.title)[0].replace(".", " ")
    found = _items(_get_xml(client, t="tvsearch", cat="5000", extended="1", apikey=key, q=show,
                            season=str(episode.season), ep=str(episode.episode)))  # fmt: skip
    assert episode.guid in [i.guid for i in found]
    # Radarr: movies by name.
    movies = _items(_get_xml(client, t="movie", cat="2000", extended="1", apikey=key))
    if movies:
        title = re.split(r"[._ ](?:19|20)\d\d", movies[0].title)[0].replace(".", " ")
        found = _items(_get_xml(client, t="movie", q=title, apikey=key))
        assert movies[0].guid in [i.guid for i in found]
    # Prowlarr and NZBHydra2: a plain search, paged by the response's total.
    asked = {int(c) for c in NZB_CATEGORIES.split(",")}
    in_categories = _items(
        _get_xml(client, t="search", apikey=key, cat=NZB_CATEGORIES, limit="100")
    )
    assert in_categories
    assert all(asked & set(i.categories) for i in in_categories)
    everything = _get_xml(client, t="search", apikey=key, limit="100", extended="1")
    response = everything.find("./channel/newznab:response", {"newznab": NEWZNAB_NS})
    assert response is not None
    # The total is at least what follows this page; NZBHydra2 pages on while
    # offset + items < total, and the last page (a short one) gives it exact.
    assert int(response.get("total", "0")) > 100 or len(kept) <= 100
    guids: list[str] = []
    offset = 0
    while True:
        page = _get_xml(client, t="search", apikey=key, offset=str(offset), limit="100")
        found_page = _items(page)
        guids += [i.guid for i in found_page]
        reply = page.find("./channel/newznab:response", {"newznab": NEWZNAB_NS})
        assert reply is not None
        total = int(reply.get("total", "0"))
        if offset + len(found_page) >= total:
            break
        offset += 100
    assert total == len(kept)
    assert sorted(guids) == sorted(r.key.hex() for r in kept)
    # SABnzbd: every NZB of the RSS page and of the first search page matches its item.
    for item in [*rss, *_items(everything)[:30]]:
        _sabnzbd_fetches(client, item)
