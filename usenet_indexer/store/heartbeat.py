"""A process's health reports, driven: every few seconds, and its rows taken away when
it stops cleanly (core/health.py says what they mean)."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence

import psycopg
import trio

from usenet_indexer.core.health import Observed
from usenet_indexer.store.health import HealthStore

logger = logging.getLogger(__name__)

# How often a coordinator says it is alive (core/health.SILENT_SECONDS: when it
# counts as silent).
HEARTBEAT_SECONDS = 15.0
# The rows taken away at a clean stop: shielded, and at most this long.
FORGET_SECONDS = 5.0


def this_process() -> str:
    """The reporter's name of this process: "host:pid"."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def report(
    store: HealthStore, reporter: str, heartbeat: str, observed: Sequence[Observed]
) -> bool:
    """One report, in a worker thread; False (logged) when the database did not take it."""
    try:
        await trio.to_thread.run_sync(store.report, reporter, heartbeat, observed)
    except psycopg.Error as error:
        logger.warning("health report: database unavailable: %s", error)
        return False
    return True


async def forget(store: HealthStore, reporter: str) -> None:
    """Take the reporter's rows away (shielded, time-limited: a clean stop)."""
    with trio.CancelScope(shield=True), trio.move_on_after(FORGET_SECONDS):
        try:
            await trio.to_thread.run_sync(store.forget, reporter, abandon_on_cancel=True)
        except psycopg.Error as error:
            logger.warning("health: cannot take this process's rows away: %s", error)


async def beat_forever(
    store: HealthStore,
    heartbeat: str,
    observe: Callable[[], Sequence[Observed]] = tuple,
    *,
    every_seconds: float = HEARTBEAT_SECONDS,
    reporter: str | None = None,
) -> None:
    """Report `observe()` under `heartbeat` every `every_seconds` until cancelled; then
    take this process's rows away."""
    name = reporter or this_process()
    try:
        while True:
            await report(store, name, heartbeat, observe())
            await trio.sleep(every_seconds)
    finally:
        await forget(store, name)
