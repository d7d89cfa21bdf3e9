"""A real-time deadline for tests on trio's autojump clock that wait on database threads.

While a worker thread runs, every task is blocked, so the mock clock jumps to
the next deadline: a `trio.fail_after` of the test would pass at once. This
deadline is kept by a thread on the real clock instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import trio


class GaveUp(AssertionError):
    """A block under `given_up_after` did not end within its real-time deadline."""


@contextmanager
def given_up_after(seconds: float) -> Iterator[None]:
    """The block cancelled after `seconds` of real time, unless it ended first; then
    GaveUp is raised (the test fails: a cancelled block must never pass silently)."""
    token = trio.lowlevel.current_trio_token()
    with trio.CancelScope() as scope:
        watchdog = threading.Timer(
            seconds, lambda: trio.from_thread.run_sync(scope.cancel, trio_token=token)
        )
        watchdog.start()
        try:
            yield
        finally:
            watchdog.cancel()
    if scope.cancelled_caught:
        raise GaveUp(f"the block did not end within {seconds} s of real time")
