"""The scheduler's trio side: the clock, the database read it asks for, the observer.

The pure `Scheduler` decides; `SharedWork` gives it the time and performs
what it asks for. At most one read of the work list is in flight: the
connection whose `take` got `Refresh` reads it in a worker thread, holding
no lock; any connection asking meanwhile gets `Pending` and waits for that
read's event, then takes from the list it brought (one read serves them
all).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import psycopg
import trio

from usenet_indexer.prefetch.events import Observer, ignore
from usenet_indexer.prefetch.options import PrefetchOptions
from usenet_indexer.prefetch.scheduler import NO_WORK, Refresh, Scheduler, WorkList
from usenet_indexer.spool.plan import ChunkJob, claimable, work_list
from usenet_indexer.store.spool import SpoolIndex

logger = logging.getLogger(__name__)

# Ranges looked at per refresh of the work list (each gives many chunks).
WANTED_RANGES = 32
# A prefetcher's claims on the chunks it lists last this long unless renewed
# (its housekeeping renews them every few seconds): a killed prefetcher's
# chunks go to the others after it.
CLAIM_SECONDS = 30.0
# Chunks listed (and claimed) per connection at a read of the work list: the
# rest stay for other prefetchers.
CLAIMS_PER_CONNECTION = 2


@attrs.define(eq=False)
class SharedWork:
    """The work list of all connections: the `Scheduler` with its reads and the clock."""

    spool: SpoolIndex
    options: PrefetchOptions
    servers: int
    observe: Observer = ignore
    # Several prefetchers share the list through claims (store/spool.py): this
    # one's name, and how many chunks it lists (and claims) at one read.
    claimant: str = ""
    claim_limit: int = 1 << 30
    # Whether any of its servers answers (takes logins and connections): while none
    # does, it claims no chunk, leaving them to the prefetchers whose servers do.
    answering: Callable[[], bool] = attrs.field(default=lambda: True)
    # Groups no server carries (411 from each), with why, and groups a server of its
    # selected: the health report's.
    uncarried: dict[str, str] = attrs.field(init=False, factory=dict)
    carried: set[str] = attrs.field(init=False, factory=set)
    _scheduler: Scheduler = attrs.field(init=False)
    _read_done: trio.Event = attrs.field(init=False, factory=trio.Event)
    _new_work: trio.Event = attrs.field(init=False, factory=trio.Event)
    _answered: bool = attrs.field(init=False, default=True)

    def __attrs_post_init__(self) -> None:
        self._scheduler = Scheduler(
            self.servers, self.options.poll_seconds, self.options.recheck_seconds
        )

    async def take(self, server: int) -> ChunkJob | None:
        """The next chunk for a connection of this server, or None when there is none now."""
        action = self._scheduler.take(server, trio.current_time())
        if isinstance(action, ChunkJob):
            return self._handed(action)
        if isinstance(action, Refresh):
            await self._refresh(action)
        else:
            await self._read_done.wait()  # another connection's read: Pending
        return self._handed(self._scheduler.take_listed(server, trio.current_time()))

    def take_now(self, server: int, fits: Callable[[ChunkJob], bool]) -> ChunkJob | None:
        """The next chunk for this server if it `fits`, without a database look; else None."""
        return self._handed(self._scheduler.take_now(server, trio.current_time(), fits))

    def announce(self) -> None:
        """Ranges were planned: read the work list at the next take, and wake idle connections."""
        self._scheduler.invalidate()
        self._new_work.set()
        self._new_work = trio.Event()

    def header_idle(self) -> bool:
        """Whether no chunk is listed or in flight (the prober's opportunistic slot asks)."""
        return self._scheduler.idle()

    async def idle(self, seconds: float) -> None:
        """A connection with nothing to do: until `announce`, or `seconds` passed."""
        with trio.move_on_after(seconds):
            await self._new_work.wait()

    def done(self, job: ChunkJob) -> None:
        """The connection is through with the job (landed or not: a failed one is listed again)."""
        self._scheduler.done(job)

    def wait_for_articles(self, job: ChunkJob) -> None:
        """The server has none of the job's articles yet: ask about its group again later."""
        self._scheduler.wait_for_articles(job, trio.current_time())

    def carries(self, group: str) -> None:
        """A server of this prefetcher selected the group (GROUP answered 211)."""
        self.carried.add(group)

    def not_on_server(self, group: str, server: int) -> None:
        """The server does not carry the group: the next server of the settings gets it."""
        if not self._scheduler.not_on_server(group, server, trio.current_time()):
            if group not in self.uncarried:
                logger.error("no NNTP server carries %s: its ranges cannot be fetched", group)
            self.uncarried[group] = "411 from every server of this prefetcher"
            self.carried.discard(group)

    def _handed(self, job: ChunkJob | None) -> ChunkJob | None:
        if job is not None:
            self.observe(job)
        return job

    async def _refresh(self, refresh: Refresh) -> None:
        for group in self._scheduler.recheck(trio.current_time()):
            if self.uncarried.pop(group, None) is not None:
                logger.info("asking the NNTP servers again whether they carry %s", group)
        skip = frozenset(self.uncarried)
        answering = self.answering()
        if answering != self._answered:
            self._answered = answering
            if not answering:
                logger.warning(
                    "no NNTP server of this prefetcher takes its login or a connection:"
                    " claiming no chunk until one does"
                )
        # A new event before the first checkpoint: whoever gets Pending from
        # now on waits for this read. Set whatever happens (a cancelled read
        # too), or they would wait for ever.
        read = self._read_done = trio.Event()
        work = NO_WORK
        try:
            work = await trio.to_thread.run_sync(self._read_work, refresh.busy, skip, answering)
        except psycopg.Error as error:
            logger.warning("cannot read the work list from the database: %s", error)
        finally:
            self._scheduler.refreshed(work)
            read.set()

    def _read_work(
        self, busy: tuple[ChunkJob, ...], skip: frozenset[str], answering: bool
    ) -> WorkList:
        # In a worker thread: four queries, the pure plan over them, then the claim
        # of the first of its chunks (another prefetcher's claims count as covered).
        wanted = self.spool.wanted(WANTED_RANGES)
        covered = self.spool.covered(wanted, self.claimant)
        jobs = work_list(wanted, covered, self.options.chunk_articles, busy=busy)
        budget = self.options.budget_bytes
        over = bool(budget) and self.spool.size()[1] >= budget
        # Over budget only leased ranges are fetched; a group none of this
        # prefetcher's servers carries is left to the others.
        jobs = [j for j in jobs if (j.leased or not over) and j.group not in skip]
        # No server answers: none carries a group; the claims it holds go (all but
        # those in flight), and its connections try their servers until one answers.
        limit = self.claim_limit if answering else 0

        def choose(others: dict[int, list[tuple[int, int]]]) -> list[ChunkJob]:
            return claimable(jobs, others, limit)

        chosen = self.spool.claim(self.claimant, jobs, busy, CLAIM_SECONDS, choose)
        return WorkList(tuple(chosen), over)
