"""The spool in an S3 bucket (spool/s3.py) on a real S3 server: SeaweedFS on loopback.

What a user of an S3 spool relies on: a chunk is in the bucket whole or not
at all (an upload cut mid-way leaves no object), a chunk once stored is not
replaced, the prefetcher's sweep deletes what is below the resume points,
and an edge that has only COORDINATOR_URL and NODE_TOKEN reads the chunks
from the bucket through the links the coordinator's stream hands it, and
indexes what `uidx index` makes of the same lines. (The whole pipeline on an
S3 spool: tests/test_standalone.py.)
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import attrs
import pytest
import trio
from nntp_fixtures import NewsServer
from psycopg_pool import ConnectionPool
from s3_fixtures import land_chunk, s3_settings
from test_edge import (
    DEADLINE_SECONDS,
    LINES_PER_CHUNK,
    _serving,
    assert_same_catalog,
    generated,
    offline_index,
)

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.health import State
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.errors import ConfigError, SpoolStoreError
from usenet_indexer.prefetch.daemon import Prefetcher
from usenet_indexer.prefetch.events import Landed, NotLanded, Reported
from usenet_indexer.prefetch.options import PrefetchOptions
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.spool.plan import ChunkJob
from usenet_indexer.spool.s3 import S3Spool
from usenet_indexer.spool.store import open_spool
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.spool import SpoolIndex
from usenet_indexer.testing.objectstore import ObjectStore

GROUP = "alt.binaries.s3"


def s3_spool(settings: Settings) -> S3Spool:
    spool = open_spool(settings)
    assert isinstance(spool, S3Spool)
    return spool


@attrs.define(eq=False)
class CuttingProxy:
    """A fake network path (a fault a real S3 server cannot make on demand): forwards
    each connection to `upstream`, but closes both ends once `cut_after` bytes of the
    request went through, as a prefetcher killed mid-upload, or its link dropping, would."""

    upstream: tuple[str, int]
    cut_after: int
    listener: socket.socket = attrs.field(factory=socket.socket)
    cuts: int = 0

    def start(self) -> str:
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        threading.Thread(target=self._accept, daemon=True).start()
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()
            threading.Thread(target=self._request, args=(client, server), daemon=True).start()

    def _request(self, client: socket.socket, server: socket.socket) -> None:
        sent = 0
        with client, server:
            while sent < self.cut_after:
                data = client.recv(min(65536, self.cut_after - sent))
                if not data:
                    return
                server.sendall(data)
                sent += len(data)
            self.cuts += 1

    def _pipe(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(65536):
                client.sendall(data)
        except OSError:
            return


@pytest.fixture
def cutting_proxy(object_store: ObjectStore) -> Iterator[CuttingProxy]:
    port = int(object_store.endpoint.rsplit(":", 1)[1])
    proxy = CuttingProxy(("127.0.0.1", port), cut_after=1 << 20)
    yield proxy
    proxy.close()


def test_a_chunk_whose_upload_is_cut_mid_way_is_not_in_the_bucket(
    object_store: ObjectStore, s3_prefix: str, tmp_path: Path, cutting_proxy: CuttingProxy
) -> None:
    # Random bytes do not compress: the chunk is ~3 MB, cut after its first MB.
    text = b"".join(os.urandom(300).hex().encode() + b"\n" for _ in range(5_000))
    cut = s3_spool(
        s3_settings(tmp_path, object_store, s3_prefix, spool_endpoint_url=cutting_proxy.start())
    )
    with pytest.raises(SpoolStoreError, match="not stored"):
        cut.write_chunk(GROUP, 1, 5_000, text)
    assert cutting_proxy.cuts >= 1
    assert object_store.keys(s3_prefix) == []
    # Nothing half-stored stands in the way of the chunk's next landing.
    whole = s3_spool(s3_settings(tmp_path, object_store, s3_prefix))
    key, size, _codec = whole.write_chunk(GROUP, 1, 5_000, text)
    assert object_store.keys(s3_prefix) == [f"{s3_prefix}/{key}"]
    assert zlib.decompress(whole.read(key)) == text
    assert size == len(whole.read(key))


def test_a_stored_chunk_is_never_replaced(
    object_store: ObjectStore, s3_prefix: str, tmp_path: Path
) -> None:
    """A second writer of the same chunk (a prefetcher killed between its PUT and its
    index row, landing the chunk again) finds it there and takes it as it is."""
    spool = s3_spool(s3_settings(tmp_path, object_store, s3_prefix))
    key, size, _ = spool.write_chunk(GROUP, 1, 2, b"1\tfirst\n2\tsecond\n")
    again, size_again, _ = spool.write_chunk(GROUP, 1, 2, b"1\tother\n")
    assert (again, size_again) == (key, size)
    assert zlib.decompress(spool.read(key)) == b"1\tfirst\n2\tsecond\n"


@pytest.mark.trio
async def test_an_edge_with_only_its_two_settings_reads_the_chunks_from_the_bucket(
    nursery: trio.Nursery,
    object_store: ObjectStore,
    s3_prefix: str,
    tmp_path: Path,
    pool: ConnectionPool,
    stores: Stores,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The coordinator's stream hands LINK frames (presigned URLs), not the chunks:
    the edge, which has no S3 setting and no AWS variable, GETs them from SeaweedFS."""
    caplog.set_level(logging.INFO)
    settings = s3_settings(tmp_path / "coordinator", object_store, s3_prefix)
    spool = s3_spool(settings)
    data = generated(20_000, seed=7)
    group_id = GroupStore(pool).add(data.group)
    middle = (data.low + data.high) // 2
    for first, last in ((data.low, middle), (middle + 1, data.high)):
        stores.ranges.plan(group_id, first, last, last - first + 1)
        for chunk in data.chunks(first, last, LINES_PER_CHUNK):
            land_chunk(
                spool, stores.spool, data.group, group_id, chunk.lines, chunk.first, chunk.last
            )
    token = stores.nodes.create("edge-1")

    async with _serving(nursery, settings, stores, pool, caplog) as coordinator:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("UIDX_", "AWS_", "DATABASE"))
        }
        env.update(COORDINATOR_URL=coordinator.url, NODE_TOKEN=token)
        env.pop("NOTIFY_SOCKET", None)
        with trio.fail_after(DEADLINE_SECONDS):
            edge = await trio.run_process(
                [sys.executable, "-m", "usenet_indexer", "edge", "--processes", "1",
                 "--ranges", "2"],
                env=env, cwd=tmp_path, capture_stderr=True, check=False,
            )  # fmt: skip

    said = edge.stderr.decode()
    assert edge.returncode == 0, said
    assert said.count(": finished;") == 2, said
    assert_same_catalog(CatalogBuild(pool).export(), offline_index(tmp_path, list(data.lines)))
    # The streams sent links, under a KB each, not the chunks (tens of KB each here).
    streamed = [
        re.search(r"stream from \d+: (\d+) chunks, \d+ gaps, (\d+) bytes", r.getMessage())
        for r in caplog.records
    ]
    sent = [(int(m[1]), int(m[2])) for m in streamed if m is not None]
    assert sum(chunks for chunks, _ in sent) == len(object_store.keys(s3_prefix))
    assert len(object_store.keys(s3_prefix)) == len(stores_sizes(pool))
    assert sum(payload for _, payload in sent) < 1024 * sum(chunks for chunks, _ in sent)
    assert sum(size for (size,) in stores_sizes(pool)) > 50 * sum(payload for _, payload in sent)
    assert not (tmp_path / "coordinator" / "spool").exists()


def stores_sizes(pool: ConnectionPool) -> list[tuple[int]]:
    with pool.connection() as conn:
        return [(int(row[0]),) for row in conn.execute("SELECT bytes FROM spool_chunks")]


def test_the_spool_setting_picks_the_store(tmp_path: Path, object_store: ObjectStore) -> None:
    assert open_spool(Settings(home=tmp_path)).describe() == str(tmp_path / "spool")
    assert open_spool(Settings(home=tmp_path, spool_url="/srv/spool")).describe() == "/srv/spool"
    s3 = open_spool(s3_settings(tmp_path, object_store, "a/b"))
    assert s3.describe() == f"s3://{object_store.bucket}/a/b"
    url = s3.presign("g/1-2.zlib")
    assert url is not None
    assert url.startswith(f"{object_store.endpoint}/{object_store.bucket}/a/b/g/1-2.zlib?")
    assert "X-Amz-Signature=" in url


@pytest.mark.trio
async def test_the_prefetcher_lands_every_chunk_once_though_the_store_dies_mid_upload(
    news_server: NewsServer,
    pool: ConnectionPool,
    object_store: ObjectStore,
    s3_prefix: str,
    tmp_path: Path,
) -> None:
    """The object store killed (SIGKILL) while chunks are being stored, then started
    again: the chunks that did not land are fetched and stored again; every article
    is in the spool once, and every object in the bucket is a chunk the index names."""
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 60_000, 60_000)
    spool = s3_spool(s3_settings(tmp_path, object_store, s3_prefix))
    options = PrefetchOptions(
        spool, slice_articles=2_000, chunk_articles=4_000, poll_seconds=0.2,
        retry=RetryPolicy(base_seconds=0.05),
    )  # fmt: skip
    covered = 0
    landed_once = trio.Event()
    refused = trio.Event()
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered
        if isinstance(event, Landed):
            landed_once.set()
            if event.job.last <= 60_000:  # (the daemon follows the group's head too)
                covered += event.job.last - event.job.first + 1
            if covered == 60_000:
                done.set()
        elif isinstance(event, NotLanded):
            refused.set()

    state = ServerState.of(server_configs([news_server.url()], 2)[0])
    with trio.fail_after(DEADLINE_SECONDS * 3):
        async with trio.open_nursery() as nursery:
            await nursery.start(Prefetcher(pool, options, [state], observe).run)
            await landed_once.wait()
            await trio.to_thread.run_sync(object_store.kill)
            await refused.wait()
            await trio.to_thread.run_sync(object_store.start)
            await done.wait()
            nursery.cancel_scope.cancel()

    every = SpoolIndex(pool).chunks_from(group_id, 1, 10**9, 1_000)
    assert object_store.keys(s3_prefix) == sorted(f"{s3_prefix}/{c.path}" for c in every)
    chunks = [c for c in every if c.last <= 60_000]
    assert [(c.first, c.last) for c in chunks] == [(n, n + 3_999) for n in range(1, 60_001, 4_000)]
    lines = [line for c in chunks for line in zlib.decompress(spool.read(str(c.path))).splitlines()]
    assert [int(line.split(b"\t", 1)[0]) for line in lines] == list(range(1, 60_001))


def test_a_store_that_cannot_be_used_is_named_at_start(
    object_store: ObjectStore, tmp_path: Path
) -> None:
    """What the coordinator and the prefetcher ask before they start: a missing bucket
    or refused keys are settings mistakes that name the setting; an endpoint that does
    not answer is the store's trouble (a supervisor starts the process again later)."""
    s3_spool(s3_settings(tmp_path, object_store, "p")).check()
    missing = s3_settings(tmp_path, object_store, "p", spool_url="s3://no-such-bucket/p")
    with pytest.raises(ConfigError, match="spool_url: no bucket 'no-such-bucket'"):
        s3_spool(missing).check()
    wrong = s3_settings(tmp_path, object_store, "p", spool_secret_access_key="wrong")
    with pytest.raises(ConfigError, match="spool_access_key_id: refused"):
        s3_spool(wrong).check()
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{unused.getsockname()[1]}"
    gone = s3_settings(tmp_path, object_store, "p", spool_endpoint_url=closed)
    with pytest.raises(SpoolStoreError, match="Could not connect"):
        s3_spool(gone).check()


# A child process that runs out of descriptors, then asks the store whether a chunk is
# there: what its HEAD raises (the class, the errno). A child's, so that the pytest
# process's own descriptors (its pool's connections, its sockets) never run out.
_OUT_OF_DESCRIPTORS = """
import os, resource, sys
from pathlib import Path
from usenet_indexer.config import Settings
from usenet_indexer.spool.s3 import S3Spool

url, endpoint, key_id, secret = sys.argv[1:]
spool = S3Spool.from_settings(Settings(
    home=Path("."), listen="127.0.0.1:0", spool_url=url, spool_endpoint_url=endpoint,
    spool_region="us-east-1", spool_access_key_id=key_id, spool_secret_access_key=secret,
))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
for ask in (lambda: spool.exists("g/1-2.zlib"), lambda: spool.missing(["g/1-2.zlib"])):
    try:
        ask()
    except Exception as error:
        print(type(error).__name__, getattr(error, "errno", None), flush=True)
    else:
        print("answered", None, flush=True)
"""


def test_a_lookup_this_process_has_no_descriptor_for_is_its_shortage_not_the_stores(
    object_store: ObjectStore, s3_prefix: str, tmp_path: Path
) -> None:
    """A HEAD (is this chunk there?) asked by a process out of descriptors (a coordinator
    whose edges' connections took its open-file limit) fails before it reaches the
    store: an OSError with its errno (EMFILE), as a folder spool's open does, which the
    coordinator does not count on a range; not a SpoolStoreError, the store's own
    refusal, which it does."""
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _OUT_OF_DESCRIPTORS,
            object_store.spool_url(s3_prefix),
            object_store.endpoint,
            object_store.access_key,
            object_store.secret_key,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert child.returncode == 0, child.stderr
    emfile = f"OSError {errno.EMFILE}"
    assert child.stdout.splitlines() == [emfile, emfile], child.stderr


def test_an_s3_spool_without_keys_names_the_setting_at_start(
    object_store: ObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No spool_access_key_id and none of the places boto3 looks for one (the AWS
    variables, ~/.aws, the instance's metadata): a settings mistake like refused keys
    (exit 78, the supervisor does not start it again), not the store's trouble."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    keyless = s3_settings(
        tmp_path, object_store, "p", spool_access_key_id="", spool_secret_access_key=""
    )
    with pytest.raises(ConfigError, match="spool_access_key_id: no keys") as caught:
        s3_spool(keyless).check()
    assert caught.value.key == "spool_access_key_id"


@pytest.mark.trio
async def test_a_gap_landed_while_the_store_refuses_chunks_leaves_the_spool_writes_failing(
    pool: ConnectionPool, object_store: ObjectStore, s3_prefix: str, tmp_path: Path
) -> None:
    """The store refuses the prefetcher's chunks (its keys revoked while it runs): the
    health report says "writes failing" until a chunk is stored. A gap (articles the
    server does not have, a row without an object) writes nothing to the store, so it
    does not say the store takes chunks again: a backfill below the servers' low water
    marks lands gaps all the while, and the spool's row flapped to ok between them."""
    group_id = GroupStore(pool).add(GROUP)
    revoked = s3_spool(
        s3_settings(tmp_path, object_store, s3_prefix, spool_secret_access_key="revoked")
    )
    state = ServerState.of(server_configs(["nntp://news.example.com"], 1)[0])
    prefetcher = Prefetcher(pool, PrefetchOptions(revoked), [state])
    landing = prefetcher._landing

    def spool_health() -> tuple[State, str]:
        (spool,) = [o for o in prefetcher._health() if o.component == "spool"]
        return spool.state, spool.detail

    chunk = ChunkJob(group_id, GROUP, 1, 2)
    writer = revoked.open_chunk(GROUP, 1, 2)
    writer.write((b"1\tfirst\n2\tsecond\n",), 2)
    await landing.land_later(chunk, chunk, state, writer)
    refused = spool_health()
    assert refused[0] is State.WRITES_FAILING
    assert "SignatureDoesNotMatch" in refused[1]
    gap = ChunkJob(group_id, GROUP, 3, 4)
    await landing.land_later(gap, gap, state, None)
    # The gap is indexed; the refused chunk is not (it is listed again), and the
    # report still says why.
    rows = SpoolIndex(pool).chunks_from(group_id, 1, 4, 10)
    assert [(row.first, row.last, row.path) for row in rows] == [(3, 4, None)]
    assert spool_health() == refused
    # A chunk stored is the store taking chunks again.
    writer = s3_spool(s3_settings(tmp_path, object_store, s3_prefix)).open_chunk(GROUP, 1, 2)
    writer.write((b"1\tfirst\n2\tsecond\n",), 2)
    await landing.land_later(chunk, chunk, state, writer)
    assert spool_health() == (State.OK, "")


@pytest.mark.trio
async def test_while_the_store_refuses_chunks_the_connection_pauses_between_them(
    news_server: NewsServer,
    pool: ConnectionPool,
    object_store: ObjectStore,
    s3_prefix: str,
    tmp_path: Path,
) -> None:
    """The store refuses every chunk (keys that may read and list the bucket but no
    longer write to it: the start's check passes, each PUT is answered 403). A chunk
    read whole is refused and listed again; the connection must pause before it reads
    another (the retry policy's growing pause for the refusals in a row, as after an
    NNTP error), not ask the provider for the same overview lines again and again at
    full speed for as long as the store refuses them (~50,000 lines in 2 s before)."""
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 60_000, 60_000)
    read_only = s3_settings(
        tmp_path,
        object_store,
        s3_prefix,
        spool_access_key_id=object_store.reader_key,
        spool_secret_access_key=object_store.reader_secret,
    )
    retry = RetryPolicy(base_seconds=1.0)
    options = PrefetchOptions(
        s3_spool(read_only), slice_articles=2_000, chunk_articles=4_000, poll_seconds=0.2,
        retry=retry,
    )  # fmt: skip
    refused: dict[tuple[int, int], list[float]] = {}
    thrice = trio.Event()

    def observe(event: object) -> None:
        if isinstance(event, NotLanded):
            times = refused.setdefault(event.job.key, [])
            times.append(trio.current_time())
            if len(times) == 3:
                thrice.set()

    state = ServerState.of(server_configs([news_server.url()], 1)[0])
    prefetcher = Prefetcher(pool, options, [state], observe)
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(prefetcher.run)
            await thrice.wait()
            nursery.cancel_scope.cancel()

    # A chunk is refused again only after a pause (the real clock: INN2, SeaweedFS and
    # PostgreSQL are waited on, so an autojump clock would jump during each wait).
    gaps = [later - before for times in refused.values() for before, later in pairwise(times)]
    assert len(gaps) >= 2
    assert min(gaps) >= retry.base_seconds, sorted(gaps)
    assert prefetcher._landing.refusals == sum(map(len, refused.values()))
    assert "AccessDenied" in (prefetcher._landing.failing or "")


@pytest.mark.trio
async def test_an_object_stored_but_never_indexed_does_not_stay_in_the_bucket_for_ever(
    news_server: NewsServer,
    pool: ConnectionPool,
    object_store: ObjectStore,
    s3_prefix: str,
    tmp_path: Path,
) -> None:
    """A prefetcher stored a chunk of the live head, cut at the server's high water
    mark of that moment (articles 1..2500 of a chunk of 1..4000), and was killed (or
    its database refused the row) before the index row: the object is there, no row
    names it. The chunk is fetched again later under the key of its new cut (1..4000):
    nothing reads the first object, and no sweep lists it (a sweep deletes what rows
    name). It must be gone once the chunk is indexed under another key and the
    housekeeping looked for leftovers (hourly; here at every round, with no grace)."""
    group_id = GroupStore(pool).add(news_server.group)
    RangeStore(pool).plan(group_id, 1, 8_000, 8_000)
    spool = s3_spool(s3_settings(tmp_path, object_store, s3_prefix))
    lines = b"".join(
        b"%d\tsubject\tposter\tdate\t<m%d@x>\t\t100\t1\n" % (n, n) for n in range(1, 2501)
    )
    left, _size, _codec = spool.write_chunk(news_server.group, 1, 2_500, lines)
    options = PrefetchOptions(
        spool, slice_articles=2_000, chunk_articles=4_000, poll_seconds=0.2,
        report_seconds=0.2, retry=RetryPolicy(base_seconds=0.05),
        leftovers_seconds=0.2, leftover_grace_seconds=0,
    )  # fmt: skip
    covered = 0
    rounds_after = 0
    done = trio.Event()

    def observe(event: object) -> None:
        nonlocal covered, rounds_after
        # (The daemon follows the group's head above the plan too.)
        if isinstance(event, Landed) and event.job.last <= 8_000:
            covered += event.job.last - event.job.first + 1
        elif isinstance(event, Reported) and covered == 8_000:
            rounds_after += 1
            if rounds_after == 2:
                done.set()

    state = ServerState.of(server_configs([news_server.url()], 2)[0])
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(Prefetcher(pool, options, [state], observe).run)
            await done.wait()
            nursery.cancel_scope.cancel()

    rows = SpoolIndex(pool).chunks_from(group_id, 1, 2**62, 1_000)  # the live head's too
    planned = [(row.first, row.last) for row in rows if row.last <= 8_000]
    assert planned == [(1, 4_000), (4_001, 8_000)]
    indexed = {f"{s3_prefix}/{row.path}" for row in rows}
    assert f"{s3_prefix}/{left}" not in indexed
    assert set(object_store.keys(s3_prefix)) <= indexed, f"{left} must be gone"
