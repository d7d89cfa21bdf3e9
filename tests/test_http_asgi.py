"""The coordinator's ASGI side in memory: the App, its prefixes, bodies and error mapping.

No server and no database: a request is a scope, a channel of receive
messages the test fills, and the list of what the App sent. The APIs are
small fakes that answer, refuse or raise as each test needs; the node API
itself is tests/test_http_node.py, end to end.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import attrs
import orjson
import psycopg
import pytest
import trio
import trio.testing
from hypercorn.typing import (
    ASGIReceiveEvent,
    ASGISendCallable,
    ASGISendEvent,
    ConnectionState,
    HTTPScope,
)

from usenet_indexer.coordinator.http.asgi import (
    SEND_BYTES,
    Access,
    Api,
    App,
    Caller,
    Denied,
    Exchange,
    Refused,
    Response,
    Route,
    read_body,
    throttle_key,
)
from usenet_indexer.core.origin import Origin
from usenet_indexer.testing.logcheck import problems

# Far above what each test needs (milliseconds).
DEADLINE_SECONDS = 10
BODY_TIMEOUT_SECONDS = 5.0
RETRY_AFTER_SECONDS = 7
CAP = 10

Handler = Callable[[Exchange], Awaitable[Response]]


@attrs.define
class FakeApi:
    """An API that records the paths it was asked and lets `handler` answer."""

    handler: Handler
    paths: list[str] = attrs.field(factory=list)

    async def respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        self.paths.append(exchange.path)
        return await self.handler(exchange)


async def ok(exchange: Exchange) -> Response:
    return Response.json(200, {"path": exchange.path})


async def read_capped(exchange: Exchange) -> Response:
    body = await read_body(exchange, CAP, timeout_seconds=BODY_TIMEOUT_SECONDS)
    return Response.json(200, {"body": body.decode()})


def raising(error: Exception) -> Handler:
    async def handler(exchange: Exchange) -> Response:
        exchange.caller = "node 3"
        raise error

    return handler


@attrs.define
class FakeGate:
    """Admits a request whose `x-who` header names an operator, a user or a node."""

    levels: list[Access] = attrs.field(factory=list)

    async def admit(self, exchange: Exchange, level: Access) -> Caller | Denied:
        self.levels.append(level)
        who = dict(exchange.headers).get(b"x-who", b"").decode()
        callers = {
            "operator": Caller("operator", "o", operator=True),
            "user": Caller("api user", "u"),
            "node": Caller("node", "3", node_id=3),
        }
        if not who:
            return Denied.MISSING
        if who not in callers:
            return Denied.WRONG
        caller = callers[who]
        if level is Access.NODE and caller.kind != "node":
            return Denied.WRONG
        if level is Access.OPERATOR and not caller.operator:
            return Denied.NOT_ENOUGH
        if level is Access.API_USER and caller.kind == "node":
            return Denied.WRONG
        return caller


def app_of(mounts: dict[str, Api], gate: FakeGate | None = None) -> App:
    return App(
        {prefix: Route(api, Access.PUBLIC) for prefix, api in mounts.items()},
        gate=gate or FakeGate(),
        body_timeout_seconds=BODY_TIMEOUT_SECONDS,
        retry_after_seconds=RETRY_AFTER_SECONDS,
    )


def scope(method: str, path: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> HTTPScope:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": list(headers),
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8750),
        "state": ConnectionState({}),
        "extensions": {},
    }


@attrs.frozen
class Answer:
    """What the App sent for one request (None: it sent nothing)."""

    status: int
    headers: dict[bytes, bytes]
    body: bytes

    def json(self) -> object:
        return orjson.loads(self.body)


def answer_of(sent: list[ASGISendEvent]) -> Answer | None:
    if not sent:
        return None
    start, *bodies = sent
    assert start["type"] == "http.response.start"
    body = b""
    for message in bodies:
        assert message["type"] == "http.response.body"
        body += message["body"]
    return Answer(start["status"], dict(start["headers"]), body)


def request_parts(*parts: bytes) -> list[ASGIReceiveEvent]:
    """The body in these parts, as hypercorn hands it over (the last without more_body)."""
    return [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]


async def call(
    app: App,
    method: str,
    path: str,
    *,
    headers: Sequence[tuple[bytes, bytes]] = (),
    incoming: Sequence[ASGIReceiveEvent] = (),
    then_wait: bool = False,
) -> tuple[Answer | None, int]:
    """One request; the answer, and how many of `incoming` the App left unread.

    Args:
        incoming: the receive messages, in order (default: an empty body).
        then_wait: after them, `receive` waits forever (a client that stalls);
            else it says the client disconnected.
    """
    messages = list(incoming) if incoming else request_parts(b"")
    left = len(messages)
    sent: list[ASGISendEvent] = []

    async def receive() -> ASGIReceiveEvent:
        nonlocal left
        if left:
            left -= 1
            return messages[len(messages) - left - 1]
        if then_wait:
            await trio.sleep_forever()
        return {"type": "http.disconnect"}

    async def send(message: ASGISendEvent) -> None:
        sent.append(message)

    await app(scope(method, path, headers), receive, send)
    return answer_of(sent), left


# --- dispatch by prefix ---------------------------------------------------------------


@pytest.mark.trio
async def test_a_path_under_no_prefix_is_404_and_no_api_sees_it() -> None:
    api = FakeApi(ok)
    app = app_of({"/api/v1/node/": api})
    with trio.fail_after(DEADLINE_SECONDS):
        for path in ("/", "/api/v1/node", "/api/v1/nodes/lease", "/API/v1/node/lease", "/x/"):
            answer, _ = await call(app, "GET", path)
            assert answer is not None
            assert answer.status == 404, path
            assert answer.json() == {"error": f"no such call: {path}"}
    assert api.paths == []


@pytest.mark.trio
async def test_each_prefix_goes_to_its_api_with_the_whole_path() -> None:
    first, second = FakeApi(ok), FakeApi(ok)
    app = app_of({"/api/v1/node/": first, "/status/": second})
    with trio.fail_after(DEADLINE_SECONDS):
        answer, _ = await call(app, "GET", "/status/ranges")
        await call(app, "POST", "/api/v1/node/")
    assert answer is not None
    assert (answer.status, answer.json()) == (200, {"path": "/status/ranges"})
    assert (first.paths, second.paths) == (["/api/v1/node/"], ["/status/ranges"])


def test_prefixes_are_whole_segments_that_do_not_nest() -> None:
    with pytest.raises(ValueError, match="starts and ends"):
        app_of({"/api/v1/node": FakeApi(ok)})
    with pytest.raises(ValueError, match="holds another"):
        app_of({"/api/": FakeApi(ok), "/api/v1/node/": FakeApi(ok)})


@pytest.mark.trio
async def test_the_lifespan_is_answered_and_ends_at_shutdown() -> None:
    app = app_of({})
    incoming: list[ASGIReceiveEvent] = [
        {"type": "lifespan.startup"},
        {"type": "lifespan.shutdown"},
    ]
    sent: list[ASGISendEvent] = []

    async def receive() -> ASGIReceiveEvent:
        return incoming.pop(0)

    async def send(message: ASGISendEvent) -> None:
        sent.append(message)

    with trio.fail_after(DEADLINE_SECONDS):
        await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    assert sent == [{"type": "lifespan.startup.complete"}, {"type": "lifespan.shutdown.complete"}]


# --- what an API raised ---------------------------------------------------------------------


@pytest.mark.trio
async def test_an_unexpected_error_is_500_and_logged_as_answered_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = app_of({"/a/": FakeApi(raising(RuntimeError("boom")))})
    with trio.fail_after(DEADLINE_SECONDS):
        answer, _ = await call(app, "POST", "/a/x")
    assert answer is not None
    assert (answer.status, answer.json()) == (500, {"error": "internal error"})
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert record.getMessage() == "node 3 POST '/a/x': answered 500: RuntimeError('boom')"
    assert record.exc_info is not None  # the traceback goes with it
    line = f"2026-12-01 19:40:04,404 ERROR [4242] {record.name}: {record.getMessage()}"
    assert problems([line]).answered_5xx == ((500, line),)


@pytest.mark.trio
async def test_the_database_down_is_503_with_retry_after_and_logged_as_answered_503(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = app_of({"/a/": FakeApi(raising(psycopg.OperationalError("the pool timed out")))})
    with trio.fail_after(DEADLINE_SECONDS):
        answer, _ = await call(app, "POST", "/a/x")
    assert answer is not None
    assert answer.status == 503
    assert answer.headers[b"retry-after"] == str(RETRY_AFTER_SECONDS).encode()
    assert answer.json() == {"error": "the database is unavailable; try again"}
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message == "node 3 POST '/a/x': answered 503: database unavailable: the pool timed out"
    assert problems([message]).answered_5xx == ((503, message),)


@pytest.mark.trio
async def test_a_refusal_is_its_response_and_one_info_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    refusal = Response.error(409, "not held", headers=((b"x-why", b"fenced"),))
    app = app_of({"/a/": FakeApi(raising(Refused(refusal)))})
    with trio.fail_after(DEADLINE_SECONDS):
        answer, _ = await call(app, "POST", "/a/x")
    assert answer is not None
    assert (answer.status, answer.json()) == (409, {"error": "not held"})
    assert answer.headers[b"x-why"] == b"fenced"
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == """node 3 POST '/a/x': 409 {"error":"not held"}"""
    assert not problems([record.getMessage()])


@pytest.mark.trio
async def test_a_caller_not_known_is_logged_as_unauthenticated_and_the_path_quoted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)

    async def refuse(exchange: Exchange) -> Response:
        raise Refused(Response.error(401, "who?"))

    app = app_of({"/a/": FakeApi(refuse)})
    with trio.fail_after(DEADLINE_SECONDS):
        await call(app, "GET", "/a/\r\nforged line")
    assert caplog.messages == [
        """unauthenticated GET '/a/\\r\\nforged line': 401 {"error":"who?"}"""
    ]


# --- bodies ---------------------------------------------------------------------------------


@pytest.mark.trio
async def test_a_body_within_the_cap_reaches_the_api_whole() -> None:
    app = app_of({"/a/": FakeApi(read_capped)})
    with trio.fail_after(DEADLINE_SECONDS):
        answer, left = await call(app, "POST", "/a/x", incoming=request_parts(b"12345", b"67890"))
    assert answer is not None
    assert (answer.status, answer.json(), left) == (200, {"body": "1234567890"}, 0)
    assert b"connection" not in answer.headers


@pytest.mark.trio
async def test_a_body_announced_over_the_cap_is_413_unread_and_thrown_away() -> None:
    app = app_of({"/a/": FakeApi(read_capped)})
    length = ((b"content-length", str(CAP + 1).encode()),)
    with trio.fail_after(DEADLINE_SECONDS):
        answer, left = await call(
            app, "POST", "/a/x", headers=length, incoming=request_parts(b"123456", b"12345")
        )
    assert answer is not None
    assert answer.status == 413
    assert answer.json() == {"error": f"the body is over the cap of {CAP} bytes"}
    assert answer.headers[b"connection"] == b"close"
    # Taken from the queue while the answer went out (see asgi.Body), never kept.
    assert left == 0


@pytest.mark.trio
async def test_a_body_counted_over_the_cap_is_413() -> None:
    app = app_of({"/a/": FakeApi(read_capped)})
    with trio.fail_after(DEADLINE_SECONDS):
        answer, left = await call(
            app, "POST", "/a/x", incoming=request_parts(b"123456", b"123456", b"rest")
        )
    assert answer is not None
    assert (answer.status, answer.headers[b"connection"], left) == (413, b"close", 0)


@pytest.mark.trio
async def test_a_body_that_stalls_is_408_and_the_request_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = app_of({"/a/": FakeApi(read_capped)})
    with trio.fail_after(DEADLINE_SECONDS * 100):
        started = trio.current_time()
        answer, _ = await call(
            app, "POST", "/a/x", incoming=request_parts(b"123", b"")[:1], then_wait=True
        )
        took = trio.current_time() - started
    assert answer is not None
    assert answer.status == 408
    assert answer.json() == {"error": "the request body did not arrive in time"}
    assert answer.headers[b"connection"] == b"close"
    # The body's deadline, then as long again throwing away what never comes.
    assert took == pytest.approx(2 * BODY_TIMEOUT_SECONDS)


@pytest.mark.trio
async def test_a_client_gone_while_its_body_is_read_gets_no_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    app = app_of({"/a/": FakeApi(read_capped)})
    with trio.fail_after(DEADLINE_SECONDS):
        answer, _ = await call(app, "POST", "/a/x", incoming=request_parts(b"123", b"")[:1])
    assert answer is None
    assert not caplog.records


@pytest.mark.trio
async def test_a_204_has_no_length_and_other_answers_do() -> None:
    sent: list[ASGISendEvent] = []

    async def send(message: ASGISendEvent) -> None:
        sent.append(message)

    with trio.fail_after(DEADLINE_SECONDS):
        await Response(204).send(send)
        await Response.json(200, {}).send(send)
    no_content, content = answer_of(sent[:2]), answer_of(sent[2:])
    assert no_content is not None
    assert content is not None
    assert b"content-length" not in no_content.headers
    assert content.headers[b"content-length"] == b"2"


def test_a_route_without_a_declared_level_is_refused() -> None:
    api = FakeApi(ok)
    with pytest.raises(ValueError, match="no declared access level"):
        App({"/a/": api}, gate=FakeGate(), body_timeout_seconds=1, retry_after_seconds=1)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="no declared access level"):
        App(
            {},
            gate=FakeGate(),
            body_timeout_seconds=1,
            retry_after_seconds=1,
            paths={"/x": api},  # type: ignore[dict-item]
        )


@pytest.mark.trio
async def test_the_gate_runs_before_the_handler_and_the_route_says_how_to_refuse(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    api = FakeApi(ok)
    gate = FakeGate()

    def refusal(exchange: Exchange, denied: Denied) -> Response:
        return Response.error(401, f"login first: {denied.value}")

    app = App(
        {"/node/": Route(api, Access.NODE)},
        gate=gate,
        body_timeout_seconds=1,
        retry_after_seconds=1,
        paths={
            "/page": Route(api, Access.OPERATOR, refusal=refusal),
            "/caps": Route(api, Access.API_USER, public=lambda exchange: True),
        },
    )
    with trio.fail_after(DEADLINE_SECONDS):
        missing = (await call(app, "GET", "/page"))[0]
        assert missing is not None
        assert (missing.status, missing.json()) == (401, {"error": "login first: no credentials"})
        user = (await call(app, "GET", "/page", headers=[(b"x-who", b"user")]))[0]
        assert user is not None
        assert user.json() == {"error": "login first: credentials below the route's level"}
        node = (await call(app, "GET", "/node/lease", headers=[(b"x-who", b"user")]))[0]
        assert node is not None
        assert node.status == 401
        assert node.headers[b"www-authenticate"] == b"Bearer"
        assert api.paths == []  # no handler ran for a refused request
        operator = (await call(app, "GET", "/page", headers=[(b"x-who", b"operator")]))[0]
        assert operator is not None
        assert operator.status == 200
        caps = (await call(app, "GET", "/caps"))[0]
        assert caps is not None
        assert caps.status == 200
    assert api.paths == ["/page", "/caps"]
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert said[0] == "unauthenticated GET '/page': 401 refused (no credentials for operator)"
    assert gate.levels == [Access.OPERATOR, Access.OPERATOR, Access.NODE, Access.OPERATOR]


@pytest.mark.trio
async def test_guesses_are_slowed_then_429_and_warned_once_a_window(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    api = FakeApi(ok)
    app = App(
        {"/node/": Route(api, Access.NODE)},
        gate=FakeGate(),
        body_timeout_seconds=1,
        retry_after_seconds=1,
        paths={"/healthz": Route(api, Access.PUBLIC)},
    )
    guess = [(b"x-who", b"bogus")]
    throttle = app.throttle
    statuses = []
    # On the autojump clock: the delays and the window pass at once, in virtual time.
    with trio.fail_after(3 * throttle.window_seconds):
        for _ in range(throttle.block_after + 1):
            started = trio.current_time()
            answer, _ = await call(app, "GET", "/node/lease", headers=guess)
            assert answer is not None
            statuses.append((answer.status, trio.current_time() - started))
        # Right credentials from that address wait too; a public route does not.
        blocked, _ = await call(app, "GET", "/node/lease", headers=[(b"x-who", b"node")])
        assert blocked is not None
        assert blocked.status == 429
        assert 0 < int(blocked.headers[b"retry-after"]) <= throttle.window_seconds
        health, _ = await call(app, "GET", "/healthz")
        assert health is not None
        assert health.status == 200
        await trio.sleep(throttle.window_seconds)
        again, _ = await call(app, "GET", "/node/lease", headers=[(b"x-who", b"node")])
        assert again is not None
        assert again.status == 200
    free = throttle.free_failures
    assert statuses[:free] == [(401, 0)] * free
    assert statuses[free : throttle.block_after] == [(401, throttle.delay_seconds)] * (
        throttle.block_after - free
    )
    assert statuses[throttle.block_after] == (429, 0)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "127.0.0.1: 6 failed key attempts" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.trio
async def test_behind_a_trusted_proxy_each_client_is_counted_apart(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Every request through a TLS proxy comes from its address: one client's guesses
    must not lock every user out, so the client the proxy names is counted."""
    api = FakeApi(ok)
    app = App(
        {"/node/": Route(api, Access.NODE)},
        gate=FakeGate(),
        body_timeout_seconds=1,
        retry_after_seconds=1,
        origin=Origin.of("", ["127.0.0.1"]),
    )
    guesser = [(b"x-who", b"bogus"), (b"x-forwarded-for", b"203.0.113.5")]
    with trio.fail_after(3 * app.throttle.window_seconds):
        for _ in range(app.throttle.block_after + 1):
            await call(app, "GET", "/node/lease", headers=guesser)
        blocked, _ = await call(app, "GET", "/node/lease", headers=guesser)
        other, _ = await call(
            app,
            "GET",
            "/node/lease",
            headers=[(b"x-who", b"node"), (b"x-forwarded-for", b"198.51.100.7")],
        )
    assert blocked is not None
    assert blocked.status == 429
    assert other is not None
    assert other.status == 200
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith("client 203.0.113.5: 6 failed key attempts")


@pytest.mark.trio
async def test_an_ipv6_client_is_counted_by_its_64(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An IPv6 client has a /64 to pick addresses from: a guess from each of them is
    still that client's, while the next /64 is another client."""
    api = FakeApi(ok)
    app = App(
        {"/node/": Route(api, Access.NODE)},
        gate=FakeGate(),
        body_timeout_seconds=1,
        retry_after_seconds=1,
        origin=Origin.of("", ["127.0.0.1"]),
    )
    with trio.fail_after(3 * app.throttle.window_seconds):
        for n in range(app.throttle.block_after):
            forwarded = f"2001:db8:1:2:{n:x}::{n + 1:x}".encode()
            await call(
                app, "GET", "/node/lease",
                headers=[(b"x-who", b"bogus"), (b"x-forwarded-for", forwarded)],
            )  # fmt: skip
        blocked, _ = await call(
            app, "GET", "/node/lease",
            headers=[(b"x-who", b"node"), (b"x-forwarded-for", b"2001:db8:1:2:ffff::9")],
        )  # fmt: skip
        other, _ = await call(
            app, "GET", "/node/lease",
            headers=[(b"x-who", b"node"), (b"x-forwarded-for", b"2001:db8:1:3::1")],
        )  # fmt: skip
    assert blocked is not None
    assert blocked.status == 429
    assert other is not None
    assert other.status == 200
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "client 2001:db8:1:2::/64: 6 failed key attempts in 60 s; its refusals are slowed,"
        " then it gets 429"
    ]


def test_the_throttle_key_of_an_address() -> None:
    assert throttle_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert throttle_key("2001:DB8:1:2:ffff:0:0:7") == "2001:db8:1:2::/64"
    assert throttle_key("fe80::1%eth0") == "fe80::/64"
    assert throttle_key("::ffff:203.0.113.5") == "203.0.113.5"
    assert throttle_key("203.0.113.5") == "203.0.113.5"
    assert throttle_key("") == ""


@pytest.mark.trio
async def test_a_body_in_pieces_is_sent_whole_in_sends_of_about_a_mebibyte() -> None:
    # A build job's stored fragments go as they are, between small pieces of msgpack:
    # the client gets the pieces joined, with their length; small pieces are joined
    # into sends of about SEND_BYTES, a large one goes alone (not copied into a run).
    large = b"L" * (3 * SEND_BYTES)
    small = tuple(bytes([i % 256]) * 1000 for i in range(2500))  # ~2.4 sends of it
    pieces = (b"head", *small, large, b"x" * 10, b"tail")
    sent: list[ASGISendEvent] = []

    async def send(event: ASGISendEvent) -> None:
        sent.append(event)

    await Response(200, headers=((b"content-type", b"x"),), pieces=pieces).send(send)
    start, *bodies = sent
    assert start["type"] == "http.response.start"
    assert (b"content-length", str(sum(map(len, pieces))).encode()) in start["headers"]
    chunks = [bytes(event["body"]) for event in bodies]  # type: ignore[typeddict-item]
    assert b"".join(chunks) == b"".join(pieces)
    assert [event["more_body"] for event in bodies] == [True] * (len(bodies) - 1) + [False]  # type: ignore[typeddict-item]
    assert any(event["body"] is large for event in bodies)  # type: ignore[typeddict-item]
    assert all(len(chunk) < 2 * SEND_BYTES for chunk in chunks if chunk is not large)
    assert len(bodies) <= 3 + len(b"".join(pieces)) // SEND_BYTES + 2
