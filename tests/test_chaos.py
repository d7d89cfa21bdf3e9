"""scripts/chaos: its pure checker, its proxy and bad input, and the short run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from array import array
from pathlib import Path

import httpx
import pytest
import trio
from psycopg_pool import ConnectionPool

from usenet_indexer.batch import Batch, FileChunk, ReleaseChunk
from usenet_indexer.batchwire import BatchWireError, WireBatch, decode_batch, decode_body
from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.catalog import CatalogStore
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.testing import chaos_check as checks
from usenet_indexer.testing.chaos import KINDS
from usenet_indexer.testing.chaos_abuse import bad_requests, gzip_bomb
from usenet_indexer.testing.chaos_check import BatchRow, RangeRow
from usenet_indexer.testing.chaos_procs import read_log
from usenet_indexer.testing.chaos_proxy import ReplyDropper, serve_proxy

DEADLINE_SECONDS = 30
# The short run takes about 40 s on two cores; more when they are shared.
SHORT_RUN_SECONDS = 600


# --- the checker -------------------------------------------------------------------------


def test_the_checker_finds_a_doubled_and_a_lost_segment() -> None:
    found = checks.check_catalog(["a@x", "b@x", "c@x"], ["a@x", "b@x", "b@x", "z@x"])
    assert (found.expected, found.stored, found.lost, found.doubled) == (3, 4, 1, 1)
    assert found.unexpected == 1
    assert found.lost_sample == ("c@x",)
    assert found.doubled_sample == ("b@x",)
    assert not found.ok


def test_the_checker_counts_every_extra_copy_and_passes_a_clean_catalog() -> None:
    assert checks.check_catalog(["a"], ["a", "a", "a"]).doubled == 2
    clean = checks.check_catalog(["a", "b"], ["b", "a"])
    assert clean.ok
    assert (clean.lost, clean.doubled, clean.unexpected) == (0, 0, 0)


def release_chunk(group: str = "alt.test") -> ReleaseChunk:
    file = FileChunk(
        key=b"k" * 16, name="a.rar", subject="a", index=None, total_segments=2, posted=0,
        numbers=array("I", [1, 2]), message_ids="m1@x\nm2@x", sizes=array("I", [1, 1]),
    )  # fmt: skip
    return ReleaseChunk(b"r" * 16, None, "p", (group,), None, (file,))


def test_message_ids_of_stored_chunks_count_every_copy() -> None:
    chunk = release_chunk()
    assert list(checks.chunk_message_ids([chunk, chunk])) == ["m1@x", "m2@x"] * 2


def test_percentiles_are_nearest_rank() -> None:
    assert checks.percentile([], 0.5) is None
    assert checks.percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert checks.percentile([float(n) for n in range(1, 21)], 0.95) == 19.0
    assert checks.percentile([5.0], 0.95) == 5.0


def row(range_id: int, epoch: int, holder: int | None, *, state: str = "leased") -> RangeRow:
    return RangeRow(range_id, state, holder, epoch, resume=100, live=state == "leased")


def test_two_holders_under_one_epoch_are_a_violation() -> None:
    good = [[row(1, 1, 7), row(2, 1, 8)], [row(1, 2, 8), row(2, 1, 8)]]
    assert checks.holder_violations(good) == 0
    assert checks.holder_violations([*good, [row(1, 2, 9)]]) == 1


def test_grants_must_raise_the_epoch() -> None:
    assert checks.grant_violations([(1, 1), (2, 1), (1, 2), (1, 3)]) == 0
    assert checks.grant_violations([(1, 1), (1, 2), (1, 2), (1, 1)]) == 2


def test_chains_show_gaps_stale_rows_and_incomplete_ranges() -> None:
    ranges = {1: (100, 199)}
    whole = [BatchRow(1, 100, 150, 1, 7), BatchRow(1, 150, 200, 2, 8)]
    assert checks.check_chains(whole, ranges) == checks.ChainCheck(0, 0, 0)
    stale = [BatchRow(1, 100, 150, 2, 8), BatchRow(1, 150, 200, 1, 7)]
    assert checks.check_chains(stale, ranges) == checks.ChainCheck(0, 1, 0)
    overlapping = [*whole, BatchRow(1, 120, 170, 1, 7)]
    assert checks.check_chains(overlapping, ranges).gaps == 2
    assert checks.check_chains(whole[:1], ranges) == checks.ChainCheck(0, 0, 1)


def test_lease_state_must_not_go_back_and_a_takeover_is_a_newer_epoch() -> None:
    before = [row(1, 3, 7), row(2, 1, None, state="done")]
    assert checks.lease_state_lost(before, [row(1, 4, 8), row(2, 1, None, state="done")]) == 0
    assert checks.lease_state_lost(before, [row(1, 2, 8), row(2, 1, 8)]) == 2
    assert checks.lease_state_lost(before, [row(2, 1, None, state="done")]) == 1
    assert not checks.taken_over(row(1, 3, 7), [row(1, 3, 7)])
    assert checks.taken_over(row(1, 3, 7), [row(1, 4, 7)])
    assert checks.taken_over(row(1, 3, 7), [row(1, 3, 7, state="done")])


COORDINATOR_LOG = """\
2026-11-30 12:54:54,889 INFO usenet_indexer.nodeapi: node 12 leased range 1 epoch 1: g 10..20 from 10
2026-11-30 12:55:04,332 INFO usenet_indexer.nodeapi: node 8 heartbeat range 4 epoch 2: refused, the lease is lost
2026-11-30 12:55:05,576 INFO usenet_indexer.nodeapi: node 1 stored batch 11..12 of range 5 epoch 2: 21 release chunks, 706 segments, 990 lines, 25244 body bytes (already stored: a retry)
2026-11-30 12:55:06,177 INFO usenet_indexer.nodeapi: node 18 POST '/api/v1/node/ranges/1/batches': 409 {"error":"range 1: not held"}
2026-11-30 12:55:06,242 INFO usenet_indexer.nodeapi: node 8 GET '/api/v1/node/ranges/1/stream': 409 {"error":"not leased"}
2026-11-30 12:55:07,000 ERROR usenet_indexer.nodeapi: node 3 POST '/api/v1/node/lease' failed
2026-11-30 12:55:08,000 INFO usenet_indexer.nodeapi: node 2 leased range 1 epoch 2: g 10..20 from 12
"""


def test_the_coordinator_log_tells_grants_409s_and_retries(tmp_path: Path) -> None:
    log = tmp_path / "coordinator.log"
    log.write_text(COORDINATOR_LOG)
    figures = read_log(log)
    assert figures.grants == ((12, 1, 1), (2, 1, 2))
    assert figures.conflicts == {8: 2, 18: 1}
    assert (figures.already_stored, figures.internal_errors) == (1, 1)


# --- the fence switch of the negative control ----------------------------------------------


@pytest.mark.parametrize("fenced", [True, False])
def test_only_the_fence_keeps_a_retried_batch_from_being_stored_twice(
    pool: ConnectionPool, fenced: bool
) -> None:
    # The negative control's schema: without the keys that refuse an exact replay.
    with pool.connection() as conn:
        for table in ("batches", "fragments", "rule_counts"):
            conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey")
    group_id = GroupStore(pool).add("alt.test")
    ranges, nodes = RangeStore(pool), NodeStore(pool)
    ranges.plan(group_id, 1000, 1999, 1000)
    node_id = nodes.authenticate(nodes.create("edge"))
    assert node_id is not None
    lease = ranges.lease(node_id, 60)
    assert lease is not None
    batch = Batch("alt.test", 1000, 1010, (release_chunk(),), (), (), 2, ())
    wire = WireBatch(lease.range_id, lease.epoch, batch)
    store = BatchStore(pool, fenced=fenced)
    assert not store.store(node_id, wire, 0, 60).already
    retry = store.store(node_id, wire, 0, 60)  # its reply was lost
    stored = list(checks.chunk_message_ids(CatalogStore(pool).chunks()))
    if fenced:
        assert retry.already
        assert stored == ["m1@x", "m2@x"]
    else:
        assert not retry.already
        assert sorted(stored) == ["m1@x", "m1@x", "m2@x", "m2@x"]


# --- bad input and the proxy ---------------------------------------------------------------


def test_every_bad_batch_body_is_refused_by_the_wire_format() -> None:
    cases = bad_requests(3, 1000, "alt.test", bomb_bytes=64 << 20, max_body_bytes=1 << 20)
    bodies = [c for c in cases if c.path.endswith("/batches") and c.token is None]
    refused = 0
    for case in bodies:
        try:
            document = decode_body(
                case.body,
                content_encoding=case.headers.get("Content-Encoding"),
                max_body_bytes=1 << 20,
                max_inflated_bytes=16 << 20,
            )
            decode_batch(document)
        except BatchWireError:
            refused += 1
    # The one well-formed batch is refused by the fence (a range not held), not the format.
    assert refused == len(bodies) - 1
    assert {c.name for c in cases} >= {"gzip bomb", "lone surrogate", "NUL bytes"}
    assert len(gzip_bomb(64 << 20)) < (64 << 20) // 500


def test_the_dropper_picks_every_nth_batch_post_up_to_its_limit() -> None:
    dropper = ReplyDropper(every=2, limit=2)
    picks = [dropper.picks(b"POST", b"/api/v1/node/ranges/1/batches") for _ in range(7)]
    assert picks == [False, True, False, True, False, True, False]
    # The limit counts replies dropped, which the proxy counts when it drops one.
    dropper.dropped = 2
    assert not dropper.picks(b"POST", b"/api/v1/node/ranges/1/batches")
    assert not dropper.picks(b"POST", b"/api/v1/node/lease")
    assert not dropper.picks(b"GET", b"/api/v1/node/ranges/1/batches")


async def _answer_forever(seen: list[bytes], stream: trio.SocketStream) -> None:
    """A minimal HTTP/1.1 server: records each request, answers 200 "ok"."""
    buffer = b""
    while True:
        while b"\r\n\r\n" not in buffer:
            data = await stream.receive_some(65536)
            if not data:
                return
            buffer += data
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length")),
            0,
        )  # fmt: skip
        while len(buffer) < length:
            buffer += await stream.receive_some(65536)
        seen.append(head.split(b"\r\n")[0] + b" " + buffer[:length])
        buffer = buffer[length:]
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


@pytest.mark.trio
async def test_the_proxy_forwards_the_picked_batch_and_loses_its_reply(
    nursery: trio.Nursery,
) -> None:
    seen: list[bytes] = []
    with trio.fail_after(DEADLINE_SECONDS):
        listeners = await nursery.start(
            trio.serve_tcp, lambda stream: _answer_forever(seen, stream), 0
        )
        upstream = ("127.0.0.1", listeners[0].socket.getsockname()[1])
        dropper = ReplyDropper(every=2, limit=1)
        port = await nursery.start(serve_proxy, upstream, dropper)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.post("/r/1/batches", content=b"one")).text == "ok"
            with pytest.raises(httpx.TransportError):
                await client.post("/r/1/batches", content=b"two")
            # The retry of the same batch gets its answer (the limit is reached).
            assert (await client.post("/r/1/batches", content=b"two")).text == "ok"
            assert (await client.get("/r/1/stream")).text == "ok"
    assert dropper.dropped == 1
    assert seen == [
        b"POST /r/1/batches HTTP/1.1 one",
        b"POST /r/1/batches HTTP/1.1 two",
        b"POST /r/1/batches HTTP/1.1 two",
        b"GET /r/1/stream HTTP/1.1 ",
    ]


# --- the short run, end to end ---------------------------------------------------------------


@pytest.mark.slow
def test_the_short_chaos_run_loses_doubles_and_lets_in_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "usenet_indexer.testing.chaos", "--short", "--seed", "1"],
        capture_output=True,
        text=True,
        timeout=SHORT_RUN_SECONDS,
        check=False,
    )
    assert done.stdout, done.stderr[-4000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["failures"] == [], done.stderr[-4000:]
    assert done.returncode == 0
    assert (report["lost"], report["doubled"]) == (0, 0)
    assert report["stored"] == report["expected"] > 0
    assert report["rows_after_409"] == 0
    assert report["http_5xx"] == 0
    assert report["negative_control_doubled"] > 0
    assert report["holder_violations"] == 0
    assert report["lease_burst"]["granted"] == report["lease_burst"]["distinct_ranges"]
    assert set(report["faults"]) == set(KINDS)
    assert all(count >= 1 for count in report["faults"].values()), report["faults"]
    assert report["already_stored"] >= 1
    assert report["conflicts_409"] >= 1
    # The frozen edge's later calls (heartbeat, release, batch) are refused.
    assert report["stopped_edges_409"] >= 1
    assert report["recovery_p50_seconds"] is not None
    assert report["fence_cost_ratio"] > 0
