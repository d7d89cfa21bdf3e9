"""The status page's login: POST /login with an API key sets a session cookie.

The form (templates/login.html) is also the status page's 401. A key that
is an API user's opens a session (store/users.py: a random token kept
hashed in PostgreSQL with its expiry, so every coordinator process knows
it) and answers 303 to the page with the cookie: HttpOnly (no script reads
it), SameSite=Strict (a request from another site carries no cookie, so no
cross-site request is made as the operator, a form post included), Path=/,
and Secure when the site's public URL (`public_url`) is https, or when the
request came over https (hypercorn's TLS, or a proxy's `X-Forwarded-Proto:
https`; the header is not checked against a list of proxies: a client that
fakes it only keeps its own cookie off plain http).
A wrong key answers 401 with the form again and counts as a failed attempt
(`Refused.wrong_credentials`). POST /logout ends the session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl

import attrs
import jinja2
import trio
from hypercorn.typing import ASGISendCallable

from usenet_indexer.coordinator.http.access import SESSION_COOKIE, session_token
from usenet_indexer.coordinator.http.asgi import (
    Denied,
    Exchange,
    Refused,
    Response,
    header,
    read_body,
)
from usenet_indexer.store.users import UserStore

LOGIN_PATH: Final = "/login"
LOGOUT_PATH: Final = "/logout"
# A session lasts a working day; the form asks again after it.
SESSION_SECONDS: Final = 12 * 3600
_FORM_BYTES = 4096  # a form with one key in it
_FORM_TIMEOUT_SECONDS = 10.0
_HTML = (b"content-type", b"text/html; charset=utf-8")

T = TypeVar("T")

_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("usenet_indexer.coordinator.http", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)

_PROBLEMS = {
    Denied.MISSING: "",
    Denied.WRONG: "That key is not an API user's key (or it is revoked).",
    Denied.NOT_ENOUGH: "That page needs an operator's key.",
    Denied.CLOSED: "",
}


def login_form(status: int, problem: str = "") -> Response:
    """The login form as a response (the status page's 401, /login's answers)."""
    html = _TEMPLATES.get_template("login.html").render(problem=problem)
    return Response(status, html.encode(), (_HTML, (b"cache-control", b"no-store")))


def refused_page(exchange: Exchange, denied: Denied) -> Response:
    """The status page's refusal (`Route.refusal`): 401 and the login form."""
    return login_form(401, _PROBLEMS[denied])


def _secure(exchange: Exchange, public_url: str) -> bool:
    if public_url.lower().startswith("https://"):
        return True
    forwarded = header(exchange.headers, b"x-forwarded-proto") or ""
    return exchange.scheme == "https" or forwarded.split(",")[0].strip().lower() == "https"


def session_cookie(exchange: Exchange, token: str, max_age: int, public_url: str = "") -> bytes:
    """The Set-Cookie value of a session (see the module docstring)."""
    secure = "; Secure" if _secure(exchange, public_url) else ""
    return (
        f"{SESSION_COOKIE}={token}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Strict{secure}"
    ).encode()


@attrs.define(eq=False)
class LoginApi:
    """POST /login (GET: the form) and POST /logout.

    Attributes:
        users: the API users and their sessions.
        public_url: the site's public URL (https: every session cookie is Secure).
    """

    users: UserStore
    public_url: str = ""
    _limiter: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(2))

    async def respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        if exchange.method == "GET" and exchange.path == LOGIN_PATH:
            return login_form(200)
        if exchange.method != "POST":
            return Response.error(405, "POST the form", headers=((b"allow", b"GET, POST"),))
        if exchange.path == LOGOUT_PATH:
            return await self._logout(exchange)
        body = await read_body(exchange, _FORM_BYTES, timeout_seconds=_FORM_TIMEOUT_SECONDS)
        key = _form_key(body)
        user = None if key is None else await self._run(self.users.authenticate, key)
        if user is None:
            raise Refused(
                login_form(401, _PROBLEMS[Denied.WRONG]),
                wrong_credentials=True,
                reason="login refused (wrong credentials)",
            )
        exchange.caller = f"{'operator' if user.operator else 'api user'} {user.name}"
        token = await self._run(self.users.open_session, user, SESSION_SECONDS)
        cookie = session_cookie(exchange, token, SESSION_SECONDS, self.public_url)
        return Response(303, b"", ((b"location", b"/"), (b"set-cookie", cookie)))

    async def _logout(self, exchange: Exchange) -> Response:
        token = session_token(exchange)
        if token is not None:
            await self._run(self.users.end_session, token)
        return Response(303, b"", ((b"location", b"/"), (b"set-cookie", self._expired(exchange))))

    def _expired(self, exchange: Exchange) -> bytes:
        return session_cookie(exchange, "", 0, self.public_url)

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(function, *args, limiter=self._limiter)


def _form_key(body: bytes) -> str | None:
    try:
        pairs = parse_qsl(body.decode("utf-8", "replace"), max_num_fields=10)
    except ValueError:
        return None
    for name, value in pairs:
        if name == "apikey":
            key = value.replace("\x00", "").strip()
            return key[:128] if key else None
    return None
