"""core/slices.py: runs in posting order cut into slices of posting time."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from usenet_indexer.core.catalog import Span
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.core.slices import Run, Slice, Slicer, first_run, next_budget, placed


def sliced(runs: list[Run], segments: int, most_keys: int = 20_000) -> list[Slice]:
    slicer = Slicer(segments, most_keys)
    slices = [s for run in runs if (s := slicer.add(run)) is not None]
    last = slicer.last()
    return [*slices, *([last] if last else [])]


def key(n: int) -> bytes:
    return n.to_bytes(16, "big")


def test_slices_cut_between_dates_once_their_budget_is_reached() -> None:
    runs = [
        Run(key(1), 0, 0, 5),  # undated: first
        Run(key(2), 100, 150, 5),
        Run(key(3), 100, 110, 5),  # the same start: never cut from the one before
        Run(key(4), 200, 900, 5),  # still going at 300 and 400
        Run(key(5), 300, 310, 5, first=False),  # a key's later run
        Run(key(6), 400, 400, 5),
    ]
    assert sliced(runs, 10) == [
        Slice(None, 200, (key(1), key(2), key(3)), 3, 15),
        Slice(200, 400, (key(4), key(5)), 1, 10),
        Slice(400, None, (key(4), key(6)), 1, 5),
    ]
    assert sliced(runs, 1_000) == [Slice(None, None, tuple(key(n) for n in range(1, 7)), 5, 30)]
    # A run over the budget is a slice of its own.
    assert [s.keys for s in sliced(runs, 1)] == [
        (key(1),), (key(2), key(3)), (key(4),), (key(4), key(5)), (key(4), key(6)),
    ]  # fmt: skip
    assert sliced([], 10) == []


def test_a_slice_holds_at_most_so_many_keys_of_its_own() -> None:
    runs = [Run(key(n), n, n, 0) for n in range(10)]
    assert [len(s.keys) for s in sliced(runs, 1 << 30, most_keys=4)] == [4, 4, 2]


def test_the_next_slice_is_as_large_as_what_the_closure_brought_within_bounds() -> None:
    assert next_budget(100, 1_000, merged=150, own=100) == 100  # the least
    assert next_budget(100, 1_000, merged=700, own=100) == 600
    assert next_budget(100, 1_000, merged=9_000, own=100) == 1_000  # the most
    slicer = Slicer(10)
    pieces = [slicer.add(Run(key(n), n, n, 5)) for n in range(3)]
    assert [p.keys for p in pieces if p] == [(key(0), key(1))]
    slicer.segments = 20  # the next slice's budget, set between slices
    pieces = [slicer.add(Run(key(n), n, n, 5)) for n in range(3, 9)]
    assert [p.keys for p in pieces if p] == [tuple(key(n) for n in range(2, 6))]


def test_runs_out_of_order_are_refused() -> None:
    slicer = Slicer(10)
    slicer.add(Run(key(1), 100, 100, 1))
    with pytest.raises(ValueError, match="starts at 99, before 100"):
        slicer.add(Run(key(2), 99, 99, 1))


def test_a_slice_holds_the_dates_from_its_start_to_the_next_ones() -> None:
    piece = Slice(100, 200, (), 0)
    assert [piece.holds(d) for d in (99, 100, 199, 200)] == [False, True, True, False]
    assert Slice(None, 5, (), 0).holds(-(2**63))
    assert Slice(5, None, (), 0).holds(2**63 - 1)


@given(
    spans=st.lists(st.tuples(st.integers(-50, 500), st.integers(0, 300), st.integers(0, 40))),
    segments=st.integers(1, 200),
)
def test_every_date_of_a_run_is_in_one_slice_and_that_slice_has_its_key(
    spans: list[tuple[int, int, int]], segments: int
) -> None:
    # Whatever the runs and the budget: the slices follow each other without a gap,
    # each date is in one, and a run's key is in the slice of every date it spans
    # (a release's earliest file is in a run of one of its keys), and counted once.
    runs = sorted(
        (Run(key(n), start, start + length, size) for n, (start, length, size) in enumerate(spans)),
        key=lambda r: (r.start, r.key),
    )
    slices = sliced(runs, segments)
    assert all(a.high == b.low for a, b in pairwise(slices))
    if slices:
        assert slices[0].low is None
        assert slices[-1].high is None
    assert sum(s.releases for s in slices) == len(runs)
    for run in runs:
        for date in {run.start, (run.start + run.end) // 2, run.end}:
            (mine,) = [s for s in slices if s.holds(date)]
            assert run.key in mine.keys


def test_a_key_is_in_posting_order_where_its_first_dated_chunk_is() -> None:
    times = ((1_700_000_500, 1_700_000_600), (1_700_090_000, None))
    assert first_run(Span("p", 1_700_000_500, None, times=times)) == 1_700_000_500
    assert first_run(Span("p", 0, None)) == 0  # undated
    assert first_run(Span("p", -86_400, 0)) == -86_400  # posted before 1970


def released(key: bytes, posted: int, *sources: bytes) -> CatalogRelease:
    return CatalogRelease(
        key=key, name="r", poster="p", groups=("a.b.c",), posted=posted, files_announced=1,
        complete=1.0, bytes=0, probe_candidate=False, dropped=None, chunks=1, files=(),
        sources=sources,
    )  # fmt: skip


def test_an_undated_release_is_written_where_its_keys_first_run_is() -> None:
    firsts = {key(1): 1_700_000_000, key(2): 0, key(3): 1_600_000_000}
    assert placed(released(key(9), 1_700_000_123, key(1)), firsts) == 1_700_000_123
    # A repost generation of key 1, undated (its key no stored key).
    assert placed(released(key(9), 0, key(1)), firsts) == 1_700_000_000
    assert placed(released(key(9), 0, key(1), key(3)), firsts) == 1_600_000_000
    assert placed(released(key(2), 0, key(2)), firsts) == 0
    assert placed(released(key(9), -5, key(8)), firsts) == -5  # no key merged: its own
