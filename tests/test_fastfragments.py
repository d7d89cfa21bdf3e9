"""The compiled fragment unpacking and packing (wire/_fastfragments.pyx) against their
oracles, the pure ones.

What the catalog build reads of a fragment (every file's key, name, subject,
index, counts, date, numbers, message-ids and sizes) must be the same from
both, field for field, for what edges post of every generator profile and of
the real corpus, for any files packed, and for damaged fragments: where the
pure code raises, the compiled one hands over to it and the same error comes
out. What an edge packs (`fragments.pack`, laid out by `_fastfragments.packed`
where it answers) must be the bytes the pure layout `_packed` gives, for the
same releases and for any files. The compiled part must be built here (CI builds it with `pip install
-e .`): otherwise these tests would compare the pure code with itself.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.core.batch import FileChunk
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.synth.generator import PROFILES, GeneratorConfig, generate
from usenet_indexer.testing.corpus import replayed_lines
from usenet_indexer.wire import fragments
from usenet_indexer.wire.fragments import COMPILED_FILES, COMPILED_PACKED, BadFragment

FIRST = 7_000_000


def fields(files: Sequence[FileChunk]) -> list[tuple[object, ...]]:
    """Every field of every file, the arrays with their type: what `==` on files
    would not tell apart (an array of another type with the same values)."""
    return [
        (
            f.key,
            f.name,
            f.subject,
            f.index,
            f.total_segments,
            f.posted,
            f.numbers.typecode,
            f.numbers.tobytes(),
            f.message_ids,
            f.sizes.typecode,
            f.sizes.tobytes(),
        )
        for f in files
    ]


def both(fragment: bytes) -> tuple[object, object]:
    """What the pure and the compiled unpacking make of a fragment: its files' fields,
    or the error raised."""
    results: list[object] = []
    for pure in (True, False):
        try:
            results.append(fields(fragments.unpack(fragment, pure=pure)))
        except BadFragment as error:
            results.append((type(error), str(error)))
    return results[0], results[1]


def posted_fragments(lines: Sequence[bytes], group: str) -> list[bytes]:
    """The fragments an edge posts of overview lines, a batch every 2,000 lines."""
    indexer = RangeIndexer(group=group, first=FIRST)
    batches = []
    for at in range(0, len(lines), 2_000):
        indexer.add_data(b"\n".join(lines[at : at + 2_000]) + b"\n", FIRST + at + 2_000)
        batches.append(indexer.take())
    return [
        fragments.pack(chunk.files)
        for batch in batches
        for chunk in batch.releases
        if chunk.dropped is None
    ]


def test_the_compiled_unpacking_is_built() -> None:
    # Without it every comparison below would be the pure code against itself.
    assert COMPILED_FILES is not None, "wire/_fastfragments is not built: run scripts/bootstrap"


@pytest.mark.parametrize("profile", PROFILES)
def test_every_generator_profile_unpacks_the_same(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=20_000, seed=9, profile=profile))
    lines = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    posted = posted_fragments(lines, generated.truth.group)
    assert sum(len(fragments.unpack(f, pure=True)) for f in posted) > 100  # files, not nothing
    for fragment in posted:
        pure, compiled = both(fragment)
        assert compiled == pure


def test_the_real_corpus_unpacks_the_same(corpus_dir: Path) -> None:
    lines = replayed_lines(corpus_dir, FIRST, "a.b.test", seed=4)
    posted = posted_fragments(lines, "a.b.test")
    assert sum(len(fragments.unpack(f, pure=True)) for f in posted) > 100
    for fragment in posted:
        pure, compiled = both(fragment)
        assert compiled == pure


# Text as posters write it and as breaks decoders: any character, lone
# surrogates (stored exactly), newlines, NULs.
_TEXT = st.text(st.characters(codec=None, blacklist_categories=()), max_size=12)
_IDS = st.one_of(
    # One width (a posting tool's random part, counter and host): stored column-wise.
    st.integers(1, 40).flatmap(
        lambda w: st.lists(st.text("abcdef0123456789@.", min_size=w, max_size=w), max_size=30)
    ),
    # Any widths and characters but the "\n" that joins them.
    st.lists(
        st.text(st.characters(blacklist_characters="\n", codec=None), max_size=9), max_size=12
    ),
)


@st.composite
def file_chunks(draw: st.DrawFn, i: int) -> FileChunk:
    ids = draw(_IDS)
    numbers = sorted(draw(st.sets(st.integers(0, 2**32 - 1), min_size=len(ids), max_size=len(ids))))
    return FileChunk(
        key=draw(st.binary(min_size=16, max_size=16)),
        name=draw(_TEXT),
        subject=draw(_TEXT),
        index=draw(st.none() | st.integers(0, 2**32 - 2)),
        total_segments=draw(st.integers(0, 2**32 - 1)),
        posted=draw(st.integers(-(2**63), 2**63 - 1)),
        numbers=array("I", numbers),
        message_ids="\n".join(ids),
        sizes=array(
            "I", draw(st.lists(st.integers(0, 2**32 - 1), min_size=len(ids), max_size=len(ids)))
        ),
    )


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5).flatmap(lambda n: st.tuples(*(file_chunks(i) for i in range(n)))))
def test_any_files_unpack_the_same_as_packed(files: tuple[FileChunk, ...]) -> None:
    fragment = fragments.pack(files)
    pure, compiled = both(fragment)
    assert compiled == pure == fields(files)


GOOD = [
    FileChunk(
        key=bytes(range(16)),
        name="né.part01.rar",
        subject='né [1/2] - "né.part01.rar" yEnc (1/30)',
        index=1,
        total_segments=30,
        posted=1_700_000_000,
        numbers=array("I", range(1, 21)),
        message_ids="\n".join(f"{k:020}@w" for k in range(20)),
        sizes=array("I", [716_800] * 20),
    ),
    FileChunk(
        key=bytes(range(1, 17)),
        name="né.par2",
        subject='né [2/2] - "né.par2" yEnc (1/1)',
        index=None,
        total_segments=10,
        posted=0,
        numbers=array("I", [2, 5, 9]),
        message_ids="a@b\ncd@e\nf@g",
        sizes=array("I", [1, 2, 3]),
    ),
]


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_damaged_fragments_unpack_the_same_or_fail_the_same(data: st.DataObject) -> None:
    # Bytes changed inside the deflate (past what its checksum sees): counts, widths,
    # lengths and text that no longer fit, as a faulty node or disk may send them.
    files = data.draw(st.sampled_from([GOOD, GOOD[1:], [GOOD[0]] * 2]))
    raw = bytearray(fragments.layout(fragments.pack(files)))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from([0, 1, 2, 3, 0x0A, 0x40, 0x80, 0xC3, 0xED, 0xFF]))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    pure, compiled = both(bytes([fragments.DEFLATED]) + zlib.compress(bytes(raw)))
    assert compiled == pure


def test_a_fragment_the_pure_code_refuses_is_refused_with_its_message() -> None:
    raw = fragments.layout(fragments.pack(GOOD))
    bad = [
        raw.replace("né".encode(), b"n\xc3\x28", 1),  # a name not UTF-8
        raw[:4] + (3).to_bytes(4, "little") + raw[8:],  # an id width that does not fit
        (1000).to_bytes(4, "little") + raw[4:],  # more files than there are
        raw[:60],  # cut short
    ]
    for data in bad:
        pure, compiled = both(bytes([fragments.DEFLATED]) + zlib.compress(data))
        assert isinstance(pure, tuple)
        assert pure[0] is BadFragment
        assert compiled == pure


# The packing: `_fastfragments.packed` against `fragments._packed`.


def test_the_compiled_packing_is_built() -> None:
    assert COMPILED_PACKED is not None, "wire/_fastfragments is not built: run scripts/bootstrap"


def packed_the_same(files: Sequence[FileChunk]) -> bool:
    """The compiled layout of `files` is the pure one's (True), or it hands over to the
    pure code (False); a mismatch fails the test."""
    assert COMPILED_PACKED is not None
    compiled = COMPILED_PACKED(files)
    if compiled is None:
        return False
    assert compiled == fragments._packed(files)
    return True


def posted_releases(lines: Sequence[bytes], group: str) -> list[list[FileChunk]]:
    """The files of each release chunk an edge posts of overview lines."""
    indexer = RangeIndexer(group=group, first=FIRST)
    indexer.add_data(b"\n".join(lines) + b"\n", FIRST + len(lines))
    return [list(chunk.files) for chunk in indexer.take().releases if chunk.dropped is None]


@pytest.mark.parametrize("profile", PROFILES)
def test_every_generator_profile_packs_the_same(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=20_000, seed=9, profile=profile))
    lines = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    releases = posted_releases(lines, generated.truth.group)
    assert len(releases) > 20
    answered = [packed_the_same(files) for files in releases]
    # The compiled layout answers for what edges post (message-ids are ASCII).
    assert sum(answered) >= 0.99 * len(answered)
    assert fragments.pack(releases[0]) == fragments.pack(releases[0], pure=True)


def test_the_real_corpus_packs_the_same(corpus_dir: Path) -> None:
    releases = posted_releases(replayed_lines(corpus_dir, FIRST, "a.b.test", seed=4), "a.b.test")
    assert len(releases) > 20
    answered = [packed_the_same(files) for files in releases]
    assert sum(answered) >= 0.99 * len(answered)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 5).flatmap(lambda n: st.tuples(*(file_chunks(i) for i in range(n)))))
def test_any_files_pack_the_same(files: tuple[FileChunk, ...]) -> None:
    answered = packed_the_same(files)
    # It hands over only for message-ids that are not ASCII.
    assert answered or not all(f.message_ids.isascii() for f in files if len(f.numbers))


def _odd(files: list[FileChunk], data: st.DataObject) -> list[FileChunk]:
    """`files` with one field made what struct refuses or pads, or the pure layout
    packs otherwise than the compiled one reads it: the compiled one must hand over."""
    at = data.draw(st.integers(0, len(files) - 1))
    field, value = data.draw(
        st.sampled_from(
            list[tuple[str, Any]](
                [
                    ("key", b"short"),
                    ("key", bytes(17)),
                    ("key", bytearray(16)),
                    ("index", 2**32 - 1),
                    ("index", -2),
                    ("index", True),
                    ("total_segments", 2**32),
                    ("total_segments", -1),
                    ("posted", 2**63),
                    ("posted", False),
                    ("numbers", array("L", files[at].numbers)),
                    ("numbers", list(files[at].numbers)),
                    ("sizes", array("I", [*files[at].sizes, 7])),
                    ("sizes", array("i", [1] * len(files[at].numbers))),
                    ("message_ids", files[at].message_ids + "é"),
                ]
            )
        )
    )
    changed = list(files)
    changed[at] = attrs.evolve(files[at], **{field: value})
    return changed


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_files_the_compiled_packing_cannot_lay_out_go_to_the_pure_code(
    data: st.DataObject,
) -> None:
    files = _odd(list(data.draw(st.sampled_from([GOOD, GOOD[1:], [GOOD[0]] * 2]))), data)
    assert COMPILED_PACKED is not None
    assert COMPILED_PACKED(files) is None
    # What `pack` then does is the pure code's: its bytes, or its error.
    outcomes: list[object] = []
    for pure in (True, False):
        try:
            outcomes.append(fragments.pack(files, pure=pure))
        except (struct.error, TypeError, ValueError) as error:  # what struct and array raise
            outcomes.append((type(error), str(error)))
    assert outcomes[0] == outcomes[1]


class _Growing:
    """A file whose arrays grow while it is read (as a finalizer run by a collection
    in the middle of the call could make them): the compiled packing must not write
    what it did not measure."""

    def __init__(self, file: FileChunk) -> None:
        self.key, self.name, self.index = file.key, file.name, file.index
        self.total_segments, self.posted = file.total_segments, file.posted
        self.numbers, self.sizes = array("I", file.numbers), array("I", file.sizes)
        self.message_ids = file.message_ids
        self._subject = file.subject

    @property
    def subject(self) -> str:
        self.numbers.extend(range(100_000))
        self.sizes.extend(range(100_000))
        return self._subject


def test_a_file_that_changes_while_it_is_packed_is_left_to_the_pure_code() -> None:
    assert COMPILED_PACKED is not None
    assert COMPILED_PACKED([_Growing(GOOD[0]), _Growing(GOOD[1])]) is None  # type: ignore[list-item]
    # A list or tuple only: another container goes to the pure code.
    assert COMPILED_PACKED({0: GOOD[0]}) is None  # type: ignore[arg-type]
