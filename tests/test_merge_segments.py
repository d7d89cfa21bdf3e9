"""A merged file's segments are made when first read (merge.Segments): what they say
must be what the list made at once says, for a file of one chunk and of several."""

from __future__ import annotations

from array import array
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.core.batch import FileChunk, ReleaseChunk
from usenet_indexer.core.merge import (
    ReleaseMerger,
    Segments,
    holds,
    listed,
    lowest,
    segment_numbers,
    segment_sizes,
)

KEY = bytes(16)
FILE = bytes(range(16))


def chunk(numbers: list[int], ids: list[str], posted: int) -> ReleaseChunk:
    file = FileChunk(
        key=FILE,
        name="a.rar",
        subject='"a.rar" yEnc (1/9)',
        index=1,
        total_segments=9,
        posted=posted,
        numbers=array("I", numbers),
        message_ids="\n".join(ids),
        sizes=array("I", [100 + n for n in numbers]),
    )
    return ReleaseChunk(KEY, "a", "p@q", ("alt.binaries.test",), 2, (file,))


def merged(*chunks: ReleaseChunk) -> Segments:
    merger = ReleaseMerger()
    merger.add_all(chunks)
    (release,) = list(merger.releases())
    (file,) = release.files
    assert isinstance(file.segments, Segments)
    return file.segments


def test_one_chunks_segments_read_lazily_are_the_list() -> None:
    segments = merged(chunk([1, 2, 3], ["a@b", "c@d", "e@f"], 1000))
    assert len(segments) == 3
    assert holds(segments, "c@d")
    assert not holds(segments, "c@")  # a whole id, never part of one
    assert segments == [(1, "a@b", 101), (2, "c@d", 102), (3, "e@f", 103)]
    assert listed(segments) == list(segments) == segments.listed()
    assert segments[0] == (1, "a@b", 101)
    assert min(segments) == (1, "a@b", 101)


def test_a_number_sent_twice_keeps_the_first_id_and_holds_only_it() -> None:
    # A post check's re-send of segment 2 under another id, in a later batch.
    segments = merged(chunk([1, 2], ["a@b", "c@d"], 1000), chunk([2, 3], ["x@y", "e@f"], 1010))
    assert len(segments) == 3
    assert segments == [(1, "a@b", 101), (2, "c@d", 102), (3, "e@f", 103)]
    assert holds(segments, "c@d")
    assert not holds(segments, "x@y")


def test_a_file_a_batch_cut_in_two_gives_its_figures_without_its_list() -> None:
    # A build reads the count, numbers, sizes and first segment of every file: a file
    # cut by a batch comes in two chunks whose numbers lie apart.
    segments = merged(
        chunk([4, 5, 6], ["g@h", "i@j", "k@l"], 1010), chunk([1, 2], ["a@b", "c@d"], 1000)
    )
    assert len(segments) == 5
    assert list(segment_numbers(segments)) == [1, 2, 4, 5, 6]
    assert sorted(segment_sizes(segments)) == [101, 102, 104, 105, 106]
    assert segments[0] == (1, "a@b", 101)
    assert lowest(segments) == (1, "a@b", 101)
    assert holds(segments, "i@j")
    assert not holds(segments, "i@")
    assert segments._made is None  # all of the above read without making the list
    assert segments.listed() == [
        (1, "a@b", 101), (2, "c@d", 102), (4, "g@h", 104), (5, "i@j", 105), (6, "k@l", 106)
    ]  # fmt: skip


# A file's chunks as batches bring them: numbers from 1..12, ids from a few (so a
# number comes again under the same id, as a retried batch sends it, or another).
_CHUNKS = st.lists(
    st.tuples(
        st.sets(st.integers(1, 12), min_size=1, max_size=6),
        st.lists(st.sampled_from(["a@b", "c@d", "e@f", "g@h"]), min_size=6, max_size=6),
        st.integers(1000, 1003),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(_CHUNKS)
def test_figures_read_from_the_chunks_are_those_of_the_list(
    drawn: list[tuple[set[int], list[str], int]],
) -> None:
    chunks = [chunk(sorted(numbers), ids[: len(numbers)], posted) for numbers, ids, posted in drawn]
    # Its files (a repost's generations apart), twice: the list made first is the oracle.
    for lazy, made in zip(every_file(chunks), every_file(chunks), strict=True):
        whole = made.listed()
        assert len(lazy) == len(whole)
        assert list(segment_numbers(lazy)) == [k for k, _, _ in whole]
        assert sorted(segment_sizes(lazy)) == sorted(size for _, _, size in whole)
        assert lazy[0] == whole[0]
        assert lowest(lazy) == min(whole)
        for message_id in ("a@b", "c@d", "e@f", "g@h"):
            assert holds(lazy, message_id) == any(m == message_id for _, m, _ in whole)
        assert lazy.listed() == whole


def every_file(chunks: list[ReleaseChunk]) -> list[Segments]:
    merger = ReleaseMerger()
    merger.add_all(chunks)
    files = [f.segments for release in merger.releases() for f in release.files]
    assert all(isinstance(segments, Segments) for segments in files)
    return cast(list[Segments], files)
