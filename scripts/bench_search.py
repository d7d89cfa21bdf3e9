"""scripts/bench-search: newznab searches through the HTTP API over >= 1M catalog releases.

- A private PostgreSQL (a cluster of its own, a quarter of the memory as its
  buffer cache: what an operator gives a catalog of millions, see the README;
  --shared-buffers) gets --releases catalog rows (default 1M):
  scene-style TV and movie names (show words, SxxEyy, year, source and codec
  tags, groups) one every 31 s, with their categories, season and episode
  (the core's, as the catalog build finds them), and sizes. The rows are
  copied as the build copies them (store/catalog.py's copy_entries) with the
  catalog's indexes, constraints and catalog_keys trigger off, and those are
  made again after (read from the database, as the migrations left them):
  sorted index builds, where 10M rows inserted one by one into the GIN
  indexes took 51 minutes. Then VACUUM ANALYZE, as autovacuum leaves a
  catalog that has settled (hint bits set, the GIN indexes' pending lists
  merged: a search reads a pending list whole), and the catalog and its
  indexes read into the buffer cache (pg_prewarm), as a server that has
  answered searches for a while holds them.
- The coordinator's App serves /api in this process (hypercorn on trio), as
  `uidx coordinator` does; a client in a process of its own, as Sonarr is
  (`--client inline`: in the server's trio loop, as this bench did first),
  asks a mix of what Sonarr, Radarr and aggregators send: the newest feed, q
  of one and two words, a category, tvsearch with season and episode, and
  pages deep into a result.
- Also asked, and reported apart (`extra_p95_ms_by_kind`, not in p95_ms, so
  that p95_ms stays the issue's mix): q of partial words (a show word cut
  short and a cut SxxEy: the pg_trgm retry) and q with a typo (matching
  nothing: both tries).
- Baselines in the same run: `t=caps` (HTTP, no database), and `db_p95_ms`:
  the same searches asked of CatalogTable.search directly, so that
  p95_ms / db_p95_ms shows what HTTP and rendering add on a noisy machine.

The last line printed is one JSON object: {"bench": "search", "p95_ms": ...}.

`--keep DIR` runs the cluster in DIR and leaves it there: a later run with the
same DIR and --releases reuses its catalog (migrations applied, no refill), so
that index and query changes are measured without waiting for the fill again
(10M rows: ~23 minutes on 2 busy cores, most of it the GIN index builds).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import httpx
import psycopg
import trio
from psycopg import sql

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.catalog import CatalogEntry, search_name
from usenet_indexer.core.categories import categorise, season_episode
from usenet_indexer.core.newznab import default_categories, parse_request
from usenet_indexer.store.catalog import Search, copy_entries
from usenet_indexer.store.migrate import migrate
from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.store.pool import open_pool

WORDS = [
    "atlas",
    "summer",
    "crimson",
    "hidden",
    "moon",
    "silent",
    "night",
    "red",
    "wild",
    "dead",
    "shadow",
    "queen",
    "king",
    "storm",
    "fire",
    "island",
    "winter",
    "signal",
    "north",
    "wolf",
    "house",
    "tiger",
    "thunder",
    "dragon",
    "broken",
    "blue",
    "black",
    "raven",
    "fallen",
    "lost",
    "velvet",
    "heart",
    "river",
    "city",
    "ocean",
    "star",
    "empire",
    "kingdom",
    "secret",
    "garden",
    "iron",
    "glass",
    "stone",
    "golden",
    "silver",
    "dark",
    "light",
    "last",
    "first",
    "new",
    "old",
    "great",
    "little",
    "big",
    "family",
    "doctor",
    "police",
    "detective",
    "lawyer",
    "agent",
    "soldier",
    "hunter",
    "pilot",
    "captain",
    "brother",
    "sister",
    "mother",
    "father",
    "daughter",
    "son",
    "friends",
    "love",
    "war",
    "peace",
    "world",
    "earth",
    "sky",
    "sea",
    "mountain",
    "valley",
    "forest",
    "desert",
    "road",
    "train",
    "station",
    "bridge",
    "tower",
    "castle",
    "palace",
]
TAGS = (
    "720p.HDTV.x264",
    "1080p.WEB.h264",
    "2160p.WEB.x265",
    "1080p.BluRay.x264",
    "720p.WEB-DL.DD5.1.H.264",
)
EXTRA_KINDS = ("partial", "typo")
GROUPS = (
    "KILLERS",
    "BS",
    "ENSLAVE",
    "SPARKS",
    "NTb",
    "playWEB",
    "ION10",
    "CMRG",
    "EDITH",
    "ROVERS",
)

# What the fill drops while it copies and makes again after (index builds from
# sorted runs, where 10M rows inserted one by one into the GIN and trigram
# indexes took 50 minutes): the catalog's and catalog_keys' indexes and
# constraints, read from the database as the migrations made them.
_CONSTRAINTS = """
    SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), contype
    FROM pg_constraint
    WHERE conrelid IN ('catalog'::regclass, 'catalog_keys'::regclass)
      AND contype IN ('p', 'u', 'f')
    ORDER BY contype = 'f' DESC
"""
_INDEXES = """
    SELECT indexname, indexdef FROM pg_indexes
    WHERE tablename IN ('catalog', 'catalog_keys')
      AND indexname NOT IN (SELECT conname FROM pg_constraint)
"""
# catalog_keys as migration 0013 fills it (the trigger that keeps it is off during the copy).
_KEYS = "INSERT INTO catalog_keys (key, catalog_id) SELECT DISTINCT k, id FROM catalog, unnest(sources) AS k"
_CHANGED_AT = datetime(2026, 1, 1, tzinfo=UTC)
# Rows whose category, season and episode are checked against the core's for the whole
# name (`_told` asks it for the name's shape).
_CHECKED = 20_000


@functools.cache
def _told(name: str) -> tuple[int, int | None, int | None]:
    """The category, season and episode the core makes of a name (categorise takes
    ~200 us: asked once per shape of name, the title's words put aside; `entries`
    checks on its first rows that the words change nothing)."""
    return (categorise(name, ("alt.binaries.test",)), *season_episode(name))


def entries(start: int, stop: int) -> Iterator[CatalogEntry]:
    """Catalog rows start..stop-1 as the build writes them (core/catalog.py's `entry`:
    search name, category, season and episode from the name by the core's own
    functions): six in ten a show's episode, the others a film; spread over a year."""
    for i in range(start, stop):
        words, _, _ = show_of(i)
        title = ".".join(w.capitalize() for w in words.split())
        tag = TAGS[i % len(TAGS)]
        group = GROUPS[(i // 3) % len(GROUPS)]
        if i % 10 < 6:
            rest = f"S{1 + i % 12:02d}E{1 + i % 24:02d}.{tag}-{group}"
        else:
            title += "." + WORDS[(i * 15485863 // 13) % len(WORDS)].capitalize()
            rest = f"{1950 + i % 75}.{tag}-{group}"
        name = f"{title}.{rest}"
        category, season, episode = _told(f"Title.{rest}")
        if i < _CHECKED:
            assert (category, season, episode) == _told.__wrapped__(name), name
        key = hashlib.md5(str(i).encode()).digest()
        yield CatalogEntry(
            guid=key.hex(),
            name=name,
            search_name=search_name(name),
            category=category,
            size=(200 + i % 5000) * 1048576,
            files=10 + i % 60,
            poster=f"poster{i % 5000}@example.com",
            groups=("alt.binaries.test",),
            posted=1700000000 + i * 31,
            completion=1.0,
            season=season,
            episode=episode,
            probe_candidate=False,
            sources=(key,),
            changed_at=_CHANGED_AT,
            state="whole",
        )


def fill(url: str, count: int) -> None:
    """Fill an empty catalog with `count` rows: indexes, constraints and the
    catalog_keys trigger off, the rows copied in blocks of 1M (a line of progress
    each), then catalog_keys filled and everything made again (on a session without
    the coordinator's statement timeout, with memory for the index builds)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET statement_timeout = 0")
        conn.execute("SET maintenance_work_mem = '1GB'")
        constraints = conn.execute(_CONSTRAINTS).fetchall()
        indexes = conn.execute(_INDEXES).fetchall()
        for table, name, _, _ in constraints:
            conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        for name, _ in indexes:
            conn.execute(f"DROP INDEX {name}")
        conn.execute("ALTER TABLE catalog DISABLE TRIGGER USER")
        try:
            for start in range(1, count + 1, 1_000_000):
                with conn.transaction():
                    copy_entries(conn, entries(start, min(count + 1, start + 1_000_000)), "catalog")
                print(
                    f"bench-search: {min(count, start + 999_999):,} rows",
                    file=sys.stderr,
                    flush=True,
                )
            conn.execute(_KEYS)
        finally:
            conn.execute("ALTER TABLE catalog ENABLE TRIGGER USER")
        print("bench-search: indexing", file=sys.stderr, flush=True)
        for table, name, definition, _ in reversed(constraints):
            conn.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
        for _, definition in indexes:
            conn.execute(definition)


def filled(url: str, count: int) -> bool:
    """Whether the catalog holds the `count` rows FILL makes (a kept cluster's)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*), max(id) FROM catalog").fetchone()
    return row is not None and row[0] == count and row[1] == count


def buffer_cache() -> str:
    """A quarter of the machine's memory (PostgreSQL's own advice for a server of its
    own), at least the 256MB uidx's clusters start with: what an operator gives a
    catalog of millions of releases (ALTER SYSTEM SET shared_buffers, see the README)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{max(256, memory // 4 // 2**20)}MB"


@contextlib.contextmanager
def database(keep: Path | None, shared_buffers: str) -> Iterator[str]:
    """A migrated database on a cluster of its own with `shared_buffers`: in a
    throwaway folder, or, `keep`, in that folder (made on first use, migrated,
    stopped and kept after)."""
    with contextlib.ExitStack() as stack:
        folder = keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        cluster = Cluster(folder, durable=False)
        cluster.start()
        stack.callback(cluster.stop)
        url = cluster.url()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(shared_buffers))
        cluster.stop()  # shared_buffers takes a restart
        cluster.start()
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
        yield url


def settle(url: str) -> None:
    """VACUUM ANALYZE the catalog (outside a transaction, as VACUUM must be), and read
    it and its indexes into the buffer cache, as a server that has been answering
    searches for a while holds them (pg_prewarm: the first requests of a cold cache
    read every page from the disk)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE catalog")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        conn.execute(
            "SELECT pg_prewarm(c.oid) FROM pg_class AS c"
            " WHERE c.oid = 'catalog'::regclass"
            " OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'catalog'::regclass)"
        )


def show_of(i: int) -> tuple[str, int, int]:
    """The two show words, season and episode FILL gives row i (a TV row: i % 10 < 6)."""
    w1 = WORDS[(i * 7919) % len(WORDS)]
    w2 = WORDS[(i * 104729 // 7) % len(WORDS)]
    return f"{w1} {w2}", 1 + i % 12, 1 + i % 24


def requests(
    rng: random.Random, key: str, count: int, releases: int
) -> list[tuple[str, dict[str, str]]]:
    """The mix; q2 and tvsearch ask for shows that are there (people search for those)."""
    mix: list[tuple[str, dict[str, str]]] = []
    tv_rows = [i for i in (rng.randrange(1, releases + 1) for _ in range(count * 3)) if i % 10 < 6]
    for n in range(count):
        kind = n % 6
        if kind == 0:
            mix.append(("newest", {"t": "search"}))
        elif kind == 1:
            mix.append(("q1", {"t": "search", "q": rng.choice(WORDS)}))
        elif kind == 2:
            mix.append(("q2", {"t": "search", "q": show_of(tv_rows[n])[0]}))
        elif kind == 3:
            mix.append(("cat", {"t": "search", "cat": rng.choice(("5040", "2000", "5045,2045"))}))
        elif kind == 4:
            mix.append(
                (
                    "tvsearch",
                    {
                        "t": "tvsearch",
                        "q": show_of(tv_rows[n])[0],
                        "season": str(show_of(tv_rows[n])[1]),
                        "ep": str(show_of(tv_rows[n])[2]),
                        "cat": "5000",
                    },
                )
            )
        else:
            mix.append(
                (
                    "page",
                    {"t": "search", "cat": "5000", "offset": str(rng.randrange(100, 2000, 100))},
                )
            )
    for _, params in mix:
        params["apikey"] = key
    return mix


def extra_requests(
    rng: random.Random, key: str, count: int, releases: int
) -> list[tuple[str, dict[str, str]]]:
    """Partial words (found by the pg_trgm retry) and typos (found nowhere)."""
    mix: list[tuple[str, dict[str, str]]] = []
    tv_rows = [i for i in (rng.randrange(1, releases + 1) for _ in range(count * 3)) if i % 10 < 6]
    for n in range(count):
        words, season, _ = show_of(tv_rows[n])
        first, second = words.split()
        if n % 2 == 0:
            q = f"{first[: max(3, len(first) - 2)]} {second} s{season:02d}e"
            mix.append(("partial", {"t": "search", "q": q}))
        else:
            cut = rng.randrange(1, len(first))
            mix.append(("typo", {"t": "search", "q": f"{first[:cut]}{first[cut + 1 :]}x {second}"}))
    for _, params in mix:
        params["apikey"] = key
    return mix


def search_of(params: dict[str, str]) -> Search:
    """The Search the API makes of a request (coordinator/http/newznab.py, no maxage)."""
    request = parse_request(params)
    return Search(
        words=request.words,
        categories=default_categories(request),
        season=request.season,
        episode=request.episode,
        limit=request.limit,
        offset=request.offset,
    )


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else max(values)


Answer = tuple[float, int, bytes, int]  # seconds, status, the body's start, its items


def ask(base_url: str, caps: int, asked: list[dict[str, str]]) -> tuple[list[float], list[Answer]]:
    """The client: `caps` times t=caps, then each of `asked`, one after the other, on one
    kept-alive connection; the seconds of each caps, and of each request with its answer."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        caps_seconds: list[float] = []
        for _ in range(caps):
            started = time.perf_counter()
            client.get("/api", params={"t": "caps"}).raise_for_status()
            caps_seconds.append(time.perf_counter() - started)
        answers: list[Answer] = []
        for params in asked:
            started = time.perf_counter()
            response = client.get("/api", params=params)
            seconds = time.perf_counter() - started
            body = response.content
            answers.append((seconds, response.status_code, body[:300], body.count(b"<item>")))
    return caps_seconds, answers


async def ask_inline(
    base_url: str, caps: int, asked: list[dict[str, str]]
) -> tuple[list[float], list[Answer]]:
    """`ask` in the server's own trio loop (the bench's client before --client process)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        caps_seconds: list[float] = []
        for _ in range(caps):
            started = time.perf_counter()
            (await client.get("/api", params={"t": "caps"})).raise_for_status()
            caps_seconds.append(time.perf_counter() - started)
        answers: list[Answer] = []
        for params in asked:
            started = time.perf_counter()
            response = await client.get("/api", params=params)
            seconds = time.perf_counter() - started
            body = response.content
            answers.append((seconds, response.status_code, body[:300], body.count(b"<item>")))
    return caps_seconds, answers


async def measure(
    stores: Stores,
    settings: Settings,
    key: str,
    count: int,
    releases: int,
    seed: int,
    inline: bool,
) -> dict[str, object]:
    rng = random.Random(seed)
    mix = requests(rng, key, count, releases)
    extra = extra_requests(rng, key, count // 3, releases)
    asked = [params for _, params in mix + extra]
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        base_url = f"http://{host}:{port}"
        if inline:
            caps, answers = await ask_inline(base_url, 50, asked)
        else:
            # A client of its own, as Sonarr is: its work does not hold the server's GIL.
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=1, mp_context=context) as client:
                future = client.submit(ask, base_url, 50, asked)
                caps, answers = await trio.to_thread.run_sync(future.result)
        nursery.cancel_scope.cancel()
    by_kind: dict[str, list[float]] = {}
    every: list[float] = []
    totals: dict[str, int] = {}
    for (kind, params), (seconds, status, head, items) in zip(mix + extra, answers, strict=True):
        if status != 200 or b"<error" in head[:200]:
            text = head.decode(errors="replace")
            raise SystemExit(f"bench-search: {params} answered {status}: {text}")
        by_kind.setdefault(kind, []).append(seconds)
        if kind not in EXTRA_KINDS:
            every.append(seconds)
        totals[kind] = totals.get(kind, 0) + items
    database = await trio.to_thread.run_sync(db_seconds, stores, mix)
    return {
        "p95_ms": round(p95(every) * 1000, 1),
        "p50_ms": round(statistics.median(every) * 1000, 1),
        "caps_p95_ms": round(p95(caps) * 1000, 1),
        "db_p95_ms": round(p95(database) * 1000, 1),
        "db_p95_ms_by_kind": {
            k: round(
                p95([s for (kind, _), s in zip(mix, database, strict=True) if kind == k]) * 1000, 1
            )
            for k in sorted({kind for kind, _ in mix})
        },
        "p95_ms_by_kind": {
            k: round(p95(v) * 1000, 1) for k, v in sorted(by_kind.items()) if k not in EXTRA_KINDS
        },
        "extra_p95_ms_by_kind": {
            k: round(p95(v) * 1000, 1) for k, v in sorted(by_kind.items()) if k in EXTRA_KINDS
        },
        "items_by_kind": totals,
    }


def db_seconds(stores: Stores, mix: list[tuple[str, dict[str, str]]]) -> list[float]:
    """The same searches asked of CatalogTable.search directly: seconds each."""
    seconds: list[float] = []
    for _, params in mix:
        search = search_of(params)
        started = time.perf_counter()
        stores.catalog.search(search)
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--releases", type=int, default=1_000_000, help="catalog rows (default 1M)")
    parser.add_argument(
        "--requests", type=int, default=600, help="requests in the mix (default 600)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--shared-buffers",
        default=buffer_cache(),
        help="the cluster's shared_buffers (default: a quarter of the memory, here %(default)s)",
    )
    parser.add_argument(
        "--client",
        choices=("process", "inline"),
        default="process",
        help="the HTTP client in a process of its own (default), or in the server's trio loop",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="a folder for the cluster, kept: a catalog of --releases rows there is reused",
    )
    args = parser.parse_args()
    settings = Settings(home=Path("/nonexistent"), listen="127.0.0.1:0")
    with (
        database(args.keep, args.shared_buffers) as url,
        open_pool(url, settings, max_size=8) as pool,
    ):
        stores = Stores.from_pool(pool)
        started = time.perf_counter()
        if filled(url, args.releases):
            print(f"bench-search: reusing {args.releases:,} rows", file=sys.stderr, flush=True)
        else:
            print(f"bench-search: filling {args.releases:,} rows", file=sys.stderr, flush=True)
            with psycopg.connect(url, autocommit=True) as conn:
                # The tables made again, not emptied: a fill stopped halfway left the
                # catalog without the indexes it had dropped.
                conn.execute("DROP SCHEMA public CASCADE")
                conn.execute("CREATE SCHEMA public")
                migrate(conn)
            fill(url, args.releases)
        settle(url)
        fill_seconds = time.perf_counter() - started
        key = stores.users.create(f"bench-{time.time_ns()}")
        print(f"bench-search: {args.requests} requests through /api", file=sys.stderr, flush=True)
        figures = trio.run(
            measure,
            stores,
            settings,
            key,
            args.requests,
            args.releases,
            args.seed,
            args.client == "inline",
        )
    print(json.dumps({"bench": "search", "releases": args.releases, "requests": args.requests,
                      "client": args.client, "shared_buffers": args.shared_buffers,
                      "fill_seconds": round(fill_seconds, 1), **figures}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
