"""The indexer follows its groups by itself: new posts and the backfill, no operator command.

`uidx standalone` (running for good, not --exit-when-done) against a
private INN2: uploads posted to the server after the daemon started must
reach the catalog with nothing but `uidx groups add`, each listed once
complete; a group added with --backfill-days must be planned and indexed
by the daemon down to the first article of those days, newest first, with
the new posts ahead of it; and `uidx status` must say where each group is.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import trio
from process_logs import log_until
from running import own_news_server, rows, standalone, uidx
from test_edge import offline_index
from test_standalone import Posted, assert_clean_log, over_all, standalone_env

from usenet_indexer.core.article_dates import first_dated
from usenet_indexer.testing.newsd_private import (
    PrivateNewsServer,
)

GROUP = "alt.binaries.uidx.live"
RUN_SECONDS = 180


@pytest.fixture
def news() -> Iterator[PrivateNewsServer]:
    with own_news_server(GROUP, "uidx-newsd-live-") as server:
        yield server


def until(
    process: subprocess.Popen[bytes], words: str, check: Callable[[], bool], log: list[str]
) -> None:
    """Read the log until a line with `words` comes after which `check()` holds."""
    log += log_until(process, lambda line: words in line and check(), RUN_SECONDS)


def lines_above(url: str, article: int) -> list[bytes]:
    return [line for line in trio.run(over_all, url, GROUP) if int(line.split(b"\t")[0]) > article]


def test_new_posts_reach_the_catalog_with_no_operator_command(
    news: PrivateNewsServer, pg_url: str, tmp_path: Path
) -> None:
    news.post(GROUP, 1_500, seed=21, days=1, end=int(time.time()) - 3_600)
    env = standalone_env(
        Posted(news.url(), ()), pg_url, tmp_path, UIDX_LIVE_POLL_SECONDS="0.5",
        # An hour: the new range can only come through the lease call waiting for it.
        UIDX_IDLE_SECONDS="3600",
    )  # fmt: skip
    assert uidx(env, "groups", "add", GROUP).returncode == 0
    (high,) = rows(pg_url, f"SELECT high FROM groups WHERE name = '{GROUP}'")[0]
    assert isinstance(high, int)
    log: list[str] = []
    with standalone(env) as process:
        until(process, f"following {GROUP} above article {high}", lambda: True, log)
        news.post(GROUP, 3_000, seed=22, days=0.01)
        new = lines_above(news.url(), high)
        assert len(new) == 3_000
        wanted = [r for r in offline_index(tmp_path, new) if r.dropped is None]
        complete = {r.key.hex() for r in wanted if r.complete >= 1.0}
        assert len(complete) > 5
        assert len(complete) < len(wanted)

        def listed() -> set[str]:
            return {str(r[0]) for r in rows(pg_url, "SELECT guid FROM catalog WHERE shown")}

        until(process, "catalog built", lambda: listed() >= complete, log)
        # Only what is complete: the rest waits for catalog_quiet_seconds.
        assert listed() == complete
        ranges = rows(
            pg_url,
            "SELECT first_article, last_article, kind, state FROM ranges ORDER BY first_article",
        )
        # One live range, or several when a poll came while the posts were still
        # arriving: live, done, and tiling the new articles with no hole or overlap.
        assert {(kind, state) for _, _, kind, state in ranges} == {("live", "done")}
        assert ranges[0][0] == high + 1
        assert ranges[-1][1] == high + 3_000
        spans = [(int(str(first)), int(str(last))) for first, last, _, _ in ranges]
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(spans))
        status = json.loads(uidx(env, "status", "--json").stdout)
        (group,) = status["groups"]
        assert group["high"] == group["head_indexed_to"] == high + 3_000
        assert group["lag"] == 0
        assert group["lag_seconds"] == 0
    assert_clean_log("".join(log))


def test_the_daemon_backfills_a_group_behind_its_live_head(
    news: PrivateNewsServer, pg_url: str, tmp_path: Path
) -> None:
    news.post(GROUP, 4_000, seed=23, days=6)
    env = standalone_env(
        Posted(news.url(), ()), pg_url, tmp_path, UIDX_LIVE_POLL_SECONDS="0.5",
        UIDX_RANGE_ARTICLES="500",
    )  # fmt: skip
    added = uidx(env, "groups", "add", GROUP, "--backfill-days", "2")
    assert added.returncode == 0, added.stderr
    (high,) = rows(pg_url, f"SELECT high FROM groups WHERE name = '{GROUP}'")[0]
    assert isinstance(high, int)

    def backfilled() -> bool:
        (floor, lowest, waiting) = rows(
            pg_url,
            "SELECT g.backfill_floor, min(r.first_article),"
            " count(*) FILTER (WHERE r.state <> 'done')"
            " FROM groups g JOIN ranges r ON r.group_id = g.id GROUP BY g.id",
        )[0] or (None, None, 1)
        return floor is not None and lowest == floor and waiting == 0

    log: list[str] = []
    with standalone(env) as process:
        until(process, ": ok", backfilled, log)
        # The floor is where the articles posted since two days before the search begin.
        ((floor, checked_at),) = rows(
            pg_url, "SELECT backfill_floor, backfill_checked_at FROM groups"
        )
        assert isinstance(floor, int)
        assert isinstance(checked_at, datetime)
        posted = {int(line.split(b"\t")[0]): _posted(line) for line in lines_above(news.url(), 0)}
        cutoff = checked_at - timedelta(days=2)
        assert posted[floor] >= cutoff > posted[floor - 1]
        # Newest first, a slice at a time, nothing below the floor or above the high.
        planned = rows(pg_url, "SELECT first_article, last_article, kind FROM ranges ORDER BY id")
        assert {str(p[2]) for p in planned} == {"backfill"}
        firsts = [int(str(p[0])) for p in planned]
        assert firsts == sorted(firsts, reverse=True)
        assert _tiles(planned, floor, high)
        # New posts: planned above, as live, and indexed.
        news.post(GROUP, 600, seed=24, days=0.01)
        until(process, ": ok", lambda: backfilled() and _all_live_done(pg_url, high + 600), log)
        status = json.loads(uidx(env, "status", "--json").stdout)
        (group,) = status["groups"]
        assert group["backfill_reached"] == floor
        assert group["head_indexed_to"] == high + 600
        text = uidx(env, "status").stdout
        # Article numbers as a person reads them: with thousands separators.
        head = re.escape(f"{high + 600:,}")
        assert re.search(
            rf"{re.escape(GROUP)}\s+checked\s+{head}\s+{head}\s+{re.escape(f'{floor:,}')} \(all\)",
            text,
        ), text
    assert_clean_log("".join(log))


def _posted(line: bytes) -> datetime:
    found = first_dated([line], int(line.split(b"\t")[0]), int(line.split(b"\t")[0]))
    assert found is not None
    return found.date


def _tiles(planned: list[tuple[object, ...]], first: int, last: int) -> bool:
    at = first
    for start, end, _ in sorted(planned, key=lambda p: int(str(p[0]))):
        if int(str(start)) != at:
            return False
        at = int(str(end)) + 1
    return at == last + 1


def _all_live_done(url: str, last: int) -> bool:
    live = rows(
        url, "SELECT max(last_article), bool_and(state = 'done') FROM ranges WHERE kind = 'live'"
    )
    return live == [(last, True)]
