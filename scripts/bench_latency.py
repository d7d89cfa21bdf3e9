"""scripts/bench-latency: from an upload's last article to its release in the catalog.

- A private INN2 (scripts/newsd) carries one group, with some articles
  posted before; `uidx groups add` is the only operator command.
- `uidx standalone` (running for good, one edge) indexes it on a private
  PostgreSQL, with `live_poll_seconds` as given (--live-poll-seconds).
- For --minutes, every --every seconds a post of --articles articles of
  uidx's realistic generator goes to the server (several multi-file
  uploads, interleaved, with junk, floods and incomplete ones, as the
  generator makes them; each post its own seed). The end of a post is the
  moment its uploads' last articles are on the server.
- Meanwhile the catalog is read every half second: the first time a
  release is listed (shown) is when it became visible.
- Ground truth: `uidx index`'s merge over every article posted (read back
  with OVER) says which releases are complete, and (by message-id) in
  which post each one's last article went. For every complete release:
  latency = first listed - end of that post. Lost: a complete release never
  listed; extra: a listed release that is not one of them (a double, or an
  incomplete one shown early).

The last line printed is one JSON object: {"bench": "latency", "p50_s": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import psycopg
import trio

from usenet_indexer.commands.index import index_files
from usenet_indexer.nntp.client import connect
from usenet_indexer.testing.newsd_private import PrivateNewsServer, private_news_server
from usenet_indexer.testing.postgres import running_server
from usenet_indexer.testing.processes import free_port

GROUP = "alt.binaries.uidx.latency"
UIDX = [sys.executable, "-m", "usenet_indexer"]
POLL_CATALOG_SECONDS = 0.5


async def over_above(url: str, article: int) -> list[bytes]:
    """Every overview line of the group above `article`."""
    async with connect(url) as client:
        _, low, high = await client.group(GROUP)
        first = max(low, article + 1)
        slices = [(n, min(n + 9_999, high)) for n in range(first, high + 1, 10_000)]
        return [line async for _, lines in client.over_pipelined(slices) for line in lines]


async def high_water_mark(url: str) -> int:
    async with connect(url) as client:
        _, _, high = await client.group(GROUP)
        return high


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live-poll-seconds", type=float, default=10.0)
    parser.add_argument("--minutes", type=float, default=4.0, help="how long uploads are posted")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between posts")
    parser.add_argument("--articles", type=int, default=1_500, help="articles per post")
    parser.add_argument("--settle", type=float, default=90.0, help="seconds to wait after")
    args = parser.parse_args()
    with ExitStack() as stack:
        news = stack.enter_context(
            private_news_server([GROUP], prefix="uidx-newsd-latency-", start_timeout_seconds=600)
        )
        news.post(GROUP, 500, seed=1, days=1, end=int(time.time()) - 3_600)
        server = stack.enter_context(running_server())
        url = stack.enter_context(server.fresh_database())
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="uidx-latency-")))
        env = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_")}
        env.update(
            DATABASE_URL=url,
            UIDX_HOME=str(home),
            UIDX_NNTP=f"{news.url()}?connections=2",
            UIDX_LISTEN=f"127.0.0.1:{free_port()}",
            UIDX_LIVE_POLL_SECONDS=f"{args.live_poll_seconds:g}",
        )
        added = subprocess.run([*UIDX, "groups", "add", GROUP], env=env, capture_output=True)
        if added.returncode != 0:
            raise SystemExit(added.stderr.decode())
        start_high = trio.run(high_water_mark, news.url())
        log = open(home / "standalone.log", "wb")  # noqa: SIM115 (closed with the stack)
        stack.callback(log.close)
        process = subprocess.Popen([*UIDX, "standalone", "--processes", "1"], env=env, stderr=log)
        print(f"bench-latency: uidx standalone, log in {home}/standalone.log", file=sys.stderr)
        try:
            posts, seen = trio.run(post_and_watch, news, url, args)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=120)
        lines = trio.run(over_above, news.url(), start_high)
        with psycopg.connect(url) as conn:
            listed = {
                str(name): (str(guid), float(done), bool(shown))
                for guid, name, done, shown in conn.execute(
                    "SELECT guid, name, completion, shown FROM catalog"
                ).fetchall()
            }
        figures = score(home, lines, posts, seen, listed)
        if figures.get("lost"):
            kept = Path(tempfile.gettempdir()) / f"bench-latency-{int(time.time())}.log"
            shutil.copy(home / "standalone.log", kept)
            shutil.copy(home / "posted.txt", kept.with_suffix(".overview"))
            print(f"bench-latency: releases lost: the log is kept in {kept}", file=sys.stderr)
    print(json.dumps({"bench": "latency", "live_poll_seconds": args.live_poll_seconds, **figures}))
    return 0


async def post_and_watch(
    news: PrivateNewsServer, url: str, args: argparse.Namespace
) -> tuple[list[tuple[float, int]], dict[str, float]]:
    """Post on schedule while reading the catalog; (post end time, high after it) per post,
    and the first time each guid was listed."""
    posts: list[tuple[float, int]] = []
    seen: dict[str, float] = {}
    stop = trio.Event()

    async def watch() -> None:
        conn = await trio.to_thread.run_sync(lambda: psycopg.connect(url, autocommit=True))
        try:
            while not stop.is_set():
                guids = await trio.to_thread.run_sync(
                    lambda: conn.execute("SELECT guid FROM catalog WHERE shown").fetchall()
                )
                now = time.time()
                for (guid,) in guids:
                    seen.setdefault(str(guid), now)
                with trio.move_on_after(POLL_CATALOG_SECONDS):
                    await stop.wait()
        finally:
            conn.close()

    async def post() -> None:
        deadline = time.time() + args.minutes * 60
        seed = 100
        while time.time() < deadline:
            started = time.time()
            seed += 1
            await trio.to_thread.run_sync(
                partial(news.post, GROUP, args.articles, seed=seed, days=0.002)
            )
            posts.append((time.time(), await high_water_mark(news.url())))
            print(f"bench-latency: post {len(posts)} done", file=sys.stderr, flush=True)
            await trio.sleep(max(0.0, args.every - (time.time() - started)))
        await trio.sleep(args.settle)
        stop.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        nursery.start_soon(post)
    return posts, seen


def score(
    home: Path,
    lines: list[bytes],
    posts: list[tuple[float, int]],
    seen: dict[str, float],
    listed: dict[str, tuple[str, float, bool]],
) -> dict[str, object]:
    dump = home / "posted.txt"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    merger, _ = index_files([dump], batch_articles=10**9)
    article_of = {}
    for line in lines:
        fields = line.split(b"\t", 5)
        article_of[fields[4].strip(b"<>").decode("latin-1")] = int(fields[0])
    latencies: list[float] = []
    lost = 0
    complete: set[str] = set()
    for release in merger.releases():
        if release.dropped is not None or release.complete < 1.0:
            continue
        guid = release.key.hex()
        complete.add(guid)
        last = max(article_of[mid] for f in release.files for _, mid, _ in f.segments)
        posted_at = next(at for at, high in posts if high >= last)
        if guid not in seen:
            lost += 1
            # What the catalog has by that name instead: (guid, completion, shown).
            print(
                f"bench-latency: not listed: {release.name} ({guid}); the catalog has"
                f" {listed.get(release.name)}",
                file=sys.stderr,
            )
            continue
        latencies.append(seen[guid] - posted_at)
    extra = len(set(seen) - complete)
    if not latencies:
        return {"releases": 0, "lost": lost, "extra": extra}
    return {
        "p50_s": round(statistics.median(latencies), 2),
        "p95_s": round(percentile(latencies, 0.95), 2),
        "max_s": round(max(latencies), 2),
        "releases": len(latencies),
        "lost": lost,
        "extra": extra,
        "posts": len(posts),
    }


if __name__ == "__main__":
    raise SystemExit(main())
