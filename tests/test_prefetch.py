"""The spool-prefetcher: its work list (pure), and the real thing against INN2 and PostgreSQL."""

from __future__ import annotations

import contextvars
import errno
import logging
import os
import signal
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from nntp_fixtures import NewsServer
from process_logs import log_until
from psycopg_pool import ConnectionPool
from running import own_news_server
from s3_fixtures import TestSpool, land_chunk

from usenet_indexer.cli import main
from usenet_indexer.config import default
from usenet_indexer.core.health import State
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.errors import SpoolStoreError
from usenet_indexer.nntp.client import StreamFactory
from usenet_indexer.nntp.protocol import DEFAULT_MAX_LINE_BYTES
from usenet_indexer.prefetch.daemon import Prefetcher
from usenet_indexer.prefetch.events import Landed, NotLanded, Reported
from usenet_indexer.prefetch.follower import FollowOptions
from usenet_indexer.prefetch.housekeeping import remove_unindexed, sweep_spool
from usenet_indexer.prefetch.landing import Landing
from usenet_indexer.prefetch.options import LEFTOVER_GRACE_SECONDS, PrefetchOptions
from usenet_indexer.prefetch.prober import ProbeOptions
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.prefetch.work import SharedWork
from usenet_indexer.spool.files import chunk_path
from usenet_indexer.spool.leftovers import ChunkKey
from usenet_indexer.spool.plan import ChunkJob, WantedRange, clip, cut, missing, work_list
from usenet_indexer.spool.store import ChunkSink, FolderSpool, SpoolStore
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.spool import SpoolChunk, SpoolIndex
from usenet_indexer.testing.fake_nntp import FakeNNTPServer, Fault, Reply, _Session
from usenet_indexer.testing.newsd import generate_articles
from usenet_indexer.wire.frames import Codec

DEADLINE_SECONDS = 120

# -- the work list (pure) -------------------------------------------------------


def test_missing_is_what_no_interval_covers() -> None:
    assert missing(1, 100, []) == [(1, 100)]
    assert missing(1, 100, [(1, 100)]) == []
    assert missing(1, 100, [(20, 29), (50, 200), (-5, 3)]) == [(4, 19), (30, 49)]
    assert missing(10, 20, [(1, 9), (21, 30)]) == [(10, 20)]


@given(
    st.integers(0, 200),
    st.integers(0, 200),
    st.lists(st.tuples(st.integers(0, 250), st.integers(0, 30)), max_size=8),
)
def test_missing_and_covered_partition_the_span(
    first: int, span: int, raw: list[tuple[int, int]]
) -> None:
    last = first + span
    covered = [(start, start + length) for start, length in raw]
    gaps = missing(first, last, covered)
    in_gaps = {n for a, b in gaps for n in range(a, b + 1)}
    in_covered = {n for a, b in covered for n in range(a, b + 1)}
    assert in_gaps == set(range(first, last + 1)) - in_covered
    assert gaps == sorted(gaps)


def test_cut_and_clip() -> None:
    assert cut(1, 25, 10) == [(1, 10), (11, 20), (21, 25)]
    job = ChunkJob(1, "g", 91, 120)
    assert clip(job, 1, 100) == ChunkJob(1, "g", 91, 100)
    assert clip(job, 1, 90) is None
    assert clip(job, 1, 500) == job


def test_work_list_puts_leased_ranges_first_from_their_resume_point() -> None:
    planned = WantedRange(1, 7, "g", 1, 100, 1, leased=False)
    leased = WantedRange(2, 7, "g", 101, 200, 151, leased=True)
    covered = {7: [(1, 30)]}
    busy = [ChunkJob(7, "g", 31, 50)]
    jobs = work_list([planned, leased], covered, 20, busy=busy)
    assert [(j.first, j.last, j.leased) for j in jobs] == [
        (151, 170, True),
        (171, 190, True),
        (191, 200, True),
        (51, 70, False),
        (71, 90, False),
        (91, 100, False),
    ]


def test_server_urls_carry_their_connections() -> None:
    configs = server_configs(["nntps://u:p@news.example.com?connections=20", "nntp://h"], 4)
    assert [(c.server, c.connections) for c in configs] == [
        ("news.example.com:563", 20),
        ("h:119", 4),
    ]
    assert "p@" not in repr(configs[0])


@pytest.mark.parametrize("url", ["nntp://h?connections=0", "nntp://h?connections=x", "http://h"])
def test_bad_server_urls_name_the_key(url: str) -> None:
    from usenet_indexer.errors import ConfigError

    with pytest.raises(ConfigError, match="nntp"):
        server_configs([url], 4)


def test_a_bad_nntp_connections_names_that_setting_not_the_url() -> None:
    from usenet_indexer.errors import ConfigError

    for wrong in (0, 501):
        with pytest.raises(ConfigError) as refused:
            server_configs(["nntp://127.0.0.1:11119"], wrong)
        assert str(refused.value) == f"nntp_connections: {wrong} is not in 1..500"
    # The URL's own connections= is still the URL's mistake.
    with pytest.raises(ConfigError) as refused:
        server_configs(["nntp://127.0.0.1:11119?connections=0"], 4)
    assert str(refused.value) == "nntp: 127.0.0.1:11119: connections=0 is not in 1..500"


def test_an_unknown_server_url_parameter_is_refused_with_a_hint() -> None:
    from usenet_indexer.errors import ConfigError

    with pytest.raises(ConfigError) as refused:
        server_configs(["nntp://news.example.com?conections=4"], 4)
    assert refused.value.key == "nntp"
    assert "unknown parameter 'conections' (did you mean connections?)" in str(refused.value)
    # What is known still works, starttls included.
    (config,) = server_configs(["nntp://news.example.com?starttls=1&connections=3"], 4)
    assert config.connections == 3


# -- against PostgreSQL and INN2 -----------------------------------------------


def _read_spool(pool: ConnectionPool, group_id: int) -> list[SpoolChunk]:
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT first_article, last_article, codec, path, lines FROM spool_chunks"
            " WHERE group_id = %s ORDER BY first_article",
            (group_id,),
        ).fetchall()
    return [SpoolChunk(*row) for row in rows]


def _assert_exactly_once(chunks: list[SpoolChunk], first: int, last: int) -> None:
    """The chunks cover [first, last] with no hole and no overlap."""
    at = first
    for chunk in chunks:
        assert chunk.first == at, f"hole or overlap at {at}: {chunk}"
        at = chunk.last + 1
    assert at == last + 1


def _lines(spool: SpoolStore, chunks: list[SpoolChunk]) -> list[bytes]:
    lines: list[bytes] = []
    for chunk in chunks:
        if chunk.path is None:
            continue
        text = zlib.decompress(spool.read(chunk.path))
        assert text.endswith(b"\n")
        got = text[:-1].split(b"\n")
        assert len(got) == chunk.lines
        for line in got:
            assert chunk.first <= int(line.split(b"\t", 1)[0]) <= chunk.last
        lines += got
    return lines


def _assert_posted(news_server: NewsServer, lines: list[bytes], first: int, count: int) -> None:
    posted = list(generate_articles(news_server.group, news_server.articles, news_server.seed))
    assert len(lines) == count
    for number, line in enumerate(lines, start=first):
        fields = line.split(b"\t")
        article = posted[number - 1]
        assert int(fields[0]) == number
        assert fields[1].decode() == article.subject
        assert fields[4].decode() == article.message_id


def _options(tmp_path: Path, **changes: object) -> PrefetchOptions:
    values: dict[str, object] = {
        "spool": tmp_path / "spool",
        "slice_articles": 5_000,
        "chunk_articles": 15_000,
        "poll_seconds": 0.2,
        "retry": RetryPolicy(base_seconds=0.05),
    }
    values.update(changes)
    return PrefetchOptions(**values)  # type: ignore[arg-type]


async def _run_until(
    prefetcher: Prefetcher, done: trio.Event, nursery_deadline: float = DEADLINE_SECONDS
) -> None:
    with trio.fail_after(nursery_deadline):
        async with trio.open_nursery() as nursery:
            await nursery.start(prefetcher.run)
            await done.wait()
            nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_prefetcher_fills_leased_ranges_first_and_every_article_once(
    news_server: NewsServer,
    pool: ConnectionPool,
    pg_url: str,
    tmp_path: Path,
    any_spool: TestSpool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    group_id = GroupStore(pool).add(news_server.group)
    ranges = RangeStore(pool)
    ranges.plan(group_id, 1, 80_000, 40_000)
    ranges.plan(group_id, 80_001, 100_000, 20_000)
    # Beyond the server's high water mark: nothing to fetch yet.
    ranges.plan(group_id, 100_001, 120_000, 20_000)
    node = NodeStore(pool).create("edge-1")
    assert node
    with pool.connection() as conn:
        node_id = conn.execute("SELECT id FROM nodes WHERE name = 'edge-1'").fetchone()
    assert node_id is not None
    lease = ranges.lease(node_id[0], 900)
    assert lease is not None
    assert (lease.first, lease.last) == (1, 40_000)
    # The edge has stored up to 20,000: the lease's chunks start there.
    with pool.connection() as conn:
        conn.execute("UPDATE ranges SET resume = 20001 WHERE id = %s", (lease.range_id,))

    taken: list[ChunkJob] = []
    covered = 0
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered
        if isinstance(event, ChunkJob):
            taken.append(event)
        elif isinstance(event, Landed):
            covered += event.job.last - event.job.first + 1
        elif isinstance(event, Reported) and covered == 100_000 - 20_000:
            done.set()  # the figures of the whole run are in the database

    config = server_configs([news_server.url()], 3)[0]
    options = _options(tmp_path, report_seconds=0.2, spool=any_spool.store)
    state = ServerState.of(config)
    await _run_until(Prefetcher(pool, options, [state], observe), done)
    assert state.lines == 80_000  # fetched once each

    assert [(j.first, j.last) for j in taken[:2]] == [(20_001, 35_000), (35_001, 40_000)]
    assert all(j.leased for j in taken[:2])
    assert not any(j.leased for j in taken[2:])
    chunks = _read_spool(pool, group_id)
    _assert_exactly_once(chunks, 20_001, 100_000)
    assert not any(c.path is None for c in chunks)
    _assert_posted(news_server, _lines(any_spool.store, chunks), 20_001, 80_000)
    assert any_spool.stored() == {str(c.path) for c in chunks}
    (row,) = [g for g in GroupStore(pool).list() if g.name == news_server.group]
    assert (row.low, row.high) == (1, news_server.articles)
    assert not any_spool.leftovers()

    # What an operator sees: the server, its connections and lines.
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    assert main(["status"]) == 0
    status = capsys.readouterr().out
    server = f"{news_server.host}:{news_server.port}"
    (line,) = [line for line in status.splitlines() if server in line]
    assert "/3   connections" in line
    assert f"{80_000:,} lines" in line


@pytest.mark.trio
async def test_articles_below_the_servers_low_water_mark_are_recorded_as_gaps(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path, any_spool: TestSpool
) -> None:
    low = news_server.high_first
    last = low + news_server.high_articles - 1
    group_id = GroupStore(pool).add(news_server.high_group)
    RangeStore(pool).plan(group_id, low - 20_000, last, 30_000)
    landed: list[Landed] = []
    done = trio.Event()

    def observe(event: object) -> None:
        if isinstance(event, Landed):
            landed.append(event)
            if sum(e.job.last - e.job.first + 1 for e in landed) == last - low + 20_001:
                done.set()

    config = server_configs([news_server.url()], 2)[0]
    options = _options(tmp_path, chunk_articles=10_000, spool=any_spool.store)
    await _run_until(Prefetcher(pool, options, [ServerState.of(config)], observe), done)

    chunks = _read_spool(pool, group_id)
    _assert_exactly_once(chunks, low - 20_000, last)
    assert [(c.first, c.last, c.path is None) for c in chunks] == [
        (low - 20_000, low - 10_001, True),
        (low - 10_000, low - 1, True),
        (low, last, False),
    ]
    assert len(_lines(any_spool.store, chunks)) == news_server.high_articles
    assert any_spool.stored() == {str(chunks[-1].path)}


def _three_chunks_resumed_at_201(
    pool: ConnectionPool, any_spool: TestSpool
) -> tuple[int, SpoolIndex]:
    """A range of articles 1..300 in three landed chunks, its resume point at 201."""
    group_id = GroupStore(pool).add("alt.binaries.sweep")
    (range_id,) = RangeStore(pool).plan(group_id, 1, 300, 300)
    spool = SpoolIndex(pool)
    for first in (1, 101, 201):
        land_chunk(
            any_spool.store, spool, "alt.binaries.sweep", group_id, [b"x"], first, first + 99
        )
    assert len(any_spool.stored()) == 3
    with pool.connection() as conn:
        conn.execute("UPDATE ranges SET resume = 201 WHERE id = %s", (range_id,))
    return group_id, spool


def _assert_swept_below_201(
    pool: ConnectionPool, any_spool: TestSpool, group_id: int, spool: SpoolIndex
) -> None:
    """A sweep removes the two chunks below the resume point, rows and files."""
    assert sweep_spool(spool, any_spool.store) == 2
    left = _read_spool(pool, group_id)
    assert [c.first for c in left] == [201]
    assert any_spool.stored() == {str(left[0].path)}


def test_sweep_removes_chunks_below_the_resume_point_files_then_rows(
    pool: ConnectionPool, any_spool: TestSpool
) -> None:
    group_id, spool = _three_chunks_resumed_at_201(pool, any_spool)
    _assert_swept_below_201(pool, any_spool, group_id, spool)


def test_a_chunk_across_two_ranges_is_swept_once_both_are_past_it(
    pool: ConnectionPool, any_spool: TestSpool
) -> None:
    """`uidx spool import` cuts a dump into chunks of --chunk-articles from its first
    article, whatever the ranges: a chunk may hold the end of one range and the start
    of the next. It stayed in the spool for good (the sweep took only chunks within
    one range): one chunk per range boundary. It goes once both ranges are past it;
    articles in no range are kept (they may be planned yet)."""
    group_id = GroupStore(pool).add("alt.binaries.straddle")
    ranges = RangeStore(pool)
    ranges.plan(group_id, 1, 150, 150)
    ranges.plan(group_id, 151, 300, 150)
    index = SpoolIndex(pool)
    for first in (1, 101, 201, 301):
        land_chunk(
            any_spool.store, index, "alt.binaries.straddle", group_id, [b"x"], first, first + 99
        )
    with pool.connection() as conn:
        conn.execute("UPDATE ranges SET state = 'done', resume = 151 WHERE first_article = 1")
    # 101..200 is still needed by the second range (from its resume point 151).
    assert sweep_spool(index, any_spool.store) == 1
    with pool.connection() as conn:
        conn.execute("UPDATE ranges SET state = 'done', resume = 301 WHERE first_article = 151")
    assert sweep_spool(index, any_spool.store) == 2
    (left,) = _read_spool(pool, group_id)
    assert (left.first, left.last) == (301, 400)
    assert any_spool.stored() == {str(left.path)}


@attrs.frozen
class _RefusingStore:
    """A fake store whose deletes fail (the object store down during a sweep, which
    a real one cannot be made to be at that moment); everything else is `store`'s."""

    store: SpoolStore

    def delete(self, keys: Sequence[str]) -> None:
        raise SpoolStoreError(f"spool chunk {keys[0]}", "not deleted: the store is down")

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


def test_a_sweep_the_store_refuses_keeps_the_rows_and_the_next_one_deletes_them(
    pool: ConnectionPool, any_spool: TestSpool
) -> None:
    group_id, spool = _three_chunks_resumed_at_201(pool, any_spool)
    with pytest.raises(SpoolStoreError, match="not deleted"):
        sweep_spool(spool, _RefusingStore(any_spool.store))  # type: ignore[arg-type]
    # Nothing is left over: the rows still name the files the store kept.
    assert [c.first for c in _read_spool(pool, group_id)] == [1, 101, 201]
    assert len(any_spool.stored()) == 3
    _assert_swept_below_201(pool, any_spool, group_id, spool)


def test_a_chunks_key_is_read_back_and_other_keys_are_not_ours() -> None:
    key = str(chunk_path("alt.binaries.x", 1, 4_000))
    assert ChunkKey.parse(key) == ChunkKey(key, "alt.binaries.x", 1, 4_000)
    for other in (
        "alt.binaries.x/1-4000.zlib",  # not 20 digits
        f"alt.binaries.x/.{key.partition('/')[2]}.1234.tmp",  # a writer's temporary file
        f"nested/{key}",
        "notes.txt",
        str(chunk_path("alt.binaries.x", 4_000, 1)),
        str(chunk_path("alt.binaries.x", 0, 1)),
    ):
        assert ChunkKey.parse(other) is None, other


LEFT = "alt.binaries.leftovers"


def _stored_not_indexed(any_spool: TestSpool, first: int, last: int, group: str = LEFT) -> str:
    key, _size, _codec = any_spool.store.write_chunk(group, first, last, b"%d\tx\n" % first)
    return key


def test_chunks_stored_but_never_indexed_go_once_no_stream_can_read_them(
    pool: ConnectionPool, any_spool: TestSpool
) -> None:
    """A prefetcher killed (or its row refused) between a chunk's upload and its row
    leaves a chunk no row names; one of the live head, cut at the server's high water
    mark, is fetched again under another key, and stayed in the store for good. The
    spool's leftover removal deletes it once it is provably dead (its first article
    indexed under another key, or below every resume point it is in); what may still
    be indexed, is young, or is not ours stays."""
    group_id = GroupStore(pool).add(LEFT)
    ranges = RangeStore(pool)
    ranges.plan(group_id, 1, 4_000, 4_000)
    ranges.plan(group_id, 4_001, 8_000, 4_000)
    with pool.connection() as conn:  # the first range indexed up to 2000
        conn.execute("UPDATE ranges SET resume = 2001 WHERE first_article = 1")
    index = SpoolIndex(pool)
    indexed = land_chunk(any_spool.store, index, LEFT, group_id, [b"4001\tx"], 4_001, 6_000)
    index.add(group_id, SpoolChunk(6_001, 8_000, int(Codec.NONE), None, 0), 0)  # a gap
    old_path = land_chunk(any_spool.store, index, LEFT, group_id, [b"3001\tx"], 3_001, 4_000)
    with pool.connection() as conn:  # indexed by an older version: by its absolute path
        conn.execute(
            "UPDATE spool_chunks SET path = '/var/lib/uidx/spool/' || path"
            " WHERE first_article = 3001"
        )
    dead = {
        # its first article indexed under another key (the live head cut at high)
        _stored_not_indexed(any_spool, 4_001, 5_000),
        # its first article a gap
        _stored_not_indexed(any_spool, 6_001, 7_000),
        # below the resume point of the range it is in
        _stored_not_indexed(any_spool, 1, 2_000),
    }
    kept = {
        str(indexed.path),
        str(old_path.path),
        _stored_not_indexed(any_spool, 1_001, 3_000),  # across the resume point: needed
        _stored_not_indexed(any_spool, 8_001, 9_000),  # in no range (planned yet, maybe)
        _stored_not_indexed(any_spool, 1, 10, group="alt.binaries.unknown"),
    }
    assert any_spool.stored() == dead | kept
    # Young, they may be between their upload and their row: none goes yet.
    assert remove_unindexed(index, any_spool.store, LEFTOVER_GRACE_SECONDS) == 0
    assert remove_unindexed(index, any_spool.store, 0) == len(dead)
    assert any_spool.stored() == kept
    assert remove_unindexed(index, any_spool.store, 0) == 0


# -- the command, killed and started again ---------------------------------------


def _start(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "usenet_indexer", "prefetch"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _end(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait()
    if process.stderr is not None:
        process.stderr.close()


@pytest.fixture
def prefetch_env(news_server: NewsServer, pg_url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.update(
        DATABASE_URL=pg_url,
        UIDX_HOME=str(tmp_path),
        UIDX_NNTP=news_server.url() + "?connections=2",
        UIDX_PREFETCH_CHUNK_ARTICLES="4000",
        UIDX_PREFETCH_SLICE_ARTICLES="1000",
        UIDX_PREFETCH_POLL_SECONDS="0.2",
    )
    return env


def test_a_range_is_filled_exactly_once_across_a_kill_9(
    prefetch_env: dict[str, str],
    news_server: NewsServer,
    pool: ConnectionPool,
    any_spool: TestSpool,
) -> None:
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 60_000, 30_000)
    prefetch_env = {**prefetch_env, **any_spool.env}

    landed = 0

    def three_chunks(line: str) -> bool:
        nonlocal landed
        landed += " lines, " in line
        return landed == 3

    first = _start(prefetch_env)
    try:
        log_until(first, three_chunks, 60)
    finally:
        _end(first)
    partial = _read_spool(pool, group_id)
    assert 2 <= len(partial) < 15

    # The prefetcher also follows the group above the plan (its live head):
    # the planned articles are those up to 60,000.
    def planned() -> list[SpoolChunk]:
        return [c for c in _read_spool(pool, group_id) if c.first <= 60_000]

    def complete(_line: str) -> bool:
        return sum(c.last - c.first + 1 for c in planned()) >= 60_000

    second = _start(prefetch_env)
    try:
        log_until(second, complete, DEADLINE_SECONDS)
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0
    finally:
        _end(second)
    chunks = planned()
    _assert_exactly_once(chunks, 1, 60_000)
    _assert_posted(news_server, _lines(any_spool.store, chunks), 1, 60_000)
    assert not any_spool.leftovers()
    indexed = {str(c.path) for c in _read_spool(pool, group_id) if c.path}
    stored = any_spool.stored()
    assert indexed <= stored
    # A chunk the kill cut between its write and its row is written again under
    # the same name when fetched again; one of the live head above the plan may
    # not be fetched again before the end, and is left over (never read).
    assert all(int(Path(key).name.split("-")[0]) > 60_000 for key in stored - indexed)


def test_sighup_stops_the_prefetcher_as_sigterm_does(
    prefetch_env: dict[str, str], news_server: NewsServer, pool: ConnectionPool, tmp_path: Path
) -> None:
    """`uidx prefetch` (one process, no supervisor) in the middle of its work gets SIGHUP
    (its terminal closed, `systemctl reload`): it stops as on SIGTERM, abandoning the chunks
    in flight and giving its claims back, instead of dying by the signal's default action
    with a chunk half written and its claims left to lapse."""
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 60_000, 30_000)
    process = _start(prefetch_env)
    try:
        seen = log_until(process, lambda line: " lines, " in line, DEADLINE_SECONDS)
        # A chunk landed; the prefetcher holds claims on the next ones.
        with pool.connection() as conn:
            assert conn.execute("SELECT count(*) FROM spool_claims").fetchone() != (0,)
        process.send_signal(signal.SIGHUP)
        _, rest = process.communicate(timeout=DEADLINE_SECONDS)
    finally:
        _end(process)
    said = "".join(seen) + rest.decode(errors="replace")
    assert process.returncode == 0, said
    assert "SIGHUP: stopping; chunks in flight are abandoned" in said
    assert "Traceback" not in said, said
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) FROM spool_claims").fetchone() == (0,)
    assert not list((tmp_path / "spool").glob("*/.*.tmp"))


def test_prefetch_without_servers_names_the_setting(
    prefetch_env: dict[str, str],
) -> None:
    env = dict(prefetch_env)
    del env["UIDX_NNTP"]
    result = subprocess.run(
        [sys.executable, "-m", "usenet_indexer", "prefetch"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 78
    assert "nntp" in result.stderr


def _prefetch(env: dict[str, str], **settings: str) -> subprocess.CompletedProcess[str]:
    """`uidx prefetch` run with `settings` added to `env`; what it did."""
    return subprocess.run(
        [sys.executable, "-m", "usenet_indexer", "prefetch"],
        env={**env, **settings},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _one_config_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused setting prints (exit 78, no traceback)."""
    assert done.returncode == 78, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    return done.stderr.strip()


@pytest.fixture
def no_db_env(tmp_path: Path) -> dict[str, str]:
    """No settings but a home: enough for the checks `prefetch` makes before it starts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.pop("DATABASE_URL", None)
    return {**env, "UIDX_HOME": str(tmp_path / "home")}


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "nntps://alice:S3cretPass@:563",
            "nntp: expected nntp[s]://[user:pass@]host[:port], got 'nntps://alice:***@:563'",
        ),
        (
            "nntp://alice:S3cretPass@h?starttls=maybe",
            "nntp: nntp://alice:***@h?starttls=maybe: starttls='maybe' is not true/false,"
            " yes/no, on/off or 1/0",
        ),
        ("nntp://alice:S3cretPass@h:0", "nntp: nntp://alice:***@h:0: port 0 is not in 1..65535"),
    ],
)
def test_prefetch_names_a_bad_server_url_without_its_password(
    no_db_env: dict[str, str], url: str, said: str
) -> None:
    line = _one_config_line(_prefetch(no_db_env, UIDX_NNTP=url))
    assert line == f"uidx prefetch: {said}"
    assert "S3cretPass" not in line


def test_prefetch_names_nntp_connections_when_that_setting_is_wrong(
    no_db_env: dict[str, str],
) -> None:
    # 0: refused where the settings are read; over the most: where the servers are.
    done = _prefetch(no_db_env, UIDX_NNTP="nntp://127.0.0.1:11119", UIDX_NNTP_CONNECTIONS="0")
    assert _one_config_line(done) == "uidx prefetch: nntp_connections: '0': must be at least 1"
    done = _prefetch(no_db_env, UIDX_NNTP="nntp://127.0.0.1:11119", UIDX_NNTP_CONNECTIONS="501")
    assert _one_config_line(done) == "uidx prefetch: nntp_connections: 501 is not in 1..500"


@pytest.mark.parametrize(
    ("what", "reason"),
    [
        ("missing.pem", "cannot be read: No such file or directory"),
        ("folder", "cannot be read: Is a directory"),
        ("not.pem", "no PEM CA certificate in it"),
    ],
)
def test_prefetch_names_a_bad_ca_file_at_start(
    prefetch_env: dict[str, str], news_server: NewsServer, tmp_path: Path, what: str, reason: str
) -> None:
    # Against INN over STARTTLS and PostgreSQL: the first connection met the
    # file and the worker ended in an exception-group traceback.
    path = tmp_path / what
    if what == "folder":
        path.mkdir()
    elif what == "not.pem":
        path.write_text("not a certificate\n")
    done = _prefetch(
        prefetch_env, UIDX_NNTP=news_server.url(starttls=True), UIDX_NNTP_CA_FILE=str(path)
    )
    # (After "no PEM CA certificate in it", what OpenSSL says in parentheses.)
    assert _one_config_line(done).startswith(f"uidx prefetch: nntp_ca_file: {path}: {reason}")


# -- faults a real server does not produce on demand: an in-memory fake ---------

FAR = 2**33  # article numbers past 2^32 (INN2 stops at 2^31 - 1)


def _fake_line(number: int) -> bytes:
    return (
        f'{number}\tfake [1/1] - "f{number}.bin" yEnc (1/1)\tp@x\t'
        f"Mon, 30 Nov 2026 10:00:00 +0000\t<{number}@fake>\t\t1000\t10"
    ).encode()


@pytest.mark.trio
async def test_fake_faults_are_retried_without_a_gap_or_a_double(
    pool: ConnectionPool, tmp_path: Path
) -> None:
    group = "alt.binaries.fake"
    count = 3_000
    group_id = GroupStore(pool).add(group)
    RangeStore(pool).plan(group_id, FAR, FAR + count - 1, count)
    # One fault per connection, in order (usenet_indexer/testing/fake_nntp.py). The
    # 480 last: after it the prefetcher checks its login (a connection with no OVER)
    # before it claims chunks again, which a fault after it would fall on.
    fake = FakeNNTPServer(
        groups={group: (FAR, FAR + count - 1)},
        overview={n: _fake_line(n) for n in range(FAR, FAR + count)},
        faults=["502", "drop", "stall", "480"],
    )
    config = server_configs(["nntp://fake.invalid:119?connections=2"], 2)[0]
    state = ServerState.of(config)
    options = _options(tmp_path, chunk_articles=1_000, slice_articles=250, timeout_seconds=0.5)
    await _prefetch_from_fake(pool, fake, options, state, count)

    chunks = _read_spool(pool, group_id)
    _assert_exactly_once(chunks, FAR, FAR + count - 1)
    lines = _lines(FolderSpool(tmp_path / "spool"), chunks)
    assert lines == [_fake_line(n) for n in range(FAR, FAR + count)]
    assert state.errors == 4
    assert state.limit == 1  # lowered by the 502


async def _prefetch_from_fake(
    pool: ConnectionPool,
    fake: FakeNNTPServer,
    options: PrefetchOptions,
    state: ServerState,
    articles: int,
    open_stream: StreamFactory | None = None,
    watch: Callable[[object], None] = lambda _: None,
) -> None:
    """Run the prefetcher against the fake until chunks of `articles` articles have landed
    (each event told to `watch` too)."""
    covered = 0
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered
        watch(event)
        if isinstance(event, Landed):
            covered += event.job.last - event.job.first + 1
            if covered == articles:
                done.set()

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as servers:
            fake.run_in(servers)
            opener = open_stream or fake.open_stream
            await _run_until(Prefetcher(pool, options, [state], observe, lambda _: opener), done)
            servers.cancel_scope.cancel()


@pytest.mark.trio
async def test_a_group_the_server_answered_411_for_is_fetched_once_it_carries_it(
    pool: ConnectionPool, tmp_path: Path
) -> None:
    # A group created on the server after it was planned, or a backend that answered
    # 411 once: the group stayed "not carried", its chunks unfetched, until a restart.
    group = "alt.binaries.later"
    count = 2_000
    group_id = GroupStore(pool).add(group)
    RangeStore(pool).plan(group_id, FAR, FAR + count - 1, count)
    fake = FakeNNTPServer(overview={n: _fake_line(n) for n in range(FAR, FAR + count)})
    state = ServerState.of(server_configs(["nntp://fake.invalid:119"], 1)[0])
    options = _options(
        tmp_path, chunk_articles=1_000, slice_articles=500, report_seconds=0.2, recheck_seconds=1.0
    )
    covered = 0
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered
        if isinstance(event, Reported) and prefetcher._work.uncarried and group not in fake.groups:
            fake.groups[group] = (FAR, FAR + count - 1)  # the server carries it now
        elif isinstance(event, Landed):
            covered += event.job.last - event.job.first + 1
            if covered == count:
                done.set()

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as servers:
            fake.run_in(servers)
            prefetcher = Prefetcher(pool, options, [state], observe, lambda _: fake.open_stream)
            await _run_until(prefetcher, done)
            servers.cancel_scope.cancel()

    chunks = _read_spool(pool, group_id)
    _assert_exactly_once(chunks, FAR, FAR + count - 1)
    assert _lines(FolderSpool(tmp_path / "spool"), chunks) == [
        _fake_line(n) for n in range(FAR, FAR + count)
    ]
    assert not prefetcher._work.uncarried  # and its health row says so no more


_AUTHED: contextvars.ContextVar[bool] = contextvars.ContextVar("authed", default=False)


@attrs.define(eq=False)
class _AccountCap(FakeNNTPServer):
    """A FAKE provider that lets `cap` sessions of the account in at once and answers
    "502 too many connections" to AUTHINFO PASS past that (INN2 has no such cap)."""

    cap: int = 1
    authed: int = 0
    refused: int = 0

    async def serve(self, stream: trio.abc.Stream, fault: Fault = "ok") -> None:
        try:
            await super().serve(stream, fault)  # a task per connection: its own context
        finally:
            if _AUTHED.get():
                self.authed -= 1

    async def _answer(self, line: str, session: _Session) -> Reply:
        if not line.startswith("AUTHINFO"):
            return await super()._answer(line, session)
        self.received.append(line.split(" PASS ", 1)[0])
        if line.startswith("AUTHINFO USER"):
            return b"381 password required\r\n"
        if self.authed >= self.cap:
            self.refused += 1
            return b"502 too many connections for your user\r\n"
        self.authed += 1
        _AUTHED.set(True)
        return b"281 welcome\r\n"


@pytest.mark.trio
async def test_an_account_cap_said_to_authinfo_lowers_the_pool_and_is_no_login_refusal(
    pool: ConnectionPool, tmp_path: Path
) -> None:
    # The account's cap shows at AUTHINFO (the greeting does not know the account): it
    # was a refused login (health "login refused", the password right all along) and
    # the extra connections tried again for ever, the pool never lowered.
    group = "alt.binaries.capped"
    count = 6_000
    group_id = GroupStore(pool).add(group)
    RangeStore(pool).plan(group_id, FAR, FAR + count - 1, count)
    fake = _AccountCap(
        groups={group: (FAR, FAR + count - 1)},
        overview={n: _fake_line(n) for n in range(FAR, FAR + count)},
    )
    state = ServerState.of(server_configs(["nntp://me:right@fake.invalid:119"], 3)[0])
    healths: set[State] = set()
    options = _options(tmp_path, chunk_articles=1_000, slice_articles=250)
    await _prefetch_from_fake(
        pool, fake, options, state, count, watch=lambda _: healths.add(state.health)
    )

    chunks = _read_spool(pool, group_id)
    _assert_exactly_once(chunks, FAR, FAR + count - 1)
    assert fake.refused
    assert State.LOGIN_REFUSED not in healths
    assert state.limit < 3  # lowered, as by a 502 greeting


def test_a_lowered_pool_gets_a_connection_back_after_a_quiet_interval() -> None:
    state = ServerState.of(server_configs(["nntp://h?connections=3"], 4)[0])
    assert state.lower_limit(100.0) == 2
    assert state.lower_limit(110.0) == 1
    state.restore_one(200.0, 300.0)
    assert state.limit == 1  # not quiet long enough
    state.restore_one(410.0, 300.0)
    assert state.limit == 2
    state.restore_one(720.0, 300.0)
    state.restore_one(1100.0, 300.0)
    assert state.limit == 3  # never above the configured connections


class _Recording(trio.abc.Stream):
    """The client's end of a fake connection, noting for each command sent how many
    multi-line replies (".\\r\\n" ends) the client had received by then."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._received = bytearray()
        self.sent: list[tuple[str, int]] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        ends = self._received.count(b"\r\n.\r\n")
        self.sent += [(line, ends) for line in bytes(data).decode().split("\r\n") if line]
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self._stream.receive_some(max_bytes)
        self._received += data
        return data

    async def aclose(self) -> None:
        await self._stream.aclose()


@pytest.mark.trio
async def test_the_next_chunk_is_asked_for_before_the_last_one_is_read(
    pool: ConnectionPool, tmp_path: Path
) -> None:
    # The server is never left waiting between two chunks of a group: the
    # next chunk's OVER goes out while replies of the last one are unread.
    group = "alt.binaries.fake"
    chunk, slice_articles = 8_000, 2_000  # 4 slices a chunk, each reply ~200 KB
    count = 2 * chunk
    group_id = GroupStore(pool).add(group)
    RangeStore(pool).plan(group_id, FAR, FAR + count - 1, count)
    fake = FakeNNTPServer(
        groups={group: (FAR, FAR + count - 1)},
        overview={n: _fake_line(n) for n in range(FAR, FAR + count)},
    )
    connections: list[_Recording] = []

    async def open_stream() -> trio.abc.Stream:
        connections.append(_Recording(await fake.open_stream()))
        return connections[-1]

    state = ServerState.of(server_configs(["nntp://fake.invalid:119"], 1)[0])
    options = _options(tmp_path, chunk_articles=chunk, slice_articles=slice_articles)
    await _prefetch_from_fake(pool, fake, options, state, count, open_stream)

    chunks = _read_spool(pool, group_id)
    _assert_exactly_once(chunks, FAR, FAR + count - 1)
    assert _lines(FolderSpool(tmp_path / "spool"), chunks) == [
        _fake_line(n) for n in range(FAR, FAR + count)
    ]
    (connection,) = connections
    overs = [(line, ends) for line, ends in connection.sent if line.startswith("OVER")]
    assert [line for line, _ in overs] == [
        f"OVER {first}-{first + slice_articles - 1}"
        for first in range(FAR, FAR + count, slice_articles)
    ]
    # The second chunk's first OVER: sent when fewer than the first chunk's 4 replies were in.
    _, before = overs[0]
    _, at_second_chunk = overs[4]
    assert at_second_chunk - before < 4


# -- the scheduler's adapter: one read of the work list at a time ----------------


@attrs.define(eq=False)
class _HeldSpool(SpoolIndex):
    """A spool index whose work-list read waits (in its thread) until `release` is set."""

    release: threading.Event = attrs.field(factory=threading.Event)
    reads: int = 0

    def wanted(self, limit: int) -> list[WantedRange]:
        self.reads += 1
        self.release.wait(DEADLINE_SECONDS)
        return super().wanted(limit)


@pytest.mark.trio
async def test_connections_asking_at_once_share_one_read_of_the_work_list(
    pool: ConnectionPool, tmp_path: Path
) -> None:
    group_id = GroupStore(pool).add("alt.binaries.shared")
    RangeStore(pool).plan(group_id, 1, 30_000, 30_000)
    spool = _HeldSpool(pool)
    work = SharedWork(spool, _options(tmp_path, chunk_articles=15_000), servers=1)
    taken: list[ChunkJob | None] = []

    async def take() -> None:
        taken.append(await work.take(0))

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take)
            nursery.start_soon(take)
            await trio.testing.wait_all_tasks_blocked()
            # One task reads in a thread, the other waits for that read, and no
            # chunk is chained meanwhile from a list that is being replaced.
            assert taken == []
            assert work.take_now(0, lambda _: True) is None
            spool.release.set()
    assert spool.reads == 1
    assert sorted((j.first, j.last) for j in taken if j is not None) == [
        (1, 15_000),
        (15_001, 30_000),
    ]


@attrs.define(eq=False)
class _FullSpool(SpoolIndex):
    """A spool index that says the spool holds the default budget's bytes."""

    def size(self) -> tuple[int, int, int]:
        return 1, default("spool_budget_bytes"), 1


@pytest.mark.trio
async def test_options_at_their_defaults_keep_to_the_spool_budget(
    pool: ConnectionPool, tmp_path: Path
) -> None:
    """Options built without a budget have the setting's (20 GiB), not 0 = no limit."""
    group_id = GroupStore(pool).add("alt.binaries.full")
    RangeStore(pool).plan(group_id, 1, 30_000, 30_000)
    spool = _FullSpool(pool)
    unlimited = SharedWork(spool, PrefetchOptions(tmp_path / "spool", budget_bytes=0), servers=1)
    at_defaults = SharedWork(spool, PrefetchOptions(tmp_path / "spool"), servers=1)
    with trio.fail_after(DEADLINE_SECONDS):
        assert await unlimited.take(0) is not None
        # Over budget only leased ranges are fetched, and this one is not leased.
        assert await at_defaults.take(0) is None


# -- a spool disk that fills up while a chunk's slices are written ------------------


@attrs.define(eq=False)
class _FullDisk:
    """How many slice writes still hit a full disk (a FAKE: a test cannot fill a real one)."""

    writes: int


@attrs.define(eq=False)
class _FullDiskSink:
    """A FAKE chunk sink: a real folder spool's writer, whose writes fail with ENOSPC
    while the disk is full, as a buffered write of a slice does on a real full disk."""

    inner: ChunkSink
    disk: _FullDisk

    @property
    def lines(self) -> int:
        return self.inner.lines

    def write(self, blocks: Sequence[bytes], lines: int) -> None:
        if self.disk.writes > 0:
            self.disk.writes -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        self.inner.write(blocks, lines)

    def commit(self) -> tuple[str, int, Codec]:
        return self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()


@attrs.frozen
class _FullDiskSpool(FolderSpool):
    """A FAKE folder spool whose disk is full for `disk.writes` more slice writes."""

    disk: _FullDisk = attrs.field(factory=lambda: _FullDisk(0))

    def open_chunk(self, group: str, first: int, last: int) -> _FullDiskSink:  # type: ignore[override]
        return _FullDiskSink(super().open_chunk(group, first, last), self.disk)


@pytest.mark.trio
async def test_a_full_disk_while_a_slice_is_written_is_survived_and_the_chunk_fetched_again(
    news_server: NewsServer, pool: ConnectionPool, tmp_path: Path
) -> None:
    # Not only at commit: a slice's buffered write hits ENOSPC too. It stopped the
    # whole prefetcher (the OSError left its connection task).
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 20_000, 20_000)
    spool = _FullDiskSpool(tmp_path / "spool", _FullDisk(1))
    options = _options(tmp_path, spool=spool, chunk_articles=10_000)
    state = ServerState.of(server_configs([news_server.url()], 1)[0])
    covered = 0
    failing: list[str] = []
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered
        if prefetcher._landing.failing is not None:
            failing.append(prefetcher._landing.failing)
        # The follower plans the live head above the plan as well: not counted.
        if isinstance(event, Landed) and event.job.last <= 20_000:
            covered += event.job.last - event.job.first + 1
            if covered == 20_000:
                done.set()

    prefetcher = Prefetcher(pool, options, [state], observe)
    await _run_until(prefetcher, done)

    chunks = [c for c in _read_spool(pool, group_id) if c.last <= 20_000]
    _assert_exactly_once(chunks, 1, 20_000)
    _assert_posted(news_server, _lines(spool, chunks), 1, 20_000)
    assert "No space left" in (state.last_error or "")
    assert failing  # the health report said "writes failing" meanwhile
    assert "No space left" in failing[0]
    assert prefetcher._landing.failing is None  # and no more once a chunk landed


# PostgreSQL refusing the spool index's rows as it does when its disk is full: a real
# refusal of the real server, on demand.
_REFUSE_ROWS = """
    CREATE FUNCTION refuse_spool_rows() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'could not extend file: No space left on device'
            USING ERRCODE = 'disk_full';
    END $$;
    CREATE TRIGGER refuse_spool_rows BEFORE INSERT ON spool_chunks
        FOR EACH ROW EXECUTE FUNCTION refuse_spool_rows();
"""
_TAKE_ROWS = "DROP TRIGGER refuse_spool_rows ON spool_chunks"


@pytest.mark.trio
async def test_while_the_database_refuses_chunks_rows_the_connection_pauses_and_says_so_once(
    news_server: NewsServer,
    pool: ConnectionPool,
    tmp_path: Path,
    any_spool: TestSpool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """PostgreSQL refuses every chunk's index row after the chunk is in the spool (its
    disk full). A chunk that did not land is listed again; the connection must pause
    before it reads another (the retry policy's growing pause, as while the spool
    store refuses chunks), not ask the provider for the same overview lines again and
    again at full speed; the health report says "writes failing" with the database's
    reason; the log says it once for the run of refusals, not once per chunk, and
    says when chunks land again."""
    caplog.set_level(logging.INFO, "usenet_indexer.prefetch.landing")
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 16_000, 16_000)
    with pool.connection() as conn:
        conn.execute(_REFUSE_ROWS)
    # Capped low: each chunk refused makes the next pause longer.
    retry = RetryPolicy(base_seconds=0.5, cap_seconds=2.0)
    options = _options(
        tmp_path, spool=any_spool.store, slice_articles=2_000, chunk_articles=4_000,
        retry=retry, follow=FollowOptions(margin_articles=10**9), probe=ProbeOptions(share=0),
    )  # fmt: skip
    refused: dict[tuple[int, int], list[float]] = {}
    health: list[tuple[State, str]] = []
    thrice = trio.Event()
    covered = 0
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered
        if isinstance(event, NotLanded):
            times = refused.setdefault(event.job.key, [])
            times.append(trio.current_time())
            (spool,) = [o for o in prefetcher._health() if o.component == "spool"]
            health.append((spool.state, spool.detail))
            if len(times) == 3:
                thrice.set()
        elif isinstance(event, Landed):
            covered += event.job.last - event.job.first + 1
            if covered == 16_000:
                done.set()

    state = ServerState.of(server_configs([news_server.url()], 1)[0])
    prefetcher = Prefetcher(pool, options, [state], observe)
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(prefetcher.run)
            await thrice.wait()
            with pool.connection() as conn:
                conn.execute(_TAKE_ROWS)
            await done.wait()
            nursery.cancel_scope.cancel()

    # A chunk is refused again only after a pause (the real clock: INN2 and PostgreSQL
    # are waited on, so an autojump clock would jump during each wait).
    gaps = [later - before for times in refused.values() for before, later in pairwise(times)]
    assert len(gaps) >= 2
    assert min(gaps) >= retry.base_seconds, sorted(gaps)
    assert health[0][0] is State.WRITES_FAILING
    assert "No space left on device" in health[0][1]
    assert prefetcher._landing.failing is None  # and no more once a chunk landed
    chunks = _read_spool(pool, group_id)
    _assert_exactly_once(chunks, 1, 16_000)
    _assert_posted(news_server, _lines(any_spool.store, chunks), 1, 16_000)
    said = [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == "usenet_indexer.prefetch.landing" and r.levelno >= logging.INFO
    ]
    told = [m for level, m in said if level >= logging.WARNING]
    assert len(told) == 1, told
    assert "No space left on device" in told[0]
    assert sum("land again" in m for _, m in said) == 1, said


@pytest.mark.trio
async def test_a_gap_recorded_already_is_said_once(
    pool: ConnectionPool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A gap (a chunk the server has no article of) that another writer, or an earlier
    try, recorded already: its row is not added again, and the log says the gap once,
    where it was recorded, not at every landing of it."""
    caplog.set_level(logging.DEBUG, "usenet_indexer.prefetch.landing")
    group = "alt.binaries.uidx.gaps"
    group_id = GroupStore(pool).add(group)
    spool = SpoolIndex(pool)
    state = ServerState.of(server_configs(["nntp://news.invalid"], 1)[0])
    job = ChunkJob(group_id, group, 1, 100)
    with trio.fail_after(DEADLINE_SECONDS):
        # Three writers: two prefetchers, one of them landing it again.
        for _ in range(3):
            work = SharedWork(spool, _options(tmp_path), servers=1)
            await Landing(spool, work).land(job, state, None)
    said = [
        r.getMessage()
        for r in caplog.records
        if r.name == "usenet_indexer.prefetch.landing" and r.levelno >= logging.INFO
    ]
    assert said == [f"{group} 1-100: no articles on the server (a gap)"]
    assert caplog.text.count("a gap recorded already") == 2  # with -v
    assert _read_spool(pool, group_id) == [SpoolChunk(1, 100, int(Codec.NONE), None, 0)]


@pytest.mark.trio
async def test_a_chunk_indexed_already_is_said_once(
    pool: ConnectionPool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A chunk that another writer (or an earlier try) indexed already: this landing's
    row is not added, and its "N lines, X MB" is not said again (at debug level only,
    saying it was there), nor warned about: the chunk is whole either way."""
    caplog.set_level(logging.DEBUG, "usenet_indexer.prefetch.landing")
    group = "alt.binaries.uidx.twice"
    group_id = GroupStore(pool).add(group)
    spool = SpoolIndex(pool)
    store = FolderSpool(tmp_path / "spool")
    state = ServerState.of(server_configs(["nntp://news.invalid"], 1)[0])
    job = ChunkJob(group_id, group, 1, 100)
    text = b"".join(b"%d\tsubject %d\n" % (n, n) for n in range(1, 101))
    with trio.fail_after(DEADLINE_SECONDS):
        # Three writers: two prefetchers, one of them landing it again.
        for _ in range(3):
            writer = store.open_chunk(group, 1, 100)
            writer.write([text], 100)
            work = SharedWork(spool, _options(tmp_path), servers=1)
            await Landing(spool, work).land(job, state, writer)
    said = [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == "usenet_indexer.prefetch.landing" and r.levelno >= logging.INFO
    ]
    assert len(said) == 1, said
    assert said[0][0] == logging.INFO
    assert said[0][1].startswith(f"{group} 1-100: 100 lines, ")
    assert caplog.text.count("indexed already") == 2  # with -v
    [chunk] = _read_spool(pool, group_id)
    assert (chunk.first, chunk.last, chunk.lines) == (1, 100, 100)


OVERLONG_GROUP = "alt.binaries.uidx.overlong"


@pytest.mark.trio
async def test_an_overview_line_over_the_line_cap_is_skipped_and_its_chunk_lands(
    pool: ConnectionPool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A spam article's huge Subject, on one line or folded (INN2 keeps it unfolded
    # in its overview): one such line made the whole OVER reply a protocol error,
    # and the chunk was asked for again, for ever.
    count = 1_000
    posted = list(generate_articles(OVERLONG_GROUP, count, 3))
    huge = "spam " + "x" * (DEFAULT_MAX_LINE_BYTES + 10)
    folded = "spam " + "\r\n ".join(["y" * 900] * 80)  # 72 KB unfolded
    posted[499] = attrs.evolve(posted[499], subject=huge)
    posted[749] = attrs.evolve(posted[749], subject=folded)
    group_id = GroupStore(pool).add(OVERLONG_GROUP)
    RangeStore(pool).plan(group_id, 1, count, count)
    options = _options(
        tmp_path, slice_articles=250, chunk_articles=count, follow=FollowOptions(poll_seconds=3600)
    )
    landed: list[Landed] = []
    done = trio.Event()

    def observe(event: object) -> None:
        if isinstance(event, Landed) and event.job.last <= count:
            landed.append(event)
            done.set()
        elif state.errors >= 3:
            done.set()  # asked again and again: it will not land

    with own_news_server(OVERLONG_GROUP, "uidx-overlong-") as server:
        server.post_articles(OVERLONG_GROUP, posted)
        state = ServerState.of(server_configs([server.url()], 1)[0])
        with caplog.at_level(logging.WARNING, "usenet_indexer.nntp.client"):
            await _run_until(Prefetcher(pool, options, [state], observe), done)
    assert landed, f"not landed after {state.errors} errors: {state.last_error}"
    assert landed[0].lines == count - 2
    (chunk,) = _read_spool(pool, group_id)
    lines = _lines(options.spool, [chunk])
    assert [int(line.split(b"\t", 1)[0]) for line in lines] == [
        n for n in range(1, count + 1) if n not in (500, 750)
    ]
    for line in lines:
        fields = line.split(b"\t")
        assert fields[4].decode() == posted[int(fields[0]) - 1].message_id
    server_name = f"{server.host}:{server.port}"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        f"{server_name} {OVERLONG_GROUP} OVER {first}-{first + 249}: 1 overview line(s)"
        f" over {DEFAULT_MAX_LINE_BYTES} bytes skipped"
        for first in (251, 501)
    ]
