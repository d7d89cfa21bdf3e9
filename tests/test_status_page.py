"""The status page at / and the metrics at /metrics, as an operator (and an API user) sees them.

The page is read as HTML by a parser here, and in a real browser (headless
Chromium) by tests/test_status_browser.py.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from html.parser import HTMLParser

import attrs
import httpx
import pytest
import trio
from test_catalog_build import batches_of_generated
from test_newznab import insert_rows, store_generated

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_builder import build_once
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.store.builds import BuildStore
from usenet_indexer.store.status import StatusStore


class _Page(HTMLParser):
    """What a person sees: the text, the tables' rows, the progress bars, the links."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.bars: list[int] = []
        self.links: list[str] = []
        self.release_rows = 0
        self.release_names: list[str] = []
        self.release_states: list[str] = []
        self.broken_rows = 0
        self.broken_names: list[str] = []
        self._row = ""
        self.refresh = ""
        self.headings: list[str] = []
        self._skip = False
        self._cell = 0
        self._heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("role") == "progressbar":
            self.bars.append(int(found.get("aria-valuenow") or 0))
        if tag == "a" and found.get("href"):
            self.links.append(found["href"] or "")
        if tag == "tr":
            self._row = found.get("class") or ""
            self._cell = 0 if self._row in ("release", "broken") else -1
            if self._row == "release":
                self.release_rows += 1
            if self._row == "broken":
                self.broken_rows += 1
        if tag == "td" and self._cell >= 0:
            self._cell += 1
        self._skip = tag in ("style", "title")
        self._heading = tag == "h2"
        if self._heading:
            self.headings.append("")
        if tag == "meta" and found.get("http-equiv") == "refresh":
            self.refresh = found.get("content") or ""

    def handle_endtag(self, tag: str) -> None:
        self._skip = False
        self._heading = False

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.text.append(data)
        if self._heading:
            self.headings[-1] += data
        if self._cell == 1:
            (self.release_names if self._row == "release" else self.broken_names).append(data)
        if self._cell == 6 and self._row == "release":
            self.release_states.append(data)


def read(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


METRICS_TOKEN = "scrape-" + "7" * 40


@pytest.fixture
async def served(settings: Settings, stores: Stores) -> AsyncIterator[httpx.AsyncClient]:
    scraped = attrs.evolve(settings, metrics_token=METRICS_TOKEN)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, scraped, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            yield client
        nursery.cancel_scope.cancel()


@pytest.fixture
def operator(stores: Stores) -> dict[str, str]:
    """The query of an operator's page: `?apikey=` of an operator's key."""
    return {"apikey": stores.users.create("operator", operator=True)}


SCRAPER = {"authorization": f"Bearer {METRICS_TOKEN}"}


@pytest.mark.trio
async def test_an_empty_indexer_says_there_is_nothing_yet(
    served: httpx.AsyncClient, operator: dict[str, str]
) -> None:
    response = await served.get("/", params=operator)
    assert response.status_code == 200
    page = read(response.text)
    text = " ".join(page.text)
    assert "No groups yet" in text
    assert "No releases in the catalog yet" in text
    assert "No keys waiting for the catalog build." in text
    assert "No build in the last 5 minutes." in text
    assert page.refresh.isdigit()


@pytest.mark.trio
async def test_the_page_shows_groups_ranges_and_releases_with_nzb_links(
    served: httpx.AsyncClient, stores: Stores
) -> None:
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    key = stores.users.create("operator", operator=True)
    page = read((await served.get("/", params={"apikey": key})).text)
    text = " ".join(page.text)
    assert "alt.binaries.test" in text
    assert 100 in page.bars  # the one range is done
    assert "edge" in text  # the node that stored the batches, with its rate
    assert page.release_rows > 0
    nzb_links = [link for link in page.links if link.startswith("/api?t=get")]
    assert len(nzb_links) == page.release_rows + page.broken_rows
    # What a downloader makes of them: the search offers whole and repairable ones; the
    # broken ones are listed apart, with their completion, and counted.
    states = stores.catalog.states()
    assert set(page.release_states) <= {"whole", "repairable"}
    assert page.broken_rows == min(25, states.broken) > 0
    assert not set(page.broken_names) & set(page.release_names)
    assert f"{states.whole:,} whole releases, {states.repairable:,} repairable" in " ".join(
        " ".join(page.text).split()
    )
    assert f"{states.broken:,} broken" in text
    assert all(f"apikey={key}" in link for link in nzb_links)
    nzb = await served.get(nzb_links[0])
    assert nzb.status_code == 200
    assert nzb.content.startswith(b"<?xml")
    # The search box: releases matching every word.
    word = page.release_names[0].replace("-", ".").replace("_", ".").split(".")[0]
    found = read((await served.get("/", params={"q": word, "apikey": key})).text)
    assert found.release_rows > 0
    assert all(word.lower() in name.lower() for name in found.release_names)
    # A key that is no user's sees the login form, and nothing of the catalog.
    nope = await served.get("/", params={"q": word, "apikey": "nope"})
    assert nope.status_code == 401
    assert read(nope.text).release_rows == 0
    assert 'action="/login"' in nope.text
    crowded = await served.get("/", params={"apikey": key, **{f"x{n}": "1" for n in range(40)}})
    assert crowded.status_code == 200
    hostile = await served.get("/", params={"q": "<script>alert(1)</script>", "apikey": key})
    assert hostile.status_code == 200
    assert "<script>" not in hostile.text
    assert (await served.get("/", params={"apikey": "\x00"})).status_code == 401


@pytest.mark.trio
async def test_metrics_are_prometheus_text(served: httpx.AsyncClient, stores: Stores) -> None:
    await trio.to_thread.run_sync(store_generated, stores, 5_000, 3)
    key = stores.users.create("prom")
    await served.get("/api", params={"t": "search", "apikey": key})
    await served.get("/api", params={"t": "search", "apikey": "wrong"})
    assert (await served.get("/metrics")).status_code == 401
    assert (await served.get("/metrics", headers={"authorization": "Bearer no"})).status_code == 401
    assert (await served.get("/metrics", params={"apikey": key})).status_code == 401
    response = await served.get("/metrics", headers=SCRAPER)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    lines = response.text.splitlines()
    assert any(
        line.startswith('uidx_ranges{group="alt.binaries.test",state="done"} 1') for line in lines
    )
    assert any(line.startswith("uidx_batches_stored_total ") for line in lines)
    assert any(
        line.startswith('uidx_api_requests_total{api="newznab",code="200",function="search"} 1')
        for line in lines
    )
    assert any('function="error 100"' in line for line in lines)
    releases = next(line for line in lines if line.startswith("uidx_releases "))
    assert float(releases.split()[1]) == stores.catalog.count() > 2
    by_state = {
        line.split('"')[1]: float(line.split()[1])
        for line in lines
        if line.startswith("uidx_releases_by_state{")
    }
    states = stores.catalog.states()
    assert by_state == {
        "whole": states.whole,
        "repairable": states.repairable,
        "broken": states.broken,
    }
    assert sum(by_state.values()) == stores.catalog.count()
    # No label holds a release's name: only groups, states, outcomes and API functions.
    labels = {
        name.split("=")[0]
        for line in lines
        if "{" in line and not line.startswith("#")
        for name in line[line.index("{") + 1 : line.index("}")].split(",")
    }
    assert labels <= {"group", "state", "outcome", "api", "function", "code", "component"}


@pytest.mark.trio
async def test_the_releases_header_says_a_true_count(
    served: httpx.AsyncClient, stores: Stores, operator: dict[str, str]
) -> None:
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    states = stores.catalog.states()
    offered = states.whole + states.repairable  # broken ones are not in the search
    assert offered > 25
    page = read((await served.get("/", params=operator)).text)
    assert page.release_rows == 25
    assert f"Recent releases: the 25 newest of {offered:,}" in page.headings
    # A search counts up to one past its page: a full page says "more than", not 26.
    word = page.release_names[0].replace("-", ".").replace("_", ".").split(".")[0]
    found = read((await served.get("/", params={"q": word, **operator})).text)
    (said,) = [h for h in found.headings if h.startswith("Releases matching")]
    if found.release_rows == 25:
        assert said.endswith("the 25 newest of more than 25")
    else:
        assert said.endswith(f"({found.release_rows})")
    assert "(26)" not in " ".join(found.headings + page.headings)


@pytest.mark.trio
async def test_the_page_reads_as_a_person_expects(
    served: httpx.AsyncClient, stores: Stores, operator: dict[str, str]
) -> None:
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    html = (await served.get("/", params=operator)).text
    text = " ".join(read(html).text)
    assert "<title>uidx: 1 group, " in html  # not "1 groups"
    assert re.search(r"\b4 batches stored in the last 5 minutes: [\d,]+ headers/s", text)
    assert re.search(r"\d{1,3}(,\d{3})+ of \d{1,3}(,\d{3})+ articles", text)  # 12,345
    assert "Spool: 0 chunks, 0 bytes, 0 lines." in text
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", text)  # times to the second
    figures = text[: text.index("Recent releases")]  # release names have digits of their own
    assert not re.search(r"\d\.\d{4,}", figures)  # no raw floats
    # One edge's run: its headers/s in the nodes table is the page's figure.
    status = StatusStore(stores.catalog.pool)
    (work,) = await trio.to_thread.run_sync(status.node_work)
    throughput = await trio.to_thread.run_sync(status.throughput)
    assert work.headers_per_second == pytest.approx(throughput.headers_per_second)
    rate = f"{throughput.headers_per_second:,.0f}"
    assert f"{rate} headers/s" in text
    nodes = html[html.index('<table id="nodes">') :]
    assert f'<td class="n">{rate}</td>' in nodes[: nodes.index("</table>")]


def _stored_and_built_once(stores: Stores) -> None:
    """Two batches stored and built, then a third stored: its keys wait."""
    stored = batches_of_generated(stores, 6_000, 3, every=2_000)
    next(stored)
    next(stored)
    build_once(stores.build, BuildStore(stores.catalog.pool), 3600.0)
    for _ in stored:
        pass


@pytest.mark.trio
async def test_the_page_and_metrics_show_the_catalogs_lag_and_builds(
    served: httpx.AsyncClient, stores: Stores, operator: dict[str, str]
) -> None:
    await trio.to_thread.run_sync(_stored_and_built_once, stores)
    lag = await trio.to_thread.run_sync(BuildStore(stores.catalog.pool).lag, 300)
    assert lag.pending_keys > 1
    assert lag.last is not None
    text = " ".join(read((await served.get("/", params=operator)).text).text)
    assert f"{lag.pending_keys:,} keys waiting for the catalog build, the oldest for" in text
    assert (
        f"1 build in the last 5 minutes took {lag.last.pending:,} pending keys and merged"
        f" {lag.last.keys:,} keys ({lag.last.keys / lag.last.pending:,.2f} per pending key) in"
    ) in text
    assert re.search(r"The last at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: ", text)

    metrics = {
        line.split()[0]: float(line.split()[1])
        for line in (await served.get("/metrics", headers=SCRAPER)).text.splitlines()
        if line.startswith("uidx_catalog")
    }
    assert metrics["uidx_catalog_pending_keys"] == lag.pending_keys
    assert metrics["uidx_catalog_pending_oldest_seconds"] >= 0
    assert metrics["uidx_catalog_builds_recent"] == 1
    assert metrics["uidx_catalog_builds_recent_cpu_seconds"] == pytest.approx(lag.builds_cpu_s)
    assert metrics["uidx_catalog_builds_recent_pending_keys"] == lag.last.pending
    assert metrics["uidx_catalog_builds_recent_keys_merged"] == lag.last.keys
    assert "uidx_catalog_last_build_age_seconds" in metrics
    # The catalog sweep has not begun (no coordinator ticked it): neither says a word.
    assert "uidx_catalog_sweep_cycles" not in metrics
    assert "The sweep that builds every stored release again" not in text


@pytest.mark.trio
async def test_the_page_and_metrics_show_where_the_catalog_sweep_is(
    served: httpx.AsyncClient, stores: Stores, operator: dict[str, str]
) -> None:
    def swept_half() -> None:
        stores.sweeps.tick(24.0)  # the clock started
        with stores.catalog.pool.connection() as conn:
            conn.execute("UPDATE catalog_sweep SET cycles = 2, after = %s", (b"\x80" + bytes(15),))

    await trio.to_thread.run_sync(swept_half)
    text = " ".join(read((await served.get("/", params=operator)).text).text)
    assert re.search(
        r"The sweep that builds every stored release again is 50% through cycle 3, begun"
        r" \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(2 cycles ended\)\.",
        text,
    )
    metrics = {
        line.split()[0]: float(line.split()[1])
        for line in (await served.get("/metrics", headers=SCRAPER)).text.splitlines()
        if line.startswith("uidx_catalog_sweep")
    }
    assert metrics == {
        "uidx_catalog_sweep_cycles_total": 2.0,
        "uidx_catalog_sweep_position": 0.5,
        "uidx_catalog_sweep_giving_way": 0.0,
    }
    assert "Giving way" not in text

    def behind() -> None:
        # The build behind the batches: the oldest pending key waited 10 s of 5 allowed.
        with stores.catalog.pool.connection() as conn:
            conn.execute(
                "INSERT INTO catalog_pending (key, since)"
                " VALUES (%s, now() - interval '10 seconds')",
                (bytes(16),),
            )
        assert stores.sweeps.tick(24.0, behind_seconds=5.0).gave_way

    await trio.to_thread.run_sync(behind)
    text = " ".join(read((await served.get("/", params=operator)).text).text)
    assert re.search(
        r"Giving way since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: the build is behind the batches",
        text,
    )
    scraped = (await served.get("/metrics", headers=SCRAPER)).text
    assert "uidx_catalog_sweep_giving_way 1.0" in scraped


@pytest.mark.trio
async def test_an_api_users_page_has_the_search_and_nzb_links_only(
    served: httpx.AsyncClient, stores: Stores
) -> None:
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    key = stores.users.create("sonarr")
    response = await served.get("/", params={"apikey": key})
    assert response.status_code == 200
    page = read(response.text)
    text = " ".join(page.text)
    assert page.release_rows > 0
    assert all(f"apikey={key}" in link for link in page.links if link.startswith("/api?"))
    # Nothing of the groups, ranges, nodes, servers or the catalog's workings.
    for heading in ("Groups", "Ranges", "Nodes", "Prefetch", "Probes", "Catalog"):
        assert heading not in page.headings
    assert "alt.binaries.test" not in text
    assert not page.bars
    assert "edge" not in text


@pytest.mark.trio
async def test_the_login_form_sets_a_strict_session_cookie(
    served: httpx.AsyncClient, stores: Stores
) -> None:
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    key = stores.users.create("operator", operator=True)
    anonymous = await served.get("/", params={"q": "the"})
    assert anonymous.status_code == 401
    assert 'action="/login"' in anonymous.text
    assert read(anonymous.text).release_rows == 0
    wrong = await served.post("/login", data={"apikey": "guess"})
    assert wrong.status_code == 401
    assert "not an API user's key" in " ".join(read(wrong.text).text)
    assert "set-cookie" not in wrong.headers
    login = await served.post("/login", data={"apikey": key})
    assert login.status_code == 303
    assert login.headers["location"] == "/"
    cookie = login.headers["set-cookie"]
    assert cookie.startswith("uidx_session=")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert "Secure" not in cookie  # plain http: a Secure cookie would never come back
    assert key not in cookie
    page = await served.get("/")  # the client keeps the cookie
    assert page.status_code == 200
    assert "Groups" in read(page.text).headings
    nzb_link = next(link for link in read(page.text).links if link.startswith("/api?t=get"))
    assert "apikey" not in nzb_link
    assert (await served.get(nzb_link)).status_code == 200  # the session's cookie is enough
    # Behind an https proxy the cookie is Secure.
    proxied = await served.post(
        "/login", data={"apikey": key}, headers={"x-forwarded-proto": "https"}
    )
    assert "; Secure" in proxied.headers["set-cookie"]
    # Logged out, the page asks again; the session is gone from the database too.
    await served.post("/logout")
    served.cookies.clear()
    assert (await served.get("/")).status_code == 401
    # A revoked user's session ends with its key.
    served.cookies.set("uidx_session", proxied.cookies["uidx_session"])
    assert (await served.get("/")).status_code == 200
    stores.users.revoke("operator")
    assert (await served.get("/")).status_code == 401


@pytest.mark.trio
async def test_the_session_cookie_is_secure_when_the_public_url_is_https(
    settings: Settings, stores: Stores
) -> None:
    # A TLS proxy that says nothing of https (no X-Forwarded-Proto): the operator's
    # public URL says how users reach the site, so the cookie must never go over http.
    key = stores.users.create("operator", operator=True)
    public = attrs.evolve(settings, public_url="https://indexer.example.org")
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, public, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            login = await client.post("/login", data={"apikey": key})
            assert login.status_code == 303
            assert "; Secure" in login.headers["set-cookie"]
            logout = await client.post("/logout")
            assert "; Secure" in logout.headers["set-cookie"]
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_probes_metric_has_one_series_per_outcome_of_probes_done(
    served: httpx.AsyncClient, stores: Stores
) -> None:
    # An article missing on a server: a retry waiting ('new'), one being probed again,
    # one given up ('failed') and one done: each keeps the outcome of its last try.
    with stores.catalog.pool.connection() as conn:
        for n, state in enumerate(["new", "probing", "failed", "done"]):
            conn.execute(
                "INSERT INTO probe_candidates (release_key, message_id, file_name, state, outcome)"
                " VALUES (%s, %s, 'f.par2', %s, 'article_missing')",
                (bytes([n]) * 16, f"<m{n}@x>", state),
            )
    lines = (await served.get("/metrics", headers=SCRAPER)).text.splitlines()
    probes = [line for line in lines if line.startswith("uidx_probes_total{")]
    # One series (Prometheus keeps the first of repeats and drops the rest), of the
    # probes through.
    assert probes == ['uidx_probes_total{outcome="article_missing"} 2.0']


@pytest.mark.trio
async def test_a_revoked_node_says_so(
    served: httpx.AsyncClient, stores: Stores, operator: dict[str, str]
) -> None:
    stores.nodes.create("edge-live")
    stores.nodes.create("edge-gone")
    stores.nodes.revoke("edge-gone")
    html = (await served.get("/", params=operator)).text
    nodes = html[html.index('<table id="nodes">') :]
    rows = nodes[: nodes.index("</table>")].split("<tr>")
    assert "edge-gone (revoked)" in next(row for row in rows if "edge-gone" in row)
    assert "revoked" not in next(row for row in rows if "edge-live" in row)


@pytest.mark.trio
async def test_backfill_and_parked_ranges_read_as_a_person_expects(
    served: httpx.AsyncClient, stores: Stores, operator: dict[str, str]
) -> None:
    from usenet_indexer.core.follow import Kind
    from usenet_indexer.store.groups import GroupStore
    from usenet_indexer.store.ranges import RangeStore

    pool = stores.catalog.pool
    groups, ranges = GroupStore(pool), RangeStore(pool)
    one = groups.add("alt.binaries.one", backfill_days=1, low=1, high=5_000_000, checked=True)
    (done,) = ranges.plan(one, 1_000_000, 1_999_999, 1_000_000, kind=Kind.BACKFILL)
    parked = groups.add("alt.binaries.parked", low=1, high=5_000_000, checked=True)
    (refused,) = ranges.plan(parked, 2_000_000, 2_999_999, 1_000_000)
    with pool.connection() as conn:
        conn.execute("UPDATE ranges SET state = 'done', resume = 2000000 WHERE id = %s", (done,))
        conn.execute(
            "UPDATE ranges SET state = 'failed', resume = 2500000, refusals = 3,"
            " refusal = 'a batch past the end', failed_at = now() WHERE id = %s",
            (refused,),
        )
    html = (await served.get("/", params=operator)).text
    row = next(r for r in html.split("<tr>") if "alt.binaries.one" in r)
    # Not "1 days, down to 1000000 of None" (the floor is found by the daemon, hourly).
    assert "<td>1 day, down to 1,000,000</td>" in row
    with pool.connection() as conn:
        conn.execute("UPDATE groups SET backfill_floor = 900000, backfill_days = 2")
    html = (await served.get("/", params=operator)).text
    row = next(r for r in html.split("<tr>") if "alt.binaries.one" in r)
    assert "<td>2 days, down to 1,000,000 of 900,000</td>" in row
    table = html[html.index('<table id="parked">') :]
    table = table[: table.index("</table>")]
    assert "<td>2,000,000..2,999,999</td>" in table
    assert '<td class="n">2,500,000</td>' in table


@pytest.mark.trio
async def test_a_node_that_died_mid_lease_shows_its_expired_lease_on_the_page_and_metrics(
    served: httpx.AsyncClient, stores: Stores, operator: dict[str, str]
) -> None:
    from usenet_indexer.commands.status import as_json
    from usenet_indexer.store.groups import GroupStore
    from usenet_indexer.store.ranges import RangeStore

    pool = stores.catalog.pool
    group = GroupStore(pool).add("alt.binaries.dead", low=1, high=200_000, checked=True)
    RangeStore(pool).plan(group, 1, 200_000, 100_000)
    node = stores.nodes.authenticate(stores.nodes.create("edge-dead"))
    assert node is not None
    assert RangeStore(pool).lease(node, 900.0) is not None
    with pool.connection() as conn:  # killed an hour ago: its lease ran out since
        conn.execute(
            "UPDATE ranges SET deadline = now() - interval '1 hour' WHERE holder = %s", (node,)
        )
    (leased,) = [
        r for r in as_json(StatusStore(pool).snapshot())["ranges"] if r["state"] == "leased"
    ]
    assert leased["expired_leases"] == 1  # what `uidx status` says
    html = (await served.get("/", params=operator)).text
    table = html[html.index('<table id="ranges">') :]
    rows = [
        [cell for cell in read(row).text if cell.strip()]
        for row in table[: table.index("</table>")].split("<tr>")[1:]
    ]
    assert rows[0] == ["group", "state", "ranges", "expired leases", "articles indexed"]
    assert [row[:4] for row in rows[1:]] == [
        ["alt.binaries.dead", "leased", "1", "1"],
        ["alt.binaries.dead", "planned", "1", "0"],
    ]
    nodes = html[html.index('<table id="nodes">') :]
    (dead,) = [row for row in nodes[: nodes.index("</table>")].split("<tr>") if "edge-dead" in row]
    assert "alt.binaries.dead 1-100000 at 1 (lease expired)" in dead
    metrics = (await served.get("/metrics", headers=SCRAPER)).text.splitlines()
    assert 'uidx_ranges_expired_leases{group="alt.binaries.dead"} 1.0' in metrics


SHOW = "Some.Show.S01E01.720p.HDTV.x264-GRP"


def _next_utc_days() -> set[str]:
    """The next UTC day as the page writes it (the day after that too, should a test
    cross midnight)."""
    today = datetime.now(UTC).date()
    return {f"{today + timedelta(days=n):%Y-%m-%d}" for n in (1, 2)}


def _requests_today(stores: Stores, name: str) -> int:
    """A user's requests of the day, as `uidx users list` shows them."""
    (row,) = [row for row in stores.users.list() if row.name == name]
    return row.requests_today


@pytest.fixture
async def one_a_day(settings: Settings, stores: Stores) -> AsyncIterator[httpx.AsyncClient]:
    """A coordinator whose settings allow each key one request a day."""
    limited = attrs.evolve(settings, api_requests_per_day=1)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, limited, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            yield client
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_users_page_searches_spend_its_daily_requests_and_stop_at_the_limit(
    served: httpx.AsyncClient, stores: Stores
) -> None:
    """A search on the page is a request of the day, as one through /api is, with the
    key or with a login session: past the limit the page says so and lists nothing."""
    await trio.to_thread.run_sync(insert_rows, stores, [(SHOW, int(time.time()) - 3600)])
    key = stores.users.create("sonarr")
    stores.users.set_limits("sonarr", {"requests_per_day": 2})
    first = read((await served.get("/", params={"q": "Some Show", "apikey": key})).text)
    assert first.release_names == [SHOW]
    assert (await served.post("/login", data={"apikey": key})).status_code == 303
    second = read((await served.get("/", params={"q": "Some Show"})).text)  # the session's
    assert second.release_names == [SHOW]
    for params in ({"q": "Some Show"}, {"q": "Some Show", "apikey": key}):
        response = await served.get("/", params=params)
        assert response.status_code == 200
        page = read(response.text)
        assert page.release_rows == 0
        assert not [link for link in page.links if link.startswith("/api?t=get")]
        text = " ".join(" ".join(page.text).split())
        assert "The daily limit of 2 requests is reached" in text
        assert any(f"{day} 00:00 UTC" in text for day in _next_utc_days()), text
        assert "No release matches" not in text
    assert _requests_today(stores, "sonarr") == 2  # what `uidx users list` shows
    # The page and the API spend the same requests.
    refused = ET.fromstring(
        (await served.get("/api", params={"t": "search", "q": "Some Show", "apikey": key})).content
    )
    assert (refused.tag, refused.get("code")) == ("error", "500")


@pytest.mark.trio
async def test_the_newest_releases_without_a_search_are_not_counted(
    one_a_day: httpx.AsyncClient, stores: Stores
) -> None:
    """The plain page (which reloads itself) spends nothing; a search does, against the
    settings' api_requests_per_day."""
    await trio.to_thread.run_sync(insert_rows, stores, [(SHOW, int(time.time()) - 3600)])
    key = stores.users.create("sonarr")
    for _ in range(3):
        assert read((await one_a_day.get("/", params={"apikey": key})).text).release_rows == 1
    assert _requests_today(stores, "sonarr") == 0
    searched = read((await one_a_day.get("/", params={"q": "Some Show", "apikey": key})).text)
    assert searched.release_names == [SHOW]
    refused = read((await one_a_day.get("/", params={"q": "Some Show", "apikey": key})).text)
    assert refused.release_rows == 0
    assert "The daily limit of 1 request is reached" in " ".join(" ".join(refused.text).split())
    # The limit reached, the newest releases still show.
    assert read((await one_a_day.get("/", params={"apikey": key})).text).release_rows == 1
    assert _requests_today(stores, "sonarr") == 1


@pytest.mark.trio
async def test_an_operators_page_searches_are_limited_as_the_api_limits_them(
    one_a_day: httpx.AsyncClient, stores: Stores
) -> None:
    """The API counts and limits an operator's requests like anyone's: the page too."""
    await trio.to_thread.run_sync(insert_rows, stores, [(SHOW, int(time.time()) - 3600)])
    key = stores.users.create("operator", operator=True)
    page = read((await one_a_day.get("/", params={"q": "Some Show", "apikey": key})).text)
    assert page.release_names == [SHOW]
    page = read((await one_a_day.get("/", params={"q": "Some Show", "apikey": key})).text)
    assert page.release_names == []
    assert "daily limit" in " ".join(page.text)
    assert _requests_today(stores, "operator") == 1


@pytest.mark.trio
async def test_a_search_results_page_does_not_reload_itself(
    served: httpx.AsyncClient, stores: Stores
) -> None:
    """A results page left open would search again at each reload, spending a
    request each time: only the newest releases (the page without q) reload."""
    await trio.to_thread.run_sync(insert_rows, stores, [(SHOW, int(time.time()) - 3600)])
    user = stores.users.create("sonarr")
    operator = stores.users.create("operator", operator=True)
    for key in (user, operator):
        assert read((await served.get("/", params={"apikey": key})).text).refresh.isdigit()
        results = read((await served.get("/", params={"q": "Some Show", "apikey": key})).text)
        assert results.release_names == [SHOW]
        assert results.refresh == ""
        assert "refreshes" not in " ".join(results.text)
    assert "this page refreshes every" in (await served.get("/", params={"apikey": operator})).text
