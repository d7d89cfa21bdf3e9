"""The prefetcher's follower: GROUP per enabled group, then the plan, in a real PostgreSQL.

The NNTP server here is the FAKE (usenet_indexer/testing/fake_nntp.py): its
water marks are set between polls, which is how a high water mark that
goes down (a renumbered group, a server behind another) or a low one that
passes what is not indexed yet (expiry) can be had on demand. The live
follow of a real INN2 is tests/test_live.py.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
import trio
import trio.testing
from real_deadline import given_up_after

from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.prefetch.follower import Follower, FollowOptions
from usenet_indexer.store.groups import GroupRow, GroupStore
from usenet_indexer.testing.fake_nntp import FakeNNTPServer, stall

GROUP = "alt.binaries.follow"
OTHER = "alt.binaries.other"
URL = "nntp://fake.invalid:119"


# A real-time limit of a test on the mock clock (tests/real_deadline.py).
DEADLINE_SECONDS = 60.0
# An NNTP timeout other than the setting's default (60 s).
TIMEOUT_SECONDS = 7.0


def follower(stores: Stores, fake: FakeNNTPServer, range_articles: int = 10_000) -> Follower:
    return Follower(
        GroupStore(stores.ranges.pool),
        stores.ranges,
        [URL],
        FollowOptions(poll_seconds=1.0, range_articles=range_articles),
        open_stream=fake.open_stream,
        timeout_seconds=TIMEOUT_SECONDS,
    )


def ranges(stores: Stores) -> list[tuple[object, ...]]:
    with stores.ranges.pool.connection() as conn:
        return list(
            conn.execute(
                "SELECT g.name, r.first_article, r.last_article, r.kind FROM ranges r"
                " JOIN groups g ON g.id = r.group_id ORDER BY r.id"
            ).fetchall()
        )


def row(stores: Stores, name: str = GROUP) -> GroupRow:
    (found,) = [g for g in GroupStore(stores.ranges.pool).list() if g.name == name]
    return found


@pytest.mark.trio
async def test_the_follower_plans_the_new_articles_and_reports_a_falling_high(
    nursery: trio.Nursery, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNNTPServer(groups={GROUP: (1, 1_000)}).run_in(nursery)
    GroupStore(stores.ranges.pool).add(GROUP, low=1, high=1_000, checked=True)
    planned: list[int] = []
    it = follower(stores, fake)
    it.on_planned = lambda: planned.append(1)
    assert await it.poll() == 0  # followed from its high water mark on
    assert row(stores).followed_to == 1_000
    fake.groups[GROUP] = (1, 1_250)
    assert await it.poll() == 1
    assert ranges(stores) == [(GROUP, 1_001, 1_250, "live")]
    assert planned == [1]
    # The server now says less: nothing planned, said once, shown in status.
    fake.groups[GROUP] = (1, 1_100)
    with caplog.at_level(logging.WARNING):
        assert await it.poll() == 0
        assert await it.poll() == 0
    said = [r.getMessage() for r in caplog.records if "went down" in r.getMessage()]
    quirk = "high water mark went down to 1100, below what is followed (1250)"
    assert said == [f"{GROUP}: {quirk}"]
    assert row(stores).quirk == quirk
    assert row(stores).high == 1_100
    # Back above what is followed: planned on from there, no overlap.
    fake.groups[GROUP] = (1, 1_300)
    assert await it.poll() == 1
    assert ranges(stores)[-1] == (GROUP, 1_251, 1_300, "live")


@pytest.mark.trio
async def test_a_server_silent_after_group_is_given_up_at_the_nntp_timeout(
    nursery: trio.Nursery,
    stores: Stores,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The server greets, then never answers GROUP: the poll ends after the
    # settings' nntp_timeout_seconds (mock time), the other groups' turn comes.
    fake = FakeNNTPServer(groups={GROUP: (1, 1_000)}, replies={"GROUP": stall}).run_in(nursery)
    GroupStore(stores.ranges.pool).add(GROUP, low=1, high=1_000, checked=True)
    with given_up_after(DEADLINE_SECONDS):
        started = trio.current_time()
        assert await follower(stores, fake).poll() == 0
        took = trio.current_time() - started
    assert TIMEOUT_SECONDS <= took < TIMEOUT_SECONDS + 1
    [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("following")]
    assert f"nothing for {TIMEOUT_SECONDS} s" in said
    assert said.endswith("trying again at the next poll")
    assert row(stores).followed_to is None


@pytest.mark.trio
async def test_a_group_reply_past_2_63_is_a_warning_not_the_end_of_the_prefetcher(
    nursery: trio.Nursery, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    # Stored, such a number (no bigint holds it) raised a DataError the follower did
    # not catch: the whole prefetcher stopped, and again at each restart.
    fake = FakeNNTPServer(groups={GROUP: (2**64 - 10, 2**64)}).run_in(nursery)
    GroupStore(stores.ranges.pool).add(GROUP)
    with caplog.at_level(logging.WARNING):
        assert await follower(stores, fake).poll() == 0
    assert any("past 2^63 - 1" in r.getMessage() for r in caplog.records)
    assert ranges(stores) == []


@pytest.mark.trio
async def test_articles_expiring_before_they_are_indexed_are_reported(
    nursery: trio.Nursery, stores: Stores
) -> None:
    fake = FakeNNTPServer(groups={GROUP: (1, 5_000)}).run_in(nursery)
    group_id = GroupStore(stores.ranges.pool).add(GROUP, low=1, high=5_000, checked=True)
    stores.ranges.plan(group_id, 1, 5_000, 1_000)
    fake.groups[GROUP] = (2_500, 5_000)
    await follower(stores, fake).poll()
    quirk = row(stores).quirk
    assert quirk is not None
    assert "low water mark 2500 is above articles not indexed yet from 1" in quirk


@pytest.mark.trio
async def test_a_margin_reaching_below_the_servers_low_plans_nothing_and_polls_on(
    nursery: trio.Nursery, stores: Stores
) -> None:
    # live_margin_articles 100, followed to 700 (800 less the margin); the server then
    # keeps only 950..1000: nothing is left to plan live, and the poll does not raise.
    fake = FakeNNTPServer(groups={GROUP: (1, 800)}).run_in(nursery)
    GroupStore(stores.ranges.pool).add(GROUP, low=1, high=800, checked=True)
    it = follower(stores, fake)
    it.options = FollowOptions(poll_seconds=1.0, range_articles=10_000, margin_articles=100)
    assert await it.poll() == 0
    assert row(stores).followed_to == 700
    fake.groups[GROUP] = (950, 1_000)
    assert await it.poll() == 0
    assert row(stores).followed_to == 900
    fake.groups[GROUP] = (950, 1_100)
    assert await it.poll() == 1
    assert ranges(stores) == [(GROUP, 950, 1_000, "live")]


@pytest.mark.trio
async def test_a_disabled_group_is_neither_asked_for_nor_leased(
    nursery: trio.Nursery, stores: Stores
) -> None:
    fake = FakeNNTPServer(groups={GROUP: (1, 1_000), OTHER: (1, 1_000)}).run_in(nursery)
    groups = GroupStore(stores.ranges.pool)
    other = groups.add(OTHER, low=1, high=1_000, checked=True)
    groups.add(GROUP, low=1, high=1_000, checked=True)
    stores.ranges.plan(other, 1, 1_000, 1_000)
    groups.set_enabled(OTHER, False)
    await follower(stores, fake).poll()
    assert f"GROUP {OTHER}" not in fake.received
    assert f"GROUP {GROUP}" in fake.received
    assert row(stores, OTHER).state == "disabled"
    node = stores.nodes.authenticate(stores.nodes.create("edge"))
    assert node is not None
    assert stores.ranges.lease(node, 60.0) is None
    groups.set_enabled(OTHER, True)
    lease = stores.ranges.lease(node, 60.0)
    assert lease is not None
    assert lease.group == OTHER


@pytest.mark.trio
async def test_the_backfill_goes_down_to_the_first_article_of_its_days(
    nursery: trio.Nursery, stores: Stores
) -> None:
    # 1,000 articles, one every 10 minutes, up to now: about a week.
    now = datetime.now(UTC).replace(microsecond=0)  # a Date header has whole seconds
    dates = {n: now - timedelta(minutes=10 * (1_000 - n), seconds=30) for n in range(1, 1_001)}
    overview = {
        n: f"{n}\tsubject {n}\tposter@example.invalid\t{format_datetime(when)}\t<{n}@x>\t\t1000\t10".encode()
        for n, when in dates.items()
    }
    fake = FakeNNTPServer(groups={GROUP: (1, 1_000)}, overview=overview).run_in(nursery)
    GroupStore(stores.ranges.pool).add(GROUP, backfill_days=2, low=1, high=1_000, checked=True)
    it = follower(stores, fake, range_articles=100)
    await it.poll()
    floor = row(stores).backfill_floor
    assert floor is not None
    assert dates[floor] >= now - timedelta(days=2) > dates[floor - 1]
    # One slice, newest first, just below the head.
    assert ranges(stores) == [(GROUP, 901, 1_000, "backfill")]
    await it.poll()  # one waiting is fewer than two: the next slice
    assert ranges(stores)[-1] == (GROUP, 801, 900, "backfill")
    await it.poll()  # two waiting: no more until one is done
    assert len(ranges(stores)) == 2


def backfilled(nursery: trio.Nursery, stores: Stores) -> tuple[Follower, FakeNNTPServer, int]:
    """A follower of a group at 1..1,000 on a fake server, backfilled down to 301 (its
    floor found just now: no bisect at the polls), in ranges of 100; the server, the
    group's id."""
    fake = FakeNNTPServer(groups={GROUP: (1, 1_000)}).run_in(nursery)
    groups = GroupStore(stores.ranges.pool)
    group_id = groups.add(GROUP, backfill_days=2, low=1, high=1_000, checked=True)
    groups.set_floor(group_id, 301)
    return follower(stores, fake, range_articles=100), fake, group_id


@pytest.mark.trio
async def test_parked_backfill_ranges_do_not_hold_the_backfill_back(
    nursery: trio.Nursery, stores: Stores
) -> None:
    # Two backfill slices waiting hold the next one back; parked (a chunk that cannot
    # be read, say), they wait for `uidx ranges retry`, and the backfill goes on.
    it, _, _ = backfilled(nursery, stores)
    node = stores.nodes.authenticate(stores.nodes.create("edge-1"))
    assert node is not None
    await it.poll()
    await it.poll()
    await it.poll()  # two waiting: no more
    assert ranges(stores) == [(GROUP, 901, 1_000, "backfill"), (GROUP, 801, 900, "backfill")]
    for _ in range(2):
        lease = stores.ranges.lease(node, 900.0)
        assert lease is not None
        parked = stores.ranges.refuse(node, lease.range_id, lease.epoch, "unreadable", 1)
        assert parked is not None
        assert parked.parked
    await it.poll()
    await it.poll()
    assert ranges(stores)[2:] == [(GROUP, 701, 800, "backfill"), (GROUP, 601, 700, "backfill")]
    await it.poll()  # two waiting again
    assert len(ranges(stores)) == 4


def tiled(stores: Stores) -> list[tuple[int, int]]:
    """The planned ranges' articles as runs, in order; an overlap fails the test
    (an article planned twice is indexed twice)."""
    with stores.ranges.pool.connection() as conn:
        rows = conn.execute("SELECT first_article, last_article FROM ranges ORDER BY 1").fetchall()
    runs: list[tuple[int, int]] = []
    for first, last in rows:
        if runs and first <= runs[-1][1]:
            pytest.fail(f"{first}..{last} overlaps {runs[-1][0]}..{runs[-1][1]}")
        if runs and first == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], last)
        else:
            runs.append((first, last))
    return runs


@pytest.mark.trio
async def test_ranges_planned_by_hand_leave_no_hole_in_the_live_head_or_the_backfill(
    nursery: trio.Nursery, stores: Stores
) -> None:
    # Followed above 1,000 with a backfill down to 301. An operator then plans
    # 1,501..1,600 (above the follower's mark) and 401..500 (below the backfill's
    # slice). The live head once started above the plan's top (1,001..1,500 never
    # planned) and the backfill below its bottom (501..900 never planned).
    it, fake, group_id = backfilled(nursery, stores)
    it.options = FollowOptions(poll_seconds=1.0, range_articles=100, backfill_ahead=100)
    await it.poll()
    assert tiled(stores) == [(901, 1_000)]
    stores.ranges.plan(group_id, 1_501, 1_600, 100)
    stores.ranges.plan(group_id, 401, 500, 100)
    fake.groups[GROUP] = (1, 2_000)
    for _ in range(10):
        await it.poll()
    assert tiled(stores) == [(301, 2_000)]
    assert await it.poll() == 0
    # Passed by the mark and by the backfill, the ranges planned by hand are no
    # longer read at each poll.
    (followed,) = GroupStore(stores.ranges.pool).followed()
    assert followed.planned == ()
