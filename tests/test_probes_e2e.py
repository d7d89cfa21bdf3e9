"""Probes end to end: real PAR2 sets and archives, yEnc-posted to INN2, renamed by the daemon.

Uploads in the obfuscation styles of Nyuu, NewsUP and ngPost (random file
names, `rename.with.this.par2`, random par2 names), plain ones, and
zip/7z-wrapped executable floods (usenet_indexer/testing/obfuscated.py
says which tool source each imitates) are posted to a private INN2 with
real yEnc bodies. `uidx standalone` indexes the group; its prober reads
one body of each candidate, and the catalog must show the obfuscated
uploads under their real names (their files too), the plain ones as they
were, and no flood.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_logs import log_until
from running import own_news_server, probed_and_built, rows, standalone, uidx
from test_standalone import Posted, assert_clean_log, standalone_env

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


def test_obfuscated_uploads_get_their_real_names_and_floods_go(
    news: PrivateNewsServer, uploads: list[Built], pg_url: str, tmp_path: Path
) -> None:
    for upload in uploads:
        news.post_articles(GROUP, upload.articles)
    env = standalone_env(
        Posted(news.url(), ()), pg_url, tmp_path / "home",
        UIDX_CATALOG_BUILD_SECONDS="0.5", UIDX_CATALOG_QUIET_SECONDS="0", UIDX_PROBE_SHARE="0.5",
    )  # fmt: skip
    assert uidx(env, "groups", "add", GROUP).returncode == 0
    ((low, high),) = rows(pg_url, f"SELECT low, high FROM groups WHERE name = '{GROUP}'")
    planned = uidx(env, "ranges", "plan", GROUP, "--from", str(low), "--to", str(high))
    assert planned.returncode == 0, planned.stderr

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
        files = {f["name"] for f in releases[upload.real_name]["files"]}
        assert set(upload.data_files) <= files, (upload.kind, files)
    outcomes = {
        str(o): int(str(n))
        for o, n in rows(pg_url, "SELECT outcome, count(*) FROM probe_candidates GROUP BY outcome")
    }
    assert outcomes.get("executable") == 4
    assert outcomes.get("renamed", 0) >= 2 * EACH  # NewsUP's and ngPost's names are all random
    status = json.loads(uidx(env, "status", "--json").stdout)
    assert {p["outcome"] for p in status["probes"]} >= {"renamed", "executable"}
