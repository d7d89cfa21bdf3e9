"""The worker's side of the supervisor: notice that the supervisor is gone.

The supervisor hands every worker the read end of a pipe (`--parent-fd FD`)
whose write end only the supervisor holds, and never writes to. When the
supervisor dies, however it dies, the kernel closes the write end and the
read end turns readable (end of file). A worker runs `watch_parent` beside
its work and stops the way it stops on SIGTERM: the current range is given
back. Nothing is ever read from the pipe: every worker shares it, and
readable can only mean end of file.

Usage, in a worker's trio code::

    async with trio.open_nursery() as nursery:
        if args.parent_fd is not None:
            nursery.start_soon(watch_parent, args.parent_fd, stop.set)
        await worker.run(settings, options=options, stop=stop)
        nursery.cancel_scope.cancel()
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

logger = logging.getLogger(__name__)


async def watch_parent(
    fd: int,
    on_parent_death: Callable[[], object],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Wait until the supervisor is gone, then call `on_parent_death` once.

    Args:
        fd: the read end of the supervisor's pipe (`--parent-fd`).
        on_parent_death: what stops the worker (for example `stop.set`, the
            same as SIGTERM); called once, then this task returns.
        task_status: started as soon as the fd is watched.
    """
    task_status.started()
    await trio.lowlevel.wait_readable(fd)
    logger.warning("the supervisor is gone (parent pipe fd %d closed): stopping", fd)
    on_parent_death()
