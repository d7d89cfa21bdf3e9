"""The prefetcher's scheduler (pure): fed `now` and work lists, no trio, no database."""

from __future__ import annotations

import pytest

from usenet_indexer.prefetch.scheduler import (
    NO_WORK,
    PENDING,
    Refresh,
    Scheduler,
    WorkList,
)
from usenet_indexer.spool.plan import ChunkJob

POLL = 5.0


def _job(
    first: int, group: str = "a.b.one", group_id: int = 1, *, leased: bool = False
) -> ChunkJob:
    return ChunkJob(group_id, group, first, first + 99, leased)


def _listed(scheduler: Scheduler, *jobs: ChunkJob, now: float = 0.0) -> None:
    """Bring the scheduler to a fresh list of `jobs`, as the adapter would."""
    action = scheduler.take(0, now)
    assert isinstance(action, Refresh)
    scheduler.refreshed(WorkList(jobs))


def test_the_first_take_asks_for_a_read_then_hands_out_from_it() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    assert scheduler.take(0, 0.0) == Refresh(busy=())
    scheduler.refreshed(WorkList((_job(1), _job(101))))
    assert scheduler.take_listed(0, 0.1) == _job(1)
    assert scheduler.take(0, 0.2) == _job(101)


def test_a_stale_list_asks_for_a_refresh_naming_the_chunks_in_flight() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    _listed(scheduler, _job(1), _job(101), _job(201))
    assert scheduler.take_listed(0, 0.0) == _job(1)
    assert scheduler.take(0, POLL - 0.01) == _job(101)  # still fresh
    assert scheduler.take(0, POLL) == Refresh(busy=(_job(1), _job(101)))


def test_an_empty_list_for_the_server_asks_for_a_refresh_even_when_fresh() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    _listed(scheduler)
    assert isinstance(scheduler.take(0, 1.0), Refresh)


def test_one_read_at_a_time_the_others_wait_and_take_from_it() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    assert isinstance(scheduler.take(0, 0.0), Refresh)
    # A second connection asks while the read is in flight: it waits, no second read.
    assert scheduler.take(0, 0.1) is PENDING
    assert scheduler.take_now(0, 0.1, lambda _: True) is None
    scheduler.refreshed(WorkList((_job(1), _job(101))))
    assert scheduler.take_listed(0, 0.2) == _job(1)
    assert scheduler.take_listed(0, 0.2) == _job(101)
    assert scheduler.take_listed(0, 0.2) is None  # the list has run dry: no read from here


def test_a_failed_read_ends_the_refresh_with_nothing_to_do() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    assert isinstance(scheduler.take(0, 0.0), Refresh)
    scheduler.refreshed(NO_WORK)
    assert scheduler.take_listed(0, 0.0) is None
    assert isinstance(scheduler.take(0, 0.1), Refresh)  # not pending for ever


def test_a_chunk_in_flight_is_not_handed_out_twice() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    _listed(scheduler, _job(1), _job(101))
    first = scheduler.take_listed(0, 0.0)
    assert first == _job(1)
    # A read that began before it was handed out lists it again: still not handed out.
    refresh = scheduler.take(0, POLL)
    assert refresh == Refresh(busy=(_job(1),))
    scheduler.refreshed(WorkList((_job(1), _job(101))))
    assert scheduler.take_listed(0, POLL) == _job(101)
    assert scheduler.take_listed(0, POLL) is None
    # Done (it did not land): the next list may hand it out again.
    scheduler.done(first)
    assert scheduler.take(0, 2 * POLL) == Refresh(busy=(_job(101),))
    scheduler.refreshed(WorkList((_job(1),)))
    assert scheduler.take_listed(0, 2 * POLL) == _job(1)


def test_a_group_not_on_a_server_goes_to_the_next_one() -> None:
    scheduler = Scheduler(servers=2, poll_seconds=POLL)
    other = _job(1, "a.b.two", 2)
    _listed(scheduler, _job(1), other)
    assert scheduler.not_on_server("a.b.one", 0, 0.0) is True
    # Server 0 skips the group; server 1 gets it.
    assert scheduler.take_listed(0, 0.0) == other
    assert scheduler.take_listed(1, 0.0) == _job(1)
    assert scheduler.take_listed(1, 0.0) is None


def test_a_group_on_no_server_is_left_out_of_the_list() -> None:
    scheduler = Scheduler(servers=2, poll_seconds=POLL)
    assert scheduler.not_on_server("a.b.one", 0, 0.0) is True
    assert scheduler.not_on_server("a.b.one", 1, 0.0) is False  # no server left
    _listed(scheduler, _job(1), _job(1, "a.b.two", 2))
    assert scheduler.take_listed(1, 0.0) is None
    assert scheduler.take_listed(0, 0.0) == _job(1, "a.b.two", 2)


def test_wait_for_articles_holds_a_group_back_until_poll_seconds_passed() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    other = _job(1, "a.b.two", 2)
    _listed(scheduler, _job(1), _job(101), other)
    job = scheduler.take_listed(0, 10.0)
    assert job == _job(1)
    scheduler.wait_for_articles(job, 10.0)
    scheduler.done(job)
    # The group's chunks are off the list; the other group's are not.
    assert scheduler.take_listed(0, 10.1) == other
    assert scheduler.take_listed(0, 10.1) is None
    # Listed again, the group is still held back until `now` passes 10 + POLL.
    refresh = scheduler.take(0, 10.2)
    assert isinstance(refresh, Refresh)
    scheduler.refreshed(WorkList((_job(1), _job(101))))
    assert scheduler.take_listed(0, 10.0 + POLL - 0.01) is None
    assert scheduler.take_listed(0, 10.0 + POLL) == _job(1)


def test_an_over_budget_spool_lists_leased_ranges_only() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    assert isinstance(scheduler.take(0, 0.0), Refresh)
    scheduler.refreshed(WorkList((_job(1), _job(101, leased=True)), over_budget=True))
    assert scheduler.take_listed(0, 0.0) == _job(101, leased=True)
    assert scheduler.take_listed(0, 0.0) is None


def test_take_now_chains_only_a_fitting_job_from_a_fresh_list() -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    _listed(scheduler, _job(1), _job(101))
    assert scheduler.take_listed(0, 0.0) == _job(1)
    # The next job does not fit: nothing taken, it stays on the list.
    assert scheduler.take_now(0, 0.1, lambda job: job.last <= 100) is None
    assert scheduler.take_now(0, 0.1, lambda job: job.first == 101) == _job(101)
    assert scheduler.take_now(0, 0.1, lambda _: True) is None  # nothing left


@pytest.mark.parametrize("now", [POLL, POLL + 1.0])
def test_take_now_never_reads_a_stale_list(now: float) -> None:
    scheduler = Scheduler(servers=1, poll_seconds=POLL)
    _listed(scheduler, _job(1), _job(101))
    assert scheduler.take_now(0, now, lambda _: True) is None
    assert isinstance(scheduler.take(0, now), Refresh)  # it is for take to read it


def test_take_now_looks_only_at_the_servers_own_groups() -> None:
    scheduler = Scheduler(servers=2, poll_seconds=POLL)
    scheduler.not_on_server("a.b.one", 0, 0.0)
    _listed(scheduler, _job(1), _job(1, "a.b.two", 2))
    assert scheduler.take_now(1, 0.0, lambda job: job.group == "a.b.one") == _job(1)
    assert scheduler.take_now(1, 0.0, lambda _: True) is None


def test_a_group_not_carried_is_asked_of_the_servers_again_after_recheck_seconds() -> None:
    # A 411 is not for ever: a group created after it was planned, a provider's
    # backend that answered 411 once. It was left out until the process restarted.
    scheduler = Scheduler(servers=2, poll_seconds=POLL, recheck_seconds=60.0)
    assert scheduler.not_on_server("a.b.one", 0, 10.0) is True
    assert scheduler.not_on_server("a.b.one", 1, 20.0) is False
    assert scheduler.recheck(79.9) == []
    _listed(scheduler, _job(1), now=79.9)
    assert scheduler.take_listed(0, 79.9) is None
    assert scheduler.recheck(80.0) == ["a.b.one"]
    assert scheduler.recheck(80.0) == []
    _listed(scheduler, _job(1), now=80.0 + POLL)
    assert scheduler.take_listed(0, 80.0 + POLL) == _job(1)  # the first server again
