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

from usenet_indexer.commands.status import health_lines
from usenet_indexer.coordinator.catalog_build import Built, CatalogBuild
from usenet_indexer.coordinator.catalog_builder import (
    BuilderHealth,
    CatalogDue,
    build_catalog_forever,
)
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.health import Observed, State
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

    def __call__(self, catalog: CatalogBuild, builds: BuildStore, quiet: float) -> Built:
        at = len(self.began)
        self.began.append(trio.from_thread.run_sync(trio.current_time))
        trio.from_thread.run_sync(self.clock.jump, self.seconds[at])
        if self.pokes[at]:
            trio.from_thread.run_sync(self.due.due)
        return Built(pending=1, keys=1, releases=1, more=self.more[at])


@attrs.define(eq=False)
class ReturnedHealth(BuilderHealth):
    """The builder's health, which also tells when build i's result is back with the
    builder (`returned[i]`, set as it counts the success). An event set from the
    build's thread would come before that: `wait_all_tasks_blocked` does not wait for
    the thread to end, so a poke or a jump could land while the builder still waits
    for the result (a poke then counts as one that came while it built)."""

    returned: list[trio.Event] = attrs.field(factory=list)

    def succeeded(self) -> None:
        super().succeeded()
        next(event for event in self.returned if not event.is_set()).set()


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
    health = ReturnedHealth(returned=[trio.Event() for _ in build.seconds])
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
                health=health,
                task_status=task_status,
            )
        )
        # 1: 2 s, a batch stored meanwhile -> 2: at once; it leaves keys pending
        # (more) and took 0.1 s -> 3: the rest of the settle since 2 began.
        await health.returned[1].wait()
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(SETTLE - 0.1)
        await health.returned[2].wait()
        # Idle now: a poke that finds it waiting is followed by the whole settle.
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(10.0)
        due.due()
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(SETTLE)
        await health.returned[3].wait()
        nursery.cancel_scope.cancel()
    watchdog.cancel()
    began = [round(t - start, 3) for t in build.began]
    assert began == [0.0, 2.0, 2.5, 13.0]


@attrs.define(eq=False)
class FailingBuild:
    """A fake build that raises `failures` times, then builds: a defect met in a
    stored release cannot be had on demand (each one found so far was fixed). It
    keeps when each try began and the builder's health row at the last try."""

    failures: int
    health: BuilderHealth
    built_twice: trio.Event = attrs.field(factory=trio.Event)
    began: list[float] = attrs.field(factory=list)
    seen: tuple[Observed, ...] = ()

    def __call__(self, catalog: CatalogBuild, builds: BuildStore, quiet: float) -> Built:
        self.began.append(trio.from_thread.run_sync(trio.current_time))
        if len(self.began) <= self.failures:
            raise RuntimeError("a release no build can make")
        if len(self.began) == self.failures + 1:
            self.seen = trio.from_thread.run_sync(self.health.observed)
        else:
            trio.from_thread.run_sync(self.built_twice.set)
        return Built(pending=1, keys=1, releases=1)


@pytest.mark.trio
async def test_a_build_that_fails_is_logged_shown_as_health_and_tried_again_later(
    stores: Stores, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    health = BuilderHealth()
    build = FailingBuild(failures=3, health=health)
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        await nursery.start(
            lambda task_status: build_catalog_forever(
                stores.build,
                CatalogDue(),
                every_seconds=EVERY,
                quiet_seconds=3600.0,
                settle_seconds=SETTLE,
                build=build,
                health=health,
                task_status=task_status,
            )
        )
        # (No deadline here: the mock clock jumps to the builder's own.)
        await build.built_twice.wait()
        nursery.cancel_scope.cancel()
    # Tried again after 1, 2 and 4 s (not a busy loop); after the success, the
    # builder goes on: the next tick (60 s and the settle) builds again.
    assert [round(t - start, 3) for t in build.began] == [0.0, 1.0, 3.0, 7.0, 67.5]
    # While it failed, its heartbeat said so, with the error; once it built, nothing.
    (row,) = build.seen
    assert (row.component, row.state) == ("catalog", State.BUILDS_FAILING)
    assert (
        row.detail
        == "3 builds in a row failed, the last with RuntimeError: a release no build can make"
    )
    assert health.observed() == ()
    # Each failure an ERROR line with its traceback: a defect to fix, not a warning.
    failed = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(failed) == 3
    assert all(r.exc_info and r.exc_info[0] is RuntimeError for r in failed)
    assert "catalog build failed (3 in a row); the next try in 4 s" in failed[-1].getMessage()


def test_a_failing_builder_is_a_health_row_that_status_shows(stores: Stores) -> None:
    health = BuilderHealth()
    health.failed(ValueError("int8 out of range"))
    stores.health.report("host:1", "coordinator", health.observed())
    rows, _ = stores.health.list()
    shown = health_lines(tuple(rows))
    assert any(
        "catalog" in line
        and "builds failing" in line
        and "build failed, the last with ValueError: int8 out of range" in line
        for line in shown
    ), shown
    health.succeeded()
    stores.health.report("host:1", "coordinator", health.observed())
    rows, _ = stores.health.list()
    assert [(r.component, r.state) for r in rows] == [("coordinator", State.OK)]
