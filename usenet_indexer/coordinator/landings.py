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
(one query), whichever group it was. The streams' polling stays as the net
beneath (StreamTiming.poll_seconds): when the listening connection is lost
(PostgreSQL restarted), streams poll until it is back; it reconnects by
itself, with a growing pause, and logs both.
"""

from __future__ import annotations

import logging

import attrs
import psycopg
import trio

from usenet_indexer.store.spool import LISTEN_LANDED

logger = logging.getLogger(__name__)

# The longest blocking wait of one worker-thread hop: how late a stop is.
WAIT_SECONDS = 0.5
# Pauses between attempts to listen again after the connection was lost.
RECONNECT_FIRST_SECONDS = 0.5
RECONNECT_MAX_SECONDS = 15.0
CONNECT_TIMEOUT_SECONDS = 10


@attrs.define(eq=False)
class Landings:
    """A count of spool chunks landed, that tasks can wait on (trio side).

    Also counts the listening sessions begun (`sessions`): a landing is only
    heard while one is open.
    """

    _count: int = 0
    _event: trio.Event = attrs.field(factory=trio.Event)
    _sessions: int = 0
    _session_event: trio.Event = attrs.field(factory=trio.Event)

    @property
    def sessions(self) -> int:
        """Listening sessions begun so far."""
        return self._sessions

    def listening(self) -> None:
        """A listening session has begun."""
        self._sessions += 1
        self._session_event.set()
        self._session_event = trio.Event()

    async def wait_listening(self, sessions: int) -> None:
        """Return once more than `sessions` listening sessions have begun."""
        while self._sessions <= sessions:
            await self._session_event.wait()

    def mark(self) -> int:
        """The count now: pass it to `wait_since`."""
        return self._count

    def landed(self, chunks: int = 1) -> None:
        """Count landings and wake every waiting task."""
        if chunks <= 0:
            return
        self._count += chunks
        self._event.set()
        self._event = trio.Event()

    async def wait_since(self, mark: int) -> None:
        """Return once a chunk has landed after `mark` was taken (at once if one has)."""
        if self._count == mark:
            await self._event.wait()


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
        task_status: started once listening, or once the first try failed
            (then the streams poll while this keeps trying; see the module
            docstring).
    """
    pause = RECONNECT_FIRST_SECONDS
    lost = ready = False
    while True:
        try:
            conn = await trio.to_thread.run_sync(_listening, conninfo)
        except psycopg.OperationalError as error:
            if not lost:
                logger.warning("cannot listen for spool chunks (streams poll): %s", error)
                lost = True
            if not ready:
                task_status.started()
                ready = True
            await trio.sleep(pause)
            pause = min(pause * 2, RECONNECT_MAX_SECONDS)
            continue
        if lost:
            logger.info("listening for spool chunks again")
        lost, pause = False, RECONNECT_FIRST_SECONDS
        landings.listening()
        if not ready:
            task_status.started()
            ready = True
        try:
            while True:
                landings.landed(await trio.to_thread.run_sync(_received, conn))
        except psycopg.OperationalError as error:
            logger.warning("lost the connection that listens for spool chunks: %s", error)
            lost = True
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(CONNECT_TIMEOUT_SECONDS):
                await trio.to_thread.run_sync(conn.close)


def _listening(conninfo: str) -> psycopg.Connection[tuple[object, ...]]:
    conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    try:
        conn.execute(LISTEN_LANDED)
    except BaseException:
        conn.close()
        raise
    return conn


def _received(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """Notifications received within WAIT_SECONDS (blocking, in a worker thread)."""
    return sum(1 for _ in conn.notifies(timeout=WAIT_SECONDS))
