"""Packed fragments: an exact round trip for any files, BadFragment for anything else."""

from __future__ import annotations

import hashlib
import tracemalloc
import zlib
from array import array

import attrs
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.core.batch import FileChunk, representative
from usenet_indexer.wire import fragments
from usenet_indexer.wire.fragments import BadFragment


def file_chunk(
    i: int,
    message_ids: list[str],
    *,
    name: str = "a.rar",
    subject: str = 'x [1/2] - "a.rar" yEnc (1/9)',
    numbers: list[int] | None = None,
    sizes: list[int] | None = None,
    index: int | None = 0,
) -> FileChunk:
    count = len(message_ids)
    return FileChunk(
        key=hashlib.blake2b(str(i).encode(), digest_size=16).digest(),
        name=name,
        subject=subject,
        index=index,
        total_segments=max(count, 1) + i,
        posted=1_700_000_000 + i,
        numbers=array("I", numbers if numbers is not None else range(1, count + 1)),
        message_ids="\n".join(message_ids),
        sizes=array("I", sizes if sizes is not None else [740_000 + 7 * k for k in range(count)]),
    )


def round_trip(files: list[FileChunk]) -> None:
    assert fragments.unpack(fragments.pack(files)) == files


def test_an_empty_files_list_round_trips() -> None:
    round_trip([])


def test_ids_of_one_width_round_trip_and_pack_smaller_than_plain() -> None:
    ids = [f"{k:024x}-{1_700_000_000_000 + k}@nyuu" for k in range(500)]
    files = [file_chunk(0, ids[:300]), file_chunk(1, ids[300:], index=None)]
    packed = fragments.pack(files)
    assert fragments.unpack(packed) == files
    plain = zlib.compress("\n".join(ids).encode(), 1)
    assert len(packed) < len(plain)


def test_ids_of_mixed_widths_round_trip() -> None:
    round_trip(
        [
            file_chunk(0, [f"part{k}of120.abc@powerpost" for k in range(1, 121)]),
            file_chunk(1, ["x@y"]),
            file_chunk(2, ["a", "bb", "a"]),
        ]
    )


def test_hostile_names_and_ids_round_trip_exactly() -> None:
    hostile = "\x00\n\t\r\"'\\ é 名前 \U0001f600 \ud800 <>&;"
    files = [
        file_chunk(0, ["é@x", "ab@x"], name=hostile, subject=hostile + "\n(1/2)"),
        file_chunk(1, ["名@x", "é@y"], name="", subject=""),  # one width in characters only
        file_chunk(2, ["\ud800\x00@\t", "\x00\x00\x00@\t"], name="\n\n", subject="\x00"),
        file_chunk(3, ["only"], name=hostile * 100, subject=hostile),
    ]
    round_trip(files)


def test_files_without_segments_round_trip() -> None:
    round_trip([file_chunk(0, []), file_chunk(1, ["a@b", "c@d"]), file_chunk(2, [])])
    round_trip([file_chunk(0, [])])


def test_big_files_round_trip() -> None:
    count = 100_000
    ids = [f"{hashlib.md5(str(k).encode()).hexdigest()}@ngPost" for k in range(count)]
    files = [
        file_chunk(
            i,
            ids[i * count // 4 : (i + 1) * count // 4],
            numbers=list(range(1, count // 4 + 1))
            if i
            else [2**32 - 1 - k for k in range(count // 4)][::-1],
            sizes=[(k * 7919) % 2**32 for k in range(count // 4)],
        )
        for i in range(4)
    ]
    round_trip(files)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x01",
        b"\x02",
        b"\x02not deflate",
        bytes([fragments.DEFLATED]) + zlib.compress(b""),
        bytes([fragments.DEFLATED]) + zlib.compress(b"\x01\x00\x00\x00\x00\x00\x00\x00"),
        bytes([fragments.DEFLATED])
        + zlib.compress(b"\xff\xff\xff\xff\x00\x00\x00\x00" + b"x" * 50),
        bytes([fragments.DEFLATED]) + zlib.compress(bytes(range(256)) * 8),
        b"\x01" + zlib.compress(b"\x00\x00\x00\x00"),
    ],
)
def test_garbage_raises_bad_fragment(data: bytes) -> None:
    with pytest.raises(BadFragment):
        fragments.unpack(data)


def test_damaged_fragments_raise_bad_fragment() -> None:
    files = [file_chunk(0, [f"{k:020}@w" for k in range(50)], name="né"), file_chunk(1, ["a@b"])]
    packed = fragments.pack(files)
    middle = len(packed) // 2
    stored_damage = [
        packed[:-1],
        packed[:middle] + bytes([packed[middle] ^ 0x55]) + packed[middle + 1 :],
    ]
    raw = fragments.layout(packed)
    inconsistent = [
        raw[:4] + (7).to_bytes(4, "little") + raw[8:],  # a wrong id width
        (1000).to_bytes(4, "little") + raw[4:],  # more files than there are
        raw.replace(b"n\xc3\xa9", b"n\xc3\x28"),  # a name not UTF-8
        raw[:100],  # cut short
    ]
    for data in stored_damage + [
        bytes([fragments.DEFLATED]) + zlib.compress(d) for d in inconsistent
    ]:
        with pytest.raises(BadFragment):
            fragments.unpack(data)


# --- inspect: checking a fragment from a node -----------------------------------------

CAP = 1 << 24


def inspect(data: bytes) -> fragments.Facts:
    return fragments.inspect(data, max_bytes=CAP, max_text_chars=4096)


def test_inspect_gives_the_figures_of_the_files() -> None:
    files = [
        file_chunk(0, [f"{k:020}@w" for k in range(50)], name="né"),
        attrs.evolve(file_chunk(1, ["a@b", "cd@e"]), posted=0),
        attrs.evolve(file_chunk(2, ["x@y"], numbers=[7], sizes=[2**32 - 1]), total_segments=7),
    ]
    facts = inspect(fragments.pack(files))
    assert (facts.files, facts.segments) == (3, 53)
    assert facts.bytes == sum(sum(f.sizes) for f in files)
    assert facts.posted == 1_700_000_000  # the undated file does not count
    assert facts.representative == representative(files)
    assert facts.inflated == len(fragments.layout(fragments.pack(files)))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x01",
        b"\x02not deflate",
        bytes([fragments.DEFLATED]) + zlib.compress(b""),
        bytes([fragments.DEFLATED]) + zlib.compress(bytes(range(256)) * 8),
    ],
)
def test_inspect_refuses_garbage(data: bytes) -> None:
    with pytest.raises(BadFragment):
        inspect(data)


def test_a_fragment_is_one_zstd_frame_and_a_stored_version_2_one_still_reads() -> None:
    packed = fragments.pack(GOOD)
    assert packed[0] == fragments.VERSION == 3
    header = zstandard.get_frame_parameters(packed[1:])
    assert header.content_size == len(fragments.layout(packed))
    assert header.has_checksum
    # What catalogs and older edges wrote: the same layout as a zlib stream.
    stored = bytes([fragments.DEFLATED]) + zlib.compress(fragments.layout(packed))
    assert fragments.unpack(stored) == fragments.unpack(packed) == GOOD
    assert inspect(stored) == inspect(packed)


def test_inspect_refuses_a_zstd_bomb_by_its_header_before_decompressing() -> None:
    head = (1).to_bytes(4, "little") + bytes(4)
    frame = zstandard.ZstdCompressor(level=19).compress(head + bytes(1 << 26))
    bomb = bytes([fragments.VERSION]) + frame
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(BadFragment, match=f"inflates to more than {CAP} bytes"):
            inspect(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # the 64 MiB it says it holds were never given to it


def test_inspect_refuses_a_zstd_frame_that_asks_for_a_wide_window() -> None:
    # 12 MiB under the 16 MiB cap, in one segment: its window is its size, over
    # the 8 MiB a level 1 frame (512 KiB) never comes near.
    head = (1).to_bytes(4, "little") + bytes(4)
    params = zstandard.ZstdCompressionParameters.from_level(1, window_log=24)
    frame = zstandard.ZstdCompressor(compression_params=params).compress(head + bytes(12 << 20))
    with pytest.raises(BadFragment, match="asks for a window of"):
        inspect(bytes([fragments.VERSION]) + frame)


def test_inspect_stops_a_deflate_bomb_at_its_cap() -> None:
    head = (1).to_bytes(4, "little") + bytes(4)
    bomb = bytes([fragments.DEFLATED]) + zlib.compress(head + bytes(1 << 26), 9)
    assert len(bomb) < 100_000
    with pytest.raises(BadFragment, match=f"inflates to more than {CAP} bytes"):
        inspect(bomb)


def _valid(files: list[FileChunk]) -> bool:
    """What inspect promises of a fragment it lets through."""
    forbidden = ("<", ">", "\x00", "\r", "\t")
    for f in files:
        numbers = list(f.numbers)
        ids = f.message_ids.split("\n")
        if not numbers or numbers != sorted(set(numbers)) or numbers[0] < 1:
            return False
        if numbers[-1] > f.total_segments or len(ids) != len(numbers) or "" in ids:
            return False
        if any(c in f.message_ids for c in forbidden) or "\x00" in f.name + f.subject:
            return False
        for text in (f.message_ids, f.name, f.subject):
            text.encode("utf-8")  # strict: a lone surrogate raises
    return len({f.key for f in files}) == len(files) > 0


GOOD = [
    file_chunk(0, [f"{k:020}@w" for k in range(20)], name="né"),
    attrs.evolve(file_chunk(1, ["a@b", "cd@e", "f@g"], numbers=[2, 5, 9]), total_segments=10),
]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_whatever_inspect_lets_through_unpacks_to_valid_files(data: st.DataObject) -> None:
    raw = bytearray(fragments.layout(fragments.pack(GOOD)))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from([0, 1, 2, 0x0A, 0x3C, 0x80, 0xC3, 0xED, 0xFF]))
    fragment = bytes([fragments.DEFLATED]) + zlib.compress(bytes(raw))
    try:
        inspect(fragment)
    except BadFragment:
        return
    files = fragments.unpack(fragment)
    assert _valid(files), files


def test_the_good_fragment_of_the_property_test_is_valid() -> None:
    assert _valid(fragments.unpack(fragments.pack(GOOD)))
    assert inspect(fragments.pack(GOOD)).segments == 23


def _layout(ids: bytes, width: int, *, name: bytes = b"a.rar", count: int = 2) -> bytes:
    """A fragment of one file of `count` segments, built by hand (pack checks nothing)."""
    entry = fragments._ENTRY.pack(bytes(16), count, 0, count, 0, len(name), 0)
    numbers = fragments._planes(array("I", range(1, count + 1)).tobytes())
    sizes = fragments._planes(array("I", [1] * count).tobytes())
    raw = fragments._HEAD.pack(1, width) + entry + numbers + sizes + ids + name
    return bytes([fragments.DEFLATED]) + zlib.compress(raw)


def test_a_zlib_header_only_some_inflaters_read_is_refused() -> None:
    good = bytes([fragments.DEFLATED]) + zlib.compress(fragments.layout(fragments.pack(GOOD)))
    assert inspect(good).files == 2
    # A window field over 7 (with its check bits right): zlib refuses it, isal not.
    method, flags = 0x88, 0
    flags = 31 - (method << 8) % 31
    odd = good[:1] + bytes([method, flags]) + good[3:]
    with pytest.raises(BadFragment, match="not a plain zlib stream"):
        inspect(odd)
    with pytest.raises(BadFragment):
        fragments.unpack(odd)


def test_message_ids_over_the_cap_are_refused_before_any_work_on_them() -> None:
    cap = 4096
    wide = b"\xc3" * (cap + 1) + b"\xa9" * (cap + 1)  # two ids, column-wise, not ASCII
    with pytest.raises(BadFragment, match=f"message-ids of {cap + 1} bytes, over {cap}"):
        fragments.inspect(_layout(wide, cap + 1), max_bytes=CAP, max_text_chars=cap)
    long_id = b"x" * (cap + 1) + b"\ny"  # two ids of different widths
    with pytest.raises(BadFragment, match=f"a message-id of more than {cap} bytes"):
        fragments.inspect(_layout(long_id, 0), max_bytes=CAP, max_text_chars=cap)
    assert fragments.inspect(_layout(b"x" * cap + b"\ny", 0), max_bytes=CAP, max_text_chars=cap)


def test_a_name_over_four_bytes_a_character_is_refused_undecoded() -> None:
    name = "é".encode() * 3000  # 6000 bytes, 3000 characters: within the cap of 4096
    assert fragments.inspect(_layout(b"a\nb", 0, name=name), max_bytes=CAP, max_text_chars=4096)
    with pytest.raises(BadFragment, match="its name has 16385 bytes, over 16384"):
        fragments.inspect(
            _layout(b"a\nb", 0, name=b"\xff" * 16385), max_bytes=CAP, max_text_chars=4096
        )
