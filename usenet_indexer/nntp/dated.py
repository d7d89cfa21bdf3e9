"""The first article posted at or after a cut-off, asked of a server (a trio adapter).

The bisect is core/article_dates.py's `DateSearch` (pure: where to look
next); this module reads OVER windows for it on a connection that has the
group selected. `uidx ranges plan --days` and the prefetcher's follower (the
backfill's floor) use it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import aclosing
from datetime import datetime
from typing import Final

from usenet_indexer.core.article_dates import Dated, DateSearch, Probe, first_dated
from usenet_indexer.nntp.client import NNTPClient

# Articles per OVER of a probe: enough to step over a few missing articles or
# unreadable dates in one command; a window with nothing dated doubles, up to
# MAX_WINDOW, so a long run of cancelled articles costs a few commands more.
FIRST_WINDOW: Final = 32
MAX_WINDOW: Final = 1 << 16


async def first_posted_since(
    client: NNTPClient,
    low: int,
    last: int,
    cutoff: datetime,
    progress: Callable[[str], None] | None = None,
) -> int | None:
    """The first article of low..last posted at or after `cutoff`; None when none is.

    Args:
        client: a connection with the group selected.
        low, last: the articles to search.
        cutoff: an aware datetime.
        progress: told of each probe (a line for an operator), if given.
    """
    search = DateSearch.between(low, last, cutoff)
    while (probe := search.next_probe()) is not None:
        dated = await _first_dated(client, probe)
        step = search.answer(probe, dated)
        if progress is not None:
            seen = (
                f"{dated.article} of {dated.date:%Y-%m-%d %H:%M:%S}" if dated else "nothing dated"
            )
            lo, hi = search.span
            left = "done" if search.done else f"searching {lo}..{hi - 1}"
            progress(f"probe {search.probes} at {probe.first}: {seen}, {step.value}; {left}")
    return search.result


async def _first_dated(client: NNTPClient, probe: Probe) -> Dated | None:
    """The first dated article in the probe's span, reading OVER windows from its start."""
    first, window = probe.first, FIRST_WINDOW
    while first <= probe.last:
        last = min(first + window - 1, probe.last)
        found: Dated | None = None
        async with aclosing(client.over(first, last)) as pieces:
            async for piece in pieces:
                # The rest of the reply is read (and dropped): the connection stays usable.
                found = found or first_dated(piece, first, last)
        if found is not None:
            return found
        first, window = last + 1, min(window * 2, MAX_WINDOW)
    return None
