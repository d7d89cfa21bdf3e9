"""The status page at / and the metrics at /metrics, as an operator sees them.

The page is read as HTML by a parser here, and in a real browser (headless
Chromium) by tests/test_status_browser.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from html.parser import HTMLParser

import httpx
import pytest
import trio
from test_newznab import store_generated

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores


class _Page(HTMLParser):
    """What a person sees: the text, the tables' rows, the progress bars, the links."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.bars: list[int] = []
        self.links: list[str] = []
        self.release_rows = 0
        self.release_names: list[str] = []
        self.refresh = ""
        self._skip = False
        self._cell = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("role") == "progressbar":
            self.bars.append(int(found.get("aria-valuenow") or 0))
        if tag == "a" and found.get("href"):
            self.links.append(found["href"] or "")
        if tag == "tr":
            self._cell = -1 if found.get("class") != "release" else 0
            if found.get("class") == "release":
                self.release_rows += 1
        if tag == "td" and self._cell >= 0:
            self._cell += 1
        self._skip = tag in ("style", "title")
        if tag == "meta" and found.get("http-equiv") == "refresh":
            self.refresh = found.get("content") or ""

    def handle_endtag(self, tag: str) -> None:
        self._skip = False

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.text.append(data)
        if self._cell == 1:
            self.release_names.append(data)


def read(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


@pytest.fixture
async def served(settings: Settings, stores: Stores) -> AsyncIterator[httpx.AsyncClient]:
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
            yield client
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_an_empty_indexer_says_there_is_nothing_yet(served: httpx.AsyncClient) -> None:
    response = await served.get("/")
    assert response.status_code == 200
    page = read(response.text)
    text = " ".join(page.text)
    assert "No groups yet" in text
    assert "No releases in the catalog yet" in text
    assert page.refresh.isdigit()


@pytest.mark.trio
async def test_the_page_shows_groups_ranges_and_releases_with_nzb_links(
    served: httpx.AsyncClient, stores: Stores
) -> None:
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    key = stores.users.create("operator")
    page = read((await served.get("/", params={"apikey": key})).text)
    text = " ".join(page.text)
    assert "alt.binaries.test" in text
    assert 100 in page.bars  # the one range is done
    assert "edge" in text  # the node that stored the batches, with its rate
    assert page.release_rows > 0
    nzb_links = [link for link in page.links if link.startswith("/api?t=get")]
    assert len(nzb_links) == page.release_rows
    assert all(f"apikey={key}" in link for link in nzb_links)
    nzb = await served.get(nzb_links[0])
    assert nzb.status_code == 200
    assert nzb.content.startswith(b"<?xml")
    # The search box: releases matching every word; a key that is no user's is not carried.
    word = page.release_names[0].replace("-", ".").replace("_", ".").split(".")[0]
    found = read((await served.get("/", params={"q": word, "apikey": "nope"})).text)
    assert found.release_rows > 0
    assert all(word.lower() in name.lower() for name in found.release_names)
    assert all("apikey" not in link for link in found.links)
    crowded = await served.get("/", params={f"x{n}": "1" for n in range(40)})
    assert crowded.status_code == 200
    hostile = await served.get("/", params={"q": "<script>alert(1)</script>", "apikey": "\x00"})
    assert hostile.status_code == 200
    assert "<script>" not in hostile.text


@pytest.mark.trio
async def test_metrics_are_prometheus_text(served: httpx.AsyncClient, stores: Stores) -> None:
    await trio.to_thread.run_sync(store_generated, stores, 5_000, 3)
    key = stores.users.create("prom")
    await served.get("/api", params={"t": "search", "apikey": key})
    await served.get("/api", params={"t": "search", "apikey": "wrong"})
    response = await served.get("/metrics")
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
