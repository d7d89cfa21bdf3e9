"""The whole pipeline, all real: INN2, PostgreSQL, coordinator, prefetcher, two edges.

`uidx standalone` runs them as worker processes of one supervisor. A
generated group of 200,000 articles is posted to a private INN2 (its own
scripts/newsd instance, so that the session's server keeps its articles),
planned as several ranges, and indexed; the catalog must equal `uidx index`
over the same overview lines, and the stored batches must cover every
article exactly once, also when an edge is stopped (SIGTERM) or killed
(SIGKILL) in the middle of a range. (The newznab API read by its
clients, on the same kind of run: test_newznab_clients.py.)
"""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
import trio
from process_logs import log_until
from psycopg_pool import ConnectionPool
from test_edge import assert_same_catalog, offline_index

from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.nntp.client import connect
from usenet_indexer.testing.logcheck import problems
from usenet_indexer.testing.newsd_private import (
    CannotInstall,
    PrivateNewsServer,
    private_news_server,
)
from usenet_indexer.testing.objectstore import ObjectStore
from usenet_indexer.testing.processes import free_port

GROUP = "alt.binaries.uidx.e2e"
ARTICLES = 200_000
RANGE_ARTICLES = 50_000
SEED = 11
RUN_SECONDS = 240
# --exit-when-done: from the work done (the last range finished, then the probe queue
# drained) to the supervisor's exit. Measured 2.0-3.4 s here: the done check (every
# 0.5 s), the edges' exits (~0.8 s after their ranges), the coordinator's, which waits
# for a catalog build in progress (~2 s over this run's catalog). It took ~31 s while
# idle edges sat out their lease calls. (The probes' wait before it: ~30 s here, most
# of it catalog builds of ~6 s each applying the outcomes.)
EXIT_AFTER_DONE_SECONDS = 10.0


@attrs.frozen
class Posted:
    """The private INN2 of this module, the group posted to it, and its overview lines."""

    url: str
    lines: tuple[bytes, ...]


async def over_all(url: str, group: str) -> list[bytes]:
    """Every overview line of a group, as a server sends them."""
    async with connect(url) as client:
        _, low, high = await client.group(group)
        slices = [(n, min(n + 9_999, high)) for n in range(low, high + 1, 10_000)]
        return [line async for _, lines in client.over_pipelined(slices) for line in lines]


@contextlib.contextmanager
def posted_group(
    group: str, prefix: str, post: Callable[[PrivateNewsServer], object]
) -> Iterator[Posted]:
    """A private INN2 carrying `group`, `post` run against it, and the group's lines;
    skipped where INN2 cannot be installed, except in CI."""
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(
                private_news_server([group], prefix=prefix, start_timeout_seconds=600)
            )
        except CannotInstall as error:
            if os.environ.get("CI"):
                raise
            pytest.skip(f"INN2 is not available here: {error}")
        post(server)
        lines = trio.run(over_all, server.url(), group)
        yield Posted(server.url(), tuple(lines))


@pytest.fixture(scope="module")
def posted() -> Iterator[Posted]:
    with posted_group(
        GROUP,
        "uidx-newsd-e2e-",
        lambda server: server.post(GROUP, ARTICLES, seed=SEED, timeout_seconds=600),
    ) as found:
        assert len(found.lines) == ARTICLES
        yield found


@pytest.fixture(scope="module")
def expected(posted: Posted, tmp_path_factory: pytest.TempPathFactory) -> list[CatalogRelease]:
    """What `uidx index` makes of the same overview lines."""
    return offline_index(tmp_path_factory.mktemp("offline"), list(posted.lines))


@attrs.frozen
class Run:
    env: dict[str, str]
    pool: ConnectionPool

    def uidx(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "usenet_indexer", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def start(self, *, verbose: bool = False) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "usenet_indexer", *(["-v"] if verbose else []),
             "standalone", "--exit-when-done", "--processes", "2"],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        with self.pool.connection() as conn:
            return list(conn.execute(sql).fetchall())


def standalone_env(posted: Posted, pg_url: str, home: Path, **more: str) -> dict[str, str]:
    """The environment of a uidx process of an end-to-end run: this test's database and
    home, the posted server (2 connections), a free port, short waits; `more` besides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.update(
        DATABASE_URL=pg_url,
        UIDX_HOME=str(home),
        UIDX_NNTP=f"{posted.url}?connections=2",
        UIDX_LISTEN=f"127.0.0.1:{free_port()}",
        UIDX_BATCH_ARTICLES="10000",
        UIDX_PREFETCH_POLL_SECONDS="0.2",
        UIDX_IDLE_SECONDS="0.2",
    )
    env.update(more)
    return env


@pytest.fixture
def run(posted: Posted, pg_url: str, pool: ConnectionPool, tmp_path: Path) -> Run:
    env = standalone_env(
        posted,
        pg_url,
        tmp_path,
        UIDX_PREFETCH_CHUNK_ARTICLES="5000",
        UIDX_PREFETCH_SLICE_ARTICLES="1000",
    )
    planned = Run(env, pool)
    added = planned.uidx("groups", "add", GROUP)
    assert added.returncode == 0, added.stderr
    plan = planned.uidx(
        "ranges", "plan", GROUP, "--from", "1", "--to", str(ARTICLES), "--size", str(RANGE_ARTICLES)
    )
    assert plan.returncode == 0, plan.stderr
    return planned


def _finish(process: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=RUN_SECONDS)
    finally:
        process.kill()
        process.wait()
    return process.returncode, out.decode(), err.decode()


def _assert_every_article_once(run: Run, expected: list[CatalogRelease]) -> None:
    """Batches tile every range exactly once; the catalog is what `uidx index` makes."""
    batches = run.rows(
        "SELECT r.first_article, r.last_article, b.batch_first, b.batch_next, b.segments"
        " FROM batches b JOIN ranges r ON r.id = b.range_id ORDER BY b.batch_first"
    )
    at = 1
    for _first, _last, batch_first, batch_next, _segments in batches:
        assert batch_first == at, f"hole or overlap at article {at}"
        at = int(str(batch_next))
    assert at == ARTICLES + 1
    stored_segments = sum(int(str(row[4])) for row in batches)
    expected_segments = sum(len(f.segments) for r in expected for f in r.files)
    assert stored_segments == expected_segments
    assert run.rows("SELECT count(*) FROM ranges WHERE state <> 'done'") == [(0,)]
    # Merged as `uidx index` merges them: the catalog's own keys are those its rows
    # were first built under (a grab's guid stays, migration 0044), which depend on
    # which batches came first, and a killed edge's range comes back in another order
    # (a release two posters posted in one second kept the key of the poster whose
    # chunk was built first). The catalog itself holds the same releases.
    build = CatalogBuild(run.pool)
    assert_same_catalog(build.export(pinned=False), expected)
    shown = sorted(sorted((f.name, len(f.segments)) for f in r.files) for r in build.export())
    assert shown == sorted(sorted((f.name, len(f.segments)) for f in r.files) for r in expected)


def test_standalone_indexes_a_group_into_the_catalog_uidx_index_makes(
    run: Run, expected: list[CatalogRelease]
) -> None:
    code, out, err = _finish(run.start())
    assert code == 0, err[-4000:]
    assert_clean_log(err)
    # The probes come after the ranges; the run says so, and waits for them. (The last range's
    # time is the database's: the coordinator's "finish range: ok" line is written after the
    # commit, so the drain's look at the queue may come before it in the log.)
    ((last_finished,),) = run.rows("SELECT max(finished_at) FROM ranges")
    assert isinstance(last_finished, datetime.datetime)
    finished = math.floor(last_finished.timestamp() * 1000) / 1000
    waits = _logged_at(err, lambda line: "the ranges are done; waiting for the probe" in line)
    drained = _logged_at(err, lambda line: "the probe queue is drained" in line)
    gone = _logged_at(err, lambda line: "all workers gone" in line)
    assert finished <= waits <= drained
    assert gone - drained < EXIT_AFTER_DONE_SECONDS, f"{gone - drained:.1f} s\n{err[-4000:]}"
    assert run.rows("SELECT count(*) FROM probe_candidates WHERE state IN ('new', 'probing')") == [
        (0,)
    ]
    assert "uidx status" in out
    assert "catalog export" in out
    _assert_every_article_once(run, expected)
    status = run.uidx("status")
    assert re.search(rf"{re.escape(GROUP)}\s+done\s+4\s+200,000\s+200,000", status.stdout)
    # The coordinator started the catalog sweep's clock (a cycle a week: nothing due yet).
    assert "catalog sweep: 0% through its first cycle (begun " in status.stdout
    # The prefetcher's last report: its server, 2 connections at most, every line.
    server = posted_server(run)
    (line,) = [line for line in status.stdout.splitlines() if server in line]
    assert "/2   connections" in line
    assert int(re.findall(r"([\d,]+) lines ", line)[-1].replace(",", "")) >= ARTICLES
    export = run.uidx("catalog", "export", "--out", str(Path(run.env["UIDX_HOME"]) / "c.jsonl"))
    assert export.returncode == 0, export.stderr
    # Every chunk is swept once its range is done.
    assert run.rows("SELECT count(*) FROM spool_chunks") == [(0,)]


def test_standalone_on_an_s3_spool_makes_the_same_catalog(
    run: Run, expected: list[CatalogRelease], object_store: ObjectStore, s3_prefix: str
) -> None:
    """The same run with the spool in SeaweedFS: the prefetcher stores the chunks
    there, the edges read them through the links the coordinator's stream hands
    them, the sweep deletes them; the catalog is the folder spool's (`uidx index`'s)."""
    run.env.update(object_store.environment(s3_prefix))
    code, _out, err = _finish(run.start())
    assert code == 0, err[-4000:]
    assert_clean_log(err)
    _assert_every_article_once(run, expected)
    assert f"into s3://{object_store.bucket}/{s3_prefix}" in err
    # Every chunk landed in the bucket, none in the home's folder; all swept at the end.
    assert re.search(r"stream from \d+: [1-9]\d* chunks", err)
    assert not (Path(run.env["UIDX_HOME"]) / "spool").exists()
    assert run.rows("SELECT count(*) FROM spool_chunks") == [(0,)]
    assert object_store.keys(s3_prefix) == []


def assert_clean_log(err: str) -> None:
    """No worker (coordinator, prefetcher, edges) logged an ERROR line or a 5xx answer."""
    found = problems(err.splitlines())
    assert not found, found.describe()


def _logged_at(log: str, wanted: Callable[[str], bool]) -> float:
    """When the last line of the log that is `wanted` was written (seconds, LOG_FORMAT's
    clock)."""
    (line,) = [line for line in log.splitlines() if wanted(line)][-1:]
    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


def posted_server(run: Run) -> str:
    """host:port of the NNTP server in the run's settings."""
    return run.env["UIDX_NNTP"].split("//", 1)[1].split("?", 1)[0]


def _worker_pids(lines: list[str]) -> dict[int, int]:
    for line in lines:
        found = re.search(r"workers started: ([\d: ]+)$", line)
        if found:
            return {int(s): int(p) for s, p in (w.split(":") for w in found.group(1).split())}
    raise AssertionError("no 'workers started' line")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_an_edge_stopped_mid_range_loses_and_doubles_nothing(
    run: Run, expected: list[CatalogRelease], how: signal.Signals
) -> None:
    if how is signal.SIGKILL:
        # The killed edge's lease passes on after the TTL (a short one here).
        run.env["UIDX_LEASE_TTL_SECONDS"] = "3"
    # -v: the edges say which range they lease (with their process id).
    process = run.start(verbose=True)
    try:
        seen = log_until(process, lambda line: "workers started" in line, 60)
        edge = _worker_pids(seen)[2]
        # The signal comes when the first batch of the range this edge leased
        # last is stored: four batches of it to go (a range is five here).
        held: list[str] = []

        def mid_range(line: str) -> bool:
            if f"[{edge}] " in line and (leased := re.search(r"range (\d+) .*: leased", line)):
                held.append(leased.group(1))
            stored = re.search(r"stored batch \S+ of range (\d+)", line)
            return bool(held and stored and stored.group(1) == held[-1])

        log_until(process, mid_range, 120)
        os.kill(edge, how)
    except BaseException:
        process.kill()
        process.communicate()  # its pipes closed with it
        raise
    code, _out, err = _finish(process)
    assert code == 0, err[-4000:]
    # Stopping or killing an edge is no fault of the coordinator's.
    assert_clean_log(err)
    if how is signal.SIGTERM:
        assert "range goes back" in err
        # Given back, not left to expire.
        assert re.search(rf"release range {held[-1]} epoch \d+: ok", err), err[-4000:]
    else:
        assert "restarting in" in err  # the supervisor restarts the killed edge
    # The range was taken over: a later grant has a higher epoch.
    (epoch,) = run.rows(f"SELECT epoch FROM ranges WHERE id = {int(held[-1])}")[0]
    assert isinstance(epoch, int)
    assert epoch >= 2, err[-4000:]
    _assert_every_article_once(run, expected)


def test_an_edge_waiting_for_the_coordinator_stops_when_its_supervisor_is_gone(
    tmp_path: Path,
) -> None:
    # The supervisor died (its pipe's write end closed) while the edge waited for the
    # coordinator's port: the worker outlived it as an orphan for up to 120 s.
    read_end, write_end = os.pipe()
    os.close(write_end)
    env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
    env.update(
        UIDX_HOME=str(tmp_path),
        UIDX_LISTEN=f"127.0.0.1:{free_port()}",  # nothing listens: the coordinator died too
        UIDX_NNTP="nntp://127.0.0.1:9",
        COORDINATOR_URL="http://127.0.0.1:9",
        NODE_TOKEN="token",
        DATABASE_URL="postgresql://nobody@127.0.0.1:9/none",
    )
    argv = ["standalone", "--worker-slot", "2", "--parent-fd", str(read_end)]
    process = subprocess.Popen(
        [sys.executable, "-m", "usenet_indexer", *argv],
        env=env,
        pass_fds=(read_end,),
        stderr=subprocess.PIPE,
    )
    os.close(read_end)
    try:
        log_until(process, lambda line: "the supervisor is gone" in line, 30)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()
