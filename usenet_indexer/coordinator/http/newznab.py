"""The newznab API at /api: what Sonarr, Radarr, Prowlarr, NZBHydra2 and SABnzbd speak.

A thin adapter: the query string is read into a checked request
(core/newznab.py, pure), the key and the catalog are asked in a worker
thread (store/users.py, store/catalog.py), and the answer is rendered by
core/newznab.py again. Every refusal is HTTP 200 with a newznab error
element (the *arr programs throw on a status >= 400 before reading the
body), except `t=get` and `t=failed` of an unknown id, which are 404 as
downloaders expect (a broken release's id is unknown to t=get and t=details
unless offer_broken_releases, as it is to every search); a daily limit reached is error 500 or 501 with
Retry-After (the seconds to the end of the UTC day).

Every absolute URL (links, guids' enclosures, the X-DNZB headers) starts with
the site's root as core/origin.py says: `public_url`, else what a trusted
proxy forwarded, else the request's own scheme and Host.

Each request but t=caps and t=failed is counted against its key's daily use
(http/daily.py, shared with the status page's search; store/users.py: one
upsert, in the same worker hop as the work when it can be): t=get as an NZB
download, the rest as requests.
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

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.coordinator.http.asgi import ApiCounts, Denied, Exchange, Response, header
from usenet_indexer.coordinator.http.daily import DailyUse
from usenet_indexer.core.newznab import (
    NewznabError,
    Request,
    Site,
    Usage,
    caps_json,
    caps_xml,
    content_disposition,
    default_categories,
    dnzb_headers,
    error_json,
    error_xml,
    feed_json,
    feed_xml,
    header_value,
    limit_reached,
    parse_request,
)
from usenet_indexer.core.nzb import nzb_filename, write_nzb
from usenet_indexer.core.origin import Origin
from usenet_indexer.store.catalog import CatalogRow, CatalogTable, Search
from usenet_indexer.store.users import DailyLimits, UserStore

logger = logging.getLogger(__name__)

PATH = "/api"
_XML = (b"content-type", b"application/xml; charset=utf-8")
_RSS = (b"content-type", b"application/rss+xml; charset=utf-8")
_JSON = (b"content-type", b"application/json")
_NZB = (b"content-type", b"application/x-nzb")
_TEXT = (b"content-type", b"text/plain; charset=utf-8")
_MAX_QUERY = 8192  # bytes of query string read; the rest is not looked at

T = TypeVar("T")


@attrs.frozen
class NewznabOptions:
    """What the settings say of the newznab API.

    Attributes:
        origin: where absolute URLs start (public_url, trusted_proxies).
        limits: the daily limits of a key without its own (0: none).
    """

    origin: Origin = attrs.field(factory=Origin)
    limits: DailyLimits = attrs.field(factory=DailyLimits)

    @classmethod
    def from_settings(cls, settings: Settings) -> NewznabOptions:
        return cls(
            Origin.of(settings.public_url, settings.trusted_proxies),
            DailyLimits(settings.api_requests_per_day, settings.api_grabs_per_day),
        )


@attrs.define(eq=False)
class NewznabApi:
    """The newznab API (see the module docstring).

    Attributes:
        catalog: the searchable catalog.
        users: the API users (keys, daily use, failure reports).
        build: the catalog build (an NZB is merged again from its row's source keys).
        counts: the requests answered, by function and status (for /metrics).
        title: the server's title in caps and feeds.
        options: the public URL, the trusted proxies, the daily limits.
        offer_broken: list broken releases too (offer_broken_releases); else only
            whole and repairable ones.
    """

    catalog: CatalogTable
    users: UserStore
    build: CatalogBuild
    counts: ApiCounts = attrs.field(factory=ApiCounts)
    title: str = "uidx"
    options: NewznabOptions = attrs.field(factory=NewznabOptions)
    offer_broken: bool = False
    _limiter: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(4))

    @property
    def daily(self) -> DailyUse:
        """Its users' daily use and the limits it is counted against (the status page's
        searches count in it too)."""
        return DailyUse(self.users, self.options.limits)

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
        site = Site(self._base_url(exchange), self.title)
        if request.function == "caps":
            if request.json:
                return Response(200, caps_json(site), (_JSON,))
            return Response(200, caps_xml(site), (_XML,))
        user_id = await self._user_id(request, exchange)
        if request.function == "failed":
            return await self._failed(request, user_id)
        if request.function == "get":
            return await self._get(site, request, user_id)
        if request.function in ("details", "getnfo"):
            row, usage = await self._run(self._row, request, user_id)
            if row is None:
                raise NewznabError(300, "no such item")
            if request.function == "getnfo":
                # No NFO body is kept (probes read an NFO for names and ids only): an
                # item has none, which is an empty feed, total 0, as NZBHydra2 reads
                # "no NFO"; error 300 (newznab's answer to both) it reports as a
                # failure, so it stays for an id that is no item.
                return self._feed(site, request, [], total=0, usage=usage)
            return self._feed(site, request, [row], total=1, usage=usage)
        total, rows, usage = await self._run(self._search, request, user_id)
        return self._feed(site, request, rows, total=total, usage=usage)

    async def _user_id(self, request: Request, exchange: Exchange) -> int | None:
        """The caller's user id (the Gate's; or the key checked here, for an App without
        a Gate in front)."""
        if exchange.user is not None:
            return exchange.user.user_id
        if not request.apikey:
            raise NewznabError(100, "missing parameter: apikey")
        user = await self._run(self.users.authenticate, request.apikey)
        if user is None:
            raise NewznabError(100, "incorrect user credentials")
        exchange.caller = f"api user {user.name}"
        return user.id

    def _take(self, user_id: int | None, *, grab: bool) -> Usage | None:
        """Count this request in its key's day (a worker thread's part).

        Raises:
            NewznabError: 500/501, the key's daily limit reached.
        """
        if user_id is None:  # no user to count for (a caller the Gate named otherwise)
            return None
        now = time.time()
        usage = self.daily.take(user_id, grab=grab, now=now)
        if usage is None:
            raise limit_reached(grab, now)
        return usage

    def _search(
        self, request: Request, user_id: int | None
    ) -> tuple[int, list[CatalogRow], Usage | None]:
        usage = self._take(user_id, grab=False)
        search = Search(
            words=request.words,
            categories=default_categories(request),
            season=request.season,
            episode=request.episode,
            aired=request.aired,
            since=None
            if request.max_age_days is None
            else int(time.time()) - request.max_age_days * 86_400,
            min_size=request.min_size,
            max_size=request.max_size,
            group=request.group,
            limit=request.limit,
            offset=request.offset,
            broken=self.offer_broken,
            ids=request.ids,
        )
        total, rows = self.catalog.search(search)
        return total, self._with_failures(rows, request.extended), usage

    def _row(self, request: Request, user_id: int | None) -> tuple[CatalogRow | None, Usage | None]:
        usage = self._take(user_id, grab=False)
        row = self._offered(request.guid)
        if row is None:
            return None, usage
        return self._with_failures([row], request.extended)[0], usage

    def _grabbed_row(self, guid: str, user_id: int | None) -> CatalogRow | None:
        """The row of an NZB about to be downloaded, the download counted (None: no
        such release, nothing counted)."""
        row = self._offered(guid)
        if row is not None:
            self._take(user_id, grab=True)
        return row

    def _offered(self, guid: str) -> CatalogRow | None:
        """The row of a guid as a search offers it: shown, and not broken unless
        offer_broken (a broken release's guid is no item, as an unknown one is, so that
        no downloader grabs what it cannot finish)."""
        return self.catalog.row(guid, shown=True, broken=self.offer_broken)

    def _reported_row(self, request: Request, user_id: int) -> CatalogRow | None:
        """The row of a release reported failed, the report recorded (None: no such
        release, nothing recorded). A broken one too: the report hands nothing out,
        and the release may have been offered when it was grabbed."""
        row = self.catalog.row(request.guid, shown=True)
        if row is not None:
            self.users.report_failure(row.guid, user_id, corrupt=request.corrupt)
        return row

    def _with_failures(self, rows: list[CatalogRow], extended: bool) -> list[CatalogRow]:
        """The rows with their failure reports (an extended attr: read only then)."""
        if not extended or not rows:
            return rows
        failures = self.users.failures([row.guid for row in rows])
        return [
            attrs.evolve(row, item=attrs.evolve(row.item, failures=failures[row.guid]))
            if row.guid in failures
            else row
            for row in rows
        ]

    def _feed(
        self,
        site: Site,
        request: Request,
        rows: list[CatalogRow],
        *,
        total: int,
        usage: Usage | None,
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
            usage=usage,
        )
        return Response(200, body, (_JSON if request.json else _RSS,))

    async def _get(self, site: Site, request: Request, user_id: int | None) -> Response:
        """t=get: the NZB, with its name and the X-DNZB headers; 404 for an unknown id."""
        row = await self._run(self._grabbed_row, request.guid, user_id)
        if row is None:
            return Response(404, b"no such item\n", (_TEXT,))
        release = await self._run(self.build.release, row)
        if release is None:
            # The catalog is older than its fragments (a build is due): not found for now.
            logger.warning("catalog row %s no longer matches its fragments", row.guid)
            return Response(404, b"no such item\n", (_TEXT,))
        await self._run(self.catalog.grab, row.guid)
        body = write_nzb(release.to_json())
        filename = nzb_filename(row.item.name or row.guid)
        headers = [
            _NZB,
            (b"content-disposition", content_disposition(filename)),
            *(
                (name.lower().encode(), header_value(value))
                for name, value in dnzb_headers(site, row.item, request.apikey)
            ),
        ]
        return Response(200, body, tuple(headers))

    async def _failed(self, request: Request, user_id: int | None) -> Response:
        """t=failed: a downloader reports that the release's download failed (recorded
        once per release and user). The answer is plain text, never XML: NZBGet's
        FailureLink would take a body starting with "<?xml" for another release's NZB."""
        if user_id is None:
            raise NewznabError(100, "incorrect user credentials")
        row = await self._run(self._reported_row, request, user_id)
        if row is None:
            return Response(404, b"no such item\n", (_TEXT,))
        logger.info(
            "api user %d reported a failed download of %s%s",
            user_id,
            row.guid,
            " (corrupt)" if request.corrupt else "",
        )
        return Response(200, b"failure recorded; no other release is offered\n", (_TEXT,))

    def _base_url(self, exchange: Exchange) -> str:
        return self.options.origin.base_url(
            scheme=exchange.scheme,
            host=header(exchange.headers, b"host"),
            peer=exchange.client,
            forwarded_proto=header(exchange.headers, b"x-forwarded-proto"),
            forwarded_host=header(exchange.headers, b"x-forwarded-host"),
        )

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
    retry: tuple[tuple[bytes, bytes], ...] = ()
    if error.retry_after_seconds is not None:
        retry = ((b"retry-after", str(error.retry_after_seconds).encode()),)
    if json:
        return Response(200, error_json(error), (_JSON, *retry))
    return Response(200, error_xml(error), (_XML, *retry))
