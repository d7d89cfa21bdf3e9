"""Landings: which waiting streams a landed chunk or a new listening session wakes."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from usenet_indexer.coordinator.landings import Landings


@pytest.mark.trio
async def test_a_landing_wakes_the_streams_of_its_group_and_a_new_session_wakes_all(
    autojump_clock: trio.testing.MockClock,
) -> None:
    landings = Landings()
    woken: list[int] = []

    async def wait(group_id: int) -> None:
        await landings.wait_since(group_id, landings.mark(group_id))
        woken.append(group_id)

    async with trio.open_nursery() as nursery:
        for group_id in (1, 1, 2):
            nursery.start_soon(wait, group_id)
        await trio.testing.wait_all_tasks_blocked()
        landings.landed([1, 1, 3])
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [1, 1]
        # Nobody listened for a while: every stream looks again.
        landings.listening()
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [1, 1, 2]
    assert landings.sessions == 1


@pytest.mark.trio
async def test_a_landing_between_the_mark_and_the_wait_is_not_missed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    landings = Landings()
    mark = landings.mark(7)
    landings.landed([7])
    with trio.fail_after(1):
        await landings.wait_since(7, mark)  # at once
    mark = landings.mark(7)
    landings.landed([8])
    with trio.move_on_after(60) as waited:
        await landings.wait_since(7, mark)
    assert waited.cancelled_caught  # another group's landing does not count
