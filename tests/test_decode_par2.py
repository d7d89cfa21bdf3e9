"""PAR2 packets: real sets made by par2cmdline, truncated and damaged ones, fuzzing."""

from __future__ import annotations

import hashlib
import os
import random
import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from probe_tools import require_tool, run_tool

from usenet_indexer.decode.par2 import (
    FILE_DESC,
    MAGIC,
    MAIN,
    UNICODE_NAME,
    Par2Error,
    Par2Index,
    parse_par2,
)

SET_ID = bytes(range(16))
# A non-UTF-8 name (Latin-1 é) with a control character: what an uploader's
# file system may hold.
ODD_NAME = b"caf\xe9 n\x01me.bin"


def packet(kind: bytes, body: bytes, set_id: bytes = SET_ID, *, md5: bytes | None = None) -> bytes:
    """A PAR2 packet as the spec lays it out (the MD5 right unless given)."""
    rest = set_id + kind + body
    digest = hashlib.md5(rest).digest() if md5 is None else md5
    return MAGIC + struct.pack("<Q", 32 + len(rest)) + digest + rest


def file_desc(file_id: bytes, name: bytes, length: int = 1000) -> bytes:
    padded = name + b"\0" * (-len(name) % 4)
    return packet(FILE_DESC, file_id + b"m" * 16 + b"k" * 16 + struct.pack("<Q", length) + padded)


def main_packet(*file_ids: bytes) -> bytes:
    return packet(MAIN, struct.pack("<QI", 65536, len(file_ids)) + b"".join(file_ids))


@pytest.fixture(scope="module")
def par2_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recovery set made by par2cmdline over three generated files."""
    par2 = require_tool("par2", "par2")
    folder = tmp_path_factory.mktemp("par2set")
    sizes = {
        b"Show.Name.S01E02.1080p.WEB.H264-GROUP.mkv": 300_000,
        b"Show.Name.S01E02.1080p.WEB.H264-GROUP.nfo": 3_000,
        ODD_NAME: 20_000,
    }
    rng = random.Random(7)
    for name, size in sizes.items():
        (folder / os.fsdecode(name)).write_bytes(rng.randbytes(size))
    names = [os.fsdecode(n) for n in sizes]
    run_tool([par2, "create", "-q", "-q", "-r10", "-n2", "abc123.par2", *names], folder)
    return folder


def the_files(folder: Path) -> dict[bytes, bytes]:
    """The generated files by their names' bytes."""
    return {
        os.fsencode(p.name): p.read_bytes()
        for p in folder.iterdir()
        if not p.name.endswith(".par2")
    }


def test_the_slice_size_comes_out_of_the_main_packet(tmp_path: Path) -> None:
    par2 = require_tool("par2", "par2")
    (tmp_path / "a.bin").write_bytes(random.Random(3).randbytes(100_000))
    run_tool([par2, "create", "-q", "-q", "-s8192", "-c5", "a.par2", "a.bin"], tmp_path)
    assert parse_par2((tmp_path / "a.par2").read_bytes()).slice_bytes == 8192
    # Built packet by packet: the main packet's first field.
    data = main_packet(b"f" * 16) + file_desc(b"f" * 16, b"x.bin")
    assert parse_par2(data).slice_bytes == 65536
    # No main packet read (a prefix of a volume): not known.
    assert parse_par2(file_desc(b"f" * 16, b"x.bin")).slice_bytes is None


def test_the_real_names_come_out_of_a_real_index_file(par2_set: Path) -> None:
    index = parse_par2((par2_set / "abc123.par2").read_bytes())
    files = the_files(par2_set)
    assert {f.raw_name for f in index.files} == set(files)
    assert "Show.Name.S01E02.1080p.WEB.H264-GROUP.mkv" in {f.name for f in index.files}
    for file in index.files:
        content = files[file.raw_name]
        assert file.length == len(content)
        assert file.md5 == hashlib.md5(content).digest()
        assert file.md5_16k == hashlib.md5(content[:16384]).digest()
    assert index.set_id is not None
    assert len(index.set_id) == 16
    assert (index.bad_packets, index.unknown_packets, index.truncated) == (0, 0, False)
    assert index.packets >= 1 + 2 * len(files)


def test_a_name_that_is_not_utf8(par2_set: Path) -> None:
    index = parse_par2((par2_set / "abc123.par2").read_bytes())
    odd = next(f for f in index.files if f.raw_name == ODD_NAME)
    assert odd.name == "caf\ufffd n\ufffdme.bin"


def test_volumes_repeat_the_files_and_name_them_once(par2_set: Path) -> None:
    index_file = parse_par2((par2_set / "abc123.par2").read_bytes())
    for volume in par2_set.glob("abc123.vol*.par2"):
        index = parse_par2(volume.read_bytes())
        assert index.files == index_file.files
        assert index.set_id == index_file.set_id


def test_a_first_segment_of_a_volume_has_the_names(par2_set: Path) -> None:
    volume = max(par2_set.glob("abc123.vol*.par2"), key=lambda p: p.stat().st_size)
    data = volume.read_bytes()
    assert len(data) > 100_000
    # par2cmdline spreads the main and file description packets among the
    # recovery slices, near the start: a first segment holds them.
    index = parse_par2(data[:30_000])
    assert index.truncated
    assert len(index.files) == 3
    assert index.files == parse_par2(data).files
    # Cut inside a magic, or inside a header.
    for cut in (700, 698, 710, len(data) - 1):
        assert parse_par2(data[:cut]).truncated


def test_a_truncated_index_file_keeps_what_came_before_the_cut(par2_set: Path) -> None:
    data = (par2_set / "abc123.par2").read_bytes()
    whole = parse_par2(data)
    for cut in range(100, len(data), 997):
        try:
            index = parse_par2(data[:cut])
        except Par2Error:
            continue
        assert set(index.files) <= set(whole.files)
        assert index.bad_packets == 0
        assert index.truncated or index.packets == whole.packets


def test_a_damaged_packet_is_counted_and_skipped(par2_set: Path) -> None:
    data = bytearray((par2_set / "abc123.par2").read_bytes())
    whole = parse_par2(bytes(data))
    at = data.index(FILE_DESC)
    data[at + 40] ^= 0xFF  # inside the first file description's body
    index = parse_par2(bytes(data))
    assert index.bad_packets == 1
    assert len(index.files) == len(whole.files) - 1
    assert index.packets == whole.packets - 1


def test_hand_built_packets() -> None:
    one, two = b"1" * 16, b"2" * 16
    data = main_packet(one, two) + file_desc(one, b"a.mkv") + file_desc(two, b"b.nfo\0\0")
    index = parse_par2(data + file_desc(one, b"a.mkv"))
    assert [f.name for f in index.files] == ["a.mkv", "b.nfo"]
    assert index.set_id == SET_ID
    assert index.packets == 4


def test_trailing_bytes_after_the_packets() -> None:
    index = parse_par2(file_desc(b"1" * 16, b"a.mkv") + b"-- trailing text, no packet --")
    assert (len(index.files), index.truncated, index.bad_packets) == (1, False, 0)


def test_a_missing_tool_skips_here_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_tool("par2", "par2")
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="ensure-probe-tools"):
        require_tool("par2", "par2")


def test_unknown_packets_are_skipped_and_counted() -> None:
    data = packet(b"PAR 2.0\0Future\0\0", b"x" * 12) + file_desc(b"1" * 16, b"a.mkv")
    index = parse_par2(data)
    assert (index.unknown_packets, index.packets, len(index.files)) == (1, 2, 1)


def test_a_unicode_name_packet_names_a_file_whose_name_does_not_decode() -> None:
    file_id = b"u" * 16
    name = "Ünïcode.mkv".encode("utf-16-le")
    data = file_desc(file_id, "Ünïcode.mkv".encode("latin-1")) + packet(
        UNICODE_NAME, file_id + name + b"\0" * (-len(name) % 4)
    )
    (file,) = parse_par2(data).files
    assert file.name == "Ünïcode.mkv"
    assert file.raw_name == "Ünïcode.mkv".encode("latin-1")


@pytest.mark.parametrize(
    "bad",
    [
        # A length far past the body: never sliced, never allocated.
        MAGIC + struct.pack("<Q", 1 << 62) + b"\0" * 48,
        MAGIC + struct.pack("<Q", (1 << 64) - 4) + b"\0" * 48,
        MAGIC + struct.pack("<Q", 8) + b"\0" * 56,  # shorter than a header
        MAGIC + struct.pack("<Q", 66) + b"\0" * 58,  # not a multiple of 4
        packet(FILE_DESC, b"short"),  # a body too short for its fields
        packet(MAIN, b"\0" * 13),
        packet(FILE_DESC, b"\0" * 60, md5=b"\0" * 16),  # a wrong MD5
    ],
)
def test_a_bad_packet_before_a_good_one(bad: bytes) -> None:
    index = parse_par2(bad + file_desc(b"1" * 16, b"a.mkv"))
    assert [f.name for f in index.files] == ["a.mkv"]
    assert index.bad_packets == 1
    assert not index.truncated


def test_a_length_past_the_end_of_the_data_is_truncation() -> None:
    data = file_desc(b"1" * 16, b"a.mkv") + MAGIC + struct.pack("<Q", 1 << 40) + b"\0" * 100
    index = parse_par2(data)
    assert index.truncated
    assert index.bad_packets == 0
    assert len(index.files) == 1


@pytest.mark.parametrize(
    "data",
    [b"", b"PAR2", MAGIC, b"not a par2 file at all" * 100, MAGIC + b"\xff" * 56],
)
def test_data_without_a_valid_packet_is_an_error(data: bytes) -> None:
    with pytest.raises(Par2Error) as raised:
        parse_par2(data)
    assert raised.value.reason == "no packets"


def test_a_name_of_a_megabyte_is_a_bad_packet() -> None:
    index = parse_par2(file_desc(b"1" * 16, b"n" * (1 << 20)) + file_desc(b"2" * 16, b"b.mkv"))
    assert [f.name for f in index.files] == ["b.mkv"]
    assert index.bad_packets == 1


def test_max_packets_stops_the_walk() -> None:
    data = b"".join(file_desc(bytes([i]) * 16, b"f%d" % i) for i in range(50))
    assert len(parse_par2(data, max_packets=10).files) == 10


def test_a_megabyte_of_magics_is_read_quickly() -> None:
    index = parse_par2(file_desc(b"1" * 16, b"a") + MAGIC * (1 << 17))
    assert index.bad_packets > 0 or index.truncated


def checked(data: bytes) -> Par2Index | None:
    """parse_par2 on fuzzed data: a Par2Error or an index, and no big allocation."""
    tracemalloc.start()
    try:
        index = parse_par2(data)
    except Par2Error:
        index = None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 2 * len(data) + (1 << 20)
    return index


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=4000))
def test_fuzz_random_bytes(data: bytes) -> None:
    checked(data)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([MAIN, FILE_DESC, UNICODE_NAME, b"PAR 2.0\0RecvSlic", b"x" * 16]),
            st.binary(max_size=120),
            st.booleans(),
        ),
        max_size=6,
    ),
    st.data(),
)
def test_fuzz_packet_streams(packets: list[tuple[bytes, bytes, bool]], draw: st.DataObject) -> None:
    data = bytearray(b"".join(packet(k, b, md5=None if ok else b"\0" * 16) for k, b, ok in packets))
    if data and draw.draw(st.booleans()):
        at = draw.draw(st.integers(0, len(data) - 1))
        size = draw.draw(st.sampled_from([0, 63, 64, 1 << 31, 1 << 63, (1 << 64) - 1]))
        data[at : at + 8] = struct.pack("<Q", size)
    checked(bytes(data[: draw.draw(st.integers(0, len(data)))]))


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_fuzz_mutated_real_files(par2_set: Path, draw: st.DataObject) -> None:
    data = bytearray((par2_set / "abc123.par2").read_bytes()[:8000])
    for _ in range(draw.draw(st.integers(1, 20))):
        at = draw.draw(st.integers(0, len(data) - 1))
        data[at] = draw.draw(st.integers(0, 255))
    checked(bytes(data))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fuzz_packet_bodies_past_their_md5(draw: st.DataObject) -> None:
    # Mutations inside a packet's body, its MD5 then fixed: the reader sees them.
    one = b"1" * 16
    data = bytearray(main_packet(one) + file_desc(one, b"a.mkv") + file_desc(b"2" * 16, b"b"))
    starts = [i for i in range(len(data)) if data.startswith(MAGIC, i)]
    at = draw.draw(st.sampled_from(starts))
    end = at + struct.unpack_from("<Q", data, at + 8)[0]
    for _ in range(draw.draw(st.integers(1, 6))):
        data[draw.draw(st.integers(at + 48, end - 1))] = draw.draw(st.integers(0, 255))
    data[at + 16 : at + 32] = hashlib.md5(data[at + 32 : end]).digest()
    checked(bytes(data))
