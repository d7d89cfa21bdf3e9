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
        "bottom": None,
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


def test_the_live_head_starts_above_what_an_operator_planned() -> None:
    decision = follow(view(high=12_000, followed_to=10_000, top=11_000), slice_articles=SLICE)
    assert decision.spans == (Span(11_001, 12_000, Kind.LIVE),)


def test_a_group_planned_before_it_was_followed_goes_on_from_the_plans_top() -> None:
    decision = follow(view(high=12_000, top=11_000, bottom=5_000), slice_articles=SLICE)
    assert decision.spans == (Span(11_001, 12_000, Kind.LIVE),)


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
        view(followed_to=10_000, top=10_000, bottom=9_001, floor=7_500, backfill_waiting=1),
        slice_articles=SLICE,
    )
    assert again.spans == (Span(8_001, 9_000, Kind.BACKFILL),)
    full = follow(
        view(followed_to=10_000, top=10_000, bottom=8_001, floor=7_500, backfill_waiting=2),
        slice_articles=SLICE,
    )
    assert full.spans == ()
    last = follow(
        view(followed_to=10_000, top=10_000, bottom=8_001, floor=7_500, backfill_waiting=1),
        slice_articles=SLICE,
    )
    assert last.spans == (Span(7_500, 8_000, Kind.BACKFILL),)
    done = follow(
        view(followed_to=10_000, top=10_000, bottom=7_500, floor=7_500), slice_articles=SLICE
    )
    assert done.spans == ()


def test_the_backfill_never_goes_below_the_servers_low() -> None:
    decision = follow(view(low=9_500, floor=100), slice_articles=SLICE)
    assert decision.spans == (Span(9_500, 10_000, Kind.BACKFILL),)


def test_live_comes_before_backfill_in_one_poll() -> None:
    decision = follow(
        view(high=10_300, followed_to=10_000, top=10_000, bottom=9_001, floor=5_000),
        slice_articles=SLICE,
    )
    assert [s.kind for s in decision.spans] == [Kind.LIVE, Kind.BACKFILL]


def test_a_high_water_mark_that_went_down_plans_nothing_and_says_so() -> None:
    decision = follow(
        view(high=9_000, followed_to=10_000, top=10_000, bottom=1, last_high=10_000),
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
    waiting = view(low=500, followed_to=10_000, top=10_000, bottom=1, floor=1, waiting_from=200)
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


def polls(highs: list[int], floor: int | None, ahead: int = 2) -> list[tuple[int, int, Kind]]:
    """Play polls forward; each poll's planned ranges are done before the next but
    `ahead - 1` backfill ranges stay waiting. Returns every range planned."""
    planned: list[tuple[int, int, Kind]] = []
    state = view(floor=floor, high=highs[0])
    for high in highs:
        state = attrs.evolve(state, high=high, last_high=state.high)
        decision = follow(state, slice_articles=SLICE, ahead=ahead)
        planned += [(s.first, s.last, s.kind) for s in decision.spans]
        firsts = [p[0] for p in planned]
        lasts = [p[1] for p in planned]
        state = attrs.evolve(
            state,
            followed_to=decision.followed_to,
            top=max(lasts) if lasts else None,
            bottom=min(firsts) if firsts else None,
            backfill_waiting=min(ahead - 1, sum(1 for p in planned if p[2] is Kind.BACKFILL)),
        )
    return planned


def test_polls_tile_the_group_from_the_floor_to_the_head_once() -> None:
    highs = [10_000 + 137 * n for n in range(12)]
    planned = sorted(polls(highs, floor=4_321))
    at = 4_321
    for first, last, _kind in planned:
        assert first == at, f"hole or overlap at {at}"
        at = last + 1
    assert at == highs[-1] + 1
