"""The whole catalog built or exported a slice at a time (`uidx catalog build|export`).

Theory of operation
-------------------
`CatalogBuild.everything` and `export` merge every stored chunk at once: the
whole catalog in memory (~150 bytes a segment: tens of GB for a catalog of
100M articles), and nothing written or shown until the end. Here the stored
releases are walked in the order they were posted (store/posting_order.py)
and cut into slices of SLICE_SEGMENTS segments or more (core/slices.py), so
what is in memory at once is a slice and its closure, whatever the catalog
holds, and progress is reported after each slice.

A whole build merges each slice's keys again as if batches had touched
them (`CatalogBuild.around`): the same closure, merge and write as the
builds that follow the batches, under the same shard locks, held for one
slice's build at a time. So a coordinator's builders (and the edges it
offers builds to) go on building beside it, instead of being locked out for
the whole rebuild, and a shard one of them holds, or an edge's job reserved,
is waited for (`everything` refuses the edges' jobs in flight). Followed in
posting order, each slice's closure holds the keys of the slices around it
that its releases can be joined with, and the rows the slices before made
(`catalog_keys`), as a catalog followed batch by batch does; the tests hold
the result to `everything`'s. What `everything` does beyond that is done
here too: the latest dates of releases stored before they were kept are
filled in first (the closure's windows around a release with none are
open-ended), the keys still pending when the slices are done are built
(those the slices merged were taken as built by them), and the rows none of
whose keys has a fragment any more (which no closure reaches) are deleted,
PRUNE_ROWS rows of the catalog at a time (each page a statement of its own: one
over millions of rows outlasts the sessions' statement_timeout). Each phase
reports its progress as it goes, and once more when it ends.

An export merges each slice's keys with their closure (read only: nothing is
written) and writes the releases dated in the slice, oldest first,
as it goes. `CatalogBuild.export` lists the releases a probe found to hold
executables first, then those it renamed, then the rest (renames.apply),
each oldest first: here all are oldest first, by the date shown (the lines
are the same).

Sync code, for the command's thread: psycopg stays inside store/.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Protocol

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.coordinator.catalog_build import Built, CatalogBuild, summed
from usenet_indexer.core import catalog as core
from usenet_indexer.core import merge
from usenet_indexer.core.merge import APART_SECONDS, CatalogRelease
from usenet_indexer.core.renames import apply
from usenet_indexer.core.slices import Slice, Slicer, first_run, next_budget, written
from usenet_indexer.store.posting_order import PostingOrder, Runs

# The segments of a slice's runs, at least. A build holds some 150 bytes a segment
# it merges: 15 MB for the slice's own runs. Its closure adds the keys around them
# (its posters' releases within TOGETHER_SECONDS, the keys still going on, the rows
# they were joined into), and the next slice is as large as what it added
# (core/slices.next_budget), up to MOST_SLICE_SEGMENTS: a release posted over days
# is merged again by every slice it spans, and fewer, larger slices merge it fewer
# times. At 10M generated articles (a dozen uploads of 100k segments each go on
# for the whole 56 hours) the build peaked at 639 MB and took 49 s, against
# `everything`'s 1,262 MB and 24 s; slices of 100k segments that never grow took
# 405 MB and 260 s, growing to 400k 479 MB and 83 s.
SLICE_SEGMENTS = 100_000
MOST_SLICE_SEGMENTS = 1_000_000
# Unpacked fragments and merged chains kept from slice to slice (CatalogStore,
# core/catalog.Memo): the keys around a slice's end are merged again with the
# next slice, and are kept for it; a coordinator's builder keeps 2M.
KEPT_SEGMENTS = 3 * SLICE_SEGMENTS
KEPT_UPLOADS = 20_000
# Releases whose latest date is filled in at a time (their chunks read).
FILL_KEYS = 1_000
# Catalog rows checked for a stored key (and deleted if none has one) by one
# statement: 40 ms a page on a small machine (200k rows, one key in a hundred
# gone), far within the sessions' statement_timeout (60 s by default), and a
# round trip per page is nothing beside it.
PRUNE_ROWS = 10_000
# How long a whole build waits when a shard its slice reaches is held by another
# builder (a coordinator's, or an edge's job) before it looks again.
BUSY_SECONDS = 0.25

# What each phase is said to be doing (the progress lines).
DATED = "releases dated"
BUILT = "releases built"
EXPORTED = "releases exported"
PENDING = "pending keys built"
PRUNED = "catalog rows checked for a stored key"


class Progress(Protocol):
    """What a whole build or export reports as it goes."""

    def __call__(self, doing: str, done: int, total: int, *, last: bool = False) -> None:
        """`done` of `total` (0: not known) done in the phase `doing` (DATED, BUILT...);
        `last`: the phase has ended."""


def _silent(doing: str, done: int, total: int, *, last: bool = False) -> None:
    del doing, done, total, last


def _pause() -> None:
    time.sleep(BUSY_SECONDS)


@attrs.define(eq=False)
class WholeCatalog:
    """The whole catalog built (`build`) or exported (`export`) a slice at a time.

    Attributes:
        pool: the database's connection pool.
        pure: the pure unpacking and merge code (settings.pure_indexer).
        slice_segments: the segments of a slice's runs, at least.
        most_segments: the most segments of a slice's runs (core/slices.next_budget).
        prune_rows: catalog rows checked for a stored key by one statement.
        wait: called when a shard a slice reaches is held by another builder,
            before it looks again (sleeps BUSY_SECONDS).
    """

    pool: ConnectionPool
    pure: bool = False
    slice_segments: int = SLICE_SEGMENTS
    most_segments: int = MOST_SLICE_SEGMENTS
    prune_rows: int = PRUNE_ROWS
    wait: Callable[[], None] = _pause
    builder: CatalogBuild = attrs.field(init=False)
    order: PostingOrder = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        kept = max(KEPT_SEGMENTS, 3 * self.slice_segments)
        memo = core.Memo(limit=KEPT_UPLOADS, merge=merge.Memo(kept, KEPT_UPLOADS))
        self.builder = CatalogBuild(self.pool, pure=self.pure, unpacked_segments=kept, memo=memo)
        self.order = PostingOrder(self.pool)

    def build(self, quiet_seconds: float, progress: Progress = _silent) -> Built:
        """Merge every stored key again, slice by slice, beside any other builder, and
        write the rows (a row is shown once complete or quiet for `quiet_seconds`);
        what the builds did, summed.

        The latest dates of releases stored before they were kept are filled in
        first, the keys still pending after the slices are built too, and the rows
        none of whose keys has a fragment any more are deleted; each phase reports
        to `progress`.
        """
        self._fill_latest(progress)
        builds: list[Built] = []
        with self.order.runs(APART_SECONDS) as runs:
            done = 0
            progress(BUILT, done, runs.releases)
            slicer = Slicer(self.slice_segments)
            for piece in _slices(runs, slicer):
                built = self._around(piece.keys, quiet_seconds)
                builds.append(built)
                slicer.segments = self._budget(built.segments, piece)
                done += piece.releases
                progress(BUILT, done, runs.releases)
            progress(BUILT, done, runs.releases, last=True)
        # What was pending before (and what batches or held rows marked meanwhile): as
        # `everything` takes every pending key, but not what comes later (a running
        # coordinator's builders take that).
        builds += self._pending(self.builder.table.now(), quiet_seconds, progress)
        pruned = self.prune(progress)
        total = summed(builds)
        return attrs.evolve(total, pruned=total.pruned + pruned, more=False, busy=False)

    def export(self, progress: Progress = _silent) -> Iterator[CatalogRelease]:
        """Every release, oldest first, with what probes found applied, made a slice at a
        time (as `CatalogBuild.export` makes them, which lists those a probe found
        executables in or renamed first)."""
        with self.order.runs(APART_SECONDS) as runs:
            done = 0
            progress(EXPORTED, done, runs.releases)
            slicer = Slicer(self.slice_segments)
            for piece in _slices(runs, slicer):
                releases, merged = self._exported(piece)
                yield from releases
                slicer.segments = self._budget(merged, piece)
                done += piece.releases
                progress(EXPORTED, done, runs.releases)
            progress(EXPORTED, done, runs.releases, last=True)

    def prune(self, progress: Progress = _silent) -> int:
        """Delete the rows none of whose keys has a stored fragment, `prune_rows` rows
        of the catalog at a time in the order of their ids; how many."""
        table = self.builder.table
        states = table.states()
        total = states.shown + states.waiting
        after = checked = deleted = 0
        progress(PRUNED, checked, total)
        while True:
            page = table.prune_unstored(after, self.prune_rows)
            after = page.last
            checked += page.checked
            deleted += page.deleted
            total = max(total, checked)
            if page.checked < self.prune_rows:
                progress(PRUNED, checked, total, last=True)
                return deleted
            progress(PRUNED, checked, total)

    def _budget(self, merged: int, piece: Slice) -> int:
        """The next slice's budget, from what this one merged (core/slices.next_budget)."""
        return next_budget(self.slice_segments, self.most_segments, merged, piece.segments)

    def _around(self, keys: Sequence[bytes], quiet_seconds: float) -> Built:
        """A slice's keys built, once no other builder holds the shards they reach."""
        while (built := self.builder.around(keys, quiet_seconds)).busy:
            self.wait()
        return built

    def _pending(self, since: datetime, quiet_seconds: float, progress: Progress) -> list[Built]:
        """Pending builds until no key pending since `since` is left (another builder
        holding some is waited for)."""
        table = self.builder.table
        total = table.pending_since(since)
        builds: list[Built] = []
        done = 0
        progress(PENDING, done, total)
        while table.any_pending(since):
            built = self.builder.pending(quiet_seconds)
            builds.append(built)
            if built.busy or not built.pending:
                self.wait()
            # A build also takes the keys marked after `since`: they count too.
            done += built.pending
            total = max(total, done)
            progress(PENDING, done, total)
        progress(PENDING, done, total, last=True)
        return builds

    def _exported(self, piece: Slice) -> tuple[list[CatalogRelease], int]:
        """The releases a slice writes: its keys and their closure merged, what probes
        found applied, those dated in it, oldest first; and the segments merged.

        A release dated in the slice may hold a key that a row or a window found,
        no window was looked in around, and that link joins to a part beyond the
        closure (an upload of parts each posted within TOGETHER_SECONDS of the one
        before, cut by the slice's end). A build writes what it made, and the
        next slice's closure finds it through the rows; an export writes nothing
        back, and a later slice makes the whole upload, dated in this slice, where
        it is not written. So such keys are merged again as the slice's own (their
        windows looked in) until the releases dated in the slice hold none.
        """
        touched = set(piece.keys)
        while True:
            closure = self.builder.closure(sorted(touched))
            firsts = {key: first_run(span) for key, span in closure.spans.items()}
            releases, segments = self._merged_of(sorted(closure.keys), piece, firsts)
            beyond = closure.unwindowed(k for r in releases for k in r.sources)
            if not beyond:
                return releases, segments
            touched |= beyond

    def _merged_of(
        self, keys: list[bytes], piece: Slice, firsts: Mapping[bytes, int]
    ) -> tuple[list[CatalogRelease], int]:
        """The releases `keys` make that are placed in the slice (core/slices.placed),
        oldest first, with what probes found applied; and the segments merged."""
        builder = self.builder
        chunks = list(builder.store.chunks(keys))
        segments = core.segments_of(chunks)
        merged = core.releases_of(
            chunks,
            builder.store.probed(keys),
            builder.memo,
            pure=self.pure,
            pins=builder.table.pins(keys),
        )
        del chunks
        found = builder.probes.found(core.found_keys(merged))
        return written(merged, apply(merged, found), piece, firsts), segments

    def _fill_latest(self, progress: Progress) -> None:
        """Fill in the latest dates of the releases stored before they were kept (as
        `everything` does), FILL_KEYS at a time."""
        if not self.order.any_unfilled():
            return
        after = b""
        done = 0
        while keys := self.order.unfilled(after, FILL_KEYS):
            latest = core.latest_dates(self.builder.store.chunks(keys))
            self.builder.table.fill_latest(latest)
            after = keys[-1]
            done += len(keys)
            progress(DATED, done, 0)
        progress(DATED, done, 0, last=True)


def _slices(runs: Runs, slicer: Slicer) -> Iterator[Slice]:
    """The runs cut by `slicer` (whose budget the caller may change between slices)."""
    for run in runs:
        piece = slicer.add(run)
        if piece is not None:
            yield piece
    last = slicer.last()
    if last is not None:
        yield last
