"""What to plan for a group the daemon follows: pure, no I/O, no clock.

Theory of operation
-------------------
At every poll the follower (prefetch/follower.py) asks a server for the
group's water marks and hands this module what it knows (`GroupView`);
`follow` answers with the spans to plan and the oddities to report.

- **The live head.** Everything above what is followed already (the
  follower's own mark, `followed_to`) up to the high water mark less
  `margin` is planned as live ranges, which the edges lease before any
  other. A group seen for the first time is followed from the high water
  mark it had when it was added (what was posted before is the
  backfill's), or from the top of its plan if an operator planned it
  before (the posts since are not lost), else from its high water mark now.
- **The backfill**, when the group has a floor (the first article posted
  `backfill_days` ago, which the follower finds by a bisect over dates):
  one slice of `slice_articles` at a time below the lowest article the
  follower planned (or below the live head's start), newest first, down to
  the floor and never below the server's low; the next slice only once
  fewer than `ahead` backfill ranges wait. So the backfill stays behind the
  live head and the plan never holds a group's whole history at once.
- **Ranges planned by hand** (`uidx ranges plan`) may lie anywhere: above
  the follower's mark, below the backfill, in between. Both plan around
  them: the live head plans the articles of its span that no range holds
  (several spans when a planned range cuts it), and the backfill cuts its
  slice from the highest run of articles below it that no range holds
  (ending where the next planned range begins), stepping over planned
  ranges. Neither goes on from the top or bottom of a range planned by
  hand, which left the articles it jumped over to no one. So every article
  from the floor to the head is in one range, whatever was planned by hand.
  The follower is told only the ranges it may meet (those reaching above
  its mark, and those below the lowest article it planned), not the
  group's whole plan.
- **Quirks**, never planned around: a high water mark that went down (a
  renumbered group, or a server behind the one before) plans nothing live
  until it passes what is followed again; a low water mark above planned
  articles (expiry) is reported (the prefetcher records those articles as
  a gap without asking); an empty group (high < low) plans nothing.
"""

from __future__ import annotations

import enum

import attrs


class Kind(enum.Enum):
    """What planned a range (the `ranges.kind` column)."""

    LIVE = "live"
    BACKFILL = "backfill"
    MANUAL = "manual"  # `uidx ranges plan`


@attrs.frozen
class GroupView:
    """A group as the follower sees it at one poll.

    Attributes:
        low, high: the server's water marks now.
        followed_to: the highest article the follower planned (or started
            from); None for a group it never polled.
        top: the highest planned article of any range; None when nothing is
            planned (a group never polled is followed from there).
        reached: the lowest article of the follower's own ranges (live and
            backfill), where the backfill goes on below; None when it planned none.
        planned: the ranges the follower may meet, as (first, last) in article
            order, of any kind: every range reaching above `followed_to` (or
            above `top` when it is None: none), and every one starting below
            `reached` (or below `followed_to` + 1, or `top` + 1) that the
            backfill may still reach (ending at the floor or above). Ranges
            never overlap (`RangeStore.plan` refuses that).
        floor: the backfill's lowest article; None without backfill.
        backfill_waiting: backfill ranges planned or leased (a parked one waits
            for an operator, not for an edge).
        waiting_from: the lowest resume point of the ranges not done; None when
            every range is done.
        last_high: the high water mark of the poll before; None at the first.
        known_high: the high water mark stored before this poll (`uidx groups
            add` stores the server's): a group never followed is followed from
            there, so what was posted between its add and the daemon's first
            poll is not skipped.
    """

    low: int
    high: int
    followed_to: int | None
    top: int | None
    reached: int | None
    floor: int | None
    backfill_waiting: int
    waiting_from: int | None = None
    last_high: int | None = None
    known_high: int | None = None
    planned: tuple[tuple[int, int], ...] = ()


@attrs.frozen
class Span:
    """Articles [first, last] to plan as ranges of one kind (newest first for backfill)."""

    first: int
    last: int
    kind: Kind


@attrs.frozen
class Decision:
    """What one poll plans and reports.

    Attributes:
        spans: to plan, live first.
        followed_to: the follower's new mark (store it with the plan).
        quirks: one line each, for the log and `uidx status`.
    """

    spans: tuple[Span, ...]
    followed_to: int
    quirks: tuple[str, ...]


def follow(view: GroupView, *, margin: int = 0, slice_articles: int, ahead: int = 2) -> Decision:
    """The spans to plan for `view` (see the module docstring).

    Raises:
        ValueError: a negative margin, or a slice or `ahead` below one.
    """
    if margin < 0 or slice_articles < 1 or ahead < 1:
        raise ValueError(f"margin {margin}, slice {slice_articles}, ahead {ahead}")
    quirks: list[str] = []
    if view.high < view.low:
        followed = view.followed_to if view.followed_to is not None else view.high
        return Decision((), followed, (f"the group is empty (GROUP says {view.low}..{view.high})",))
    head = view.high - margin
    if view.followed_to is not None and view.high < view.followed_to:
        # Said alike at every poll until it passes again (and after a restart).
        quirks.append(
            f"high water mark went down to {view.high}, below what is followed ({view.followed_to})"
        )
    elif view.last_high is not None and view.high < view.last_high:
        quirks.append(f"high water mark went down from {view.last_high} to {view.high}")
    if view.waiting_from is not None and view.low > view.waiting_from:
        quirks.append(
            f"low water mark {view.low} is above articles not indexed yet from"
            f" {view.waiting_from} (expired on the server: recorded as a gap)"
        )
    if view.followed_to is not None:
        # Not the plan's top: a range planned by hand above the mark is planned around.
        followed = view.followed_to
    elif view.top is not None:
        followed = view.top  # planned before it was followed: on from the plan's top
    elif view.known_high is not None and view.low - 1 <= view.known_high <= head:
        followed = view.known_high  # from where it was when added
    else:
        followed = head
    spans: list[Span] = []
    # From the low water mark at the least: with a margin, the articles above what is
    # followed may all be gone below it (expired), and then nothing is planned live.
    live_first = max(followed + 1, view.low)
    spans += [Span(f, last, Kind.LIVE) for f, last in _unplanned(live_first, head, view.planned)]
    new_followed = max(followed, head)
    backfill = _backfill(view, followed, slice_articles, ahead)
    if backfill is not None:
        spans.append(backfill)
    return Decision(tuple(spans), new_followed, tuple(quirks))


def _unplanned(
    first: int, last: int, planned: tuple[tuple[int, int], ...]
) -> list[tuple[int, int]]:
    """The runs of [first, last] that no planned range holds, in article order."""
    runs: list[tuple[int, int]] = []
    at = first
    for low, high in planned:
        if high < at or low > last:
            continue
        if low > at:
            runs.append((at, low - 1))
        at = high + 1
    if at <= last:
        runs.append((at, last))
    return runs


def _backfill(view: GroupView, followed: int, slice_articles: int, ahead: int) -> Span | None:
    if view.floor is None or view.backfill_waiting >= ahead:
        return None
    upper = (view.reached if view.reached is not None else followed + 1) - 1
    lowest = max(view.floor, view.low)
    # Down past the ranges planned there (by hand) to the highest article none holds;
    # the slice ends where the next planned range below begins.
    for low, high in reversed(view.planned):
        if low > upper:
            continue
        if high < upper:
            lowest = max(lowest, high + 1)
            break
        upper = low - 1
    if upper < lowest:
        return None
    return Span(max(lowest, upper - slice_articles + 1), upper, Kind.BACKFILL)
