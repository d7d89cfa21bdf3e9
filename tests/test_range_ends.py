"""Issue 25: no livelock at range ends.

`uidx spool import` cuts a chunk every N articles counted from the first
article present after the cut before, so on a group with gaps the chunks
drift off the round numbers `uidx ranges plan --size` plans on. A range
must still index its own articles and end done, never refused; and a range
that is refused again and again (an edge from before this change) is
parked, shown, not leased, until `uidx ranges retry` plans it again.

Every test has a deadline; nothing waits on a real sleep.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
from psycopg_pool import ConnectionPool
from s3_fixtures import TestSpool
from test_edge import FAST_RETRY, FAST_STREAM, assert_same_catalog, offline_index
from test_http_node import batch_body, bearer, empty_batch

from usenet_indexer.cli import main
from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.coordinator.http import node as nodeapi
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.edge import worker
from usenet_indexer.edge.options import EdgeOptions
from usenet_indexer.edge.worker import EdgeTotals
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.testing.logcheck import record_problems

DEADLINE_SECONDS = 60
GROUP = "alt.binaries.test"
# Where the issue saw it: article numbers past 2^32.
FIRST = 6_000_000_000
RANGE_ARTICLES = 5_000
CHUNK_ARTICLES = 2_500
GZIP = {"Content-Encoding": "gzip"}


@pytest.fixture
def env(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's commands on the test's database, with the coordinator's home."""
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))


METRICS_TOKEN = "t" * 40
SCRAPER = {"authorization": f"Bearer {METRICS_TOKEN}"}


@attrs.frozen
class Served:
    """A coordinator on loopback: its base URL (the edge's COORDINATOR_URL)."""

    url: str

    @property
    def node_api(self) -> str:
        return f"{self.url}/api/v1/node/"


@pytest.fixture
async def served(
    nursery: trio.Nursery, settings: Settings, stores: Stores, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Served]:
    """A coordinator whose log must hold no ERROR line and no 5xx answer when the test ends."""
    async with _serving(nursery, settings, stores, caplog) as served:
        yield served


@pytest.fixture
async def any_served(
    nursery: trio.Nursery,
    settings: Settings,
    stores: Stores,
    caplog: pytest.LogCaptureFixture,
    any_spool: TestSpool,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Served]:
    """`served` on a folder spool, then on an S3 one (the operator's commands too)."""
    for name, value in any_spool.env.items():
        monkeypatch.setenv(name, value)
    async with _serving(nursery, any_spool.settings(settings), stores, caplog) as served:
        yield served


@asynccontextmanager
async def _serving(
    nursery: trio.Nursery, settings: Settings, stores: Stores, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[Served]:
    caplog.set_level(logging.INFO)
    options = attrs.evolve(nodeapi.ApiOptions.from_settings(settings), stream=FAST_STREAM)
    with trio.fail_after(DEADLINE_SECONDS):
        scraped = attrs.evolve(settings, metrics_token=METRICS_TOKEN)
        host, port = await nursery.start(partial(serve, scraped, stores, options=options))
    yield Served(f"http://{host}:{port}")
    found = record_problems(caplog.get_records("call"))
    assert not found, found.describe()


def status_json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def rows(pool: ConnectionPool, sql: str) -> list[tuple[Any, ...]]:
    with pool.connection() as conn:
        return [tuple(row) for row in conn.execute(sql).fetchall()]


def refusals_in(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The coordinator's answers that refused a batch or a finish."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("usenet_indexer.coordinator")
        and re.search(r": (422|409) |refused|parked", r.getMessage())
    ]


def gapped_lines() -> list[bytes]:
    """Overview lines from FIRST, with holes: a few articles at every multiple of
    CHUNK_ARTICLES (so each spool chunk starts later than the one before it planned),
    and every seventh article (expired or never there)."""
    lines = generate(GeneratorConfig(articles=24_000, seed=11, first_article=FIRST)).lines
    kept = []
    keep = True
    for line in lines:
        head = line.split(b"\t", 1)[0]
        # A malformed line (the generator makes some) goes with the line before it.
        if head.isdigit():
            n = int(head)
            keep = n == FIRST or not ((n - FIRST) % CHUNK_ARTICLES < 7 or n % 7 == 3)
        if keep:
            kept.append(line)
    return kept


# --- (a) range ends inside spool chunks ---------------------------------------------


@pytest.mark.trio
@pytest.mark.usefixtures("env")
async def test_ranges_on_round_numbers_over_a_spool_cut_elsewhere_end_done_unrefused(
    any_served: Served,
    settings: Settings,
    stores: Stores,
    pool: ConnectionPool,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = gapped_lines()
    last = max(int(h) for h in (line.split(b"\t", 1)[0] for line in lines) if h.isdigit())
    dump = tmp_path / "dump.txt"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    assert main(["groups", "add", GROUP, "--unchecked"]) == 0
    chunking = ["--chunk-articles", str(CHUNK_ARTICLES)]
    assert main(["spool", "import", str(dump), "--group", GROUP, *chunking]) == 0
    size = ["--size", str(RANGE_ARTICLES)]
    assert main(["ranges", "plan", GROUP, "--from", str(FIRST), "--to", str(last), *size]) == 0
    (planned,) = rows(pool, "SELECT count(*) FROM ranges")[0]
    assert planned == 5
    # What issue 25 measured: range ends inside spool chunks, and chunks that
    # begin in the range before.
    straddling = """
        SELECT count(*) FROM ranges r JOIN spool_chunks s ON s.group_id = r.group_id
        WHERE s.first_article <= r.last_article AND s.last_article > r.last_article
    """
    assert rows(pool, straddling)[0][0] >= 3
    token = stores.nodes.create("edge-1")
    options = EdgeOptions(
        coordinator_url=any_served.url,
        node_token=token,
        ranges=planned,
        batch_articles=2_000,
        idle_seconds=0.01,
        retry=FAST_RETRY,
    )

    with trio.fail_after(DEADLINE_SECONDS):
        totals = await worker.run(settings, options=options)

    assert totals == EdgeTotals(finished=planned)
    assert refusals_in(caplog) == []
    status = status_json(capsys)
    assert [(r["state"], r["ranges"]) for r in status["ranges"]] == [("done", planned)]
    assert status["parked_ranges"] == []
    # Each batch within its range, and the catalog an offline index of the
    # dump makes: no article lost or doubled at a range's end.
    outside = """
        SELECT count(*) FROM batches b JOIN ranges r ON r.id = b.range_id
        WHERE b.batch_first < r.first_article OR b.batch_next > r.last_article + 1
    """
    assert rows(pool, outside) == [(0,)]
    covered = "SELECT sum(lines) FROM batches"
    assert rows(pool, covered) == [(len(lines),)]
    assert_same_catalog(CatalogBuild(pool).export(), offline_index(tmp_path, lines))


# --- (b) a range refused again and again is parked ------------------------------------


@attrs.define
class OldEdge:
    """An edge from before issue 25: its last batch runs to the end of the spool chunk,
    past the range's end; refused, it gives the range back and leases again."""

    client: httpx.AsyncClient

    async def lease(self) -> dict[str, Any] | None:
        answer = await self.client.post("lease")
        if answer.status_code == 204:
            return None
        assert answer.status_code == 200, answer.text
        lease: dict[str, Any] = answer.json()["range"]
        return lease

    async def post(self, lease: dict[str, Any], first: int, next_: int) -> httpx.Response:
        body = batch_body(empty_batch(first, next_), lease["id"], lease["epoch"])
        return await self.client.post(f"ranges/{lease['id']}/batches", content=body, headers=GZIP)

    async def give_back(self, lease: dict[str, Any]) -> int:
        answer = await self.client.post(f"ranges/{lease['id']}/release", json=_epoch(lease))
        return answer.status_code


def _epoch(lease: dict[str, Any]) -> dict[str, int]:
    return {"epoch": lease["epoch"]}


@pytest.mark.trio
@pytest.mark.usefixtures("env")
async def test_a_range_refused_three_times_in_a_row_is_parked_until_retried(
    served: Served,
    stores: Stores,
    pool: ConnectionPool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["groups", "add", GROUP, "--unchecked"]) == 0
    assert main(["ranges", "plan", GROUP, "--from", "1000", "--to", "1999"]) == 0
    (range_id,) = rows(pool, "SELECT id FROM ranges")[0]
    token = stores.nodes.create("old-edge")

    with trio.fail_after(DEADLINE_SECONDS):
        async with httpx.AsyncClient(base_url=served.node_api, headers=bearer(token)) as client:
            edge = OldEdge(client)
            for attempt in (1, 2, 3):
                lease = await edge.lease()
                assert lease is not None
                assert (lease["id"], lease["epoch"]) == (range_id, attempt)
                refused = await edge.post(lease, 1000, 2500)
                assert refused.status_code == 422
                error = refused.json()["error"]
                assert "the batch runs to 2500, past the range's end 1999" in error
                assert ("parked" in error) is (attempt == 3)
                # Given back (as the edge does): once parked, it is not the edge's.
                assert await edge.give_back(lease) == (200 if attempt < 3 else 409)
            assert await edge.lease() is None
            operator = {"apikey": stores.users.create("admin", operator=True)}
            async with httpx.AsyncClient(base_url=served.url) as browser:
                page = (await browser.get("/", params=operator)).text
                metrics = (await browser.get("/metrics", headers=SCRAPER)).text

    # What the operator sees: the range parked, why, and how to put it back.
    status = status_json(capsys)
    (parked,) = status["parked_ranges"]
    assert (parked["id"], parked["group"], parked["first"], parked["last"]) == (
        range_id, GROUP, 1000, 1999,
    )  # fmt: skip
    assert (parked["resume"], parked["refusals"]) == (1000, 3)
    assert "past the range's end 1999" in parked["reason"]
    assert parked["failed_at"].endswith("+00:00")
    assert [(r["state"], r["ranges"]) for r in status["ranges"]] == [("failed", 1)]
    # Nothing is left to index: `uidx standalone --exit-when-done` stops (and exits 1).
    assert stores.ranges.all_done()
    assert stores.ranges.progress().parked == 1
    assert main(["status"]) == 0
    text = capsys.readouterr().out
    assert "parked ranges" in text
    assert f"range {range_id} {GROUP} 1,000..1,999 at 1,000: 3 refusals" in text
    assert 'id="parked"' in page
    assert "past the range&#39;s end 1999" in page
    assert "uidx ranges retry" in page
    assert "uidx_ranges_parked 1.0" in metrics

    # Named mistakes change nothing.
    assert main(["ranges", "retry", str(range_id + 1)]) == 1
    assert f"there is no range {range_id + 1}" in capsys.readouterr().err
    assert main(["ranges", "retry"]) == 78
    assert main(["ranges", "retry", str(range_id)]) == 0
    assert f"planned again: 1 ranges ({range_id})" in capsys.readouterr().out
    assert main(["ranges", "retry", str(range_id)]) == 1
    assert f"range {range_id} is planned" in capsys.readouterr().err
    assert main(["ranges", "retry", "--all"]) == 0
    assert "no range is parked" in capsys.readouterr().out
    assert status_json(capsys)["parked_ranges"] == []

    with trio.fail_after(DEADLINE_SECONDS):
        async with httpx.AsyncClient(base_url=served.node_api, headers=bearer(token)) as client:
            lease = await OldEdge(client).lease()
            assert lease is not None
            assert (lease["id"], lease["next"]) == (range_id, 1000)
            async with httpx.AsyncClient(base_url=served.url) as browser:
                metrics = (await browser.get("/metrics", headers=SCRAPER)).text
    assert "uidx_ranges_parked 0.0" in metrics


@pytest.mark.trio
@pytest.mark.usefixtures("env")
async def test_a_stored_batch_ends_a_run_of_refusals(
    served: Served, stores: Stores, pool: ConnectionPool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["groups", "add", GROUP, "--unchecked"]) == 0
    assert main(["ranges", "plan", GROUP, "--from", "1000", "--to", "1999"]) == 0
    token = stores.nodes.create("old-edge")
    with trio.fail_after(DEADLINE_SECONDS):
        async with httpx.AsyncClient(base_url=served.node_api, headers=bearer(token)) as client:
            edge = OldEdge(client)
            # Two refusals, a stored batch, two refusals: never three in a row.
            for first, good in ((1000, False), (1000, False), (1000, True), (1500, False)):
                lease = await edge.lease()
                assert lease is not None
                answer = await edge.post(lease, first, 1500 if good else 2500)
                assert answer.status_code == (200 if good else 422)
                if not good:
                    assert await edge.give_back(lease) == 200
                    continue
                again = await edge.post(lease, 1500, 2500)
                assert again.status_code == 422
                assert await edge.give_back(lease) == 200
            assert await edge.lease() is not None
    status = status_json(capsys)
    assert status["parked_ranges"] == []
    assert [(r["state"], r["articles_indexed"]) for r in status["ranges"]] == [("leased", 500)]


@pytest.mark.trio
@pytest.mark.usefixtures("env")
async def test_finishing_before_the_end_again_and_again_parks_the_range_and_a_stale_node_does_not(
    served: Served, stores: Stores, pool: ConnectionPool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["groups", "add", GROUP, "--unchecked"]) == 0
    assert main(["ranges", "plan", GROUP, "--from", "1000", "--to", "1999"]) == 0
    holder, stale = stores.nodes.create("edge-1"), stores.nodes.create("edge-2")
    with trio.fail_after(DEADLINE_SECONDS):
        async with (
            httpx.AsyncClient(base_url=served.node_api, headers=bearer(holder)) as client,
            httpx.AsyncClient(base_url=served.node_api, headers=bearer(stale)) as other,
        ):
            lease = await OldEdge(client).lease()
            assert lease is not None
            path = f"ranges/{lease['id']}/finish"
            # Another node's calls are fenced (409) and count for nothing.
            for _ in range(3):
                assert (await OldEdge(other).post(lease, 1000, 2500)).status_code == 409
                assert (await other.post(path, json=_epoch(lease))).status_code == 409
            assert status_json(capsys)["parked_ranges"] == []
            for attempt in (1, 2, 3):
                early = await client.post(path, json=_epoch(lease))
                assert early.status_code == 409
                assert ("parked" in early.json()["error"]) is (attempt == 3)
    (parked,) = status_json(capsys)["parked_ranges"]
    assert parked["reason"] == nodeapi.INCOMPLETE
