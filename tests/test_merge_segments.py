"""A merged file's segments are made when first read (merge.Segments): what they say
must be what the list made at once says, for a file of one chunk and of several."""

from __future__ import annotations

from array import array

from usenet_indexer.core.batch import FileChunk, ReleaseChunk
from usenet_indexer.core.merge import ReleaseMerger, Segments, holds, listed

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
