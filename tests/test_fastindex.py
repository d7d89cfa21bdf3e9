"""The compiled indexer (core/_fastindex.pyx) against its oracle, the pure one.

Two compiled parts run in a RangeIndexer that is not `pure`: the per-line
loop (`scan`) and take()'s conversion of a file's segments
(`file_segments`). What an edge would post (every batch packed and encoded
to the wire format, kept and dropped releases, counts of skipped lines by
reason) must be the same bytes as the pure indexer's on every generator
profile, on the real corpus and on fuzzed input. The compiled parts must be
built here (CI builds them with `pip install -e .`): otherwise these tests
would compare the pure indexer with itself.
"""

from __future__ import annotations

import logging
import random
import subprocess
import sys
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from usenet_indexer.cli import main
from usenet_indexer.core import _fastindex
from usenet_indexer.core import indexer as indexer_module
from usenet_indexer.core.batch import Batch, FileChunk, ReleaseChunk
from usenet_indexer.core.indexer import (
    COMPILED_FILES,
    COMPILED_SCAN,
    MAX_MESSAGE_ID_BYTES,
    RangeIndexer,
    _chunk_head,
    _make_file_chunk,
    _OpenFile,
    _parse_prefix,
    _parsed,
    _release_groups,
    _Texts,
    decode,
    indexer_kind,
    parse_date,
    release_pass_starts,
)
from usenet_indexer.core.reposts import pauses, restarts
from usenet_indexer.synth.generator import PROFILES, GeneratorConfig, generate
from usenet_indexer.testing.corpus import corpus_lines
from usenet_indexer.wire.batchwire import encode_batch
from usenet_indexer.wire.packed import pack_batch

if TYPE_CHECKING:
    from usenet_indexer.core._fastindex import FileArrays

GROUP = "alt.binaries.test"
FIRST = 5_000_000


def index_both(blocks: Sequence[bytes], take_every: int = 0) -> tuple[list[bytes], list[bytes]]:
    """The encoded batches of the pure and the compiled loop over the same blocks."""
    return index(blocks, True, take_every), index(blocks, False, take_every)


def index(blocks: Sequence[bytes], pure: bool, take_every: int) -> list[bytes]:
    indexer = RangeIndexer(group=GROUP, first=FIRST, keep_dropped=True, pure=pure)
    batches = []
    next_article = FIRST
    for number, block in enumerate(blocks, 1):
        next_article += block.count(b"\n") + 1
        indexer.add_data(block, next_article)
        if take_every and number % take_every == 0:
            batches.append(indexer.take())
    batches.append(indexer.finish())
    return [encode_batch(pack_batch(batch), range_id=1, epoch=1) for batch in batches]


def blocks_of(lines: Sequence[bytes], size: int) -> list[bytes]:
    """Lines in blocks of `size` lines, as a spool chunk or a dump block holds them."""
    return [b"\n".join(lines[at : at + size]) + b"\n" for at in range(0, len(lines), size)]


def test_the_compiled_loop_is_built() -> None:
    # Without it every comparison below would be the pure loop against itself.
    assert COMPILED_SCAN is not None, "core/_fastindex is not built: run scripts/bootstrap"
    assert COMPILED_FILES is not None
    assert indexer_kind(pure=False).startswith("compiled")


def test_the_open_file_made_without_its_init_has_nothing_it_would_run() -> None:
    # _fastindex.scan makes an _OpenFile as object.__new__ does and puts its init
    # fields, in this order, in their slots as its __init__ would: a validator,
    # converter, default, factory or post-init hook (or a field added) would be skipped.
    fields = attrs.fields(_OpenFile)
    assert [a.name for a in fields if a.init] == [
        "poster", "prefix", "after", "total", "counter", "tail", "date", "after_bytes",
        "segments", "yenc",
    ]  # fmt: skip
    assert not hasattr(_OpenFile, "__attrs_post_init__")
    assert not hasattr(_OpenFile, "__attrs_pre_init__")
    assert all(a.validator is None and a.converter is None for a in fields)
    assert all(a.default is attrs.NOTHING for a in fields if not a.init)


@pytest.mark.parametrize(
    ("cls", "slots"),
    [(FileChunk, _fastindex._CHUNK_FIELDS), (ReleaseChunk, _fastindex._RELEASE_FIELDS)],
    ids=["FileChunk", "ReleaseChunk"],
)
def test_a_chunk_made_without_its_init_has_nothing_it_would_run(
    cls: type, slots: tuple[str, ...]
) -> None:
    # _fastindex.file_chunks (a FileChunk) and _fastindex.released (a ReleaseChunk)
    # make one as object.__new__ does and set its fields, in this order, as its
    # __init__ would: a validator, converter, default, factory or post-init hook (or
    # a field added) would be skipped.
    fields = attrs.fields(cls)
    assert tuple(a.name for a in fields) == slots
    assert all(a.init for a in fields)
    assert not hasattr(cls, "__attrs_post_init__")
    assert not hasattr(cls, "__attrs_pre_init__")
    assert all(a.validator is None and a.converter is None for a in fields)


def test_a_release_chunk_made_by_the_compiled_assembly_equals_one_made_by_its_init() -> None:
    line = b'%d\tx [%d/2] - "%s" yEnc (1/1)\tp\xe9 <p@x>\tMon, 01 Jan 2024 00:00:0%d +0000\t<m%d@x>\t\t70\t5\tXref: h g:1 a:2'
    # The second file first, each posted in its own second: sorted by [i/M] again.
    lines = [line % (FIRST + i, i, name, i, i) for i, name in ((2, b"a.par2"), (1, b"b.rar"))]
    made = [index_once(lines, pure) for pure in (True, False)]
    pure, compiled = (batch.releases for batch in made)
    assert compiled == pure
    assert [[f.name for f in r.files] for r in compiled] == [["b.rar", "a.par2"]]
    assert [f.posted % 60 for f in compiled[0].files] == [1, 2]
    assert compiled[0].groups == ("a", "g")
    assert compiled[0].poster == "p\xe9 <p@x>"
    assert compiled[0].name == pure[0].name  # the cached name, set on first reading


def index_once(lines: Sequence[bytes], pure: bool) -> Batch:
    indexer = RangeIndexer(group=GROUP, first=FIRST, pure=pure)
    indexer.add_data(b"\n".join(lines), FIRST + len(lines) + 1)
    return indexer.finish()


# The rest of a line after "bytes" as an Xref parser meets it: fields, separators
# of every kind bytes.split() knows and some it does not, colons, NUL bytes,
# bytes UTF-8 does not read, a megabyte.
_XREF_BITS = st.sampled_from(
    [b"Xref:", b"xref:", b"XREF: ", b"Xref", b"xre", b" ", b"\t", b"\x0b", b"\x0c", b"\r",
     b"\n", b"\x1c", b"\xa0", b":", b"::", b"a", b"alt.bin", b"\x00", b"\xe9", b"\xc3\xa9",
     b"12", b"h", b"x" * (1 << 20)]
)  # fmt: skip


@settings(max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rests=st.lists(st.lists(_XREF_BITS, max_size=14).map(b"".join), max_size=4))
@example(rests=[b"5400\tXref: h alt.binaries.a:1 b:2", b"1\tXref: h b:3 :4 c:d:5"])
@example(rests=[b"1\tXREF:h\x0ba:1\x0cb:1\x1cc:1\t:x", b"\txref: h \xe9:1 \xc3\xa9:2"])
@example(rests=[b"1\tXref:", b"1\tXref", b"Xref: h a:1", b"1\t\tXref: h a:1"])
def test_a_releases_groups_are_read_as_the_pure_path_reads_them(rests: list[bytes]) -> None:
    members = [
        _OpenFile(b"p", b"x ", b"1) ", 1, b"1/1", b"", b"d", rest, bytearray()) for rest in rests
    ]
    assert _fastindex.xref_groups(members) == _release_groups(members)


def test_a_file_chunk_made_by_the_compiled_conversion_equals_one_made_by_its_init() -> None:
    assert COMPILED_FILES is not None
    line = b'%d\tx [1/2] - "a.rar" yEnc (%d/3) tail\tp <p@x>\tMon, 01 Jan 2024 00:00:%02d +0000\t<m%d@x>\t\t70%d\t5\tXref: h g:1'
    indexer = RangeIndexer(group=GROUP, first=FIRST)
    indexer.add_data(b"\n".join(line % (FIRST + k, k, k, k, k) for k in (1, 2, 3)), FIRST + 4)
    (open_file,) = indexer._open.values()
    open_file.info = _parse_prefix(open_file.prefix)
    arrays = COMPILED_FILES.file_arrays(open_file.segments, open_file.total, MAX_MESSAGE_ID_BYTES)
    assert arrays is not None
    dates: dict[bytes, int] = {}
    for starts in ([], [FIRST + 2], [FIRST + 9]):
        (piece, *others), repeats = COMPILED_FILES.file_pieces(arrays, starts)
        made, made_repeats = COMPILED_FILES.file_chunks(
            arrays, starts, FileChunk, _chunk_head(open_file), dates, _parsed
        )
        assert made_repeats == repeats
        assert piece is not None
        expected = _make_file_chunk(
            open_file, {}, piece[0], piece[2], piece[1], posted=_parsed({}, piece[3])
        )
        assert made[0] == expected
        assert [type(getattr(made[0], a.name)) for a in attrs.fields(FileChunk)] == [
            type(getattr(expected, a.name)) for a in attrs.fields(FileChunk)
        ]
        assert len(made) == 1 + len(others)
    # A date parsed once is taken from the batch's dates.
    assert dates == {
        b"Mon, 01 Jan 2024 00:00:01 +0000": 1704067201,
        b"Mon, 01 Jan 2024 00:00:02 +0000": 1704067202,
    }
    dates[b"Mon, 01 Jan 2024 00:00:01 +0000"] = 7
    (made_first, *_), _ = COMPILED_FILES.file_chunks(
        arrays, [], FileChunk, _chunk_head(open_file), dates, _parsed
    )
    assert made_first is not None
    assert made_first.posted == 7
    with pytest.raises(ValueError, match="head"):
        COMPILED_FILES.file_chunks(arrays, [], FileChunk, (), dates, _parsed)  # type: ignore[arg-type]


def test_an_open_file_made_by_the_compiled_loop_equals_one_made_by_its_init() -> None:
    line = b'%d\tx [1/2] - "a.rar" yEnc (1/3) tail\tp <p@x>\tdate\t<m@x>\t\t700\t5\tXref: h g:1'
    made = []
    references = []
    for pure in (True, False):
        indexer = RangeIndexer(group=GROUP, first=FIRST, pure=pure)
        indexer.add_data(line % FIRST, FIRST + 1)
        (open_file,) = indexer._open.values()
        made.append({a.name: getattr(open_file, a.name) for a in attrs.fields(_OpenFile) if a.init})
        assert not hasattr(open_file, "info")
        # The references held: none more, none fewer (the file and its own fields).
        references.append(
            [sys.getrefcount(open_file)]
            + [sys.getrefcount(getattr(open_file, name)) for name in ("segments", "after", "tail")]
        )
        del open_file
    assert made[0] == made[1]
    assert references[0] == references[1]
    assert made[1]["yenc"] is True
    assert made[1]["total"] == 3


def _segments(*segments: tuple[bytes, int, bytes, bytes]) -> bytearray:
    """A file's buffer as the loops fill it: k, article, date, message-id, bytes, each + tab."""
    return bytearray(b"".join(b"%s\t%d\tdate\t%s\t%s\t" % (k, a, m, s) for k, a, m, s in segments))


def _arrays(segments: bytearray, total: int) -> FileArrays:
    assert COMPILED_FILES is not None
    found = COMPILED_FILES.file_arrays(segments, total, MAX_MESSAGE_ID_BYTES)
    assert found is not None
    return found


def _texts(segments: bytearray) -> _Texts:
    parts = bytes(segments).split(b"\t")
    return _Texts(parts[0:-1:5], parts[1::5], parts[2::5], parts[3::5], parts[4::5])


def test_a_file_posted_out_of_order_is_converted_by_number() -> None:
    assert COMPILED_FILES is not None
    # Segments 3, 1, 2 of 5 (many connections; 4 and 5 not yet posted), zero padded.
    arrays = _arrays(
        _segments(
            (b"03", 7, b"<c@x>", b"300"), (b"001", 8, b"<a@x>", b"100"), (b"2", 9, b"<b@x>", b"200")
        ),
        5,
    )
    assert (arrays.first, arrays.last, arrays.pauses) == (7, 9, [])  # in the order the lines came
    pieces, repeats = COMPILED_FILES.file_pieces(arrays, [])
    assert repeats == 0
    assert len(pieces) == 1
    assert pieces[0] is not None
    numbers, sizes, message_ids, date = pieces[0]
    assert list(numbers) == [1, 2, 3]
    assert list(sizes) == [100, 200, 300]
    assert message_ids == "a@x\nb@x\nc@x"
    assert date == b"date"


def test_a_file_posted_twice_is_cut_where_the_repost_starts() -> None:
    assert COMPILED_FILES is not None
    # 1, 2, 2 (a post check's re-send), 3; then the whole file again from article 20.
    segments = [(b"1", 7), (b"2", 8), (b"2", 9), (b"3", 10), (b"1", 20), (b"2", 21), (b"3", 22)]
    arrays = _arrays(_segments(*((k, a, b"<%d@x>" % a, b"5") for k, a in segments)), 3)
    assert arrays.repeats
    assert COMPILED_FILES.pass_starts([arrays], True, ()) == [20]
    pieces, repeats = COMPILED_FILES.file_pieces(arrays, [20])
    assert repeats == 1
    assert [p[2] for p in pieces if p is not None] == ["7@x\n8@x\n10@x", "20@x\n21@x\n22@x"]


# Gaps between a file's articles: other uploads' articles in between, lines
# out of article order, and pauses near reposts.MIN_GAP, where a pause begins.
_GAPS = st.sampled_from([1, 1, 1, 1, 2, 3, 0, -2, 999, 1000, 1001, 2**40])


@settings(max_examples=300, deadline=None)
@given(gaps=st.lists(_GAPS, min_size=1, max_size=200), start=st.integers(0, 2**61))
# A pause just past MIN_GAP: found in a file of WIDE + 2 segments, not of WIDE + 1.
@example(gaps=[1] * 25 + [1001] + [1] * 25, start=10**6)
@example(gaps=[1] * 24 + [1001] + [1] * 25, start=10**6)
# A gap of exactly the width a pause must pass, beside a pause.
@example(gaps=[1] * 50 + [1001] + [1] * 40 + [1000] + [1] * 5, start=10**6)
def test_a_files_pauses_are_found_as_reposts_pauses_finds_them(gaps: list[int], start: int) -> None:
    # The compiled conversion finds a file's pauses itself, in the same pass
    # (no int per segment); reposts.pauses is its oracle.
    articles = list(accumulate(gaps, initial=start))
    assume(all(0 <= a < 2**62 for a in articles))
    arrays = _arrays(
        _segments(*((b"%d" % k, a, b"<m@x>", b"1") for k, a in enumerate(articles, 1))),
        len(articles),
    )
    assert (arrays.first, arrays.last, arrays.pauses) == (
        articles[0],
        articles[-1],
        pauses(articles),
    )
    assert arrays.ordered == (articles == sorted(articles))


# A file's numbers as tools post them: in order, a little shuffled, re-sent,
# reposted or started over; in article order with gaps (pauses among them).
_NUMBERS = st.lists(st.integers(1, 40), min_size=1, max_size=300)
_ARTICLE_GAPS = st.lists(st.sampled_from([1, 1, 1, 2, 5, 1000, 1001, 60_000]), min_size=300)


@settings(max_examples=300, deadline=None)
@given(numbers=_NUMBERS, gaps=_ARTICLE_GAPS, padded=st.booleans())
@example(numbers=[30, 31, 32, 1, 2, 3, 33], gaps=[1] * 300, padded=False)
def test_a_files_restarts_are_found_as_reposts_restarts_finds_them(
    numbers: list[int], gaps: list[int], padded: bool
) -> None:
    # As indexer._restarts reads them: none where a k is zero padded.
    articles = list(accumulate(gaps[: len(numbers)], initial=10**6))[1:]
    form = b"%03d" if padded else b"%d"
    arrays = _arrays(
        _segments(
            *((form % k, a, b"<m%d@x>" % a, b"1") for k, a in zip(numbers, articles, strict=True))
        ),
        40,
    )
    expected = [] if padded else restarts(numbers, articles, 40)
    assert arrays.restarts == expected
    assert arrays.repeats == (len(set(numbers)) < len(numbers))


def _interleaved(
    files: list[list[int]], gaps: list[int], seed: random.Random
) -> tuple[list[int], list[list[int]]]:
    """A release's files' segments interleaved in article order, as they were posted: the
    article numbers (the gaps between them from `gaps`, again and again), and each file's."""
    count = sum(map(len, files))
    articles = list(accumulate((gaps * (count // len(gaps) + 1))[:count], initial=10**6))[1:]
    owners = [at for at, numbers in enumerate(files) for _ in numbers]
    seed.shuffle(owners)
    given_to: list[list[int]] = [[] for _ in files]
    for owner, article in zip(owners, articles, strict=True):
        given_to[owner].append(article)
    return articles, given_to


@settings(max_examples=300, deadline=None)
@given(
    # N of 40 to 60, or far above the segments seen (then the distinct numbers are
    # sorted, not counted out over N).
    files=st.lists(
        st.tuples(_NUMBERS, st.integers(40, 60) | st.integers(5_000, 500_000), st.booleans()),
        min_size=1,
        max_size=4,
    ),
    gaps=_ARTICLE_GAPS,
    seed=st.randoms(use_true_random=False),
    cut=st.booleans(),
    # Where the release's files start over (the indexer's restart cuts): some of its
    # articles, by position.
    resets=st.lists(st.integers(0, 10**6), max_size=4),
)
def test_a_releases_passes_start_where_release_pass_starts_finds_them(
    files: list[tuple[list[int], int, bool]],
    gaps: list[int],
    seed: random.Random,
    cut: bool,
    resets: list[int],
) -> None:
    articles, given_to = _interleaved([numbers for numbers, _, _ in files], gaps, seed)
    count = len(articles)
    buffers = [
        _segments(
            *(
                ((b"%03d" if padded else b"%d") % k, a, b"<m%d@x>" % a, b"1")
                for k, a in zip(numbers, given_to[at], strict=True)
            )
        )
        for at, (numbers, _, padded) in enumerate(files)
    ]
    assert COMPILED_FILES is not None
    arrays = [_arrays(b, total) for b, (_, total, _) in zip(buffers, files, strict=True)]
    at = sorted({articles[i % count] for i in resets})
    expected = release_pass_starts(
        [(_texts(b), total) for b, (_, total, _) in zip(buffers, files, strict=True)],
        cut=cut,
        resets=at,
    )
    assert COMPILED_FILES.pass_starts(arrays, cut, at) == expected
    assert list(COMPILED_FILES.sorted_articles(arrays)) == articles


@settings(max_examples=300, deadline=None)
@given(
    # Small releases: a one-segment .nfo or .sfv and a file or two of a few segments,
    # posted once or again after a pause (too few numbers come again for a pass).
    files=st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=4), min_size=1, max_size=3),
    gaps=st.lists(st.sampled_from([1, 5, 40, 1000, 1001, 6000]), min_size=12, max_size=12),
    seed=st.randoms(use_true_random=False),
    cut=st.booleans(),
)
def test_a_small_releases_cuts_are_where_release_pass_starts_finds_them(
    files: list[list[int]], gaps: list[int], seed: random.Random, cut: bool
) -> None:
    # The compiled twin of the cuts of a release too few of whose numbers come again
    # for a pass (reposts.gap_cuts and reposts.resumed), against the pure one.
    _, given_to = _interleaved(files, gaps, seed)
    buffers = [
        _segments(
            *(
                (b"%d" % k, a, b"<m%d@x>" % a, b"1")
                for k, a in zip(numbers, given_to[at], strict=True)
            )
        )
        for at, numbers in enumerate(files)
    ]
    assert COMPILED_FILES is not None
    arrays = [_arrays(b, 3) for b in buffers]
    expected = release_pass_starts([(_texts(b), 3) for b in buffers], cut=cut)
    assert COMPILED_FILES.pass_starts(arrays, cut, []) == expected


@pytest.mark.parametrize(
    ("segments", "total"),
    [
        ([(b"0", 7, b"<a@x>", b"1")], 5),  # k of 0
        ([(b"6", 7, b"<a@x>", b"1")], 5),  # k past N
        ([(b"+1", 7, b"<a@x>", b"1")], 5),  # int() reads it; the pure path decides
        ([(b"1", 7, b"<a<b@x>", b"1")], 5),
        ([(b"1", 7, b"<>", b"1"), (b"2", 8, b"a@x", b"1")], 5),
        ([(b"1", 7, b"<>", b"1")], 5),  # the segment-by-segment check drops it
        ([(b"1", 7, b"<" + b"m" * 1000 + b">", b"1")], 5),
        ([(b"1", 7, b"<a@x>", b"4294967296")], 5),  # past uint32
        ([(b"1", 7, b"<a@x>", b"")], 5),
        ([(b"1", 2**62, b"<a@x>", b"1")], 5),  # an article number past int64's range here
        ([(b"1", 2**64, b"<a@x>", b"1")], 5),  # 20 digits: read in 64 bits it wraps to 0
        ([(b"1", 7, "<é@x>".encode(), b"1")], 5),  # not ASCII: decode() reads it
        ([(b"1", 7, b"<a>b@x>", b"1")], 5),
        ([(b"1", 7, b"<a@x>>", b"1")], 5),
        ([(b"1", 7, b"<a@x", b"1")], 5),
        ([(b"1", 7, b"a@x>", b"1")], 5),
        ([(b"1", 7, b"<a@x>", b"1"), (b"2", 8, b"<b@x>x", b"1")], 5),
        ([(b"1", 7, b"<a@x\x80>", b"1")], 5),
    ],
)
def test_files_off_the_common_case_are_left_to_the_pure_path(
    segments: list[tuple[bytes, int, bytes, bytes]], total: int
) -> None:
    assert COMPILED_FILES is not None
    assert COMPILED_FILES.file_arrays(_segments(*segments), total, MAX_MESSAGE_ID_BYTES) is None


def test_a_message_id_is_checked_in_every_place_of_its_text() -> None:
    # Eight bytes at a time and the rest one by one: a bracket or a byte above 127
    # anywhere in the text leaves the file to the pure path, in ids of any length.
    assert COMPILED_FILES is not None
    for length in range(1, 21):
        text = bytes(b"a@x0123456789abcdefgh"[:length])
        assert _arrays(_segments((b"1", 7, b"<%s>" % text, b"1")), 5).count == 1
        for at in range(length):
            for bad in (b"<", b">", b"\x80", b"\xff"):
                forged = text[:at] + bad + text[at + 1 :]
                segments = _segments((b"1", 7, b"<%s>" % forged, b"1"))
                assert COMPILED_FILES.file_arrays(segments, 5, MAX_MESSAGE_ID_BYTES) is None


def test_article_numbers_up_to_the_cap_are_read() -> None:
    # 18 digits and fewer are read unchecked, more checked against the cap.
    for article in (7, 10**17 + 3, 10**18 - 1, 10**18, 2**62 - 1):
        found = _arrays(_segments((b"1", article, b"<a@x>", b"1")), 5)
        assert (found.first, found.last) == (article, article)


def test_a_zero_padded_article_number_is_left_to_the_pure_path() -> None:
    assert COMPILED_FILES is not None
    found = COMPILED_FILES.file_arrays(
        bytearray(b"1\t0007\tdate\t<a@x>\t1\t"), 5, MAX_MESSAGE_ID_BYTES
    )
    assert found is None


@pytest.mark.parametrize("profile", PROFILES)
def test_most_generated_files_take_the_compiled_conversion(profile: str) -> None:
    # Else the comparisons below would test the pure path against itself: most
    # files, and most of those that repeat numbers (re-sent segments, reposts).
    generated = generate(GeneratorConfig(articles=20_000, seed=5, profile=profile))
    indexer = RangeIndexer(group=GROUP, first=FIRST)
    indexer.add_data(b"\n".join(generated.lines), FIRST + len(generated.lines))
    files = list(indexer._open.values())
    assert COMPILED_FILES is not None
    converted = [
        COMPILED_FILES.file_arrays(f.segments, f.total, MAX_MESSAGE_ID_BYTES) for f in files
    ]
    assert sum(c is not None for c in converted) > 0.6 * len(files)
    repeating = [
        c
        for f, c in zip(files, converted, strict=True)
        if len(set(_texts(f.segments).ks)) < f.count
    ]
    assert len(repeating) > 20
    assert sum(c is not None and c.repeats for c in repeating) > 0.6 * len(repeating)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_generator_profile_gives_the_same_batches(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=40_000, seed=5, profile=profile))
    blocks = blocks_of(generated.lines, 3_000)
    pure, compiled = index_both(blocks, take_every=5)
    assert len(pure) == 3
    assert sum(map(len, pure)) > 300_000  # releases, not empty batches
    assert compiled == pure


def test_the_real_corpus_gives_the_same_batches(corpus_dir: Path) -> None:
    lines = corpus_lines(corpus_dir, FIRST, GROUP)
    pure, compiled = index_both(blocks_of(lines, 1_000), take_every=10)
    assert sum(map(len, pure)) > 300_000
    assert compiled == pure


# Fuzzed lines: a good segment line, then (more often than not) one fault
# drawn from what servers and posters send and what breaks parsers; few
# enough values that segments meet their files again.
_MB = b"x" * (1 << 20)
_BIG = st.sampled_from([2**64, 2**64 - 1, 2**32, 2**32 - 1, 10**7, 500_001])
_HEADS = st.sampled_from(
    [
        b"",
        b'Show.S01E01 [01/12] - "show.part01.rar" yEnc ',
        b'"a.par2" yEnc ',
        b"file.exe ",
        b"(????) [05/13] - ",
        b"\xff\xfebad utf-8 ",
    ]
)
_GOOD = st.tuples(
    st.integers(1, 10**6).map(b"%d".__mod__),  # number
    _HEADS,
    st.one_of(st.just(1), st.integers(0, 12)),  # k
    st.integers(1, 12),  # N
    st.sampled_from([b"%d/%d", b"%03d/%03d"]),  # the counter's form
    st.sampled_from([b"", b" yEnc", b' - "x.rar"']),  # tail
    st.sampled_from([b"a@x", b"b@x"]),  # poster
    st.sampled_from([b"Mon, 6 May 2024 10:00:00 +0000", b"garbage"]),
    st.integers(0, 40).map(b"<%d@x>".__mod__),  # message-id
    st.integers(0, 800_000).map(b"%d".__mod__),  # bytes
    st.sampled_from(
        [
            [b"5400"],
            [b"5400", b"Xref: h alt.binaries.a:1 b:2"],
            [b"5400", b"XREF:h\x0balt.binaries.b:1 :2 c:d:3 \xe9t\xe9:4 \x00:5", b"x:1"],
        ]
    ),
)
_FAULTS = st.one_of(
    st.none(),
    st.tuples(st.just(0), st.sampled_from([b"", b"12a", b"-5", b"18446744073709551616", b"0"])),
    st.tuples(st.just(1), st.sampled_from([b"Re: ", b"nul\x00", b"tab\t", b"yenc ", _MB])),
    st.tuples(st.just(2), st.sampled_from([b"", b"(", b"(/3)", b"(x/5)", b"[1/3]", b"(2/3) "])),
    st.tuples(st.just(3), _BIG.map(b"%d".__mod__)),  # k
    st.tuples(st.just(4), _BIG.map(b"%d".__mod__)),  # N
    st.tuples(st.just(5), st.sampled_from([b"", _MB[:5000]])),  # poster
    st.tuples(
        st.just(6), st.sampled_from([b"", b"<>", b"<a<b>", b"abc", b"<" + b"m" * 1000 + b">"])
    ),
    st.tuples(st.just(7), st.sampled_from([b"<first@x>"])),  # References
    st.tuples(
        st.just(8), st.one_of(_BIG.map(b"%d".__mod__), st.sampled_from([b"", b"1x", b"007"]))
    ),
    st.tuples(st.just(9), st.integers(1, 7)),  # fields left
)


def _line(good: tuple[Any, ...], fault: tuple[int, Any] | None) -> bytes:
    number, head, k, total, form, tail, poster, date, mid, size, rest = good
    counter = b"(" + form % (k, total) + b")"
    references = b""
    what, value = fault if fault is not None else (-1, None)
    value = cast(Any, value)
    if what == 0:
        number = value
    elif what == 1:
        head = value + head
    elif what == 2:
        counter = value + counter if value.endswith(b" ") else value
    elif what in (3, 4):
        counter = b"(%d/%s)" % (k, value) if what == 4 else b"(%s/%d)" % (value, total)
    elif what == 5:
        poster = value
    elif what == 6:
        mid = value
    elif what == 7:
        references = value
    elif what == 8:
        size = value
    fields = [number, head + counter + tail, poster, date, mid, references, size, *rest]
    return b"\t".join(fields[: value if what == 9 else None])


_LINES = st.builds(_line, _GOOD, _FAULTS)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_LINES, max_size=40),
    repeat=st.integers(1, 4),
    block=st.integers(1, 30),
    crlf=st.booleans(),
    threaded=st.booleans(),
    shuffle=st.one_of(st.none(), st.randoms(use_true_random=False)),
)
def test_fuzzed_lines_give_the_same_batches(
    lines: list[bytes],
    repeat: int,
    block: int,
    crlf: bool,
    threaded: bool,
    shuffle: random.Random | None,
) -> None:
    # Each line again with the next numbers: segments of files the first opened
    # (threaded: the later ones with References, as PowerPost posts and a reply quotes).
    posted = [
        _threaded(line.replace(b"(1/", b"(%d/" % (2 + at))) if threaded and at else line
        for at in range(repeat)
        for line in lines
    ]
    if shuffle is not None:
        shuffle.shuffle(posted)  # segments out of order, as many connections post them
    blocks = blocks_of(posted, block)
    if crlf:
        blocks = [b.replace(b"\n", b"\r\n") for b in blocks]
    pure, compiled = index_both(blocks, take_every=3)
    assert compiled == pure


# One file's segments, many of them: numbers in order, shuffled a little, cut,
# gapped, repeated or reposted; articles with pauses; a fault now and then.
_SEGMENT_FAULTS = st.sampled_from(
    [
        ("k", b"0"),
        ("k", b"007"),
        ("k", b"99999"),
        ("k", b"4294967297"),
        ("mid", b"<>"),
        ("mid", b"<a<b@x>"),
        ("mid", b"<" + b"m" * 999 + b">"),
        ("mid", b"<" + b"m" * 1000 + b">"),
        ("size", b"4294967295"),
        ("size", b"4294967296"),
        ("size", b"18446744073709551616"),
        ("size", b"0042"),
        ("article", b"4611686018427387904"),
        ("article", b"18446744073709551616"),
    ]
)


@st.composite
def _file_lines(draw: st.DrawFn) -> list[bytes]:
    total = draw(st.integers(1, 150))
    numbers = list(range(1, total + 1))
    form = draw(st.sampled_from([b"%d", b"%03d"]))
    kind = draw(
        st.sampled_from(
            ["whole", "cut", "gaps", "shuffled", "repeats", "respelled", "repost", "rotated"]
        )
    )
    rng = draw(st.randoms(use_true_random=False))
    if kind == "cut":
        numbers = numbers[draw(st.integers(0, total - 1)) :]
    elif kind == "gaps":
        numbers = [n for n in numbers if rng.random() > 0.2] or [1]
    elif kind == "shuffled":
        for at in range(len(numbers) - 1):
            if rng.random() < 0.2:
                numbers[at], numbers[at + 1] = numbers[at + 1], numbers[at]
    elif kind in ("repeats", "respelled"):
        numbers += rng.choices(numbers, k=draw(st.integers(1, 5)))
    elif kind == "repost":
        numbers += numbers[: draw(st.integers(1, total))]
    elif kind == "rotated":  # the end posted first: numbers start over without a repeat
        at = draw(st.integers(0, total - 1))
        numbers = numbers[at:] + numbers[:at]
    faulty = draw(st.booleans())  # else every segment is good
    article = 10**6
    lines = []
    respelled = len(numbers) - 5 if kind == "respelled" else len(numbers)
    for at, k in enumerate(numbers):
        article += 1 if rng.random() > 0.02 else draw(st.integers(2, 10**5))
        # A repeat sent with its k padded otherwise ("2" and "02": one number).
        spelled = (b"%d" if form == b"%03d" else b"%03d") if at >= respelled else form
        what, value = draw(_SEGMENT_FAULTS) if faulty and rng.random() < 0.05 else ("", b"")
        lines.append(
            b"\t".join(
                [
                    value if what == "article" else b"%d" % article,
                    b'Show.S01E01 - "show.part01.rar" yEnc ('
                    + (value if what == "k" else spelled % k)
                    + b"/%d)" % total,
                    b"a@x",
                    b"Mon, 6 May 2024 10:00:%02d +0000" % (k % 60),
                    value if what == "mid" else b"<%d.%d@x>" % (k, article),
                    b"",
                    value if what == "size" else b"%d" % (700_000 + k),
                    b"5400",
                ]
            )
        )
    return lines


def _segment(article: int, k: int, total: int) -> bytes:
    date = b"Mon, 6 May 2024 10:00:00 +0000"
    subject = b'Show.S01E01 - "show.part01.rar" yEnc (%d/%d)' % (k, total)
    return b"%d\t%s\ta@x\t%s\t<%d.%d@x>\t\t%d\t5400" % (article, subject, date, k, article, k)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(_file_lines(), min_size=1, max_size=4), block=st.integers(5, 200))
# An article number of 2**64 in a file of a release of two: the compiled
# conversion read it as 0 (its digits overflowed 64 bits) and took the
# release the pure code cuts at that article.
@example(
    files=[
        [_segment(2**64, 106, 108), _segment(1_107_812, 107, 108)],
        [_segment(1_076_481, 61, 61)],
    ],
    block=5,
)
def test_fuzzed_files_give_the_same_batches(files: list[list[bytes]], block: int) -> None:
    # take()'s conversion of each file's segments: the compiled one and the pure one.
    lines = [line for file in files for line in file]
    pure, compiled = index_both(blocks_of(lines, block), take_every=4)
    assert compiled == pure


def test_a_repeat_spelled_otherwise_leaves_the_files_in_the_pure_order() -> None:
    # Two files of one name (N 4 and N 3); the first repeats 2 as "02": the
    # pure path looks at that file after the other (its numbers repeat only
    # once read), and the files' order breaks the tie of their name.
    segments = [(1, 4), (1, 3), (2, 4), (2, 3), (2, 4), (3, 3), (3, 4)]
    lines = [_segment(1001 + at, k, total) for at, (k, total) in enumerate(segments)]
    lines[4] = lines[4].replace(b"(2/4)", b"(02/4)")
    pure, compiled = index_both(blocks_of(lines, 10))
    assert compiled == pure
    batch = RangeIndexer(group=GROUP, first=FIRST)
    batch.add_data(b"\n".join(lines), FIRST + len(lines))
    files = batch.finish().releases[0].files
    assert [f.total_segments for f in files] == [3, 4]


def _threaded(line: bytes) -> bytes:
    fields = line.split(b"\t")
    if len(fields) > 5:
        fields[5] = b"<first@x>"
    return b"\t".join(fields)


def one_batch_each(lines: list[bytes]) -> list[Batch]:
    """The batch of the pure and of the compiled indexer over `lines` (articles 1 to 4),
    without rules."""
    batches = []
    for pure in (True, False):
        indexer = RangeIndexer(group=GROUP, first=1, rules=(), pure=pure)
        indexer.add_data(b"\n".join(lines), 5)
        batches.append(indexer.finish())
    return batches


def test_a_reply_quoting_a_file_is_a_reply_and_a_threaded_yenc_part_a_segment() -> None:
    date = b"Mon, 6 May 2024 10:00:00 +0000"
    lines = [
        b"1\tfile.exe (1/3)\ta@x\t%s\t<m1@x>\t\t500\t1" % date,
        b"2\tfile.exe (2/3)\ta@x\t%s\t<m2@x>\t<m1@x>\t500\t1" % date,
        b'3\t"f.rar" yEnc (1/2)\ta@x\t%s\t<m3@x>\t\t500\t1' % date,
        b'4\t"f.rar" yEnc (2/2)\ta@x\t%s\t<m4@x>\t<m3@x>\t500\t1' % date,
    ]
    for batch in one_batch_each(lines):
        assert dict(batch.skipped) == {"reply": 1}
        counts = sorted(len(f.numbers) for r in batch.releases for f in r.files)
        assert counts == [1, 2]


@pytest.mark.parametrize(
    "other",
    [
        # Another poster's file of the same subject opened by the compiled loop itself...
        b'3\t"f.rar" yEnc (1/3)\tb@x\t%s\t<m3@x>\t\t500\t1',
        # ... and by the slow path (a threaded yEnc part is a segment there).
        b'3\t"f.rar" yEnc (1/3)\tb@x\t%s\t<m3@x>\t<m1@x>\t500\t1',
    ],
)
def test_files_sharing_a_prefix_get_their_own_lines_past_the_file_cache(other: bytes) -> None:
    # The compiled loop keeps the file each recent prefix led to (its cache
    # of `fast`); two posters' files of one subject take turns at the prefix,
    # and each line still goes to its own poster's file, a bad message-id
    # counted as the pure loop counts it.
    date = b"Mon, 6 May 2024 10:00:00 +0000"
    lines = [
        b'1\t"f.rar" yEnc (1/3)\ta@x\t%s\t<m1@x>\t\t500\t1' % date,
        b'2\t"f.rar" yEnc (2/3)\ta@x\t%s\t<m2@x>\t\t500\t1' % date,
        other % date,
        b'4\t"f.rar" yEnc (3/3)\ta@x\t%s\t<m<4@x>\t\t500\t1' % date,
    ]
    batches = one_batch_each(lines)
    assert batches[0] == batches[1]
    counts = sorted(len(f.numbers) for r in batches[1].releases for f in r.files)
    assert counts == [1, 2]
    assert dict(batches[1].skipped) == {"bad_message_id": 1}


def test_malformed_lines_are_counted_and_skipped_alike() -> None:
    lines = [
        b"1\tno counter here\ta@x\tdate\t<m@x>\t\t500\t1",
        b"2\ttoo few",
        b'3\t"f.rar" yEnc (1/2)\ta@x\tdate\t<m3@x>\t\t18446744073709551616\t1',
        b'4\t"f.rar" yEnc (1/2)\ta@x\tdate\t<m4@x>\t\t500\t1',
        b'5\t"f.rar" yEnc (2/2)\ta@x\tdate\tno-brackets\t\t500\t1',
        b'6\t"f.rar" yEnc (2/2)\ta@x\tda\x00te\t<m6@x>\t\t500\t1',
        b'x7\t"f.rar" yEnc (2/2)\ta@x\tdate\t<m7@x>\t\t500\t1',
        b"8\t" + _MB + b" (1/2)\ta@x\tdate\t<m8@x>\t\t500\t1",
        b"",
    ]
    pure_indexer = RangeIndexer(group=GROUP, first=1, pure=True)
    compiled_indexer = RangeIndexer(group=GROUP, first=1)
    for indexer in (pure_indexer, compiled_indexer):
        indexer.add_data(b"\n".join(lines), 9)
    pure, compiled = pure_indexer.finish(), compiled_indexer.finish()
    assert compiled.lines == pure.lines == 8
    assert dict(compiled.skipped) == dict(pure.skipped)
    assert dict(pure.skipped) == {
        "bad_bytes": 1,
        "bad_message_id": 1,
        "bad_number": 1,
        "nul_byte": 1,
        "text_post": 1,
        "too_few_fields": 1,
        "too_long": 1,
    }
    assert encode_batch(pack_batch(compiled), range_id=1, epoch=1) == encode_batch(
        pack_batch(pure), range_id=1, epoch=1
    )


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dump") / "overview"
    path.write_bytes(b"\n".join(generate(GeneratorConfig(articles=5_000, seed=2)).lines) + b"\n")
    return path


def test_uidx_pure_indexer_runs_the_pure_loop_with_the_same_output(
    dump: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    caplog.set_level(logging.INFO)
    outputs = []
    for pure in ("0", "1"):
        monkeypatch.setenv("UIDX_PURE_INDEXER", pure)
        out = tmp_path / f"releases-{pure}.jsonl"
        caplog.clear()
        assert main(["index", str(dump), "--out", str(out), "--quiet"]) == 0
        kinds = [r.getMessage() for r in caplog.records if r.getMessage().startswith("indexer:")]
        assert kinds == [f"indexer: {indexer_kind(pure == '1')}"]
        outputs.append(out.read_bytes())
    assert outputs[0].count(b"\n") > 10
    assert outputs[0] == outputs[1]


def test_without_the_compiled_loop_uidx_index_runs_the_pure_one(dump: Path, tmp_path: Path) -> None:
    # As a wheel built without a C compiler: the extension cannot be imported.
    without = (
        "import sys; sys.modules['usenet_indexer.core._fastindex'] = None;"
        "from usenet_indexer.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    outputs: list[tuple[str, bytes]] = []
    for code in (
        without,
        "from usenet_indexer.cli import main; import sys; sys.exit(main(sys.argv[1:]))",
    ):
        out = tmp_path / f"releases-{len(outputs)}.jsonl"
        result = subprocess.run(
            [sys.executable, "-c", code, "index", str(dump), "--out", str(out), "--quiet"],
            capture_output=True,
            text=True,
            check=True,
            env={"UIDX_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        outputs.append((result.stderr, out.read_bytes()))
    assert (
        "indexer: pure Python (the compiled loop, core/_fastindex, is not built)" in outputs[0][0]
    )
    assert "indexer: compiled (core/_fastindex)" in outputs[1][0]
    assert outputs[0][1] == outputs[1][1]


# Dates in the form nearly every server writes, and near it: each field of
# any digits or letters, other widths, another sign, "-0000" (local time).
_DATE_PIECES = st.tuples(
    st.sampled_from(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "Mox", "mon", "MON"]),
    st.sampled_from([", ", ",", " , "]),
    st.integers(0, 99).map(str) | st.sampled_from(["00", "01", "09", "x", "\uff11"]),
    st.sampled_from([" "]),
    st.sampled_from(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep"])
    | st.sampled_from(["Oct", "Nov", "Dec", "Foo", "jan", "JAN", "Ja"]),
    st.sampled_from([" "]),
    st.integers(0, 9999).map(lambda y: f"{y:04d}")
    | st.sampled_from(["999", "10000", "\uff12\uff10\uff12\uff14"]),
    st.sampled_from([" "]),
    st.integers(0, 99).map(lambda h: f"{h:02d}") | st.sampled_from(["1", "ab"]),
    st.sampled_from([":"]),
    st.integers(0, 99).map(lambda h: f"{h:02d}"),
    st.sampled_from([":", "."]),
    st.integers(0, 99).map(lambda h: f"{h:02d}"),
    st.sampled_from([" ", "  "]),
    st.sampled_from(["+", "-", "x", ""]),
    st.integers(0, 9999).map(lambda z: f"{z:04d}") | st.sampled_from(["000", "00000", "GMT"]),
)


@settings(max_examples=3_000, deadline=None)
@given(pieces=_DATE_PIECES, cut=st.integers(0, 40), extra=st.binary(max_size=2))
@example(pieces=("Tue", ", ", "14", " ", "Nov", " ", "2023", " ", "22", ":", "13", ":", "20", " ", "+", "0000"), cut=40, extra=b"")  # fmt: skip
@example(pieces=("Mon", ", ", "6", " ", "May", " ", "2024", " ", "10", ":", "00", ":", "00", " ", "-", "0000"), cut=40, extra=b"")  # fmt: skip
@example(pieces=("Sun", ", ", "31", " ", "Feb", " ", "1000", " ", "99", ":", "99", ":", "99", " ", "-", "9999"), cut=40, extra=b"")  # fmt: skip
def test_a_plain_date_is_read_as_parse_date_reads_it(
    pieces: tuple[str, ...], cut: int, extra: bytes
) -> None:
    # _fastindex.plain_date answers for `_PLAIN_DATE`'s form only, with parse_date's
    # seconds; anything else it leaves to parse_date (None).
    whole = "".join(pieces).encode()
    for date in (whole, whole[:cut], whole + extra, extra + whole):
        found = _fastindex.plain_date(date)
        expected = parse_date(decode(date))
        assert found is None or found == expected, date
        plain = indexer_module._PLAIN_DATE.fullmatch(decode(date))
        if plain is not None:
            # The plain form answers here, except with a month that is none and
            # "-0000" (local time): email.utils reads those.
            _, month, *_, sign, tz_hours, tz_minutes = plain.groups()
            answers = month in indexer_module._MONTHS and (sign, tz_hours, tz_minutes) != (
                "-",
                "00",
                "00",
            )
            assert (found is not None) == answers, date


def test_every_generated_date_is_read_in_compiled_code() -> None:
    # The conversion's dates, of every profile, read by plain_date, as parse_date reads them.
    for profile in PROFILES:
        lines = generate(GeneratorConfig(articles=3_000, seed=5, profile=profile)).lines
        dates = {line.split(b"\t")[3] for line in lines if line.count(b"\t") >= 4}
        answered = [d for d in dates if _fastindex.plain_date(d) is not None]
        assert len(answered) > 0.9 * len(dates), profile
        for date in dates:
            found = _fastindex.plain_date(date)
            assert found is None or found == parse_date(decode(date)), date


def heads_alike(lines: Sequence[bytes]) -> int:
    """`_fastindex.chunk_head` of every file the lines open, asserted to be `_chunk_head`'s;
    how many files."""
    indexer = RangeIndexer(group=GROUP, first=FIRST)
    indexer.add_data(b"\n".join(lines) + b"\n", FIRST + len(lines) + 1)
    files = list(indexer._open.values())
    for open_file in files:
        open_file.info = _parse_prefix(open_file.prefix)
        found = _fastindex.chunk_head(open_file)
        expected = _chunk_head(open_file)
        assert found == expected, open_file.prefix
        assert [type(field) for field in found] == [type(field) for field in expected]
    return len(files)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_s_files_get_the_same_chunk_head(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=5_000, seed=3, profile=profile))
    assert heads_alike(generated.lines) > 50


def test_the_real_corpus_s_files_get_the_same_chunk_head(corpus_dir: Path) -> None:
    assert heads_alike(corpus_lines(corpus_dir, FIRST, GROUP)) > 100


@settings(max_examples=1_000, deadline=None)
@given(
    prefix=st.binary(max_size=40).filter(lambda b: b"\t" not in b and b"\n" not in b),
    tail=st.binary(max_size=10).filter(lambda b: b"\t" not in b and b"\n" not in b),
    k=st.sampled_from([b"1", b"01", b"001", b"0001", b"7"]),
    total=st.sampled_from([b"3", b"12", b"999", b"4294967295"]),
    poster=st.sampled_from([b"a <a@x>", "é <é@x>".encode(), b"\xff\xfe <b@x>"]),
)
@example(prefix=b"\xe9t\xe9 ", tail=b" \xff", k=b"01", total=b"12", poster=b"a <a@x>")
def test_fuzzed_files_get_the_same_chunk_head(
    prefix: bytes, tail: bytes, k: bytes, total: bytes, poster: bytes
) -> None:
    # Subjects that are not UTF-8 (decoded as Latin-1, prefix and tail each on its
    # own), zero-padded counters (the subject's (1/N) padded as they are), any N.
    subject = b'%s"a.rar" yEnc (%s/%s)%s' % (prefix.replace(b"(", b"["), k, total, tail)
    line = b"%d\t%s\t%s\tMon, 6 May 2024 10:00:00 +0000\t<m@x>\t\t700\t5" % (FIRST, subject, poster)
    heads_alike([line])
