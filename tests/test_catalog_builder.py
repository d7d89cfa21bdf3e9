"""coordinator/catalog_builder.py: when the builder builds. A burst of batches is
one build (the settle after a poke that finds it waiting), and a poke that came
while it built starts the next build once the settle since the last one began has
passed, not a settle after it: the catalog's lag after the last batch is builds,
not waits.

`TimedBuild` is a fake of one build (`build_once`): a real build's duration
cannot be had on demand on a mock clock; it moves the clock as a build of that
length would, and pokes the builder as a batch stored meanwhile does."""

from __future__ import annotations

import threading

import attrs
import pytest
import trio
import trio.testing

from usenet_indexer.coordinator.catalog_build import Built, CatalogBuild
from usenet_indexer.coordinator.catalog_builder import CatalogDue, build_catalog_forever
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.store.builds import BuildStore

SETTLE = 0.5
EVERY = 60.0
# Real seconds before a builder that never builds as the test expects is given up
# (the mock clock never moves by itself: the test would wait forever).
GIVE_UP_SECONDS = 60.0


@attrs.define(eq=False)
class TimedBuild:
    """A fake build: each call takes `seconds[i]` of the mock clock and pokes the
    builder when `pokes[i]`; when each began is kept."""

    clock: trio.testing.MockClock
    due: CatalogDue
    seconds: list[float]
    pokes: list[bool]
    more: list[bool]
    began: list[float] = attrs.field(factory=list)
    done: list[trio.Event] = attrs.field(factory=list)

    def __call__(self, catalog: CatalogBuild, builds: BuildStore, quiet: float) -> Built:
        at = len(self.began)
        self.began.append(trio.from_thread.run_sync(trio.current_time))
        trio.from_thread.run_sync(self.clock.jump, self.seconds[at])
        if self.pokes[at]:
            trio.from_thread.run_sync(self.due.due)
        trio.from_thread.run_sync(self.done[at].set)
        return Built(pending=1, keys=1, releases=1, more=self.more[at])


@pytest.mark.trio
async def test_a_poke_while_building_starts_the_next_build_without_another_settle(
    stores: Stores, mock_clock: trio.testing.MockClock
) -> None:
    due = CatalogDue()
    build = TimedBuild(
        mock_clock,
        due,
        seconds=[2.0, 0.1, 0.0, 0.0, 0.0],
        pokes=[True, False, False, False, False],
        more=[False, True, False, False, False],
    )
    build.done = [trio.Event() for _ in build.seconds]
    token = trio.lowlevel.current_trio_token()
    async with trio.open_nursery() as nursery:
        watchdog = threading.Timer(
            GIVE_UP_SECONDS,
            lambda: trio.from_thread.run_sync(nursery.cancel_scope.cancel, trio_token=token),
        )
        watchdog.start()
        start = trio.current_time()
        await nursery.start(
            lambda task_status: build_catalog_forever(
                stores.build,
                due,
                every_seconds=EVERY,
                quiet_seconds=3600.0,
                settle_seconds=SETTLE,
                build=build,
                task_status=task_status,
            )
        )
        # 1: 2 s, a batch stored meanwhile -> 2: at once; it leaves keys pending
        # (more) and took 0.1 s -> 3: the rest of the settle since 2 began.
        await build.done[1].wait()
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(SETTLE - 0.1)
        await build.done[2].wait()
        # Idle now: a poke that finds it waiting is followed by the whole settle.
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(10.0)
        due.due()
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(SETTLE)
        await build.done[3].wait()
        nursery.cancel_scope.cancel()
    watchdog.cancel()
    began = [round(t - start, 3) for t in build.began]
    assert began == [0.0, 2.0, 2.5, 13.0]
