"""The catalog sweep's pure side: how many stored release keys are due, and where a cycle is.

A catalog followed batch by batch is built from the closure of each batch's keys
(core/catalog.py's Closure): their repost chains, their rows' keys, and windows
around their runs. Some joins lie beyond that closure (a part posted beyond
every window the build looked in, that an upload filled in days later frees;
helper-100's and helper-102's cases in tests/test_catalog_sweep.py), and rows
written by an older version stay as that version made them until a batch
touches them again. The sweep builds every stored release key again, once per
`catalog_sweep_hours`, in key order (release keys are digests: key order is no
order of posters or dates, so each slice is a spread of the catalog), a
slice every tick: each key is marked pending as with no dates (the build looks
around its whole span), and the builder does the rest. So the followed catalog
groups its releases as a whole rebuild would within one cycle (every case found
so far; `uidx catalog build` also fills in dates of releases stored before they
were kept and drops rows no fragment is left of), at a cost spread evenly over it.

The pace is kept on the database's clock in one row (store/sweep.py):
`swept_at` is how far the sweep has got in time; a tick marks the keys the
time since then is worth, and moves `swept_at` on by just their worth (the
fraction of a key left is kept for the next tick). A pause (no coordinator
running) is made up for `MAX_CATCH_UP_SECONDS` at most (or two ticks, or two
keys' worth, where that is more: a small catalog's slices are single keys), and a
tick marks at most `MAX_KEYS` (the rest follow at the next ticks): a sweep
never floods the builds.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import attrs

# The longest pause made up at once (a coordinator that was down for a day does
# not mark a day's keys at its first tick: the cycle takes that much longer).
MAX_CATCH_UP_SECONDS = 600.0
# The most keys one tick marks (the rest of what is due follows at the next ticks).
MAX_KEYS = 20_000


@attrs.frozen
class Pace:
    """One tick's share of the sweep.

    Attributes:
        keys: how many keys to mark now (0: none due yet).
        swept_at: where the sweep's clock stands after marking them.
    """

    keys: int
    swept_at: datetime


def pace(
    total_keys: int, hours: float, swept_at: datetime, now: datetime, tick_seconds: float = 0.0
) -> Pace:
    """The keys due at `now`, when the sweep got as far as `swept_at`.

    Args:
        total_keys: the stored release keys (an estimate will do).
        hours: how long one cycle over all of them takes (> 0).
        swept_at: how far in time the sweep has marked keys.
        now: the clock now.
        tick_seconds: how often ticks come (a pause of up to two ticks is made up
            whole: a slow tick does not slow the sweep).

    Returns:
        The keys to mark (never more than MAX_KEYS), and `swept_at` moved on by
        their worth in time (a pause longer than MAX_CATCH_UP_SECONDS, or two ticks
        or two keys' worth where that is longer, counted as that).
    """
    if hours <= 0:
        raise ValueError(f"a sweep of {hours} hours")
    period = hours * 3600.0
    # In UTC: psycopg gives timestamptz in the session's TimeZone, and Python
    # subtracts and compares two datetimes of one tzinfo by their wall clocks (in
    # a zone with summer time, its autumn change stalled the sweep for an hour).
    now, swept_at = now.astimezone(UTC), swept_at.astimezone(UTC)
    if total_keys <= 0:
        return Pace(0, swept_at)
    # Two keys' worth at least: a tick that marks nothing keeps swept_at, so a
    # catch-up shorter than a key's worth never marks one (a catalog of fewer
    # keys than a cycle has MAX_CATCH_UP_SECONDS was never swept).
    catch_up = max(MAX_CATCH_UP_SECONDS, 2 * tick_seconds, 2 * period / total_keys)
    swept_at = max(swept_at, now - timedelta(seconds=catch_up))
    if now <= swept_at:
        return Pace(0, swept_at)
    elapsed = (now - swept_at).total_seconds()
    keys = min(MAX_KEYS, math.floor(total_keys * elapsed / period))
    if keys <= 0:
        return Pace(0, swept_at)
    return Pace(keys, swept_at + timedelta(seconds=keys * period / total_keys))


def position(after: bytes | None) -> float:
    """How far through the key space a cycle is (0 to 1) when its last key marked was
    `after` (None: at the start). Keys are digests, spread evenly over the space."""
    if not after:
        return 0.0
    return int.from_bytes(after[:8].ljust(8, b"\0"), "big") / float(1 << 64)


@attrs.frozen
class SweepState:
    """Where the catalog sweep is, as stored.

    Attributes:
        cycles: whole cycles over every stored key finished.
        cycle_started: when the current cycle began (None: the sweep never ran).
        after: the last key marked in the current cycle (None: at its start).
        swept_at: how far in time the sweep has marked keys (None: never ran).
        now: the database's clock when read.
        giving_way_since: since when its ticks give way to the batches (the
            build is behind them: they mark nothing); None: it is not.
    """

    cycles: int
    cycle_started: datetime | None
    after: bytes | None
    swept_at: datetime | None
    now: datetime
    giving_way_since: datetime | None = None

    @property
    def position(self) -> float:
        """How far through the current cycle (0 to 1)."""
        return position(self.after)
