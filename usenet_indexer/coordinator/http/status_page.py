"""The status page at /, the Prometheus metrics at /metrics and the health answer at /healthz.

Who sees what (the App's Gate admits only an API user or an operator to
the page): an operator sees all of it; an API user the search box and the
releases with their NZB links, nothing of groups, ranges, nodes, servers
or the catalog's workings. /healthz says whether the database answers, and
nothing else.

The page is server-rendered (Jinja2, autoescaped; no script) and refreshes
itself, unless it holds a search (a results page left open would search
again, and spend a request of the user's day, at each reload): groups (high water mark, indexed to, lag, progress, backfill),
ranges by state with progress bars and their expired leases (a node that
died mid-lease), the ranges parked as failed and why, nodes (a range whose
lease expired marked so), the prefetcher's servers and the spool, the
batch rate, the catalog's lag (keys pending, the oldest's age) and its
builds, and the newest releases or those matching the search box, with
NZB links that carry the API key the page was opened with (a key that is
not a user's is not carried); each with its completion and state (whole, or repairable from
its PAR2 recovery), the counts of whole, repairable and broken releases,
and the newest broken ones, kept but not offered by the newznab API unless
offer_broken_releases says so (the search then lists them too). The search
of an API user who is not an operator is a request of the user's day,
counted and limited as the newznab API's are (http/daily.py): past the
limit the page lists nothing found and says when the day ends; the newest
releases, without a search, are not counted. Where
there is nothing yet it says so. It reads as a person
expects: counts with thousands separators and plurals, times to the second,
a header's count what it says (the releases the search offers, not the
search's "at least one more"). /metrics is Prometheus' text format
(prometheus_client, a registry of the app's own, never the process-global
one), read from the database on each scrape.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode

import attrs
import jinja2
import trio
from hypercorn.typing import ASGISendCallable
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from usenet_indexer.coordinator.http.access import query_apikey
from usenet_indexer.coordinator.http.asgi import ApiCounts, Exchange, Response
from usenet_indexer.coordinator.http.daily import DailyUse
from usenet_indexer.core.categories import CATEGORIES
from usenet_indexer.core.health import counts, healthy
from usenet_indexer.core.newznab import moment, usage_day
from usenet_indexer.store.catalog import CatalogRow, CatalogTable, Search
from usenet_indexer.store.groups import GroupRow
from usenet_indexer.store.status import Status, StatusStore

REFRESH_SECONDS = 10
RECENT = 25
_HTML = (b"content-type", b"text/html; charset=utf-8")
_NO_STORE = (b"cache-control", b"no-store")  # a page behind a login stays out of caches
_METRICS = (b"content-type", b"text/plain; version=0.0.4; charset=utf-8")

_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("usenet_indexer.coordinator.http", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


# What a cell says where there is no figure.
_NONE = "\N{EN DASH}"


def _count(value: float | None, places: int = 0) -> str:
    """12,345 (a dash for nothing)."""
    return _NONE if value is None else f"{value:,.{places}f}"


def _plural(count: int, one: str, many: str | None = None) -> str:
    """ "1 range", "2 ranges", "12,345 batches"."""
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _moment(when: object) -> str:
    """A time to the second, in UTC (a dash for none)."""
    return (
        _NONE if not isinstance(when, datetime) else f"{when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    )


_TEMPLATES.filters["count"] = _count
_TEMPLATES.filters["moment"] = _moment
_TEMPLATES.globals["plural"] = _plural


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def _backfill(group: GroupRow) -> str:
    """The backfill as the page says it: its days, and the article reached."""
    if group.backfill_days is None:
        return "none"
    said = _plural(group.backfill_days, "day")
    reached = group.backfill_reached
    if reached is None:
        return f"{said}, not begun"
    if group.backfill_floor is None:  # the daemon has not found its first article yet
        return f"{said}, down to {reached:,}"
    if reached <= group.backfill_floor:
        return f"{said}, done (from {reached:,})"
    return f"{said}, down to {reached:,} of {group.backfill_floor:,}"


def _percent(done: int, of: int) -> int:
    return 0 if of <= 0 else max(0, min(100, round(100 * done / of)))


@attrs.define(eq=False)
class StatusPage:
    """The page at / (see the module docstring)."""

    status: StatusStore
    catalog: CatalogTable
    daily: DailyUse  # the API users' daily use, the newznab API's (a search counts in it)
    offer_broken: bool = False  # the search lists broken releases too (offer_broken_releases)
    _limiter: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(2))

    async def respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        try:
            params = dict(
                parse_qsl(exchange.query[:4096].decode("utf-8", "replace"), max_num_fields=20)
            )
        except ValueError:  # more than 20 fields: the page as if none were given
            params = {}
        q = " ".join(params.get("q", "").replace("\x00", " ")[:256].split())
        # The Gate admitted the key of the query when there is one: links carry it
        # (a session's page carries none: its cookie goes with the NZB link too).
        apikey = query_apikey(exchange.query) or ""
        user = exchange.user
        operator = user is not None and user.operator
        # A search is a request of the user's day, as one through /api is (an
        # operator's too: the API counts and limits operators alike); the newest
        # releases (the page without one, which reloads itself) are not.
        counted = None if not q or user is None else user.user_id
        html = await trio.to_thread.run_sync(
            self._render, q, apikey, operator, counted, limiter=self._limiter
        )
        return Response(200, html.encode("utf-8", "replace"), (_HTML, _NO_STORE))

    def _render(self, q: str, apikey: str, operator: bool, counted: int | None) -> str:
        limited = "" if counted is None else self._spend(counted)
        total, rows = (0, []) if limited else self._search(q)
        states = self.catalog.states()
        shown = states.shown
        # What the newest are the newest of: the releases the search offers.
        offered = shown if self.offer_broken else states.whole + states.repairable
        broken = _releases(self.catalog.broken(RECENT), apikey) if states.broken else []
        listing = {
            "states": states,
            "offer_broken": self.offer_broken,
            "broken": broken,
            "broken_said": _broken_said(len(broken), states.broken),
            "limited": limited,  # the line said in place of the search's releases ("": none)
        }
        if not operator:
            return self._releases_only(q, apikey, rows, total, (shown, offered), listing)
        snapshot = self.status.snapshot()
        work = {row.name: row for row in self.status.node_work()}
        releases = _releases(rows, apikey)
        return _TEMPLATES.get_template("status.html").render(
            operator=True,
            refresh=_refresh(q),
            taken_at=_moment(snapshot.taken_at),
            rate=_rate(snapshot),
            lookback=int(snapshot.throughput.lookback_seconds),
            catalog=snapshot.catalog,
            sweep=snapshot.sweep,
            q=q,
            apikey=apikey,
            groups=[
                {
                    "name": g.name,
                    "high": g.high,
                    "state": g.state,
                    "indexed_to": g.head_indexed_to
                    if g.head_indexed_to is not None
                    else g.indexed_to,
                    "lag": g.lag,
                    "lag_seconds": g.lag_seconds,
                    "percent": _percent(g.articles_indexed, g.articles_planned),
                    "backfill": _backfill(g),
                    "quirk": g.quirk,
                }
                for g in snapshot.groups
            ],
            ranges=[
                {
                    "group": r.group,
                    "state": r.state,
                    "ranges": r.ranges,
                    "articles_indexed": r.articles_indexed,
                    "articles": r.articles,
                    "expired": r.expired,
                    "percent": _percent(r.articles_indexed, r.articles),
                }
                for r in snapshot.ranges
            ],
            parked=[
                {
                    "id": p.range_id,
                    "group": p.group,
                    "span": f"{p.first:,}..{p.last:,}",
                    "resume": p.resume,
                    "refusals": p.refusals,
                    "reason": p.reason,
                    "failed_at": _moment(p.failed_at),
                }
                for p in snapshot.parked
            ],
            nodes=[
                {
                    "name": row.name,
                    "revoked": row.revoked_at is not None,
                    "leases": row.leases,
                    "last_seen": row.last_seen,
                    "current": work[row.name].current if row.name in work else None,
                    "rate": work[row.name].headers_per_second if row.name in work else None,
                }
                for row in snapshot.nodes
            ],
            servers=snapshot.servers,
            health_problems=[
                {
                    "component": h.component,
                    "subject": h.subject,
                    "state": h.state.value,
                    "since": _moment(h.since),
                    "reporter": h.reporter,
                    "detail": h.detail,
                }
                for h in snapshot.health
                if not h.healthy
            ],
            health_ok=", ".join(_plural(n, kind) for kind, n in healthy(snapshot.health)),
            spool=snapshot.spool,
            probes=[(p.state, p.outcome or "waiting", p.candidates) for p in snapshot.probes],
            releases=releases,
            releases_said=_releases_said(q, total, len(releases), offered),
            catalog_shown=shown,
            **listing,
        )

    def _spend(self, user_id: int) -> str:
        """Count a search in the user's day: "" when counted, else the line that says the
        day's limit is reached (nothing counted, nothing to search)."""
        now = time.time()
        if self.daily.take(user_id, grab=False, now=now) is not None:
            return ""
        return _limit_said(self.daily.limits_of(user_id).requests, now)

    def _search(self, q: str) -> tuple[int, list[CatalogRow]]:
        return self.catalog.search(Search(words=q, limit=RECENT, broken=self.offer_broken))

    def _releases_only(
        self,
        q: str,
        apikey: str,
        rows: list[CatalogRow],
        total: int,
        counts: tuple[int, int],
        listing: dict[str, Any],
    ) -> str:
        """The page of an API user: the search and the releases."""
        releases = _releases(rows, apikey)
        shown, offered = counts
        said = _releases_said(q, total, len(releases), offered)
        return _TEMPLATES.get_template("status.html").render(
            operator=False,
            refresh=_refresh(q),
            q=q,
            apikey=apikey,
            groups=[],
            catalog_shown=shown,
            releases=releases,
            releases_said="Search: daily limit reached" if listing["limited"] else said,
            **listing,
        )


def _limit_said(requests: int, now: float) -> str:
    """What the page says of a search past the user's daily limit (at unix time `now`)."""
    resets = usage_day(now) + timedelta(days=1)
    return (
        f"The daily limit of {_plural(requests, 'request')} is reached: searches are "
        f"answered again from {resets:%Y-%m-%d} 00:00 UTC (the next UTC day). "
        "The page without a search still lists the newest releases."
    )


def _refresh(q: str) -> int:
    """The seconds after which the page reloads itself; 0 (never) for a search's
    results, each reload of which would search again and count against the day."""
    return 0 if q else REFRESH_SECONDS


def _broken_said(page: int, broken: int) -> str:
    """The broken releases' header: how many of how many."""
    if page < broken:
        return f"Broken releases: the {page:,} newest of {broken:,}"
    return f"Broken releases ({broken:,})"


def _releases(rows: list[CatalogRow], apikey: str) -> list[dict[str, Any]]:
    """The release rows as the page shows them, the NZB links with `apikey` if any."""
    return [
        {
            "name": item.name,
            "category": CATEGORIES.get(item.category, "Other"),
            "size": _human(item.size),
            "files": item.files,
            "posted": moment(item.posted).strftime("%Y-%m-%d %H:%M"),
            # Rounded down, like the newznab attr: 100% only when every article is there.
            "completion": math.floor(item.completion * 100),
            "state": item.state,
            "nzb": "/api?"
            + urlencode({"t": "get", "id": item.guid, **({"apikey": apikey} if apikey else {})}),
        }
        for item in (row.item for row in rows)
    ]


def _releases_said(q: str, total: int, page: int, offered: int) -> str:
    """The releases' header: what the rows below are, with true figures.

    Without words the page holds the newest of the `shown` releases. With words
    the search's total is counted only up to a cap (store/catalog.py), so a full
    page says "more than" rather than a figure that may be the cap.
    """
    if not q:
        if page < offered:
            return f"Recent releases: the {page:,} newest of {offered:,}"
        return f"Recent releases ({page:,})"
    if total > page:
        return f"Releases matching “{q}”: the {page:,} newest of more than {page:,}"
    return f"Releases matching “{q}” ({page:,})"


def _rate(snapshot: Status) -> str:
    """The batches lately and their rates (store/status.py's Throughput: the batches
    after the first over the time from the first's store to the last's)."""
    t = snapshot.throughput
    if t.batches == 0:
        return ""
    stored = f"{_plural(t.batches, 'batch', 'batches')} stored in the last {t.lookback_seconds / 60:g} minutes"
    if t.headers_per_second is None or t.release_chunks_per_second is None:
        why = "one batch" if t.batches == 1 else "all stored at one instant"
        return f"{stored} (no rate: {why})."
    return (
        f"{stored}: {t.headers_per_second:,.0f} headers/s, "
        f"{t.release_chunks_per_second:,.1f} release chunks/s over the "
        f"{t.window_seconds or 0:,.1f} s they took."
    )


@attrs.define(eq=False)
class _StoreCollector(Collector):
    """Reads the database at each scrape (called in a worker thread)."""

    status: StatusStore
    catalog: CatalogTable
    counts: ApiCounts

    def collect(self) -> Iterator[Any]:
        snapshot = self.status.snapshot()
        ranges = GaugeMetricFamily(
            "uidx_ranges", "Ranges by group and state.", labels=["group", "state"]
        )
        for row in snapshot.ranges:
            ranges.add_metric([row.group, row.state], row.ranges)
        yield ranges
        yield GaugeMetricFamily(
            "uidx_ranges_parked",
            "Ranges parked as failed after refusals in a row (uidx ranges retry).",
            value=len(snapshot.parked),
        )
        yield _expired_leases(snapshot)
        lag = GaugeMetricFamily(
            "uidx_group_lag_articles", "Articles above what is indexed.", labels=["group"]
        )
        indexed = CounterMetricFamily(
            "uidx_headers_indexed", "Articles indexed, by group.", labels=["group"]
        )
        lag_seconds = GaugeMetricFamily(
            "uidx_group_lag_seconds",
            "How long the oldest new articles of a followed group have waited.",
            labels=["group"],
        )
        for group in snapshot.groups:
            if group.lag is not None:
                lag.add_metric([group.name], group.lag)
            if group.lag_seconds is not None:
                lag_seconds.add_metric([group.name], group.lag_seconds)
            indexed.add_metric([group.name], group.articles_indexed)
        yield lag
        yield lag_seconds
        yield indexed
        batches, _ = self.catalog.stored_mark()
        yield CounterMetricFamily("uidx_batches_stored", "Batches stored.", value=batches)
        probes = CounterMetricFamily("uidx_probes", "Probes done, by outcome.", labels=["outcome"])
        # Only the candidates that are through (done, or given up): a retry waiting
        # ('new') or under way ('probing') keeps its last outcome, and would repeat
        # the outcome's series and then take its count back (a counter never falls).
        done: dict[str, int] = {}
        for count in snapshot.probes:
            if count.outcome and count.state in ("done", "failed"):
                done[count.outcome] = done.get(count.outcome, 0) + count.candidates
        for outcome, candidates in sorted(done.items()):
            probes.add_metric([outcome], candidates)
        yield probes
        states = self.catalog.states()
        yield GaugeMetricFamily(
            "uidx_releases", "Releases in the searchable catalog.", value=states.shown
        )
        yield GaugeMetricFamily(
            "uidx_releases_waiting",
            "Incomplete releases not listed yet (listed once quiet).",
            value=states.waiting,
        )
        by_state = GaugeMetricFamily(
            "uidx_releases_by_state",
            "Releases in the searchable catalog: whole, repairable from their PAR2"
            " recovery, or broken (not offered unless offer_broken_releases).",
            labels=["state"],
        )
        for state in ("whole", "repairable", "broken"):
            by_state.add_metric([state], getattr(states, state))
        yield by_state
        yield GaugeMetricFamily(
            "uidx_spool_bytes", "Bytes of spool chunks.", value=snapshot.spool.bytes
        )
        yield from _catalog_metrics(snapshot)
        yield from _health_metrics(snapshot)
        requests = CounterMetricFamily(
            "uidx_api_requests",
            "Requests answered, by API, function and status.",
            labels=["api", "function", "code"],
        )
        for (api, function, status), answered in sorted(self.counts.counts.items()):
            requests.add_metric([api, function, str(status)], answered)
        yield requests


def _expired_leases(snapshot: Status) -> GaugeMetricFamily:
    """`uidx_ranges_expired_leases{group}`: the expired leases `uidx status` shows (0 for a
    group with ranges and none), so an alert on a node that died mid-lease can clear."""
    expired = GaugeMetricFamily(
        "uidx_ranges_expired_leases",
        "Leased ranges whose lease deadline has passed (their node stopped; the next"
        " lease takes them), by group.",
        labels=["group"],
    )
    by_group: dict[str, int] = {}
    for row in snapshot.ranges:
        by_group[row.group] = by_group.get(row.group, 0) + row.expired
    for group, count in by_group.items():
        expired.add_metric([group], count)
    return expired


def _health_metrics(snapshot: Status) -> Iterator[GaugeMetricFamily]:
    """`uidx_health{component,state}`: how many subjects are in each state (core/health.py),
    and since when the oldest of them (no subject's name in a label)."""
    health = GaugeMetricFamily(
        "uidx_health",
        "Components by state (ok, not carried, login refused, refusing connections,"
        " unreachable, writes failing, silent, builds failing), as processes last reported them.",
        labels=["component", "state"],
    )
    since = GaugeMetricFamily(
        "uidx_health_since_seconds",
        "Unix time the oldest subject of a component entered its state.",
        labels=["component", "state"],
    )
    oldest: dict[tuple[str, str], float] = {}
    for row in snapshot.health:
        key = (row.component, row.state.value)
        oldest[key] = min(oldest.get(key, math.inf), row.since.timestamp())
    for (component, state), count in sorted(counts(snapshot.health).items()):
        health.add_metric([component, state], count)
        since.add_metric([component, state], oldest[component, state])
    yield health
    yield since


def _catalog_metrics(snapshot: Status) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The catalog's lag and its builds, from the database (every coordinator process's
    builds; no labels, never a release's name)."""
    lag = snapshot.catalog
    yield GaugeMetricFamily(
        "uidx_catalog_pending_keys",
        "Release keys waiting for a catalog build.",
        value=lag.pending_keys,
    )
    yield GaugeMetricFamily(
        "uidx_catalog_pending_oldest_seconds",
        "How long the oldest pending key has waited (0 when none waits).",
        value=lag.oldest_pending_seconds or 0.0,
    )
    window = f"the last {lag.lookback_seconds:g} s"
    yield GaugeMetricFamily(
        "uidx_catalog_builds_recent",
        f"Catalog builds that did something in {window}, by every coordinator process.",
        value=lag.builds,
    )
    yield GaugeMetricFamily(
        "uidx_catalog_builds_recent_cpu_seconds",
        f"CPU seconds of the catalog builds in {window}.",
        value=lag.builds_cpu_s,
    )
    yield GaugeMetricFamily(
        "uidx_catalog_builds_recent_pending_keys",
        f"Pending keys the catalog builds in {window} took.",
        value=lag.builds_pending,
    )
    yield GaugeMetricFamily(
        "uidx_catalog_builds_recent_keys_merged",
        f"Release keys the catalog builds in {window} merged: the pending ones and what"
        " their closure brought back.",
        value=lag.builds_merged,
    )
    yield GaugeMetricFamily(
        "uidx_catalog_edge_build_jobs",
        "Catalog builds edges are doing now (edge_builds).",
        value=lag.edge_jobs,
    )
    if lag.last_build_seconds is not None:
        yield GaugeMetricFamily(
            "uidx_catalog_last_build_age_seconds",
            "Since the last catalog build was recorded (absent with none in a day).",
            value=lag.last_build_seconds,
        )
    sweep = snapshot.sweep
    if sweep is not None and sweep.cycle_started is not None:
        yield CounterMetricFamily(
            "uidx_catalog_sweep_cycles",
            "Cycles of the catalog sweep (every stored release built again) ended.",
            value=sweep.cycles,
        )
        yield GaugeMetricFamily(
            "uidx_catalog_sweep_position",
            "How far through its current cycle the catalog sweep is (0 to 1).",
            value=sweep.position,
        )
        yield GaugeMetricFamily(
            "uidx_catalog_sweep_giving_way",
            "1 while the catalog sweep gives way to the batches (the build is behind them).",
            value=int(sweep.giving_way_since is not None),
        )


@attrs.define(eq=False)
class MetricsApi:
    """Prometheus text at /metrics."""

    registry: CollectorRegistry

    @classmethod
    def of(cls, status: StatusStore, catalog: CatalogTable, counts: ApiCounts) -> MetricsApi:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_StoreCollector(status, catalog, counts))
        return cls(registry)

    async def respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        started = time.monotonic()
        body = await trio.to_thread.run_sync(generate_latest, self.registry)
        body += f"# scrape took {time.monotonic() - started:.3f} s\n".encode()
        return Response(200, body, (_METRICS,))


@attrs.define(eq=False)
class HealthApi:
    """/healthz: 200 "ok" when the database answers (else the App's 503), nothing more."""

    status: StatusStore

    async def respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        await trio.to_thread.run_sync(self.status.ping)
        return Response(200, b"ok\n", ((b"content-type", b"text/plain"),))
