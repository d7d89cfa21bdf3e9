"""The prefetcher under faults for scripts/chaos (issue 6, items 7 and 8).

Theory of operation
-------------------
A private INN2 (`nntp/newsd.py`) gets a group of generated articles; a
database of its own gets the group and its ranges, planned from 1 to the
last article. `uidx prefetch` fills the spool from INN2 through the NNTP
fault proxy (chaos_nntp), and is killed with SIGKILL several times: after
k chunks landed (its log says so, one line per chunk), or the moment a
temporary chunk file of it appears (it is mid-chunk then). The temporary
files it leaves name the chunks it was fetching; each is started again at
once. The last one runs until the spool covers every range, and is stopped
with SIGTERM; the NNTP faults (connections refused with 502, a first GROUP
answered 480, OVER replies cut or stalled, by a seeded schedule) hit it,
not a prefetcher killed a moment later: it must get over each of them.

Then, from the database and the files (chaos_check's pure functions):

- the index covers every planned range exactly once (no hole, no overlap);
- every indexed file exists and inflates to as many lines as its row says,
  each inside the chunk's [first, last], equal to what INN2 returns for
  OVER over the same articles (read bare, not through the proxy);
- no file the index does not name, and no temporary file left.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import attrs
import psycopg
import trio

from chaos import check as checks
from chaos.nntp_faults import NNTP_KINDS, FaultSchedule, serve_nntp_proxy
from chaos.prepare import create_database
from chaos.procs import Child, log
from usenet_indexer.config import Settings
from usenet_indexer.nntp.client import connect
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.migrate import migrate
from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.testing.newsd import CannotInstall, NewsdError
from usenet_indexer.testing.newsd_private import PrivateNewsServer, private_news_server
from usenet_indexer.testing.processes import child_env

GROUP = "alt.binaries.chaos.prefetch"
DATABASE = "prefetch"
KILL = "prefetch_kill9"
PREFETCH_KINDS = (KILL, *NNTP_KINDS)
# The prefetcher's log: ready, one line per landed chunk, temporary files removed.
_READY = "prefetching from"
_LANDED = re.compile(r" (\d+)-(\d+): \d+ lines, ")
_REMOVED = re.compile(r"removed (\d+) temporary files")
# A temporary chunk file: .FIRST-LAST.zlib.PID.tmp (spool_files.ChunkWriter).
_TEMPORARY = re.compile(r"^\.(\d+)-(\d+)\.zlib\.(\d+)\.tmp$")
# How often the log, the spool folder and the index are looked at.
POLL_SECONDS = 0.01
INDEX_POLL_SECONDS = 0.2
# The longest wait for the moment of a kill (a start, chunks landing).
KILL_WAIT_SECONDS = 30.0
# Articles per OVER command of the bare read that the spool is compared with.
TRUTH_SLICE = 5_000


@attrs.frozen(kw_only=True)
class PrefetchConfig:
    """The prefetch part's size and faults.

    Attributes:
        articles: articles posted to INN2 (numbered 1 .. articles).
        range_articles: articles per planned range.
        chunk_articles: UIDX_PREFETCH_CHUNK_ARTICLES.
        slice_articles: UIDX_PREFETCH_SLICE_ARTICLES.
        connections: the prefetcher's NNTP connections.
        kills: kill -9 of the prefetcher (each started again).
        nntp_faults: NNTP faults wanted, by kind (chaos_nntp.NNTP_KINDS).
        spacing: events per NNTP fault in the window its moments are drawn from.
        timeout_seconds: UIDX_NNTP_TIMEOUT_SECONDS (a stall lasts longer).
        deadline_seconds: the longest the last prefetcher may take to fill the spool.
    """

    articles: int
    range_articles: int
    chunk_articles: int
    slice_articles: int
    connections: int
    kills: int
    nntp_faults: Mapping[str, int]
    spacing: int
    timeout_seconds: float = 2.0
    deadline_seconds: float = 120.0


@attrs.frozen
class SpoolFiles:
    """The spool after the last stop, against the index and the server."""

    coverage: checks.SpoolCoverage
    chunks: int
    gaps: int
    lines: int
    bad_lines: int
    missing_files: int
    orphan_files: int
    temporary_left: int
    indexed: frozenset[tuple[int, int]]


@attrs.frozen
class PrefetchOutcome:
    """What the prefetch part did and found."""

    faults: dict[str, int]
    spool: SpoolFiles
    complete: bool
    exit_status: int | None
    in_flight_at_kills: int
    refetched: int
    temporary_removed: int
    warnings: tuple[str, ...]
    seconds: float

    @property
    def errors_logged(self) -> int:
        """The warnings the prefetcher logged (each an error it got over)."""
        return len(self.warnings)


@attrs.define(eq=False)
class LogTail:
    """The lines a log file gets from now on."""

    path: Path
    _offset: int = 0
    _partial: str = ""

    def __attrs_post_init__(self) -> None:
        self._offset = self.path.stat().st_size if self.path.exists() else 0

    def lines(self) -> list[str]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as stream:
            stream.seek(self._offset)
            data = stream.read()
        self._offset += len(data)
        *whole, self._partial = (self._partial + data.decode("utf-8", "replace")).split("\n")
        return whole

    async def until(self, condition: Callable[[str], bool], within: float) -> bool:
        """Wait for a new line that meets the condition; False after `within` s."""
        with trio.move_on_after(within):
            while True:
                if any(condition(line) for line in self.lines()):
                    return True
                await trio.sleep(POLL_SECONDS)
        return False


def temporary_chunks(spool_dir: Path, pid: int | None = None) -> list[tuple[int, int]]:
    """(first, last) of the temporary chunk files in the spool (of one writer, if given)."""
    found = []
    for path in spool_dir.glob("*/.*.tmp"):
        match = _TEMPORARY.match(path.name)
        if match and (pid is None or int(match[3]) == pid):
            found.append((int(match[1]), int(match[2])))
    return found


# INN2 is not here and cannot be installed (newsd's exit status 2): the part cannot run.
NoNewsServer = CannotInstall


@contextlib.asynccontextmanager
async def _news_server() -> AsyncIterator[PrivateNewsServer]:
    """A private INN2 with GROUP; newsd blocks, so it starts and stops in a thread.

    Raises:
        NoNewsServer: INN2 is not available here.
        SystemExit: newsd failed otherwise (the chaos run cannot go on).
    """
    stack = contextlib.ExitStack()
    server = private_news_server([GROUP], prefix="uidx-newsd-chaos-", stop_timeout_seconds=30.0)
    try:
        try:
            yield await trio.to_thread.run_sync(stack.enter_context, server)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(stack.close)
    except CannotInstall:
        raise
    except NewsdError as error:
        raise SystemExit(f"chaos: {error}") from None


async def prefetch_part(
    folder: Path, cluster: Cluster, config: PrefetchConfig, seed: int
) -> PrefetchOutcome:
    """The prefetch part (see the module docstring), INN2 started and stopped around it.

    Args:
        folder: its work folder (made here).
        cluster: the cluster its database (`prefetch`) is made on.
        config: its size and faults.
        seed: the seed of its faults and its articles.
    """
    began = time.perf_counter()
    url = cluster.url(DATABASE)
    async with _news_server() as news:
        await trio.to_thread.run_sync(partial(news.post, GROUP, config.articles, seed=seed))
        upstream = (news.host, news.port)
        group_id, ranges = await trio.to_thread.run_sync(
            _prepare, cluster.url("postgres"), url, folder / "home", config
        )
        part = _Part(folder, url, group_id, config, random.Random(seed))
        faults, complete, status = await part.run(upstream, seed)
        server = await _server_lines(upstream, 1, config.articles)
        spool = await trio.to_thread.run_sync(
            inspect_spool, url, part.spool_dir, group_id, ranges, server
        )
    return PrefetchOutcome(
        faults=faults,
        spool=spool,
        complete=complete,
        exit_status=status,
        in_flight_at_kills=len(part.in_flight),
        refetched=sum(1 for chunk in part.in_flight if chunk in spool.indexed),
        temporary_removed=part.temporary_removed,
        warnings=part.warnings,
        seconds=time.perf_counter() - began,
    )


def _prepare(
    admin_url: str, url: str, home: Path, config: PrefetchConfig
) -> tuple[int, list[tuple[int, int]]]:
    """The database: migrated, the group, the ranges planned (in this process: no
    `uidx` start-up to pay while the chaos run needs the CPU)."""
    home.mkdir(parents=True, exist_ok=True)
    create_database(admin_url, DATABASE)
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    with open_pool(url, Settings(home=home), max_size=1) as pool:
        group_id = GroupStore(pool).add(GROUP)
        RangeStore(pool).plan(group_id, 1, config.articles, config.range_articles)
    with psycopg.connect(url) as conn:
        ranges = [
            (int(str(first)), int(str(last)))
            for first, last in conn.execute(
                "SELECT first_article, last_article FROM ranges WHERE group_id = %s",
                (group_id,),
            ).fetchall()
        ]
    return group_id, ranges


@attrs.define(eq=False)
class _Part:
    """The prefetcher's process, its kills and what they left."""

    folder: Path
    url: str
    group_id: int
    config: PrefetchConfig
    rng: random.Random
    in_flight: list[tuple[int, int]] = attrs.field(factory=list)
    temporary_removed: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def spool_dir(self) -> Path:
        return self.folder / "home" / "spool"

    def child(self, proxy_port: int) -> Child:
        config = self.config
        env = child_env(
            DATABASE_URL=self.url,
            UIDX_HOME=str(self.folder / "home"),
            UIDX_NNTP=f"nntp://127.0.0.1:{proxy_port}?connections={config.connections}",
            UIDX_PREFETCH_CHUNK_ARTICLES=str(config.chunk_articles),
            UIDX_PREFETCH_SLICE_ARTICLES=str(config.slice_articles),
            UIDX_PREFETCH_POLL_SECONDS="0.2",
            UIDX_NNTP_TIMEOUT_SECONDS=str(config.timeout_seconds),
        )
        return Child("prefetch", ("prefetch",), env, self.folder / "prefetch.log")

    async def run(
        self, upstream: tuple[str, int], seed: int
    ) -> tuple[dict[str, int], bool, int | None]:
        """Kills, then a last run to the end; (faults by kind, complete, its exit status)."""
        # The NNTP faults hit the prefetcher that runs to the end: one that
        # is killed a moment later would not show that it got over them.
        schedule = FaultSchedule.seeded(seed, self.config.nntp_faults, self.config.spacing)
        schedule.armed = False
        kills = 0
        async with trio.open_nursery() as nursery:
            port = await nursery.start(serve_nntp_proxy, upstream, schedule)
            child = self.child(port)
            try:
                for _ in range(self.config.kills):
                    await self._start_and_kill(child)
                    kills += 1
                tail = LogTail(child.log)
                schedule.armed = True
                await child.start()
                complete = await self._until_complete()
                # The run's faults are the ones before it completed: one
                # injected while the prefetcher stops (its last connections
                # closing) is not one it has to get over.
                schedule.armed = False
                status = await child.stop()
                self._count_removed(tail)
                self.warnings = tuple(line for line in tail.lines() if " WARNING " in line)
            finally:
                with trio.CancelScope(shield=True):
                    if child.running:
                        await child.kill()
            nursery.cancel_scope.cancel()
        faults = {KILL: kills, **{kind: schedule.injected[kind] for kind in NNTP_KINDS}}
        return faults, complete, status

    async def _start_and_kill(self, child: Child) -> None:
        tail = LogTail(child.log)
        await child.start()
        assert child.process is not None
        pid = child.process.pid
        if not await tail.until(lambda line: _READY in line, KILL_WAIT_SECONDS):
            raise SystemExit(f"chaos: the prefetcher did not start; see {child.log}")
        if self.rng.random() < 0.5:
            # The moment a chunk of it is being written.
            await _poll(lambda: bool(temporary_chunks(self.spool_dir, pid)), KILL_WAIT_SECONDS)
            how = "mid-chunk"
        else:
            landed = self.rng.randint(1, 3)
            seen = 0

            def counted(line: str) -> bool:
                nonlocal seen
                seen += _LANDED.search(line) is not None
                return seen >= landed

            await tail.until(counted, KILL_WAIT_SECONDS)
            await trio.sleep(self.rng.uniform(0.0, 0.05))
            how = f"after {landed} chunks landed"
        await child.kill()
        flying = temporary_chunks(self.spool_dir, pid)
        self.in_flight += flying
        self._count_removed(tail)
        log(f"prefetch: kill -9 {how}; {len(flying)} chunks in flight: {flying}")

    def _count_removed(self, tail: LogTail) -> None:
        text = tail.path.read_text(errors="replace") if tail.path.exists() else ""
        self.temporary_removed = sum(int(m[1]) for m in _REMOVED.finditer(text))

    async def _until_complete(self) -> bool:
        total = self.config.articles

        def complete() -> bool:
            return _covered(self.url, self.group_id) >= total

        async def in_thread() -> bool:
            return await trio.to_thread.run_sync(complete)

        with trio.move_on_after(self.config.deadline_seconds):
            while True:
                if await in_thread():
                    return True
                await trio.sleep(INDEX_POLL_SECONDS)
        return False


async def _poll(condition: Callable[[], bool], within: float) -> bool:
    """Look at a condition every POLL_SECONDS / 5 until it holds; False after `within` s."""
    with trio.move_on_after(within):
        while True:
            if condition():
                return True
            await trio.sleep(POLL_SECONDS / 5)
    return False


def _covered(url: str, group_id: int) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(last_article - first_article + 1), 0) FROM spool_chunks"
            " WHERE group_id = %s",
            (group_id,),
        ).fetchone()
    return int(str(row[0])) if row is not None else 0


async def _server_lines(upstream: tuple[str, int], first: int, last: int) -> dict[int, bytes]:
    """What INN2 returns for OVER first-last, read bare (no proxy): number -> line."""
    lines: dict[int, bytes] = {}
    slices = [(a, min(a + TRUTH_SLICE - 1, last)) for a in range(first, last + 1, TRUTH_SLICE)]
    async with connect(f"nntp://{upstream[0]}:{upstream[1]}") as client:
        await client.group(GROUP)
        async for _slice, piece in client.over_pipelined(slices):
            for line in piece:
                lines[checks.article_number(line)] = line
    return lines


def inspect_spool(
    url: str,
    spool_dir: Path,
    group_id: int,
    ranges: Sequence[tuple[int, int]],
    server: Mapping[int, bytes],
) -> SpoolFiles:
    """The spool's index and files checked against the ranges and the server's lines."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT first_article, last_article, path, lines FROM spool_chunks"
            " WHERE group_id = %s ORDER BY first_article",
            (group_id,),
        ).fetchall()
    bad = missing = lines = gaps = 0
    indexed: set[str] = set()
    for first, last, path, count in rows:
        got: list[bytes] | None = None
        if path is None:
            gaps += 1
        elif (spool_dir / str(path)).is_file():
            indexed.add(str(path))
            text = zlib.decompress((spool_dir / str(path)).read_bytes())
            got = text.split(b"\n")[:-1] if text.endswith(b"\n") else text.split(b"\n")
            lines += len(got)
        else:
            missing += 1
        bad += checks.check_chunk_lines(int(first), int(last), int(count), got, server)
    files = {str(p.relative_to(spool_dir)) for p in spool_dir.glob("*/*.zlib")}
    return SpoolFiles(
        coverage=checks.check_spool_coverage(ranges, [(int(r[0]), int(r[1])) for r in rows]),
        chunks=len(rows),
        gaps=gaps,
        lines=lines,
        bad_lines=bad,
        missing_files=missing,
        orphan_files=len(files - indexed),
        temporary_left=len(list(spool_dir.glob("*/.*.tmp"))),
        indexed=frozenset((int(r[0]), int(r[1])) for r in rows),
    )
