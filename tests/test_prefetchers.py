"""Several prefetchers share the work through PostgreSQL (issue 27): no chunk fetched
twice, none skipped; a killed prefetcher's claims lapse and its chunks go to the others."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from nntp_fixtures import NewsServer
from psycopg_pool import ConnectionPool
from test_prefetch import _assert_exactly_once, _assert_posted, _lines, _options, _read_spool

from usenet_indexer.prefetch.daemon import Prefetcher
from usenet_indexer.prefetch.events import Landed
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.spool.plan import ChunkJob, claimable
from usenet_indexer.spool.store import FolderSpool
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.spool import SpoolIndex

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
