"""The coordinator's catalog builder: the searchable catalog follows the stored batches.

A stored batch marks its release keys pending (in its own transaction) and
pokes the builder's `CatalogDue`: directly when the node API of this process
stored it, and in every coordinator process through the notification the
store sends once the batch committed (`NOTIFY_PENDING`, heard by landings.py's
listener); so a
release is in the catalog a moment after the batch that made it whole, not at
the next tick, and so are the edges' build asks held in any process. The builder then merges again what is
pending (catalog_build.py's `CatalogBuild.pending`, in a worker
thread), at most one build started per `settle_seconds` so that a burst of
batches is one build: a poke that finds the builder waiting is followed by
the settle, one that came while it built (the burst settled meanwhile) and
pending keys left over (shards taken by another coordinator process, or
more than one build takes) by the next build as soon as the settle since
the last one began has passed. Every `every_seconds` it builds anyway: keys whose
notification was not heard (the listener reconnecting), and releases that went quiet (shown after
`quiet_seconds` without a chunk, complete or not). The database down or
restarting is a warning and a try at the next tick, never the coordinator's
end. Any other error of a build is a defect: logged with its traceback, shown
as this builder's health ("catalog", "builds failing", with the error) in
`uidx status`, the page and /metrics, and tried again after a growing pause
(`FAILED_BUILD_RETRY`); the keys stay pending, nothing is lost, and the node
API and newznab go on (a builder that ended the process instead would take
the coordinator down at every restart on the same stored keys). A build that did something is logged and recorded in the database
(store/builds.py), where `uidx status`, the page and /metrics read it.

Beside the builder, `sweep_catalog_forever` marks every stored release key
pending again once per `catalog_sweep_hours`, a slice every `every_seconds`
(core/sweep.py says why and at what pace), and pokes the builder when it did.
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
from usenet_indexer.core.health import Observed, State
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.store.builds import BuildRecord, BuildStore
from usenet_indexer.store.heartbeat import this_process
from usenet_indexer.store.sweep import SweepStore

logger = logging.getLogger(__name__)

# A burst of batches (the edges of one range, one after another) is merged
# in one build: the builder waits this long after a poke before it builds.
SETTLE_SECONDS = 0.5
# Which machine a recorded build ran on (with its pid: which process).
_HOST = socket.gethostname()
# The pauses after builds that failed with a defect: 1, 2, 4 ... up to 5 minutes.
FAILED_BUILD_RETRY = RetryPolicy(base_seconds=1.0, cap_seconds=300.0)


@attrs.define(eq=False)
class BuilderHealth:
    """How this process's builds go, for its heartbeat (`observed`): the failures in a
    row of builds that raised something other than the database's absence, and the
    last one's error."""

    failures: int = 0
    error: str = ""

    def failed(self, error: Exception) -> float:
        """Count a failed build; the pause before the next try."""
        self.failures += 1
        self.error = f"{type(error).__name__}: {error}"
        return FAILED_BUILD_RETRY.delay(self.failures)

    def succeeded(self) -> None:
        self.failures = 0
        self.error = ""

    def observed(self) -> tuple[Observed, ...]:
        """The builder's health row while its builds fail (none when they do not)."""
        if not self.failures:
            return ()
        builds = "build" if self.failures == 1 else f"{self.failures} builds in a row"
        return (
            Observed(
                "catalog",
                this_process(),
                State.BUILDS_FAILING,
                f"{builds} failed, the last with {self.error}",
            ),
        )


@attrs.define(eq=False)
class CatalogDue:
    """Batches were stored: the builder should look (trio side; `due` from any task).

    The builder takes each poke (`take`, `wait`). The edges' builds calls held
    while nothing is pending (coordinator/http/node.py, `builds?wait=N`) each
    see every poke instead: they `mark()` and `wait_since(mark)`, as lease calls
    wait for ranges planned (landings.py).
    """

    _event: trio.Event = attrs.field(factory=trio.Event)
    _pokes: int = 0
    _poked: trio.Event = attrs.field(factory=trio.Event)
    _stopping: bool = False

    def due(self) -> None:
        self._event.set()
        self._pokes += 1
        self._poked.set()
        self._poked = trio.Event()

    def mark(self) -> int:
        """The pokes so far: pass it to `wait_since`."""
        return self._pokes

    async def wait_since(self, mark: int) -> None:
        """Return once poked after `mark` (at once if it was), or once stopped."""
        if self._pokes == mark and not self._stopping:
            await self._poked.wait()

    def stop(self) -> None:
        """The server stops: wake every `wait_since`, for good (the builder is cancelled
        by its own scope)."""
        self._stopping = True
        self._poked.set()

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
    health: BuilderHealth | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Build what batches touched whenever poked or every `every_seconds`; until cancelled.

    `build`: one build in a worker thread (`build_once`; a test's stand-in).
    `health`: where failed builds are counted for the heartbeat.
    """
    task_status.started()
    builds = BuildStore(catalog.pool)
    build_one = build_once if build is None else build
    health = BuilderHealth() if health is None else health
    while True:
        started = trio.current_time()
        again = False
        # A poke taken so far is this build's: its keys were pending before it looks
        # (this process's node API pokes directly and hears the same batch's
        # notification a moment later: one build, not two).
        due.take()
        try:
            built = await trio.to_thread.run_sync(build_one, catalog, builds, quiet_seconds)
            # Keys left to other shards, or a shard another builder held: build
            # again soon, without waiting for a poke.
            again = built.more
            health.succeeded()
        except psycopg.OperationalError as error:
            logger.warning("catalog build put off: database unavailable: %s", error)
        except Exception as error:
            # A defect (see the module's docstring): its keys stay pending.
            pause = health.failed(error)
            logger.exception(
                "catalog build failed (%d in a row); the next try in %.0f s, its keys stay pending",
                health.failures,
                pause,
            )
            await trio.sleep(pause)
            continue
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
            " wall_s=%.3f (%d releases, %d pruned, %d look-ups, %d keys built again beyond"
            " its dates; merged again: %s)",
            *(built.pending, built.keys, built.written, built.shown, built.cpu_s, wall_s),
            *(built.releases, built.pruned, built.rounds, built.beyond, built.again),
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


async def sweep_catalog_forever(
    sweeps: SweepStore,
    due: CatalogDue,
    *,
    hours: float,
    every_seconds: float,
    behind_seconds: float = 0.0,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Every `every_seconds`, mark the stored release keys due pending again (one
    cycle over them all per `hours`) and poke the builder; until cancelled. While the
    oldest pending key has waited longer than `behind_seconds` (0: never), a tick
    marks nothing: the batches' builds first.

    The database down is a warning and a try at the next tick; any other error a
    defect, logged with its traceback and tried again after a pause that grows with
    the failures in a row (FAILED_BUILD_RETRY, at least a tick; the sweep's row is
    unchanged: nothing is skipped).
    """
    task_status.started()
    failures = 0
    giving_way = False
    while True:
        pause = every_seconds
        try:
            swept = await trio.to_thread.run_sync(sweeps.tick, hours, behind_seconds, every_seconds)
        except psycopg.OperationalError as error:
            logger.warning("catalog sweep put off: database unavailable: %s", error)
        except Exception:
            failures += 1
            pause = max(every_seconds, FAILED_BUILD_RETRY.delay(failures))
            logger.exception(
                "catalog sweep failed (%d in a row); the next try in %.0f s", failures, pause
            )
        else:
            failures = 0
            if swept.gave_way != giving_way:
                giving_way = swept.gave_way
                logger.info(
                    "catalog sweep gives way: the build is behind the batches"
                    if giving_way
                    else "catalog sweep goes on: the build caught up with the batches"
                )
            if swept.keys:
                logger.info(
                    "catalog sweep: %d release keys marked to be built again%s",
                    swept.keys,
                    "; a cycle over the catalog ended" if swept.ended else "",
                )
                due.due()
        await trio.sleep(pause)
