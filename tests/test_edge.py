"""The edge worker: against a real coordinator (hypercorn, PostgreSQL) and, for faults, a fake.

Every test has a deadline. Nothing waits on a real sleep: a test waits for
what the worker reports through its observer (a keepalive while it waits for
the spool, a stored batch), and streams poll and keep alive every few
milliseconds.
"""

from __future__ import annotations

import errno
import gzip
import itertools
import logging
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import httpx
import psycopg
import pytest
import trio
import trio.testing
import trustme
from hypothesis import given, settings
from hypothesis import strategies as st
from nntp_fixtures import NewsServer
from psycopg_pool import ConnectionPool
from s3_fixtures import TestSpool, land_chunk, s3_fields
from test_http_node import GatedBatches, _Logged

from usenet_indexer.commands import edge as edge_command
from usenet_indexer.commands.index import index_files
from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.coordinator.catalog_builder import CatalogDue
from usenet_indexer.coordinator.http import node as nodeapi
from usenet_indexer.coordinator.http.node import REFUSALS_TO_PARK
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.coordinator.stream import StreamTiming
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.core.rules import DEFAULT_RULES
from usenet_indexer.edge import worker
from usenet_indexer.edge.chunks import (
    INFLATE_BLOCK_BYTES,
    ChunkError,
    Piece,
    inflate,
    line_parts,
    lines_within,
    within,
)
from usenet_indexer.edge.client import (
    NODE_API_PATH,
    EdgeLease,
    NodeApiError,
    api_base,
    open_client,
    tls_verify,
    transport_problem,
)
from usenet_indexer.edge.events import EdgeEvent, EventKind
from usenet_indexer.edge.options import EdgeOptions
from usenet_indexer.edge.range_runner import Outcome, RangeRunner
from usenet_indexer.edge.worker import EdgeTotals
from usenet_indexer.errors import ConfigError, RemoteProtocolError
from usenet_indexer.prefetch.daemon import Prefetcher
from usenet_indexer.prefetch.events import Landed
from usenet_indexer.prefetch.follower import FollowOptions
from usenet_indexer.prefetch.options import PrefetchOptions
from usenet_indexer.prefetch.prober import ProbeOptions
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.spool.plan import ChunkJob
from usenet_indexer.spool.store import FolderSpool, SpoolStore, open_spool
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.ranges import Look, RangeStore
from usenet_indexer.store.spool import SpoolChunk, SpoolIndex
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.testing.logcheck import record_problems
from usenet_indexer.testing.objectstore import ObjectStore
from usenet_indexer.wire.batchwire import decode_batch, decode_body
from usenet_indexer.wire.frames import Codec, Frame, encode_frame
from usenet_indexer.wire.inflate import (
    InflateFailed,
    Problem,
    capped_inflate,
    capped_inflate_blocks,
)

# A stream the edge stops reading before its end (a stop, a bad chunk) leaves
# httpx's and httpcore's chain of async generators half-done; closing the
# response closes the connection, and trio finalizes the generators with
# this warning when they are collected. A stream read to its end leaves none.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'http(x|core)\.[\w.]+' was garbage collected:ResourceWarning"
)

# Far above what each test needs (a few seconds for 30k articles).
DEADLINE_SECONDS = 60
# Streams in tests poll and keep alive every few milliseconds.
FAST_STREAM = StreamTiming(keepalive_seconds=0.01, poll_seconds=0.005)
# Retries in tests: the same schedule, in milliseconds.
FAST_RETRY = RetryPolicy(base_seconds=0.001, cap_seconds=0.004)
LINES_PER_CHUNK = 2_000
TTL = 900.0
# An edge told to stop while it waits for a lease is gone within this (a user-visible
# bound: the supervisor's SIGKILL comes at 30 s, a lease call waits up to 30 s).
STOP_SECONDS = 2.0


# --- the data: generated lines, cut into spool chunks as a prefetcher would -----


@attrs.frozen
class Chunk:
    """One spool chunk of the test: articles first..last and their lines."""

    first: int
    last: int
    lines: tuple[bytes, ...]


@attrs.frozen
class Data:
    """Generated lines of one group, with each line's article number."""

    group: str
    lines: tuple[bytes, ...]
    numbers: tuple[int, ...]  # a line without a number takes the one before it

    @property
    def low(self) -> int:
        return self.numbers[0]

    @property
    def high(self) -> int:
        return self.numbers[-1]

    def lines_in(self, first: int, last: int) -> list[bytes]:
        return [
            line for line, n in zip(self.lines, self.numbers, strict=True) if first <= n <= last
        ]

    def chunks(self, first: int, last: int, per_chunk: int = LINES_PER_CHUNK) -> list[Chunk]:
        """The range first..last as spool chunks of `per_chunk` lines, covering it whole."""
        pairs = [
            (line, n)
            for line, n in zip(self.lines, self.numbers, strict=True)
            if first <= n <= last
        ]
        slices = [pairs[i : i + per_chunk] for i in range(0, len(pairs), per_chunk)]
        chunks = []
        start = first
        for i, part in enumerate(slices):
            end = last if i == len(slices) - 1 else slices[i + 1][0][1] - 1
            chunks.append(Chunk(start, end, tuple(line for line, _ in part)))
            start = end + 1
        return chunks


def generated(articles: int, seed: int) -> Data:
    result = generate(GeneratorConfig(articles=articles, seed=seed))
    numbers: list[int] = []
    for line in result.lines:
        head = line.split(b"\t", 1)[0]
        numbers.append(int(head) if head.isdigit() else numbers[-1] if numbers else 0)
    assert numbers == sorted(numbers)
    return Data(result.truth.group, result.lines, tuple(numbers))


def offline_index(tmp_path: Path, lines: list[bytes]) -> list[CatalogRelease]:
    dump = tmp_path / "overview.txt"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    merger, _ = index_files([dump], batch_articles=10**9)
    return list(merger.releases())


def assert_same_catalog(got: list[CatalogRelease], expected: list[CatalogRelease]) -> None:
    """As tests/test_store.py compares: chunk counts and names depend on batch cuts."""
    exported = {r.key: r for r in got}
    wanted = {r.key: r for r in expected}
    assert exported.keys() == wanted.keys()
    for key, release in wanted.items():
        assert attrs.evolve(exported[key], chunks=0, name="") == attrs.evolve(
            release, chunks=0, name=""
        ), release.name


# The ASGI callables as httpx.ASGITransport types them.
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


# --- fixtures -----------------------------------------------------------------------


# settings, pool and stores: tests/coordinator_fixtures.py


@attrs.frozen
class Coordinator:
    """A real coordinator on loopback, and what the tests do to its spool and ranges."""

    url: str
    stores: Stores
    pool: ConnectionPool
    spool: SpoolStore

    def add_group(self, name: str) -> int:
        return GroupStore(self.pool).add(name)

    def plan(self, group_id: int, first: int, last: int) -> int:
        (range_id,) = self.stores.ranges.plan(group_id, first, last, last - first + 1)
        return range_id

    def write(self, group_id: int, chunk: Chunk) -> None:
        """A chunk in the spool and its index row, as the prefetcher writes them."""
        land_chunk(
            self.spool,
            self.stores.spool,
            f"g{group_id}",
            group_id,
            chunk.lines,
            chunk.first,
            chunk.last,
        )

    def row(self, sql: str) -> tuple[Any, ...]:
        with self.pool.connection() as conn:
            found = conn.execute(sql).fetchone()
        assert found is not None
        return tuple(found)

    def options(self, token: str, **changes: Any) -> EdgeOptions:
        base = EdgeOptions(
            coordinator_url=self.url,
            node_token=token,
            batch_articles=5_000,
            idle_seconds=0.01,
            retry=FAST_RETRY,
        )
        return attrs.evolve(base, **changes)


@pytest.fixture
async def coordinator(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    caplog: pytest.LogCaptureFixture,
) -> AsyncIterator[Coordinator]:
    """A coordinator whose log must hold no ERROR line and no 5xx answer when the test ends."""
    async with _serving(nursery, settings, stores, pool, caplog) as served:
        yield served


@pytest.fixture
async def any_coordinator(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    caplog: pytest.LogCaptureFixture,
    any_spool: TestSpool,
) -> AsyncIterator[Coordinator]:
    """`coordinator` on a folder spool, then on an S3 one (its stream hands the edge
    presigned links there)."""
    served_settings = any_spool.settings(settings)
    async with _serving(nursery, served_settings, stores, pool, caplog) as served:
        yield served


@attrs.define(eq=False)
class GatedRanges(RangeStore):
    """The coordinator's range store, telling the test when a lease call has looked for
    a range and when a range was given back; with a `gate`, a lease waits for it first
    (in its worker thread: the coordinator's call is in its database hop meanwhile)."""

    asked: trio.Event = attrs.field(factory=trio.Event)
    looked: trio.Event = attrs.field(factory=trio.Event)
    released: trio.Event = attrs.field(factory=trio.Event)
    gate: trio.Event | None = None

    def look(self, node_id: int, ttl_seconds: float, stops: int | None) -> Look:
        trio.from_thread.run_sync(self.asked.set)
        if self.gate is not None:
            trio.from_thread.run(self.gate.wait)
        found = super().look(node_id, ttl_seconds, stops)
        trio.from_thread.run_sync(self.looked.set)
        return found

    def release(self, node_id: int, range_id: int, epoch: int, *, stopping: bool = False) -> bool:
        given = super().release(node_id, range_id, epoch, stopping=stopping)
        trio.from_thread.run_sync(self.released.set)
        return given


@pytest.fixture
def gated_ranges(pool: ConnectionPool) -> GatedRanges:
    return GatedRanges(pool)


@pytest.fixture
async def gated_coordinator(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    caplog: pytest.LogCaptureFixture,
    gated_ranges: GatedRanges,
) -> AsyncIterator[Coordinator]:
    """`coordinator`, its range store `gated_ranges`."""
    gated = attrs.evolve(stores, ranges=gated_ranges)
    async with _serving(nursery, settings, gated, pool, caplog) as served:
        yield served


@asynccontextmanager
async def _serving(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    caplog: pytest.LogCaptureFixture,
    *,
    spool: SpoolStore | None = None,
) -> AsyncIterator[Coordinator]:
    # `spool`: the coordinator's own view of the spool (a fake's), else the settings'.
    options = attrs.evolve(nodeapi.ApiOptions.from_settings(settings), stream=FAST_STREAM)
    if spool is not None:
        options = attrs.evolve(options, spool=spool)
    with trio.fail_after(DEADLINE_SECONDS):
        host, port = await nursery.start(partial(serve, settings, stores, options=options))
    # The coordinator's URL without the API path: the edge adds it.
    yield Coordinator(f"http://{host}:{port}", stores, pool, open_spool(settings))
    found = record_problems(caplog.get_records("call"))
    assert not found, found.describe()


@attrs.define
class Watcher:
    """An observer that records events and wakes a test at the one it waits for."""

    events: list[EdgeEvent] = attrs.field(factory=list)
    _waits: list[tuple[Callable[[EdgeEvent], bool], trio.Event]] = attrs.field(factory=list)

    def __call__(self, event: EdgeEvent) -> None:
        self.events.append(event)
        for wanted, wake in self._waits:
            if wanted(event):
                wake.set()

    def when(self, wanted: Callable[[EdgeEvent], bool]) -> trio.Event:
        wake = trio.Event()
        self._waits.append((wanted, wake))
        return wake

    def kinds(self, kind: EventKind) -> list[EdgeEvent]:
        return [e for e in self.events if e.kind is kind]


async def run_edge(
    settings: Settings,
    options: EdgeOptions,
    results: list[EdgeTotals],
    *,
    stop: trio.Event | None = None,
    observe: Watcher | None = None,
) -> None:
    results.append(
        await worker.run(settings, options=options, stop=stop, observe=observe or Watcher())
    )


# --- end to end ---------------------------------------------------------------------


@pytest.mark.trio
async def test_two_ranges_end_in_the_catalog_an_offline_index_makes(
    any_coordinator: Coordinator,
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    coordinator = any_coordinator
    data = generated(30_000, seed=5)
    group_id = coordinator.add_group(data.group)
    middle = (data.low + data.high) // 2
    spans = [(data.low, middle), (middle + 1, data.high)]
    # The second range's chunks inflate to over INFLATE_BLOCK_BYTES: lines are
    # cut between blocks, and fed whole all the same.
    for (first, last), per_chunk in zip(spans, (LINES_PER_CHUNK, 6_000), strict=True):
        coordinator.plan(group_id, first, last)
        for chunk in data.chunks(first, last, per_chunk):
            coordinator.write(group_id, chunk)
    assert sum(map(len, data.lines_in(middle + 1, middle + 6_000))) > INFLATE_BLOCK_BYTES
    token = coordinator.stores.nodes.create("edge-1")
    watcher = Watcher()

    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=coordinator.options(token, ranges=2), observe=watcher
        )

    assert totals == EdgeTotals(finished=2)
    assert coordinator.row("SELECT count(*) FROM ranges WHERE state <> 'done'") == (0,)
    batches = coordinator.row("SELECT count(*) FROM batches")[0]
    assert batches == len(watcher.kinds(EventKind.STORED))
    assert batches >= 6  # ~15k articles per range in batches of 5k
    expected = offline_index(tmp_path, list(data.lines))
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)
    # One line per range, with its figures; never the token.
    lines = [r.getMessage() for r in caplog.records if r.name == "usenet_indexer.edge.range_runner"]
    assert len(lines) == 2
    for line in lines:
        assert ": finished;" in line
        for figure in ("headers in", "/s)", "release chunks", "probe candidates", "posted", "MB"):
            assert figure in line
    assert token not in caplog.text


@pytest.mark.trio
async def test_small_batches_end_in_the_catalog_an_offline_index_makes(
    coordinator: Coordinator, settings: Settings, tmp_path: Path
) -> None:
    """Batch cuts do not change the catalog. Chunks of 1,000 lines and batches of 1,020
    articles (one after every second chunk) cut seed 8's upload posted twice where its
    first post's par2 set comes in a batch with its repost's .nfo: the catalog held the
    two posts' par2 sets swapped, the offline index (one batch) did not."""
    data = generated(10_000, seed=8)
    group_id = coordinator.add_group(data.group)
    coordinator.plan(group_id, data.low, data.high)
    for chunk in data.chunks(data.low, data.high, per_chunk=1_000):
        coordinator.write(group_id, chunk)
    token = coordinator.stores.nodes.create("edge-1")

    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=coordinator.options(token, ranges=1, batch_articles=1_020)
        )

    assert totals == EdgeTotals(finished=1)
    assert coordinator.row("SELECT count(*) FROM batches")[0] > 3
    expected = offline_index(tmp_path, list(data.lines))
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)


@pytest.mark.trio
async def test_a_chunk_gone_from_the_spool_is_waited_for_not_counted_and_the_range_finishes(
    any_coordinator: Coordinator,
    any_spool: TestSpool,
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A chunk's bytes lost from the spool (a folder's file, an S3 object: a disk
    lost, a database restored without its spool) while its index row says it is
    there. The spool is a cache of the servers: the row is forgotten (the folder's by
    the coordinator's own read, the S3 one's once the store confirms the edge's 404),
    nothing is counted against the range, and the range's stream waits for the chunk
    as for any chunk not spooled yet; once it lands again (here written by the test,
    as the prefetcher would: see test_a_lost_chunk_is_fetched_again_by_the_prefetcher)
    the range finishes with the whole catalog.

    This test's expectation changed: the loss was counted at every lease and the
    third parked the range as failed, and `uidx ranges retry` only parked it again,
    since nothing ever fetched the chunk again."""
    coordinator = any_coordinator
    data = generated(6_000, seed=13)
    group_id = coordinator.add_group(data.group)
    range_id = coordinator.plan(group_id, data.low, data.high)
    chunks = data.chunks(data.low, data.high, per_chunk=2_000)
    assert len(chunks) == 3
    for chunk in chunks:
        coordinator.write(group_id, chunk)
    [lost] = coordinator.stores.spool.chunks_from(group_id, chunks[1].first, chunks[1].last, 1)
    assert lost.path is not None
    coordinator.spool.delete([lost.path])
    token = coordinator.stores.nodes.create("edge-1")
    watcher = Watcher()
    waiting = watcher.when(lambda e: e.kind is EventKind.KEEPALIVE)
    results: list[EdgeTotals] = []

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            # Until the first 204 once the range is done.
            options = coordinator.options(token, ranges=10)
            nursery.start_soon(partial(run_edge, settings, options, results, observe=watcher))
            await waiting.wait()
            # Waiting for the chunk: its row forgotten, nothing counted.
            spooled = coordinator.stores.spool.chunks_from(group_id, data.low, data.high, 10)
            assert [c.first for c in spooled] == [chunks[0].first, chunks[2].first]
            state, refusals = coordinator.row(
                f"SELECT state, refusals FROM ranges WHERE id = {range_id}"
            )
            assert (state, refusals) == ("leased", 0)
            await trio.to_thread.run_sync(coordinator.write, group_id, chunks[1])

    # The folder's stream waited in its lease; the S3 spool's edge gave the range
    # back once with the 404, uncounted, and waited in the next.
    given_back = 1 if any_spool.kind == "s3" else 0
    assert results == [EdgeTotals(finished=1, given_back=given_back)]
    state, refusals, refusal = coordinator.row(
        f"SELECT state, refusals, refusal FROM ranges WHERE id = {range_id}"
    )
    assert (state, refusals, refusal) == ("done", 0, None)
    expected = offline_index(tmp_path, list(data.lines))
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"spool chunk {lost.first}..{lost.last} is gone from" in line
        and "its index row is forgotten, the prefetcher fetches it again" in line
        for line in said
    ), said


@pytest.mark.trio
async def test_a_whole_spool_lost_is_listed_for_fetching_again_at_once_not_chunk_by_chunk(
    any_coordinator: Coordinator,
    any_spool: TestSpool,
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The whole spool lost under a range of 8 chunks (the folder deleted, the bucket
    emptied: a database restored without its spool), the index rows still there. The
    first chunk found gone (the folder stream's read, the S3 store's HEAD after the
    edge's 404) has the range's next chunks asked of the store in one go, and those
    gone are forgotten with it: the prefetcher's next look at the work list finds
    the range's every chunk missing and fetches them again at once.

    Here the test is the prefetcher: each time the stream waits for a chunk it polls
    once (writes every chunk of the range the index misses, as one read of the work
    list would list them). One poll fills the range; before, each chunk was found
    gone only once the stream reached it, and a range took 8 polls, one
    prefetch_poll_seconds (5 s) or more each."""
    caplog.set_level(logging.INFO)
    coordinator = any_coordinator
    data = generated(8_000, seed=17)
    group_id = coordinator.add_group(data.group)
    range_id = coordinator.plan(group_id, data.low, data.high)
    chunks = data.chunks(data.low, data.high, per_chunk=1_000)
    assert len(chunks) == 8
    for chunk in chunks:
        coordinator.write(group_id, chunk)
    any_spool.lose_all()
    token = coordinator.stores.nodes.create("edge-1")
    watcher = Watcher()
    results: list[EdgeTotals] = []
    polls = 0

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:

            async def edge() -> None:
                # Until the first 204 once the range is done.
                options = coordinator.options(token, ranges=10)
                await run_edge(settings, options, results, observe=watcher)
                nursery.cancel_scope.cancel()

            nursery.start_soon(edge)
            while not results:  # (the edge's end cancels the wait)
                await watcher.when(lambda e: e.kind is EventKind.KEEPALIVE).wait()
                spooled = coordinator.stores.spool.chunks_from(group_id, data.low, data.high, 99)
                indexed = {c.first for c in spooled}
                missing = [chunk for chunk in chunks if chunk.first not in indexed]
                if missing:  # (a keepalive as the last poll's chunks land finds none)
                    polls += 1
                    for chunk in missing:
                        await trio.to_thread.run_sync(coordinator.write, group_id, chunk)

    assert polls == 1
    given_back = 1 if any_spool.kind == "s3" else 0
    assert results == [EdgeTotals(finished=1, given_back=given_back)]
    state, refusals = coordinator.row(f"SELECT state, refusals FROM ranges WHERE id = {range_id}")
    assert (state, refusals) == ("done", 0)
    expected = offline_index(tmp_path, list(data.lines))
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("7 more chunks of the range are gone too" in line for line in said), said


@pytest.mark.trio
async def test_a_lost_chunk_is_fetched_again_by_the_prefetcher(
    any_coordinator: Coordinator,
    any_spool: TestSpool,
    news_server: NewsServer,
    settings: Settings,
    tmp_path: Path,
) -> None:
    """The whole loop with real parts: a prefetcher fills a range's spool from INN2;
    one chunk's bytes are lost (a folder's file, an S3 object in SeaweedFS); an edge
    indexes the range. The range is not parked: the coordinator forgets the chunk's
    row (its own read of the folder's file, or the store's HEAD after the edge's
    404), the prefetcher fetches the chunk again, the edge's stream waits for it, and
    the range finishes with the catalog of the lines first fetched."""
    coordinator = any_coordinator
    group_id = coordinator.add_group(news_server.group)
    range_id = coordinator.plan(group_id, 1, 12_000)
    landed: list[ChunkJob] = []
    filled = trio.Event()
    again = trio.Event()

    def observe(event: object) -> None:
        if isinstance(event, Landed) and not event.gap:
            landed.append(event.job)
            if sum(job.last - job.first + 1 for job in landed) == 12_000:
                filled.set()
            if len(landed) > 3:
                again.set()

    options = PrefetchOptions(
        coordinator.spool,
        slice_articles=2_000,
        chunk_articles=4_000,
        poll_seconds=0.05,
        retry=RetryPolicy(base_seconds=0.05),
        # Only the range planned here: no live head above it, no probes.
        follow=FollowOptions(margin_articles=10**9),
        probe=ProbeOptions(share=0),
    )
    server = ServerState.of(server_configs([news_server.url()], 2)[0])
    prefetcher = Prefetcher(coordinator.pool, options, [server], observe)
    token = coordinator.stores.nodes.create("edge-1")
    with trio.fail_after(DEADLINE_SECONDS * 2):
        async with trio.open_nursery() as nursery:
            await nursery.start(prefetcher.run)
            await filled.wait()
            spooled = coordinator.stores.spool.chunks_from(group_id, 1, 12_000, 10)
            assert [(c.first, c.last) for c in spooled] == [
                (1, 4_000),
                (4_001, 8_000),
                (8_001, 12_000),
            ]
            lines = [
                line
                for chunk in spooled
                for line in zlib.decompress(coordinator.spool.read(str(chunk.path))).splitlines()
            ]
            lost = spooled[1]
            assert lost.path is not None
            coordinator.spool.delete([lost.path])

            totals = await worker.run(settings, options=coordinator.options(token, ranges=10))
            await again.wait()
            nursery.cancel_scope.cancel()

    # The chunk lost, and only it, was fetched again.
    assert sorted((job.first, job.last) for job in landed) == [
        (1, 4_000), (4_001, 8_000), (4_001, 8_000), (8_001, 12_000)
    ]  # fmt: skip
    given_back = 1 if any_spool.kind == "s3" else 0
    assert totals == EdgeTotals(finished=1, given_back=given_back)
    state, refusals, refusal = coordinator.row(
        f"SELECT state, refusals, refusal FROM ranges WHERE id = {range_id}"
    )
    assert (state, refusals, refusal) == ("done", 0, None)
    assert coordinator.stores.ranges.parked() == []
    expected = offline_index(tmp_path, lines)
    assert len(expected) > 10
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)


@pytest.mark.trio
async def test_a_chunk_whose_link_the_store_refuses_parks_its_range_with_the_reason(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    caplog: pytest.LogCaptureFixture,
    object_store: ObjectStore,
    s3_prefix: str,
) -> None:
    """The store answers 403 to the link of a range's first chunk, at every lease
    (here the coordinator presigns with a secret key the store does not know; keys
    that may not GET, or a clock far off, do the same). Each give-back names the
    chunk and the store's answer and is counted against the range, and the third in
    a row parks it with that reason, as a chunk gone (404) does: it was given back
    and leased again every idle_seconds for ever, and `uidx status` said nothing."""
    s3 = s3_fields(object_store, s3_prefix)
    spool_settings = attrs.evolve(settings, **s3)  # type: ignore[arg-type]
    signing_wrong = attrs.evolve(spool_settings, spool_secret_access_key="not-the-key")
    data = generated(4_000, seed=14)
    async with _serving(nursery, signing_wrong, stores, pool, caplog) as served:
        # The chunks written with the right key, as the prefetcher does.
        coordinator = attrs.evolve(served, spool=open_spool(spool_settings))
        group_id = coordinator.add_group(data.group)
        range_id = coordinator.plan(group_id, data.low, data.high)
        chunks = data.chunks(data.low, data.high)
        for chunk in chunks:
            coordinator.write(group_id, chunk)
        token = coordinator.stores.nodes.create("edge-1")

        with trio.fail_after(DEADLINE_SECONDS):
            # Until the first 204: three leases, then nothing left to lease.
            totals = await worker.run(settings, options=coordinator.options(token, ranges=10))

        assert totals == EdgeTotals(given_back=REFUSALS_TO_PARK)
        state, resume, refusals, refusal = coordinator.row(
            f"SELECT state, resume, refusals, refusal FROM ranges WHERE id = {range_id}"
        )
        assert (state, resume, refusals) == ("failed", data.low, REFUSALS_TO_PARK)
        assert f"spool chunk {chunks[0].first}..{chunks[0].last} cannot be read" in refusal
        assert "HTTP 403: SignatureDoesNotMatch: The request signature" in refusal
        # What `uidx status`, the status page and /metrics show.
        (parked,) = coordinator.stores.ranges.parked()
        assert (parked.range_id, parked.reason) == (range_id, refusal)
        assert f"range {range_id} parked as failed after {REFUSALS_TO_PARK} refusals" in caplog.text
        assert coordinator.stores.ranges.retry([range_id]) == [range_id]


@attrs.define(eq=False)
class FaultyIndex(SpoolIndex):
    """A fake spool index, for faults no real one has (a bug of the coordinator's): a
    stream's look-up answers a chunk that ends before the article asked for
    (`behind`), or raises."""

    fault: str = "behind"

    def chunks_from(self, group_id: int, article: int, last: int, limit: int) -> list[SpoolChunk]:
        if self.fault == "raises":
            raise RuntimeError("a bug of the coordinator's")
        return [SpoolChunk(article - 10, article - 1, int(Codec.ZLIB), "g1/lost", 10)]


@pytest.mark.trio
@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("behind", "spool chunk 991..1000 does not hold article 1001"),
        ("raises", "the stream failed at article 1001: RuntimeError: a bug of the coordinator's"),
    ],
)
async def test_a_stream_that_ends_in_an_error_frame_every_time_parks_its_range(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    caplog: pytest.LogCaptureFixture,
    fault: str,
    said: str,
) -> None:
    """The coordinator's stream of a range ends at once in an ERROR frame, at every
    lease, for a reason of its own at the range's articles. Each is counted against
    the range, as a chunk it cannot read is, and the third in a row parks it with the
    reason; it was given back and leased again every idle_seconds for ever."""
    faulty = attrs.evolve(stores, spool=FaultyIndex(pool, fault=fault))
    async with _serving(nursery, settings, faulty, pool, caplog) as coordinator:
        group_id = coordinator.add_group("alt.binaries.faulty")
        range_id = coordinator.plan(group_id, 1_001, 2_000)
        token = coordinator.stores.nodes.create("edge-1")

        with trio.fail_after(DEADLINE_SECONDS):
            totals = await worker.run(settings, options=coordinator.options(token, ranges=10))

        assert totals == EdgeTotals(given_back=REFUSALS_TO_PARK)
        state, refusals, refusal = coordinator.row(
            f"SELECT state, refusals, refusal FROM ranges WHERE id = {range_id}"
        )
        assert (state, refusals, refusal) == ("failed", REFUSALS_TO_PARK, said)
        assert f"range {range_id} parked as failed after {REFUSALS_TO_PARK} refusals" in caplog.text
        # The coordinator logs each failure as an ERROR (the fixture would fail the
        # test on it): the lines are the fault, as wanted.
        errors = [r.getMessage() for r in caplog.get_records("call") if r.levelno >= logging.ERROR]
        assert len(errors) == REFUSALS_TO_PARK, errors
        caplog.clear()


@attrs.frozen
class OutOfDescriptors(FolderSpool):
    """A fake folder spool, for a fault of the coordinator's host rather than of a
    chunk: its first `failing` reads fail with EMFILE, as every open does in a
    coordinator whose edges' connections took its open-file limit (1,024 under
    systemd's default LimitNOFILE; each edge worker holds 2-4)."""

    failing: int = 0
    reads: Iterator[int] = attrs.field(factory=itertools.count, eq=False)

    def read(self, key: str) -> bytes:
        if next(self.reads) < self.failing:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(self.folder / key))
        return super().read(key)


@pytest.mark.trio
async def test_a_chunk_the_coordinator_has_no_descriptor_to_open_does_not_park_its_range(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    """A coordinator out of file descriptors (many edges connected) cannot open a range's
    chunk, lease after lease. That is the host's limit, not the range's: each stream
    ends in an ERROR frame that is not counted, as the database gone is not, and the
    range is done once descriptors are free again. It was counted as a chunk that
    cannot be read: 48 edge workers against a coordinator with 100 descriptors
    parked 49 of 51 healthy ranges as failed."""
    data = generated(4_000, seed=15)
    spool = OutOfDescriptors(settings.home / "spool", failing=REFUSALS_TO_PARK + 2)
    async with _serving(nursery, settings, stores, pool, caplog, spool=spool) as coordinator:
        group_id = coordinator.add_group(data.group)
        range_id = coordinator.plan(group_id, data.low, data.high)
        for chunk in data.chunks(data.low, data.high):
            coordinator.write(group_id, chunk)
        token = coordinator.stores.nodes.create("edge-1")

        with trio.fail_after(DEADLINE_SECONDS):
            totals = await worker.run(settings, options=coordinator.options(token, ranges=10))

        assert totals == EdgeTotals(finished=1, given_back=REFUSALS_TO_PARK + 2)
        state, refusals = coordinator.row(
            f"SELECT state, refusals FROM ranges WHERE id = {range_id}"
        )
        assert (state, refusals) == ("done", 0)
        assert "open-file limit" in caplog.text
    assert_same_catalog(
        CatalogBuild(coordinator.pool).export(), offline_index(tmp_path, list(data.lines))
    )


@pytest.mark.trio
async def test_edges_starting_at_once_on_a_fresh_group_get_no_5xx(
    coordinator: Coordinator, settings: Settings, tmp_path: Path
) -> None:
    """Four edges lease the four ranges of a new group and post their first batches at once.

    The first batches race to make the group's partition; none may be
    answered 5xx (the coordinator fixture fails the test on a 5xx or ERROR
    line in its log), and the catalog is what an offline index makes.
    """
    data = generated(24_000, seed=12)
    group_id = coordinator.add_group(data.group)
    edges = 4
    bounds = [data.low + (data.high - data.low + 1) * i // edges for i in range(edges + 1)]
    for first, end in itertools.pairwise(bounds):
        coordinator.plan(group_id, first, end - 1)
        for chunk in data.chunks(first, end - 1):
            coordinator.write(group_id, chunk)
    results: list[EdgeTotals] = []
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            for n in range(edges):
                token = coordinator.stores.nodes.create(f"edge-{n}")
                options = coordinator.options(token, ranges=1, batch_articles=2_000)
                nursery.start_soon(run_edge, settings, options, results)
    assert results == [EdgeTotals(finished=1)] * edges
    assert coordinator.row("SELECT count(DISTINCT node_id) FROM batches") == (edges,)
    expected = offline_index(tmp_path, list(data.lines))
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)


@pytest.mark.trio
async def test_the_edge_waits_through_keepalives_for_a_chunk_that_lands_late(
    coordinator: Coordinator, settings: Settings, tmp_path: Path
) -> None:
    data = generated(8_000, seed=6)
    group_id = coordinator.add_group(data.group)
    coordinator.plan(group_id, data.low, data.high)
    chunks = data.chunks(data.low, data.high)
    for chunk in chunks[:-1]:
        coordinator.write(group_id, chunk)
    token = coordinator.stores.nodes.create("edge-1")
    watcher = Watcher()
    waiting = watcher.when(lambda e: e.kind is EventKind.KEEPALIVE)
    results: list[EdgeTotals] = []

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            options = coordinator.options(token, ranges=1)
            nursery.start_soon(partial(run_edge, settings, options, results, observe=watcher))
            await waiting.wait()
            assert not watcher.kinds(EventKind.RANGE_DONE)
            await trio.to_thread.run_sync(coordinator.write, group_id, chunks[-1])

    assert results == [EdgeTotals(finished=1)]
    expected = offline_index(tmp_path, list(data.lines))
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)


@pytest.mark.trio
async def test_a_lost_lease_stops_the_range_and_stores_nothing_more(
    coordinator: Coordinator, settings: Settings, pg_url: str
) -> None:
    data = generated(8_000, seed=7)
    group_id = coordinator.add_group(data.group)
    range_id = coordinator.plan(group_id, data.low, data.high)
    chunks = data.chunks(data.low, data.high)
    for chunk in chunks[:2]:
        coordinator.write(group_id, chunk)
    token = coordinator.stores.nodes.create("edge-1")
    thief = coordinator.stores.nodes.create("edge-2")
    thief_id = coordinator.stores.nodes.authenticate(thief)
    watcher = Watcher()
    waiting = watcher.when(lambda e: e.kind is EventKind.KEEPALIVE)
    results: list[EdgeTotals] = []

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            # One batch for the whole range: the indexed chunks wait to be posted.
            options = coordinator.options(token, ranges=1, batch_articles=10**9)
            nursery.start_soon(partial(run_edge, settings, options, results, observe=watcher))
            await waiting.wait()
            # The edge's lease runs out; another node takes the range over.
            with psycopg.connect(pg_url) as conn:
                conn.execute("UPDATE ranges SET deadline = now() - interval '1 second'")
            assert thief_id is not None
            takeover = coordinator.stores.ranges.lease(thief_id, TTL)
            assert takeover is not None
            assert (takeover.range_id, takeover.epoch) == (range_id, 2)

    # The stream ended (the lease is lost); the batch of what was indexed got
    # 409; nothing was stored and the range was not given back.
    assert results == [EdgeTotals(lost=1)]
    assert not watcher.kinds(EventKind.STORED)
    assert coordinator.row("SELECT count(*) FROM batches") == (0,)
    assert coordinator.row("SELECT count(*) FROM fragments") == (0,)
    state = coordinator.row(
        f"SELECT state, holder, resume, epoch FROM ranges WHERE id = {range_id}"
    )
    assert state == ("leased", thief_id, data.low, 2)


@pytest.mark.trio
async def test_a_stopped_range_is_given_back_and_another_edge_finishes_it(
    coordinator: Coordinator, settings: Settings, tmp_path: Path
) -> None:
    data = generated(10_000, seed=8)
    group_id = coordinator.add_group(data.group)
    range_id = coordinator.plan(group_id, data.low, data.high)
    chunks = data.chunks(data.low, data.high, per_chunk=1_000)
    landed = 5
    for chunk in chunks[:landed]:
        coordinator.write(group_id, chunk)
    token = coordinator.stores.nodes.create("edge-1")
    # Batches after chunks 2 and 4 (2,000+ articles each); chunk 5 is indexed
    # when the edge waits for chunk 6, and not posted when it stops: the next
    # holder indexes it again from the resume point.
    resume = chunks[3].last + 1
    watcher = Watcher()
    stored = watcher.when(lambda e: e.kind is EventKind.STORED and e.article == resume)
    waiting = watcher.when(lambda e: e.kind is EventKind.KEEPALIVE)
    stop = trio.Event()
    results: list[EdgeTotals] = []
    pairs = (chunks[2].first - chunks[0].first, chunks[4].first - chunks[2].first)
    options = coordinator.options(token, batch_articles=min(pairs))

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            run = partial(run_edge, settings, options, results, stop=stop, observe=watcher)
            nursery.start_soon(run)
            await stored.wait()
            await waiting.wait()
            stop.set()

    assert results == [EdgeTotals(given_back=1)]
    assert [e.article for e in watcher.kinds(EventKind.STORED)] == [chunks[2].first, resume]
    state = coordinator.row(f"SELECT state, holder, resume FROM ranges WHERE id = {range_id}")
    assert state == ("planned", None, resume)

    for chunk in chunks[landed:]:
        coordinator.write(group_id, chunk)
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(settings, options=attrs.evolve(options, ranges=1))
    assert totals == EdgeTotals(finished=1)
    assert coordinator.row(f"SELECT state FROM ranges WHERE id = {range_id}") == ("done",)
    expected = offline_index(tmp_path, list(data.lines))
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)


@pytest.mark.trio
async def test_a_cancelled_worker_still_gives_its_range_back(
    coordinator: Coordinator, settings: Settings
) -> None:
    """A second signal cancels the worker outright: the release in `finally:` still runs."""
    data = generated(4_000, seed=10)
    group_id = coordinator.add_group(data.group)
    range_id = coordinator.plan(group_id, data.low, data.high)
    chunks = data.chunks(data.low, data.high, per_chunk=1_000)
    coordinator.write(group_id, chunks[0])
    token = coordinator.stores.nodes.create("edge-1")
    watcher = Watcher()
    waiting = watcher.when(lambda e: e.kind is EventKind.KEEPALIVE)
    results: list[EdgeTotals] = []

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            options = coordinator.options(token, batch_articles=10**9)
            nursery.start_soon(partial(run_edge, settings, options, results, observe=watcher))
            await waiting.wait()
            nursery.cancel_scope.cancel()

    assert results == []
    state = coordinator.row(f"SELECT state, holder, resume FROM ranges WHERE id = {range_id}")
    assert state == ("planned", None, data.low)
    assert coordinator.row("SELECT count(*) FROM batches") == (0,)


# --- stopping while a batch's answer is awaited ----------------------------------


@pytest.mark.trio
@pytest.mark.parametrize(
    "stored",
    [
        # The first batch stored, its answer held: the catalog build is a minute behind.
        pytest.param(True, id="stored-its-answer-held"),
        # The second batch at the coordinator, waiting to be stored.
        pytest.param(False, id="not-stored-yet"),
    ],
)
async def test_a_stop_while_a_batch_answer_is_awaited_gives_the_range_back_at_once(
    coordinator: Coordinator,
    nursery: trio.Nursery,
    settings: Settings,
    pool: ConnectionPool,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    stored: bool,
) -> None:
    """An edge waiting for a batch's answer (held up to 30 s while the catalog build is
    behind) is told to stop: it abandons the post and gives the range back within
    STOP_SECONDS, posting nothing more. The batch was stored before the release, or it
    is refused after it (the fence): the range is planned again from the stored resume
    point either way, and another edge finishing it stores every article once."""
    data = generated(10_000, seed=8)
    group_id = coordinator.add_group(data.group)
    range_id = coordinator.plan(group_id, data.low, data.high)
    chunks = data.chunks(data.low, data.high, per_chunk=1_000)
    for chunk in chunks:
        coordinator.write(group_id, chunk)
    # Two chunks a batch (2,000+ articles), the edges alike.
    batch_articles = chunks[2].first - chunks[0].first
    resume = chunks[2].first  # after the first batch
    batches = GatedBatches(pool, gated=2)  # its second batch waits at the gate
    if stored:
        with pool.connection() as conn:
            # The build is a minute behind (no builder runs here): answers are held.
            conn.execute(
                "INSERT INTO catalog_pending (key, since) VALUES (%s, now() - interval '1 minute')",
                (bytes(16),),
            )
    # A coordinator that holds answers (it has a CatalogDue), on the same database.
    api = attrs.evolve(nodeapi.ApiOptions.from_settings(settings), stream=FAST_STREAM)
    assert api.catalog_max_lag_seconds > 0
    stores = attrs.evolve(coordinator.stores, batches=batches)
    serving = partial(serve, settings, stores, options=api, catalog_due=CatalogDue())
    token = coordinator.stores.nodes.create("edge-1")
    stop, gone = trio.Event(), trio.Event()
    results: list[EdgeTotals] = []
    # Logged once stored, as the hold begins.
    caplog.set_level(logging.INFO, nodeapi.__name__)
    held = _Logged("stored batch")
    # A lease call whose first look comes after the stopping release (begun as the
    # stop came) may lease the range straight back; it is given back as the call's
    # closed connection is seen (the known race: docs/ARCHITECTURE.md, leasing).
    given_back = _Logged("was leased to it: given back")
    node_log = logging.getLogger(nodeapi.__name__)

    async def edge(url: str) -> None:
        options = attrs.evolve(
            coordinator.options(token, batch_articles=batch_articles), coordinator_url=url
        )
        await run_edge(settings, options, results, stop=stop)
        gone.set()

    with trio.fail_after(DEADLINE_SECONDS):
        host, port = await nursery.start(serving)
        node_log.addHandler(held)
        node_log.addHandler(given_back)
        try:
            async with trio.open_nursery() as edges:
                edges.start_soon(edge, f"http://{host}:{port}")
                await (held.seen if stored else batches.asked).wait()
                stop.set()
                with trio.fail_after(STOP_SECONDS):
                    await gone.wait()
            assert results == [EdgeTotals(given_back=1)]
            # Planned at once: the edge's lease call, held open for new work as it
            # stopped, does not lease it straight back (`"stopping": true`); one
            # begun as the stop came may, and gives it back as it goes.
            query = f"SELECT state, holder, resume FROM ranges WHERE id = {range_id}"
            state = coordinator.row(query)
            if state[0] == "leased":
                with trio.fail_after(STOP_SECONDS):
                    await given_back.seen.wait()
                state = coordinator.row(query)
        finally:
            node_log.removeHandler(held)
            node_log.removeHandler(given_back)
        assert state == ("planned", None, resume)
        if not stored:
            batches.gate.set()
            await batches.done.wait()  # refused: the range is no longer held
            assert coordinator.row(f"SELECT resume FROM ranges WHERE id = {range_id}") == (resume,)

        other = coordinator.stores.nodes.create("edge-2")
        finishing = coordinator.options(other, ranges=1, batch_articles=batch_articles)
        totals = await worker.run(settings, options=finishing)
    assert totals == EdgeTotals(finished=1)
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT batch_first, batch_next, lines, n.name FROM batches b"
            " JOIN nodes n ON n.id = b.node_id ORDER BY batch_first"
        ).fetchall()
    # Every article in exactly one stored batch; edge-1's first, from its resume point on edge-2's.
    assert [r[0] for r in rows] == [data.low, *(r[1] for r in rows[:-1])]
    assert rows[-1][1] == data.high + 1
    assert rows[0][1:] == (resume, len(chunks[0].lines) + len(chunks[1].lines), "edge-1")
    assert {r[3] for r in rows[1:]} == {"edge-2"}
    assert sum(r[2] for r in rows) == len(data.lines)
    # And the catalog is the one an offline index of every line makes (no segment twice).
    expected = offline_index(tmp_path, list(data.lines))
    assert_same_catalog(CatalogBuild(coordinator.pool).export(), expected)


# --- stopping while a lease call waits -------------------------------------------


def edge_env(coordinator: Coordinator, home: Path, token: str) -> dict[str, str]:
    """The environment of a `uidx edge` process of this coordinator (no supervisor)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.update(UIDX_HOME=str(home), COORDINATOR_URL=coordinator.url, NODE_TOKEN=token)
    env.pop("NOTIFY_SOCKET", None)
    return env


@pytest.mark.trio
async def test_sigterm_during_a_lease_wait_stops_the_edge_within_2_s(
    gated_coordinator: Coordinator, gated_ranges: GatedRanges, tmp_path: Path
) -> None:
    """An idle `uidx edge` is in a lease call the coordinator holds for up to 30 s:
    SIGTERM cuts it short, and the process is gone well before the supervisor's SIGKILL."""
    token = gated_coordinator.stores.nodes.create("edge-1")
    log = tmp_path / "edge.log"
    with trio.fail_after(DEADLINE_SECONDS), log.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "usenet_indexer", "edge", "--processes", "1"],
            env=edge_env(gated_coordinator, tmp_path / "edge-home", token),
            stderr=stderr,
        )
        try:
            # The coordinator found nothing to lease: the call now waits for work.
            await gated_ranges.looked.wait()
            process.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            await process.wait()
            elapsed = time.monotonic() - signalled
        finally:
            process.kill()
            await process.wait()
    said = log.read_text()
    assert process.returncode == 0, said
    assert elapsed < STOP_SECONDS, f"{elapsed:.1f} s\n{said}"
    assert "edge worker done" in said


@pytest.mark.trio
async def test_sighup_stops_an_edge_mid_range_as_sigterm_does(
    coordinator: Coordinator, tmp_path: Path
) -> None:
    """`uidx edge` as one process (no supervisor), in the middle of a range, gets SIGHUP
    (its terminal closed, `systemctl reload`): it stops as on SIGTERM, giving the range
    back, instead of dying by the signal's default action with the range held until its
    lease lapses."""
    data = generated(4_000, seed=10)
    group_id = coordinator.add_group(data.group)
    range_id = coordinator.plan(group_id, data.low, data.high)
    # One chunk of four landed: the edge indexes it and waits for the next.
    coordinator.write(group_id, data.chunks(data.low, data.high, per_chunk=1_000)[0])
    token = coordinator.stores.nodes.create("edge-1")
    with trio.fail_after(DEADLINE_SECONDS):
        process = await trio.lowlevel.open_process(
            # -v: the edge says when it has leased the range.
            [sys.executable, "-m", "usenet_indexer", "-v", "edge", "--processes", "1"],
            env=edge_env(coordinator, tmp_path / "edge-home", token),
            stderr=subprocess.PIPE,
        )
        assert process.stderr is not None
        try:
            said = await _read_until(process.stderr, b": leased, from")
            process.send_signal(signal.SIGHUP)
            said += await _read_until(process.stderr, None)
            await process.wait()
        finally:
            process.kill()
            await process.wait()
    log = said.decode(errors="replace")
    assert process.returncode == 0, log
    assert "SIGHUP: stopping after the current chunk; the range goes back" in log
    assert re.search(rf"range {range_id} .*: given back \(stopping", log), log
    assert "edge worker done" in log
    assert "Traceback" not in log, log
    state = coordinator.row(f"SELECT state, holder FROM ranges WHERE id = {range_id}")
    assert state == ("planned", None)


async def _read_until(stream: trio.abc.ReceiveStream, wanted: bytes | None) -> bytes:
    """What `stream` gives up to `wanted` (with it), or to its end when None."""
    said = b""
    while wanted is None or wanted not in said:
        data = await stream.receive_some()
        if not data:
            assert wanted is None, said.decode(errors="replace")
            break
        said += data
    return said


@pytest.mark.trio
async def test_a_range_leased_as_its_edge_stops_is_given_back_at_once(
    gated_coordinator: Coordinator,
    gated_ranges: GatedRanges,
    settings: Settings,
) -> None:
    """The race: the edge stops while the coordinator is leasing it a range. The edge goes
    at once; the coordinator, its node gone, gives the range back: another node leases it
    now, not after the lease's TTL."""
    coordinator = gated_coordinator
    token = coordinator.stores.nodes.create("edge-1")
    other = coordinator.stores.nodes.authenticate(coordinator.stores.nodes.create("edge-2"))
    assert other is not None
    group_id = coordinator.add_group("alt.binaries.race")
    gate = gated_ranges.gate = trio.Event()
    stop = trio.Event()
    results: list[EdgeTotals] = []

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            run = partial(run_edge, settings, coordinator.options(token), results, stop=stop)
            nursery.start_soon(run)
            # The lease call is in its database hop, held at the gate; a range is planned
            # meanwhile, which that hop will lease to the edge once let through.
            await gated_ranges.asked.wait()
            range_id = await trio.to_thread.run_sync(coordinator.plan, group_id, 1, 1000)
            stop.set()
        # The edge is gone without waiting for its answer.
        assert results == [EdgeTotals()]
        # Once the coordinator has taken in that the edge's connection closed (every
        # task idle), the held hop leases the range to the node that went away.
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
        await gated_ranges.released.wait()

    state = coordinator.row(f"SELECT state, holder, epoch FROM ranges WHERE id = {range_id}")
    assert state == ("planned", None, 1)
    takeover = RangeStore(coordinator.pool).lease(other, TTL)
    assert takeover is not None
    assert (takeover.range_id, takeover.epoch) == (range_id, 2)


# --- faults a real coordinator does not produce on demand: a fake -------------------


@attrs.define
class FakeCoordinator:
    """An in-memory ASGI stand-in for the node API, answering from a script.

    Attributes:
        frames: the stream of the one range it leases.
        batch_statuses: the statuses of successive batch posts (then 200).
        beats_before_end: the stream's END waits for this many heartbeats.
    """

    frames: list[Frame]
    batch_statuses: list[int] = attrs.field(factory=list)
    beats_before_end: int = 0
    trailer: bytes = b""  # bytes after the frames (not a frame: a broken stream)
    on_lease: Callable[[], object] | None = None  # called as the lease is answered
    ttl_seconds: float | None = None  # the lease's TTL, said in its answer
    beats_at: list[float] = attrs.field(factory=list)  # when each heartbeat came
    leased_at: float | None = None
    calls: list[str] = attrs.field(factory=list)
    stored: list[Any] = attrs.field(factory=list)
    tokens: list[str] = attrs.field(factory=list)
    _leased: bool = False
    _beats: int = 0
    beaten: trio.Event = attrs.field(factory=trio.Event)  # beats_before_end came

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        action = scope["path"].rsplit("/", 1)[-1]
        if action == "builds":
            # As a coordinator with edge_builds off answers the worker's build loop
            # (not a call of the ranges these tests follow).
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b'{"error": "no builds"}'})
            return
        self.calls.append(action)
        headers = dict(scope["headers"])
        self.tokens.append(headers[b"authorization"].decode())
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        status, answer = await self._answer(action, body, headers)
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": answer})

    async def _answer(
        self, action: str, body: bytes, headers: dict[bytes, bytes]
    ) -> tuple[int, bytes]:
        if action == "lease":
            if self._leased:
                return 204, b""
            self._leased = True
            self.leased_at = trio.current_time()
            lease = {
                "id": 1,
                "group": "alt.binaries.fake",
                "first": 1,
                "last": 3,
                "next": 1,
                "epoch": 1,
            }
            rules = [rule.to_wire() for rule in DEFAULT_RULES]
            if self.on_lease is not None:
                self.on_lease()
            answer: dict[str, object] = {"range": lease, "rules": rules}
            if self.ttl_seconds is not None:
                answer["ttl_seconds"] = self.ttl_seconds
            return 200, httpx.Response(200, json=answer).content
        if action == "stream":
            if self.beats_before_end:
                await self.beaten.wait()
            return 200, b"".join(encode_frame(frame) for frame in self.frames) + self.trailer
        if action == "batches":
            if self.batch_statuses:
                return self.batch_statuses.pop(0), b'{"error": "the database is unavailable"}'
            # The document as it is: its fragments are deflated already.
            assert b"content-encoding" not in headers
            encoding = None
            assert headers[b"content-type"] == b"application/x-msgpack"
            document = decode_body(
                body, content_encoding=encoding, max_body_bytes=1 << 26, max_inflated_bytes=1 << 28
            )
            self.stored.append(decode_batch(document))
            return 200, b'{"stored": true, "already": false}'
        if action == "heartbeat":
            self.beats_at.append(trio.current_time())
            self._beats += 1
            if self._beats >= self.beats_before_end:
                self.beaten.set()
        return 200, b"{}"


def fake_lines() -> bytes:
    data = generated(300, seed=9)
    return b"\n".join(data.lines_in(data.low, data.low + 2))


def fake_options(**changes: Any) -> EdgeOptions:
    base = EdgeOptions(
        coordinator_url="http://coordinator.test",
        node_token="secret-token",
        ranges=1,
        idle_seconds=0.01,
        retry=FAST_RETRY,
    )
    return attrs.evolve(base, **changes)


@pytest.mark.trio
async def test_a_batch_answered_503_twice_is_retried_and_stored_once(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    payload = zlib.compress(fake_lines())
    frames = [Frame.chunk(1, 3, payload, codec=Codec.ZLIB), Frame.end(3)]
    fake = FakeCoordinator(frames, batch_statuses=[503, 503])
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=fake_options(), transport=httpx.ASGITransport(app=fake)
        )
    assert totals == EdgeTotals(finished=1)
    assert fake.calls == ["lease", "stream", "batches", "batches", "batches", "finish"]
    assert len(fake.stored) == 1
    assert (fake.stored[0].range_id, fake.stored[0].epoch) == (1, 1)
    assert (fake.stored[0].batch.first, fake.stored[0].batch.next) == (1, 4)
    assert set(fake.tokens) == {"Bearer secret-token"}
    assert "secret-token" not in caplog.text
    assert caplog.text.count("HTTP 503") == 2


@pytest.mark.trio
async def test_a_batch_refused_for_good_gives_the_range_back(settings: Settings) -> None:
    frames = [Frame.chunk(1, 3, gzip.compress(fake_lines()), codec=Codec.GZIP), Frame.end(3)]
    fake = FakeCoordinator(frames, batch_statuses=[503] * FAST_RETRY.tries)
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=fake_options(), transport=httpx.ASGITransport(app=fake)
        )
    assert totals == EdgeTotals(failed=1)
    assert fake.calls == ["lease", "stream"] + ["batches"] * FAST_RETRY.tries + ["release"]
    assert fake.stored == []


@pytest.mark.trio
async def test_a_stream_broken_after_a_chunk_posts_the_chunk_and_gives_the_range_back(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    # The frame reader meets the bad bytes while the chunk is still to be
    # indexed: the break is handed on in its turn, so the chunk is indexed and
    # stored first.
    frames = [Frame.chunk(1, 2, zlib.compress(fake_lines()), codec=Codec.ZLIB)]
    fake = FakeCoordinator(frames, trailer=b"\xc1U\x09" + bytes(22))
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=fake_options(), transport=httpx.ASGITransport(app=fake)
        )
    assert totals == EdgeTotals(given_back=1)
    assert fake.calls == ["lease", "stream", "batches", "release"]
    [batch] = fake.stored
    assert (batch.batch.first, batch.batch.next) == (1, 3)
    assert batch.batch.lines == len(fake_lines().splitlines())
    assert "the stream broke" in caplog.text


@pytest.mark.trio
async def test_an_unknown_chunk_codec_gives_the_range_back(settings: Settings) -> None:
    frames = [Frame.chunk(1, 3, b"zstd?", codec=Codec.ZSTD), Frame.end(3)]
    fake = FakeCoordinator(frames)
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=fake_options(), transport=httpx.ASGITransport(app=fake)
        )
    assert totals == EdgeTotals(given_back=1)
    assert fake.calls == ["lease", "stream", "release"]


@pytest.mark.trio
async def test_heartbeats_keep_a_lease_that_is_long_between_batches(settings: Settings) -> None:
    frames = [Frame.chunk(1, 3, zlib.compress(fake_lines()), codec=Codec.ZLIB), Frame.end(3)]
    fake = FakeCoordinator(frames, beats_before_end=2)
    options = fake_options(heartbeat_seconds=0.005)
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=options, transport=httpx.ASGITransport(app=fake)
        )
    assert totals == EdgeTotals(finished=1)
    assert fake.calls[:4] == ["lease", "stream", "heartbeat", "heartbeat"]
    # A heartbeat may still go out between the last post and the finish (the
    # clock is real here, its beat 5 ms): what ends the range is post, finish.
    assert [call for call in fake.calls if call != "heartbeat"][-2:] == ["batches", "finish"]


@pytest.mark.trio
async def test_heartbeats_keep_a_lease_within_the_coordinators_ttl(
    autojump_clock: trio.testing.MockClock, settings: Settings
) -> None:
    """The coordinator's lease_ttl_seconds (here 3 s) is shorter than the edge's own
    (the default 900 s: an edge is set up with COORDINATOR_URL and NODE_TOKEN only):
    the edge beats within the TTL its lease answer says, not every 300 s, so a range
    long between batches (the spool behind) is not lost to the next node."""
    frames = [Frame.chunk(1, 3, zlib.compress(fake_lines()), codec=Codec.ZLIB), Frame.end(3)]
    fake = FakeCoordinator(frames, beats_before_end=3, ttl_seconds=3.0)
    options = attrs.evolve(fake_options(), heartbeat_seconds=300.0)

    async def slow_the_clock() -> None:
        # The chunk is inflated in a thread, which the autojump clock does not wait
        # for: it would jump from beat to beat (a virtual second each) until the
        # deadline on a loaded machine. Once the beats are in, it jumps only after
        # 0.2 s of real idleness.
        await fake.beaten.wait()
        autojump_clock.autojump_threshold = 0.2

    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_the_clock)
            totals = await worker.run(
                settings, options=options, transport=httpx.ASGITransport(app=fake)
            )
    assert totals == EdgeTotals(finished=1)
    assert fake.calls[:5] == ["lease", "stream", "heartbeat", "heartbeat", "heartbeat"]
    # One beat every TTL / 3 (the mock clock jumps to each): the deadline never came near.
    assert fake.leased_at is not None
    beats = [fake.leased_at, *fake.beats_at]
    gaps = [later - before for before, later in itertools.pairwise(beats)]
    assert all(gap <= 1.0 + 1e-6 for gap in gaps), gaps


@pytest.mark.trio
async def test_a_lease_answered_as_the_worker_stops_is_given_back(settings: Settings) -> None:
    """The stop comes as the lease is answered: the worker leases no more, and gives the
    range back at once (shielded) rather than leave it leased until its deadline."""
    stop = trio.Event()
    fake = FakeCoordinator([], on_lease=stop.set)
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings,
            options=fake_options(ranges=None),
            stop=stop,
            transport=httpx.ASGITransport(app=fake),
        )
    assert totals == EdgeTotals()
    assert fake.calls == ["lease", "release"]


@attrs.define
class GoneAfterTheLease:
    """A fake node API that leases one range and then answers nothing more (its stream
    and the give-back wait for ever): a coordinator gone, or stopping, as the edge stops.
    A real one cannot be made to hang on demand. `on_lease` is called as the lease is
    answered; `streaming` is set when the stream is asked for. With `interrupt` the
    stream is answered by a KeyboardInterrupt instead (the app runs in the edge's task:
    Ctrl-C arriving while the edge's own code runs, where no signal receiver has it);
    with `stream_status`, by that status (a failure: the range is given back)."""

    on_lease: Callable[[], object] | None = None
    interrupt: bool = False
    stream_status: int | None = None
    calls: list[str] = attrs.field(factory=list)
    streaming: trio.Event = attrs.field(factory=trio.Event)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        action = scope["path"].rsplit("/", 1)[-1]
        status, body = 404, b'{"error": "no builds"}'
        if action != "builds":
            self.calls.append(action)
            if action != "lease" or len(self.calls) > 1:
                self.streaming.set()
                if self.interrupt and action == "stream":
                    raise KeyboardInterrupt
                if self.stream_status is not None and action == "stream":
                    status, body = self.stream_status, b'{"error": "bad request"}'
                    await send({"type": "http.response.start", "status": status, "headers": []})
                    await send({"type": "http.response.body", "body": body})
                    return
                await trio.sleep_forever()
            lease = {"id": 1, "group": "alt.binaries.fake", "first": 1, "last": 3, "next": 1,
                     "epoch": 1}  # fmt: skip
            rules = [rule.to_wire() for rule in DEFAULT_RULES]
            status, body = 200, httpx.Response(200, json={"range": lease, "rules": rules}).content
            if self.on_lease is not None:
                self.on_lease()
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})


@pytest.mark.trio
@pytest.mark.parametrize("when", ["mid-range", "as leased"])
async def test_a_stopping_edge_whose_coordinator_does_not_answer_is_gone_within_2_s(
    autojump_clock: trio.testing.MockClock,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
    when: str,
) -> None:
    """Stopped mid-range (its stream asked for) or as a lease is answered, the edge
    gives the range back; the coordinator does not answer the give-back, and the edge
    does not retry it for give_back_seconds (30 s) but gives up within 2 s: the lease
    expires there by itself. (Default retries and give-back limits, on the autojump
    clock.)"""
    stop = trio.Event()
    fake = GoneAfterTheLease(on_lease=stop.set if when == "as leased" else None)
    options = attrs.evolve(fake_options(ranges=None), retry=RetryPolicy())
    transport = httpx.ASGITransport(app=fake)
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                partial(worker.run, settings, options=options, stop=stop, transport=transport)
            )
            if when == "mid-range":
                await fake.streaming.wait()
                stop.set()
            else:
                await stop.wait()
            stopped = trio.current_time()
    assert trio.current_time() - stopped <= STOP_SECONDS
    expected = ["lease", "stream", "release"] if when == "mid-range" else ["lease", "release"]
    assert fake.calls == expected
    assert "its lease expires there by itself" in caplog.text


@pytest.mark.trio
@pytest.mark.parametrize("how", ["cancelled", "a deadline passed", "a sibling failed", "Ctrl-C"])
async def test_an_edge_cut_short_from_outside_whose_coordinator_does_not_answer_is_gone_within_2_s(
    autojump_clock: trio.testing.MockClock,
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    """Cut short mid-range from outside, its stop never set (an outer cancel scope or
    deadline, a sibling task that failed, a KeyboardInterrupt in a trio program that has
    no signal receiver), the edge gives the range back as at a stop: the coordinator does
    not answer, and the give-back gives up within 2 s, not give_back_seconds (30 s)."""
    fake = GoneAfterTheLease(interrupt=how == "Ctrl-C")
    options = attrs.evolve(fake_options(ranges=None), retry=RetryPolicy())
    transport = httpx.ASGITransport(app=fake)

    async def sibling() -> None:
        await fake.streaming.wait()
        if how == "a sibling failed":
            raise RuntimeError("a sibling failed")

    raised = {"a sibling failed": RuntimeError, "Ctrl-C": KeyboardInterrupt}.get(how)
    expected: AbstractContextManager[object] = (
        nullcontext() if raised is None else pytest.RaisesGroup(raised, flatten_subgroups=True)
    )
    with trio.fail_after(DEADLINE_SECONDS), trio.CancelScope() as outer, expected:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(worker.run, settings, options=options, transport=transport))
            nursery.start_soon(sibling)
            await fake.streaming.wait()
            cancelled = trio.current_time()
            if how == "cancelled":
                outer.cancel()
            elif how == "a deadline passed":
                outer.deadline = cancelled
    assert trio.current_time() - cancelled <= STOP_SECONDS
    assert fake.calls == ["lease", "stream", "release"]
    assert f"not given back within {options.stop_give_back_seconds:.1f} s" in caplog.text


@pytest.mark.trio
async def test_a_failed_range_whose_coordinator_does_not_answer_retries_the_give_back_for_30_s(
    autojump_clock: trio.testing.MockClock, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A range that fails (its stream refused: an error, not a cancel) is given back
    for give_back_seconds (30 s) to a coordinator that does not answer: the stopping
    limit is for a worker told to stop or cut short from outside."""
    fake = GoneAfterTheLease(stream_status=400)
    options = attrs.evolve(fake_options(), retry=RetryPolicy())
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=options, transport=httpx.ASGITransport(app=fake)
        )
    assert totals == EdgeTotals(failed=1)
    assert fake.calls == ["lease", "stream", "release"]
    assert trio.current_time() >= options.give_back_seconds
    assert f"not given back within {options.give_back_seconds:.1f} s" in caplog.text


@attrs.define
class ReleasingAgain:
    """A node API that leases range 1 again each time it is given back; its stream is
    one LINK (an S3 spool's chunk) whose presigned URL the store answers 403, or an
    ERROR frame when `error` is set; or, with `stream_status`, the stream is not opened
    but answered with that status."""

    error: str | None = None
    link_status: int = 403
    stream_status: int | None = None
    leases: list[float] = attrs.field(factory=list)
    calls: list[str] = attrs.field(factory=list)
    releases: list[bytes] = attrs.field(factory=list)
    enough: trio.Event = attrs.field(factory=trio.Event)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"].endswith("/release"):
            self.releases.append(body)
        status, body = self._answer(scope["path"])
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})

    def _answer(self, path: str) -> tuple[int, bytes]:
        if path.startswith("/links/"):
            self.calls.append("link")
            return self.link_status, b"<Error><Code>AccessDenied</Code></Error>"
        action = path.rsplit("/", 1)[-1]
        if action == "builds":
            return 404, b'{"error": "no builds"}'
        self.calls.append(action)
        if action == "lease":
            self.leases.append(trio.current_time())
            if len(self.leases) == 4:
                self.enough.set()
            lease = {"id": 1, "group": "alt.binaries.fake", "first": 1, "last": 3, "next": 1,
                     "epoch": len(self.leases)}  # fmt: skip
            rules = [rule.to_wire() for rule in DEFAULT_RULES]
            return 200, httpx.Response(200, json={"range": lease, "rules": rules}).content
        if action == "stream":
            if self.stream_status is not None:
                return self.stream_status, b'{"error": "not now"}'
            if self.error is not None:
                return 200, encode_frame(Frame.error(self.error))
            link = Frame.link(1, 3, "http://coordinator.test/links/1", codec=Codec.ZLIB)
            return 200, encode_frame(link)
        return 200, b"{}"


async def _until_four_leases(fake: ReleasingAgain, settings: Settings) -> EdgeOptions:
    """A worker (idle_seconds 30) against the fake until its fourth lease, then stopped;
    its options."""
    options = fake_options(ranges=None, idle_seconds=30.0)
    stop = trio.Event()
    with trio.fail_after(3_600):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                partial(
                    worker.run,
                    settings,
                    options=options,
                    stop=stop,
                    transport=httpx.ASGITransport(app=fake),
                )
            )
            await fake.enough.wait()
            stop.set()
    return options


@pytest.mark.trio
@pytest.mark.parametrize("error", [None, "spool chunk 1..2 does not hold article 3"])
async def test_a_range_given_back_before_a_batch_is_not_leased_again_in_a_tight_loop(
    autojump_clock: trio.testing.MockClock, settings: Settings, error: str | None
) -> None:
    """Its stream breaks at once every time (a store that refuses the coordinator's
    links, an ERROR frame): nothing is counted on the range, and it is leased first
    again; the worker waits idle_seconds before each new lease, as after a failure."""
    fake = ReleasingAgain(error=error)
    options = await _until_four_leases(fake, settings)
    given_back = ["lease", "stream"] + (["link"] if error is None else []) + ["release"]
    assert fake.calls[: 3 * len(given_back)] == given_back * 3
    gaps = [later - before for before, later in itertools.pairwise(fake.leases)]
    assert all(gap >= options.idle_seconds for gap in gaps), gaps


@pytest.mark.trio
@pytest.mark.parametrize(
    ("status", "counted"), [(403, True), (404, True), (429, False), (408, False)]
)
async def test_a_link_the_store_refuses_is_named_but_not_one_it_throttles(
    autojump_clock: trio.testing.MockClock, settings: Settings, status: int, counted: bool
) -> None:
    """A link the store refuses (403, 404) is named in the give-back as an unreadable
    chunk, which the coordinator counts toward parking the range; one it times out or
    throttles (408, 429) is the store away for a while, like a 5xx: given back
    unnamed, never counted (it parked sound ranges)."""
    fake = ReleasingAgain(link_status=status)
    await _until_four_leases(fake, settings)
    # (The fourth lease's give-back is the stop's.)
    named = [b'"unreadable"' in body for body in fake.releases[:3]]
    assert named == [counted] * 3, fake.releases


@pytest.mark.trio
async def test_a_stream_that_does_not_open_fails_the_range_with_its_error_every_time(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The stream's call fails (503, after the client's tries): the range fails, and says
    why. The reader's error used to be lost, at random (trio's scheduling order), to the
    Cancelled of its own channel's close: the range was "given back (stopping)", its
    error said nowhere (in about 6 of 10 ranges; here 40 in a row must fail)."""
    fake = ReleasingAgain(stream_status=503)
    options = fake_options()
    transport = httpx.ASGITransport(app=fake)
    outcomes: list[Outcome] = []
    with trio.fail_after(DEADLINE_SECONDS):
        async with open_client(
            options.coordinator_url, options.node_token, retry=FAST_RETRY, transport=transport
        ) as client:
            for _ in range(40):
                lease = await client.lease()
                assert lease is not None
                report = await RangeRunner(client, lease, options, trio.Event()).run()
                outcomes.append(report.outcome)
    assert outcomes == [Outcome.FAILED] * 40
    assert caplog.text.count("failed, given back (stream: gave up after") == 40


@pytest.mark.trio
async def test_a_refused_token_stops_the_worker(settings: Settings) -> None:
    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b'{"error": "unknown or revoked token"}'})

    with trio.fail_after(DEADLINE_SECONDS), pytest.raises(NodeApiError, match="revoked") as caught:
        await worker.run(
            settings, options=fake_options(ranges=None), transport=httpx.ASGITransport(app=refuse)
        )
    assert caught.value.status == 401


# --- the pure parts -------------------------------------------------------------------


def test_the_backoff_is_exponential_and_capped() -> None:
    policy = RetryPolicy()
    delays = [policy.next_delay(attempt) for attempt in range(1, 9)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, None]  # 8 tries, 7 pauses
    tiny = RetryPolicy(tries=5, base_seconds=0.5, cap_seconds=1.5)
    assert [tiny.next_delay(a) for a in range(1, 6)] == [0.5, 1.0, 1.5, 1.5, None]
    assert RetryPolicy(tries=100).next_delay(99) == 60.0
    # Without giving up (the prefetcher's): the same pauses, for ever.
    assert [policy.delay(f) for f in (1, 2, 7, 10_000)] == [1.0, 2.0, 60.0, 60.0]
    with pytest.raises(ValueError, match="tries"):
        RetryPolicy(tries=0)


def test_an_edge_needs_coordinator_url_and_node_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="COORDINATOR_URL and NODE_TOKEN"):
        EdgeOptions.from_settings(Settings(home=tmp_path))
    with pytest.raises(ConfigError) as caught:
        EdgeOptions.from_settings(Settings(home=tmp_path, coordinator_url="http://c:8750"))
    assert caught.value.key == "NODE_TOKEN"
    settings = Settings(
        home=tmp_path, coordinator_url="http://c:8750", node_token="t0k", lease_ttl_seconds=90.0
    )
    options = EdgeOptions.from_settings(settings, ranges=2, batch_articles=1000)
    assert (options.ranges, options.batch_articles, options.heartbeat_seconds) == (2, 1000, 30.0)
    assert "t0k" not in repr(options)
    assert EdgeOptions.from_settings(settings).batch_articles == settings.batch_articles


def test_the_command_line() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    edge_command.add_parser(parser.add_subparsers())
    args = parser.parse_args(["edge", "--ranges", "3", "--batch-articles", "5000"])
    assert (args.ranges, args.batch_articles, args.run) == (3, 5000, edge_command.run)
    assert parser.parse_args(["edge"]).ranges is None
    with pytest.raises(SystemExit):
        parser.parse_args(["edge", "--ranges", "0"])


def test_the_api_base_url() -> None:
    assert NODE_API_PATH == nodeapi.PREFIX
    assert api_base("http://c:8750") == "http://c:8750/api/v1/node/"
    assert api_base("http://c:8750/") == "http://c:8750/api/v1/node/"
    assert api_base("http://c:8750/api/v1/node") == "http://c:8750/api/v1/node/"


@pytest.mark.trio
async def test_an_https_coordinator_with_an_untrusted_certificate_is_refused() -> None:
    # A plain http URL builds no certificate context (tls_verify); an https
    # one is verified as ever: a certificate from an unknown CA fails.
    assert (tls_verify("http://c:8750/"), tls_verify("https://c:8750/")) == (False, True)
    certificate = trustme.CA().issue_cert("127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certificate.configure_cert(context)
    refused = trio.Event()

    async def handshake(stream: trio.SSLStream[trio.SocketStream]) -> None:
        # The server's side of it: the client hung up during the handshake.
        with pytest.raises(trio.BrokenResourceError):
            await stream.do_handshake()
        refused.set()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_ssl_over_tcp, handshake, 0, context, host="127.0.0.1")
        )
        port = listeners[0].transport_listener.socket.getsockname()[1]
        async with open_client(
            f"https://127.0.0.1:{port}", "token", retry=RetryPolicy(tries=1)
        ) as client:
            with pytest.raises(NodeApiError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.lease()
        with trio.fail_after(10):
            await refused.wait()
        nursery.cancel_scope.cancel()


def test_a_transport_error_is_described_by_its_first_cause_with_a_message() -> None:
    refused = httpx.ConnectError("")
    refused.__cause__ = trio.BrokenResourceError("")
    refused.__cause__.__cause__ = ssl.SSLCertVerificationError(1, "certificate verify failed")
    assert transport_problem(refused) == "ConnectError: certificate verify failed"
    assert transport_problem(httpx.ReadError("peer closed")) == "ReadError: peer closed"
    looping = httpx.ConnectError("")
    looping.__cause__ = RuntimeError("")
    looping.__cause__.__cause__ = looping
    assert transport_problem(looping) == "ConnectError: no reason given"


def test_a_lease_document_is_checked() -> None:
    good: dict[str, Any] = {
        "range": {"id": 1, "group": "g", "first": 10, "last": 20, "next": 15, "epoch": 3},
        "rules": [rule.to_wire() for rule in DEFAULT_RULES],
    }
    lease = EdgeLease.from_json(good)
    assert (lease.range_id, lease.next, lease.epoch, lease.rules) == (1, 15, 3, DEFAULT_RULES)
    assert lease.ttl_seconds is None  # an older coordinator does not say it
    assert EdgeLease.from_json({**good, "ttl_seconds": 120}).ttl_seconds == 120.0
    bad: list[object] = [
        [],
        {"range": good["range"]},
        {**good, "ttl_seconds": True},
        {**good, "ttl_seconds": 0},
        {**good, "ttl_seconds": "900"},
        {**good, "range": {**good["range"], "epoch": True}},
        {**good, "range": {**good["range"], "next": 22}},
        {**good, "range": {**good["range"], "group": None}},
        {**good, "rules": [{"kind": "nonsense"}]},
    ]
    for document in bad:
        with pytest.raises(RemoteProtocolError):
            EdgeLease.from_json(document)


def _text(codec: Codec, payload: bytes, max_bytes: int) -> bytes:
    parts = list(line_parts(inflate(codec, payload, max_bytes), 64))
    assert all(part.endswith(b"\n") for part in parts[:-1])
    return b"".join(parts)


def test_chunks_inflate_with_a_cap() -> None:
    text = b"1\tsubject\n" * 1000
    assert _text(Codec.ZLIB, zlib.compress(text), len(text)) == text
    assert _text(Codec.GZIP, gzip.compress(text), len(text)) == text
    assert _text(Codec.NONE, text, len(text)) == text
    with pytest.raises(ChunkError, match="over"):
        _text(Codec.ZLIB, zlib.compress(text), len(text) - 1)
    with pytest.raises(ChunkError, match="ZSTD is not supported"):
        _text(Codec.ZSTD, b"x", 100)
    with pytest.raises(ChunkError, match="corrupt"):
        _text(Codec.ZLIB, b"not zlib", 100)
    with pytest.raises(ChunkError, match="corrupt"):
        _text(Codec.ZLIB, zlib.compress(text)[:-1] + b"\x00", len(text))  # its checksum
    with pytest.raises(ChunkError, match="truncated"):
        _text(Codec.GZIP, gzip.compress(text)[:-10], len(text))
    with pytest.raises(ChunkError, match="truncated"):
        _text(Codec.ZLIB, zlib.compress(text) + b"tail", len(text))


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=40),
    ends=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
    part_bytes=st.integers(min_value=1, max_value=120),
)
def test_line_parts_cut_text_at_line_ends_whatever_the_blocks(
    lines: list[bytes], ends: bool, cuts: list[int], part_bytes: int
) -> None:
    text = b"\n".join(lines) + (b"\n" if ends and lines else b"")
    at = sorted({min(cut, len(text)) for cut in cuts})
    blocks = [text[a:b] for a, b in zip([0, *at], [*at, len(text)], strict=True)]
    parts = list(line_parts(blocks, part_bytes))
    assert b"".join(parts) == text
    assert all(parts)
    assert all(part.endswith(b"\n") for part in parts[:-1])
    # Bounded: at most part_bytes after a part's first line.
    assert all(len(part) - part.find(b"\n") - 1 <= part_bytes for part in parts if b"\n" in part)


def test_inflating_in_blocks_gives_what_inflating_whole_gives() -> None:
    text = b"".join(b"%d\tsubject %d\n" % (k, k * k) for k in range(20_000))
    for wbits, packed in ((15, zlib.compress(text)), (31, gzip.compress(text))):
        blocks = capped_inflate_blocks(packed, wbits=wbits, max_bytes=len(text), block_bytes=4096)
        assert b"".join(blocks) == capped_inflate(packed, wbits=wbits, max_bytes=len(text))
        assert max(map(len, blocks)) == 4096
    packed = zlib.compress(text)
    for data, max_bytes, problem in (
        (packed, len(text) - 1, Problem.TOO_LARGE),
        (b"not zlib", len(text), Problem.CORRUPT),
        (packed[:-10], len(text), Problem.TRUNCATED),
        (packed + b"tail", len(text), Problem.TRAILING),
    ):
        with pytest.raises(InflateFailed) as whole:
            capped_inflate(data, wbits=15, max_bytes=max_bytes)
        with pytest.raises(InflateFailed) as in_blocks:
            capped_inflate_blocks(data, wbits=15, max_bytes=max_bytes, block_bytes=4096)
        assert whole.value.problem is in_blocks.value.problem is problem
    # A block of no bytes would never end; a part of none neither.
    with pytest.raises(ValueError, match="block_bytes"):
        capped_inflate_blocks(packed, wbits=15, max_bytes=len(text), block_bytes=0)
    with pytest.raises(ValueError, match="part_bytes"):
        list(line_parts([text], 0))


def test_lines_within_keep_a_ranges_articles_only() -> None:
    data = b"5\ta\n6\tb\nbroken\n7\tc\n8\td\n"
    # A line without a number goes with the line before it, across blocks too.
    for blocks in ((data,), (b"5\ta\n6\tb\nbr", b"oken\n7\tc\n8\td\n")):
        assert lines_within(blocks, 6, 100) == (b"6\tb\nbroken\n7\tc\n8\td\n",)
        assert lines_within(blocks, 9, 100) == ()
        assert lines_within(blocks, 1, 100) == (data,)
        assert lines_within(blocks, 1, 6) == (b"5\ta\n6\tb\nbroken\n",)
        assert lines_within(blocks, 6, 7) == (b"6\tb\nbroken\n7\tc\n",)
        assert lines_within(blocks, 1, 4) == ()


def test_a_chunk_straddling_a_ranges_ends_gives_only_the_ranges_articles() -> None:
    text = b"".join(b"%d\tline %d\n" % (n, n) for n in (98, 99, 100, 103, 104, 105))
    chunk = Piece(97, 107, (text,))
    # The range 100..104, nothing indexed yet: the range before's tail and the
    # next range's head are cut off, and the resume point stops at 105.
    assert within(chunk, 100, 104) == Piece(
        100, 105, (b"100\tline 100\n103\tline 103\n104\tline 104\n",)
    )
    # Indexed to 103 already: only 103 and 104.
    assert within(chunk, 103, 104) == Piece(103, 105, (b"103\tline 103\n104\tline 104\n",))
    # A chunk inside the range is taken as it is; a gap is cut like a chunk.
    assert within(chunk, 90, 200) == chunk
    assert within(Piece(101, 201), 100, 150) == Piece(101, 151)
    # Nothing left: all of it before the resume point, or the range is indexed to its end.
    assert within(chunk, 107, 200) is None
    assert within(chunk, 105, 104) is None
    assert within(Piece(104, 105, end=True), 105, 104) is None
    # The end flag stays with the piece.
    assert within(Piece(104, 105, end=True), 104, 104) == Piece(104, 105, end=True)


# --- under the supervisor -----------------------------------------------------------


@pytest.mark.trio
async def test_supervised_edges_halt_on_a_rejected_token(
    coordinator: Coordinator, tmp_path: Path
) -> None:
    """Two worker processes get 401, exit 78, and the supervisor halts instead of looping."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.update(
        UIDX_HOME=str(tmp_path / "edge-home"),
        COORDINATOR_URL=coordinator.url,
        NODE_TOKEN="not-a-token-of-this-coordinator",
    )
    env.pop("NOTIFY_SOCKET", None)
    with trio.fail_after(DEADLINE_SECONDS):
        done = await trio.run_process(
            [sys.executable, "-m", "usenet_indexer", "edge", "--processes", "2"],
            env=env,
            capture_stderr=True,
            check=False,
        )
    log = done.stderr.decode()
    assert done.returncode == 78, log
    assert log.count("refused this node's token") == 1, log
    assert log.count("HTTP 401") == 1, log  # the build loop's refusal is not said again
    assert "halts: worker" in log, log
    assert "refused this node's token: lease: HTTP 401" in log, log
    assert "not-a-token-of-this-coordinator" not in log


@attrs.define
class RangesCoordinator:
    """A FAKE node API leasing `ranges` ranges, whose first range's batch is only
    answered once lease number `hold_until_lease` is asked for: an edge that
    waited for that post before leasing again would never get there."""

    frames: list[Frame]
    ranges: int = 2
    hold_until_lease: int = 2
    calls: list[str] = attrs.field(factory=list)
    _leases: int = 0
    _held_lease: trio.Event = attrs.field(factory=trio.Event)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        *_, range_id, action = scope["path"].rsplit("/", 2)
        while (await receive()).get("more_body"):
            pass
        status, answer = 200, b"{}"
        if action == "lease":
            self._leases += 1
            if self._leases > self.ranges:
                status, answer = 204, b""
            else:
                lease = {"id": self._leases, "group": "alt.binaries.fake", "first": 1,
                         "last": 3, "next": 1, "epoch": 1}  # fmt: skip
                rules = [rule.to_wire() for rule in DEFAULT_RULES]
                answer = httpx.Response(200, json={"range": lease, "rules": rules}).content
                if self._leases == self.hold_until_lease:
                    self._held_lease.set()
        elif action == "stream":
            answer = b"".join(encode_frame(frame) for frame in self.frames)
        elif action == "batches":
            if range_id == "1":
                await self._held_lease.wait()
            answer = b'{"stored": true, "already": false}'
        self.calls.append(f"{action} {range_id}" if action != "lease" else action)
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": answer})


@pytest.mark.trio
async def test_the_next_range_is_leased_while_the_last_post_of_one_is_in_flight(
    settings: Settings,
) -> None:
    payload = zlib.compress(fake_lines())
    fake = RangesCoordinator([Frame.chunk(1, 3, payload, codec=Codec.ZLIB), Frame.end(3)])
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=fake_options(ranges=2), transport=httpx.ASGITransport(app=fake)
        )
    assert totals == EdgeTotals(finished=2)
    # Range 1's batch is answered after the second lease; both ranges finish.
    assert fake.calls.index("lease", 1) < fake.calls.index("batches 1")
    assert fake.calls.count("finish 1") == fake.calls.count("finish 2") == 1


@pytest.mark.trio
async def test_a_range_is_leased_once_the_stream_before_it_ended_not_after_its_indexing(
    settings: Settings,
) -> None:
    # Range 1 stays in its tail (its post unanswered) until the third lease.
    # Range 2, indexed meanwhile, cannot hand over its last batch before
    # range 1 leaves the tail: an edge that leased range 3 only after range 2's
    # indexing would wait for ever; one that leases once range 2's stream has
    # ended gets there.
    payload = zlib.compress(fake_lines())
    frames = [Frame.chunk(1, 3, payload, codec=Codec.ZLIB), Frame.end(3)]
    fake = RangesCoordinator(frames, ranges=3, hold_until_lease=3)
    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(
            settings, options=fake_options(ranges=3), transport=httpx.ASGITransport(app=fake)
        )
    assert totals == EdgeTotals(finished=3)
    assert fake.calls.index("lease", fake.calls.index("stream 2")) < fake.calls.index("batches 2")
    # Each range's batch is posted once.
    assert [fake.calls.count(f"batches {n}") for n in (1, 2, 3)] == [1, 1, 1]


@pytest.mark.trio
async def test_a_range_leased_ahead_feeds_nothing_until_the_range_before_is_indexed() -> None:
    # Two chunks: the first is taken by the indexing loop (which then waits),
    # the second is read and inflated, and stays unfed; the frame reader, a
    # frame ahead, reads the END meanwhile, so the range says it has streamed.
    lines = fake_lines().split(b"\n")
    frames = [
        Frame.chunk(1, 2, zlib.compress(b"\n".join(lines[:2])), codec=Codec.ZLIB),
        Frame.chunk(3, 3, zlib.compress(b"\n".join(lines[2:])), codec=Codec.ZLIB),
        Frame.end(3),
    ]
    fake = RangesCoordinator(frames, ranges=1, hold_until_lease=1)
    options = fake_options()
    before_indexed = trio.Event()
    transport = httpx.ASGITransport(app=fake)
    with trio.fail_after(DEADLINE_SECONDS):
        async with open_client(
            options.coordinator_url, options.node_token, retry=FAST_RETRY, transport=transport
        ) as client:
            lease = await client.lease()
            assert lease is not None
            runner = RangeRunner(client, lease, options, trio.Event(), after=before_indexed)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(runner.run)
                await runner.streamed.wait()
                await trio.testing.wait_all_tasks_blocked()
                # Streamed to its END, but nothing indexed: no batch, not done.
                assert "batches 1" not in fake.calls
                assert not runner.indexed.is_set()
                before_indexed.set()
    assert runner.report is not None
    assert runner.report.outcome is Outcome.FINISHED
    assert fake.calls.count("batches 1") == fake.calls.count("finish 1") == 1


def test_the_gc_policy_turns_automatic_collection_off_and_collects_on_demand() -> None:
    import gc
    import weakref

    from usenet_indexer.gcpolicy import collect_all, no_cyclic_gc

    class Node:
        other: object = None

    was = gc.isenabled()
    with no_cyclic_gc():
        assert not gc.isenabled()
        first, second = Node(), Node()
        first.other, second.other = second, first  # a cycle only the collector frees
        gone = weakref.ref(first)
        del first, second
        assert gone() is not None
        collect_all()
        assert gone() is None
    assert gc.isenabled() == was
