"""Catalog builds done by edges (settings.edge_builds): the coordinator offers a build
(`CatalogBuild.offer`), the edge merges it (edge/builds.py's `run_job`), the rows come
back (`CatalogBuild.finish`).

What a user checks: the catalog the edges build batch by batch is the one a whole
rebuild makes; a job's shards are nobody else's while it runs; an edge that dies
mid-job loses nothing (its keys are built again once the job expires); rows that are
not the job's, or arrive late, change nothing; and the whole exchange works over the
node API with the edge's own client, a build beside its ranges.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from functools import partial
from itertools import chain
from typing import Any

import attrs
import httpx
import msgpack
import pytest
import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool
from real_deadline import given_up_after
from test_catalog_build import (
    batches_of_generated,
    batches_of_lines,
    catalog_rows,
    posted_daily,
    probes_found,
)
from test_http_node import (
    GROUP,
    GZIP,
    article_of,
    batch_body,
    bearer,
    overview,
    plan,
    start_api,
)

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import (
    ASKING_SECONDS,
    EDGE_GRACE_SECONDS,
    Built,
    CatalogBuild,
    NotTheJobs,
)
from usenet_indexer.coordinator.catalog_builder import CatalogDue
from usenet_indexer.coordinator.http.node import (
    BUILD_BUSY_SECONDS,
    BUILD_RETRY_SECONDS,
    BUILD_WAIT_MAX_SECONDS,
)
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.batch import Said
from usenet_indexer.core.catalog import CatalogEntry, Categories, Made
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import KEYS
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.decode.ids import MediaIds
from usenet_indexer.edge.builds import build_forever, run_job
from usenet_indexer.edge.client import open_client
from usenet_indexer.edge.events import EdgeEvent, EventKind
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.wire.batchwire import KEY_BYTES
from usenet_indexer.wire.buildjob import (
    BuildJob,
    BuildResult,
    BuildWireError,
    ReleaseRows,
    _checked_entry,
    _finding,
    decode_job,
    decode_result,
    encode_job,
    encode_result,
    job_pieces,
    micros,
    moment,
)
from usenet_indexer.wire.fragments import BadFragment

DEADLINE_SECONDS = 60
# What an edge of this version says as it asks for a build (edge/client.py).
ASKING = {"keys": str(KEYS)}


@pytest.fixture
def edge_stores(pool: ConnectionPool) -> Stores:
    """The coordinator's stores, offering builds to edges."""
    return Stores.from_pool(pool, edge_builds=True)


@pytest.fixture
def builder(edge_stores: Stores) -> int:
    node_id = edge_stores.nodes.authenticate(edge_stores.nodes.create("builder"))
    assert node_id is not None
    return node_id


def offered(stores: Stores, node_id: int, lease_seconds: float = 60.0) -> BuildJob | None:
    """A job offered to `node_id`; None for none (nothing pending, or all of it held)."""
    job = stores.build.offer(node_id, lease_seconds)
    return job if isinstance(job, BuildJob) else None


def made_by_an_edge(stores: Stores, node_id: int, lease_seconds: float = 60.0) -> tuple[int, Made]:
    """One job offered, through the wire both ways as over HTTP, merged as an edge does."""
    job = offered(stores, node_id, lease_seconds)
    assert job is not None
    result = run_job(decode_job(encode_job(job)), pure=False, categories=Categories())
    return job.job_id, decode_result(encode_result(result)).made


def edge_builds(stores: Stores, node_id: int) -> int:
    """Every job offered, done as an edge does, until none is left; how many."""
    jobs = 0
    while (job := offered(stores, node_id, 60.0)) is not None:
        result = run_job(decode_job(encode_job(job)), pure=False, categories=Categories())
        made = decode_result(encode_result(result)).made
        assert stores.build.finish(node_id, job.job_id, made, quiet_seconds=0) is not None
        jobs += 1
    return jobs


def pending_keys(stores: Stores) -> int:
    with stores.catalog.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM catalog_pending").fetchone()
    assert row is not None
    return int(row[0])


def waited_past_the_grace(stores: Stores) -> None:
    """The pending keys became pending longer ago than the edges' grace (the clock is the
    database's: moved back, not waited for)."""
    with stores.catalog.pool.connection() as conn:
        conn.execute(
            "UPDATE catalog_pending SET since = since - make_interval(secs => %s)",
            (EDGE_GRACE_SECONDS + 1,),
        )


@pytest.mark.parametrize("profile", ["default", "posting-tools"])
def test_batch_by_batch_the_catalog_edges_build_is_what_a_whole_rebuild_makes(
    edge_stores: Stores, builder: int, profile: str
) -> None:
    jobs = 0
    for _ in batches_of_generated(edge_stores, 30_000, seed=3, every=400, profile=profile):
        jobs += edge_builds(edge_stores, builder)
    assert jobs > 10
    assert pending_keys(edge_stores) == 0  # the edges built everything
    followed = catalog_rows(edge_stores)
    assert len(followed) > 20
    edge_stores.build.everything(quiet_seconds=0)
    assert catalog_rows(edge_stores) == followed


def test_the_log_says_of_each_job_offered_its_keys_look_ups_and_time(
    edge_stores: Stores, builder: int, caplog: pytest.LogCaptureFixture
) -> None:
    # An edge's finished build is logged without the closure it came of: the offer says.
    caplog.set_level(logging.INFO, logger="usenet_indexer.coordinator.catalog_build")
    for _ in batches_of_generated(edge_stores, 3_000, seed=3, every=3_000):
        pass
    job = offered(edge_stores, builder)
    assert job is not None
    [said] = [r.getMessage() for r in caplog.records if "offered:" in r.getMessage()]
    found = re.search(
        r"job (\d+) offered: (\d+) pending keys, .*; (\d+) look-ups, ([\d.]+) s$", said
    )
    assert found is not None, said
    assert int(found[1]) == job.job_id
    assert int(found[2]) == len(job.pending) > 0
    assert int(found[3]) >= 2  # the touched keys' spans, then their rows and windows
    assert float(found[4]) >= 0


def test_what_probes_found_of_a_repost_generation_is_in_the_catalog_edges_build(
    edge_stores: Stores, builder: int
) -> None:
    # A job holds what probes found of its keys; a repost generation's release key (its
    # row's guid) is no stored key, and its rename or executables were left out. Its
    # probes are queued under a stored key of it (renames.probe_key) and found
    # through its sources.
    for _ in batches_of_generated(edge_stores, 40_000, seed=3, every=700):
        edge_builds(edge_stores, builder)
    probed = probes_found(edge_stores)
    with edge_stores.catalog.pool.connection() as conn:
        stored = conn.execute("SELECT key FROM releases WHERE key = ANY(%s)", (probed,))
        assert set(probed) == {bytes(k) for (k,) in stored.fetchall()}
    assert edge_builds(edge_stores, builder) > 0
    assert pending_keys(edge_stores) == 0  # the edges built everything
    followed = catalog_rows(edge_stores)
    with edge_stores.catalog.pool.connection() as conn:
        keys = {bytes(k) for (k,) in conn.execute("SELECT key FROM releases")}
    generations = [g for g in followed if bytes.fromhex(g) not in keys]
    assert any(str(followed[g][0]).startswith("Found.Name.") for g in generations)
    edge_stores.build.everything(quiet_seconds=0)
    assert catalog_rows(edge_stores) == followed


def test_a_backfill_the_edges_build_leaves_every_stored_uploads_guid(
    edge_stores: Stores, builder: int
) -> None:
    """test_catalog_build's backfill, built by an edge: the job carries the rows' anchors
    (pins) and its rows theirs, so every stored upload keeps its guid."""
    uploads = posted_daily("abcd")
    for _ in batches_of_lines(edge_stores, "alt.binaries.test", [*chain(*uploads[1:])], 3):
        edge_builds(edge_stores, builder)
    assert pending_keys(edge_stores) == 0
    before = catalog_rows(edge_stores)
    assert len(before) == 3
    for _ in batches_of_lines(edge_stores, "alt.binaries.test", uploads[0], 10_000):
        pass
    assert edge_builds(edge_stores, builder) > 0
    after = catalog_rows(edge_stores)
    assert len(after) == 4
    assert {guid: after[guid] for guid in before} == before
    edge_stores.build.everything(quiet_seconds=0)
    assert catalog_rows(edge_stores) == after


def test_a_jobs_release_rows_as_postgresql_writes_them_are_the_rows_a_local_build_reads(
    edge_stores: Stores, builder: int
) -> None:
    for _ in batches_of_generated(edge_stores, 12_000, seed=5, every=300, profile="posting-tools"):
        with edge_stores.catalog.pool.connection() as conn:
            stored = {
                bytes(key): (bytes(key), head, poster, tuple(groups), announced)
                for key, head, poster, groups, announced in conn.execute(
                    "SELECT key, head_name, poster, groups, files_announced FROM releases"
                )
            }
        rows, _ = edge_stores.build.store.packed(list(stored))
        assert ReleaseRows(rows).by_key() == stored
        edge_builds(edge_stores, builder)
    assert pending_keys(edge_stores) == 0
    followed = catalog_rows(edge_stores)
    assert len(followed) > 10
    edge_stores.build.everything(quiet_seconds=0)
    assert catalog_rows(edge_stores) == followed


def test_a_job_whose_release_rows_are_not_rows_fails_loudly() -> None:
    key = b"k" * KEY_BYTES
    job = job_of(((key, b"not a fragment", None),))
    # Release rows that are not a JSON array of rows.
    for text in ("", "{}", '[["zz", null, "a@b", [], null]]', "[[1, 2]]"):
        with pytest.raises(BuildWireError, match="release rows"):
            run_job(attrs.evolve(job, releases=ReleaseRows(text)), pure=False,
                    categories=Categories())  # fmt: skip
    # A fragment of a key the job sends no release row for.
    with pytest.raises(BadFragment, match="no release row"):
        run_job(job, pure=False, categories=Categories())
    assert decode_job(encode_job(job)) == job
    document = msgpack.unpackb(encode_job(job))
    with pytest.raises(BuildWireError):
        decode_job(msgpack.packb({**document, "releases": [[key, None, "a@b", [], None]]}))
    # What a fragment says of its chunk: nil, or its poster, head and M.
    said = ("amy <amy@example.org>", None, 2)
    assert decode_job(encode_job(attrs.evolve(job, fragments=((key, b"x", said),)))).fragments == (
        (key, b"x", said),
    )
    for wrong, problem in (
        (["amy"], "3 fields, not 1"),
        ([7, None, 2], "expected a string, got int"),
        (["amy", None, True], "expected an integer, got bool"),
        ("amy", "expected a list, got str"),
    ):
        bad = msgpack.packb({**document, "fragments": [[key, wrong, b"x"]]})
        with pytest.raises(BuildWireError, match=problem):
            decode_job(bad)


def test_each_field_of_an_edges_row_is_checked_and_a_wrong_one_named() -> None:
    row = CatalogEntry(
        guid="g", name="Some.Show.S01E02.720p", search_name="some show s01e02 720p",
        category=5040, size=1 << 33, files=12, poster="a@b", groups=("alt.binaries.test",),
        posted=1_700_000_000, completion=99.5, season=1, episode=2, probe_candidate=False,
        sources=(b"k" * KEY_BYTES,), changed_at=moment(1_700_000_000_000_000), state="whole",
        ids=MediaIds(tvdb=7), anchor="part1of12.AbC@powerpost2000AA.local",
        span=(1_700_000_000, 1_700_000_600),
    )  # fmt: skip
    made = Made((row,), (), ())
    assert decode_result(encode_result(BuildResult(made, 0.5, 1.0))).made == made
    document = msgpack.unpackb(encode_result(BuildResult(made, 0.5, 1.0)))
    wrong: list[tuple[int, object, str]] = [
        (0, 7, "expected a string, got int"),
        (3, True, "expected an integer, got bool"),
        (7, ["alt.binaries.test", 3], "expected a string, got int"),
        (9, "99", "expected a number, got str"),
        (10, 1.5, "expected an integer, got float"),
        (12, 0, "expected true or false, got int"),
        (13, ["k" * KEY_BYTES], "expected bytes, got str"),
        (16, [None, 7, None, None], "ids are 5"),
        (17, "a\x00b@c", "anchor message-id is not one"),
        (17, 7, "expected a string, got int"),
        (18, None, "span has both ends or none"),
        (19, 1_600_000_000, "span ends before it begins"),
        (19, "1700000600", "expected an integer, got str"),
    ]
    for at, value, problem in wrong:
        fields = list(document["entries"][0])
        fields[at] = value
        bad = msgpack.packb({**document, "entries": [fields]})
        with pytest.raises(BuildWireError, match=problem):
            decode_result(bad)
    with pytest.raises(BuildWireError, match="20 fields, not 19"):
        decode_result(msgpack.packb({**document, "entries": [document["entries"][0][:-1]]}))
    for name, value, problem in [
        ("no_album", [b"k"], "a release key is 16 bytes, not 1"),
        ("cpu_s", float("nan"), "seconds are a number from 0"),
        ("wall_s", float("inf"), "seconds are a number from 0"),
        ("wall_s", -1.0, "seconds are a number from 0"),
    ]:
        with pytest.raises(BuildWireError, match=problem):
            decode_result(msgpack.packb({**document, name: value}))
    # A probe's message-id goes into an NNTP server's BODY command, its texts into
    # PostgreSQL: one that could not be refused (a NUL was a 500, a CR LF would end
    # the command).
    key = b"k" * KEY_BYTES
    good = [key, "part1of7.AbC@powerpost2000AA.local", "show.s01e02.par2"]
    assert decode_result(msgpack.packb({**document, "probes": [good]})).made.probes == (
        tuple(good),
    )
    # A stored fragment's message-ids have no cap on their length, nor a par2's file
    # names (64 KiB): a probe of one is taken (refused, the job would be built and
    # refused again and again).
    long = [key, "a" * 5000 + "@b", "x" * 70_000 + ".par2"]
    assert decode_result(msgpack.packb({**document, "probes": [long]})).made.probes == (
        tuple(long),
    )
    for at, value, problem in [
        (1, "a\x00b@c", "message-id is not one"),
        (1, "a\r\nQUIT@b", "message-id is not one"),
        (1, "<a@b>", "message-id is not one"),
        (1, "", "message-id is not one"),
        (2, "x\x00.par2", "file name is not one"),
        (0, b"", "a release key is 16 bytes, not 0"),
        (0, "k" * KEY_BYTES, "expected bytes, got str"),
    ]:
        probe = list(good)
        probe[at] = value
        with pytest.raises(BuildWireError, match=problem):
            decode_result(msgpack.packb({**document, "probes": [probe]}))


# Any value msgpack carries (its integers: -2**63 to 2**64 - 1), a field's right type among them.
_ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False), st.text(max_size=8), st.binary(max_size=20),
    st.lists(st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.text(max_size=4),
                       st.binary(max_size=4)), max_size=6),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@example(replaced={14: 2**63}, ints=[None] * 5)  # a time past the year 9999
@example(replaced={14: -(2**62)}, ints=[None] * 5)
@example(replaced={9: 2**64 - 1, 3: 2**40}, ints=[None] * 5)
@example(replaced={}, ints=[1, 2, 7, 3, None])  # a span that ends before it begins
@example(replaced={19: True}, ints=[1, 2, 7, 8, None])  # a bool is no date
@given(
    replaced=st.dictionaries(st.integers(min_value=0, max_value=19), _ANY_VALUE, max_size=3),
    ints=st.lists(st.one_of(st.none(), st.integers(-(2**40), 2**40)), min_size=5, max_size=5),
)
def test_an_edges_rows_are_read_as_the_field_by_field_checks_read_them(
    replaced: dict[int, object], ints: list[int | None]
) -> None:
    """The coordinator reads a well-typed row in one look and any other field by field
    (which names what is wrong): both ways make the same row of what they accept, and
    refuse the same rows, each a BuildWireError (a 400), never another exception
    (a time past what a date holds was an OverflowError, a 500)."""
    fields: list[object] = [
        "g", "Name", "name", 5040, 1 << 33, 12, "a@b", ["alt.binaries.test"], 1_700_000_000,
        99.5, ints[0], ints[1], False, [b"k" * KEY_BYTES], 1_700_000_000_000_000, "whole", ints,
        "part1of12.AbC@powerpost2000AA.local", ints[2], ints[3],
    ]  # fmt: skip
    for at, value in replaced.items():
        fields[at] = value
    body = msgpack.packb(
        {"entries": [fields], "no_album": [], "probes": [], "cpu_s": 0.1, "wall_s": 0.2}
    )
    row = msgpack.unpackb(body)["entries"][0]
    try:
        expected: CatalogEntry | None = _checked_entry(row)
    except BuildWireError:
        expected = None
    if expected is None:
        with pytest.raises(BuildWireError):
            decode_result(body)
    else:
        assert decode_result(body).made.entries == (expected,)


def packed_whole(job: BuildJob) -> bytes:
    """The job as msgpack packs its map whole (the encoding `job_pieces` must equal)."""
    return msgpack.packb(
        {
            "id": job.job_id,
            "releases": job.releases.json,
            "fragments": [
                [k, None if said is None else list(said), f] for k, f, said in job.fragments
            ],
            "pending": list(job.pending),
            "probed": list(job.probed),
            "found": [[k, [_finding(f) for f in fs]] for k, fs in job.found.items()],
            "changed": [[k, micros(v)] for k, v in job.changed.items()],
            "asked": [[k, sorted(v)] for k, v in job.asked.items()],
            "keys": job.keys,
            "pins": [[k, [list(pin) for pin in pins]] for k, pins in job.pins.items()],
        }
    )


@pytest.mark.parametrize(
    ("count", "size"),
    # Around msgpack's header sizes: a fixarray up to 15, array 16 to 65,535, array 32;
    # bin 8 up to 255 bytes, bin 16 up to 65,535, bin 32.
    [(0, 0), (1, 0), (15, 255), (16, 256), (3, 65_535), (2, 65_536), (65_536, 1)],
)
def test_a_job_sent_in_pieces_is_the_msgpack_of_its_map_whole(count: int, size: int) -> None:
    # The coordinator sends a job's stored fragments as they are, between pieces of
    # msgpack it writes itself: joined, they must be what msgpack makes of the map.
    # What each chunk says of itself: a poster, head and M, or none (stored before 0047).
    saids: list[Said] = [("a@b", None, 3), None, ("Ünï <c@d>", "Some Head", None)]
    fragments = tuple(
        (i.to_bytes(KEY_BYTES, "big"), bytes([i % 251]) * size, saids[i % 3]) for i in range(count)
    )
    key = b"k" * KEY_BYTES
    job = attrs.evolve(
        job_of(fragments),
        job_id=123_456_789,
        releases=ReleaseRows('[["6b", null, "a@b", [], 3]]'),
        pending=(key,),
        probed=(key,),
        changed={key: moment(1_700_000_000_000_000)},
        asked={key: frozenset({"<a@b>", "<c@d>"})},
        pins={key: (("a@b", key), ("c@d", b"g" * KEY_BYTES))},
    )
    pieces = job_pieces(job)
    assert b"".join(pieces) == encode_job(job) == packed_whole(job)
    assert decode_job(b"".join(pieces)) == job
    # The fragments go as they are, not copied into a buffer.
    assert all(any(piece is fragment for piece in pieces) for _, fragment, _ in fragments if size)


def job_of(fragments: tuple[tuple[bytes, bytes, Said], ...]) -> BuildJob:
    return BuildJob(
        job_id=1, releases=ReleaseRows(), fragments=fragments, pending=(), probed=(), found={}, changed={},
        asked={},
    )  # fmt: skip


def test_a_jobs_shards_are_no_other_builders_until_its_rows_come_back(
    edge_stores: Stores, builder: int
) -> None:
    other = edge_stores.nodes.authenticate(edge_stores.nodes.create("another"))
    assert other is not None
    jobs = []
    # A job after each batch: the second takes only what the first does not hold.
    for _ in batches_of_generated(edge_stores, 6_000, seed=4, every=3_000):
        assert pending_keys(edge_stores) > 0
        job = offered(edge_stores, builder, 60.0)
        assert job is not None
        jobs.append(job)
    # Another edge takes what no job holds (nothing here: each job took every free shard).
    while (job := offered(edge_stores, other, 60.0)) is not None:
        jobs.append(job)
    merged = [set(job.releases.by_key()) for job in jobs]
    assert sum(map(len, merged)) == len(set().union(*merged))  # no key in two jobs
    # `uidx status`, the page and /metrics say how many builds edges are doing.
    assert edge_stores.builds.lag(600).edge_jobs == len(jobs)
    # While the jobs run, neither another edge nor a coordinator (the keys waited
    # past the edges' grace) builds any of their shards.
    assert offered(edge_stores, other, 60.0) is None
    waited_past_the_grace(edge_stores)
    assert edge_stores.build.pending(quiet_seconds=0).keys == 0
    assert catalog_rows(edge_stores) == {}
    made = [
        decode_result(encode_result(run_job(job, pure=False, categories=Categories()))).made
        for job in jobs
    ]
    for job, rows in zip(jobs, made, strict=True):
        node = builder if job in jobs[:2] else other
        built = edge_stores.build.finish(node, job.job_id, rows, quiet_seconds=0)
        assert built is not None
        assert built.releases == len(rows.entries)
    assert edge_stores.builds.lag(600).edge_jobs == 0
    # The same rows twice: the job is over (its keys built), refused.
    assert edge_stores.build.finish(builder, jobs[0].job_id, made[0], quiet_seconds=0) is None
    # The second batch's keys in the first job's shards waited for it; now free.
    edge_builds(edge_stores, other)
    assert pending_keys(edge_stores) == 0
    followed = catalog_rows(edge_stores)
    edge_stores.build.everything(quiet_seconds=0)
    assert catalog_rows(edge_stores) == followed


def stored(stores: Stores) -> int:
    """A batch of 3,000 generated articles stored; the keys it left pending."""
    for _ in batches_of_generated(stores, 3_000, seed=4, every=3_000):
        pass
    return pending_keys(stores)


def test_an_older_edges_rows_dated_ahead_are_dated_when_their_articles_were_stored(
    edge_stores: Stores, builder: int
) -> None:
    """An edge from before the catalog's dates were clamped (core/catalog.py's seen_by)
    sends a release's date as its poster's clock gave it, years ahead: its rows are dated
    no later than when their articles were stored (the row's changed_at), as the
    coordinator's own build and a current edge's date them, and do not top the
    newest-first feeds until then. A date before that is kept as it is."""
    stored(edge_stores)
    job_id, made = made_by_an_edge(edge_stores, builder)
    assert len(made.entries) >= 2
    ahead = int(time.time()) + 10 * 365 * 86_400
    first, *rest = made.entries
    older = attrs.evolve(made, entries=(first, *(attrs.evolve(e, posted=ahead) for e in rest)))
    assert edge_stores.build.finish(builder, job_id, older, quiet_seconds=0) is not None
    with edge_stores.catalog.pool.connection() as conn:
        posted: dict[str, int] = dict(conn.execute("SELECT guid, posted FROM catalog").fetchall())
    assert posted == {
        first.guid: first.posted,
        **{e.guid: int(e.changed_at.timestamp()) for e in rest},
    }
    assert first.posted <= first.changed_at.timestamp()


def test_a_job_whose_edge_died_expires_and_its_keys_are_built_again(
    edge_stores: Stores, builder: int
) -> None:
    waiting = stored(edge_stores)
    # A lease of no time: expired as soon as it is taken (the edge died at once).
    job_id, made = made_by_an_edge(edge_stores, builder, lease_seconds=0.0)
    assert edge_stores.build.finish(builder, job_id, made, quiet_seconds=0) is None
    assert catalog_rows(edge_stores) == {}
    assert pending_keys(edge_stores) == waiting  # nothing lost
    # The next edge to ask takes them (and the rest).
    other = edge_stores.nodes.authenticate(edge_stores.nodes.create("another"))
    assert other is not None
    assert edge_builds(edge_stores, other) == 1  # every free shard in one job
    assert pending_keys(edge_stores) == 0
    assert set(catalog_rows(edge_stores)) >= {e.guid for e in made.entries}


def test_keys_no_edge_took_in_a_few_seconds_are_built_by_the_coordinator(
    edge_stores: Stores, builder: int
) -> None:
    waiting = stored(edge_stores)
    # An edge asked (it got a job, and died): fresh keys are left to the edges.
    made_by_an_edge(edge_stores, builder, lease_seconds=0.0)
    assert edge_stores.build.drain(quiet_seconds=0).pending == 0
    assert pending_keys(edge_stores) == waiting
    # Once they waited longer than the edges' grace, the coordinator builds them.
    waited_past_the_grace(edge_stores)
    assert edge_stores.build.drain(quiet_seconds=0).pending == waiting
    assert pending_keys(edge_stores) == 0


def pending_set(stores: Stores) -> set[bytes]:
    with stores.catalog.pool.connection() as conn:
        return {bytes(k) for (k,) in conn.execute("SELECT key FROM catalog_pending")}


def test_an_edge_cannot_write_over_a_row_another_job_made(
    edge_stores: Stores, builder: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A row's guid is its release's key: an edge's row under the guid of a catalog row made
    of keys beside its job's leaves that row as it was (the rest of the job is written), and
    the keys of both are built again, so that the next build makes what a whole rebuild
    makes. (A closure that did not reach a row's every key is kept out the same way.)"""
    batches = batches_of_generated(edge_stores, 6_000, seed=4, every=3_000)
    next(batches)
    first_job, first = made_by_an_edge(edge_stores, builder)
    assert edge_stores.build.finish(builder, first_job, first, quiet_seconds=0) is not None
    before = catalog_rows(edge_stores)
    next(batches)
    job_id, made = made_by_an_edge(edge_stores, builder)
    with edge_stores.build.table.shards() as locks:
        job = locks.jobs.job(job_id, builder)
    assert job is not None
    others = [e for e in first.entries if not set(e.sources) & job.keys]
    assert others
    victim = others[0]
    hijack = attrs.evolve(made.entries[0], guid=victim.guid, name="HIJACKED")
    rest = made.entries[1:]
    built = edge_stores.build.finish(
        builder, job_id, attrs.evolve(made, entries=(hijack, *rest)), quiet_seconds=0
    )
    assert built is not None
    after = catalog_rows(edge_stores)
    assert after[victim.guid] == before[victim.guid]
    assert {e.guid for e in rest} <= after.keys()  # the job's other rows are written
    assert set(victim.sources) | set(hijack.sources) <= pending_set(edge_stores)
    assert "rows kept as they were" in caplog.text
    assert victim.guid in caplog.text
    # The next build (an edge's, then the coordinator's) mends what the hijack left out.
    edge_builds(edge_stores, builder)
    assert pending_keys(edge_stores) == 0
    followed = catalog_rows(edge_stores)
    edge_stores.build.everything(quiet_seconds=0)
    assert catalog_rows(edge_stores) == followed


def test_rows_that_are_not_the_jobs_are_refused_and_change_nothing(
    edge_stores: Stores, builder: int
) -> None:
    stored(edge_stores)
    job_id, made = made_by_an_edge(edge_stores, builder)
    entry = made.entries[0]

    def row(**changes: Any) -> Made:
        return attrs.evolve(made, entries=(attrs.evolve(entry, **changes),))

    strays = [
        (row(sources=(b"\x01" * 16,)), "keys the job did not merge"),
        (attrs.evolve(made, entries=(entry, entry)), "a catalog row twice"),
        (row(name="a\x00b"), "a NUL in its text"),
        (row(groups=(*entry.groups, "alt.\x00")), "a NUL in its text"),
        (row(size=2**64), "out of its column's range"),
        (row(posted=-(2**63) - 1), "out of its column's range"),
        (row(category=2**31), "out of its column's range"),
        (row(episode=-(2**31) - 1), "out of its column's range"),
        (row(ids=MediaIds(tmdb_tv=2**31)), "out of its column's range"),
        (row(completion=1e300), "not in 0..1"),
        (row(state="bogus"), "is no state"),
        (row(guid="ab" * 2000), "a guid is a release key in hex"),
        (row(guid=entry.guid.upper()), "a guid is a release key in hex"),
        (row(guid=entry.guid[:-1] + "g"), "a guid is a release key in hex"),
        (row(search_name="x " * 600_000), "a search name over 1,048,575 bytes"),
        (row(search_name="é" * 600_000), "a search name over 1,048,575 bytes"),
        (row(completion=float("nan")), "not in 0..1"),
        (row(completion=-0.5), "not in 0..1"),
        (attrs.evolve(made, no_album=(b"\x02" * 16,)), "keys the job did not merge"),
        (attrs.evolve(made, probes=((b"\x03" * 16, "<x@y>", "x.par2"),)), "did not merge"),
    ]
    for stray, problem in strays:
        with pytest.raises(NotTheJobs, match=problem):
            edge_stores.build.finish(builder, job_id, stray, quiet_seconds=0)
    assert catalog_rows(edge_stores) == {}
    # Not another node's to send either.
    other = edge_stores.nodes.authenticate(edge_stores.nodes.create("another"))
    assert other is not None
    assert edge_stores.build.finish(other, job_id, made, quiet_seconds=0) is None
    # The job itself is still the builder's.
    assert edge_stores.build.finish(builder, job_id, made, quiet_seconds=0) is not None
    assert len(catalog_rows(edge_stores)) == len(made.entries)


@pytest.mark.trio
async def test_an_edge_builds_the_catalog_over_the_node_api_and_bad_rows_are_4xx(
    nursery: trio.Nursery, settings: Settings, edge_stores: Stores
) -> None:
    token = edge_stores.nodes.create("edge-b")
    for _ in batches_of_generated(edge_stores, 3_000, seed=4, every=1_000):
        pass
    url = await start_api(nursery, settings, edge_stores)
    with trio.fail_after(DEADLINE_SECONDS):
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            # A body that is not rows, and rows of a job that is not the node's.
            assert (await client.post("builds/1", content=b"\xc1")).status_code == 400
            assert (await client.post("builds/abc", content=b"")).status_code == 404
            empty = encode_result(BuildResult(Made((), (), ()), 0.0, 0.0))
            assert (await client.post("builds/99", content=empty)).status_code == 409
        assert catalog_rows(edge_stores) == {}
        stop = trio.Event()
        send, receive = trio.open_memory_channel[EdgeEvent](100)
        coordinator = url.removesuffix("/api/v1/node/")
        async with (
            open_client(coordinator, token, retry=RetryPolicy()) as edge,
            trio.open_nursery() as builds,
        ):
            builds.start_soon(
                partial(build_forever, edge, stop, max_wait_seconds=0.05, observe=send.send_nowait)
            )
            async for event in receive:
                assert event.kind is EventKind.BUILT
                if not pending_keys(edge_stores):
                    break
            stop.set()
    with trio.fail_after(DEADLINE_SECONDS):
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            # Nothing left: a 204 that says when to ask again.
            response = await client.post("builds", params=ASKING)
    assert (response.status_code, response.headers.get("retry-after")) == (204, "1")
    followed = catalog_rows(edge_stores)
    assert len(followed) > 5
    edge_stores.build.everything(quiet_seconds=settings.catalog_quiet_seconds)
    assert catalog_rows(edge_stores) == followed


@attrs.define(eq=False)
class WatchedBuild(CatalogBuild):
    """The real CatalogBuild; each offer's outcome also goes to `offered` (sent from the
    worker thread the node API offers in)."""

    offered: trio.MemorySendChannel[BuildJob | Built | None] | None = None

    def offer(self, node_id: int, lease_seconds: float) -> BuildJob | Built | None:
        job = super().offer(node_id, lease_seconds)
        if self.offered is not None:
            trio.from_thread.run_sync(self.offered.send_nowait, job)
        return job


def watched(stores: Stores) -> tuple[Stores, trio.MemoryReceiveChannel[BuildJob | Built | None]]:
    """`stores` whose build tells of each offer, and where it tells."""
    send, receive = trio.open_memory_channel[BuildJob | Built | None](1000)
    build = WatchedBuild(stores.build.pool, edge_builds=True, offered=send)
    return attrs.evolve(stores, build=build), receive


@pytest.mark.trio
async def test_an_idle_edge_asks_for_a_build_every_few_seconds_not_every_second(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    settings: Settings,
    edge_stores: Stores,
) -> None:
    """Nothing pending: the coordinator holds the edge's ask until keys are, or for
    BUILD_WAIT_MAX_SECONDS (each ask is an authentication and an offer, a few PostgreSQL
    transactions: 48 idle edges asking every second cost the coordinator 10% of a core);
    and each edge still asks within ASKING_SECONDS, so the coordinator leaves fresh keys
    to the edges."""
    # Database threads run while the clock may jump: it jumps only after 0.1 s of real
    # idleness, well beyond a query of an idle database.
    autojump_clock.autojump_threshold = 0.1
    stores, offers = watched(edge_stores)
    token = stores.nodes.create("idle-edge")
    stop = trio.Event()
    with given_up_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        coordinator = url.removesuffix("/api/v1/node/")
        async with (
            open_client(coordinator, token, retry=RetryPolicy()) as edge,
            trio.open_nursery() as builds,
        ):
            builds.start_soon(build_forever, edge, stop)
            await trio.sleep(60)
            stop.set()
    made = []
    while offers.statistics().current_buffer_used:
        made.append(offers.receive_nowait())
    assert made
    assert all(offer is None for offer in made)  # nothing pending, none offered
    assert len(made) <= 60 / BUILD_WAIT_MAX_SECONDS + 1, f"{len(made)} offers in a minute"
    assert BUILD_WAIT_MAX_SECONDS + BUILD_RETRY_SECONDS < ASKING_SECONDS


@attrs.define(eq=False)
class SlowBuild(CatalogBuild):
    """The real CatalogBuild, each offer `seconds` late on the trio clock (a busy
    database; called from the worker thread the node API offers in)."""

    seconds: float = 0.0

    def offer(self, node_id: int, lease_seconds: float) -> BuildJob | Built | None:
        trio.from_thread.run(trio.sleep, self.seconds)
        return super().offer(node_id, lease_seconds)


@pytest.mark.trio
async def test_an_ask_whose_first_offer_outlasts_its_wait_is_answered_not_a_500(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    settings: Settings,
    edge_stores: Stores,
) -> None:
    """An ask that may wait 1 s whose first look at what is pending takes 5 s (a busy
    database): nothing is pending, its wait is over, so it is answered 204 at once. Its
    wait's end was computed as a negative time from now, which trio refuses: a 500."""
    # Database threads run while the clock may jump: it jumps only after 0.1 s of real
    # idleness, well beyond a query of an idle database.
    autojump_clock.autojump_threshold = 0.1
    stores = attrs.evolve(
        edge_stores, build=SlowBuild(edge_stores.build.pool, edge_builds=True, seconds=5.0)
    )
    token = stores.nodes.create("slow-database")
    with given_up_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token), timeout=60) as client:
            started = trio.current_time()
            response = await client.post("builds", params={**ASKING, "wait": "1"})
    assert (response.status_code, response.headers.get("retry-after")) == (204, "1")
    assert trio.current_time() - started < 6.0


async def held_ask(url: str, token: str) -> tuple[httpx.Response, float]:
    """One `POST builds?wait=10` (an edge running for good): its answer, and how long it
    took on the trio clock."""
    async with httpx.AsyncClient(base_url=url, headers=bearer(token), timeout=60) as client:
        started = trio.current_time()
        response = await client.post("builds", params={**ASKING, "wait": "10"})
    return response, trio.current_time() - started


@pytest.mark.trio
async def test_a_held_ask_for_a_build_is_answered_once_keys_are_pending_or_at_the_stop(
    nursery: trio.Nursery, settings: Settings, edge_stores: Stores
) -> None:
    """An ask that may wait (`builds?wait=10`), nothing pending: answered with a job as
    soon as the API is poked (a batch stored, a probe's outcome), long before its wait;
    and at once when the server stops. An older edge's ask (no wait) is answered at once."""
    stores, offers = watched(edge_stores)
    token = stores.nodes.create("edge-b")
    due, shutdown = CatalogDue(), trio.Event()
    answers: list[tuple[int, float]] = []

    async def ask(answered: trio.Event) -> None:
        response, took = await held_ask(url, token)
        answers.append((response.status_code, took))
        answered.set()

    with trio.fail_after(DEADLINE_SECONDS):
        serving = partial(serve, settings, stores, shutdown=shutdown, catalog_due=due)
        host, port = await nursery.start(serving)
        url = f"http://{host}:{port}/api/v1/node/"
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            older = await client.post("builds", params=ASKING)  # no wait: at once, as ever
        assert (older.status_code, older.headers.get("retry-after")) == (204, "1")
        assert await offers.receive() is None
        poked = trio.Event()
        nursery.start_soon(ask, poked)
        assert await offers.receive() is None  # looked: nothing pending, so it waits
        for _ in batches_of_generated(stores, 3_000, seed=4, every=1_000):
            pass
        due.due()  # what the node API does for a batch it stored
        await poked.wait()
        job = await offers.receive()
        assert isinstance(job, BuildJob)
        # Its rows written, and whatever else is pending built (through the unwatched
        # build: these offers are made here, not in the API's worker threads).
        node_id = edge_stores.nodes.authenticate(token)
        assert node_id is not None
        made = run_job(decode_job(encode_job(job)), pure=False, categories=Categories()).made
        assert edge_stores.build.finish(node_id, job.job_id, made, quiet_seconds=0) is not None
        edge_builds(edge_stores, node_id)
        assert pending_keys(edge_stores) == 0
        stopped = trio.Event()
        nursery.start_soon(ask, stopped)
        assert await offers.receive() is None  # looked: nothing pending, so it waits
        shutdown.set()
        await stopped.wait()
    (poked_status, poked_took), (stop, stop_took) = answers
    assert poked_status == 200
    assert poked_took < BUILD_WAIT_MAX_SECONDS / 2
    assert stop == 204
    assert stop_took < BUILD_WAIT_MAX_SECONDS / 2


@pytest.mark.trio
@pytest.mark.parametrize("a_builds", [True, False], ids=["builder", "no-builder"])
async def test_a_batch_stored_through_another_coordinator_process_wakes_a_held_ask(
    nursery: trio.Nursery,
    settings: Settings,
    edge_stores: Stores,
    pool: ConnectionPool,
    a_builds: bool,
) -> None:
    """Two coordinator processes on one database (`uidx coordinator --processes 2`, or
    two machines), each with its own CatalogDue: a batch stored through B wakes an ask
    for a build held in A (the batch's notification, heard by A's listener) long before
    its wait, not at its end (up to 10 s more of catalog lag). So it does when A runs no
    builder (`serve` without a CatalogDue, as an embedder's): its held asks were woken by
    nothing but their 10 s."""
    stores_a, offers = watched(edge_stores)
    asker, poster = stores_a.nodes.create("edge-a"), edge_stores.nodes.create("edge-b")
    answers: list[tuple[int, float]] = []

    async def ask(url: str, answered: trio.Event) -> None:
        response, took = await held_ask(url, asker)
        answers.append((response.status_code, took))
        answered.set()

    with trio.fail_after(DEADLINE_SECONDS):
        urls = []
        for stores, due in (
            (stores_a, CatalogDue() if a_builds else None),
            (edge_stores, CatalogDue()),
        ):
            host, port = await nursery.start(partial(serve, settings, stores, catalog_due=due))
            urls.append(f"http://{host}:{port}/api/v1/node/")
        url_a, url_b = urls
        answered = trio.Event()
        nursery.start_soon(ask, url_a, answered)
        assert await offers.receive() is None  # looked: nothing pending, so it waits
        lines = overview(600, 1000)
        range_id = plan(pool, GroupStore(pool).add(GROUP), 1000, article_of(lines[-1]))
        async with httpx.AsyncClient(base_url=url_b, headers=bearer(poster)) as client:
            lease = (await client.post("lease")).json()["range"]
            assert lease["id"] == range_id
            indexer = RangeIndexer(GROUP, 1000)
            indexer.add_data(b"\n".join(lines), article_of(lines[-1]) + 1)
            body = batch_body(indexer.finish(), range_id, lease["epoch"])
            stored = await client.post(f"ranges/{range_id}/batches", content=body, headers=GZIP)
        assert stored.status_code == 200
        assert stored.json()["release_chunks"] > 0
        await answered.wait()
        [(status, took)] = answers
        assert (status, took < BUILD_WAIT_MAX_SECONDS / 2) == (200, True), took
        assert isinstance(await offers.receive(), BuildJob)


@pytest.mark.trio
async def test_held_asks_a_poke_wakes_each_offer_once_the_shared_offer_found_all_held(
    nursery: trio.Nursery, settings: Settings, edge_stores: Stores
) -> None:
    """Three edges' asks held in one process, nothing pending, while another builder (a
    coordinator process mid-build) holds every shard. A batch's notification wakes the
    three: the first's offer finds what is pending held (busy: 204, ask again in
    BUILD_BUSY_SECONDS), and each of the others makes its own offer, one each and no
    more, and is answered so too. They took the first's offer as theirs, whatever it
    found, and stayed held until the next poke or their 10 s."""
    stores, offers = watched(edge_stores)
    tokens = [stores.nodes.create(f"edge-{n}") for n in range(3)]
    answers: list[tuple[int, str | None, float]] = []
    answered = trio.Semaphore(0)

    async def ask(token: str) -> None:
        response, took = await held_ask(url, token)
        answers.append((response.status_code, response.headers.get("retry-after"), took))
        answered.release()

    with trio.fail_after(DEADLINE_SECONDS), edge_stores.build.table.shards() as other_builder:
        other_builder.lock_all()
        url = await start_api(nursery, settings, stores)
        for token in tokens:
            nursery.start_soon(ask, token)
        for _ in tokens:
            assert await offers.receive() is None  # looked: nothing pending, so it waits
        for _ in batches_of_generated(stores, 3_000, seed=4, every=3_000):
            pass  # one batch: its notification wakes the three
        for _ in tokens:
            await answered.acquire()
    woken = []  # each offer is told of before its answer
    while offers.statistics().current_buffer_used:
        woken.append(offers.receive_nowait())
    assert len(woken) == len(tokens)  # one offer per woken ask
    assert all(isinstance(offer, Built) and offer.busy for offer in woken), woken
    busy = (204, str(BUILD_BUSY_SECONDS))
    assert [(status, retry) for status, retry, _ in answers] == [busy] * len(tokens)
    assert max(took for _, _, took in answers) < BUILD_WAIT_MAX_SECONDS / 2


def build_jobs_held(stores: Stores) -> int:
    """Build jobs not written nor given back (unexpired)."""
    with stores.catalog.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM build_jobs WHERE expires_at > now()").fetchone()
    assert row is not None
    return int(row[0])


# How the build loop is ended: its `stop` set (a deploy restarting the edges), or its
# task cancelled from outside (the worker's ranges failed, or a second SIGTERM).
@pytest.mark.parametrize("ended_by", ["stop", "cancel"])
@pytest.mark.trio
async def test_an_edge_stopped_mid_job_gives_it_back_and_another_edge_builds_it_at_once(
    nursery: trio.Nursery,
    settings: Settings,
    edge_stores: Stores,
    monkeypatch: pytest.MonkeyPatch,
    ended_by: str,
) -> None:
    """An edge told to stop, or cancelled, while it merges a build job gives the job back
    as it goes: the next edge that asks gets its keys at once, not a 204 'busy' for the
    job's 120 s. A merge that takes long is a fake (a real one takes a fraction of a
    second here): the stop must find the job mid-merge."""
    stored(edge_stores)
    merging, merge_may_end = trio.Event(), threading.Event()
    real_run_job = run_job

    def slow_run_job(job: BuildJob, *, pure: bool, categories: Categories) -> BuildResult:
        trio.from_thread.run_sync(merging.set)
        merge_may_end.wait(DEADLINE_SECONDS)
        return real_run_job(job, pure=pure, categories=categories)

    monkeypatch.setattr("usenet_indexer.edge.builds.run_job", slow_run_job)
    stopping_token, other_token = edge_stores.nodes.create("stops"), edge_stores.nodes.create("b")
    stop = trio.Event()
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, edge_stores)
        coordinator = url.removesuffix("/api/v1/node/")
        async with open_client(coordinator, stopping_token, retry=RetryPolicy()) as edge:
            async with trio.open_nursery() as builds:
                builds.start_soon(build_forever, edge, stop)
                await merging.wait()
                assert build_jobs_held(edge_stores) == 1
                if ended_by == "stop":
                    stop.set()
                else:
                    builds.cancel_scope.cancel()
            merge_may_end.set()
        assert build_jobs_held(edge_stores) == 0
        async with httpx.AsyncClient(base_url=url, headers=bearer(other_token)) as client:
            response = await client.post("builds", params=ASKING)
    assert response.status_code == 200
    job = decode_job(response.content)
    assert response.headers["x-uidx-build-job"] == str(job.job_id)
    assert len(job.pending) == pending_keys(edge_stores) > 0


async def _shielded_sleep(seconds: float) -> None:
    with trio.CancelScope(shield=True):
        await trio.sleep(seconds)


@attrs.define(eq=False)
class SlowToOfferToldOfGiveBacks(SlowBuild):
    """SlowBuild whose slowness a cancelled call does not cut short (as a database
    query's in a worker thread is not); each job given back also sets `given_back`
    (from the worker thread)."""

    given_back: trio.Event | None = None

    def offer(self, node_id: int, lease_seconds: float) -> BuildJob | Built | None:
        trio.from_thread.run(_shielded_sleep, self.seconds)
        return CatalogBuild.offer(self, node_id, lease_seconds)

    def give_back(self, node_id: int, job_id: int) -> bool:
        dropped = super().give_back(node_id, job_id)
        if self.given_back is not None:
            trio.from_thread.run_sync(self.given_back.set)
        return dropped


@pytest.mark.trio
async def test_a_job_made_for_an_edge_that_went_away_meanwhile_is_ended_not_reserved(
    autojump_clock: trio.testing.MockClock,
    nursery: trio.Nursery,
    settings: Settings,
    edge_stores: Stores,
) -> None:
    """An edge's ask goes away (the edge stopped, its connection cut) while the
    coordinator makes its job (5 s: a busy database): the job is ended as it is made, so
    the keys go to the next edge at once instead of staying reserved for nobody; and
    `DELETE builds/{job}` of a job that is not the node's is a 409 that ends nothing."""
    # Database threads run while the clock may jump: it jumps only after 0.1 s of real
    # idleness, well beyond a query of an idle database.
    autojump_clock.autojump_threshold = 0.1
    stored(edge_stores)
    given_back = trio.Event()
    build = SlowToOfferToldOfGiveBacks(
        edge_stores.build.pool, edge_builds=True, seconds=5.0, given_back=given_back
    )
    stores = attrs.evolve(edge_stores, build=build)
    gone_token, other_token = stores.nodes.create("goes-away"), stores.nodes.create("b")
    with given_up_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(gone_token), timeout=60) as c:
            with trio.move_on_after(1.0) as left:
                await c.post("builds", params={**ASKING, "wait": "10"})
        assert left.cancelled_caught
        await given_back.wait()  # as the offer (5 s) ends with its job made
        assert build_jobs_held(stores) == 0
        async with httpx.AsyncClient(base_url=url, headers=bearer(other_token), timeout=60) as c:
            response = await c.post("builds", params=ASKING)
            assert response.status_code == 200
            job_id = int(response.headers["x-uidx-build-job"])
            assert build_jobs_held(stores) == 1
            wrong = await c.delete(f"builds/{job_id + 1}")
            assert (wrong.status_code, build_jobs_held(stores)) == (409, 1)
            assert (await c.get(f"builds/{job_id}")).headers["allow"] == "POST, DELETE"
            assert (await c.delete(f"builds/{job_id}")).status_code == 204
            assert build_jobs_held(stores) == 0


@pytest.mark.trio
async def test_an_edge_that_keys_generations_otherwise_is_offered_no_build(
    nursery: trio.Nursery,
    settings: Settings,
    edge_stores: Stores,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An edge of another uidx version (one from before generations had keys of their
    own says nothing; a later one another scheme) would write rows under other guids:
    it gets a 204 that says to ask again in 30 s, the keys stay pending for a builder of
    this version, and the coordinator's log says why, once per node."""
    stored(edge_stores)
    pending = pending_keys(edge_stores)
    assert pending > 0
    token = edge_stores.nodes.create("older")
    with trio.fail_after(DEADLINE_SECONDS):
        url = await start_api(nursery, settings, edge_stores)
        async with httpx.AsyncClient(base_url=url, headers=bearer(token)) as client:
            answers = [
                await client.post("builds", params=asked)
                for asked in (None, {"keys": "1"}, {"keys": str(KEYS + 1), "wait": "5"})
            ]
            assert [(a.status_code, a.headers.get("retry-after")) for a in answers] == [
                (204, "30")
            ] * 3
            assert build_jobs_held(edge_stores) == 0
            assert pending_keys(edge_stores) == pending
            ours = await client.post("builds", params=ASKING)
            assert ours.status_code == 200
    said = [r.getMessage() for r in caplog.records if "another uidx version" in r.getMessage()]
    assert len(said) == 1, said
    assert f"where this coordinator keys them by {KEYS}" in said[0]


@attrs.define
class OlderCoordinator:
    """A fake node API of a uidx from before build jobs said how generations are keyed:
    it ignores `keys` in the ask and offers a job without it (job 7), and records the
    edge's calls. A real coordinator of another version cannot be run here."""

    calls: list[str] = attrs.field(factory=list)
    given_back: trio.Event = attrs.field(factory=trio.Event)
    asked_again: trio.Event = attrs.field(factory=trio.Event)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        call = f"{scope['method']} {scope['path'].rsplit('/node/', 1)[-1]}"
        self.calls.append(call)
        status, headers, body = 204, [(b"retry-after", b"1")], b""
        if call == "POST builds" and self.given_back.is_set():
            self.asked_again.set()
        elif call == "POST builds":
            job = {"id": 7, "releases": "[]", "fragments": [], "pending": [], "probed": [],
                   "found": [], "changed": [], "asked": []}  # fmt: skip
            status, body = 200, msgpack.packb(job)
            headers = [(b"content-type", b"application/msgpack"), (b"x-uidx-build-job", b"7")]
        elif call == "DELETE builds/7":
            self.given_back.set()
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@pytest.mark.trio
async def test_an_edge_gives_back_a_job_of_a_coordinator_that_keys_generations_otherwise(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A new edge and an older coordinator (upgraded in the wrong order): the rows it
    would build would carry other guids than the coordinator's own builds, so it gives
    the job back at once, builds nothing, says why and asks again only a minute later."""
    # The job is decoded in a worker thread while the clock may jump: it jumps only
    # after 0.1 s of real idleness.
    autojump_clock.autojump_threshold = 0.1
    fake = OlderCoordinator()
    stop = trio.Event()
    with trio.fail_after(120):
        async with (
            open_client(
                "http://coordinator.test", "token", retry=RetryPolicy(),
                transport=httpx.ASGITransport(app=fake),
            ) as edge,
            trio.open_nursery() as nursery,
        ):  # fmt: skip
            nursery.start_soon(partial(build_forever, edge, stop))
            await fake.given_back.wait()
            asked_at = trio.current_time()
            await fake.asked_again.wait()
            assert trio.current_time() - asked_at >= 59
            stop.set()
    assert fake.calls[:2] == ["POST builds", "DELETE builds/7"]
    assert "POST builds/7" not in fake.calls  # no rows
    said = [r.getMessage() for r in caplog.records if "no catalog builds" in r.getMessage()]
    assert said
    assert f"this edge by {KEYS}" in said[0]
