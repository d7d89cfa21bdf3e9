"""Several machines on one (issue 27): the whole pipeline over real processes, with faults.

Theory of operation
-------------------
What an operator who outgrew one machine runs, every part a real process:
a private INN2 (`testing.newsd_private`) with a generated group, `uidx
coordinator --processes 2`, two `uidx prefetch` processes with two NNTP
connections each (sharing the work through their claims in PostgreSQL),
and edges that have only COORDINATOR_URL and NODE_TOKEN (plus the short
waits of a test). The spool is a folder the coordinator and the prefetchers
share, or a bucket of a private SeaweedFS (`testing.objectstore`), whose
chunks the edges read through the presigned links of the coordinator's
stream.

`several_machines` runs it until every range is done and no catalog key is
pending, then stops everything with SIGTERM. With `faults`, three are
injected one after another while the work goes on:

- `prefetcher_kill9`: one prefetcher killed (SIGKILL) once both landed
  chunks, while it holds claims and the other runs beside it; it is not
  started again: its claims lapse (prefetch/work.py's CLAIM_SECONDS) and the
  other fetches its chunks;
- `store_kill9` (an S3 spool): the object store killed (SIGKILL) while the
  prefetcher left holds claims (it is fetching and uploading those chunks),
  and started again once it said a chunk was not stored;
- `coordinator_worker_kill9`: one process of the coordinator killed
  (SIGKILL) once a batch more is stored, while ranges are left and the other
  process serves; its supervisor starts another.

What it found (`SeveralOutcome`): the segments stored, by message-id, against
those the edges must store (chaos_setup's `expected_message_ids` over INN2's
own overview lines, cut as the prefetcher cuts its chunks: from each range's
first article, `chunk_articles` each, which is also where the edges cut their
batches), the batches' chains, the catalog rows a user sees, and the logs'
ERROR lines and 5xx answers.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import psycopg
import trio

from chaos import check as checks
from chaos.prepare import GROUP, Part, expected_message_ids
from chaos.procs import Child, kill_pid, log, wait_answering, worker_pids
from usenet_indexer.config import Settings
from usenet_indexer.nntp.client import connect
from usenet_indexer.store.catalog import CatalogStore
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.migrate import migrate
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.testing.logcheck import LogProblems, file_problems
from usenet_indexer.testing.newsd import CannotInstall
from usenet_indexer.testing.newsd_private import PrivateNewsServer, private_news_server
from usenet_indexer.testing.objectstore import ObjectStore, WeedMissing
from usenet_indexer.testing.processes import child_env, free_port

STORE_KILL = "store_kill9"
PREFETCHER_KILL = "prefetcher_kill9"
COORDINATOR_KILL = "coordinator_worker_kill9"
SEVERAL_KINDS = (STORE_KILL, PREFETCHER_KILL, COORDINATOR_KILL)
# How often the database is looked at while waiting.
POLL_SECONDS = 0.1
# The longest wait for the moment of a fault (chunks landing, a warning, a batch).
FAULT_WAIT_SECONDS = 60.0
# How long the supervisor has to start a coordinator process in place of one killed.
WORKER_BACK_SECONDS = 30.0
# Articles per OVER command of the bare read the expectation is made from.
TRUTH_SLICE = 5_000
# What a prefetcher logs when a chunk could not be stored (landing.py, NotLanded): once
# per run of chunks that did not land, at the first.
_NOT_STORED = ": not indexed: "
# The catalog's columns a user sees (newznab: title, size, files, category, poster, ...).
CATALOG_ROWS = """
    SELECT name, category, size, files, poster, groups, posted, completion, season, episode
    FROM catalog ORDER BY name, posted, size, poster
"""
_PROGRESS = """
    SELECT (SELECT count(*) FROM ranges WHERE state <> 'done'),
           (SELECT count(*) FROM catalog_pending),
           (SELECT count(*) FROM batches),
           (SELECT coalesce(sum(last_article - first_article + 1), 0) FROM spool_chunks)
"""


@attrs.frozen(kw_only=True)
class SeveralConfig:
    """The size of a run on several machines.

    Attributes:
        articles: articles posted to INN2 (numbered 1 .. articles).
        range_articles: articles per planned range.
        chunk_articles: UIDX_PREFETCH_CHUNK_ARTICLES, and the edges' UIDX_BATCH_ARTICLES
            (a batch per chunk: see `chaos.prepare.expected_message_ids`).
        slice_articles: UIDX_PREFETCH_SLICE_ARTICLES.
        prefetchers: `uidx prefetch` processes.
        connections: NNTP connections of each.
        coordinator_processes: `uidx coordinator --processes`.
        edges: `uidx edge` processes, one node each.
        ttl_seconds: the lease TTL (coordinator and edges).
        deadline_seconds: the longest the run may take to finish its ranges and catalog.
        seed: the articles' seed.
    """

    articles: int
    range_articles: int
    chunk_articles: int
    slice_articles: int
    prefetchers: int = 2
    connections: int = 2
    coordinator_processes: int = 2
    edges: int = 2
    ttl_seconds: float = 5.0
    deadline_seconds: float = 300.0
    seed: int = 1


@attrs.frozen
class SeveralOutcome:
    """What a run on several machines did and left.

    Attributes:
        done: every range done and no catalog key pending before the deadline.
        faults: the faults injected, by kind.
        catalog: the stored segments against the expected ones, by message-id.
        chains: the batches of each range (holes, overlaps, epochs going back).
        rows: the catalog's rows as a user sees them (CATALOG_ROWS).
        coordinator_log: the coordinator's ERROR lines and 5xx answers.
        other_errors: ERROR lines in the prefetchers' and edges' logs.
        landed: chunks each prefetcher logged as landed, in start order.
        not_stored: runs of chunks the prefetchers said they could not store (the store
            down; a prefetcher says it at the first chunk of a run).
        live_claims: claims on chunks not lapsed after everything stopped, of the
            prefetchers stopped with SIGTERM (one gives its claims back as it stops);
            the killed one's are not counted: they lapse CLAIM_SECONDS after its
            death, which may be after the run (the chunks it had landed are claimed
            until it would have listed again).
        stray_objects: objects under the spool's prefix that no chunk row names
            (an S3 spool), after the sweep.
        seconds: the run's length, from the coordinator's start to the last stop.
    """

    done: bool
    faults: dict[str, int]
    catalog: checks.CatalogCheck
    chains: checks.ChainCheck
    rows: tuple[tuple[object, ...], ...]
    coordinator_log: LogProblems
    other_errors: tuple[str, ...]
    landed: tuple[int, ...]
    not_stored: int
    live_claims: int
    stray_objects: int
    seconds: float


@attrs.frozen
class Posted:
    """The group on INN2: its server's URL and its overview lines as INN2 returns them."""

    url: str
    lines: tuple[bytes, ...]


NoNewsServer = CannotInstall
# Only a missing weed leaves the run out: a store that did not start fails it.
NoObjectStore = WeedMissing


@contextlib.contextmanager
def posted_group(articles: int, seed: int, prefix: str = "uidx-newsd-several-") -> Iterator[Posted]:
    """A private INN2 carrying GROUP with `articles` generated articles, and their lines.

    Raises:
        NoNewsServer: INN2 is not here and cannot be installed.
    """
    with private_news_server([GROUP], prefix=prefix, start_timeout_seconds=600) as server:
        server.post(GROUP, articles, seed=seed, timeout_seconds=600)
        yield Posted(server.url(), tuple(trio.run(over_all, server)))


async def over_all(server: PrivateNewsServer) -> list[bytes]:
    """Every overview line of GROUP, read bare from INN2."""
    async with connect(server.url()) as client:
        _, low, high = await client.group(GROUP)
        slices = [(n, min(n + TRUTH_SLICE - 1, high)) for n in range(low, high + 1, TRUTH_SLICE)]
        return [line async for _, lines in client.over_pipelined(slices) for line in lines]


def expected_ids(lines: Sequence[bytes], config: SeveralConfig, folder: Path) -> frozenset[str]:
    """The message-ids the edges must store: the lines of each range indexed the way an
    edge does, with the chunk (and batch) cuts of the prefetcher."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for first in range(1, config.articles + 1, config.range_articles):
        last = min(first + config.range_articles - 1, config.articles)
        kept = [line for line in lines if first <= checks.article_number(line) <= last]
        path = folder / f"range-{first}.txt"
        path.write_bytes(b"".join(line + b"\n" for line in kept))
        parts.append(Part(path, first, last, len(kept)))
    return frozenset(expected_message_ids(parts, config.chunk_articles))


@attrs.frozen
class _Prepared:
    group_id: int
    tokens: tuple[str, ...]


def _prepare(url: str, home: Path, config: SeveralConfig) -> _Prepared:
    """The database: migrated, the group, its ranges planned, a node per edge."""
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    with open_pool(url, Settings(home=home), max_size=1) as pool:
        group_id = GroupStore(pool).add(GROUP)
        RangeStore(pool).plan(group_id, 1, config.articles, config.range_articles)
        nodes = NodeStore(pool)
        tokens = tuple(nodes.create(f"edge-{i}") for i in range(config.edges))
    return _Prepared(group_id, tokens)


@attrs.define(eq=False)
class Machines:
    """The processes of one run, and what the faults need of them."""

    folder: Path
    url: str
    news_url: str
    store: ObjectStore | None
    prefix: str
    config: SeveralConfig
    prepared: _Prepared
    port: int = attrs.field(factory=free_port)
    coordinator: Child = attrs.field(init=False)
    prefetchers: list[Child] = attrs.field(init=False)
    edges: list[Child] = attrs.field(init=False)
    faults: Counter[str] = attrs.field(factory=Counter)
    # The prefetchers killed (SIGKILL): their claims lapse rather than go back.
    killed: list[Child] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        logs = self.folder / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        config = self.config
        spool = (
            self.store.environment(self.prefix)
            if self.store is not None
            else {"UIDX_SPOOL": str(self.folder / "spool")}
        )
        shared = {"DATABASE_URL": self.url, **spool}
        argv: tuple[str, ...] = ("coordinator",)
        if config.coordinator_processes > 1:
            argv = (*argv, "--processes", str(config.coordinator_processes))
        self.coordinator = Child(
            "coordinator",
            argv,
            child_env(
                **shared,
                UIDX_HOME=str(self.folder / "coordinator"),
                UIDX_LISTEN=f"127.0.0.1:{self.port}",
                UIDX_LEASE_TTL_SECONDS=str(config.ttl_seconds),
            ),
            logs / "coordinator.log",
            supervisor=config.coordinator_processes > 1,
        )
        self.prefetchers = [
            Child(
                f"prefetcher {i}",
                ("prefetch",),
                child_env(
                    **shared,
                    UIDX_HOME=str(self.folder / f"prefetcher-{i}"),
                    UIDX_NNTP=f"{self.news_url}?connections={config.connections}",
                    UIDX_PREFETCH_CHUNK_ARTICLES=str(config.chunk_articles),
                    UIDX_PREFETCH_SLICE_ARTICLES=str(config.slice_articles),
                    UIDX_PREFETCH_POLL_SECONDS="0.2",
                    # Probes read bodies and rename releases when their outcomes come:
                    # not what this run compares (tests/test_probes_e2e.py does).
                    UIDX_PROBE_SHARE="0",
                ),
                logs / f"prefetcher-{i}.log",
            )
            for i in range(config.prefetchers)
        ]
        # An edge needs COORDINATOR_URL and NODE_TOKEN; the rest are a test's short waits.
        self.edges = [
            Child(
                f"edge {i}",
                ("edge", "--processes", "1"),
                child_env(
                    COORDINATOR_URL=f"http://127.0.0.1:{self.port}",
                    NODE_TOKEN=token,
                    UIDX_HOME=str(self.folder / f"edge-{i}"),
                    UIDX_LEASE_TTL_SECONDS=str(config.ttl_seconds),
                    UIDX_IDLE_SECONDS="0.2",
                    UIDX_BATCH_ARTICLES=str(config.chunk_articles),
                ),
                logs / f"edge-{i}.log",
            )
            for i, token in enumerate(self.prepared.tokens)
        ]

    async def start(self) -> None:
        await self.coordinator.start()
        await wait_answering(self.coordinator, f"http://127.0.0.1:{self.port}/")
        for child in [*self.prefetchers, *self.edges]:
            await child.start()

    async def stop(self) -> None:
        """SIGTERM to all: the edges and prefetchers at once, then the coordinator."""
        async with trio.open_nursery() as nursery:
            for child in [*self.edges, *self.prefetchers]:
                nursery.start_soon(child.stop)
        await self.coordinator.stop()

    async def kill_all(self) -> None:
        with trio.CancelScope(shield=True):
            for child in [*self.edges, *self.prefetchers, self.coordinator]:
                if child.running:
                    await child.kill()

    async def progress(self) -> tuple[int, int, int, int]:
        """(ranges not done, catalog keys pending, batches stored, articles in the spool)."""
        return await trio.to_thread.run_sync(_progress, self.url)

    async def until(
        self, condition: Callable[[tuple[int, int, int, int]], bool], within: float
    ) -> bool:
        with trio.move_on_after(within):
            while True:
                if condition(await self.progress()):
                    return True
                await trio.sleep(POLL_SECONDS)
        return False

    async def claims_of(self, child: Child) -> int:
        assert child.process is not None
        return await trio.to_thread.run_sync(_live_claims, self.url, f":{child.process.pid}")

    # --- the faults ----------------------------------------------------------------

    async def inject(self) -> None:
        """The three faults, one after another, while the work goes on.

        The prefetcher first: the two fetch a group of this size in seconds. Its claims
        then keep its chunks from the other for CLAIM_SECONDS, so there is work left
        for the other two faults to hit.
        """
        await self.kill_prefetcher()
        if self.store is not None:
            await self.kill_store()
        await self.kill_coordinator_worker()

    async def kill_prefetcher(self) -> None:
        victim, beside = self.prefetchers[0], self.prefetchers[1:]
        # Once both landed a chunk (they are past their start), while it holds claims:
        # killed as soon as a look saw them (looked at again, they were gone once, a
        # chunk landed between the two looks, and the run stopped).
        claims = 0

        async def ready() -> bool:
            nonlocal claims
            landed = all(_landed(child.log) for child in self.prefetchers)
            claims = await self.claims_of(victim) if landed else 0
            return bool(claims)

        if not (await _poll(ready, FAULT_WAIT_SECONDS) and victim.running):
            raise SystemExit("chaos: the prefetcher to kill held no claim (or had exited)")
        await victim.kill()
        self.killed.append(victim)
        self.faults[PREFETCHER_KILL] += 1
        running = sum(child.running for child in beside)
        log(
            f"several: kill -9 of a prefetcher holding {claims} claims, "
            f"{len(beside)} running beside it ({running} still running)"
        )

    async def kill_store(self) -> None:
        """SIGKILL of the object store while the prefetchers left hold claims (they are
        fetching and uploading those chunks); started again once one said a chunk was
        not stored."""
        store = self.store
        assert store is not None

        async def fetching() -> bool:
            running = [child for child in self.prefetchers if child.running]
            return any([await self.claims_of(child) for child in running])

        await _poll(fetching, FAULT_WAIT_SECONDS)
        await trio.to_thread.run_sync(store.kill)
        self.faults[STORE_KILL] += 1
        before = self._not_stored()
        log("several: the object store killed (SIGKILL) while chunks are uploaded")

        async def refused() -> bool:
            return self._not_stored() > before

        await _poll(refused, FAULT_WAIT_SECONDS)
        await trio.to_thread.run_sync(store.start)
        log(f"several: the object store started again ({self._not_stored()} chunks not stored)")

    def _not_stored(self) -> int:
        return sum(_count(child.log, _NOT_STORED) for child in self.prefetchers)

    async def kill_coordinator_worker(self) -> None:
        process = self.coordinator.process
        assert process is not None
        workers = await worker_pids(process.pid)
        if not workers:
            raise SystemExit("chaos: the coordinator has no worker process to kill")
        # While edges work: a batch stored, ranges left.
        before = (await self.progress())[2]
        await self.until(lambda p: p[2] > before and p[0] > 0, FAULT_WAIT_SECONDS)
        victim = min(workers)
        kill_pid(victim)
        killed_at = trio.current_time()
        self.faults[COORDINATOR_KILL] += 1
        log(f"several: kill -9 of coordinator process {victim}; the other serves")
        with trio.move_on_after(WORKER_BACK_SECONDS):
            while True:
                now = await worker_pids(process.pid)
                if victim not in now and len(now) >= len(workers):
                    back = trio.current_time() - killed_at
                    log(f"several: the supervisor started another after {back:.1f} s")
                    return
                await trio.sleep(POLL_SECONDS)
        raise SystemExit("chaos: the coordinator's supervisor did not replace its process")


async def _poll(condition: Callable[[], Awaitable[bool]], within: float) -> bool:
    """Look at a condition every POLL_SECONDS / 4 until it holds; False after `within` s."""
    with trio.move_on_after(within):
        while True:
            if await condition():
                return True
            await trio.sleep(POLL_SECONDS / 4)
    return False


def _progress(url: str) -> tuple[int, int, int, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute(_PROGRESS).fetchone()
    assert row is not None
    return (int(str(row[0])), int(str(row[1])), int(str(row[2])), int(str(row[3])))


def _live_claims(url: str, suffix: str) -> int:
    """Claims not lapsed of the claimants whose names end in `suffix` (":pid")."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM spool_claims WHERE until > now() AND claimant LIKE %s",
            (f"%{suffix}",),
        ).fetchone()
    return 0 if row is None else int(str(row[0]))


def _count(path: Path, needle: str) -> int:
    if not path.exists():
        return 0
    return path.read_text(errors="replace").count(needle)


@contextlib.asynccontextmanager
async def _running(machines: Machines) -> AsyncIterator[Machines]:
    try:
        await machines.start()
        yield machines
    except BaseException:
        await machines.kill_all()
        raise


async def several_machines(
    folder: Path,
    url: str,
    posted: Posted,
    config: SeveralConfig,
    *,
    store: ObjectStore | None = None,
    prefix: str = "spool",
    faults: bool = False,
) -> SeveralOutcome:
    """One run (see the module docstring) on the database `url` (created, empty or
    migrated) over the posted group; the spool in `store` under `prefix`, or a folder.
    """
    began = time.perf_counter()
    prepared = await trio.to_thread.run_sync(_prepare, url, folder / "prepare", config)
    machines = Machines(folder, url, posted.url, store, prefix, config, prepared)
    done = False
    async with _running(machines):
        async with trio.open_nursery() as nursery:
            if faults:
                nursery.start_soon(machines.inject)
            done = await machines.until(lambda p: p[0] == 0 and p[1] == 0, config.deadline_seconds)
            if not done:
                nursery.cancel_scope.cancel()
        await machines.stop()
    seconds = time.perf_counter() - began
    expected = await trio.to_thread.run_sync(expected_ids, posted.lines, config, folder / "parts")
    return await trio.to_thread.run_sync(_conclude, machines, expected, done, seconds)


def _conclude(
    machines: Machines, expected: frozenset[str], done: bool, seconds: float
) -> SeveralOutcome:
    url = machines.url
    with open_pool(url, Settings(home=machines.folder / "prepare"), max_size=2) as pool:
        stored = list(checks.chunk_message_ids(CatalogStore(pool).chunks()))
        with pool.connection() as conn:
            batches = [
                checks.BatchRow(*(int(str(v)) for v in row))
                for row in conn.execute(
                    "SELECT range_id, batch_first, batch_next, epoch, node_id FROM batches"
                ).fetchall()
            ]
            ranges = {
                int(str(r[0])): (int(str(r[1])), int(str(r[2])))
                for r in conn.execute("SELECT id, first_article, last_article FROM ranges")
            }
            rows = tuple(tuple(row) for row in conn.execute(CATALOG_ROWS).fetchall())
            paths = {str(r[0]) for r in conn.execute("SELECT path FROM spool_chunks") if r[0]}
    stray = 0
    if machines.store is not None:
        prefix = f"{machines.prefix}/"
        stray = sum(
            1 for key in machines.store.keys(prefix) if key.removeprefix(prefix) not in paths
        )
    others = [child.log for child in [*machines.prefetchers, *machines.edges]]
    return SeveralOutcome(
        done=done,
        faults=dict(machines.faults),
        catalog=checks.check_catalog(expected, stored),
        chains=checks.check_chains(batches, ranges),
        rows=rows,
        coordinator_log=file_problems(machines.coordinator.log),
        other_errors=file_problems(*others).errors,
        landed=tuple(_landed(child.log) for child in machines.prefetchers),
        not_stored=machines._not_stored(),
        live_claims=sum(
            _live_claims(url, f":{child.process.pid}")
            for child in machines.prefetchers
            if child.process is not None and child not in machines.killed
        ),
        stray_objects=stray,
        seconds=seconds,
    )


def _landed(path: Path) -> int:
    """Chunks a prefetcher's log says landed (" FIRST-LAST: N lines, ")."""
    if not path.exists():
        return 0
    return len(re.findall(r" \d+-\d+: \d+ lines, ", path.read_text(errors="replace")))


def describe(outcome: SeveralOutcome) -> str:
    """One line of figures for the chaos log."""
    found = outcome.catalog
    return (
        f"done {outcome.done}; segments expected {found.expected:,}, stored {found.stored:,}, "
        f"lost {found.lost}, doubled {found.doubled}; chain gaps {outcome.chains.gaps}; "
        f"catalog rows {len(outcome.rows):,}; chunks landed by prefetcher {list(outcome.landed)}"
        f", runs not stored {outcome.not_stored}; coordinator log: "
        f"{len(outcome.coordinator_log.errors)} ERROR, "
        f"{len(outcome.coordinator_log.answered_5xx)} 5xx; ERROR elsewhere "
        f"{len(outcome.other_errors)}; live claims left {outcome.live_claims}; stray objects "
        f"{outcome.stray_objects}; {outcome.seconds:.1f} s"
    )


def failures(outcome: SeveralOutcome, *, faults: bool, s3: bool) -> list[str]:
    """What makes a run on several machines fail (empty: it passed)."""
    bad = []
    if not outcome.done:
        bad.append("several: not every range done (or catalog keys left pending)")
    found = outcome.catalog
    for name, value in (
        ("lost", found.lost),
        ("doubled", found.doubled),
        ("chain gaps", outcome.chains.gaps),
        ("ranges incomplete", outcome.chains.incomplete),
        ("stale rows", outcome.chains.stale_rows),
        ("coordinator ERROR lines", len(outcome.coordinator_log.errors)),
        ("coordinator 5xx answers", len(outcome.coordinator_log.answered_5xx)),
        ("live claims left", outcome.live_claims),
        ("stray objects", outcome.stray_objects),
    ):
        if value:
            bad.append(f"several: {name} = {value}")
    if faults:
        wanted = SEVERAL_KINDS if s3 else SEVERAL_KINDS[1:]
        missing = [kind for kind in wanted if outcome.faults.get(kind, 0) < 1]
        if missing:
            bad.append(f"several: faults never injected: {', '.join(missing)}")
    return bad


def figures(outcome: SeveralOutcome | None) -> Mapping[str, object]:
    """The run's figures for the chaos report (None: it did not run)."""
    if outcome is None:
        return {"several_done": None}
    return {
        "several_done": outcome.done,
        "several_expected": outcome.catalog.expected,
        "several_stored": outcome.catalog.stored,
        "several_lost": outcome.catalog.lost,
        "several_doubled": outcome.catalog.doubled,
        "several_chain_gaps": outcome.chains.gaps,
        "several_catalog_rows": len(outcome.rows),
        "several_landed_by_prefetcher": list(outcome.landed),
        "several_not_stored": outcome.not_stored,
        "several_coordinator_log_errors": len(outcome.coordinator_log.errors),
        "several_coordinator_log_5xx": len(outcome.coordinator_log.answered_5xx),
        "several_coordinator_log_sample": outcome.coordinator_log.describe(5),
        "several_other_log_errors": len(outcome.other_errors),
        "several_other_log_sample": list(outcome.other_errors[:5]),
        "several_live_claims": outcome.live_claims,
        "several_stray_objects": outcome.stray_objects,
        "several_seconds": round(outcome.seconds, 1),
    }
