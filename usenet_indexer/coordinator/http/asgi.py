"""The coordinator's ASGI side: what every API it serves shares.

Theory of operation
-------------------
hypercorn serves one `App`. The App answers the lifespan by itself (there is
nothing to set up: the stores are open before it is served) and hands each
HTTP request to the route of its exact path (`paths`: the newznab API at
/api) or else the one whose path prefix it falls under (`mounts`: the node
API under /api/v1/node/); a path under none is 404 before anything else is
looked at. A status page or a metrics endpoint is one more `Api`.

Every route is a `Route`: its API and its `Access` level, declared beside
its path (server.coordinator_app); the App takes nothing else. Before the
API's handler runs, the App asks its `Gate` whether the request's
credentials reach the route's level, and answers a request that does not
with the route's own refusal (the node API's JSON 401, newznab's error 100,
the page's login form). So a route added later cannot be open by accident:
it is public only where its declaration says PUBLIC.

A refusal of credentials that are nobody's (`Refused.wrong_credentials`)
is counted against the client's address (core/throttle.py, in this
process's memory; behind a trusted proxy the address its X-Forwarded-For
names, core/origin.Origin.client; an IPv6 address by its /64, `throttle_key`):
past a few it is answered late, then the address gets
429 with Retry-After on every guarded route (those with a level, and the
login) until its window ends, and a WARNING once per address and window.

An API answers a request with a `Response`, or by itself (a stream, once its
200 is out), or raises. `Refused` carries an answer the API chose (a 401, a
413, a 409 ...) and is logged as one info line; the App answers everything
else, so no API has to: the database down, restarting or too slow
(psycopg.OperationalError, a pool timeout too) is 503 with Retry-After,
never a 500, since nothing is wrong with the request; anything unexpected is
500 and logged with its traceback. Both are logged as `...: answered 5NN`,
the form testing/logcheck.py finds every 5xx by.

Bodies are read with a cap and a deadline for the whole body (408), so a
slow or hostile client neither fills memory nor holds a request forever.
Past the cap (announced by Content-Length, or counted as the bytes arrive)
the 413 goes out at once with `Connection: close`, what is queued of the
body is thrown away (`Body`), and hypercorn closes the connection: the rest
is never read. Nothing here logs a header, and paths are logged quoted.
"""

from __future__ import annotations

import enum
import ipaddress
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Protocol

import attrs
import orjson
import psycopg
import trio
from hypercorn.typing import (
    ASGIReceiveCallable,
    ASGIReceiveEvent,
    ASGISendCallable,
    HTTPScope,
    Scope,
)

from usenet_indexer.core.origin import Origin
from usenet_indexer.core.throttle import Throttle
from usenet_indexer.errors import UidxError

logger = logging.getLogger(__name__)

Headers = list[tuple[bytes, bytes]]

_JSON: Final = ((b"content-type", b"application/json"),)


# A body in pieces goes in sends of about this many bytes (`Response.pieces`).
SEND_BYTES: Final = 1 << 20


@attrs.frozen
class Response:
    """A whole response (every answer but a stream's).

    Attributes:
        pieces: a large body in pieces, sent in place of `body` without joining
            it whole (a build job's stored fragments as they are: wire/buildjob.py's
            `job_pieces`): small pieces are joined into sends of about SEND_BYTES,
            a larger one goes as it is.
    """

    status: int
    body: bytes = b""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    pieces: tuple[bytes, ...] = ()

    @classmethod
    def json(
        cls, status: int, data: object, *, headers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> Response:
        """A JSON response of `data` (anything orjson writes)."""
        return cls(status, orjson.dumps(data), _JSON + headers)

    @classmethod
    def error(
        cls, status: int, message: str, *, headers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> Response:
        """An error response: `{"error": message}`."""
        return cls.json(status, {"error": message}, headers=headers)

    async def send(self, send: ASGISendCallable, *, close: bool = False) -> None:
        """Send the response whole; with `close`, tell the client the connection ends."""
        headers = list(self.headers)
        if close:
            headers.append((b"connection", b"close"))
        length = sum(map(len, self.pieces)) if self.pieces else len(self.body)
        if self.status != 204:  # a 204 has no body, nor a length
            headers.append((b"content-length", str(length).encode()))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        if self.pieces:
            for group in _sends(self.pieces):
                await send({"type": "http.response.body", "body": group, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


def _sends(pieces: tuple[bytes, ...]) -> Iterator[bytes]:
    """`pieces` as sends: runs of small ones joined up to about SEND_BYTES, a large
    one alone."""
    run: list[bytes] = []
    size = 0
    for piece in pieces:
        if len(piece) >= SEND_BYTES:
            if run:
                yield b"".join(run)
                run, size = [], 0
            yield piece
            continue
        run.append(piece)
        size += len(piece)
        if size >= SEND_BYTES:
            yield b"".join(run)
            run, size = [], 0
    if run:
        yield b"".join(run)


def retry_after(seconds: int) -> tuple[tuple[bytes, bytes], ...]:
    """A Retry-After header: when to ask again."""
    return ((b"retry-after", str(seconds).encode()),)


class Refused(UidxError):
    """Raised by an API to answer a request early with `response` (caught by the App).

    `wrong_credentials`: the request named a key or token that is nobody's
    (counted against the client, as a guess). `reason`: what the log says
    instead of the start of the body (a login form says little).
    """

    def __init__(
        self, response: Response, *, wrong_credentials: bool = False, reason: str | None = None
    ) -> None:
        super().__init__(response.status)
        self.response = response
        self.wrong_credentials = wrong_credentials
        self.reason = reason


class _ClientGone(UidxError):
    """The client disconnected before its request was read: nobody to answer."""


@attrs.define(eq=False)
class Body:
    """The request's `receive`, noting when the body has been taken whole.

    Why: when an answer ends before the body was read (a 413, a 401, ...),
    hypercorn closes the connection, but first puts `http.disconnect` into
    the app's bounded receive queue, from inside the app's last `send`. If
    the client has filled that queue with body messages, nobody takes them
    and the send never returns (the connection hangs until the client
    gives up). So such an answer is sent while `discard_rest` empties the
    queue, throwing the body away, never keeping it.
    """

    receive: ASGIReceiveCallable
    done: bool = False

    async def __call__(self) -> ASGIReceiveEvent:
        message = await self.receive()
        if message["type"] != "http.request" or not message["more_body"]:
            self.done = True
        return message

    async def discard_rest(self) -> None:
        while not self.done:
            await self()


@attrs.define(eq=False)
class Exchange:
    """One request as an API sees it; `caller` once the API knows who asks ("node 3")."""

    method: str
    path: str
    headers: Headers
    body: Body
    caller: str | None = None
    query: bytes = b""  # the query string, as sent (never logged: it may carry a key)
    scheme: str = "http"
    client: str = ""  # the peer's address (what failed attempts are counted by)
    user: Caller | None = None  # who the Gate admitted (None: a public route)

    def __str__(self) -> str:
        # For log lines: the path is the client's, so quoted (no line breaks).
        who = "unauthenticated" if self.caller is None else self.caller
        return f"{who} {self.method} {self.path[:200]!r}"


@attrs.define(eq=False)
class ApiCounts:
    """Requests the APIs answered, by (api, function, HTTP status): what /metrics reports."""

    counts: Counter[tuple[str, str, int]] = attrs.field(factory=Counter)

    def add(self, api: str, function: str, status: int) -> None:
        self.counts[api, function, status] += 1


class Api(Protocol):
    """An API the App serves under a path prefix."""

    async def respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        """The answer to a request under the API's prefix (`exchange.path` whole).

        Returns:
            The response; None when the API has answered by itself (a stream).

        Raises:
            Refused: to answer with its response. Anything else is the App's
            to answer (503 for the database, else 500).
        """
        ...


class Access(enum.Enum):
    """Who may call a route (see the module docstring)."""

    PUBLIC = "public"  # anyone, no credentials
    NODE = "node"  # an edge's bearer token
    API_USER = "api user"  # an API user's key or login session (an operator is one too)
    OPERATOR = "operator"  # an operator's key or login session
    METRICS = "metrics"  # the `metrics_token` as a bearer token


class Denied(enum.Enum):
    """Why the Gate did not admit a request."""

    MISSING = "no credentials"
    WRONG = "wrong credentials"  # counted against the client (brute force)
    NOT_ENOUGH = "credentials below the route's level"  # an API user on an operator's route
    CLOSED = "the route is closed"  # /metrics without a metrics_token set


@attrs.frozen
class Caller:
    """Who the Gate admitted: a node, an API user (`operator` or not), or the scraper."""

    kind: str  # "node", "api user", "metrics"
    name: str
    node_id: int | None = None
    operator: bool = False
    user_id: int | None = None  # an API user's (what its daily use is counted by)

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


class Gate(Protocol):
    """Checks a request's credentials against a level (coordinator/http/access.py)."""

    async def admit(self, exchange: Exchange, level: Access) -> Caller | Denied:
        """The caller, when the request's credentials reach `level`; else why not."""
        ...


def _unauthorized(exchange: Exchange, denied: Denied) -> Response:
    return Response.error(401, str(denied.value), headers=((b"www-authenticate", b"Bearer"),))


@attrs.frozen
class Route:
    """An API and who may call it, declared together.

    Attributes:
        api: the API that answers.
        access: the level every request must reach.
        public: requests of the route that anyone may make (/api's t=caps); None: none.
        refusal: the answer to a request below the level (default: a JSON 401).
        guarded: whether an address refused for guessing gets 429 here (None: a
            route with a level is, a PUBLIC one is not; the login says True).
    """

    api: Api
    access: Access
    public: Callable[[Exchange], bool] | None = None
    refusal: Callable[[Exchange, Denied], Response] = _unauthorized
    guarded: bool | None = None

    @property
    def throttled(self) -> bool:
        """Whether a blocked address is refused here (see `guarded`)."""
        return self.access is not Access.PUBLIC if self.guarded is None else self.guarded

    def level(self, exchange: Exchange) -> Access:
        """The level this request must reach."""
        if self.public is not None and self.public(exchange):
            return Access.PUBLIC
        return self.access


def _routes_valid(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    for path, route in value.items():
        if not isinstance(route, Route) or not isinstance(route.access, Access):
            raise ValueError(f"{path!r} has no declared access level")


def _mounts_valid(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    _routes_valid(instance, attribute, value)
    # Prefixes are whole path segments that do not nest: one API per path.
    for prefix in value:
        if not (prefix.startswith("/") and prefix.endswith("/")):
            raise ValueError(f"a prefix starts and ends with '/', not {prefix!r}")
        if any(other != prefix and other.startswith(prefix) for other in value):
            raise ValueError(f"{prefix!r} holds another prefix")


@attrs.define(eq=False)
class App:
    """The ASGI app hypercorn serves: the APIs by path prefix (see the module docstring).

    Attributes:
        mounts: path prefix ("/api/v1/node/") -> the route under it.
        gate: checks credentials against a route's level.
        body_timeout_seconds: the longest the rest of a refused body is
            thrown away for while its answer is sent.
        retry_after_seconds: the Retry-After of a 503.
        paths: exact paths ("/api", "/") -> their routes, looked at before the prefixes.
        throttle: failed attempts per client address (this process's).
        origin: the trusted proxies, whose X-Forwarded-For names the client the
            throttle counts (None: the peer is the client).
    """

    mounts: Mapping[str, Route] = attrs.field(validator=_mounts_valid)
    gate: Gate
    body_timeout_seconds: float
    retry_after_seconds: int
    paths: Mapping[str, Route] = attrs.field(factory=dict, validator=_routes_valid)
    throttle: Throttle = attrs.field(factory=Throttle)
    origin: Origin | None = None
    # Requests being answered, and set (then renewed) whenever none is: a stopping
    # server's drain ends once every request is answered (server.py).
    _answering: int = attrs.field(init=False, default=0)
    _answered: trio.Event = attrs.field(init=False, factory=trio.Event)

    @property
    def answering(self) -> int:
        """Requests being answered now."""
        return self._answering

    async def wait_answered(self) -> None:
        """Return once no request is being answered (at once when none is)."""
        while self._answering:
            await self._answered.wait()

    def routes(self) -> dict[str, Route]:
        """Every route: exact paths as they are, prefixes ending in "/"."""
        return {**self.paths, **self.mounts}

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] == "http":
            self._answering += 1
            try:
                await self._request(scope, receive, send)
            finally:
                self._answering -= 1
                if not self._answering:
                    self._answered.set()
                    self._answered = trio.Event()
        # A websocket scope is not answered: hypercorn then refuses it.

    async def _request(
        self, scope: HTTPScope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        body = Body(receive)
        exchange = Exchange(
            scope["method"],
            scope["path"],
            list(scope["headers"]),
            body,
            query=scope["query_string"],
            scheme=scope["scheme"],
            client=(scope.get("client") or ("", 0))[0],
        )
        try:
            response = await self._dispatch(exchange, send)
        except _ClientGone:
            return
        except Exception as error:
            response = self._answer_for(error, exchange)
            if isinstance(error, Refused) and error.wrong_credentials:
                await self._failed(exchange)
        if response is not None:
            await self._send(response, body, send)

    def route(self, path: str) -> Route | None:
        """The route of `path`; None for a path under none."""
        exact = self.paths.get(path)
        if exact is not None:
            return exact
        for prefix, route in self.mounts.items():
            if path.startswith(prefix):
                return route
        return None

    def _guesser(self, exchange: Exchange) -> str:
        """What failed key attempts are counted against: the client's address (the one a
        trusted proxy names), an IPv6 one by its /64 (`throttle_key`)."""
        if self.origin is None:
            return throttle_key(exchange.client)
        forwarded = header(exchange.headers, b"x-forwarded-for")
        return throttle_key(self.origin.client(exchange.client, forwarded))

    async def _failed(self, exchange: Exchange) -> None:
        """A guess counted; the refusal held back once past the free ones."""
        client = self._guesser(exchange)
        delay, warn = self.throttle.failed(client, trio.current_time())
        if warn:
            # WARNING, not ERROR: a client's mistake, nothing wrong here. Once per window.
            logger.warning(
                "client %s: %d failed key attempts in %g s; its refusals are slowed, "
                "then it gets 429",
                client,
                self.throttle.failures(client, trio.current_time()),
                self.throttle.window_seconds,
            )
        await trio.sleep(delay)

    async def _dispatch(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        route = self.route(exchange.path)
        if route is None:
            return Response.error(404, f"no such call: {exchange.path[:200]}")
        if route.throttled:
            verdict = self.throttle.check(self._guesser(exchange), trio.current_time())
            if verdict.retry_after is not None:
                return Response.error(
                    429, "too many failed key attempts", headers=retry_after(verdict.retry_after)
                )
        level = route.level(exchange)
        if level is not Access.PUBLIC:
            admitted = await self.gate.admit(exchange, level)
            if isinstance(admitted, Denied):
                raise Refused(
                    route.refusal(exchange, admitted),
                    wrong_credentials=admitted is Denied.WRONG,
                    reason=f"refused ({admitted.value} for {level.value})",
                )
            exchange.user = admitted
            exchange.caller = str(admitted)
        return await route.api.respond(exchange, send)

    async def _send(self, response: Response, body: Body, send: ASGISendCallable) -> None:
        if body.done:
            await response.send(send)
            return
        # Refused before the body was read (see Body): the answer goes out
        # while what is queued of the body is thrown away, then hypercorn
        # closes the connection.
        with trio.move_on_after(self.body_timeout_seconds):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(body.discard_rest)
                await response.send(send, close=True)

    def _answer_for(self, error: Exception, exchange: Exchange) -> Response:
        """The response for what an API raised; anything unexpected is logged (500)."""
        if isinstance(error, Refused):
            response = error.response
            message = error.reason or response.body[:300].decode("utf-8", "replace")
            logger.info("%s: %d %s", exchange, response.status, message)
            return response
        if isinstance(error, psycopg.OperationalError):
            # Down, restarting or too slow (a pool timeout is one too): the
            # client retries later. Never a 500: nothing is wrong with the request.
            # "answered 5NN": the form testing/logcheck.py finds every 5xx by.
            logger.warning("%s: answered 503: database unavailable: %s", exchange, error)
            retry = ((b"retry-after", str(self.retry_after_seconds).encode()),)
            return Response.error(503, "the database is unavailable; try again", headers=retry)
        logger.error("%s: answered 500: %r", exchange, error, exc_info=error)
        return Response.error(500, "internal error")


def throttle_key(address: str) -> str:
    """The client a failed key attempt is counted against, for an address.

    An IPv6 client holds a whole /64 (what a provider hands a line, what SLAAC
    and privacy addresses pick from): counted address by address, it would
    change address with each guess and never be slowed, and could push every
    other window out of the throttle's table. So an IPv6 address counts as its
    /64; an IPv4-mapped one as its IPv4 address; anything else (a Unix
    socket's peer) as it is.
    """
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


def header(headers: Headers, name: bytes) -> str | None:
    """The values of header `name` (lower case), joined by ", "; None when it is absent."""
    values = [value for key, value in headers if key == name]
    return b", ".join(values).decode("latin-1") if values else None


async def read_body(exchange: Exchange, cap: int, *, timeout_seconds: float) -> bytes:
    """The request body, at most `cap` bytes, within `timeout_seconds` for all of it.

    Raises:
        Refused: 413 over the cap (announced or read), 408 too slow.
        _ClientGone: the client disconnected (the App then answers nothing).
    """
    length = header(exchange.headers, b"content-length")
    if length is not None and length.isdigit() and int(length) > cap:
        raise Refused(_too_large(cap))
    with trio.move_on_after(timeout_seconds):
        return await _receive_body(exchange.body, cap)
    raise Refused(Response.error(408, "the request body did not arrive in time"))


def _too_large(cap: int) -> Response:
    return Response.error(413, f"the body is over the cap of {cap} bytes")


async def _receive_body(receive: ASGIReceiveCallable, cap: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _ClientGone
        size += len(message["body"])
        if size > cap:
            # The rest is never read: hypercorn closes the connection.
            raise Refused(_too_large(cap))
        parts.append(message["body"])
        if not message["more_body"]:
            return b"".join(parts)


async def _lifespan(receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
    # Nothing to set up: the stores are open before the app is served.
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
