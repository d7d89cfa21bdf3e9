"""A merged file's figures compiled (core/_fastmerge.pyx) against its oracle, the pure one.

What the catalog build counts of a file merged from its chunks (segments seen,
the bytes they hold, whether a number came twice) must be the same from both
for what edges post of every generator profile and of the real corpus, cut
into small batches so that files come in several chunks, and for any chunks:
overlapping ones (a repost, a post check's re-send in a later batch) keep the
first chunk's segment of a number. The compiled part must be built here (CI
builds it with `pip install -e .`): otherwise these tests would compare the
pure code with itself.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from pathlib import Path

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.core.batch import FileChunk
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import (
    COMPILED_FIGURES,
    COMPILED_FILES,
    COMPILED_SEGMENTS_JSON,
    CatalogFile,
    FilesBuilt,
    ReleaseMerger,
    Segments,
    _figures,
    _File,
    _file_order,
    _files_built,
    figures,
)
from usenet_indexer.synth.generator import PROFILES, GeneratorConfig, generate
from usenet_indexer.testing.corpus import replayed_lines

FIRST = 7_000_000


def merged_files(lines: Sequence[bytes], group: str, every: int) -> list[list[FileChunk]]:
    """Each file's chunks, in the order batches of `every` lines bring them (as a build
    merges them: a file key's chunks from every batch)."""
    indexer = RangeIndexer(group=group, first=FIRST)
    files: dict[bytes, list[FileChunk]] = {}
    for at in range(0, len(lines), every):
        indexer.add_data(b"\n".join(lines[at : at + every]) + b"\n", FIRST + at + every)
        for chunk in indexer.take().releases:
            for file in chunk.files:
                files.setdefault(file.key, []).append(file)
    return list(files.values())


def assert_the_same(files: list[list[FileChunk]]) -> None:
    assert COMPILED_FIGURES is not None
    split = [chunks for chunks in files if len(chunks) > 1]
    assert len(files) > 100  # files
    assert split  # some of them in several chunks
    for chunks in files:
        assert COMPILED_FIGURES(chunks) == _figures(chunks)
    assert_written_the_same(files)


def listed_json(chunks: list[FileChunk]) -> bytes:
    """The oracle of `segments_json`: orjson's text of the merged file's segments list."""
    return orjson.dumps(_File("a.rar", "a", 1, 50, 0, chunks).segments())


def assert_written_the_same(files: list[list[FileChunk]]) -> None:
    # Every file the compiled writer answers for written as orjson writes its list,
    # and nearly every file answered (else the comparison would be of nothing).
    assert COMPILED_SEGMENTS_JSON is not None
    written = 0
    for chunks in files:
        found = COMPILED_SEGMENTS_JSON(chunks)
        if found is not None:
            assert found == listed_json(chunks)
            written += 1
    assert written >= 0.9 * len(files)


def test_the_compiled_figures_are_built() -> None:
    # Without it every comparison below would be the pure code against itself.
    assert COMPILED_FIGURES is not None, "core/_fastmerge is not built: run scripts/bootstrap"


@pytest.mark.parametrize("profile", PROFILES)
def test_every_generator_profile_counts_and_builds_the_same(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=20_000, seed=9, profile=profile))
    lines = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    assert_the_same(merged_files(lines, generated.truth.group, every=700))
    assert_built_the_same(uploads_files(lines, generated.truth.group, every=700))


def test_the_real_corpus_counts_and_builds_the_same(corpus_dir: Path) -> None:
    lines = replayed_lines(corpus_dir, FIRST, "a.b.test", seed=4)
    assert_the_same(merged_files(lines, "a.b.test", every=700))
    assert_built_the_same(uploads_files(lines, "a.b.test", every=700))


def chunk(numbers: Sequence[int], sizes: Sequence[int]) -> FileChunk:
    return FileChunk(
        key=bytes(16),
        name="a.rar",
        subject='a [1/1] - "a.rar" yEnc (1/50)',
        index=1,
        total_segments=50,
        posted=1_700_000_000,
        numbers=array("I", numbers),
        message_ids="\n".join(f"{k}.{n}@x" for n, k in enumerate(numbers)),
        sizes=array("I", sizes),
    )


@st.composite
def chunks(draw: st.DrawFn) -> FileChunk:
    # Numbers from a small range: chunks of one file overlap, as reposts and
    # re-sends make them; sizes of any u32 (their sums pass 2**32).
    numbers = sorted(draw(st.sets(st.integers(0, 40) | st.integers(0, 2**32 - 1), max_size=30)))
    sizes = draw(st.lists(st.integers(0, 2**32 - 1), min_size=len(numbers), max_size=len(numbers)))
    return chunk(numbers, sizes)


@settings(max_examples=500, deadline=None)
@given(st.lists(chunks(), min_size=1, max_size=5))
def test_any_chunks_count_the_same(file: list[FileChunk]) -> None:
    assert COMPILED_FIGURES is not None
    assert COMPILED_FIGURES(file) == _figures(file)


def test_a_number_in_two_chunks_counts_once_with_the_first_chunks_size() -> None:
    first = chunk([1, 2, 3], [700, 700, 300])
    resent = chunk([3, 4], [999, 50])  # 3 again, a post check's re-send
    expected = (4, 700 + 700 + 300 + 50, False)
    assert _figures([first, resent]) == expected
    assert COMPILED_FIGURES is not None
    assert COMPILED_FIGURES([first, resent]) == expected
    assert COMPILED_FIGURES([resent, first]) == (4, 999 + 50 + 700 + 700, False)


def test_arrays_of_another_type_are_left_to_the_pure_code() -> None:
    odd = attrs.evolve(chunk([1, 2], [5, 6]), sizes=array("L", [5, 6]))
    assert COMPILED_FIGURES is not None
    assert COMPILED_FIGURES([odd]) is None
    assert figures([odd]) == _figures([odd]) == (2, 11, True)


# --- an upload's catalog files (merge._files_built and _fastmerge.files_built) ---------


def described(made: FilesBuilt | None) -> object:
    """Every field of the files made, their segments' figures, the sums; the types too."""
    if made is None:
        return None
    built, seen, size, posted = made
    return (
        [
            (
                type(f),
                f.name,
                f.subject,
                f.index,
                f.total_segments,
                f.posted,
                type(f.segments),
                f.segments._file,  # type: ignore[attr-defined]
                f.segments._count,  # type: ignore[attr-defined]
                f.segments._distinct,  # type: ignore[attr-defined]
                f.segments._made,  # type: ignore[attr-defined]
                f,  # CatalogFile's ==, its segments listed
            )
            for f in built
        ],
        (type(seen), seen),
        (type(size), size),
        (type(posted), posted),
    )


def uploads_files(lines: Sequence[bytes], group: str, every: int) -> list[list[_File]]:
    """The merged files of each generation the merge makes of the lines' chunks (batches
    of `every` lines: files in several chunks), in file order."""
    indexer = RangeIndexer(group=group, first=FIRST)
    merger = ReleaseMerger()
    for at in range(0, len(lines), every):
        indexer.add_data(b"\n".join(lines[at : at + every]) + b"\n", FIRST + at + every)
        merger.add_all(indexer.take().releases)
    return [
        sorted(generation.files.values(), key=_file_order)
        for generation, _ in merger._generations()
    ]


def assert_built_the_same(uploads: list[list[_File]]) -> None:
    assert COMPILED_FILES is not None
    assert len(uploads) > 20
    assert any(len(f.chunks) > 1 for files in uploads for f in files)
    for files in uploads:
        compiled = COMPILED_FILES(files, CatalogFile, Segments)
        assert compiled is not None
        assert described(compiled) == described(_files_built(files, pure=True))


def test_the_compiled_files_are_built() -> None:
    assert COMPILED_FILES is not None, "core/_fastmerge is not built: run scripts/bootstrap"


def test_the_classes_made_without_their_init_have_nothing_it_would_run() -> None:
    # files_built (and _fastfragments.files) set each field of these as their __init__
    # would: a validator, converter or post-init hook would be skipped.
    for cls in (CatalogFile, FileChunk):
        assert not hasattr(cls, "__attrs_post_init__")
        assert all(a.validator is None and a.converter is None for a in attrs.fields(cls))
    assert Segments.__slots__ == ("_count", "_distinct", "_file", "_made")


@st.composite
def merged_file(draw: st.DrawFn) -> _File:
    # Chunks of one segment or more (a file chunk has one at least).
    file_chunks = draw(st.lists(chunks().filter(lambda c: len(c.numbers)), min_size=1, max_size=4))
    return _File(
        name=draw(st.text(max_size=8)),
        subject=draw(st.text(max_size=8)),
        index=draw(st.none() | st.integers(0, 2**40)),
        total_segments=draw(st.integers(0, 2**40)),
        posted=draw(st.sampled_from([0, 1, 1_700_000_000]) | st.integers(0, 2**62)),
        chunks=file_chunks,
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(merged_file(), max_size=6))
def test_any_files_build_the_same(files: list[_File]) -> None:
    assert COMPILED_FILES is not None
    assert described(COMPILED_FILES(files, CatalogFile, Segments)) == described(
        _files_built(files, pure=True)
    )


def test_files_of_arrays_of_another_type_are_left_to_the_pure_code() -> None:
    odd = attrs.evolve(chunk([1, 2], [5, 6]), sizes=array("L", [5, 6]))
    file = _File("a.rar", "a", 1, 50, 1_700_000_000, [chunk([3], [7]), odd])
    assert COMPILED_FILES is not None
    assert COMPILED_FILES([file], CatalogFile, Segments) is None
    assert _files_built([file])[1:] == (3, 18, 1_700_000_000)


# --- a merged file's segments as JSON (Segments.json_text, _fastmerge.segments_json) ---


@st.composite
def written_chunks(draw: st.DrawFn) -> list[FileChunk]:
    # Chunks of one file, overlapping or not, in any order; message-ids of any text
    # (quotes, backslashes, control characters, non-ASCII, surrogates; a "\n" makes
    # one more id than numbers), arrays of other types now and then.
    made = []
    for _ in range(draw(st.integers(1, 4))):
        numbers = sorted(draw(st.sets(st.integers(0, 12) | st.integers(0, 2**32 - 1), max_size=8)))
        if draw(st.integers(0, 9)) == 0:
            numbers.reverse()
        ids = [
            draw(st.text(st.characters(codec="ascii"), max_size=5) | st.text(max_size=3))
            for _ in numbers
        ]
        sizes = [draw(st.integers(0, 2**32 - 1)) for _ in numbers]
        typecode = "L" if draw(st.integers(0, 19)) == 0 else "I"
        made.append(
            attrs.evolve(
                chunk(numbers, sizes),
                numbers=array(typecode, numbers),
                message_ids="\n".join(ids),
            )
        )
    return made


@settings(max_examples=800, deadline=None)
@given(written_chunks())
def test_any_files_segments_are_written_as_orjson_writes_their_list(
    chunks: list[FileChunk],
) -> None:
    assert COMPILED_SEGMENTS_JSON is not None
    found = COMPILED_SEGMENTS_JSON(chunks)
    if found is not None:
        assert found == listed_json(chunks)


# Printable ASCII but '"' and '\\': what orjson writes as it is.
_PLAIN_ID = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'), max_size=60
)
# Bytes orjson escapes (a "\n" would part the id in two).
_ESCAPED = st.sampled_from('"\\\t\x00\x1f')


@settings(max_examples=500, deadline=None)
@given(
    ids=st.lists(_PLAIN_ID, min_size=1, max_size=12),
    wrong=st.none() | st.tuples(st.integers(0, 11), st.integers(0, 60), _ESCAPED),
)
def test_long_ids_are_written_unless_one_holds_a_byte_orjson_escapes(
    ids: list[str], wrong: tuple[int, int, str] | None
) -> None:
    # Ids of up to 60 bytes (the writer reads them sixteen bytes at a time), plain, or
    # one of them with a byte orjson escapes at any place: then the list is written.
    if wrong is not None:
        at, place, byte = wrong
        at %= len(ids)
        place = min(place, len(ids[at]))
        ids[at] = ids[at][:place] + byte + ids[at][place:]
    made = attrs.evolve(chunk(range(1, len(ids) + 1), [7] * len(ids)), message_ids="\n".join(ids))
    assert COMPILED_SEGMENTS_JSON is not None
    found = COMPILED_SEGMENTS_JSON([made])
    if wrong is None:
        assert found == listed_json([made])
    else:
        assert found is None


def test_plain_files_segments_are_written_by_the_compiled_writer() -> None:
    assert COMPILED_SEGMENTS_JSON is not None
    first = chunk([1, 2, 3], [700, 2**32 - 1, 0])
    later = chunk([4, 9], [5, 6])
    for chunks in ([first], [first, later], [later, first]):
        assert COMPILED_SEGMENTS_JSON(chunks) == listed_json(chunks)
    # Left to the list: a number in two chunks, ids orjson escapes, a count apart.
    assert COMPILED_SEGMENTS_JSON([first, chunk([3, 4], [1, 1])]) is None
    for ids in ('a"b\nc\nd', "a\\b\nc\nd", "a\tb\nc\nd", "é\nc\nd", "a\nb", "a\nb\nc\nd"):
        assert COMPILED_SEGMENTS_JSON([attrs.evolve(first, message_ids=ids)]) is None


def test_a_releases_json_line_is_the_same_with_the_segments_written_by_either() -> None:
    generated = generate(GeneratorConfig(articles=5_000, seed=3))
    indexer = RangeIndexer(group=generated.truth.group, first=FIRST)
    indexer.add_data(b"\n".join(generated.lines) + b"\n", FIRST + len(generated.lines))
    merger = ReleaseMerger()
    merger.add_all(indexer.take().releases)
    releases = list(merger.releases())
    assert len(releases) > 10
    for release in releases:
        assert orjson.dumps(release.to_json(fragments=True)) == orjson.dumps(release.to_json())
