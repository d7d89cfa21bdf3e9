"""Probes end to end: real PAR2 sets and archives, yEnc-posted to INN2, renamed by the daemon.

Uploads in the obfuscation styles of Nyuu, NewsUP and ngPost (random file
names, `rename.with.this.par2`, random par2 names), plain ones, and
zip/7z-wrapped executable floods (usenet_indexer/testing/obfuscated.py
says which tool source each imitates) are posted to a private INN2 with
real yEnc bodies. `uidx standalone` indexes the group; its prober reads
one body of each candidate, and the catalog must show the obfuscated
uploads under their real names (their files too), the plain ones as they
were, and no flood: the daemon left running, and a one-shot run
(`--exit-when-done`), which must wait for the probes before it ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_logs import log_until
from psycopg_pool import ConnectionPool
from running import own_news_server, probed_and_built, rows, standalone, uidx
from test_standalone import Posted, assert_clean_log, standalone_env

from usenet_indexer.store.catalog import CatalogTable, Search
from usenet_indexer.testing.newsd_private import (
    PrivateNewsServer,
)
from usenet_indexer.testing.obfuscated import Built, ToolMissing, build

GROUP = "alt.binaries.uidx.probes"
EACH = 3
HOUR = 3600
RUN_SECONDS = 240


@pytest.fixture
def news() -> Iterator[PrivateNewsServer]:
    with own_news_server(GROUP, "uidx-newsd-probe-") as server:
        yield server


@pytest.fixture
def uploads(tmp_path: Path) -> list[Built]:
    made: list[Built] = []
    # Two hours apart: NewsUP's uploads all come under its default From.
    start = int(time.time()) - 2 * HOUR * EACH
    try:
        for kind, count in (("nyuu", EACH), ("newsup", EACH), ("ngpost", EACH), ("plain", EACH),
                            ("zip_flood", 2), ("7z_flood", 2)):  # fmt: skip
            made += [
                build(tmp_path / "files", kind, n, seed=5, posted=start + 2 * HOUR * n)
                for n in range(count)
            ]
    except ToolMissing as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))
    return made


def posted_and_planned(
    news: PrivateNewsServer, uploads: list[Built], pg_url: str, home: Path, **settings: str
) -> dict[str, str]:
    """The uploads posted to the server, its group added and planned whole; the
    environment of a uidx process that indexes it (`settings` besides)."""
    for upload in uploads:
        news.post_articles(GROUP, upload.articles)
    env = standalone_env(Posted(news.url(), ()), pg_url, home, **settings)
    assert uidx(env, "groups", "add", GROUP).returncode == 0
    ((low, high),) = rows(pg_url, f"SELECT low, high FROM groups WHERE name = '{GROUP}'")
    planned = uidx(env, "ranges", "plan", GROUP, "--from", str(low), "--to", str(high))
    assert planned.returncode == 0, planned.stderr
    return env


def test_obfuscated_uploads_get_their_real_names_and_floods_go(
    news: PrivateNewsServer, uploads: list[Built], pg_url: str, tmp_path: Path
) -> None:
    env = posted_and_planned(
        news, uploads, pg_url, tmp_path / "home",
        UIDX_CATALOG_BUILD_SECONDS="0.5", UIDX_CATALOG_QUIET_SECONDS="0", UIDX_PROBE_SHARE="0.5",
    )  # fmt: skip

    log: list[str] = []
    with standalone(env) as process:
        log += log_until(
            process, lambda line: "catalog built" in line and probed_and_built(pg_url), RUN_SECONDS
        )
    assert_clean_log("".join(log))
    names = {str(r[0]) for r in rows(pg_url, "SELECT name FROM catalog")}
    export = tmp_path / "catalog.jsonl"
    assert uidx(env, "catalog", "export", "--out", str(export)).returncode == 0
    releases = {
        r["name"]: r for r in map(json.loads, export.read_text().splitlines()) if not r["dropped"]
    }
    for upload in uploads:
        if upload.flood:
            assert upload.real_name not in names, upload.kind
            continue
        assert upload.real_name in names, (upload.kind, sorted(names))
        files = {f["name"]: f for f in releases[upload.real_name]["files"]}
        assert set(upload.data_files) <= files.keys(), (upload.kind, files)
        # The NZB names them so too: a downloader names a file after its subject.
        for name in upload.data_files:
            assert f'"{name}"' in files[name]["subject"], upload.kind
    outcomes = {
        str(o): int(str(n))
        for o, n in rows(pg_url, "SELECT outcome, count(*) FROM probe_candidates GROUP BY outcome")
    }
    assert outcomes.get("executable") == 4
    assert outcomes.get("renamed", 0) >= 2 * EACH  # NewsUP's and ngPost's names are all random
    status = json.loads(uidx(env, "status", "--json").stdout)
    assert {p["outcome"] for p in status["probes"]} >= {"renamed", "executable"}


def test_a_one_shot_run_ends_once_its_probes_have_renamed_the_obfuscated(
    news: PrivateNewsServer, uploads: list[Built], pg_url: str, pool: ConnectionPool, tmp_path: Path
) -> None:
    # The default probe share: 2 connections give no slot of their own, only the
    # one that probes while no header work is left.
    env = posted_and_planned(
        news, uploads, pg_url, tmp_path / "home", UIDX_CATALOG_QUIET_SECONDS="0"
    )
    done = subprocess.run(
        [sys.executable, "-m", "usenet_indexer", "standalone", "--exit-when-done",
         "--processes", "1"],
        env=env, capture_output=True, text=True, timeout=RUN_SECONDS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert_clean_log(done.stderr)
    # What a newznab client finds by the real name (t=search&q=...).
    catalog = CatalogTable(pool)
    for upload in uploads:
        _total, page = catalog.search(Search(words=upload.real_name))
        found = [row.item.name for row in page]
        if upload.flood:
            assert upload.real_name not in found, upload.kind
        else:
            assert found == [upload.real_name], (upload.kind, found)
    # It said what it waited for, and that the wait is over.
    assert "the ranges are done; waiting for the probe queue: " in done.stderr
    assert "candidates left" in done.stderr
    assert "the probe queue is drained" in done.stderr
    assert rows(
        pg_url, "SELECT count(*) FROM probe_candidates WHERE state IN ('new', 'probing')"
    ) == [(0,)]
    assert rows(pg_url, "SELECT count(*) FROM catalog_pending") == [(0,)]
