"""A whole catalog build or export cut into slices of posting time.

Theory of operation
-------------------
`uidx catalog build` and `uidx catalog export` go through every stored
release. Merged all at once, the whole catalog is in memory (every segment
of every release, ~150 bytes each: tens of GB for a real catalog), and
nothing is written before the end. They go through it a slice at a time
instead, each slice no more than its budget of segments, in the order the
releases were posted (coordinator/catalog_whole.py).

The stored releases come in as *runs*: a key's chunks
(`release_times`, one row per stored chunk) posted within
`merge.APART_SECONDS` of each other, so a key posted again a day later
comes twice, once where each post is, and a key whose chunks came in many
batches of one posting once. Runs come in order of their earliest file,
then key; keys with no dated chunk first (their date is 0 or before).

A slice is an interval of posting time, [low, high), its upper end the
first run's start after the budget is reached (a cut falls only between
runs of different starts, so every date is in one slice). Its keys are the
keys of the runs that start in it and of the runs begun before it that
still go on at its start: every release whose earliest file is in the
interval has a key with a chunk that holds that file, in a run that starts
in the interval or spans its start. The driver merges each slice's keys
with their closure (core/catalog.py's Closure: repost chains, catalog
rows, the posters' releases within `uploads.TOGETHER_SECONDS`), as a pending
build merges what a batch touched; the export writes the releases dated in
the interval, so each release is written once, and the slices in order
write the catalog oldest first. A release dated 0 (or before 1970) of a key
with dated chunks too (an undated repost) is written where the key's first
run is (`placed`), the one slice sure to merge that key.

Pure: runs come in, slices go out.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import attrs

from usenet_indexer.core.catalog import Span
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.core.renames import Shown


@attrs.frozen
class Run:
    """A stored release key's chunks posted within `merge.APART_SECONDS` of each other.

    Attributes:
        key: the release key.
        start: its earliest file's date (0: undated).
        end: its latest file's date.
        segments: the key's segments (all its runs'): what merging it costs.
        first: the key's first run (each key is counted once as a release).
    """

    key: bytes
    start: int
    end: int
    segments: int
    first: bool = True


@attrs.frozen
class Slice:
    """The keys to merge for the releases whose earliest file is in [low, high).

    Attributes:
        low: the interval's start (None: from the first release on).
        high: its end, not in it (None: to the last release).
        keys: the keys of the runs starting in it and of those begun before still
            going on at `low`, each once, in order.
        releases: how many keys' first runs start in it (the releases done).
        segments: the segments of the runs starting in it.
    """

    low: int | None
    high: int | None
    keys: tuple[bytes, ...]
    releases: int
    segments: int = 0

    def holds(self, posted: int) -> bool:
        """Whether a release dated `posted` (its earliest file) is this slice's."""
        return (self.low is None or posted >= self.low) and (
            self.high is None or posted < self.high
        )


@attrs.define(eq=False)
class Slicer:
    """Cuts runs, taken in order of start then key, into slices of about `segments`
    segments (`add`, then `last` once every run is in).

    A run larger than the budget is a slice of its own; a slice holds at most
    `most_keys` runs besides those carried over (a budget of tiny keys is many of them).
    """

    segments: int
    most_keys: int = 20_000
    _runs: list[Run] = attrs.field(init=False, factory=list)
    _held: int = attrs.field(init=False, default=0)
    _low: int | None = attrs.field(init=False, default=None)
    # Runs of the slices before, by end (end, key): those still going on at a
    # slice's start are merged with it.
    _going: list[tuple[int, bytes]] = attrs.field(init=False, factory=list)

    def add(self, run: Run) -> Slice | None:
        """Take the next run; the slice before it, when the run starts a new one.

        Raises:
            ValueError: the run starts before the one before it (runs come in order).
        """
        cut = None
        if self._runs:
            last = self._runs[-1].start
            if run.start < last:
                raise ValueError(f"run {run.key.hex()} starts at {run.start}, before {last}")
            full = self._held >= self.segments or len(self._runs) >= self.most_keys
            if full and run.start > last:
                cut = self._cut(run.start)
        self._runs.append(run)
        self._held += run.segments
        return cut

    def last(self) -> Slice | None:
        """The last slice (None: no run came since the slice before)."""
        return self._cut(None) if self._runs else None

    def _cut(self, high: int | None) -> Slice:
        low = self._low
        going = self._going
        while going and low is not None and going[0][0] < low:
            heapq.heappop(going)
        keys = dict.fromkeys(key for _, key in sorted(going, key=lambda g: g[1]))
        keys.update(dict.fromkeys(run.key for run in self._runs))
        done = sum(run.first for run in self._runs)
        held = self._held
        for run in self._runs:
            heapq.heappush(going, (run.end, run.key))
        self._runs = []
        self._held = 0
        self._low = high
        return Slice(low, high, tuple(keys), done, held)


def next_budget(least: int, most: int, merged: int, own: int) -> int:
    """The budget of the slice after one whose runs held `own` segments and whose build
    merged `merged` (its closure's): what it merged beyond its own runs, between
    `least` and `most`.

    A slice's closure brings the releases around its runs, and the keys its
    posters' releases were joined with before: where a poster's upload goes on
    for days, every slice it spans merges all of it again (10M generated
    articles in slices of 100k segments merged 11 times the catalog's segments).
    A slice as large as what its closure brought beside the one before merges
    that once for as many segments of its own: what is merged stays near twice
    the catalog, and what is held at once near twice the closure.
    """
    return max(least, min(most, merged - own))


def first_run(span: Span) -> int:
    """Where a stored key's first run starts in posting order (store/posting_order.py):
    its earliest dated chunk's date, or, with none dated, its earliest date (0 at most).
    """
    return span.times[0][0] if span.times else min(span.posted, 0)


def placed(release: CatalogRelease, firsts: Mapping[bytes, int]) -> int:
    """The date that says which slice writes a release: its own, or, undated (or dated
    before 1970), the earliest of its keys' first runs (`firsts`: the first_run of
    the keys merged). A key's chunks not dated make a release of their own beside its
    dated ones (a repost under a posting tool's From); its key is in the slices of its
    dated runs only, and each release must be written by one slice that merges it.
    """
    if release.posted > 0:
        return release.posted
    keys = (release.key, *release.sources)
    return min((firsts[k] for k in keys if k in firsts), default=release.posted)


def written(
    merged: Sequence[CatalogRelease],
    shown: Sequence[Shown],
    piece: Slice,
    firsts: Mapping[bytes, int],
) -> list[CatalogRelease]:
    """The releases a slice writes of what its keys made: those placed in it (by the
    date shown: a probe's finding may join an earlier part to a release; see
    `placed`), oldest first, and releases of one date in the order they were merged
    (`merged`: before the findings were applied; `shown`: after).
    """
    at = {release.key: n for n, release in enumerate(merged)}
    mine = [s.release for s in shown if piece.holds(placed(s.release, firsts))]
    mine.sort(key=lambda release: (release.posted, at[release.key]))
    return mine
