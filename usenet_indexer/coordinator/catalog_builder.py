"""The coordinator's catalog builder: the searchable catalog follows the stored batches.

A stored batch marks its release keys pending (in its own transaction) and,
when the node API of this process stored it, pokes the builder's
`CatalogDue`; so a release is in the catalog a moment after the batch that
made it whole, not at the next tick. The builder then merges again what is
pending (catalog_build.py's `CatalogBuild.pending`, in a worker
thread), at most one build started per `settle_seconds` so that a burst of
batches is one build: a poke that finds the builder waiting is followed by
the settle, one that came while it built (the burst settled meanwhile) and
pending keys left over (shards taken by another coordinator process, or
more than one build takes) by the next build as soon as the settle since
the last one began has passed. Every `every_seconds` it builds anyway: batches stored through
another coordinator process, and releases that went quiet (shown after
`quiet_seconds` without a chunk, complete or not). The database down or
restarting is a warning and a try at the next tick, never the coordinator's
end. A build that did something is logged and recorded in the database
(store/builds.py), where `uidx status`, the page and /metrics read it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable

import attrs
import psycopg
import trio

from usenet_indexer.coordinator.catalog_build import Built, CatalogBuild
from usenet_indexer.store.builds import BuildRecord, BuildStore

logger = logging.getLogger(__name__)

# A burst of batches (the edges of one range, one after another) is merged
# in one build: the builder waits this long after a poke before it builds.
SETTLE_SECONDS = 0.5
# Which machine a recorded build ran on (with its pid: which process).
_HOST = socket.gethostname()


@attrs.define(eq=False)
class CatalogDue:
    """Batches were stored: the builder should look (trio side; `due` from any task)."""

    _event: trio.Event = attrs.field(factory=trio.Event)

    def due(self) -> None:
        self._event.set()

    def take(self) -> bool:
        """Whether it was poked since the last wait or take; the poke is then taken."""
        poked = self._event.is_set()
        if poked:
            self._event = trio.Event()
        return poked

    async def wait(self, seconds: float) -> None:
        """Until poked, or `seconds` passed; the poke is then taken."""
        with trio.move_on_after(seconds):
            await self._event.wait()
        self._event = trio.Event()


async def build_catalog_forever(
    catalog: CatalogBuild,
    due: CatalogDue,
    *,
    every_seconds: float,
    quiet_seconds: float,
    settle_seconds: float = SETTLE_SECONDS,
    build: Callable[[CatalogBuild, BuildStore, float], Built] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Build what batches touched whenever poked or every `every_seconds`; until cancelled.

    `build`: one build in a worker thread (`build_once`; a test's stand-in).
    """
    task_status.started()
    builds = BuildStore(catalog.pool)
    build_one = build_once if build is None else build
    while True:
        started = trio.current_time()
        again = False
        try:
            built = await trio.to_thread.run_sync(build_one, catalog, builds, quiet_seconds)
            # Keys left to other shards, or a shard another builder held: build
            # again soon, without waiting for a poke.
            again = built.more
        except psycopg.OperationalError as error:
            logger.warning("catalog build put off: database unavailable: %s", error)
        if again or due.take():
            # The burst settled while it built: the next build once a settle has
            # passed since this one began (never a busy loop on a held shard).
            await trio.sleep_until(started + settle_seconds)
            continue
        await due.wait(every_seconds)
        await trio.sleep(settle_seconds)


def build_once(catalog: CatalogBuild, builds: BuildStore, quiet_seconds: float) -> Built:
    """One pending build, logged and recorded when it did something (sync: a worker
    thread's one hop).

    Args:
        catalog: the build.
        builds: where the build's row goes (`uidx status`, the page, /metrics read it).
        quiet_seconds: a release incomplete and quiet this long is shown.

    Returns:
        What the build did.

    Raises:
        psycopg.OperationalError: the database is unavailable.
    """
    started = time.monotonic()
    built = catalog.pending(quiet_seconds)
    wall_s = time.monotonic() - started
    if built.keys or built.shown:
        # One line per build, key=value: scripts/bench-scale reads it.
        logger.info(
            "catalog built: pending=%d merged=%d written=%d shown=%d cpu_s=%.3f"
            " wall_s=%.3f (%d releases, %d pruned, %d look-ups)",
            *(built.pending, built.keys, built.written, built.shown, built.cpu_s, wall_s),
            *(built.releases, built.pruned, built.rounds),
        )
        builds.record(
            BuildRecord(
                *(built.pending, built.keys, built.written, built.shown, built.cpu_s),
                wall_s=wall_s,
                host=_HOST,
                pid=os.getpid(),
            )
        )
    return built
