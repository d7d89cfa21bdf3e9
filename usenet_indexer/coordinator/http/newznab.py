"""The newznab API at /api: what Sonarr, Radarr, Prowlarr, NZBHydra2 and SABnzbd speak.

A thin adapter: the query string is read into a checked request
(core/newznab.py, pure), the key and the catalog are asked in a worker
thread (store/users.py, store/catalog.py), and the answer is rendered by
core/newznab.py again. Every refusal is HTTP 200 with a newznab error
element (the *arr programs throw on a status >= 400 before reading the
body), except `t=get` of an unknown id, which is 404 as downloaders expect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import attrs
import trio
from hypercorn.typing import ASGISendCallable

from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.coordinator.http.asgi import ApiCounts, Denied, Exchange, Response, header
from usenet_indexer.core.newznab import (
    NewznabError,
    Request,
    Site,
    caps_json,
    caps_xml,
    content_disposition,
    default_categories,
    error_json,
    error_xml,
    feed_json,
    feed_xml,
    parse_request,
)
from usenet_indexer.core.nzb import nzb_filename, write_nzb
from usenet_indexer.store.catalog import CatalogRow, CatalogTable, Search
from usenet_indexer.store.users import UserStore

logger = logging.getLogger(__name__)

PATH = "/api"
_XML = (b"content-type", b"application/xml; charset=utf-8")
_RSS = (b"content-type", b"application/rss+xml; charset=utf-8")
_JSON = (b"content-type", b"application/json")
_NZB = (b"content-type", b"application/x-nzb")
_MAX_QUERY = 8192  # bytes of query string read; the rest is not looked at

T = TypeVar("T")


@attrs.define(eq=False)
class NewznabApi:
    """The newznab API (see the module docstring).

    Attributes:
        catalog: the searchable catalog.
        users: the API users.
        build: the catalog build (an NZB is merged again from its row's source keys).
        counts: the requests answered, by function and status (for /metrics).
        title: the server's title in caps and feeds.
        offer_broken: list broken releases too (offer_broken_releases); else only
            whole and repairable ones.
    """

    catalog: CatalogTable
    users: UserStore
    build: CatalogBuild
    counts: ApiCounts = attrs.field(factory=ApiCounts)
    title: str = "uidx"
    offer_broken: bool = False
    _limiter: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(4))

    async def respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        params = _params(exchange.query)
        try:
            request = parse_request(params)
        except NewznabError as error:
            self.counts.add("newznab", f"error {error.code}", 200)
            return _error(error, json=params.get("o", "").lower() == "json")
        try:
            response = await self._answer(request, exchange)
        except NewznabError as error:
            self.counts.add("newznab", f"error {error.code}", 200)
            return _error(error, json=request.json)
        self.counts.add("newznab", request.function, response.status)
        return response

    def refused(self, exchange: Exchange, denied: Denied) -> Response:
        """The refusal of a request without a user's key (`Route.refusal`): error 100,
        as HTTP 200 (the *arr programs read no body of a 401)."""
        params = _params(exchange.query)
        try:
            parse_request(params)  # a request that is wrong anyway says so first, as before
        except NewznabError as wrong:
            error = wrong
        else:
            missing = denied is Denied.MISSING
            error = NewznabError(
                100, "missing parameter: apikey" if missing else "incorrect user credentials"
            )
        self.counts.add("newznab", f"error {error.code}", 200)
        return _error(error, json=params.get("o", "").lower() == "json")

    async def _answer(self, request: Request, exchange: Exchange) -> Response:
        site = Site(_base_url(exchange), self.title)
        if request.function == "caps":
            if request.json:
                return Response(200, caps_json(site), (_JSON,))
            return Response(200, caps_xml(site), (_XML,))
        if exchange.user is None:  # not behind the App's Gate (which checks the key)
            if not request.apikey:
                raise NewznabError(100, "missing parameter: apikey")
            user = await self._run(self.users.authenticate, request.apikey)
            if user is None:
                raise NewznabError(100, "incorrect user credentials")
            exchange.caller = f"api user {user.name}"
        if request.function in ("get", "details", "getnfo"):
            row = await self._run(self.catalog.row, request.guid)
            if row is None:
                if request.function == "get":
                    return Response(404, b"no such item\n", ((b"content-type", b"text/plain"),))
                raise NewznabError(300, "no such item")
            if request.function == "getnfo":
                # Probes (issue 18) will fetch nfo bodies; until then there is none.
                raise NewznabError(300, "no nfo for this item")
            if request.function == "get":
                return await self._nzb(row)
            return self._feed(site, request, [row], total=1)
        search = Search(
            words=request.words,
            categories=default_categories(request),
            season=request.season,
            episode=request.episode,
            since=None
            if request.max_age_days is None
            else int(time.time()) - request.max_age_days * 86_400,
            min_size=request.min_size,
            max_size=request.max_size,
            group=request.group,
            limit=request.limit,
            offset=request.offset,
            broken=self.offer_broken,
        )
        total, rows = await self._run(self.catalog.search, search)
        return self._feed(site, request, rows, total=total)

    def _feed(
        self, site: Site, request: Request, rows: list[CatalogRow], *, total: int
    ) -> Response:
        items = [row.item for row in rows]
        render = feed_json if request.json else feed_xml
        body = render(
            site,
            items,
            offset=request.offset,
            total=total,
            apikey=request.apikey,
            extended=request.extended,
        )
        return Response(200, body, (_JSON if request.json else _RSS,))

    async def _nzb(self, row: CatalogRow) -> Response:
        release = await self._run(self.build.release, row)
        if release is None:
            # The catalog is older than its fragments (a build is due): not found for now.
            logger.warning("catalog row %s no longer matches its fragments", row.guid)
            return Response(404, b"no such item\n", ((b"content-type", b"text/plain"),))
        await self._run(self.catalog.grab, row.guid)
        body = write_nzb(release.to_json())
        disposition = content_disposition(nzb_filename(release.name or row.guid))
        return Response(200, body, (_NZB, (b"content-disposition", disposition.encode())))

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(function, *args, limiter=self._limiter)


def is_public(exchange: Exchange) -> bool:
    """Whether a request is one anyone may make (`Route.public`): t=caps."""
    try:
        return parse_request(_params(exchange.query)).function == "caps"
    except NewznabError:
        return False


def _params(query: bytes) -> dict[str, str]:
    """The query's parameters, names lower case, the first of each kept."""
    text = query[:_MAX_QUERY].decode("utf-8", "replace")
    params: dict[str, str] = {}
    try:
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=100)
    except ValueError:  # more than 100 fields
        return {"t": "", "o": ""}  # answered as "missing parameter: t"
    for name, value in pairs:
        # PostgreSQL text holds no NUL: a value never carries one to a query.
        params.setdefault(name.lower(), value.replace("\x00", ""))
    return params


def _error(error: NewznabError, *, json: bool) -> Response:
    if json:
        return Response(200, error_json(error), (_JSON,))
    return Response(200, error_xml(error), (_XML,))


def _base_url(exchange: Exchange) -> str:
    host = header(exchange.headers, b"host") or "localhost"
    return f"{exchange.scheme}://{host.split(',')[0].strip()}"
