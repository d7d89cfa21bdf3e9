"""The node API end to end: real PostgreSQL, real hypercorn on 127.0.0.1:0, httpx.

Every test runs under pytest-trio with a deadline. Nothing waits on a real
sleep: streams are driven by what the test reads (a keepalive arrives, then
the test lands the chunk), with keepalive and poll intervals of milliseconds.
"""

from __future__ import annotations

import errno
import gzip
import logging
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import httpx
import msgpack
import psycopg
import pytest
import trio
from psycopg_pool import ConnectionPool
from real_deadline import given_up_after
from s3_fixtures import TestSpool, land_chunk, s3_settings

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_builder import CatalogDue
from usenet_indexer.coordinator.http.node import (
    HOLD_MAX_SECONDS,
    INCOMPLETE,
    LEASE_WAIT_MAX_SECONDS,
    PREFIX,
    REFUSALS_TO_PARK,
    ApiOptions,
    _asked_wait,
)
from usenet_indexer.coordinator.landings import APPLICATION_NAME, Landings
from usenet_indexer.coordinator.server import GRACEFUL_SECONDS, serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.coordinator.stream import StreamTiming
from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.rules import DEFAULT_RULES, rule_from_wire
from usenet_indexer.spool.s3 import S3Spool
from usenet_indexer.spool.store import FolderSpool, open_spool
from usenet_indexer.store.batches import BatchStore, Stored
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.store.ranges import Look, RangeStore
from usenet_indexer.store.spool import SpoolChunk
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.testing.objectstore import ObjectStore
from usenet_indexer.testing.postgres import scratch_dir
from usenet_indexer.wire.batchwire import WIRE_VERSION, compress_body, encode_batch
from usenet_indexer.wire.frames import CLOSED, Codec, Frame, FrameDecoder, FrameKind
from usenet_indexer.wire.packed import PackedBatch, pack_batch

# A refused body is answered at once and its connection closed: httpcore
# then stops sending, leaving httpx's body generator unfinished, and trio
# warns when it is collected. That is the client's business, not a leak here.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator 'httpx\._content\.\w+\.__aiter__' was garbage collected"
    ":ResourceWarning"
)

# Far above what each test needs (well under a second, most of them).
DEADLINE_SECONDS = 30
# initdb and two starts of a durable cluster on a slow disk.
CLUSTER_DEADLINE_SECONDS = 180
GROUP = "alt.binaries.test"

# Streams in tests poll and keep alive every few milliseconds.
FAST_STREAM = StreamTiming(keepalive_seconds=0.01, poll_seconds=0.005)


# --- fixtures and helpers ---------------------------------------------------------


# settings, pool and stores: tests/coordinator_fixtures.py


@pytest.fixture
def group_id(pool: ConnectionPool) -> int:
    return GroupStore(pool).add(GROUP)


@pytest.fixture
def token(stores: Stores) -> str:
    return stores.nodes.create("edge-1")


@pytest.fixture
def other_token(stores: Stores) -> str:
    return stores.nodes.create("edge-2")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def start_api(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    options: ApiOptions | None = None,
    landings: Landings | None = None,
) -> str:
    """The base URL of the node API served in `nursery` (cancelled with the test)."""
    serving = partial(serve, settings, stores, options=options, landings=landings)
    host, port = await nursery.start(serving)
    return f"http://{host}:{port}/api/v1/node/"


def plan(pool: ConnectionPool, group_id: int, first: int, last: int) -> int:
    (range_id,) = RangeStore(pool).plan(group_id, first, last, last - first + 1)
    return range_id


def add_gap(stores: Stores, group_id: int, first: int, last: int) -> None:
    stores.spool.add(group_id, SpoolChunk(first, last, Codec.NONE, None, 0), 0)


def snapshot(url: str, *, but: tuple[str, ...] = ()) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (but those named), to show that nothing changed."""
    with psycopg.connect(url) as conn:
        tables = [
            row[0]
            for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            if row[0] not in but
        ]
        assert "ranges" in tables
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY {t}::text").fetchall() for t in tables}


def count(url: str, sql: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


@attrs.define
class FrameReader:
    """Reads a stream response frame by frame."""

    raw: AsyncIterator[bytes]
    decoder: FrameDecoder = attrs.field(factory=lambda: FrameDecoder(max_payload_bytes=1 << 26))

    async def next(self) -> Frame:
        while True:
            got = self.decoder.next_frame()
            if isinstance(got, Frame):
                return got
            assert got is not CLOSED, "the stream ended"
            data = await anext(self.raw, None)
            if data is None:
                self.decoder.receive_eof()
            else:
                self.decoder.receive_data(data)

    async def rest(self) -> list[Frame]:
        """The frames up to END or ERROR; the stream must then end cleanly."""
        frames = [await self.next()]
        while frames[-1].kind not in {FrameKind.END, FrameKind.ERROR}:
            frames.append(await self.next())
        async for data in self.raw:
            self.decoder.receive_data(data)
        self.decoder.receive_eof()
        assert self.decoder.next_frame() is CLOSED
        return frames


def overview(articles: int, first: int) -> list[bytes]:
    """Generated overview lines, mostly real releases (few executable floods)."""
    config = GeneratorConfig(
        articles=articles, first_article=first, group=GROUP, seed=7, exe_flood_weight=0.3
    )
    return list(generate(config).lines)


def article_of(line: bytes) -> int:
    return int(line.split(b"\t", 1)[0])


def batch_body(batch: Batch, range_id: int, epoch: int) -> bytes:
    return compress_body(encode_batch(pack_batch(batch), range_id=range_id, epoch=epoch))


def empty_batch(first: int = 1000, next_: int = 1500, group: str = GROUP) -> Batch:
    return Batch(
        group=group,
        first=first,
        next=next_,
        releases=(),
        rule_counts=(),
        probe_candidates=(),
        lines=0,
        skipped=(),
    )


GZIP: dict[str, str] = {"Content-Encoding": "gzip"}


# --- the round trip ------------------------------------------------------------------


@pytest.mark.trio
async def test_lease_stream_batches_finish_round_trip(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    group_id: int,
    token: str,
    pg_url: str,
    caplog: pytest.LogCaptureFixture,
    any_spool: TestSpool,
) -> None:
    caplog.set_level(logging.DEBUG)
    lines = overview(600, 1000)
    last = article_of(lines[-1])
    range_id = plan(pool, group_id, 1000, last)
    head = [line for line in lines if article_of(line) < 1200]
    tail = [line for line in lines if article_of(line) >= 1250]
    chunk_a = land_chunk(any_spool.store, stores.spool, GROUP, group_id, head, 1000, 1199)
    add_gap(stores, group_id, 1200, 1249)
    chunk_b = land_chunk(any_spool.store, stores.spool, GROUP, group_id, tail, 1250, last)

    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, any_spool.settings(settings), stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            leased = await client.post("lease")
            assert leased.status_code == 200
            lease = leased.json()
            assert lease["range"] == {
                "id": range_id, "group": GROUP, "first": 1000, "last": last, "next": 1000,
                "epoch": 1,
            }  # fmt: skip
            assert lease["rules"] == [rule.to_wire() for rule in DEFAULT_RULES]
            # The edge heartbeats within this coordinator's TTL, whatever its own setting.
            assert lease["ttl_seconds"] == settings.lease_ttl_seconds

            async with client.stream("GET", f"ranges/{range_id}/stream") as response:
                assert response.status_code == 200
                assert response.headers["content-type"] == "application/octet-stream"
                frames = await any_spool.as_edge_reads(
                    await FrameReader(response.aiter_raw()).rest()
                )
            assert frames == [
                any_spool.chunk_frame(chunk_a),
                Frame.gap(1200, 1249),
                any_spool.chunk_frame(chunk_b),
                Frame.end(last),
            ]

            rules = [rule_from_wire(rule) for rule in lease["rules"]]
            indexer = RangeIndexer(GROUP, 1000, rules)
            indexer.add_data(zlib.decompress(frames[0].payload), 1200)
            indexer.add_data(b"", 1250)  # the gap
            first_batch = indexer.take()
            indexer.add_data(zlib.decompress(frames[2].payload), last + 1)
            second_batch = indexer.finish()
            epoch = lease["range"]["epoch"]

            stored = await client.post(
                f"ranges/{range_id}/batches",
                content=batch_body(first_batch, range_id, epoch),
                headers=GZIP,
            )
            assert stored.status_code == 200
            assert stored.json()["stored"] is True
            assert stored.json()["already"] is False

            early = await client.post(f"ranges/{range_id}/finish", json={"epoch": epoch})
            assert (early.status_code, early.json()) == (409, {"error": INCOMPLETE})
            beat = await client.post(f"ranges/{range_id}/heartbeat", json={"epoch": epoch})
            assert (beat.status_code, beat.json()) == (200, {})

            second = batch_body(second_batch, range_id, epoch)
            stored = await client.post(f"ranges/{range_id}/batches", content=second, headers=GZIP)
            assert stored.status_code == 200
            answer = stored.json()
            assert answer["already"] is False
            assert answer["release_chunks"] > 0
            assert answer["segments"] > 0
            before_retry = snapshot(pg_url, but=("nodes",))

            # The reply was lost: the edge sends the same batch again.
            retried = await client.post(f"ranges/{range_id}/batches", content=second, headers=GZIP)
            assert retried.status_code == 200
            assert retried.json() == {**answer, "already": True}
            assert snapshot(pg_url, but=("nodes",)) == before_retry

            done = await client.post(f"ranges/{range_id}/finish", json={"epoch": epoch})
            assert (done.status_code, done.json()) == (200, {})
            again = await client.post(f"ranges/{range_id}/finish", json={"epoch": epoch})
            assert again.status_code == 409

    assert count(pg_url, f"SELECT count(*) FROM ranges WHERE id = {range_id} AND state = 'done'")
    assert count(pg_url, "SELECT count(*) FROM batches") == 2
    assert count(pg_url, "SELECT sum(chunks) FROM releases") >= answer["release_chunks"]
    assert token not in caplog.text
    assert f"stored batch 1250..{last} of range {range_id} epoch 1" in caplog.text


@pytest.mark.trio
async def test_lease_without_work_is_204(
    nursery: trio.Nursery, settings: Settings, stores: Stores, token: str
) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            response = await client.post("lease")
    assert (response.status_code, response.content) == (204, b"")


# --- who may call --------------------------------------------------------------------


@pytest.mark.trio
async def test_bad_missing_and_revoked_tokens_are_401_and_change_nothing(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    group_id: int,
    token: str,
    pg_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    range_id = plan(pool, group_id, 1, 100)
    revoked = stores.nodes.create("edge-revoked")
    assert stores.nodes.revoke("edge-revoked")
    unknown = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    headers: list[dict[str, str]] = [
        {},
        {"Authorization": ""},
        {"Authorization": f"Basic {token}"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer not a token"},
        {"Authorization": "Bearer " + "x" * 5000},
        bearer(unknown),
        bearer(revoked),
    ]
    calls = [
        ("POST", "lease", b""),
        ("GET", f"ranges/{range_id}/stream", b""),
        ("POST", f"ranges/{range_id}/batches", compress_body(b"\x80")),
        ("POST", f"ranges/{range_id}/heartbeat", b'{"epoch": 1}'),
        ("POST", f"ranges/{range_id}/finish", b'{"epoch": 1}'),
        ("POST", f"ranges/{range_id}/release", b'{"epoch": 1}'),
    ]
    before = snapshot(pg_url)
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url) as client:
            for header in headers:
                for method, path, body in calls:
                    response = await client.request(method, path, headers=header, content=body)
                    assert response.status_code == 401, (header, path)
                    assert response.headers["www-authenticate"].startswith("Bearer")
                    assert "error" in response.json()
    assert snapshot(pg_url) == before
    assert token[:-4] not in caplog.text
    assert revoked not in caplog.text


@pytest.mark.trio
async def test_revoking_a_node_stops_its_open_stream_and_gives_its_range_back(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    group_id: int,
    token: str,
    leased: tuple[int, int],
    tmp_path: Path,
) -> None:
    """`uidx nodes revoke`: "its edges are refused from now on", also the stream it
    opened before (which would hand it the range's headers to the end), and the
    range it held is leased again at once, not after lease_ttl_seconds."""
    range_id, _ = leased
    options = attrs.evolve(ApiOptions.from_settings(settings), stream=FAST_STREAM)
    other = stores.nodes.authenticate(stores.nodes.create("edge-2"))
    assert other is not None
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores, options)
        async with (
            httpx.AsyncClient(base_url=url, headers=bearer(token)) as client,
            client.stream("GET", f"ranges/{range_id}/stream") as response,
        ):
            reader = FrameReader(response.aiter_raw())
            assert await reader.next() == Frame.keepalive()
            assert stores.nodes.revoke("edge-1")
            assert stores.nodes.list()[0].leases == 0
            await trio.to_thread.run_sync(
                land_chunk, FolderSpool(tmp_path / "spool"), stores.spool, GROUP, group_id,
                overview(50, 1000), 1000, 1999,
            )  # fmt: skip
            frames = await reader.rest()
    assert set(frames[:-1]) <= {Frame.keepalive()}
    assert frames[-1] == Frame.error(f"the lease of range {range_id} is lost")
    lease = stores.ranges.lease(other, 60)
    assert lease is not None
    assert lease.range_id == range_id


def test_a_revoked_node_is_leased_nothing(
    stores: Stores, pool: ConnectionPool, group_id: int
) -> None:
    """A lease call that waits for work (`lease?wait=30`) was authenticated when it began:
    the node revoked meanwhile must not be leased the ranges planned after."""
    node = stores.nodes.authenticate(stores.nodes.create("edge-1"))
    assert node is not None
    assert stores.nodes.revoke("edge-1")
    plan(pool, group_id, 1000, 1999)
    assert stores.ranges.lease(node, 60) is None
    assert not stores.nodes.revoke("edge-1")  # revoked already


@pytest.mark.trio
async def test_another_nodes_range_is_409_and_changes_nothing(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    group_id: int,
    token: str,
    other_token: str,
    pg_url: str,
    any_spool: TestSpool,
) -> None:
    range_id = plan(pool, group_id, 1000, 1999)
    land_chunk(any_spool.store, stores.spool, GROUP, group_id, overview(50, 1000), 1000, 1999)
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, any_spool.settings(settings), stores)
        async with (
            httpx.AsyncClient(base_url=url, headers=bearer(token)) as mine,
            httpx.AsyncClient(base_url=url, headers=bearer(other_token)) as theirs,
        ):
            epoch = (await mine.post("lease")).json()["range"]["epoch"]
            batch = empty_batch()
            before = snapshot(pg_url, but=("nodes",))
            stream = await theirs.get(f"ranges/{range_id}/stream")
            assert stream.status_code == 409
            assert stream.json() == {"error": f"range {range_id} is not leased to this node"}
            for action in ("heartbeat", "finish", "release"):
                response = await theirs.post(f"ranges/{range_id}/{action}", json={"epoch": epoch})
                assert response.status_code == 409, action
                assert "error" in response.json()
            body = batch_body(batch, range_id, epoch)
            response = await theirs.post(f"ranges/{range_id}/batches", content=body, headers=GZIP)
            assert response.status_code == 409
            assert snapshot(pg_url, but=("nodes",)) == before
            # And the holder still can.
            response = await mine.post(f"ranges/{range_id}/batches", content=body, headers=GZIP)
            assert response.status_code == 200


@pytest.mark.trio
async def test_a_stale_epoch_batch_is_409_and_stores_nothing(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    group_id: int,
    token: str,
    other_token: str,
    pg_url: str,
) -> None:
    range_id = plan(pool, group_id, 1000, 1999)
    lines = overview(200, 1000)
    indexer = RangeIndexer(GROUP, 1000)
    indexer.add_data(b"\n".join(lines), article_of(lines[-1]) + 1)
    batch = indexer.take()
    assert batch.releases
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with (
            httpx.AsyncClient(base_url=url, headers=bearer(token)) as slow,
            httpx.AsyncClient(base_url=url, headers=bearer(other_token)) as next_node,
        ):
            old_epoch = (await slow.post("lease")).json()["range"]["epoch"]
            # The slow node's lease expires; the next node takes the range over.
            with psycopg.connect(pg_url) as conn:
                conn.execute("UPDATE ranges SET deadline = now() - interval '1 second'")
            takeover = (await next_node.post("lease")).json()["range"]
            assert (takeover["id"], takeover["epoch"]) == (range_id, old_epoch + 1)
            before = snapshot(pg_url, but=("nodes",))
            body = batch_body(batch, range_id, old_epoch)
            response = await slow.post(f"ranges/{range_id}/batches", content=body, headers=GZIP)
            assert response.status_code == 409
            assert "error" in response.json()
            for action in ("heartbeat", "finish", "release"):
                stale = await slow.post(f"ranges/{range_id}/{action}", json={"epoch": old_epoch})
                assert stale.status_code == 409, action
            stream = await slow.get(f"ranges/{range_id}/stream")
            assert stream.status_code == 409
    assert snapshot(pg_url, but=("nodes",)) == before


@attrs.define(eq=False)
class GatedBatches(BatchStore):
    """The coordinator's batch store; its `gated`-th call (the request authenticated,
    its body read) tells the test (`asked`), waits for `gate` before it stores (in
    its worker thread: the post is in flight meanwhile), and tells the test once it
    has stored or refused (`done`)."""

    gated: int = 1
    gate: trio.Event = attrs.field(factory=trio.Event)
    asked: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    calls: int = 0

    def store(
        self,
        node_id: int,
        range_id: int,
        epoch: int,
        batch: PackedBatch,
        body_bytes: int,
        ttl_seconds: float,
    ) -> Stored:
        self.calls += 1
        if self.calls != self.gated:
            return super().store(node_id, range_id, epoch, batch, body_bytes, ttl_seconds)
        trio.from_thread.run_sync(self.asked.set)
        trio.from_thread.run(self.gate.wait)
        try:
            return super().store(node_id, range_id, epoch, batch, body_bytes, ttl_seconds)
        finally:
            trio.from_thread.run_sync(self.done.set)


@pytest.mark.trio
async def test_a_batch_in_flight_as_its_node_is_revoked_is_409_and_stores_nothing(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    group_id: int,
    token: str,
    pg_url: str,
) -> None:
    """`uidx nodes revoke` while a batch of the node is on its way in (authenticated,
    its body uploading or being decoded): the range is given back with the token, and
    the batch finds it no longer held."""
    range_id = plan(pool, group_id, 1000, 1999)
    lines = overview(200, 1000)
    indexer = RangeIndexer(GROUP, 1000)
    indexer.add_data(b"\n".join(lines), article_of(lines[-1]) + 1)
    held = GatedBatches(pool)
    answers: list[httpx.Response] = []
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, attrs.evolve(stores, batches=held))
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            epoch = (await client.post("lease")).json()["range"]["epoch"]
            body = batch_body(indexer.take(), range_id, epoch)

            async def post() -> None:
                answers.append(
                    await client.post(f"ranges/{range_id}/batches", content=body, headers=GZIP)
                )

            async with trio.open_nursery() as posting:
                posting.start_soon(post)
                await held.asked.wait()
                assert await trio.to_thread.run_sync(stores.nodes.revoke, "edge-1")
                held.gate.set()
    [answer] = answers
    assert answer.status_code == 409
    assert count(pg_url, "SELECT count(*) FROM batches") == 0
    assert count(pg_url, "SELECT count(*) FROM releases") == 0
    assert count(pg_url, "SELECT count(*) FROM ranges WHERE state = 'planned'") == 1


# --- bad bodies -------------------------------------------------------------------------


@pytest.fixture
def leased(stores: Stores, pool: ConnectionPool, group_id: int, token: str) -> tuple[int, int]:
    """(range id, epoch) of a range 1000..1999 leased to the `token` node."""
    range_id = plan(pool, group_id, 1000, 1999)
    node_id = stores.nodes.authenticate(token)
    assert node_id is not None
    lease = stores.ranges.lease(node_id, 60)
    assert lease is not None
    return range_id, lease.epoch


def gzip_bomb() -> bytes:
    """One gzip member of 1 GiB of zeros, in about 1 MB, built in milliseconds.

    A full flush ends each piece on a byte boundary with no reference to
    what came before, so repeating one compressed MiB gives valid deflate
    data for any number of MiB.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = compressor.compress(bytes(1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    final_block = zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    # zlib.crc32 over 1 GiB of zeros (0.7 s to compute; the value does not change).
    trailer = struct.pack("<II", 0x5B64C2B0, (1 << 30) & 0xFFFFFFFF)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + piece * 1024 + final_block + trailer


@pytest.mark.trio
async def test_bad_batch_bodies_get_4xx_and_store_nothing(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    token: str,
    leased: tuple[int, int],
    pg_url: str,
) -> None:
    range_id, epoch = leased
    settings = attrs.evolve(settings, max_body_bytes=2_000_000, max_inflated_bytes=1 << 20)
    good = encode_batch(pack_batch(empty_batch()), range_id=range_id, epoch=epoch)
    nul_group = encode_batch(
        pack_batch(empty_batch(group="a\x00b")), range_id=range_id, epoch=epoch
    )
    bad_fragment = msgpack.unpackb(good)
    bad_fragment["releases"] = [
        {
            "key": bytes(16),
            "head_name": None,
            "poster": "someone",
            "groups": [],
            "files_announced": None,
            "name": "a",
            "fragment": b"\x02\x78\x9c not deflate",
        }
    ]
    cases: list[tuple[int, bytes, dict[str, str], str]] = [
        (413, gzip.compress(bytes(2_500_000), compresslevel=0), GZIP, "over the cap of 2000000"),
        (413, gzip_bomb(), GZIP, "inflates to over 1048576"),
        (415, compress_body(good), {"Content-Encoding": "br"}, "not supported"),
        (415, compress_body(good), {"Content-Encoding": "gzip, gzip"}, "not supported"),
        (400, compress_body(good)[:-20], GZIP, "truncated"),
        (400, b"\x1f\x8b not gzip at all", GZIP, "corrupt"),
        (422, b"\xc1\xc1\xc1", {}, "not a msgpack batch"),
        (422, msgpack.packb({"v": WIRE_VERSION}), {}, "missing"),
        (422, msgpack.packb(bad_fragment), {}, "releases[0].fragment: does not inflate"),
        (422, msgpack.packb([1, 2, 3]), {}, "expected a map"),
        (422, nul_group, {}, "NUL"),
        (
            422,
            encode_batch(pack_batch(empty_batch()), range_id=range_id + 1, epoch=epoch),
            {},
            "range",
        ),
        # The range is of GROUP: a batch of another group is not its batch (not
        # counted against the range either: the snapshot below holds its refusals).
        (
            422,
            encode_batch(
                pack_batch(empty_batch(group="alt.binaries.other")), range_id=range_id, epoch=epoch
            ),
            {},
            f"group: the batch is of alt.binaries.other, range {range_id} is of {GROUP}",
        ),
    ]
    # A batch past the range's end is refused too (422), and counted on the
    # range: tests/test_range_ends.py.
    before = snapshot(pg_url, but=("nodes",))
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            tracemalloc.start()
            try:
                for status, body, headers, message in cases:
                    path = f"ranges/{range_id}/batches"
                    response = await client.post(path, content=body, headers=headers)
                    assert response.status_code == status, (message, response.text)
                    assert message in response.json()["error"]
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
    # The bomb inflates to at most the 1 MiB cap (+1 byte) in the server.
    assert peak < 16 << 20
    assert snapshot(pg_url, but=("nodes",)) == before


@pytest.mark.trio
async def test_a_body_over_the_cap_is_refused_without_reading_it(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    token: str,
    leased: tuple[int, int],
) -> None:
    range_id, _ = leased
    settings = attrs.evolve(settings, max_body_bytes=1000)

    async def chunked() -> AsyncIterator[bytes]:
        # No Content-Length: the server counts what arrives.
        for _ in range(3):
            yield bytes(600)

    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            path = f"ranges/{range_id}/batches"
            announced = await client.post(path, content=bytes(5000), headers=GZIP)
            assert announced.status_code == 413
            assert "over the cap of 1000" in announced.json()["error"]
            streamed = await client.post(path, content=chunked(), headers=GZIP)
            assert streamed.status_code == 413


@pytest.mark.trio
async def test_bad_control_bodies_are_400_or_422(
    nursery: trio.Nursery, settings: Settings, stores: Stores, token: str, leased: tuple[int, int]
) -> None:
    range_id, epoch = leased
    cases: list[tuple[int, bytes]] = [
        (400, b""),
        (400, b"{epoch: 1}"),
        (422, b"[1]"),
        (422, b"{}"),
        (422, b'{"epoch": "1"}'),
        (422, b'{"epoch": true}'),
        (422, b'{"epoch": 1.0}'),
        (422, b'{"epoch": -1}'),
        (422, b'{"epoch": 100000000000000000000000}'),
        (422, b'{"epoch": 1, "node": 2}'),
        # Only a release may say it is given back as its node stops, and only as true|false.
        (422, b'{"epoch": 1, "stopping": 1}'),
        (422, b'{"epoch": 1, "stopping": "yes"}'),
        (422, b'{"epoch": 1, "stopping": null}'),
        (413, b'{"epoch": 1, "pad": "' + b"x" * 5000 + b'"}'),
    ]
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            for action in ("heartbeat", "finish", "release"):
                for status, body in cases:
                    response = await client.post(f"ranges/{range_id}/{action}", content=body)
                    assert response.status_code == status, (action, body[:40])
                    assert "error" in response.json()
            ok = await client.post(f"ranges/{range_id}/heartbeat", json={"epoch": epoch})
            assert ok.status_code == 200


@pytest.mark.trio
async def test_a_control_body_that_repeats_a_key_is_refused_naming_it(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    token: str,
    leased: tuple[int, int],
    pg_url: str,
) -> None:
    # JSON readers differ on a repeated key (the first, the last, an error): the
    # node API reads none of them, whichever value would make the call succeed.
    range_id, epoch = leased
    chunk = '"first": 1000, "last": 1099, "problem": "gone"'
    cases = [
        ("heartbeat", f'{{"epoch": 99, "epoch": {epoch}}}', "epoch"),
        ("finish", f'{{"epoch": {epoch}, "epoch": {epoch}}}', "epoch"),
        ("release", f'{{"epoch": {epoch}, "unreadable": {{{chunk}, "last": 1000}}}}', "last"),
        ("release", f'{{"epoch": [[[[1]]]], "epoch": {epoch}}}', "epoch"),
    ]
    before = snapshot(pg_url, but=("nodes",))
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            for action, body, key in cases:
                response = await client.post(f"ranges/{range_id}/{action}", content=body)
                assert response.status_code == 422, (action, body)
                assert response.json()["error"] == f"the body repeats the key '{key}'"
            # Nested deeper than json reads (orjson reads it): refused all the same.
            deep = f'{{"epoch": {"[" * 1020}{"]" * 1020}, "epoch": {epoch}}}'
            response = await client.post(f"ranges/{range_id}/heartbeat", content=deep)
            assert response.status_code == 422
            assert response.json()["error"] == "the body nests too deep"
    assert snapshot(pg_url, but=("nodes",)) == before


@pytest.mark.trio
async def test_a_release_naming_an_unreadable_chunk_is_checked_then_counted(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    token: str,
    leased: tuple[int, int],
) -> None:
    # An edge gives a range back because one of its chunks could not be read
    # (the store's 404 for its link, bytes that do not inflate): a malformed
    # report, or one about articles outside the range, is 422 and changes
    # nothing; a good one counts against the range and gives it back.
    range_id, epoch = leased
    chunk = {"first": 1200, "last": 1399, "problem": "chunk: 404 NoSuchKey"}
    bad: list[dict[str, object]] = [
        {"epoch": epoch, "unreadable": None},
        {"epoch": epoch, "unreadable": [1200, 1399]},
        {"epoch": epoch, "unreadable": {"first": 1200, "last": 1399}},
        {"epoch": epoch, "unreadable": {**chunk, "why": "x"}},
        {"epoch": epoch, "unreadable": {**chunk, "first": "1200"}},
        {"epoch": epoch, "unreadable": {**chunk, "last": -1}},
        {"epoch": epoch, "unreadable": {**chunk, "first": 1400}},
        {"epoch": epoch, "unreadable": {**chunk, "problem": ""}},
        {"epoch": epoch, "unreadable": {**chunk, "problem": 404}},
        {"epoch": epoch, "unreadable": {**chunk, "problem": "x" * 1001}},
        # PostgreSQL text holds no NUL (it was a 500).
        {"epoch": epoch, "unreadable": {**chunk, "problem": "a\x00b"}},
        {"epoch": epoch, "unreadable": {**chunk, "first": 900}},
        {"epoch": epoch, "unreadable": {**chunk, "last": 2000}},
    ]
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            for body in bad:
                response = await client.post(f"ranges/{range_id}/release", json=body)
                assert response.status_code == 422, body
                assert "error" in response.json()
            # Only a release says why: a heartbeat naming a chunk is refused too.
            beat = {"epoch": epoch, "unreadable": chunk}
            response = await client.post(f"ranges/{range_id}/heartbeat", json=beat)
            assert response.status_code == 422
            assert ranges_row(pool, range_id) == ("leased", 0, None)
            response = await client.post(
                f"ranges/{range_id}/release", json={"epoch": epoch, "unreadable": chunk}
            )
            assert response.status_code == 200
    state, refusals, refusal = ranges_row(pool, range_id)
    assert (state, refusals) == ("planned", 1)
    assert refusal is not None
    assert "spool chunk 1200..1399 cannot be read by node" in refusal
    assert refusal.endswith(": chunk: 404 NoSuchKey")


@pytest.mark.trio
async def test_a_chunk_the_store_says_is_gone_is_forgotten_not_counted(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    token: str,
    group_id: int,
    leased: tuple[int, int],
    any_spool: TestSpool,
) -> None:
    """An edge gives a range back because a chunk's link answered 404 (an S3 object
    deleted, a spool lost or not restored with the database). The node API asks the
    store, not the edge's word: a chunk really gone that the range still needs has
    its index row forgotten (the prefetcher fetches it again) and counts nothing; one
    that is there (bytes that do not inflate, a 403), or one gone below the range's
    resume point (the sweep deleted it rightly), is counted and keeps its row. A lost
    chunk was counted three leases in a row and parked its range for good."""
    range_id, epoch = leased
    node_id = stores.nodes.authenticate(token)
    assert node_id is not None
    rows = [
        land_chunk(any_spool.store, stores.spool, GROUP, group_id, [b"%d\tx" % n], n, n + 199)
        for n in (1000, 1200, 1400)
    ]
    before, lost, there = rows
    assert lost.path is not None
    assert before.path is not None
    any_spool.store.delete([lost.path])

    def report(row: SpoolChunk, problem: str) -> dict[str, object]:
        return {"first": row.first, "last": row.last, "problem": problem}

    def spooled() -> list[int]:
        return [c.first for c in stores.spool.chunks_from(group_id, 1000, 1999, 10)]

    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, any_spool.settings(settings), stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            gone = {"epoch": epoch, "unreadable": report(lost, "chunk: HTTP 404: NoSuchKey")}
            response = await client.post(f"ranges/{range_id}/release", json=gone)
            assert response.status_code == 200
            assert response.json() == {}
            assert ranges_row(pool, range_id) == ("planned", 0, None)
            assert spooled() == [1000, 1400]

            # There, but its bytes do not inflate: counted, as before.
            lease = stores.ranges.lease(node_id, 60)
            assert lease is not None
            corrupt = {"epoch": lease.epoch, "unreadable": report(there, "corrupt: bad data")}
            response = await client.post(f"ranges/{range_id}/release", json=corrupt)
            assert response.status_code == 200
            state, refusals, _ = ranges_row(pool, range_id)
            assert (state, refusals) == ("planned", 1)
            assert spooled() == [1000, 1400]

            # Gone because the range moved past it (the sweep's delete): its row is
            # left to the sweep, never fetched again.
            lease = stores.ranges.lease(node_id, 60)
            assert lease is not None
            with pool.connection() as conn:
                conn.execute("UPDATE ranges SET resume = 1600 WHERE id = %s", (range_id,))
            any_spool.store.delete([before.path])
            swept = {"epoch": lease.epoch, "unreadable": report(before, "chunk: HTTP 404")}
            response = await client.post(f"ranges/{range_id}/release", json=swept)
            assert response.status_code == 200
            state, refusals, _ = ranges_row(pool, range_id)
            assert (state, refusals) == ("planned", 2)
            assert spooled() == [1000, 1400]


@attrs.define(eq=False)
class SlowRanges(RangeStore):
    """The real range store, each lease `seconds` late on the trio clock (a busy
    database; called from the worker thread the node API leases in)."""

    seconds: float = 0.0

    def look(self, node_id: int, ttl_seconds: float, stops: int | None) -> Look:
        trio.from_thread.run(trio.sleep, self.seconds)
        return super().look(node_id, ttl_seconds, stops)


@pytest.mark.trio
async def test_a_lease_call_whose_first_look_outlasts_its_wait_is_answered_not_a_500(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    token: str,
) -> None:
    """A lease call that may wait 1 s whose first look takes 5 s (a busy database):
    nothing to lease, its wait is over, so it is answered 204 at once, never with a wait
    of a negative time (which trio refuses: a 500), as a held build ask once was."""
    # Database threads run while the clock may jump: it jumps only after 0.1 s of real
    # idleness, well beyond a query of an idle database.
    autojump_clock.autojump_threshold = 0.1
    slow = attrs.evolve(stores, ranges=SlowRanges(stores.ranges.pool, seconds=5.0))
    with given_up_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, slow)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token), timeout=60) as client:
            started = trio.current_time()
            response = await client.post("lease", params={"wait": "1"})
    assert response.status_code == 204
    assert trio.current_time() - started < 6.0


@attrs.define(eq=False)
class LookedRanges(RangeStore):
    """The real range store, telling the test when a lease call has looked (from the
    worker thread the node API leases in)."""

    looked: trio.Event = attrs.field(factory=trio.Event)

    def look(self, node_id: int, ttl_seconds: float, stops: int | None) -> Look:
        found = super().look(node_id, ttl_seconds, stops)
        trio.from_thread.run_sync(self.looked.set)
        return found


async def held_lease_answer(
    client: httpx.AsyncClient, looks: LookedRanges, meanwhile: Callable[[], Awaitable[None]]
) -> httpx.Response:
    """The answer to a lease call held for work (`lease?wait=30`) in which `meanwhile`
    ran after its first look (which found nothing to lease); within 5 s, well inside
    the call's 30."""
    answers: list[httpx.Response] = []

    async def held() -> None:
        answers.append(await client.post("lease", params={"wait": "30"}))

    with trio.fail_after(5.0):
        async with trio.open_nursery() as calls:
            calls.start_soon(held)
            await looks.looked.wait()
            await meanwhile()
    (answer,) = answers
    return answer


def range_state(pool: ConnectionPool, range_id: int) -> tuple[object, ...]:
    """The range's state and holder."""
    with pool.connection() as conn:
        row = conn.execute("SELECT state, holder FROM ranges WHERE id = %s", (range_id,))
        found = row.fetchone()
    assert found is not None
    return tuple(found)


@pytest.mark.trio
@pytest.mark.parametrize("stopping", [True, False], ids=["stopping", "given-back"])
async def test_a_range_given_back_as_its_node_stops_is_not_leased_back_on_its_held_call(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    token: str,
    leased: tuple[int, int],
    stopping: bool,
) -> None:
    """An edge told to stop gives its range back (`"stopping": true`) while its lease call
    is still held open for new work (the coordinator has not yet seen that call's
    connection close): the held call ends at once with 204, and the range stays planned
    for the next node. It was leased straight back to the node going away, and when that
    answer went to a closed connection, stayed leased to nobody until its deadline. A
    range given back for another reason still goes to a waiting call; a new call of the
    same node (the edge started again) is leased the range."""
    range_id, epoch = leased
    looks = LookedRanges(pool)
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, attrs.evolve(stores, ranges=looks))
        async with httpx.AsyncClient(base_url=url, headers=bearer(token), timeout=60) as client:

            async def release() -> None:
                body = {"epoch": epoch, "stopping": True} if stopping else {"epoch": epoch}
                released = await client.post(f"ranges/{range_id}/release", json=body)
                assert released.status_code == 200

            answer = await held_lease_answer(client, looks, release)
            state = range_state(pool, range_id)
            if stopping:
                assert answer.status_code == 204
                assert state == ("planned", None)
                again = await client.post("lease")
                assert again.status_code == 200
                assert again.json()["range"]["id"] == range_id
            else:
                assert answer.status_code == 200
                assert answer.json()["range"]["id"] == range_id
                assert state[0] == "leased"


@pytest.mark.trio
async def test_a_lease_call_held_with_a_token_since_replaced_is_leased_nothing(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    token: str,
    leased: tuple[int, int],
) -> None:
    """`uidx nodes rotate` gives the node's ranges back, planned again: a lease call its
    old token (a leaked one) holds open was authenticated when it began, and took them
    straight back, for edges whose every later call is 401, so they stayed leased to
    nobody until their deadline. It ends with 204; an edge with the new token leases."""
    range_id, _ = leased
    looks = LookedRanges(pool)
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, attrs.evolve(stores, ranges=looks))
        async with httpx.AsyncClient(base_url=url, headers=bearer(token), timeout=60) as client:
            tokens: list[str] = []

            async def rotate() -> None:
                with stores.nodes.replacing_token("edge-1") as new_token:
                    tokens.append(new_token)

            answer = await held_lease_answer(client, looks, rotate)
            assert answer.status_code == 204
            assert range_state(pool, range_id) == ("planned", None)
            assert (await client.post("lease")).status_code == 401
        async with httpx.AsyncClient(base_url=url, headers=bearer(tokens[0])) as client:
            again = await client.post("lease")
    assert again.status_code == 200
    assert again.json()["range"]["id"] == range_id


@attrs.frozen
class OutOfDescriptorsToAsk(S3Spool):
    """A fake S3 spool, for a fault of the coordinator's host rather than of a chunk:
    its HEADs fail as the real one's do in a process out of descriptors (its
    connections to edges took its open-file limit): an OSError, EMFILE."""

    def exists(self, key: str) -> bool:
        error = errno.EMFILE
        raise OSError(error, os.strerror(error), f"s3://{self.bucket}/{self.key_of(key)}")


@pytest.mark.trio
async def test_a_lost_chunk_the_coordinator_has_no_descriptor_to_look_up_counts_nothing(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    token: str,
    group_id: int,
    leased: tuple[int, int],
    object_store: ObjectStore,
    s3_prefix: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An edge gives a range back because a chunk's link answered 404, and the coordinator
    cannot ask the store whether the chunk is gone: it is out of descriptors (or memory)
    for the HEAD. That is its host's limit, not the range's: nothing is counted (as a
    folder chunk it cannot open is not), nothing forgotten, release after release. It was
    counted as a chunk that is there: three such releases parked a healthy range."""
    range_id, epoch = leased
    node_id = stores.nodes.authenticate(token)
    assert node_id is not None
    s3 = s3_settings(tmp_path, object_store, s3_prefix)
    real = open_spool(s3)
    assert isinstance(real, S3Spool)
    chunk = land_chunk(real, stores.spool, GROUP, group_id, [b"1000\tx"], 1000, 1199)
    spool = OutOfDescriptorsToAsk(real.client, real.bucket, real.prefix)
    options = attrs.evolve(ApiOptions.from_settings(s3), spool=spool)
    unreadable = {"first": chunk.first, "last": chunk.last, "problem": "chunk: HTTP 404"}
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores, options=options)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            for _ in range(REFUSALS_TO_PARK + 1):
                released = {"epoch": epoch, "unreadable": unreadable}
                response = await client.post(f"ranges/{range_id}/release", json=released)
                assert (response.status_code, response.json()) == (200, {})
                assert ranges_row(pool, range_id) == ("planned", 0, None)
                lease = stores.ranges.lease(node_id, 60)
                assert lease is not None
                epoch = lease.epoch
    assert [c.first for c in stores.spool.chunks_from(group_id, 1000, 1999, 10)] == [1000]
    assert "open-file limit" in caplog.text


def ranges_row(pool: ConnectionPool, range_id: int) -> tuple[str, int, str | None]:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT state, refusals, refusal FROM ranges WHERE id = %s", (range_id,)
        ).fetchone()
    assert row is not None
    return (row[0], row[1], row[2])


@pytest.mark.trio
async def test_unknown_paths_are_404_and_wrong_methods_405(
    nursery: trio.Nursery, settings: Settings, stores: Stores, token: str
) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            for path in (
                "/",
                "/api/v1/node",
                "/api/v1/node/",
                "/api/v1/node/lease/",
                "/api/v1/node/ranges/1",
                "/api/v1/node/ranges/1/explode",
                "/api/v1/node/ranges/x/stream",
                "/api/v1/node/ranges/-1/stream",
                "/api/v1/node/ranges/%D9%A1/stream",  # an Arabic-Indic digit one
                "/api/v1/node/ranges/99999999999999999999/stream",
            ):
                response = await client.get(path)
                assert response.status_code == 404, path
                assert "error" in response.json()
            for method, path, allowed in (
                ("GET", "lease", "POST"),
                ("POST", "ranges/1/stream", "GET"),
                ("GET", "ranges/1/batches", "POST"),
                ("PUT", "ranges/1/finish", "POST"),
            ):
                response = await client.request(method, path)
                assert response.status_code == 405, path
                assert response.headers["allow"] == allowed
                assert "error" in response.json()


# --- the stream ----------------------------------------------------------------------------


@pytest.mark.trio
async def test_the_stream_keeps_alive_until_the_chunk_lands(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    group_id: int,
    token: str,
    leased: tuple[int, int],
    any_spool: TestSpool,
) -> None:
    range_id, _ = leased
    served = any_spool.settings(settings)
    options = attrs.evolve(ApiOptions.from_settings(served), stream=FAST_STREAM)
    lines = overview(50, 1000)
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores, options)
        async with (
            httpx.AsyncClient(base_url=url, headers=bearer(token)) as client,
            client.stream("GET", f"ranges/{range_id}/stream") as response,
        ):
            assert response.status_code == 200
            reader = FrameReader(response.aiter_raw())
            assert await reader.next() == Frame.keepalive()
            assert await reader.next() == Frame.keepalive()
            # The prefetcher lands the chunk (the whole range) now.
            chunk = await trio.to_thread.run_sync(
                land_chunk, any_spool.store, stores.spool, GROUP, group_id, lines, 1000, 1999
            )
            frames = await any_spool.as_edge_reads(await reader.rest())
    assert set(frames[:-2]) <= {Frame.keepalive()}
    assert frames[-2:] == [any_spool.chunk_frame(chunk), Frame.end(1999)]


# Streams that never poll nor keep alive by themselves: only a landing wakes them.
NOTIFIED_STREAM = StreamTiming(keepalive_seconds=3600, poll_seconds=3600)


def terminate_listener(url: str) -> int:
    """End the coordinator's LISTEN session from the server side; how many were ended."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()"
            " AND pid <> pg_backend_pid()",
            (APPLICATION_NAME,),
        ).fetchall()
    return len(rows)


@pytest.mark.trio
async def test_a_waiting_stream_sends_a_chunk_as_soon_as_it_lands(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    group_id: int,
    token: str,
    leased: tuple[int, int],
    pg_url: str,
    any_spool: TestSpool,
) -> None:
    range_id, _ = leased
    served = any_spool.settings(settings)
    options = attrs.evolve(ApiOptions.from_settings(served), stream=NOTIFIED_STREAM)
    first = land_chunk(
        any_spool.store, stores.spool, GROUP, group_id, overview(10, 1000), 1000, 1299
    )
    landings = Landings()
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, served, stores, options, landings)
        await landings.wait_listening(0)
        async with (
            httpx.AsyncClient(base_url=url, headers=bearer(token)) as client,
            client.stream("GET", f"ranges/{range_id}/stream") as response,
        ):
            reader = FrameReader(response.aiter_raw())
            assert await any_spool.as_edge_reads([await reader.next()]) == [
                any_spool.chunk_frame(first)
            ]
            # The stream waits for 1300.. now; without the landing's
            # notification it would look again only after an hour.
            second = await trio.to_thread.run_sync(
                land_chunk,
                any_spool.store,
                stores.spool,
                GROUP,
                group_id,
                overview(10, 1300),
                1300,
                1599,
            )
            assert await any_spool.as_edge_reads([await reader.next()]) == [
                any_spool.chunk_frame(second)
            ]
            # The listening session ended by the server: the coordinator
            # listens again by itself, and the next landing wakes the stream.
            assert await trio.to_thread.run_sync(terminate_listener, pg_url) == 1
            await landings.wait_listening(1)
            await trio.to_thread.run_sync(add_gap, stores, group_id, 1600, 1999)
            assert await reader.rest() == [Frame.gap(1600, 1999), Frame.end(1999)]


@pytest.mark.trio
async def test_serve_returns_after_a_graceful_shutdown_listener_and_all(
    settings: Settings, stores: Stores
) -> None:
    shutdown = trio.Event()
    landings = Landings()
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            serving = partial(serve, settings, stores, shutdown=shutdown, landings=landings)
            await nursery.start(serving)
            await landings.wait_listening(0)
            shutdown.set()
        # The nursery is left only once serve has returned.


@pytest.mark.trio
async def test_a_stream_waiting_for_its_chunk_ends_at_once_when_the_server_stops(
    settings: Settings, stores: Stores, token: str, leased: tuple[int, int]
) -> None:
    """A stream that waits for a chunk not spooled yet (the live head: every edge's, as
    the prefetcher follows) ends with an ERROR frame as soon as the server is told to
    stop, as a waiting lease call does, instead of holding the stop for the graceful
    period: 48 edges streaming the live head held a SIGTERM for its 10 s, each time."""
    range_id, _ = leased
    shutdown = trio.Event()
    options = attrs.evolve(ApiOptions.from_settings(settings), stream=FAST_STREAM)
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            serving = partial(serve, settings, stores, options=options, shutdown=shutdown)
            host, port = await nursery.start(serving)
            url = f"http://{host}:{port}{PREFIX}"
            async with (
                httpx.AsyncClient(base_url=url, headers=bearer(token)) as client,
                client.stream("GET", f"ranges/{range_id}/stream") as response,
            ):
                reader = FrameReader(response.aiter_raw())
                assert await reader.next() == Frame.keepalive()  # nothing is spooled
                shutdown.set()
                with trio.fail_after(GRACEFUL_SECONDS / 2):
                    frames = await reader.rest()
                    assert set(frames[:-1]) <= {Frame.keepalive()}
                    assert frames[-1] == Frame.error("the coordinator is stopping")
        # Left only once serve has returned.


@pytest.mark.trio
async def test_a_stopping_server_returns_once_every_request_it_read_is_answered(
    settings: Settings, stores: Stores, token: str, leased: tuple[int, int]
) -> None:
    """An edge's next request that came in on a connection before the answer to its last
    one ended (a range's release, as its stream ends at the stop) is never read by a
    stopping hypercorn, nor is that connection closed: the stop took the whole graceful
    period (48 edges streaming the live head: 10 s at each SIGTERM). Here the release
    comes right behind the stream's request (pipelined): the server returns soon after
    the stream's end all the same."""
    range_id, epoch = leased
    body = f'{{"epoch": {epoch}}}'
    requests = (
        f"GET {PREFIX}ranges/{range_id}/stream HTTP/1.1\r\nHost: uidx\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
        f"POST {PREFIX}ranges/{range_id}/release HTTP/1.1\r\nHost: uidx\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n{body}"
    ).encode()
    shutdown = trio.Event()
    options = attrs.evolve(ApiOptions.from_settings(settings), stream=FAST_STREAM)
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            serving = partial(serve, settings, stores, options=options, shutdown=shutdown)
            host, port = await nursery.start(serving)
            async with await trio.open_tcp_stream(host, port) as edge:
                await edge.send_all(requests)
                answered = b""
                while b"\r\n\r\n" not in answered:  # the stream's 200: it waits for its chunk
                    answered += await edge.receive_some()
                assert answered.startswith(b"HTTP/1.1 200 ")
                shutdown.set()
                stopped = trio.current_time()
                while chunk := await edge.receive_some():  # to the stream's end
                    answered += chunk
        took = trio.current_time() - stopped
    assert b"the coordinator is stopping" in answered  # its ERROR frame
    assert answered.count(b"HTTP/1.1 ") == 1  # the release was never read
    assert took < GRACEFUL_SECONDS / 2


@pytest.mark.trio
async def test_the_stream_stops_with_an_error_frame_when_the_lease_is_lost(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    group_id: int,
    token: str,
    leased: tuple[int, int],
    any_spool: TestSpool,
) -> None:
    range_id, epoch = leased
    served = any_spool.settings(settings)
    options = attrs.evolve(ApiOptions.from_settings(served), stream=FAST_STREAM)
    chunk = land_chunk(
        any_spool.store, stores.spool, GROUP, group_id, overview(50, 1000), 1000, 1499
    )
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, served, stores, options)
        async with (
            httpx.AsyncClient(base_url=url, headers=bearer(token)) as client,
            client.stream("GET", f"ranges/{range_id}/stream") as response,
        ):
            reader = FrameReader(response.aiter_raw())
            assert await any_spool.as_edge_reads([await reader.next()]) == [
                any_spool.chunk_frame(chunk)
            ]
            assert await reader.next() == Frame.keepalive()  # 1500.. is not spooled yet
            released = await client.post(f"ranges/{range_id}/release", json={"epoch": epoch})
            assert released.status_code == 200
            frames = await reader.rest()
    assert set(frames[:-1]) <= {Frame.keepalive()}
    assert frames[-1] == Frame.error(f"the lease of range {range_id} is lost")


@pytest.mark.trio
async def test_a_stream_of_a_fully_indexed_range_is_just_end(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    group_id: int,
    token: str,
    leased: tuple[int, int],
    pg_url: str,
    any_spool: TestSpool,
) -> None:
    range_id, _ = leased
    # The range's chunk is still in the spool (the sweep has not run): it is not sent.
    land_chunk(any_spool.store, stores.spool, GROUP, group_id, overview(50, 1000), 1000, 1999)
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE ranges SET resume = last_article + 1")
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, any_spool.settings(settings), stores)
        async with (
            httpx.AsyncClient(base_url=url, headers=bearer(token)) as client,
            client.stream("GET", f"ranges/{range_id}/stream") as response,
        ):
            assert await FrameReader(response.aiter_raw()).rest() == [Frame.end(1999)]


# --- the database down -------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.trio
async def test_the_database_down_is_503_with_retry_after(
    nursery: trio.Nursery, settings: Settings
) -> None:
    conninfo = f"host=127.0.0.1 port={closed_port()} dbname=uidx connect_timeout=1"
    # A short pool timeout: the default waits 30 s for a connection.
    with ConnectionPool(conninfo, min_size=1, timeout=0.2, open=True) as down:
        stores = Stores.from_pool(down)
        with trio.fail_after(DEADLINE_SECONDS):
            url = await start_api(nursery, settings, stores)
            async with httpx.AsyncClient(base_url=url, headers=bearer("a" * 43)) as client:
                for method, path, body in (
                    ("POST", "lease", b""),
                    ("GET", "ranges/1/stream", b""),
                    ("POST", "ranges/1/batches", compress_body(b"\x80")),
                    ("POST", "ranges/1/heartbeat", b'{"epoch": 1}'),
                ):
                    response = await client.request(method, path, content=body, headers=GZIP)
                    assert response.status_code == 503, path
                    assert response.headers["retry-after"].isdigit()
                    assert "unavailable" in response.json()["error"]


class _GoneAtLease(RangeStore):
    """PostgreSQL going away after the token was checked, as the lease is taken."""

    def look(self, node_id: int, ttl_seconds: float, stops: int | None) -> Look:
        raise psycopg.OperationalError("server closed the connection unexpectedly")


@pytest.mark.trio
async def test_the_database_gone_during_a_lease_call_is_503_not_500(
    nursery: trio.Nursery, settings: Settings, stores: Stores, token: str
) -> None:
    # The lease waits in a nursery (it watches for the node going away): the
    # database's error must not reach the API wrapped in an exception group.
    gone = attrs.evolve(stores, ranges=_GoneAtLease(stores.ranges.pool))
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, gone)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            response = await client.post("lease")
    assert response.status_code == 503
    assert "unavailable" in response.json()["error"]


# --- slow clients ------------------------------------------------------------------------


async def answer_to(url: str, data: bytes) -> bytes:
    """Everything the server sends on a raw connection after `data`, until it closes."""
    address = httpx.URL(url)
    assert address.port is not None
    stream = await trio.open_tcp_stream(address.host, address.port)
    async with stream:
        await stream.send_all(data)
        answer = b""
        while chunk := await stream.receive_some():
            answer += chunk
    return answer


@pytest.mark.trio
async def test_slow_heads_and_bodies_are_cut(
    nursery: trio.Nursery, settings: Settings, stores: Stores, token: str, leased: tuple[int, int]
) -> None:
    range_id, _ = leased
    options = attrs.evolve(
        ApiOptions.from_settings(settings), body_timeout_seconds=0.2, idle_timeout_seconds=0.2
    )
    head = (
        f"POST /api/v1/node/ranges/{range_id}/heartbeat HTTP/1.1\r\nHost: uidx\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: 100\r\n\r\n"
    ).encode()
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores, options)
        # The body stops after 8 of its 100 bytes: 408, and the connection closes.
        answer = await answer_to(url, head + b'{"epoch"')
        assert answer.startswith(b"HTTP/1.1 408")
        assert b"connection: close" in answer
        assert answer.endswith(b'{"error":"the request body did not arrive in time"}')
        # The head stops halfway: closed without an answer.
        assert await answer_to(url, head[:40]) == b""


async def trickled(url: str, data: bytes, *, at_once: bytes = b"") -> tuple[bytes, float, int]:
    """`trickled_on` a new connection to `url`, after sending `at_once` whole."""
    address = httpx.URL(url)
    assert address.port is not None
    stream = await trio.open_tcp_stream(address.host, address.port)
    async with stream:
        await stream.send_all(at_once)
        return await trickled_on(stream, data)


@pytest.mark.trio
async def test_a_client_sending_one_byte_a_second_is_cut_at_the_timeouts(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    token: str,
    leased: tuple[int, int],
) -> None:
    # The operator's defaults (30 s for a head, 600 s for a body), on the
    # autojump clock: a slowloris holding connections open is cut long
    # before it has sent what it announced.
    range_id, _ = leased
    # The request waits on database threads (the token, the fence) before
    # its body's deadline starts. With a threshold of 0 the clock jumps
    # whenever every task is blocked, also while such a thread runs, and the
    # trickle sends a byte per jump: hundreds of "seconds" pass in a 100 ms
    # query on a busy machine. Jumping only after 10 ms of real idleness
    # keeps the trickle near the server's own pace (~7 s of real time).
    autojump_clock.autojump_threshold = 0.01
    options = ApiOptions.from_settings(settings)
    head = (
        f"POST /api/v1/node/ranges/{range_id}/batches HTTP/1.1\r\nHost: uidx\r\n"
        f"Authorization: Bearer {token}\r\nContent-Encoding: gzip\r\n"
        f"Content-Length: 100000\r\n\r\n"
    ).encode()
    newznab = b"GET /api?t=search&q=" + b"a" * 200 + b" HTTP/1.1\r\nHost: uidx\r\n\r\n"
    with trio.fail_after(10 * options.body_timeout_seconds):
        url = await start_api(nursery, settings, stores, options)
        # A head a byte a second (either API): closed without an answer
        # once the connection has been idle for idle_timeout_seconds.
        for request in (head, newznab):
            answer, took, sent = await trickled(url, request)
            assert answer == b""
            assert took == pytest.approx(options.idle_timeout_seconds, abs=1.5)
            assert sent < len(request)
        # The head at once, then its body a byte a second: 408 once
        # body_timeout_seconds have passed, with 100 kB announced.
        answer, took, sent = await trickled(url, b"\x1f" * 100_000, at_once=head)
    assert answer.startswith(b"HTTP/1.1 408")
    # Cut at the body's deadline (plus the seconds its database waits may
    # still take), where the 100 kB announced would take 100,000 s.
    assert options.body_timeout_seconds <= took < 1.1 * options.body_timeout_seconds
    assert sent < 1.1 * options.body_timeout_seconds


async def trickled_on(stream: trio.SocketStream, data: bytes) -> tuple[bytes, float, int]:
    """Send `data` one byte a second until the server closes the connection:
    what it answered, after how many seconds, and how many bytes went out."""
    answer = b""
    sent = 0
    started = trio.current_time()
    closed = trio.Event()

    async def read() -> None:
        nonlocal answer
        try:
            while chunk := await stream.receive_some():
                answer += chunk
        except trio.BrokenResourceError:
            pass  # a reset is a close too
        closed.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        try:
            while sent < len(data) and not closed.is_set():
                await stream.send_all(data[sent : sent + 1])
                sent += 1
                await trio.sleep(1)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the server cut the connection while we sent
        # Sent whole or not: until the server closes the connection.
        await closed.wait()
    return answer, trio.current_time() - started, sent


# --- uidx coordinator ------------------------------------------------------------------------

# Runs the subcommand as cli.py will: through its add_parser and run, with
# cli.main's handling of errors.
COORDINATOR = """
import argparse, logging, sys
from usenet_indexer.commands import coordinator
from usenet_indexer.errors import UidxError
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
parser = argparse.ArgumentParser()
coordinator.add_parser(parser.add_subparsers())
args = parser.parse_args(["coordinator"])
args.config = None
try:
    sys.exit(args.run(args))
except UidxError as error:
    print(f"uidx coordinator: {error}", file=sys.stderr)
    sys.exit(2)
"""


def coordinator_env(pg_url: str, home: Path, listen: str = "127.0.0.1:0") -> dict[str, str]:
    """This environment without uidx settings, plus the coordinator's ("" for no DATABASE_URL)."""
    mine = {"DATABASE_URL", "COORDINATOR_URL", "NODE_TOKEN"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_") and k not in mine}
    return {**env, "DATABASE_URL": pg_url, "UIDX_HOME": str(home), "UIDX_LISTEN": listen}


@pytest.mark.trio
async def test_uidx_coordinator_says_when_it_cannot_listen(tmp_path: Path, pg_url: str) -> None:
    with socket.socket() as taken, trio.fail_after(DEADLINE_SECONDS):
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        done = await trio.run_process(
            [sys.executable, "-c", COORDINATOR],
            env=coordinator_env(pg_url, tmp_path, listen),
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 2
    assert f"uidx coordinator: listen: cannot listen on {listen}" in done.stderr.decode()


async def serve_until_sigterm(env: dict[str, str], token: str | None) -> str:
    """Run `uidx coordinator`, call it (as `token`, and without a token), stop it; its log."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", COORDINATOR], env=env, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    log = b""
    try:
        while (found := re.search(rb"listening on (http://\S+)", log)) is None:
            chunk = await process.stderr.receive_some()
            assert chunk, log.decode()
            log += chunk
        async with httpx.AsyncClient(base_url=found[1].decode()) as client:
            if token is not None:
                assert (await client.post("lease", headers=bearer(token))).status_code == 204
            assert (await client.post("lease")).status_code == 401
        process.send_signal(signal.SIGTERM)
        while chunk := await process.stderr.receive_some():
            log += chunk
        assert await process.wait() == 0, log.decode()
    finally:
        if process.returncode is None:
            process.kill()
    return log.decode()


@pytest.mark.trio
async def test_uidx_coordinator_serves_until_sigterm(
    tmp_path: Path, pg_url: str, stores: Stores
) -> None:
    token = stores.nodes.create("edge-1")
    with trio.fail_after(DEADLINE_SECONDS):
        log = await serve_until_sigterm(coordinator_env(pg_url, tmp_path), token)
    assert "SIGTERM: shutting down" in log


@pytest.mark.slow
@pytest.mark.trio
async def test_uidx_coordinator_starts_and_stops_the_embedded_cluster() -> None:
    # Not tmp_path: as root the server runs as another user, who cannot
    # pass pytest's 0700 folders.
    with scratch_dir() as home:
        env = coordinator_env("", home)
        with trio.fail_after(CLUSTER_DEADLINE_SECONDS):
            log = await serve_until_sigterm(env, None)
        assert "embedded PostgreSQL" in log
        assert not Cluster(home / "postgres").status().running


@pytest.mark.trio
async def test_the_coordinator_stops_when_its_supervisor_is_gone(
    pg_url: str, tmp_path: Path
) -> None:
    from usenet_indexer.coordinator.daemon import run_coordinator

    settings = Settings(home=tmp_path, listen="127.0.0.1:0", database_url=pg_url)
    read_end, write_end = os.pipe()
    os.close(write_end)  # the supervisor died, however it died
    try:
        with trio.fail_after(60):
            await run_coordinator(settings, parent_fd=read_end)
    finally:
        os.close(read_end)


def test_a_supervised_coordinator_stops_on_sigterm_while_its_supervisor_lives(
    pg_url: str, tmp_path: Path
) -> None:
    from process_logs import log_until

    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.update(DATABASE_URL=pg_url, UIDX_HOME=str(tmp_path), UIDX_LISTEN="127.0.0.1:0")
    argv = [sys.executable, "-m", "usenet_indexer", "coordinator"]
    process = subprocess.Popen(
        [*argv, "--worker-slot", "0", "--parent-fd", str(read_end)],
        env=env,
        pass_fds=(read_end,),
        stderr=subprocess.PIPE,
    )
    try:
        log_until(process, lambda line: "node API listening" in line, 60)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        process.wait()
        assert process.stderr is not None
        process.stderr.close()
        os.close(read_end)
        os.close(write_end)


def test_a_lease_wait_is_capped_and_a_bad_one_waits_not_at_all() -> None:
    def wait(query: bytes) -> float:
        return _asked_wait(query, LEASE_WAIT_MAX_SECONDS)

    assert wait(b"") == 0.0
    assert wait(b"wait=12.5") == 12.5
    assert wait(b"wait=3600") == wait(b"wait=inf") == LEASE_WAIT_MAX_SECONDS
    for bad in (b"wait=nan", b"wait=-5", b"wait=soon", b"wait=%00"):
        assert wait(bad) == 0.0


def test_two_coordinator_processes_serve_on_one_port(pg_url: str, tmp_path: Path) -> None:
    from process_logs import log_until

    from usenet_indexer.coordinator.http.node import PREFIX as node_prefix

    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.update(DATABASE_URL=pg_url, UIDX_HOME=str(tmp_path), UIDX_LISTEN="127.0.0.1:0")
    argv = [sys.executable, "-m", "usenet_indexer", "coordinator", "--processes", "2"]
    process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    try:
        listening: list[str] = []

        def two_listen(line: str) -> bool:
            if "node API listening on" in line:
                listening.append(line.split("node API listening on ", 1)[1].strip())
            return len(listening) == 2

        log_until(process, two_listen, 90)
        # One address for both: the supervisor's socket, any free port it got.
        assert listening[0] == listening[1]
        base = listening[0].removesuffix(node_prefix)
        workers = [
            int(p)
            for p in subprocess.run(
                ["pgrep", "-P", str(process.pid)], capture_output=True, text=True, check=True
            ).stdout.split()
        ]
        assert len(workers) == 2
        # Each a fresh connection: the kernel hands them to either process.
        for _ in range(20):
            with httpx.Client(base_url=base) as client:
                answer = client.get("/api", params={"t": "caps"})
            assert answer.status_code == 200
            assert b"<caps>" in answer.content
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        process.wait()
        assert process.stderr is not None
        process.stderr.close()


# --- the catalog's pace ----------------------------------------------------------


class _Logged(logging.Handler):
    """Sets `seen` once a record with these words is logged (on the trio thread)."""

    def __init__(self, words: str) -> None:
        super().__init__()
        self.words = words
        self.seen = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.words in record.getMessage():
            self.seen.set()


@pytest.mark.trio
@pytest.mark.parametrize(
    ("caught_up_after", "took_within", "logged"),
    [
        # Held until the next look after the build caught up.
        (10.0, (10.0, 15.0), r"no longer behind \(catalog_max_lag_seconds=5\)"),
        # Never caught up: answered once the hold's limit is reached.
        (
            None,
            (HOLD_MAX_SECONDS, HOLD_MAX_SECONDS + 5.0),
            r"answered after 3\d\.\d s held, the catalog build still \d+\.\d s behind",
        ),
    ],
    ids=["until-the-build-caught-up", "at-most-the-hold-limit"],
)
async def test_a_batch_is_answered_once_the_catalog_build_caught_up_or_at_the_hold_limit(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    token: str,
    leased: tuple[int, int],
    caplog: pytest.LogCaptureFixture,
    caught_up_after: float | None,
    took_within: tuple[float, float],
    logged: str,
) -> None:
    """A batch posted while the catalog build is a minute behind (a key pending since
    then, nobody building); the build catches up (its pending keys taken) after
    `caught_up_after` seconds, or never."""
    caplog.set_level(logging.INFO, "usenet_indexer.coordinator.http.node")
    with given_up_after(DEADLINE_SECONDS):
        range_id, epoch = leased
        # Database threads run while the clock may jump (see the slowloris test): no
        # deadline here but the server's own (its looks again) and the test's wait.
        autojump_clock.autojump_threshold = 0.01
        options = attrs.evolve(
            ApiOptions.from_settings(settings),
            catalog_max_lag_seconds=5.0,
            hold_recheck_seconds=5.0,
        )
        serving = partial(serve, settings, stores, options=options, catalog_due=CatalogDue())
        host, port = await nursery.start(serving)
        indexer = RangeIndexer(GROUP, 1000)
        indexer.add_data(b"\n".join(overview(1000, 1000)), 2000)
        body = batch_body(indexer.take(), range_id, epoch)
        with stores.catalog.pool.connection() as conn:
            conn.execute(
                "INSERT INTO catalog_pending (key, since) VALUES (%s, now() - interval '1 minute')",
                (bytes(16),),
            )
        answered = trio.Event()
        answers: list[tuple[httpx.Response, float]] = []

        async def post() -> None:
            async with httpx.AsyncClient(
                base_url=f"http://{host}:{port}/api/v1/node/", headers=bearer(token), timeout=None
            ) as client:
                started = trio.current_time()
                response = await client.post(
                    f"ranges/{range_id}/batches", content=body, headers=GZIP
                )
                answers.append((response, trio.current_time() - started))
                answered.set()

        stored = _Logged("stored batch")
        logging.getLogger("usenet_indexer.coordinator.http.node").addHandler(stored)
        try:
            nursery.start_soon(post)
            await stored.seen.wait()  # its answer is being held from here on
        finally:
            logging.getLogger("usenet_indexer.coordinator.http.node").removeHandler(stored)
        if caught_up_after is not None:
            await trio.sleep(caught_up_after)
            assert not answered.is_set()  # held while the build is behind
            with stores.catalog.pool.connection() as conn:
                conn.execute("DELETE FROM catalog_pending")  # what a build that took them does
        await answered.wait()
    response, took = answers[0]
    assert response.status_code == 200
    assert response.json()["stored"] is True
    assert took_within[0] <= took <= took_within[1]
    assert re.search(logged, caplog.text)
