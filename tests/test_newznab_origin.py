"""Where a feed's links point: `public_url`, else what a trusted proxy forwarded, else
the request's own scheme and Host.

Behind the TLS proxy the README recommends, the *arr programs read a feed
whose enclosures must be https:// URLs of the proxy's host, not the
coordinator's plain http:// address: SABnzbd and NZBGet fetch them as they are.
A client that is not a trusted proxy cannot make its feed point elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

import attrs
import httpx
import orjson
import pytest
import trio
from test_newznab import get_xml, items, store_generated
from test_newznab_downloads import DEADLINE_SECONDS, serving

from usenet_indexer.config import Settings, load
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.origin import Origin
from usenet_indexer.errors import ConfigError

PUBLIC = "https://indexer.example.org/uidx"
FORWARDED = {"x-forwarded-proto": "https", "x-forwarded-host": "indexer.example.org"}


@pytest.fixture
def stores_with_a_release(stores: Stores) -> Stores:
    """The stores with a catalog of a few releases."""
    assert store_generated(stores, 2_000, 3) > 0
    return stores


async def links(client: httpx.AsyncClient, key: str, **headers: str) -> set[str]:
    """Every absolute URL of a feed (XML and JSON) and of an NZB's X-DNZB headers."""
    params = {"t": "search", "apikey": key, "limit": "3"}
    response = await client.get("/api", params=params, headers=headers)
    root = ET.fromstring(response.content)
    found = {root.findtext("./channel/link", "")}
    for item in items(root):
        found |= {item.findtext("link", ""), item.findtext("comments", "")}
        enclosure = item.find("enclosure")
        assert enclosure is not None
        found.add(enclosure.get("url", ""))
    as_json = await client.get("/api", params={**params, "o": "json"}, headers=headers)
    channel = orjson.loads(as_json.content)["channel"]
    found.add(channel["link"])
    for item in channel["item"]:
        found |= {item["link"], item["comments"], item["enclosure"]["@attributes"]["url"]}
    # The NZB's headers, as SABnzbd reads them (fetched here from the real address).
    nzb = await client.get(
        "/api",
        params={"t": "get", "id": items(root)[0].findtext("guid", ""), "apikey": key},
        headers=headers,
    )
    assert nzb.status_code == 200
    found |= {nzb.headers["x-dnzb-details"], nzb.headers["x-dnzb-failure"]}
    return found


@pytest.mark.trio
async def test_public_url_starts_every_link(
    settings: Settings, stores_with_a_release: Stores
) -> None:
    stores = stores_with_a_release
    key = stores.users.create("sonarr")
    public = attrs.evolve(settings, public_url=PUBLIC, trusted_proxies=("127.0.0.1/32",))
    with trio.fail_after(DEADLINE_SECONDS):
        async with serving(public, stores) as client:
            for headers in ({}, FORWARDED, {"host": "elsewhere.example:81"}):
                found = await links(client, key, **headers)
                assert len(found) > 5
                assert all(url.startswith(PUBLIC + "/") for url in found), found
            # Behind its proxy (which strips /uidx), each works: the enclosure is the NZB.
            feed = await get_xml(client, t="search", apikey=key, limit="1")
            enclosure = items(feed)[0].find("enclosure")
            assert enclosure is not None
            url = enclosure.get("url", "")
            nzb = await client.get(url.removeprefix(PUBLIC))
            assert nzb.headers["content-type"] == "application/x-nzb"


@pytest.mark.trio
async def test_forwarded_headers_count_only_from_trusted_proxies(
    settings: Settings, stores_with_a_release: Stores
) -> None:
    stores = stores_with_a_release
    key = stores.users.create("sonarr")
    trusted = attrs.evolve(settings, trusted_proxies=("10.9.0.0/16", "127.0.0.0/8"))
    with trio.fail_after(DEADLINE_SECONDS):
        async with serving(trusted, stores) as client:
            found = await links(client, key, **FORWARDED)
            assert all(u.startswith("https://indexer.example.org/") for u in found), found
            # A chain of proxies: the first value is the client's.
            chained = {"x-forwarded-proto": "https, http", "x-forwarded-host": "a.example, b"}
            found = await links(client, key, **chained)
            assert all(u.startswith("https://a.example/") for u in found), found
            # Nonsense is not written into a URL: the request's own Host stays.
            own = str(client.base_url).rstrip("/")
            hostile = {"x-forwarded-proto": "javascript", "x-forwarded-host": "evil.example/x?"}
            found = await links(client, key, **hostile)
            assert all(u.startswith(own + "/") for u in found), found
        for untrusted in (settings, attrs.evolve(settings, trusted_proxies=("10.9.0.0/16",))):
            async with serving(untrusted, stores) as client:
                own = str(client.base_url).rstrip("/")
                found = await links(client, key, **FORWARDED)
                assert all(u.startswith(own + "/") for u in found), found
                assert own.startswith("http://127.0.0.1:")


def test_origin_is_pure_and_checks_the_peer() -> None:
    origin = Origin.of("", ["192.168.1.0/24", "::1"])
    ask = {"scheme": "http", "host": "10.0.0.5:8750", "forwarded_proto": "https",
           "forwarded_host": "idx.example"}  # fmt: skip
    assert origin.base_url(peer="192.168.1.7", **ask) == "https://idx.example"
    assert origin.base_url(peer="::ffff:192.168.1.7", **ask) == "https://idx.example"
    assert origin.base_url(peer="::1", **ask) == "https://idx.example"
    for peer in ("192.168.2.7", "", "not an address"):
        assert origin.base_url(peer=peer, **ask) == "http://10.0.0.5:8750"
    assert origin.base_url(scheme="https", host="[::1]:8750", peer="") == "https://[::1]:8750"
    assert origin.base_url(scheme="http", host=None, peer="") == "http://localhost"
    assert origin.base_url(scheme="http", host="a b", peer="") == "http://localhost"
    assert Origin.of(PUBLIC, []).base_url(scheme="http", host="x", peer="") == PUBLIC


def test_the_client_behind_a_trusted_proxy_is_the_one_it_names() -> None:
    origin = Origin.of("", ["127.0.0.1", "10.0.0.0/8"])
    # The proxy appends the address it saw; what a client wrote before it is not believed.
    assert origin.client("127.0.0.1", "203.0.113.5") == "203.0.113.5"
    assert origin.client("127.0.0.1", "198.51.100.1, 203.0.113.5") == "203.0.113.5"
    # Through two trusted proxies: the last address that is not one of them.
    assert origin.client("127.0.0.1", "203.0.113.5, 10.1.2.3") == "203.0.113.5"
    assert origin.client("127.0.0.1", "10.1.2.3") == "127.0.0.1"
    # Some proxies add the client's port.
    assert origin.client("127.0.0.1", "203.0.113.5:4711") == "203.0.113.5"
    assert origin.client("127.0.0.1", "[2001:db8::1]:4711") == "2001:db8::1"
    assert origin.client("127.0.0.1", "2001:db8::1") == "2001:db8::1"
    # From anyone else, or with a header no proxy wrote, the peer is the client.
    assert origin.client("192.0.2.9", "203.0.113.5") == "192.0.2.9"
    assert origin.client("127.0.0.1", "unknown, 203.0.113.5 x") == "127.0.0.1"
    assert origin.client("127.0.0.1", None) == "127.0.0.1"
    assert Origin.of("", []).client("127.0.0.1", "203.0.113.5") == "127.0.0.1"


def test_public_url_and_trusted_proxies_mistakes_name_the_key(tmp_path: Path) -> None:
    env = {"UIDX_HOME": str(tmp_path)}
    settings = load(
        {**env, "UIDX_PUBLIC_URL": PUBLIC + "/", "UIDX_TRUSTED_PROXIES": "10.0.0.1 fd00::/8"}
    )
    assert settings.public_url == PUBLIC
    assert settings.trusted_proxies == ("10.0.0.1/32", "fd00::/8")
    (tmp_path / "uidx.toml").write_text('trusted_proxies = ["172.16.0.0/12"]\n')
    assert load(env).trusted_proxies == ("172.16.0.0/12",)
    for key, value in (
        ("public_url", "indexer.example.org"),
        ("public_url", "ftp://indexer.example.org"),
        ("public_url", "https://user:pass@indexer.example.org"),
        ("public_url", "https://indexer.example.org/?apikey=x"),
        ("trusted_proxies", "10.0.0.1 proxy.example"),
        ("trusted_proxies", "10.0.0.0/33"),
        ("api_requests_per_day", "-1"),
        ("api_grabs_per_day", "many"),
    ):
        with pytest.raises(ConfigError, match=rf"^{key}: "):
            load({**env, f"UIDX_{key.upper()}": value})
    (tmp_path / "uidx.toml").write_text("public_url = 5\n")
    with pytest.raises(ConfigError, match=r"^public_url: "):
        load(env)
