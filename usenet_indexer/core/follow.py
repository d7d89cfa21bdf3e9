"""What to plan for a group the daemon follows: pure, no I/O, no clock.

Theory of operation
-------------------
At every poll the follower (prefetch/follower.py) asks a server for the
group's water marks and hands this module what it knows (`GroupView`);
`follow` answers with the spans to plan and the oddities to report.

- **The live head.** Everything above what is followed already (the
  follower's own mark, `followed_to`, or the highest planned article, if an
  operator planned higher) up to the high water mark less `margin` is
  planned as live ranges, which the edges lease before any other. A group
  seen for the first time is followed from the high water mark it had when
  it was added (what was posted before is the backfill's), or from the top
  of its plan if an operator planned it before (the posts since are not
  lost), else from its high water mark now.
- **The backfill**, when the group has a floor (the first article posted
  `backfill_days` ago, which the follower finds by a bisect over dates):
  one slice of `slice_articles` at a time below the lowest planned
  article (or below the live head's start), newest first, down to the
  floor and never below the server's low; the next slice only once fewer
  than `ahead` backfill ranges wait. So the backfill stays behind the
  live head and the plan never holds a group's whole history at once.
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
        top, bottom: the highest and lowest planned article of any range;
            None when nothing is planned.
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
    bottom: int | None
    floor: int | None
    backfill_waiting: int
    waiting_from: int | None = None
    last_high: int | None = None
    known_high: int | None = None


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
        followed = view.followed_to if view.top is None else max(view.followed_to, view.top)
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
    if head >= live_first:
        spans.append(Span(live_first, head, Kind.LIVE))
    new_followed = max(followed, head)
    backfill = _backfill(view, followed, slice_articles, ahead)
    if backfill is not None:
        spans.append(backfill)
    return Decision(tuple(spans), new_followed, tuple(quirks))


def _backfill(view: GroupView, followed: int, slice_articles: int, ahead: int) -> Span | None:
    if view.floor is None or view.backfill_waiting >= ahead:
        return None
    upper = (view.bottom if view.bottom is not None else followed + 1) - 1
    lowest = max(view.floor, view.low)
    if upper < lowest:
        return None
    return Span(max(lowest, upper - slice_articles + 1), upper, Kind.BACKFILL)
