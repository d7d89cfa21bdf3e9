"""scripts/chaos: its pure checker, its proxy and bad input, and the short run end to end."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
from psycopg_pool import ConnectionPool

from chaos import check as checks
from chaos.abuse import bad_requests, gzip_bomb
from chaos.check import BatchRow, RangeRow
from chaos.clock import CLOCK_KINDS
from chaos.nntp_faults import (
    AUTH,
    DROP,
    NNTP_KINDS,
    REFUSE,
    STALL,
    Data,
    End,
    FaultSchedule,
    ReplyTracker,
    Status,
    hide_compression,
    serve_nntp_proxy,
)
from chaos.prefetch import PREFETCH_KINDS, temporary_chunks
from chaos.procs import read_log
from chaos.proxy import (
    AFTER_COMMIT,
    BEFORE_POST,
    Ambush,
    ReplyDropper,
    answer_status,
    batch_range,
    bearer,
    serve_proxy,
)
from chaos.run import NAMED_KILLS, long_config, retry_rank, short_config
from chaos.several import SEVERAL_KINDS, SeveralOutcome
from chaos.several import failures as several_failures
from chaos.suite import CLOCK_FAILURES, KINDS, SPOOL_FAILURES, failures, keep_logs
from usenet_indexer.core.batch import Batch, FileChunk, ReleaseChunk
from usenet_indexer.nntp.client import NNTPClient, connect
from usenet_indexer.nntp.errors import AuthRequired, ConnectionLost, Timeout, Unavailable
from usenet_indexer.spool.files import ChunkWriter
from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.catalog import CatalogStore
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.testing.fake_nntp import FakeNNTPServer
from usenet_indexer.testing.logcheck import LogProblems
from usenet_indexer.wire.batchwire import BatchWireError, decode_batch, decode_body
from usenet_indexer.wire.packed import pack_batch

DEADLINE_SECONDS = 30
# The short run takes 35-50 s on two cores (the prefetch part and the clock
# run go alongside the chaos run); more when they are shared.
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


def test_the_rebuild_check_finds_a_missing_an_extra_and_a_changed_row() -> None:
    rebuilt = {"a": ("A", 10, [b"k1"]), "b": ("B", 20, [b"k2"]), "c": ("C", 30, [b"k3"])}
    assert checks.check_rebuild(rebuilt, dict(rebuilt)) == checks.RebuildCheck(3, 0, 0, 0)
    # "a" not built, "b" built with another size, "x" built and not in a whole rebuild.
    followed = {"b": ("B", 21, [b"k2"]), "c": ("C", 30, [b"k3"]), "x": ("X", 5, [b"k9"])}
    found = checks.check_rebuild(followed, rebuilt)
    assert (found.rows, found.missing, found.extra, found.changed) == (3, 1, 1, 1)
    assert found.differing == 3
    assert found.sample == ("a", "x", "b")


def test_a_catalog_that_differs_from_a_whole_rebuild_fails_the_run() -> None:
    report = _clean_report() | {"catalog_rows_differing": 2}
    assert failures(report) == ["catalog_rows_differing = 2"]


def test_both_runs_kill_a_coordinator_process_mid_build() -> None:
    assert "build_kill9" in KINDS
    assert (short_config(1).build_kills, long_config(1).build_kills) == (1, 2)
    assert short_config(1).coordinator_processes == 2


def test_both_runs_kill_an_edge_with_a_build_job_open() -> None:
    assert "edge_build_kill9" in KINDS
    assert (short_config(1).edge_build_kills, long_config(1).edge_build_kills) == (1, 2)


def test_message_ids_of_stored_chunks_count_every_copy() -> None:
    chunk = release_chunk()
    assert list(checks.chunk_message_ids([chunk, chunk])) == ["m1@x", "m2@x"] * 2


def test_the_kinds_left_without_a_fault_are_named_once_in_order() -> None:
    kinds = ["edge_kill9", "bad_input", "edge_kill9", "build_kill9", "edge_sigstop"]
    injected = Counter({"bad_input": 1, "build_kill9": 0, "edge_sigstop": 2})
    assert checks.not_injected(kinds, injected) == ["edge_kill9", "build_kill9"]
    assert checks.not_injected(kinds, Counter(dict.fromkeys(kinds, 1))) == []


def test_kinds_tried_again_come_in_the_order_their_work_needs() -> None:
    # Those that need an edge holding a range while parts are held back, then
    # those that import a part for a batch post, build_kill9 last.
    missing = [
        "build_kill9", NAMED_KILLS[AFTER_COMMIT], "edge_build_kill9", "edge_sigstop", "bad_input",
    ]  # fmt: skip
    assert sorted(missing, key=retry_rank) == [
        "edge_sigstop", "bad_input", NAMED_KILLS[AFTER_COMMIT], "build_kill9", "edge_build_kill9",
    ]  # fmt: skip


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
2026-11-30 12:54:54,889 INFO usenet_indexer.coordinator.http.node: node 12 leased range 1 epoch 1: g 10..20 from 10
2026-11-30 12:55:04,332 INFO usenet_indexer.coordinator.http.node: node 8 heartbeat range 4 epoch 2: refused, the lease is lost
2026-11-30 12:55:05,576 INFO usenet_indexer.coordinator.http.node: node 1 stored batch 11..12 of range 5 epoch 2: 21 release chunks, 706 segments, 990 lines, 25244 body bytes (already stored: a retry)
2026-11-30 12:55:06,177 INFO usenet_indexer.coordinator.http.node: node 18 POST '/api/v1/node/ranges/1/batches': 409 {"error":"range 1: not held"}
2026-11-30 12:55:06,242 INFO usenet_indexer.coordinator.http.node: node 8 GET '/api/v1/node/ranges/1/stream': 409 {"error":"not leased"}
2026-11-30 12:55:07,000 ERROR usenet_indexer.coordinator.http.node: node 3 POST '/api/v1/node/lease' failed
2026-11-30 12:55:08,000 INFO usenet_indexer.coordinator.http.node: node 2 leased range 1 epoch 2: g 10..20 from 12
"""


def test_the_coordinator_log_tells_grants_409s_and_retries(tmp_path: Path) -> None:
    log = tmp_path / "coordinator.log"
    log.write_text(COORDINATOR_LOG)
    figures = read_log(log)
    assert figures.grants == ((12, 1, 1), (2, 1, 2))
    assert figures.conflicts == {8: 2, 18: 1}
    assert figures.already_stored == 1


def _clean_report() -> dict[str, object]:
    """A report of a run with nothing wrong in it (the side runs not run)."""
    counted = ("lost", "doubled", "rows_after_409", "catalog_rows_differing", "http_5xx",
               "never_throttled", "coordinator_log_errors",
               "coordinator_log_5xx", "holder_violations", "chain_gaps", "ranges_incomplete",
               "lease_state_lost", "unrecovered", *SPOOL_FAILURES, *CLOCK_FAILURES)  # fmt: skip
    report: dict[str, object] = dict.fromkeys(counted, 0)
    report.update(
        every_range_done=True,
        lease_burst={"granted": 8, "distinct_ranges": 8, "not_as_granted_in_sql": 0},
        postgres_down_statuses={"503": 4},
        negative_control_doubled=1,
        side_runs_not_run={},
        faults=dict.fromkeys(KINDS, 1),
        prefetch_complete=None,
        clock_done=None,
    )
    return report


@pytest.mark.parametrize("key", ["coordinator_log_errors", "coordinator_log_5xx"])
def test_an_error_line_or_a_5xx_in_the_coordinators_log_fails_the_run(key: str) -> None:
    """A 500 that the edge's retry hid from every other figure still fails the run."""
    assert failures(_clean_report()) == []
    report = _clean_report() | {key: 1}
    assert failures(report) == [f"{key} = 1"]


# --- the spool's checker (the prefetch part) ---------------------------------------------------


def test_a_spool_covering_each_range_once_passes() -> None:
    ranges = [(1, 100), (101, 150)]
    chunks = [(1, 40), (41, 100), (101, 150)]
    assert checks.check_spool_coverage(ranges, chunks) == checks.SpoolCoverage(0, 0, 0, 0)


def test_the_spool_checker_finds_a_hole_and_an_overlap() -> None:
    ranges = [(1, 100), (101, 150)]
    hole = checks.check_spool_coverage(ranges, [(1, 40), (51, 100), (101, 150)])
    assert (hole.holes, hole.lost_articles, hole.overlaps) == (1, 10, 0)
    overlap = checks.check_spool_coverage(ranges, [(1, 60), (41, 100), (101, 150)])
    assert (overlap.overlaps, overlap.doubled_articles, overlap.holes) == (1, 20, 0)
    # A range with nothing at its end, and one with no chunk at all.
    short = checks.check_spool_coverage([(1, 100), (200, 209)], [(1, 90)])
    assert (short.holes, short.lost_articles) == (2, 20)
    # A chunk indexed twice is an overlap too.
    twice = checks.check_spool_coverage([(1, 10)], [(1, 10), (1, 10)])
    assert (twice.overlaps, twice.doubled_articles) == (1, 10)


def over_line(number: int, subject: str = "s") -> bytes:
    return f"{number}\t{subject}\tp\td\t<{number}@x>\t\t10\t1".encode()


def test_chunk_lines_must_be_the_servers_inside_the_chunk() -> None:
    server = {n: over_line(n) for n in range(1, 11)}
    good = [over_line(n) for n in range(3, 7)]
    assert checks.check_chunk_lines(3, 6, 4, good, server) == 0
    assert checks.check_chunk_lines(3, 6, 5, good, server) == 1  # the row says 5
    changed = [*good[:2], over_line(5, "other"), good[3]]
    assert checks.check_chunk_lines(3, 6, 4, changed, server) == 1
    assert checks.check_chunk_lines(3, 6, 3, good[:3], server) == 1  # article 6 is missing
    outside = [*good, over_line(7)]
    assert checks.check_chunk_lines(3, 6, 5, outside, server) == 2  # extra, and outside
    # A gap (no file) where the server has articles: each is a bad line.
    assert checks.check_chunk_lines(3, 6, 0, None, server) == 4
    assert checks.check_chunk_lines(20, 29, 0, None, server) == 0
    assert checks.article_number(b"x\ty") == -1


def test_temporary_chunk_files_are_found_by_the_name_the_writer_gives_them(
    tmp_path: Path,
) -> None:
    # The prefetch part kills the prefetcher the moment one appears, and
    # counts the chunks in flight by them.
    writer = ChunkWriter.open(tmp_path, "alt.binaries.g", 1001, 2000)
    try:
        assert temporary_chunks(tmp_path, os.getpid()) == [(1001, 2000)]
        assert temporary_chunks(tmp_path, os.getpid() + 1) == []
    finally:
        writer.abort()
    assert temporary_chunks(tmp_path) == []


# --- the NNTP fault proxy ------------------------------------------------------------------------

CONVERSATION = (
    b"200 ready\r\n"
    b"101 caps\r\nVERSION 2\r\nCOMPRESS DEFLATE\r\nOVER\r\n.\r\n"
    b"211 3 1 3 g\r\n"
    b"224 overview\r\n1\ta\r\n..2\tdot-stuffed\r\n.\r\n"
    b"423 none\r\n"
    b"224 overview\r\n.\r\n"
    b"205 bye\r\n"
)
VERBS = ("CAPABILITIES", "GROUP", "OVER", "OVER", "OVER", "QUIT")


def tracked(pieces: list[bytes]) -> list[Status | Data | End]:
    tracker = ReplyTracker()
    for verb in VERBS:
        tracker.sent(verb)
    return [event for piece in pieces for event in tracker.feed(piece)]


@pytest.mark.parametrize("how", ["whole", "byte by byte"])
def test_the_tracker_tells_replies_apart_and_keeps_every_byte(how: str) -> None:
    if how == "whole":
        pieces = [CONVERSATION]
    else:
        pieces = [CONVERSATION[i : i + 1] for i in range(len(CONVERSATION))]
    events = tracked(pieces)
    assert b"".join(e.raw for e in events) == CONVERSATION
    statuses = [(e.verb, e.code, e.multiline) for e in events if isinstance(e, Status)]
    assert statuses == [
        ("GREETING", 200, False), ("CAPABILITIES", 101, True), ("GROUP", 211, False),
        ("OVER", 224, True), ("OVER", 423, False), ("OVER", 224, True), ("QUIT", 205, False),
    ]  # fmt: skip
    over = b"".join(e.raw for e in events if isinstance(e, Data) and e.verb == "OVER")
    assert over == b"1\ta\r\n..2\tdot-stuffed\r\n"
    assert sum(isinstance(e, End) for e in events) == 3


def test_the_tracker_keeps_what_is_not_a_whole_line_yet() -> None:
    tracker = ReplyTracker()
    tracker.sent("OVER")
    assert tracker.feed(b"200 hi\r\n224 ov") == [Status("GREETING", 200, b"200 hi\r\n", False)]
    assert tracker.feed(b"\r\n1\ta\r\n.") == [
        Status("OVER", 224, b"224 ov\r\n", True),
        Data("OVER", b"1\ta\r\n"),
    ]
    assert tracker.feed(b"\r\n") == [End("OVER", b".\r\n")]


def test_compress_is_hidden_from_capabilities() -> None:
    raw = b"VERSION 2\r\nCOMPRESS DEFLATE\r\nOVER\r\n"
    assert hide_compression(raw) == b"VERSION 2\r\nOVER\r\n"


def test_the_fault_schedule_is_seeded_and_leaves_the_first_events_alone() -> None:
    counts = {DROP: 2, REFUSE: 1, AUTH: 1, STALL: 1}
    one, two = FaultSchedule.seeded(5, counts, 4), FaultSchedule.seeded(5, counts, 4)
    assert one.at == two.at
    assert {kind: len(numbers) for kind, numbers in one.at.items()} == counts
    assert one.at[DROP].isdisjoint(one.at[STALL])
    assert min(n for numbers in one.at.values() for n in numbers) >= 2
    assert max(one.at[DROP] | one.at[STALL]) < 2 + 4 * 3
    # Connections and first GROUPs are few: their faults come right after the first.
    assert (one.at[REFUSE], one.at[AUTH]) == (frozenset({2}), frozenset({2}))
    overs = [one.on_over_reply() for _ in range(20)]
    assert overs.count(DROP) == 2
    assert overs.count(STALL) == 1
    assert sum(one.on_connection() for _ in range(10)) == 1
    assert one.injected == {DROP: 2, STALL: 1, REFUSE: 1}
    two.armed = False
    assert not any(two.on_connection() for _ in range(10))
    assert not two.injected
    assert not two.seen


LINES = [f"{n}\tsubject {n}\tp\td\t<{n}@x>\t\t10\t1".encode() for n in range(1, 41)]


def _fake_nntp() -> FakeNNTPServer:
    """A fake news server of one group "g" (1..40) that offers COMPRESS DEFLATE."""
    return FakeNNTPServer(
        capabilities=["VERSION 2", "READER", "OVER", "COMPRESS DEFLATE"],
        groups={"g": (1, 40)},
        overview=dict(enumerate(LINES, start=1)),
    )


@pytest.mark.trio
async def test_the_nntp_proxy_injects_each_fault_and_forwards_the_rest(
    nursery: trio.Nursery,
) -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        listeners = await nursery.start(trio.serve_tcp, _fake_nntp().serve, 0)
        upstream = ("127.0.0.1", listeners[0].socket.getsockname()[1])
        # Connection 1 refused; the first GROUP of connection 3 (the second to
        # send one) answered 480; OVER reply 1 cut, reply 2 stalled.
        at = {
            REFUSE: frozenset({1}),
            AUTH: frozenset({2}),
            DROP: frozenset({1}),
            STALL: frozenset({2}),
        }
        schedule = FaultSchedule(at, random.Random(1))
        port = await nursery.start(serve_nntp_proxy, upstream, schedule)
        url = f"nntp://127.0.0.1:{port}"

        def session() -> contextlib.AbstractAsyncContextManager[NNTPClient]:
            return connect(url, timeout_seconds=0.5)

        with pytest.raises(Unavailable):
            async with session():
                pass
        async with session() as client:
            assert client.compression is None  # COMPRESS hidden
            await client.group("g")
            with pytest.raises(ConnectionLost):
                async for _ in client.over_pipelined([(1, 40)]):
                    pass
        async with session() as client:
            with pytest.raises(AuthRequired):
                await client.group("g")
            await client.group("g")  # the connection stays usable; the next one is forwarded
            with pytest.raises(Timeout):
                async for _ in client.over_pipelined([(1, 40)]):
                    pass
        async with session() as client:
            await client.group("g")
            got = [
                line
                async for _, piece in client.over_pipelined([(1, 25), (26, 40)])
                for line in piece
            ]
        assert got == LINES
    assert schedule.injected == dict.fromkeys(NNTP_KINDS, 1)


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
    packed = pack_batch(batch)
    store = BatchStore(pool, fenced=fenced)
    assert not store.store(node_id, lease.range_id, lease.epoch, packed, 0, 60).already
    retry = store.store(node_id, lease.range_id, lease.epoch, packed, 0, 60)  # its reply was lost
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


async def _proxied_server(
    nursery: trio.Nursery, seen: list[bytes], dropper: ReplyDropper, ambush: Ambush | None = None
) -> int:
    """The port of the chaos proxy in front of an `_answer_forever` server, both in `nursery`."""
    listeners = await nursery.start(trio.serve_tcp, lambda stream: _answer_forever(seen, stream), 0)
    upstream = ("127.0.0.1", listeners[0].socket.getsockname()[1])
    port: int = await nursery.start(serve_proxy, upstream, dropper, ambush)
    return port


@pytest.mark.trio
async def test_the_proxy_forwards_the_picked_batch_and_loses_its_reply(
    nursery: trio.Nursery,
) -> None:
    seen: list[bytes] = []
    with trio.fail_after(DEADLINE_SECONDS):
        dropper = ReplyDropper(every=2, limit=1)
        port = await _proxied_server(nursery, seen, dropper)
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


def test_the_ambush_catches_one_batch_post_of_an_armed_edge() -> None:
    batches = b"/api/v1/node/ranges/7/batches"
    mine = [(b"authorization", b"Bearer tok-a"), (b"content-type", b"application/json")]
    other = [(b"authorization", b"Bearer tok-b")]
    ambush = Ambush()
    # Not armed: nothing is caught.
    assert not ambush.catches(b"POST", batches, mine)
    ambush.arm(["tok-a"], BEFORE_POST)
    assert not ambush.catches(b"POST", batches, other)
    assert not ambush.catches(b"POST", b"/api/v1/node/lease", mine)
    assert not ambush.catches(b"GET", batches, mine)
    assert not ambush.catches(b"POST", batches, [])
    assert ambush.catches(b"POST", batches, mine)
    assert (ambush.caught_token, ambush.range_id, ambush.point) == ("tok-a", 7, BEFORE_POST)
    # One catch per arming.
    assert not ambush.catches(b"POST", batches, mine)
    ambush.arm(["tok-a", "tok-b"], AFTER_COMMIT)
    ambush.disarm()
    assert not ambush.catches(b"POST", batches, other)
    with pytest.raises(ValueError, match="point"):
        ambush.arm(["tok-a"], "somewhere")


def test_the_proxy_reads_tokens_batch_ranges_and_answer_statuses() -> None:
    assert bearer([(b"authorization", b"bearer  x.y ")]) == "x.y"
    assert bearer([(b"authorization", b"Basic eA==")]) is None
    assert batch_range(b"POST", b"/api/v1/node/ranges/12/batches") == 12
    assert batch_range(b"POST", b"/api/v1/node/ranges/12/batches?x=1") == 12
    assert batch_range(b"POST", b"/api/v1/node/ranges/x/batches") is None
    assert batch_range(b"POST", b"/api/v1/node/ranges/12/release") is None
    assert batch_range(b"PUT", b"/api/v1/node/ranges/12/batches") is None
    assert batch_range(b"POST", b"/batches") is None
    assert answer_status(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok") == 200
    assert answer_status(b"HTTP/1.1 409 Conflict\r\n") == 409
    assert answer_status(b"HTT") is None


def test_both_runs_kill_at_each_named_point() -> None:
    assert set(NAMED_KILLS) == {BEFORE_POST, AFTER_COMMIT}
    assert set(NAMED_KILLS.values()) <= set(KINDS)
    assert short_config(1).named_kills >= 1
    assert long_config(1).named_kills > short_config(1).named_kills


async def _ambushed_post(point: str, headers: dict[str, str]) -> tuple[list[bytes], Ambush, bool]:
    """One batch post through the proxy armed at `point`; what the server saw, and whether
    the client got its answer."""
    seen: list[bytes] = []
    answered = False
    ambush = Ambush()
    ambush.arm(["tok-a"], point)
    async with trio.open_nursery() as nursery:
        port = await _proxied_server(nursery, seen, ReplyDropper(every=1, limit=9), ambush)

        async def post() -> None:
            nonlocal answered
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                with contextlib.suppress(httpx.TransportError):
                    await client.post("/ranges/3/batches", content=b"one", headers=headers)
                    answered = True

        nursery.start_soon(post)
        await ambush.caught.wait()
        # The run kills the edge here; what the server saw is fixed by now.
        await trio.sleep(0.2)
        snapshot = list(seen)
        ambush.released.set()
        await trio.sleep(0.2)
        nursery.cancel_scope.cancel()
    return snapshot, ambush, answered


@pytest.mark.trio
async def test_the_proxy_holds_an_armed_post_before_it_reaches_the_server() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        seen, ambush, answered = await _ambushed_post(
            BEFORE_POST, {"Authorization": "Bearer tok-a"}
        )
    assert seen == []
    assert (ambush.range_id, ambush.status, answered) == (3, None, False)


@pytest.mark.trio
async def test_the_proxy_keeps_the_answer_of_an_armed_post_after_the_server_took_it() -> None:
    with trio.fail_after(DEADLINE_SECONDS):
        seen, ambush, answered = await _ambushed_post(
            AFTER_COMMIT, {"Authorization": "Bearer tok-a"}
        )
    assert seen == [b"POST /ranges/3/batches HTTP/1.1 one"]
    assert (ambush.range_id, ambush.status, answered) == (3, 200, False)


@pytest.mark.trio
async def test_the_retry_of_a_batch_whose_reply_was_lost_is_not_ambushed(
    nursery: trio.Nursery,
) -> None:
    seen: list[bytes] = []
    with trio.fail_after(DEADLINE_SECONDS):
        dropper, ambush = ReplyDropper(every=1, limit=1), Ambush()
        port = await _proxied_server(nursery, seen, dropper, ambush)
        headers = {"Authorization": "Bearer tok-a"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            with pytest.raises(httpx.TransportError):
                await client.post("/ranges/3/batches", content=b"one", headers=headers)
            assert dropper.awaiting_retry == {"tok-a"}
            ambush.arm(["tok-a"], BEFORE_POST)
            # The retry goes through (answered), the ambush stays armed for the next post.
            response = await client.post("/ranges/3/batches", content=b"one", headers=headers)
            assert response.text == "ok"
    assert not ambush.caught.is_set()
    assert ambush.tokens == {"tok-a"}
    assert dropper.awaiting_retry == set()


# --- the short run, end to end ---------------------------------------------------------------


@pytest.mark.slow
def test_the_short_chaos_run_loses_doubles_and_lets_in_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chaos.suite", "--short", "--seed", "1"],
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
    # The coordinator's own log: no ERROR line, no 5xx but the 503s of the
    # database's planned stops (a retry would hide a 500 from http_5xx).
    assert report["coordinator_log_errors"] == 0, report["coordinator_log_sample"]
    assert report["coordinator_log_5xx"] == 0, report["coordinator_log_sample"]
    assert report["negative_control_doubled"] > 0
    assert report["holder_violations"] == 0
    assert report["lease_burst"]["granted"] == report["lease_burst"]["distinct_ranges"]
    assert set(report["faults"]) == set(KINDS)
    # Every side run ran (one left out has no fault of its kinds): why not, if one did not.
    assert report["side_runs_not_run"] == {}, report["side_runs_not_run"]
    # The kinds that got no fault, by name (pytest cuts a long dict's repr short).
    assert [kind for kind, count in report["faults"].items() if count < 1] == [], report["faults"]
    # Item 1's named points: an edge killed with its batch post held by the
    # proxy, and one killed after the commit, before the answer reached it.
    for kind in NAMED_KILLS.values():
        assert report["faults"][kind] >= 1, kind
    assert report["already_stored"] >= 1, done.stderr[-4000:]
    assert report["conflicts_409"] >= 1, done.stderr[-4000:]
    # The frozen edge's later calls (heartbeat, release, batch) are refused.
    assert report["stopped_edges_409"] >= 1, done.stderr[-4000:]
    assert report["recovery_p50_seconds"] is not None
    assert report["fence_cost_ratio"] > 0
    # The prefetcher (item 7 and 8): killed mid-chunk and after chunks landed,
    # and through the NNTP fault proxy; the spool covers every range once,
    # with INN2's lines, and what was in flight at a kill was fetched again.
    for kind in (*PREFETCH_KINDS, *CLOCK_KINDS):
        assert report["faults"][kind] >= 1, kind
    for key in SPOOL_FAILURES:
        assert report[key] == 0, key
    assert report["spool_lines"] == report["prefetch_articles"] > 0
    assert report["prefetch_complete"] is True
    assert report["prefetch_exit_status"] == 0
    assert report["prefetch_refetched"] == report["prefetch_in_flight_at_kills"]
    assert report["prefetch_tmp_removed"] >= report["prefetch_in_flight_at_kills"]
    # Each NNTP fault made the prefetcher log an error it got over.
    nntp_faults = {k: report["faults"][k] for k in NNTP_KINDS}
    assert report["prefetch_errors_logged"] >= sum(nntp_faults.values()), (
        nntp_faults,
        report["prefetch_warnings"],
    )
    # Clocks (item 9): the slow edge is fenced and stored nothing; the edge
    # two hours ahead stored its batches; that range's catalog is exact.
    assert report["clock_slow_edge_409"] >= 1
    assert report["clock_slow_edge_rows"] == 0
    assert report["clock_offset_edge_rows"] >= 1
    assert (report["clock_lost"], report["clock_doubled"]) == (0, 0)
    assert report["clock_done"] is True


# --- the run on several machines ----------------------------------------------------------------


def _several(**changes: Any) -> SeveralOutcome:
    clean = SeveralOutcome(
        done=True,
        faults=dict.fromkeys(SEVERAL_KINDS, 1),
        catalog=checks.check_catalog(["<a@x>", "<b@x>"], ["<a@x>", "<b@x>"]),
        chains=checks.ChainCheck(0, 0, 0),
        rows=(("A.Release", 2000, 100, 2, "p", ["g"], 0, 100.0, None, None),),
        coordinator_log=LogProblems((), ()),
        other_errors=(),
        landed=(3, 5),
        not_stored=2,
        live_claims=0,
        stray_objects=0,
        seconds=1.0,
    )
    return attrs.evolve(clean, **changes)


def test_the_run_on_several_machines_fails_on_what_a_fault_may_leave() -> None:
    assert several_failures(_several(), faults=True, s3=True) == []
    doubled = checks.check_catalog(["<a@x>", "<b@x>"], ["<a@x>", "<a@x>"])
    assert several_failures(_several(catalog=doubled), faults=True, s3=True) == [
        "several: lost = 1",
        "several: doubled = 1",
    ]
    five = LogProblems((), ((500, "... answered 500 ..."),))
    assert several_failures(_several(coordinator_log=five), faults=True, s3=True) == [
        "several: coordinator 5xx answers = 1"
    ]
    assert several_failures(_several(live_claims=2), faults=True, s3=True) == [
        "several: live claims left = 2"
    ]
    # A fault that never came fails the chaos run; a folder spool has no store to kill.
    unkilled = _several(faults={"prefetcher_kill9": 1, "coordinator_worker_kill9": 1})
    assert several_failures(unkilled, faults=True, s3=True) == [
        "several: faults never injected: store_kill9"
    ]
    assert several_failures(unkilled, faults=True, s3=False) == []
    # The suite's report carries them.
    assert failures(_clean_report() | {"several_failures": ["several: lost = 1"]}) == [
        "several: lost = 1"
    ]
    assert set(SEVERAL_KINDS) <= set(KINDS)


def test_a_failed_runs_logs_are_kept_beside_its_work_folder(tmp_path: Path) -> None:
    # The work folder is removed when the run ends; a failure is read from its logs.
    work = tmp_path / "uidx-chaos-run"
    (work / "several" / "logs").mkdir(parents=True)
    (work / "several" / "logs" / "prefetcher-0.log").write_text("ERROR the store refused\n")
    (work / "prefetch").mkdir()
    (work / "prefetch" / "prefetch.log").write_text("WARNING 411\n")
    (work / "data").mkdir()
    (work / "data" / "overview.gz").write_bytes(b"not a log")
    kept = keep_logs(work)
    assert kept.parent == tmp_path
    assert sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*") if p.is_file()) == [
        "prefetch/prefetch.log",
        "several/logs/prefetcher-0.log",
    ]
    assert (
        kept / "several" / "logs" / "prefetcher-0.log"
    ).read_text() == "ERROR the store refused\n"
