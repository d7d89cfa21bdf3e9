"""Who may call what: every route of the coordinator asked with every kind of credentials.

The route table is the App's (server.coordinator_app): a test walks it and
fails on a route without a declared level or without a request below, so a
route added later is asked here too. Each request goes to a running
coordinator on a fresh database, once without credentials, with a node's
token, an API user's key, an operator's key and the metrics token, and
what came back must be what the route's declared level says.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import attrs
import httpx
import pytest
import trio
from hypercorn.typing import ASGIReceiveEvent

from usenet_indexer.cli import main
from usenet_indexer.config import Settings
from usenet_indexer.coordinator.http.asgi import Access, App, Body, Exchange
from usenet_indexer.coordinator.http.node import ApiOptions, NodeApi
from usenet_indexer.coordinator.server import coordinator_app, metrics_app, serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.users import ApiUser, UserStore
from usenet_indexer.testing.processes import free_port

DEADLINE_SECONDS = 60
METRICS_TOKEN = "m" * 48

# One request per route (and per part of a route with a level of its own), and
# the level it must have: what a reader of this table sees is what is enforced.
REQUESTS: dict[tuple[str, str], Access] = {
    ("GET", "/healthz"): Access.PUBLIC,
    ("GET", "/api?t=caps"): Access.PUBLIC,
    ("GET", "/api?t=search&q=the"): Access.API_USER,
    ("GET", "/api?t=get&id=" + "0" * 32): Access.API_USER,
    ("GET", "/"): Access.API_USER,
    ("GET", "/?q=the"): Access.API_USER,
    ("GET", "/login"): Access.PUBLIC,
    ("POST", "/logout"): Access.PUBLIC,
    ("GET", "/metrics"): Access.METRICS,
    ("POST", "/api/v1/node/lease"): Access.NODE,
    ("GET", "/api/v1/node/ranges/1/stream"): Access.NODE,
}

# Which credentials each level admits.
ADMITS = {
    Access.PUBLIC: {"nothing", "node", "api user", "operator", "metrics"},
    Access.NODE: {"node"},
    Access.API_USER: {"api user", "operator"},
    Access.OPERATOR: {"operator"},
    Access.METRICS: {"metrics"},
}


@attrs.frozen
class Coordinator:
    url: str
    app: App  # the same table of routes the server serves
    credentials: dict[str, tuple[dict[str, str], dict[str, str]]]  # kind -> (params, headers)


@pytest.fixture
async def coordinator(settings: Settings, stores: Stores) -> AsyncIterator[Coordinator]:
    scraped = attrs.evolve(settings, metrics_token=METRICS_TOKEN)
    node = stores.nodes.create("edge")
    credentials = {
        "nothing": ({}, {}),
        "node": ({}, {"authorization": f"Bearer {node}"}),
        "api user": ({"apikey": stores.users.create("sonarr")}, {}),
        "operator": ({"apikey": stores.users.create("admin", operator=True)}, {}),
        "metrics": ({}, {"authorization": f"Bearer {METRICS_TOKEN}"}),
    }
    app = coordinator_app(
        stores, NodeApi(stores, ApiOptions.from_settings(scraped)), metrics_token=METRICS_TOKEN
    )
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, scraped, stores))
        yield Coordinator(f"http://{host}:{port}", app, credentials)
        nursery.cancel_scope.cancel()


def declared(app: App, method: str, target: str) -> Access:
    """The level the App's table declares for this request."""
    parts = urlsplit(target)
    route = app.route(parts.path)
    assert route is not None, target
    exchange = Exchange(method, parts.path, [], Body(_never), query=parts.query.encode())
    return route.level(exchange)


async def _never() -> ASGIReceiveEvent:
    raise AssertionError("a level is decided without the body")


def admitted(target: str, response: httpx.Response) -> bool:
    """Whether the answer is the route's own, not its refusal, as a client reads it."""
    if target.startswith("/api?"):
        if response.status_code == 404:  # t=get of an id that is no release's
            return True
        root = ET.fromstring(response.content)
        if root.tag == "error":
            assert root.get("code") == "100", response.text  # the refusal, nothing else
            return False
        return root.tag in ("caps", "rss")
    return response.status_code not in (401, 404)


def test_every_route_declares_a_level_and_is_asked_below(
    settings: Settings, stores: Stores
) -> None:
    app = coordinator_app(stores, NodeApi(stores, ApiOptions.from_settings(settings)))
    routes = app.routes()
    assert routes  # the walk sees the table
    for path, route in routes.items():
        assert isinstance(route.access, Access), path
        asked = [target for _, target in REQUESTS if app.route(urlsplit(target).path) is route]
        assert asked, f"{path} is not asked by REQUESTS"


@pytest.mark.trio
async def test_every_route_answers_as_its_declared_level_says(coordinator: Coordinator) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with httpx.AsyncClient(base_url=coordinator.url) as client:
            for (method, target), level in REQUESTS.items():
                assert declared(coordinator.app, method, target) is level, target
                for kind, (params, headers) in coordinator.credentials.items():
                    client.cookies.clear()
                    parts = urlsplit(target)
                    query: list[tuple[str, str | int | float | bool | None]] = [
                        *parse_qsl(parts.query),
                        *params.items(),
                    ]
                    response = await client.request(
                        method, parts.path, params=query, headers=headers
                    )
                    assert response.status_code < 500, (target, kind, response.text)
                    expected = kind in ADMITS[level]
                    assert admitted(target, response) is expected, (
                        target, kind, response.status_code, response.text[:300],
                    )  # fmt: skip


@pytest.mark.trio
async def test_without_credentials_nothing_of_the_catalog_shows(coordinator: Coordinator) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with httpx.AsyncClient(base_url=coordinator.url) as client:
            search = await client.get("/", params={"q": "the"})
            assert search.status_code == 401
            assert "Releases matching" not in search.text
            assert 'action="/login"' in search.text
            health = await client.get("/healthz")
            assert (health.status_code, health.text) == (200, "ok\n")
            metrics = await client.get("/metrics")
            assert metrics.status_code == 401
            assert "uidx_" not in metrics.text


@pytest.mark.trio
async def test_metrics_without_a_token_set_are_not_there(
    settings: Settings, stores: Stores
) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(partial(serve, settings, stores))
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
                for headers in ({}, {"authorization": "Bearer anything"}):
                    assert (await client.get("/metrics", headers=headers)).status_code == 404
            nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_healthz_says_503_when_the_database_does_not_answer(
    settings: Settings, stores: Stores
) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(partial(serve, settings, stores))
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
                assert (await client.get("/healthz")).status_code == 200
                stores.catalog.pool.close()
                down = await client.get("/healthz")
                assert down.status_code == 503
                assert "retry-after" in down.headers
            nursery.cancel_scope.cancel()


def test_uidx_users_create_operator_makes_an_operator(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    assert main(["users", "create", "admin", "--operator"]) == 0
    assert main(["users", "create", "sonarr"]) == 0
    admin, said, sonarr, _ = capsys.readouterr().out.splitlines()
    assert said == "(the API key of admin, operator; it is shown this once)"
    with open_pool(pg_url, Settings(home=tmp_path)) as pool:
        users = UserStore(pool)
        assert users.authenticate(admin) == ApiUser(1, "admin", operator=True)
        found = users.authenticate(sonarr)
        assert found is not None
        assert not found.operator
    assert main(["users", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split()[:3] == ["user", "role", "requests"]
    assert [line.split()[:3] for line in listed[1:]] == [
        ["admin", "operator", "1"],
        ["sonarr", "user", "1"],
    ]


@pytest.mark.trio
async def test_metrics_listen_serves_metrics_alone_without_a_token(
    settings: Settings, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    metrics_listen = f"127.0.0.1:{free_port()}"
    separate = attrs.evolve(settings, metrics_listen=metrics_listen)
    key = stores.users.create("admin", operator=True)
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(partial(serve, separate, stores))
            async with httpx.AsyncClient() as client:
                scraped = await client.get(f"http://{metrics_listen}/metrics")
                assert scraped.status_code == 200
                assert "uidx_releases " in scraped.text
                health = await client.get(f"http://{metrics_listen}/healthz")
                assert health.status_code == 200
                # Nothing else is there, whatever the key.
                for path in ("/", "/api", "/login", "/api/v1/node/lease"):
                    answer = await client.get(
                        f"http://{metrics_listen}{path}", params={"apikey": key, "t": "search"}
                    )
                    assert answer.status_code == 404, path
                # The main listener still keeps /metrics closed (no metrics_token).
                assert (await client.get(f"http://{host}:{port}/metrics")).status_code == 404
            nursery.cancel_scope.cancel()
    said = [r.getMessage() for r in caplog.records]
    assert f"metrics listening on http://{metrics_listen}/metrics" in said


def test_the_metrics_listeners_routes_declare_their_level(
    settings: Settings, stores: Stores
) -> None:
    app = coordinator_app(stores, NodeApi(stores, ApiOptions.from_settings(settings)))
    routes = metrics_app(app).routes()
    assert {path: route.access for path, route in routes.items()} == {
        "/metrics": Access.PUBLIC,
        "/healthz": Access.PUBLIC,
    }


@pytest.mark.trio
async def test_the_node_api_refuses_as_edges_read_it(coordinator: Coordinator) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        async with httpx.AsyncClient(base_url=coordinator.url) as client:
            missing = await client.post("/api/v1/node/lease")
            assert (missing.status_code, missing.json()) == (
                401,
                {"error": "a bearer token is required"},
            )
            assert missing.headers["www-authenticate"] == "Bearer"
            wrong = await client.post(
                "/api/v1/node/lease", headers={"authorization": f"Bearer {'A' * 43}"}
            )
            assert (wrong.status_code, wrong.json()) == (401, {"error": "unknown or revoked token"})
            assert wrong.headers["www-authenticate"] == 'Bearer error="invalid_token"'
