"""Several prefetchers share the work through PostgreSQL (issue 27): no chunk fetched
twice, none skipped; a killed prefetcher's claims lapse and its chunks go to the others."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

import psycopg
import pytest
import trio
import trio.testing
from nntp_fixtures import NewsServer
from psycopg_pool import ConnectionPool
from running import own_news_server
from test_prefetch import _assert_exactly_once, _assert_posted, _lines, _options, _read_spool

from usenet_indexer.commands.status import health_lines
from usenet_indexer.core.health import State, counts
from usenet_indexer.prefetch.daemon import Prefetcher
from usenet_indexer.prefetch.events import Landed, Reported
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.spool.plan import ChunkJob, claimable
from usenet_indexer.spool.store import FolderSpool
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.health import HealthStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.spool import SpoolIndex
from usenet_indexer.store.status import StatusStore
from usenet_indexer.testing.processes import free_port

ARTICLES = 100_000


def _job(first: int, last: int, group: int = 1) -> ChunkJob:
    return ChunkJob(group, f"g{group}", first, last)


def test_only_jobs_no_other_prefetcher_claimed_are_taken_up_to_the_limit() -> None:
    jobs = [_job(1, 10), _job(11, 20), _job(21, 30), _job(31, 40), _job(1, 10, group=2)]
    others = {1: [(15, 25)]}  # overlaps the second and the third
    assert claimable(jobs, others, 10) == [_job(1, 10), _job(31, 40), _job(1, 10, group=2)]
    assert claimable(jobs, others, 2) == [_job(1, 10), _job(31, 40)]
    assert claimable(jobs, {}, 0) == []


def test_a_claim_is_kept_from_others_until_it_lapses(pool: ConnectionPool) -> None:
    spool = SpoolIndex(pool)
    group = GroupStore(pool).add("alt.binaries.claims")
    jobs = [ChunkJob(group, "alt.binaries.claims", f, f + 9) for f in (1, 11, 21)]

    def take(claimant: str, limit: int) -> list[ChunkJob]:
        return spool.claim(claimant, jobs, (), 60, lambda others: claimable(jobs, others, limit))

    assert take("a:1", 2) == jobs[:2]
    assert take("b:2", 3) == jobs[2:]  # a's live claims are not b's to take
    # a listed again, with none in flight: its old claims go, what is free is its.
    assert take("a:1", 3) == jobs[:2]
    # a was killed: its claims lapse, and b takes its chunks.
    with pool.connection() as conn:
        conn.execute(
            "UPDATE spool_claims SET until = now() - interval '1 second' WHERE claimant = 'a:1'"
        )
    assert take("b:2", 3) == jobs
    spool.release_claims("b:2")
    assert take("a:1", 3) == jobs


@pytest.mark.trio
async def test_two_prefetchers_share_a_group_and_fetch_every_article_once(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path
) -> None:
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, ARTICLES, 25_000)
    covered = 0
    done = trio.Event()
    landed: dict[str, int] = {"a": 0, "b": 0}

    def observer(name: str) -> Callable[[object], None]:
        def observe(event: object) -> None:
            nonlocal covered
            if isinstance(event, Landed):
                landed[name] += 1
                covered += event.job.last - event.job.first + 1
                if covered == ARTICLES:
                    done.set()

        return observe

    config = server_configs([news_server.url()], 2)[0]
    states = [ServerState.of(config), ServerState.of(config)]
    options = _options(tmp_path, chunk_articles=5_000, slice_articles=5_000)
    prefetchers = [
        Prefetcher(pool, options, [states[0]], observer("a"), name="host-a:1"),
        Prefetcher(pool, options, [states[1]], observer("b"), name="host-b:2"),
    ]
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for prefetcher in prefetchers:
                await nursery.start(prefetcher.run)
            await done.wait()
            nursery.cancel_scope.cancel()
    # Every article fetched once between them, and both did part of it.
    assert states[0].lines + states[1].lines == ARTICLES
    assert min(landed.values()) > 0, landed
    chunks = _read_spool(pool, group_id)
    _assert_exactly_once(chunks, 1, ARTICLES)
    _assert_posted(news_server, _lines(FolderSpool(tmp_path / "spool"), chunks), 1, ARTICLES)
    # Stopped cleanly: their claims are given back.
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) FROM spool_claims").fetchone() == (0,)


def test_a_server_answers_unless_its_login_is_refused_or_it_is_unreachable() -> None:
    state = ServerState.of(server_configs(["nntp://news.example:119"], 2)[0])
    assert _answering(state)
    for refused in (State.LOGIN_REFUSED, State.UNREACHABLE):
        state.health = refused
        assert not _answering(state)
        state.open = 1  # a connection of it still fetches: it answers
        assert _answering(state)
        state.open = 0
    # "Too many connections" at the greeting: the pool lowers itself; it still fetches.
    state.health = State.REFUSING_CONNECTIONS
    assert _answering(state)


def _answering(state: ServerState) -> bool:
    return state.answering


def _claims(pool: ConnectionPool, claimant: str) -> int:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM spool_claims WHERE claimant = %s AND until > now()", (claimant,)
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.trio
async def test_a_prefetcher_whose_logins_are_refused_leaves_the_group_to_the_other(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path
) -> None:
    """Its server refuses its login (a wrong password): it claims no chunk (its claims
    would keep them from the other for as long as it runs), and the other fetches all."""
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 40_000, 20_000)
    wrong = news_server.url().replace("@", "x@", 1)
    refused = ServerState.of(server_configs([wrong], 2)[0])
    good = ServerState.of(server_configs([news_server.url()], 2)[0])
    covered = 0
    done = trio.Event()
    landed: dict[str, int] = {"refused": 0, "good": 0}

    def observer(name: str) -> Callable[[object], None]:
        def observe(event: object) -> None:
            nonlocal covered
            # (The daemon follows the group's head above the plan too.)
            if isinstance(event, Landed) and event.job.last <= 40_000:
                landed[name] += 1
                covered += event.job.last - event.job.first + 1
                if covered == 40_000:
                    done.set()

        return observe

    options = _options(tmp_path, chunk_articles=2_000, slice_articles=2_000)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            # The refused one first: it claims its first chunks before its login fails.
            await nursery.start(
                Prefetcher(pool, options, [refused], observer("refused"), name="host-a:1").run
            )
            await nursery.start(
                Prefetcher(pool, options, [good], observer("good"), name="host-b:2").run
            )
            await done.wait()
            assert refused.health is State.LOGIN_REFUSED
            assert await trio.to_thread.run_sync(_claims, pool, "host-a:1") == 0
            nursery.cancel_scope.cancel()
    assert landed == {"refused": 0, "good": 20}
    chunks = _read_spool(pool, group_id)
    _assert_exactly_once([c for c in chunks if c.last <= 40_000], 1, 40_000)


@pytest.mark.trio
async def test_a_group_only_one_prefetchers_server_carries_is_fetched_by_it_and_no_alarm(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path
) -> None:
    """Two prefetchers on different providers (two INN2 servers): the group is on the
    first's only. The second claims some of its chunks, is told 411 and leaves them:
    the first fetches every article once. The second reports the group "not carried",
    the first that it carries it: `uidx status` and /metrics (the judged rows) show no
    alarm for a group that is fetched; it was one for as long as both ran."""
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 20_000, 20_000)
    covered = 0
    reported_after = 0
    done = trio.Event()
    landed = {"carrying": 0, "other": 0}

    def observer(name: str) -> Callable[[object], None]:
        def observe(event: object) -> None:
            nonlocal covered, reported_after
            # (The daemon follows the group's head above the plan too.)
            if isinstance(event, Landed) and event.job.last <= 20_000:
                landed[name] += 1
                covered += event.job.last - event.job.first + 1
            elif isinstance(event, Reported) and covered == 20_000 and name == "other":
                reported_after += 1
                if reported_after == 2:  # both have reported since
                    done.set()

        return observe

    options = _options(tmp_path, chunk_articles=2_000, slice_articles=2_000, report_seconds=0.2)
    with own_news_server("alt.binaries.uidx.elsewhere", "uidx-newsd-other-") as other_server:
        other = ServerState.of(server_configs([other_server.url()], 2)[0])
        carrying = ServerState.of(server_configs([news_server.url()], 2)[0])
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                # The other first: it claims the first chunks before its 411.
                await nursery.start(
                    Prefetcher(pool, options, [other], observer("other"), name="host-b:2").run
                )
                await nursery.start(
                    Prefetcher(pool, options, [carrying], observer("carrying"), name="host-a:1").run
                )
                await done.wait()
                stored, _now = await trio.to_thread.run_sync(HealthStore(pool).list)
                shown = await trio.to_thread.run_sync(StatusStore(pool).health)
                nursery.cancel_scope.cancel()
    assert landed == {"carrying": 10, "other": 0}
    chunks = [c for c in _read_spool(pool, group_id) if c.last <= 20_000]
    _assert_exactly_once(chunks, 1, 20_000)
    assert [(h.component, h.subject, h.reporter) for h in shown if not h.healthy] == []
    reported = {(r.subject, r.reporter): r.state for r in stored if r.component == "group"}
    assert reported == {
        (news_server.group, "host-b:2"): State.NOT_CARRIED,
        (news_server.group, "host-a:1"): State.OK,
    }
    assert counts(shown)[("group", "ok")] == 1
    assert health_lines(shown)[-1] == "  ok: 1 group, 2 prefetchers, 2 servers, 1 spool"


@pytest.mark.trio
async def test_a_prefetcher_whose_server_does_not_answer_claims_nothing_until_it_does(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path
) -> None:
    """Nothing listens on its server's port at first (unreachable): it gives back the
    chunks it claimed and claims no other; once the port leads to INN2, it fetches all."""
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 20_000, 20_000)
    port = free_port()
    url = news_server.url().replace(f"{news_server.host}:{news_server.port}", f"127.0.0.1:{port}")
    state = ServerState.of(server_configs([url], 2)[0])
    reports_send, reports = trio.open_memory_channel[None](100)
    covered = 0
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered
        if isinstance(event, Reported):
            with contextlib.suppress(trio.WouldBlock):
                reports_send.send_nowait(None)
        elif isinstance(event, Landed) and event.job.last <= 20_000:
            covered += event.job.last - event.job.first + 1
            if covered == 20_000:
                done.set()

    async def forward(client: trio.SocketStream) -> None:
        server = await trio.open_tcp_stream(news_server.host, news_server.port)
        async with client, server, trio.open_nursery() as pipes:
            pipes.start_soon(_pipe, client, server)
            pipes.start_soon(_pipe, server, client)

    options = _options(tmp_path, chunk_articles=5_000, slice_articles=5_000, report_seconds=0.2)
    prefetcher = Prefetcher(pool, options, [state], observe, name="host-a:1")
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(prefetcher.run)
            async for _ in reports:
                if state.health is State.UNREACHABLE and not await trio.to_thread.run_sync(
                    _claims, pool, "host-a:1"
                ):
                    break
            assert covered == 0
            await nursery.start(partial(trio.serve_tcp, forward, port, host="127.0.0.1"))
            await done.wait()
            assert state.health is State.OK
            nursery.cancel_scope.cancel()
    chunks = _read_spool(pool, group_id)
    _assert_exactly_once([c for c in chunks if c.last <= 20_000], 1, 20_000)


async def _pipe(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        async for data in source:
            await sink.send_all(data)
        await sink.send_eof()


def _claim_waits(pool: ConnectionPool) -> bool:
    """A claim is in flight: a backend waits for the per-group advisory lock."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.trio
async def test_a_prefetcher_stopped_in_the_middle_of_a_claim_gives_that_claim_back(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path, pg_url: str
) -> None:
    """Stopped while a connection's claim runs in its worker thread (held up here on the
    group's claim lock, taken by the test), the claim still commits once the lock is
    free; the prefetcher gives its claims back after that, not before: none is left
    to keep the chunks from the other prefetchers for CLAIM_SECONDS."""
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 20_000, 20_000)
    state = ServerState.of(server_configs([news_server.url()], 1)[0])
    options = _options(tmp_path, chunk_articles=5_000, slice_articles=5_000)
    prefetcher = Prefetcher(pool, options, [state], name="host-a:1")
    with psycopg.connect(pg_url, autocommit=True) as holder, trio.fail_after(60):
        holder.execute("SELECT pg_advisory_lock(6, %s::int)", (group_id,))
        async with trio.open_nursery() as nursery:
            stopped = trio.CancelScope()

            async def run() -> None:
                with stopped:
                    await prefetcher.run()

            nursery.start_soon(run)
            # A state of another process (a backend waiting for a lock): there is
            # no event to wait on, only pg_locks to look at.
            while not await trio.to_thread.run_sync(_claim_waits, pool):  # noqa: ASYNC110
                await trio.sleep(0.02)
            stopped.cancel()
            # Everything the stop does before the claim can go on (the last round
            # of housekeeping) is done: only the claim's thread is left.
            await trio.testing.wait_all_tasks_blocked(cushion=0.5)
            holder.execute("SELECT pg_advisory_unlock(6, %s::int)", (group_id,))
    assert await trio.to_thread.run_sync(_claims, pool, "host-a:1") == 0


@pytest.mark.trio
async def test_a_group_disabled_since_its_chunks_were_fetched_is_reported_no_more(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path
) -> None:
    """The connections remember the groups their server selected; one disabled since
    (`uidx groups disable`) is neither fetched nor reported: it stayed "ok" in `uidx
    status` and uidx_health until the prefetcher was restarted."""
    groups = GroupStore(pool)
    group_id = groups.add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 4_000, 4_000)
    covered = 0
    fetched = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered
        if isinstance(event, Landed) and event.job.last <= 4_000:
            covered += event.job.last - event.job.first + 1
            if covered == 4_000:
                fetched.set()

    options = _options(tmp_path, chunk_articles=2_000, slice_articles=2_000)
    server = ServerState.of(server_configs([news_server.url()], 2)[0])
    prefetcher = Prefetcher(pool, options, [server], observe, name="host-a:1")
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(prefetcher.run)
            await fetched.wait()
            assert ("group", news_server.group, State.OK) in {
                (o.component, o.subject, o.state) for o in prefetcher._health()
            }
            await trio.to_thread.run_sync(groups.set_enabled, news_server.group, False)
            await prefetcher._follower.poll()
            reported = [o for o in prefetcher._health() if o.component == "group"]
            nursery.cancel_scope.cancel()
    assert reported == []
