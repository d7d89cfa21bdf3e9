"""yEnc bodies decoded: real bytes posted in parts, and the bodies that go wrong."""

from __future__ import annotations

import random
import tracemalloc
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.decode.yenc import YencError, decode_body
from usenet_indexer.errors import UidxError
from usenet_indexer.testing.yenc import encode_lines, yenc_article, yenc_articles


def file_bytes(size: int, seed: int = 1) -> bytes:
    """Bytes with every value in them (the escaped ones too), like a compressed file."""
    return random.Random(seed).randbytes(size)


def test_a_file_posted_in_parts_decodes_back_to_its_bytes() -> None:
    data = file_bytes(3 * 384_000 + 1234)
    bodies = yenc_articles(data, b"Show.Name.S01E02.1080p.WEB.H264-GROUP.mkv", 384_000)
    parts = [decode_body(body) for body in bodies]
    assert b"".join(p.data for p in parts) == data
    first = parts[0]
    assert first.name == "Show.Name.S01E02.1080p.WEB.H264-GROUP.mkv"
    assert (first.part, first.total, first.begin, first.end) == (1, 4, 1, 384_000)
    assert first.size == len(data)
    assert all(p.crc_ok for p in parts)
    assert not any(p.cut for p in parts)
    assert parts[-1].end == len(data)


def test_a_single_part_post_is_checked_by_its_crc32() -> None:
    data = file_bytes(5000)
    part = decode_body(yenc_article(data, b"x.nfo"))
    assert (part.part, part.total, part.begin, part.end) == (None, None, None, None)
    assert part.data == data
    assert part.crc_ok is True


def test_text_before_ybegin_is_skipped() -> None:
    data = file_bytes(1000)
    body = b"This is a text line.\r\n\r\n" + yenc_article(data, b"a.bin")
    assert decode_body(body).data == data


def test_text_after_yend_is_ignored() -> None:
    data = file_bytes(1000)
    body = yenc_article(data, b"a.bin") + b"-- \r\nposted with a tool\r\n"
    assert decode_body(body).data == data


def test_lines_starting_with_a_dot_survive() -> None:
    # Bytes that shift to "." (46 - 42 = 4) at every line start.
    data = bytes([4]) * 5000
    body = yenc_article(data, b"dots.bin")
    assert b"\r\n." in body
    assert decode_body(body).data == data


def test_an_empty_file() -> None:
    part = decode_body(yenc_article(b"", b"empty.txt"))
    assert part.data == b""
    assert part.size == 0
    assert part.crc_ok is True


def test_a_trailer_without_a_crc_is_not_checked() -> None:
    data = file_bytes(300)
    body = (
        b"=ybegin line=128 size=300 name=n.bin\r\n" + encode_lines(data) + b"\r\n=yend size=300\r\n"
    )
    part = decode_body(body)
    assert part.data == data
    assert part.crc_ok is None


def test_a_multi_part_trailer_with_only_the_file_crc_is_not_checked() -> None:
    data = file_bytes(300)
    body = (
        b"=ybegin part=1 total=2 line=128 size=600 name=n.bin\r\n=ypart begin=1 end=300\r\n"
        + encode_lines(data)
        + b"\r\n=yend size=300 part=1 crc32=%08x\r\n" % (zlib.crc32(data) ^ 1)
    )
    assert decode_body(body).crc_ok is None


def test_a_part_of_many_without_ypart_is_not_checked_by_the_file_crc() -> None:
    data = file_bytes(300)
    body = (
        b"=ybegin part=2 total=5 line=128 size=1500 name=n.bin\r\n"
        + encode_lines(data)
        + b"\r\n=yend size=300 crc32=%08x\r\n" % (zlib.crc32(data) ^ 1)
    )
    assert decode_body(body).crc_ok is None


def test_a_crc_mismatch_is_an_error() -> None:
    data = file_bytes(2000)
    body = yenc_article(data, b"a.bin", part=1, total=1, crc=zlib.crc32(data) ^ 0xFF)
    with pytest.raises(YencError) as raised:
        decode_body(body)
    assert raised.value.reason == "crc"


def test_a_damaged_byte_is_caught_by_the_crc() -> None:
    body = bytearray(yenc_article(file_bytes(2000), b"a.bin"))
    at = body.index(b"\r\n", 60) + 10
    body[at] = ord("A") if body[at] != ord("A") else ord("B")
    with pytest.raises(YencError, match="crc"):
        decode_body(bytes(body))


def test_a_truncated_body_is_an_error() -> None:
    body = yenc_article(file_bytes(20_000), b"a.bin", part=1, total=3)
    for cut in (len(body) // 2, body.index(b"=yend"), 60):
        with pytest.raises(YencError) as raised:
            decode_body(body[:cut])
        assert raised.value.reason == "truncated"


def test_a_body_with_no_yenc_is_an_error() -> None:
    for body in (b"", b"hello\r\n", b"begin 644 file.bin\r\nM86)C\r\nend\r\n", b"=ybeginx\r\n"):
        with pytest.raises(YencError) as raised:
            decode_body(body)
        assert raised.value.reason == "no yenc"
        assert isinstance(raised.value, UidxError)


@pytest.mark.parametrize(
    "header",
    [
        b"=ybegin line=128 name=nosize.bin",
        b"=ybegin line=128 size=12x name=a",
        b"=ybegin line=128 size=99999999999999999999999 name=a",
        b"=ybegin part=-1 line=128 size=10 name=a",
        b"=ybegin line=128 junk size=10 name=a",
    ],
)
def test_malformed_header_fields_are_errors(header: bytes) -> None:
    body = header + b"\r\n" + encode_lines(b"0123456789") + b"\r\n=yend size=10\r\n"
    with pytest.raises(YencError) as raised:
        decode_body(body)
    assert raised.value.reason == "malformed"


def test_a_size_that_is_not_the_data_is_an_error() -> None:
    data = file_bytes(100)
    body = b"=ybegin line=128 size=100 name=a\r\n" + encode_lines(data) + b"\r\n=yend size=99\r\n"
    with pytest.raises(YencError, match="size"):
        decode_body(body)


def test_a_name_with_nul_and_bytes_that_are_not_utf8() -> None:
    raw = b"Movie\x00Title\xff\xfe.2019\x07.mkv"
    part = decode_body(yenc_article(b"data", raw))
    assert part.raw_name == raw
    assert part.name == "Movie\ufffdTitle\ufffd\ufffd.2019\ufffd.mkv"
    assert "\x00" not in part.name


def test_a_utf8_name_and_spaces_in_it() -> None:
    part = decode_body(yenc_article(b"data", "Ünïcode name with  spaces.bin".encode()))
    assert part.name == "Ünïcode name with  spaces.bin"


def test_a_huge_part_is_cut_at_max_bytes() -> None:
    data = file_bytes(3 << 20)
    part = decode_body(yenc_article(data, b"big.bin"), max_bytes=1 << 20)
    assert part.cut
    assert part.data == data[: 1 << 20]
    assert part.crc_ok is None


def test_a_huge_body_of_one_endless_line_is_cut_not_held() -> None:
    # 64 MiB of one line: only about 2 * max_bytes of it is copied and decoded.
    body = b"=ybegin line=128 size=1 name=a\r\n" + b"k" * (64 << 20) + b"\r\n=yend size=1\r\n"
    tracemalloc.start()
    try:
        part = decode_body(body, max_bytes=1 << 16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert part.cut
    assert len(part.data) == 1 << 16
    assert set(part.data) == {ord("k") - 42}
    assert peak < 2 << 20


def test_a_header_line_without_an_end_is_malformed() -> None:
    with pytest.raises(YencError, match="malformed"):
        decode_body(b"=ybegin line=128 size=1 name=" + b"n" * (1 << 20))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.integers(1, 200))
def test_any_bytes_round_trip(data: bytes, line_length: int) -> None:
    body = (
        b"=ybegin line=128 size=%d name=f\r\n" % len(data)
        + encode_lines(data, line_length)
        + b"\r\n=yend size=%d crc32=%08x\r\n" % (len(data), zlib.crc32(data))
    )
    assert decode_body(body).data == data


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400), st.data())
def test_mangled_bodies_raise_only_yenc_errors(data: bytes, draw: st.DataObject) -> None:
    body = bytearray(yenc_article(data, b"name.bin", part=1, total=2))
    for _ in range(draw.draw(st.integers(1, 8))):
        at = draw.draw(st.integers(0, len(body) - 1))
        body[at] = draw.draw(st.integers(0, 255))
    cut = draw.draw(st.integers(0, len(body)))
    try:
        part = decode_body(bytes(body[:cut]), max_bytes=draw.draw(st.integers(0, 1000)))
    except YencError:
        return
    assert len(part.data) <= 1000
