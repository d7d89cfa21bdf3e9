"""Health an operator can see (issue 27): a group no server carries, a server refusing
logins or unreachable, a spool that cannot be written, a process that stopped reporting;
each a state with the time it began, in `uidx status`, on the page and in /metrics."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import attrs
import httpx
import pytest
import trio
from nntp_fixtures import NewsServer
from psycopg_pool import ConnectionPool
from test_status_page import SCRAPER, operator, read, served  # noqa: F401 (fixtures)

from usenet_indexer.cli import main
from usenet_indexer.config import Settings
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.health import (
    SILENT_SECONDS,
    Health,
    Observed,
    State,
    counts,
    judged,
)
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.nntp.errors import (
    AuthRequired,
    ConnectionLost,
    NoSuchArticle,
    Timeout,
    Unavailable,
)
from usenet_indexer.prefetch.daemon import Prefetcher, PrefetchOptions
from usenet_indexer.prefetch.events import Reported
from usenet_indexer.prefetch.servers import ServerState, nntp_state, server_configs
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.health import HealthStore
from usenet_indexer.store.heartbeat import beat_forever
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.status import StatusStore
from usenet_indexer.testing.processes import free_port

NOWHERE = "alt.binaries.uidx.nowhere"
T0 = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)


def test_nntp_errors_say_what_they_say_of_a_server() -> None:
    refused = AuthRequired(481, "bad password", command="AUTHINFO", server="s:119")
    busy = Unavailable(502, "too many connections", server="s:119")
    assert nntp_state(refused, connected=False) is State.LOGIN_REFUSED
    assert nntp_state(busy, connected=False) is State.REFUSING_CONNECTIONS
    assert nntp_state(ConnectionLost("cannot connect", server="s:119"), False) is State.UNREACHABLE
    assert nntp_state(Timeout("no greeting", server="s:119"), False) is State.UNREACHABLE
    # Once connected, a dropped connection or a missing article says nothing of the server.
    assert nntp_state(ConnectionLost("reset", server="s:119"), True) is None
    assert nntp_state(NoSuchArticle(430, "no such article", server="s:119"), True) is None


def _row(component: str, subject: str, reporter: str, seen: datetime, state: State) -> Health:
    return Health(component, subject, state, "", reporter, seen - timedelta(hours=1), seen)


def test_a_process_that_stops_reporting_is_silent_and_what_it_saw_is_left_out() -> None:
    now = T0
    late = now - timedelta(seconds=SILENT_SECONDS + 1)
    rows = [
        _row("prefetcher", "a:1", "a:1", now, State.OK),
        _row("server", "news:119", "a:1", now, State.LOGIN_REFUSED),
        _row("coordinator", "b:2", "b:2", late, State.OK),
        _row("server", "other:119", "b:2", late, State.UNREACHABLE),
    ]
    shown = judged(rows, now)
    # Unhealthy first; the silent coordinator's own row stays, what it saw goes.
    assert [(h.component, h.subject, h.state) for h in shown] == [
        ("coordinator", "b:2", State.SILENT),
        ("server", "news:119", State.LOGIN_REFUSED),
        ("prefetcher", "a:1", State.OK),
    ]
    assert shown[0].since == late
    assert "no report since" in shown[0].detail
    assert counts(shown) == {
        ("coordinator", "silent"): 1,
        ("server", "login refused"): 1,
        ("prefetcher", "ok"): 1,
    }


def test_a_group_another_live_prefetcher_carries_is_no_not_carried_alarm() -> None:
    # Prefetchers with providers of their own: a group only b's servers carry is
    # fetched by b; a's "not carried" is no alarm while b is alive, and is once b is
    # silent (its rows left out: nobody fetches the group then).
    now = T0
    late = now - timedelta(seconds=SILENT_SECONDS + 1)
    rows = [
        _row("prefetcher", "a:1", "a:1", now, State.OK),
        _row("group", NOWHERE, "a:1", now, State.NOT_CARRIED),
        _row("group", "alt.binaries.lost", "a:1", now, State.NOT_CARRIED),
        _row("prefetcher", "b:2", "b:2", now, State.OK),
        _row("group", NOWHERE, "b:2", now, State.OK),
    ]
    shown = judged(rows, now)
    assert [(h.subject, h.state, h.reporter) for h in shown if h.component == "group"] == [
        ("alt.binaries.lost", State.NOT_CARRIED, "a:1"),
        (NOWHERE, State.OK, "b:2"),
    ]
    assert counts(shown)[("group", "ok")] == 1
    assert ("group", "not carried") in counts(shown)
    b_silent = [attrs.evolve(r, seen_at=late) if r.reporter == "b:2" else r for r in rows]
    shown = judged(b_silent, now)
    assert [(h.subject, h.state) for h in shown if h.component == "group"] == [
        ("alt.binaries.lost", State.NOT_CARRIED),
        (NOWHERE, State.NOT_CARRIED),
    ]


def test_a_state_reported_again_keeps_its_since_and_what_is_not_reported_goes(
    pool: ConnectionPool,
) -> None:
    store = HealthStore(pool)
    refused = Observed("server", "news:119", State.LOGIN_REFUSED, "481")
    store.report("host:1", "prefetcher", [refused, Observed("group", NOWHERE, State.NOT_CARRIED)])
    rows, _ = _by_subject(store)
    assert [(r.subject, r.state) for r in rows] == [
        ("host:1", State.OK),
        (NOWHERE, State.NOT_CARRIED),
        ("news:119", State.LOGIN_REFUSED),
    ]
    first = rows[2]
    with pool.connection() as conn:  # the first report an hour ago
        conn.execute("UPDATE health SET since = since - interval '1 hour'")
    store.report("host:1", "prefetcher", [refused])
    rows, _ = _by_subject(store)
    assert [(r.subject, r.state) for r in rows] == [
        ("host:1", State.OK),
        ("news:119", State.LOGIN_REFUSED),
    ]
    assert rows[1].since < first.since  # the same state: its since kept
    store.report("host:1", "prefetcher", [Observed("server", "news:119", State.OK)])
    rows, _ = _by_subject(store)
    assert rows[1].state is State.OK
    assert rows[1].since > first.since
    store.forget("host:1")
    assert store.list() == ([], None)


def _by_subject(store: HealthStore) -> tuple[list[Health], datetime | None]:
    rows, now = store.list()
    return sorted(rows, key=lambda r: (r.component != "prefetcher", r.subject)), now


def _options(tmp_path: Path) -> PrefetchOptions:
    return PrefetchOptions(
        spool=tmp_path / "spool",
        slice_articles=5_000,
        chunk_articles=10_000,
        poll_seconds=0.2,
        report_seconds=0.2,
        retry=RetryPolicy(base_seconds=0.05),
    )


async def _health_while_running(
    pool: ConnectionPool,
    server: ServerState,
    path: Path,
    seen: Callable[[Prefetcher], bool],
) -> tuple[Health, ...]:
    """Run a prefetcher of `server` until `seen(prefetcher)` holds at one of its reports;
    the health shown then."""
    reported = trio.Event()

    def observe(event: object) -> None:
        if isinstance(event, Reported) and seen(prefetcher):
            reported.set()

    prefetcher = Prefetcher(pool, _options(path), [server], observe)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(prefetcher.run)
            await reported.wait()
            health = await trio.to_thread.run_sync(StatusStore(pool).health)
            nursery.cancel_scope.cancel()
    return health


@pytest.mark.trio
async def test_a_prefetcher_reports_what_it_cannot_fetch_and_takes_it_away_when_stopped(
    news_server: NewsServer,
    pool: ConnectionPool,
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    groups, ranges = GroupStore(pool), RangeStore(pool)
    ranges.plan(groups.add(NOWHERE), 1, 10_000, 10_000)
    ranges.plan(groups.add(news_server.group), 1, 10_000, 10_000)
    # The real INN2 with the right login: the group it does not carry is "not carried".
    good = ServerState.of(server_configs([news_server.url()], 1)[0])
    health = await _health_while_running(pool, good, tmp_path, lambda _: bool(good.lines))
    states = {(h.component, h.subject): h.state for h in health}
    server = f"{news_server.host}:{news_server.port}"
    assert states[("group", NOWHERE)] is State.NOT_CARRIED
    assert states[("server", server)] is State.OK
    assert states[("spool", str(tmp_path / "spool"))] is State.OK
    assert [h.component for h in health if h.component == "prefetcher"] == ["prefetcher"]
    # Stopped cleanly: its rows are gone (a clean stop is not silence).
    assert await trio.to_thread.run_sync(StatusStore(pool).health) == ()

    # The same INN2 with a wrong password: its login is refused.
    wrong = news_server.url().replace("@", "x@", 1)
    refused = ServerState.of(server_configs([wrong], 1)[0])
    health = await _health_while_running(
        pool, refused, tmp_path, lambda _: refused.health is State.LOGIN_REFUSED
    )
    (row,) = [h for h in health if h.component == "server"]
    assert (row.subject, row.state) == (server, State.LOGIN_REFUSED)
    assert "AuthRequired" in row.detail

    # A port nothing listens on: unreachable; shown by `uidx status` and --json.
    port = free_port()
    gone = ServerState.of(server_configs([f"nntp://127.0.0.1:{port}"], 1)[0])
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    printed: list[str] = []

    def unreachable_and_printed(_: Prefetcher) -> bool:
        if gone.health is not State.UNREACHABLE:
            return False
        assert main(["status"]) == 0
        assert main(["status", "--json"]) == 0
        printed.append(capsys.readouterr().out)
        return True

    await _health_while_running(pool, gone, tmp_path, unreachable_and_printed)
    text, _, as_json = printed[0].partition("\n{")
    (line,) = [
        line for line in text.splitlines() if f"127.0.0.1:{port}" in line and "since" in line
    ]
    assert "unreachable" in line
    assert "cannot connect" in line
    assert "ok: 1 prefetcher, 1 spool" in text
    rows = json.loads("{" + as_json)["health"]
    (server_row,) = [r for r in rows if r["component"] == "server"]
    assert server_row["state"] == "unreachable"
    assert datetime.fromisoformat(server_row["since"]) <= datetime.now(UTC)


@pytest.mark.trio
async def test_a_followed_group_no_server_carries_is_not_carried_before_anything_is_planned(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path
) -> None:
    # `uidx groups add NAME --unchecked`, the name mistyped: nothing is planned, so no
    # connection asks GROUP of it; the follower does, at every poll, and only logged
    # the 411 (the health said all was well).
    GroupStore(pool).add(NOWHERE)
    good = ServerState.of(server_configs([news_server.url()], 1)[0])
    said = False  # the follower's 411 was there at a report before this one

    def after_the_411(prefetcher: Prefetcher) -> bool:
        nonlocal said
        before, said = said, NOWHERE in prefetcher._follower.uncarried
        return before

    health = await _health_while_running(pool, good, tmp_path, after_the_411)
    states = {(h.component, h.subject): h.state for h in health}
    assert states[("group", NOWHERE)] is State.NOT_CARRIED
    assert states[("server", f"{news_server.host}:{news_server.port}")] is State.OK


@pytest.mark.trio
async def test_a_coordinator_reports_while_it_runs_and_takes_its_row_away_when_stopped(
    stores: Stores, pool: ConnectionPool
) -> None:
    beats = 0
    two = trio.Event()

    def observe() -> tuple[Observed, ...]:
        nonlocal beats
        beats += 1
        if beats == 2:
            two.set()  # the first report is stored
        return ()

    async with trio.open_nursery() as nursery:
        beat = partial(beat_forever, every_seconds=0.05)
        nursery.start_soon(beat, stores.health, "coordinator", observe)
        await two.wait()
        (row,) = await trio.to_thread.run_sync(StatusStore(pool).health)
        assert (row.component, row.state) == ("coordinator", State.OK)
        nursery.cancel_scope.cancel()
    # A clean stop takes its row away.
    assert await trio.to_thread.run_sync(StatusStore(pool).health) == ()


@pytest.mark.trio
async def test_a_coordinator_that_stops_reporting_shows_as_silent_on_the_page_and_metrics(
    served: httpx.AsyncClient,  # noqa: F811 (a fixture)
    operator: dict[str, str],  # noqa: F811 (a fixture)
    stores: Stores,
    pool: ConnectionPool,
) -> None:
    # One that was killed two minutes ago (its last report then) is silent since then.
    stores.health.report("deadhost:4242", "coordinator", [])
    with pool.connection() as conn:
        conn.execute("UPDATE health SET seen_at = now() - interval '2 minutes'")
    page = read((await served.get("/", params=operator)).text)
    text = " ".join(page.text)
    assert "Health" in page.headings
    assert "deadhost:4242" in text
    assert "silent" in text
    assert "no report since" in text
    metrics = (await served.get("/metrics", headers=SCRAPER)).text.splitlines()
    assert 'uidx_health{component="coordinator",state="silent"} 1.0' in metrics
    (since,) = [
        m for m in metrics if m.startswith('uidx_health_since_seconds{component="coordinator"')
    ]
    assert float(since.split()[1]) < datetime.now(UTC).timestamp() - 100


def test_a_silent_process_is_told_in_utc_whatever_the_sessions_time_zone(
    pg_url: str, settings: Settings
) -> None:
    # A DATABASE_URL of a server whose TimeZone is not UTC (a distribution's default is
    # the machine's): the detail said Tokyo's clock, unmarked, beside the UTC "since".
    from psycopg import conninfo

    from usenet_indexer.store.pool import open_pool
    from usenet_indexer.store.status import StatusStore

    tokyo = conninfo.make_conninfo(pg_url, options="-c TimeZone=Asia/Tokyo")
    with open_pool(tokyo, settings) as pool:
        with pool.connection() as conn:
            conn.execute(
                "INSERT INTO health (component, subject, reporter, state, since, seen_at)"
                " VALUES ('prefetcher', 'h:1', 'h:1', 'ok', '2025-05-01 12:00:00+00',"
                " '2025-05-01 12:00:00+00')"
            )
        (silent,) = StatusStore(pool).health()
    assert silent.state is State.SILENT
    assert silent.detail == "no report since 2025-05-01 12:00:00 UTC"


@pytest.mark.trio
async def test_the_ok_summary_counts_subjects_as_the_metrics_do(
    served: httpx.AsyncClient,  # noqa: F811 (the fixture)
    stores: Stores,
    operator: dict[str, str],  # noqa: F811 (the fixture)
) -> None:
    from usenet_indexer.commands.status import health_lines
    from usenet_indexer.store.status import StatusStore

    # Two prefetchers (each with its own pid) on one NNTP server and one spool.
    for reporter in ("a:1", "b:2"):
        stores.health.report(
            reporter,
            "prefetcher",
            [
                Observed("server", "news.example:563", State.OK),
                Observed("spool", "/var/lib/uidx/spool", State.OK),
            ],
        )
    health = StatusStore(stores.catalog.pool).health()
    assert health_lines(health) == ["health", "  ok: 2 prefetchers, 1 server, 1 spool"]
    page = " ".join(" ".join(read((await served.get("/", params=operator)).text).text).split())
    assert "OK: 2 prefetchers, 1 server, 1 spool." in page
    metrics = (await served.get("/metrics", headers=SCRAPER)).text.splitlines()
    assert 'uidx_health{component="server",state="ok"} 1.0' in metrics
    assert 'uidx_health{component="prefetcher",state="ok"} 2.0' in metrics


@pytest.mark.trio
async def test_a_killed_process_is_silent_for_a_day_then_its_rows_go(
    served: httpx.AsyncClient,  # noqa: F811 (a fixture)
    stores: Stores,
    pool: ConnectionPool,
) -> None:
    from usenet_indexer.commands.status import health_lines

    async def prefetchers_by_state() -> list[str]:
        metrics = (await served.get("/metrics", headers=SCRAPER)).text.splitlines()
        return [m for m in metrics if m.startswith('uidx_health{component="prefetcher"')]

    # idx1:100 was killed (kill -9: no clean stop) while a server was unreachable;
    # idx1:200 replaced it and reports every few seconds.
    unreachable = Observed("server", "news:563", State.UNREACHABLE, "cannot connect")
    stores.health.report("idx1:100", "prefetcher", [unreachable])
    with pool.connection() as conn:  # its last report a day ago: silent since, and shown
        conn.execute("UPDATE health SET seen_at = now() - interval '1 day'")
    stores.health.report("idx1:200", "prefetcher", [])
    assert await prefetchers_by_state() == [
        'uidx_health{component="prefetcher",state="ok"} 1.0',
        'uidx_health{component="prefetcher",state="silent"} 1.0',
    ]
    with pool.connection() as conn:  # two minutes later: silent for a day (and a minute)
        conn.execute(
            "UPDATE health SET seen_at = seen_at - interval '2 minutes' WHERE reporter = 'idx1:100'"
        )
    stores.health.report("idx1:200", "prefetcher", [])
    # The replacement's next report dropped the dead one's rows: the alert clears.
    assert await prefetchers_by_state() == ['uidx_health{component="prefetcher",state="ok"} 1.0']
    assert health_lines(StatusStore(pool).health()) == ["health", "  ok: 1 prefetcher"]
