"""Spool chunks landing: waking the streams that wait for them.

Theory of operation
-------------------
Whoever indexes a spool chunk (the prefetcher, `uidx spool import`) sends a
PostgreSQL notification in the same transaction (store/spool.py), delivered
when it commits. The coordinator holds one connection that LISTENs
(`listen_for_landings`, a thin adapter: a blocking wait of at most
`WAIT_SECONDS` per worker-thread hop) and counts each landing in
`Landings`, which every waiting stream awaits. So a stream sends a chunk as
soon as it lands, not at its next poll.

A stream takes a `mark()` before it looks in the spool index and waits with
`wait_since(mark)`: a chunk that lands between the look and the wait is not
missed. A notification says only "something landed": the stream looks again
(one query), whichever group it was. Ranges planned (the prefetcher's
follower, `uidx ranges plan`) are heard on the same connection
(`PLANNED_CHANNEL`) and wake lease calls that wait for work
(`wait_planned`), and catalog keys marked pending (a batch stored through
any coordinator process, a probe's outcome: `PENDING_CHANNEL`) poke the
builder and wake the edges' held build asks (`on_pending`). The streams'
polling stays as the net
beneath (StreamTiming.poll_seconds): when the listening connection is lost
(PostgreSQL restarted), streams poll until it is back; it reconnects by
itself, with a growing pause, and logs both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import psycopg
import trio

from usenet_indexer.store.catalog import PENDING_CHANNEL
from usenet_indexer.store.ranges import PLANNED_CHANNEL
from usenet_indexer.store.spool import LISTEN_LANDED

logger = logging.getLogger(__name__)

# The longest blocking wait of one worker-thread hop: how late a stop is.
WAIT_SECONDS = 0.5
# Pauses between attempts to listen again after the connection was lost.
RECONNECT_FIRST_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 15.0
# A server that accepts and then says nothing holds a start (and so a stop,
# which waits for the thread) at most this long.
CONNECT_TIMEOUT_SECONDS = 5
LISTEN_TIMEOUT_MS = 5000
# The listening session's application_name (pg_stat_activity shows it).
APPLICATION_NAME = "uidx coordinator listener"


@attrs.define(eq=False)
class Landings:
    """Spool chunks landed, by group, that streams can wait on (trio side).

    A stream waits for its own group (`mark(group)`, `wait_since`). A new
    listening session wakes every stream once: what landed while nobody
    listened was not heard. `sessions` counts the sessions begun.
    """

    _counts: dict[int, int] = attrs.field(factory=dict)
    _events: dict[int, trio.Event] = attrs.field(factory=dict)
    _sessions: int = 0
    _session_event: trio.Event = attrs.field(factory=trio.Event)
    _planned: int = 0
    _planned_event: trio.Event = attrs.field(factory=trio.Event)
    _stopping: bool = False
    # Called when keys were marked pending for the catalog (a batch stored through any
    # coordinator process, a probe's outcome): the server's CatalogDue.due, which pokes
    # the builder if this process runs one, and wakes the edges' held build asks.
    on_pending: list[Callable[[], None]] = attrs.field(factory=list)

    @property
    def sessions(self) -> int:
        """Listening sessions begun so far."""
        return self._sessions

    def listening(self) -> None:
        """A listening session has begun: wake every stream (it may have missed a landing)."""
        self._sessions += 1
        self._session_event.set()
        self._session_event = trio.Event()
        self.planned()  # what was planned while nobody listened was not heard either
        for group_id in list(self._events):
            self._wake(group_id)

    async def wait_listening(self, sessions: int) -> None:
        """Return once more than `sessions` listening sessions have begun."""
        while self._sessions <= sessions:
            await self._session_event.wait()

    def mark(self, group_id: int) -> tuple[int, int]:
        """Where the group stands now: pass it to `wait_since`."""
        return self._sessions, self._counts.get(group_id, 0)

    def landed(self, group_ids: list[int]) -> None:
        """Count a landing per entry and wake the streams of those groups."""
        for group_id in set(group_ids):
            self._wake(group_id)

    async def wait_since(self, group_id: int, mark: tuple[int, int]) -> None:
        """Return once a chunk of the group landed after `mark` (at once if one has),
        or a new listening session began."""
        if self.mark(group_id) != mark or self._stopping:
            return
        event = self._events.get(group_id)
        if event is None:
            event = self._events[group_id] = trio.Event()
        await event.wait()

    @property
    def stopping(self) -> bool:
        """The server stops: nothing waits for a landing or a plan any more."""
        return self._stopping

    def stop(self) -> None:
        """The server stops: wake every waiting stream and lease call, for good."""
        self._stopping = True
        self.planned()
        for group_id in list(self._events):
            self._wake(group_id)

    def planned_mark(self) -> int:
        """Where the plan stands now: pass it to `wait_planned`."""
        return self._planned

    def planned(self) -> None:
        """Ranges were planned (or given back): wake the lease calls that wait."""
        self._planned += 1
        self._planned_event.set()
        self._planned_event = trio.Event()

    async def wait_planned(self, mark: int) -> None:
        """Return once ranges were planned after `mark` (at once if they were), or a new
        listening session began (what was planned meanwhile was not heard)."""
        if self.planned_mark() == mark and not self._stopping:
            await self._planned_event.wait()

    def _wake(self, group_id: int) -> None:
        self._counts[group_id] = self._counts.get(group_id, 0) + 1
        event = self._events.pop(group_id, None)
        if event is not None:
            event.set()


async def listen_for_landings(
    conninfo: str,
    landings: Landings,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """LISTEN for landed chunks and count them in `landings`, until cancelled.

    Args:
        conninfo: the coordinator's database.
        landings: where to count.
        task_status: started at once: until it listens, the streams poll
            (see the module docstring).
    """
    task_status.started()
    pause = RECONNECT_FIRST_SECONDS
    lost = False
    while True:
        try:
            conn = await trio.to_thread.run_sync(_listening, conninfo)
        except psycopg.OperationalError as error:
            if not lost:
                logger.warning("cannot listen for spool chunks (streams poll): %s", error)
                lost = True
            await trio.sleep(pause)
            pause = min(pause * 2, RECONNECT_MAX_SECONDS)
            continue
        if lost:
            logger.info("listening for spool chunks again")
        lost, pause = False, RECONNECT_FIRST_SECONDS
        landings.listening()
        try:
            while True:
                landed, planned, pending = await trio.to_thread.run_sync(_received, conn)
                if landed:
                    landings.landed(landed)
                if planned:
                    landings.planned()
                if pending:
                    for poke in landings.on_pending:
                        poke()
        except psycopg.OperationalError as error:
            logger.warning("lost the connection that listens for spool chunks: %s", error)
            lost = True
        finally:
            # Closing a socket does not wait for the server.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(conn.close)


def _listening(conninfo: str) -> psycopg.Connection[tuple[object, ...]]:
    conn = psycopg.connect(
        conninfo,
        autocommit=True,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        options=f"-c statement_timeout={LISTEN_TIMEOUT_MS}",
        application_name=APPLICATION_NAME,
        keepalives=1,
        keepalives_idle=30,
        keepalives_interval=10,
        keepalives_count=3,
    )
    try:
        conn.execute(LISTEN_LANDED)
        conn.execute(f"LISTEN {PLANNED_CHANNEL}")
        conn.execute(f"LISTEN {PENDING_CHANNEL}")
    except BaseException:
        conn.close()
        raise
    return conn


def _received(
    conn: psycopg.Connection[tuple[object, ...]],
) -> tuple[list[int], bool, bool]:
    """(the groups of the chunks announced, whether ranges were planned, whether catalog
    keys were marked pending), from the first notification or within WAIT_SECONDS
    (blocking, in a worker thread)."""
    found: list[int] = []
    planned = pending = False
    for notify in conn.notifies(timeout=WAIT_SECONDS, stop_after=1):
        if notify.channel == PLANNED_CHANNEL:
            planned = True
            continue
        if notify.channel == PENDING_CHANNEL:
            pending = True
            continue
        try:
            found.append(int(notify.payload))
        except ValueError:
            logger.warning("a spool notification without a group id: %r", notify.payload)
    return found, planned, pending
