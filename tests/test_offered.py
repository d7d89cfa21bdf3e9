"""What the catalog offers a downloader: whole and repairable releases; broken ones kept.

Real uploads of ../shared/corpus are replayed as overview lines, some of
their articles held back (lost, or late), stored batch by batch in a real
PostgreSQL, and built into the catalog as the coordinator does. The newznab
API is then read over HTTP as Sonarr reads it (RSS without q, t=search,
tvsearch, movie), once as configured by default and once with
offer_broken_releases.
"""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator, Iterator, Sequence
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
from test_completion import EVOLVE, RARS, SONARR, WIN_UNICODE, Lose, load, segments, without

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.newznab import NEWZNAB_NS, NewznabError, error_xml
from usenet_indexer.core.nzb import Nzb
from usenet_indexer.store import catalog
from usenet_indexer.store.catalog import CatalogRow, Search
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.ranges import Finish
from usenet_indexer.testing.corpus import nzb_to_overview
from usenet_indexer.wire.packed import pack_batch

GROUP = "alt.binaries.corpus"
TTL = 900.0
NS = {"newznab": NEWZNAB_NS}
EVOLVE_NAME = "Game.of.Thrones.S03E10.720p.HDTV.x264-EVOLVE"
KILLERS_NAME = "Series.Title.S04E06.720p.HDTV.x264-KILLERS"  # Sonarr's trimmed post


def stored_batches(stores: Stores, batches: Sequence[Sequence[str]]) -> Iterator[int]:
    """Store the overview lines as one edge would: one range over them all, a batch per
    part (the range finished with the last); yields after each batch is stored."""
    numbers = [int(line.split("\t", 1)[0]) for batch in batches for line in batch]
    group = GroupStore(stores.ranges.pool).add(GROUP)
    low, high = min(numbers), max(numbers)
    stores.ranges.plan(group, low, high, high - low + 1)
    node_id = stores.nodes.authenticate(stores.nodes.create("edge"))
    assert node_id is not None
    lease = stores.ranges.lease(node_id, TTL)
    assert lease is not None
    indexer = RangeIndexer(group=GROUP, first=lease.next)
    for at, part in enumerate(batches, 1):
        last = at == len(batches)
        end = high + 1 if last else int(part[-1].split("\t", 1)[0]) + 1
        indexer.add_text("\n".join(part), end)
        batch = indexer.finish() if last else indexer.take()
        stores.batches.store(node_id, lease.range_id, lease.epoch, pack_batch(batch), 0, TTL)
        if last:
            assert stores.ranges.finish(node_id, lease.range_id, lease.epoch) is Finish.OK
        yield at


def replayed(nzbs: Sequence[Nzb], first_article: int) -> list[str]:
    """The NZBs' articles as overview lines numbered from `first_article`."""
    return nzb_to_overview(
        nzbs, first_article=first_article, rng=random.Random(5), group=GROUP
    ).lines


def after(lines: Sequence[str]) -> int:
    """The article number after the lines'."""
    return int(lines[-1].split("\t", 1)[0]) + 1


def only(nzb: Nzb, pick: Lose) -> Nzb:
    """The articles `pick` picks, and nothing else (those that come late)."""
    return without(nzb, lambda file, segment: not pick(file, segment))


def either(*picks: Lose) -> Lose:
    return lambda file, segment: any(pick(file, segment) for pick in picks)


def whole_files(*parts: str) -> Lose:
    return lambda file, _: any(f'{part}"' in file.subject for part in parts)


def the_row(stores: Stores, name: str, *, broken: bool) -> CatalogRow | None:
    """The catalog row of that name a search finds (broken releases too, or not)."""
    _, rows = stores.catalog.search(Search(words=name, broken=broken))
    found = [row for row in rows if row.item.name == name]
    assert len(found) <= 1
    return found[0] if found else None


def test_late_articles_make_a_broken_release_repairable_then_whole(
    stores: Stores, corpus_dir: Path
) -> None:
    posted = load(corpus_dir, EVOLVE)
    # The first batch misses ten rar volumes (about 690 blocks: more than the 596
    # recovery blocks rebuild) and some articles of another; most come in a second
    # batch, the last articles in a third.
    last: Lose = segments("evolve.r15", set(range(2, 138, 10)))
    late = either(last, whole_files(*RARS[3:13]))
    first = replayed([without(posted, late)], 1_000)
    second = replayed([only(without(posted, last), late)], after(first))
    third = replayed([only(posted, last)], after(second))
    seen: list[CatalogRow] = []
    for _ in stored_batches(stores, [first, second, third]):
        stores.build.drain(quiet_seconds=0)
        row = the_row(stores, EVOLVE_NAME, broken=True)
        assert row is not None
        seen.append(row)
        # The default search (what feeds and the page offer) has it unless broken.
        offered = the_row(stores, EVOLVE_NAME, broken=False)
        assert (offered is not None) == (row.item.state != "broken")
    assert [row.item.state for row in seen] == ["broken", "repairable", "whole"]
    assert seen[0].item.completion < seen[1].item.completion < seen[2].item.completion == 1.0
    assert len({row.guid for row in seen}) == 1  # one release throughout (its grabs kept)


@attrs.frozen
class Served:
    """Two coordinators on one catalog: as configured by default, and offering broken
    releases; the guid of each corpus release by name."""

    default: httpx.AsyncClient
    offering: httpx.AsyncClient
    key: str
    guids: dict[str, str]


def build_corpus_catalog(stores: Stores, corpus_dir: Path) -> dict[str, str]:
    """EVOLVE less five articles (repairable), Sonarr's 4 of 46 files (broken), SABnzbd's
    unicode test post (whole): their catalog rows' guids by name."""
    evolve = without(load(corpus_dir, EVOLVE), segments("evolve.r05", {3, 40, 41, 90, 137}))
    nzbs = [evolve, load(corpus_dir, SONARR), load(corpus_dir, WIN_UNICODE)]
    for _ in stored_batches(stores, [replayed(nzbs, 1_000)]):
        pass
    stores.build.everything(quiet_seconds=0)
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute("SELECT name, guid, state FROM catalog").fetchall()
    states = {str(name): str(state) for name, _, state in rows}
    assert states[EVOLVE_NAME] == "repairable"
    assert states[KILLERS_NAME] == "broken"
    assert "whole" in states.values()
    return {str(name): str(guid) for name, guid, _ in rows}


@pytest.fixture
async def served(settings: Settings, stores: Stores, corpus_dir: Path) -> AsyncIterator[Served]:
    guids = await trio.to_thread.run_sync(build_corpus_catalog, stores, corpus_dir)
    key = stores.users.create("sonarr")
    offering = attrs.evolve(settings, offer_broken_releases=True)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        other_host, other_port = await nursery.start(partial(serve, offering, stores))
        async with (
            httpx.AsyncClient(base_url=f"http://{host}:{port}") as default,
            httpx.AsyncClient(base_url=f"http://{other_host}:{other_port}") as offered,
        ):
            yield Served(default, offered, key, guids)
        nursery.cancel_scope.cancel()


async def feed(client: httpx.AsyncClient, **params: str) -> list[ET.Element]:
    response = await client.get("/api", params=params)
    assert response.status_code == 200, response.text
    root = ET.fromstring(response.content)
    assert root.tag == "rss", response.text
    return root.findall("./channel/item")


def attrs_of(item: ET.Element) -> dict[str, str]:
    return {a.get("name", ""): a.get("value", "") for a in item.findall("newznab:attr", NS)}


# What Sonarr and Radarr ask: the RSS sync (no q), a search, a tv search by episode, a
# category's newest; and a movie search (its function's path, with the category given).
ASKED = [
    {"t": "search"},
    {"t": "search", "q": "Series Title"},
    {"t": "tvsearch", "q": "Series Title", "season": "4", "ep": "6"},
    {"t": "tvsearch"},
    {"t": "tvsearch", "q": "Series.Title", "season": "S04"},
    {"t": "movie", "q": "Series Title", "cat": "5000"},
    {"t": "search", "cat": "5000", "o": "json"},
]


@pytest.mark.trio
async def test_a_broken_release_is_offered_only_when_the_setting_asks(served: Served) -> None:
    broken = served.guids[KILLERS_NAME]
    for params in ASKED:
        asked = {**params, "apikey": served.key}
        if asked.get("o") == "json":
            default = await _json_guids(served.default, asked)
            offering = await _json_guids(served.offering, asked)
        else:
            default = [i.findtext("guid", "") for i in await feed(served.default, **asked)]
            offering = [i.findtext("guid", "") for i in await feed(served.offering, **asked)]
        assert broken not in default, params
        assert broken in offering, params
        assert set(default) == set(offering) - {broken}, params
    rss = [i.findtext("guid") for i in await feed(served.default, t="search", apikey=served.key)]
    assert served.guids[EVOLVE_NAME] in rss  # repairable: offered


async def _json_guids(client: httpx.AsyncClient, params: dict[str, str]) -> list[str]:
    response = await client.get("/api", params=params)
    assert response.status_code == 200, response.text
    return [str(item["guid"]) for item in response.json()["channel"]["item"]]


@pytest.mark.trio
async def test_base_attrs_tell_whole_from_repairable(served: Served) -> None:
    """Without extended=1: completion (a whole percent, 100 only when every article is
    there) and uidx_state on every item."""
    items = await feed(served.offering, t="search", apikey=served.key)
    by_guid = {i.findtext("guid"): attrs_of(i) for i in items}
    assert set(served.guids.values()) <= set(by_guid)
    for name, guid in served.guids.items():
        found = by_guid[guid]
        assert re.fullmatch(r"\d{1,3}", found["completion"]), name
        assert found["uidx_state"] in ("whole", "repairable", "broken")
    evolve = by_guid[served.guids[EVOLVE_NAME]]
    assert evolve["uidx_state"] == "repairable"
    assert evolve["completion"] == "99"  # 5 of its 4,414 articles lost
    killers = by_guid[served.guids[KILLERS_NAME]]
    assert killers["uidx_state"] == "broken"
    assert int(killers["completion"]) < 20
    whole = [a for a in by_guid.values() if a["uidx_state"] == "whole"]
    assert whole
    assert all(a["completion"] == "100" for a in whole)


@pytest.mark.parametrize("rows", [200_000])
def test_the_default_search_walks_an_index_of_the_offered_rows(stores: Stores, rows: int) -> None:
    """The default filter stays an index walk however big the catalog: the newest offered
    rows (RSS without q) and a category's come from the partial index of those rows,
    never from a walk past the broken ones (the planner chose the same at 1M rows, tried
    by hand; 200k keep the test short)."""
    with stores.catalog.pool.connection() as conn:
        conn.execute("SET statement_timeout = 0")  # the rows' index entries take a while
        conn.execute(_ROWS, {"rows": rows})
        conn.execute("ANALYZE catalog")
        plans = {
            "rss": _plan(conn, Search()),
            "category": _plan(conn, Search(categories=(5040,))),
            "offering": _plan(conn, Search(broken=True)),
        }
    assert "Index Scan using catalog_offered on catalog" in plans["rss"], plans
    assert "Index Scan using catalog_offered on catalog" in plans["category"], plans
    assert "Index Scan using catalog_newest on catalog" in plans["offering"], plans
    for plan in plans.values():
        assert "Seq Scan" not in plan, plans
        assert "Sort" not in plan, plans


# Rows of which the newest 30% are broken (a backfill of a taken-down month): a walk
# of catalog_newest would read past all of those for a page.
_ROWS = """
    INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups, posted,
                         completion, probe_candidate, sources, state)
    SELECT md5(n::text), 'r' || n, 'r ' || n, (ARRAY[5040, 2040, 3010, 7020, 4050])[n %% 5 + 1],
           1000, 10, 'p', ARRAY['a.b.x'],
           1700000000 + n, CASE WHEN n > %(rows)s * 0.7 THEN 0.5 ELSE 1 END, false,
           ARRAY[decode(md5(n::text), 'hex')],
           CASE WHEN n > %(rows)s * 0.7 THEN 'broken' ELSE 'whole' END
    FROM generate_series(1, %(rows)s) AS n
"""


def _plan(conn: psycopg.Connection[Any], search: Search) -> str:
    """The plan of the page a search without words reads (store/catalog.py's _page)."""
    where, params = catalog._where(catalog._filters(search))
    page = pgsql.SQL(
        "EXPLAIN " + catalog._ROW + " WHERE {} ORDER BY posted DESC, id DESC LIMIT %s OFFSET %s"
    )
    rows = psycopg.ClientCursor(conn).execute(page.format(where), [*params, 101, 0]).fetchall()
    return "\n".join(str(r[0]) for r in rows)


@pytest.mark.trio
async def test_a_broken_releases_guid_is_no_such_item_unless_the_setting_asks(
    served: Served,
) -> None:
    """Asked by its guid (an old feed's link, Sonarr's retry of a grab), a broken release
    is what an unknown guid is unless broken ones are offered: t=details error 300 and
    t=get 404, so no downloader grabs what cannot be finished. A failure report on it is
    still recorded (it hands nothing out)."""
    broken = served.guids[KILLERS_NAME]
    asked = {"id": broken, "apikey": served.key}
    details = await served.default.get("/api", params={"t": "details", **asked})
    assert details.status_code == 200
    assert details.content == error_xml(NewznabError(300, "no such item"))
    nzb = await served.default.get("/api", params={"t": "get", **asked})
    assert (nzb.status_code, nzb.content) == (404, b"no such item\n")
    offered = await served.offering.get("/api", params={"t": "get", **asked})
    assert offered.status_code == 200, offered.text
    assert offered.headers["content-type"] == "application/x-nzb"
    assert [i.findtext("guid") for i in await feed(served.offering, t="details", **asked)] == [
        broken
    ]
    # A repairable release is served either way.
    repairable = {"id": served.guids[EVOLVE_NAME], "apikey": served.key}
    fetched = await served.default.get("/api", params={"t": "get", **repairable})
    assert fetched.status_code == 200, fetched.text
    failed = await served.default.get("/api", params={"t": "failed", **asked})
    assert failed.status_code == 200, failed.text
