"""A worker's stop as a cancellation: what the lease loop, a range and the build loop
wait on beside their work; and the give-back a stop cuts short."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


async def cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    """Cancel `scope` once `event` is set (a task started beside the work it cuts short)."""
    await event.wait()
    scope.cancel()


async def shielded_within(
    work: Callable[[], Awaitable[None]], stop: trio.Event, seconds: float, stopping_seconds: float
) -> bool:
    """Run `work` shielded, for at most `seconds`, or `stopping_seconds` from the stop.

    A range given back after a failure may retry for a while; once the worker is
    told to stop (before or during the give-back) it waits no more than
    `stopping_seconds` for a coordinator that does not answer: the lease expires
    by itself there, and a stopping edge is gone within seconds.

    Args:
        work: the cleanup (a release); its errors come out (in a group).
        stop: the worker's stop.
        seconds: the limit while the worker is not stopping.
        stopping_seconds: the limit once it is, from the stop.

    Returns:
        True when `work` returned, False when the limit cut it short.
    """
    with trio.CancelScope(shield=True) as scope:
        scope.deadline = trio.current_time() + (stopping_seconds if stop.is_set() else seconds)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_shorten_when_set, stop, scope, stopping_seconds)
            await work()
            nursery.cancel_scope.cancel()
    return not scope.cancelled_caught


async def _shorten_when_set(event: trio.Event, scope: trio.CancelScope, seconds: float) -> None:
    await event.wait()
    scope.deadline = min(scope.deadline, trio.current_time() + seconds)
