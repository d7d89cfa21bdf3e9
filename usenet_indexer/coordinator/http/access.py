"""The coordinator's Gate: a request's credentials checked against a route's level.

Where each level looks (asgi.py declares the levels, server.py each route's):
NODE takes the `Authorization: Bearer` token of a node; API_USER and
OPERATOR take an API key as `apikey` in the query (what newznab clients and
scripts send), else the status page's session cookie (`login.py`); METRICS
takes the `metrics_token` setting as a bearer token, and without one set
the route is closed. Tokens, keys and sessions are compared as SHA-256
hashes in the database (the metrics token in constant time here), and none
of them is ever logged. Each check is one worker-thread hop.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from http.cookies import CookieError, SimpleCookie
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl

import attrs
import trio

from usenet_indexer.coordinator.http.asgi import Access, Caller, Denied, Exchange, header
from usenet_indexer.coordinator.http.node import bearer_token
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.users import ApiUser, UserStore

SESSION_COOKIE: Final = "uidx_session"
_MAX_QUERY = 8192  # bytes of query string looked at for the key (as the newznab API)
_MAX_KEY_CHARS = 128

T = TypeVar("T")


def query_apikey(query: bytes) -> str | None:
    """The `apikey` of a query string (any case of the name, as newznab reads it), or None."""
    try:
        pairs = parse_qsl(
            query[:_MAX_QUERY].decode("utf-8", "replace"), keep_blank_values=True,
            max_num_fields=100,
        )  # fmt: skip
    except ValueError:  # more than 100 fields
        return None
    for name, value in pairs:
        if name.lower() == "apikey":
            key = value.replace("\x00", "").strip()
            return key[:_MAX_KEY_CHARS] if key else None
    return None


def session_token(exchange: Exchange) -> str | None:
    """The session cookie's token, or None."""
    cookies = header(exchange.headers, b"cookie")
    if cookies is None:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(cookies.replace(", ", "; ")[:4096])
    except CookieError:
        return None
    morsel = jar.get(SESSION_COOKIE)
    if morsel is None or not 0 < len(morsel.value) <= _MAX_KEY_CHARS:
        return None
    return morsel.value


@attrs.define(eq=False)
class StoreGate:
    """The `asgi.Gate` of the coordinator (see the module docstring).

    Attributes:
        nodes: the node tokens.
        users: the API users and their sessions.
        metrics_token: the bearer token of /metrics; empty: /metrics is closed.
    """

    nodes: NodeStore
    users: UserStore
    metrics_token: str = attrs.field(default="", repr=False)
    _limiter: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(4))

    async def admit(self, exchange: Exchange, level: Access) -> Caller | Denied:
        if level is Access.NODE:
            return await self._node(exchange)
        if level is Access.METRICS:
            return self._metrics(exchange)
        user = await self._user(exchange)
        if isinstance(user, Denied):
            return user
        if level is Access.OPERATOR and not user.operator:
            return Denied.NOT_ENOUGH
        kind = "operator" if user.operator else "api user"
        return Caller(kind, user.name, operator=user.operator, user_id=user.id)

    async def _node(self, exchange: Exchange) -> Caller | Denied:
        token = bearer_token(exchange.headers)
        if token is None:
            return Denied.MISSING
        node_id = await self._run(self.nodes.authenticate, token)
        if node_id is None:
            return Denied.WRONG
        return Caller("node", str(node_id), node_id=node_id)

    def _metrics(self, exchange: Exchange) -> Caller | Denied:
        if not self.metrics_token:
            return Denied.CLOSED
        token = bearer_token(exchange.headers)
        if token is None:
            return Denied.MISSING
        if not hmac.compare_digest(token.encode(), self.metrics_token.encode()):
            return Denied.WRONG
        return Caller("metrics", "scraper")

    async def _user(self, exchange: Exchange) -> ApiUser | Denied:
        key = query_apikey(exchange.query)
        if key is not None:
            user = await self._run(self.users.authenticate, key)
            return Denied.WRONG if user is None else user
        session = session_token(exchange)
        if session is None:
            return Denied.MISSING
        user = await self._run(self.users.session, session)
        # An expired session is no attempt at guessing: the login form, uncounted.
        return Denied.MISSING if user is None else user

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(function, *args, limiter=self._limiter)
