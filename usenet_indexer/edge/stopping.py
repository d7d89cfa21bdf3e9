"""A worker's stop as a cancellation: what the lease loop, a range and the build loop
wait on beside their work."""

from __future__ import annotations

import trio


async def cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    """Cancel `scope` once `event` is set (a task started beside the work it cuts short)."""
    await event.wait()
    scope.cancel()
