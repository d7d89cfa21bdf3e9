"""What the daemon plans for a group it follows (core/follow.py, pure).

Each test is a poll as the follower makes it: the server's water marks,
what is planned, and the backfill's floor in; the spans to plan out. A
sequence of polls (`polls`) plays the plan forward as the store would
keep it, to check that the live head and the backfill tile the group
without a hole or an overlap.
"""

from __future__ import annotations

import attrs
import pytest

from usenet_indexer.core.follow import Decision, GroupView, Kind, Span, follow

SLICE = 1_000


def view(**given: object) -> GroupView:
    fields: dict[str, object] = {
        "low": 1,
        "high": 10_000,
        "followed_to": None,
        "top": None,
        "reached": None,
        "floor": None,
        "backfill_waiting": 0,
    }
    fields.update(given)
    return GroupView(**fields)  # type: ignore[arg-type]


def test_a_new_group_without_backfill_is_followed_from_its_high_water_mark() -> None:
    first = follow(view(), slice_articles=SLICE)
    assert first == Decision((), 10_000, ())
    later = follow(view(high=10_250, followed_to=10_000), slice_articles=SLICE)
    assert later.spans == (Span(10_001, 10_250, Kind.LIVE),)
    assert later.followed_to == 10_250


def test_a_new_group_is_followed_from_where_it_was_when_added() -> None:
    # Posted between `uidx groups add` (high 9,000) and the daemon's first poll.
    decision = follow(view(high=10_000, known_high=9_000), slice_articles=SLICE)
    assert decision.spans == (Span(9_001, 10_000, Kind.LIVE),)
    # A stored mark above the server's (another server's): from the server's.
    assert follow(view(high=10_000, known_high=12_000), slice_articles=SLICE).spans == ()


def test_nothing_new_plans_nothing() -> None:
    assert follow(view(followed_to=10_000, top=10_000), slice_articles=SLICE).spans == ()


def test_the_live_head_plans_around_what_an_operator_planned_above_it() -> None:
    # Followed to 10,000; an operator planned 10,501..11,000 by hand. The head once
    # went on from the plan's top (11,001): 10,001..10,500 were never planned.
    above = view(high=12_000, followed_to=10_000, top=11_000, planned=((10_501, 11_000),))
    decision = follow(above, slice_articles=SLICE)
    assert decision.spans == (Span(10_001, 10_500, Kind.LIVE), Span(11_001, 12_000, Kind.LIVE))
    assert decision.followed_to == 12_000
    # Planned by hand past the server's high: the head plans up to it, and on above
    # it once the server is past it.
    beyond = view(high=10_800, followed_to=10_000, top=12_000, planned=((10_501, 12_000),))
    decision = follow(beyond, slice_articles=SLICE)
    assert decision.spans == (Span(10_001, 10_500, Kind.LIVE),)
    assert decision.followed_to == 10_800
    later = attrs.evolve(beyond, high=12_300, followed_to=10_800)
    assert follow(later, slice_articles=SLICE).spans == (Span(12_001, 12_300, Kind.LIVE),)


def test_live_ranges_planned_above_a_mark_not_stored_are_not_planned_again() -> None:
    # A poll planned 10,001..10,400 and stopped before it stored its mark.
    stale = view(high=10_600, followed_to=10_000, top=10_400, planned=((10_001, 10_400),))
    assert follow(stale, slice_articles=SLICE).spans == (Span(10_401, 10_600, Kind.LIVE),)


def test_the_backfill_steps_over_what_an_operator_planned_below_it() -> None:
    # The backfill reached 9,001; an operator planned 4,001..5,000 by hand. The
    # backfill once went on below the plan's bottom: 5,001..9,000 were never planned.
    below = view(followed_to=10_000, top=10_000, reached=9_001, floor=1, planned=((4_001, 5_000),))
    assert follow(below, slice_articles=SLICE).spans == (Span(8_001, 9_000, Kind.BACKFILL),)
    # Right above it, the slice ends where the planned range begins.
    near = attrs.evolve(below, reached=5_501)
    assert follow(near, slice_articles=SLICE).spans == (Span(5_001, 5_500, Kind.BACKFILL),)
    # Right below the backfill, it is stepped over (planned ranges that touch, too).
    touching = attrs.evolve(below, reached=5_001, planned=((3_801, 4_000), (4_001, 5_000)))
    assert follow(touching, slice_articles=SLICE).spans == (Span(2_801, 3_800, Kind.BACKFILL),)
    # Down to the floor: nothing is left once the planned range reaches it.
    floor = attrs.evolve(below, reached=5_001, floor=4_500)
    assert follow(floor, slice_articles=SLICE).spans == ()


def test_a_group_planned_before_it_was_followed_goes_on_from_the_plans_top() -> None:
    planned = view(high=12_000, top=11_000, planned=((5_000, 11_000),))
    decision = follow(planned, slice_articles=SLICE)
    assert decision.spans == (Span(11_001, 12_000, Kind.LIVE),)
    # The backfill goes on below the plan.
    decision = follow(attrs.evolve(planned, floor=1), slice_articles=SLICE)
    assert decision.spans[1:] == (Span(4_000, 4_999, Kind.BACKFILL),)


def test_the_margin_keeps_the_head_below_the_high_water_mark() -> None:
    decision = follow(view(high=10_500, followed_to=10_000), margin=100, slice_articles=SLICE)
    assert decision.spans == (Span(10_001, 10_400, Kind.LIVE),)


def test_a_margin_reaching_below_the_servers_low_plans_nothing_live() -> None:
    # Followed to 700; the server expired everything up to 950 and the head (high less
    # the margin) is 900: no article of 701..900 is left, and 950..900 is no span
    # (RangeStore.plan refuses it, which ended the prefetcher's follower).
    decision = follow(view(low=950, high=1_000, followed_to=700), margin=100, slice_articles=SLICE)
    assert decision.spans == ()
    assert decision.followed_to == 900
    later = follow(view(low=950, high=1_100, followed_to=900), margin=100, slice_articles=SLICE)
    assert later.spans == (Span(950, 1_000, Kind.LIVE),)


def test_the_backfill_goes_down_a_slice_at_a_time_to_its_floor() -> None:
    first = follow(view(floor=7_500), slice_articles=SLICE)
    assert first.spans == (Span(9_001, 10_000, Kind.BACKFILL),)
    # Below what is planned, while fewer than `ahead` backfill ranges wait.
    again = follow(
        view(followed_to=10_000, top=10_000, reached=9_001, floor=7_500, backfill_waiting=1),
        slice_articles=SLICE,
    )
    assert again.spans == (Span(8_001, 9_000, Kind.BACKFILL),)
    full = follow(
        view(followed_to=10_000, top=10_000, reached=8_001, floor=7_500, backfill_waiting=2),
        slice_articles=SLICE,
    )
    assert full.spans == ()
    last = follow(
        view(followed_to=10_000, top=10_000, reached=8_001, floor=7_500, backfill_waiting=1),
        slice_articles=SLICE,
    )
    assert last.spans == (Span(7_500, 8_000, Kind.BACKFILL),)
    done = follow(
        view(followed_to=10_000, top=10_000, reached=7_500, floor=7_500), slice_articles=SLICE
    )
    assert done.spans == ()


def test_the_backfill_never_goes_below_the_servers_low() -> None:
    decision = follow(view(low=9_500, floor=100), slice_articles=SLICE)
    assert decision.spans == (Span(9_500, 10_000, Kind.BACKFILL),)


def test_live_comes_before_backfill_in_one_poll() -> None:
    decision = follow(
        view(high=10_300, followed_to=10_000, top=10_000, reached=9_001, floor=5_000),
        slice_articles=SLICE,
    )
    assert [s.kind for s in decision.spans] == [Kind.LIVE, Kind.BACKFILL]


def test_a_high_water_mark_that_went_down_plans_nothing_and_says_so() -> None:
    decision = follow(
        view(high=9_000, followed_to=10_000, top=10_000, reached=1, last_high=10_000),
        slice_articles=SLICE,
    )
    assert decision.spans == ()
    assert decision.followed_to == 10_000  # not below what is planned
    assert decision.quirks == ("high water mark went down to 9000, below what is followed (10000)",)


def test_a_high_water_mark_below_what_is_followed_is_reported_after_a_restart_too() -> None:
    decision = follow(view(high=9_000, followed_to=10_000, top=10_000), slice_articles=SLICE)
    assert decision.spans == ()
    assert decision.quirks == ("high water mark went down to 9000, below what is followed (10000)",)


def test_a_high_water_mark_lower_than_at_the_last_poll_is_reported() -> None:
    decision = follow(view(high=9_000, followed_to=8_000, last_high=9_500), slice_articles=SLICE)
    assert decision.quirks == ("high water mark went down from 9500 to 9000",)


def test_articles_expired_before_they_were_indexed_are_reported_not_planned() -> None:
    waiting = view(low=500, followed_to=10_000, top=10_000, reached=1, floor=1, waiting_from=200)
    decision = follow(waiting, slice_articles=SLICE)
    assert decision.spans == ()
    (quirk,) = decision.quirks
    assert "low water mark 500 is above articles not indexed yet from 200" in quirk
    # Expired after they were indexed: nothing to say.
    done = attrs.evolve(waiting, waiting_from=None)
    assert follow(done, slice_articles=SLICE).quirks == ()


def test_an_empty_group_plans_nothing() -> None:
    decision = follow(view(low=10, high=9), slice_articles=SLICE)
    assert decision.spans == ()
    assert "empty" in decision.quirks[0]


@pytest.mark.parametrize("bad", [{"margin": -1}, {"slice_articles": 0}, {"ahead": 0}])
def test_bad_settings_are_refused(bad: dict[str, int]) -> None:
    options = {"margin": 0, "slice_articles": SLICE, "ahead": 2, **bad}
    with pytest.raises(ValueError, match="margin"):
        follow(view(), **options)


Planned = list[tuple[int, int, Kind]]


def seen(state: GroupView, planned: Planned) -> GroupView:
    """The view the store gives of `planned` (store/groups.py's FollowedGroup):
    only the ranges above the mark and below the follower's own go in `planned`."""
    own = [first for first, _last, kind in planned if kind is not Kind.MANUAL]
    reached = min(own) if own else None
    below = reached - 1 if reached is not None else state.followed_to
    met = [
        (first, last)
        for first, last, _kind in sorted(planned)
        if state.followed_to is None
        or last > state.followed_to
        or (below is not None and first <= below)
    ]
    return attrs.evolve(
        state,
        top=max((last for _first, last, _kind in planned), default=None),
        reached=reached,
        planned=tuple(met),
    )


def polls(
    highs: list[int], floor: int | None, ahead: int = 2, by_hand: dict[int, Planned] | None = None
) -> Planned:
    """Play polls forward; each poll's planned ranges are done before the next but
    `ahead - 1` backfill ranges stay waiting. `by_hand` adds an operator's ranges
    before the poll of that index. Returns every range planned."""
    planned: Planned = []
    state = view(floor=floor, high=highs[0])
    for n, high in enumerate(highs):
        for first, last, kind in (by_hand or {}).get(n, []):
            # RangeStore.plan refuses an overlap.
            assert all(last < f or first > to for f, to, _kind in planned), (first, last)
            planned.append((first, last, kind))
        state = seen(attrs.evolve(state, high=high, last_high=state.high), planned)
        decision = follow(state, slice_articles=SLICE, ahead=ahead)
        planned += [(s.first, s.last, s.kind) for s in decision.spans]
        state = attrs.evolve(
            state,
            followed_to=decision.followed_to,
            backfill_waiting=min(ahead - 1, sum(1 for p in planned if p[2] is Kind.BACKFILL)),
        )
    return planned


def assert_tiled(planned: Planned, first: int, last: int) -> None:
    at = first
    for low, high, _kind in sorted(planned):
        assert low == at, f"hole or overlap at {at}"
        at = high + 1
    assert at == last + 1


def test_polls_tile_the_group_from_the_floor_to_the_head_once() -> None:
    highs = [10_000 + 137 * n for n in range(12)]
    assert_tiled(polls(highs, floor=4_321), 4_321, highs[-1])


def test_polls_tile_the_group_once_whatever_an_operator_planned_by_hand() -> None:
    highs = [10_000 + 1_237 * n for n in range(20)]
    by_hand = {
        # Above the mark, and far past the server's high.
        1: [(12_001, 12_400, Kind.MANUAL), (30_000, 30_100, Kind.MANUAL)],
        # Right above the mark (11,237 by poll 2), and below the backfill (at 8,001):
        # across the next slice's end and just below that.
        2: [
            (11_238, 11_300, Kind.MANUAL),
            (7_000, 7_010, Kind.MANUAL),
            (6_500, 6_999, Kind.MANUAL),
        ],
        # Further down, and one on the floor.
        4: [(4_400, 4_500, Kind.MANUAL), (2_000, 2_999, Kind.MANUAL)],
    }
    planned = polls(highs, floor=2_000, ahead=3, by_hand=by_hand)
    assert_tiled(planned, 2_000, highs[-1])
