"""Which chunk each connection fetches next: the prefetcher's work list, pure.

Theory of operation
-------------------
One `Scheduler` serves every connection of every server. It holds the work
list (`plan.work_list` over the ranges that still miss spool chunks: leased
ranges first, then plan order), the chunks in flight (handed out, not done:
never handed out twice, and counted as covered when the list is read
again), which server each group is fetched from (the first of the settings,
the next one after a 411), and the groups held back until the server may
have their next articles.

It does no I/O and reads no clock: every decision that depends on the time
takes `now`, and one that needs the database says so. `take` answers with
a chunk, or with `Refresh` when the list is older than `poll_seconds` or
has nothing for the asking server: the caller reads the list (in a thread,
holding no lock), hands it to `refreshed`, and takes from it with
`take_listed`. While that read is in flight, `take` answers `Pending` (wait
for the read, then `take_listed`) and `take_now` answers None: at most one
read is in flight, and no decision is made on a list that is being
replaced. The model is httpcore's connection pool: a state machine whose
methods change state and return what the adapter is to do.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from usenet_indexer.spool.plan import ChunkJob

# Before the first refresh, and for a group never held back.
NEVER = float("-inf")
# A group moved to the next server by a 411 (or to none: not carried) is asked of
# the servers of the settings again after this long: a 411 is not for ever (a group
# created after it was planned, a provider's backend that answered 411 once).
RECHECK_SECONDS = 300.0


@attrs.frozen
class Refresh:
    """Read the work list, then call `Scheduler.refreshed` and `Scheduler.take_listed`.

    `busy` are the chunks in flight as the read begins: their articles count
    as covered (`plan.work_list(..., busy=)`), so a chunk that lands during
    the read is not listed again.
    """

    busy: tuple[ChunkJob, ...]


@attrs.frozen
class Pending:
    """Another connection is reading the work list: wait for it, then `take_listed`."""


PENDING = Pending()


@attrs.frozen
class WorkList:
    """What a read of the work list found."""

    jobs: tuple[ChunkJob, ...] = ()
    over_budget: bool = False  # the spool is over spool_budget_bytes: leased ranges only


# A read that failed: nothing to do until the list is due again.
NO_WORK = WorkList()


@attrs.define(eq=False)
class Scheduler:
    """The work list shared by all connections: which chunk each takes next.

    Args:
        servers: how many NNTP servers the settings name (a group goes to
            the first that carries it).
        poll_seconds: how long a list is good for, and how long a group the
            server has no new articles of is held back.
    """

    servers: int
    poll_seconds: float
    recheck_seconds: float = RECHECK_SECONDS
    _queue: list[ChunkJob] = attrs.field(factory=list)
    _refreshed_at: float = NEVER
    _refreshing: bool = False
    _in_flight: dict[tuple[int, int], ChunkJob] = attrs.field(factory=dict)
    _home: dict[str, int] = attrs.field(factory=dict)
    _moved_at: dict[str, float] = attrs.field(factory=dict)  # the last 411 of a group
    _not_before: dict[int, float] = attrs.field(factory=dict)

    def take(self, server: int, now: float) -> ChunkJob | Refresh | Pending:
        """The next chunk for a connection of `server`, else the read to do (or wait for)."""
        if self._refreshing:
            return PENDING
        job = None if self._stale(now) else self._pop(server, now)
        if job is not None:
            return self._hand_out(job)
        self._refreshing = True
        self._refreshed_at = now  # the list is as of the read's start
        return Refresh(tuple(self._in_flight.values()))

    def refreshed(self, work: WorkList) -> None:
        """The read `take` asked for is done (`NO_WORK` when it failed)."""
        self._refreshing = False
        jobs = [job for job in work.jobs if job.leased] if work.over_budget else work.jobs
        self._queue = [job for job in jobs if self._home.get(job.group, 0) < self.servers]

    def take_listed(self, server: int, now: float) -> ChunkJob | None:
        """After a read: the next chunk for `server` from the list as it is, or None."""
        job = self._pop(server, now)
        return None if job is None else self._hand_out(job)

    def take_now(
        self, server: int, now: float, fits: Callable[[ChunkJob], bool]
    ) -> ChunkJob | None:
        """The next chunk for this server if it `fits`, from the list as it is; else None.

        No database look: None as well when the list is due for a refresh
        or being read.
        """
        if self._stale(now) or self._refreshing:
            return None
        position = self._find(server, now)
        if position is None or not fits(self._queue[position]):
            return None
        return self._hand_out(self._queue.pop(position))

    def idle(self) -> bool:
        """No chunk listed, none in flight."""
        return not self._queue and not self._in_flight

    def invalidate(self) -> None:
        """New work was planned: the list is stale, and no group waits for its articles."""
        self._refreshed_at = NEVER
        self._not_before.clear()

    def done(self, job: ChunkJob) -> None:
        """The connection is through with the job (landed or not: a failed one is listed again)."""
        self._in_flight.pop(job.key, None)

    def wait_for_articles(self, job: ChunkJob, now: float) -> None:
        """The server has none of the job's articles yet: ask about its group again later."""
        self._not_before[job.group_id] = now + self.poll_seconds
        self._queue = [j for j in self._queue if j.group_id != job.group_id]

    def not_on_server(self, group: str, server: int, now: float) -> bool:
        """The server does not carry the group: the next server of the settings gets it,
        until `recheck_seconds` after the last such answer (see `recheck`).

        Returns:
            False when no server is left to try (the group's ranges cannot be fetched).
        """
        self._home[group] = server + 1
        self._moved_at[group] = now
        return server + 1 < self.servers

    def recheck(self, now: float) -> list[str]:
        """The groups a 411 moved more than `recheck_seconds` ago: from now on they go
        to the first server of the settings again (listed at the next read)."""
        due = [g for g, at in self._moved_at.items() if now - at >= self.recheck_seconds]
        for group in due:
            del self._moved_at[group], self._home[group]
        return due

    def _stale(self, now: float) -> bool:
        return now - self._refreshed_at >= self.poll_seconds

    def _hand_out(self, job: ChunkJob) -> ChunkJob:
        self._in_flight[job.key] = job
        return job

    def _pop(self, server: int, now: float) -> ChunkJob | None:
        position = self._find(server, now)
        return None if position is None else self._queue.pop(position)

    def _find(self, server: int, now: float) -> int | None:
        for position, job in enumerate(self._queue):
            if self._home.get(job.group, 0) != server:
                continue
            if self._not_before.get(job.group_id, NEVER) > now or job.key in self._in_flight:
                continue
            return position
        return None
