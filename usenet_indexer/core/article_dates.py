"""The first article posted at or after a moment: a bisect over Date headers (pure code).

Theory of operation
-------------------
A server numbers a group's articles as they arrive, so their Date headers
rise with the numbers, give or take a poster's clock. `uidx ranges plan
--days N` wants the first article dated at or after now - N days without
reading a year of overview lines: a binary search over [low, high] that
reads one small OVER window per probe.

Articles go missing (cancelled, expired, taken down) and some Date headers
cannot be read, so a probe at n asks for the first *dated* article at or
after n (and no further than the search's current upper end); the caller
does the I/O (`DateSearch.next_probe` / `answer`, or `first_at_or_after`
with a plain function). The search keeps two invariants over [lo, hi):

- every dated article below `lo` is older than the cut-off;
- `found` is the first dated article at or above `hi` (None: none up to high).

A probe at mid = (lo + hi) // 2 that finds article m dated before the
cut-off moves lo to m + 1; one that finds m dated at or after the cut-off
sets found = m and hi = mid (nothing dated lies in [mid, m)); one that finds
nothing before hi sets hi = mid. Each probe halves [lo, hi) at least, so a
search takes at most bit_length(high - low + 1) + 1 probes; at lo == hi,
`found` is the answer. Dates that do not rise only move the answer to
another boundary: it is still a dated article at or after the cut-off.

Nothing here reads a clock: the cut-off comes in as an argument.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import attrs


@attrs.frozen
class Dated:
    """An article and the moment its Date header names (timezone-aware)."""

    article: int
    date: datetime


@attrs.frozen
class Probe:
    """Wanted: the first dated article in [first, last]."""

    first: int
    last: int


class Step(enum.Enum):
    """What an answer told the search."""

    OLDER = "older"  # dated before the cut-off: the answer is above it
    RECENT = "recent"  # dated at or after the cut-off: the answer is at or below it
    EMPTY = "empty"  # nothing dated in the probe's span


@attrs.define(eq=False)
class DateSearch:
    """The bisect as a state machine: ask `next_probe`, do the I/O, `answer` it.

    Build it with `between`.
    """

    cutoff: datetime
    _lo: int
    _hi: int  # exclusive
    _found: int | None = None
    probes: int = 0

    @classmethod
    def between(cls, low: int, high: int, cutoff: datetime) -> DateSearch:
        """A search over the articles low..high (an empty span when high < low).

        Raises:
            ValueError: the cut-off has no timezone (it could not be compared).
        """
        if cutoff.tzinfo is None:
            raise ValueError("the cut-off needs a timezone")
        return cls(cutoff, low, max(low, high + 1))

    @property
    def span(self) -> tuple[int, int]:
        """Where the answer may still be: [lo, hi] (hi = high + 1 stands for none)."""
        return self._lo, self._hi

    @property
    def done(self) -> bool:
        return self._lo >= self._hi

    @property
    def result(self) -> int | None:
        """The first dated article at or after the cut-off; None if there is none.

        Raises:
            ValueError: asked before the search is done.
        """
        if not self.done:
            raise ValueError("the search is not done")
        return self._found

    def next_probe(self) -> Probe | None:
        """The span to read next; None when the search is done."""
        if self.done:
            return None
        return Probe((self._lo + self._hi) // 2, self._hi - 1)

    def answer(self, probe: Probe, dated: Dated | None) -> Step:
        """What the probe found: its first dated article, or None.

        A dated article outside the probe's span counts as nothing found
        (a caller may read a little past `last`).

        Raises:
            ValueError: `probe` is not the one `next_probe` gives now.
        """
        if probe != self.next_probe():
            raise ValueError(f"{probe} is not the pending probe")
        self.probes += 1
        if dated is None or not probe.first <= dated.article <= probe.last:
            self._hi = probe.first
            return Step.EMPTY
        if dated.date < self.cutoff:
            self._lo = dated.article + 1
            return Step.OLDER
        self._found, self._hi = dated.article, probe.first
        return Step.RECENT


def first_at_or_after(
    low: int, high: int, cutoff: datetime, dated_at: Callable[[int], Dated | None]
) -> int | None:
    """The first article of low..high dated at or after `cutoff`, by bisection.

    Args:
        low, high: the articles to search.
        cutoff: the moment (timezone-aware).
        dated_at: the first dated article at or after n (None if none up to high).

    Returns:
        The article number, or None when every dated article is older.
    """
    search = DateSearch.between(low, high, cutoff)
    while (probe := search.next_probe()) is not None:
        search.answer(probe, dated_at(probe.first))
    return search.result


def parse_date(text: str) -> datetime | None:
    """A Date header as an aware datetime (no zone: UTC); None when it cannot be read."""
    try:
        moment = parsedate_to_datetime(text)
        if moment.tzinfo is None:  # "-0000": the zone is unknown (RFC 5322 3.3)
            return moment.replace(tzinfo=UTC)
        # In UTC now: a year-1 date 23 hours east of Greenwich cannot be compared.
        return moment.astimezone(UTC)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def first_dated(lines: Iterable[bytes], first: int, last: int) -> Dated | None:
    """The first overview line of an article in [first, last] with a readable Date.

    Lines are OVER lines (number, subject, from, date, ... tab separated);
    malformed ones and unreadable dates are passed over.
    """
    for line in lines:
        fields = line.split(b"\t", 4)
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        article = int(fields[0])
        if not first <= article <= last:
            continue
        date = parse_date(fields[3].decode("latin-1").strip())
        if date is not None:
            return Dated(article, date)
    return None
