"""The spool stream frame codec: layout, round trips, feeding, and broken streams."""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Callable, Iterable
from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.errors import LocalProtocolError, RemoteProtocolError
from usenet_indexer.wire.frames import (
    CLOSED,
    HEADER_BYTES,
    MAX_ARTICLE,
    MAX_ERROR_BYTES,
    MAX_LINK_BYTES,
    NEED_DATA,
    Codec,
    Frame,
    FrameDecoder,
    FrameError,
    FrameKind,
    encode_frame,
    encode_header,
)

MAX = 1 << 20


def header(
    kind: int,
    first: int = 0,
    last: int = 0,
    codec: int = 0,
    length: int = 0,
    *,
    magic: bytes = b"\xc1U",
    version: int = 1,
) -> bytes:
    return struct.pack(">2sBBQQBI", magic, version, kind, first, last, codec, length)


def decode_all(chunks: Iterable[bytes], *, max_payload: int = MAX) -> list[Frame]:
    """Feed the pieces, collect every frame, and end the stream: it must close cleanly."""
    decoder = FrameDecoder(max_payload_bytes=max_payload)
    frames: list[Frame] = []
    for chunk in chunks:
        decoder.receive_data(chunk)
        while isinstance(event := decoder.next_frame(), Frame):
            frames.append(event)
        assert event is NEED_DATA
    decoder.receive_eof()
    while isinstance(event := decoder.next_frame(), Frame):
        frames.append(event)
    assert event is CLOSED
    return frames


def fed(data: bytes, how: str) -> list[bytes]:
    """The stream as whole, byte by byte, or in pieces that end mid-header (h11's `tr`)."""
    if how == "whole":
        return [data]
    if how == "bytes":
        return [data[i : i + 1] for i in range(len(data))]
    return [data[i : i + 7] for i in range(0, len(data), 7)]


def stream(frames: list[Frame]) -> bytes:
    return b"".join(map(encode_frame, frames))


def test_the_header_layout() -> None:
    frame = Frame.chunk(2**32 + 1, 2**63 - 1, b"payload", codec=Codec.ZLIB)
    expected = (
        b"\xc1U\x01\x01"
        + (2**32 + 1).to_bytes(8, "big")
        + (2**63 - 1).to_bytes(8, "big")
        + b"\x01"
        + (7).to_bytes(4, "big")
    )
    assert encode_header(frame) == expected
    assert encode_frame(frame) == expected + b"payload"
    assert HEADER_BYTES == len(expected) == 25
    assert encode_frame(Frame.keepalive()) == header(3)
    assert encode_frame(Frame.end(9)) == header(4, 9, 9)
    assert encode_frame(Frame.gap(5, 6)) == header(2, 5, 6)
    assert encode_frame(Frame.error("x")) == header(5, length=1) + b"x"
    link = Frame.link(3, 4, "http://s3/b/k?X-Amz-Signature=1", codec=Codec.ZLIB)
    assert encode_frame(link) == header(6, 3, 4, 1, 31) + b"http://s3/b/k?X-Amz-Signature=1"
    assert link.url == "http://s3/b/k?X-Amz-Signature=1"


RANGE = [
    Frame.keepalive(),
    Frame.chunk(1, 1000, b"\x78\x9c" + bytes(3000), codec=Codec.ZLIB),
    Frame.keepalive(),
    Frame.gap(1001, 1500),
    Frame.chunk(1501, 1501, b"", codec=Codec.NONE),
    Frame.chunk(1502, 2**40, b"gz", codec=Codec.GZIP),
    Frame.link(
        2**40 + 1,
        2**41,
        "https://s3.example.org/spool/g/1-2.zlib?X-Amz-Signature=ab",
        codec=Codec.ZLIB,
    ),
    Frame.end(2**41),
]


@pytest.mark.parametrize("how", ["whole", "bytes", "pieces"])
def test_a_range_decodes_fed_any_way(how: str) -> None:
    assert decode_all(fed(stream(RANGE), how)) == RANGE


def test_an_error_frame_ends_the_stream() -> None:
    frames = [Frame.chunk(1, 2, b"x", codec=Codec.ZLIB), Frame.error("spool file lost: ünïcode")]
    assert decode_all([stream(frames)]) == frames
    assert frames[1].message == "spool file lost: ünïcode"
    assert frames[0].message == ""


def test_next_frame_waits_after_the_end_until_the_stream_ends() -> None:
    decoder = FrameDecoder(max_payload_bytes=MAX)
    decoder.receive_data(encode_frame(Frame.end(5)))
    assert decoder.next_frame() == Frame.end(5)
    assert decoder.next_frame() is NEED_DATA
    decoder.receive_eof()
    assert decoder.next_frame() is CLOSED
    assert decoder.next_frame() is CLOSED


def test_with_trailing_data_each_frame_comes_out_whole() -> None:
    """Fed up to each frame's end and the next frame's first bytes (h11's trailing data)."""
    data = stream(RANGE)
    ends = list(accumulate(len(encode_frame(frame)) for frame in RANGE))
    decoder = FrameDecoder(max_payload_bytes=MAX)
    fed_up_to = 0
    for frame, end in zip(RANGE, ends, strict=True):
        upto = min(end + 3, len(data))
        decoder.receive_data(data[fed_up_to:upto])
        fed_up_to = upto
        assert decoder.next_frame() == frame
        assert decoder.buffered_bytes == upto - end
        assert decoder.next_frame() is NEED_DATA
    decoder.receive_eof()
    assert decoder.next_frame() is CLOSED


def test_bytes_after_the_end_frame_are_refused() -> None:
    decoder = FrameDecoder(max_payload_bytes=MAX)
    decoder.receive_data(encode_frame(Frame.end(5)) + encode_frame(Frame.keepalive()))
    assert decoder.next_frame() == Frame.end(5)
    with pytest.raises(FrameError, match="25 bytes after the stream's last frame"):
        decoder.next_frame()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "ended before its END frame"),
        (encode_frame(Frame.keepalive()), "ended before its END frame"),
        (header(3)[:10], r"ended inside a frame header \(10 of 25 bytes\)"),
        (
            header(1, 1, 2, 1, 100) + bytes(40),
            r"inside a CHUNK frame's payload \(40 of 100 bytes\)",
        ),
        (header(5, length=10) + b"abc", r"inside a ERROR frame's payload \(3 of 10"),
    ],
)
def test_a_cut_stream_is_an_error(data: bytes, message: str) -> None:
    decoder = FrameDecoder(max_payload_bytes=MAX)
    decoder.receive_data(data)
    while decoder.next_frame() is not NEED_DATA:
        pass
    decoder.receive_eof()
    with pytest.raises(FrameError, match=message):
        decoder.next_frame()


BAD_HEADERS = {
    "html": (b"<html><body>502 Bad Gateway" + bytes(20), "not a spool stream frame: magic b'<h'"),
    "json": (b'{"error": "lease lost", "detail": ""}', "magic b'{\"'"),
    "version 2": (header(3, version=2), "frame version 2 is not supported"),
    "kind 0": (header(0), "unknown frame kind 0"),
    "kind 7": (header(7), "unknown frame kind 7"),
    "link without url": (header(6, 1, 2, 1), "LINK frame: 0 bytes of URL"),
    "link too long": (header(6, 1, 2, 1, MAX_LINK_BYTES + 1), "LINK frame: 8193 bytes of URL"),
    "link not UTF-8": (header(6, 1, 2, 1, 2) + b"\xff\xfe", "the URL is not UTF-8"),
    "first after last": (header(1, 9, 8, 1, 1), r"articles 9..8 are not a range"),
    "beyond bigint": (header(2, 1, 2**63), r"articles 1..9223372036854775808"),
    "codec 4": (header(1, 1, 2, 4, 1), "CHUNK frame: unknown codec 4"),
    "gap with codec": (header(2, 1, 2, 1), r"GAP frame: codec 1 \(only CHUNK"),
    "gap with payload": (header(2, 1, 2, 0, 3), "GAP frame: 3 bytes of payload"),
    "keepalive with payload": (header(3, length=1), "KEEPALIVE frame: 1 bytes of payload"),
    "keepalive with articles": (header(3, 0, 4), r"KEEPALIVE frame: articles 0..4"),
    "end over two articles": (header(4, 4, 5), r"END frame: articles 4..5"),
    "end with payload": (header(4, 4, 4, 0, 2), "END frame: 2 bytes of payload"),
    "error without message": (header(5), r"ERROR frame: 0 bytes of message"),
    "error too long": (header(5, length=MAX_ERROR_BYTES + 1), "ERROR frame: 1025 bytes"),
    "error with articles": (header(5, 1, 1, 0, 1), r"ERROR frame: articles 1..1"),
    "error not UTF-8": (header(5, length=2) + b"\xff\xfe", "the message is not UTF-8"),
    "chunk over the max": (header(1, 1, 2, 1, MAX + 1), "payload of 1048577 bytes, over the cap"),
    "chunk at the u32 max": (header(1, 1, 2, 1, 2**32 - 1), "over the cap of 1048576"),
}


@pytest.mark.parametrize("name", sorted(BAD_HEADERS))
def test_bad_headers_are_refused_before_the_payload(name: str) -> None:
    data, message = BAD_HEADERS[name]
    decoder = FrameDecoder(max_payload_bytes=MAX)
    decoder.receive_data(data)  # the header (and at most a short payload): no more is needed
    with pytest.raises(FrameError, match=message) as caught:
        decoder.next_frame()
    assert isinstance(caught.value, RemoteProtocolError)
    # The decoder stays broken.
    with pytest.raises(FrameError, match=message):
        decoder.next_frame()


def test_a_bad_header_is_found_however_it_is_fed() -> None:
    data = encode_frame(Frame.keepalive()) + header(1, 1, 2, 1, MAX + 1)
    decoder = FrameDecoder(max_payload_bytes=MAX)
    with pytest.raises(FrameError, match="over the cap"):  # noqa: PT012  (feeding is the point)
        for i in range(len(data)):
            decoder.receive_data(data[i : i + 1])
            while decoder.next_frame() is not NEED_DATA:
                pass
    assert decoder.buffered_bytes == HEADER_BYTES


def test_receive_data_after_eof_is_our_error() -> None:
    decoder = FrameDecoder(max_payload_bytes=MAX)
    decoder.receive_eof()
    with pytest.raises(LocalProtocolError, match="after receive_eof"):
        decoder.receive_data(b"x")


@pytest.mark.parametrize("max_payload", [-1, 2**32])
def test_max_payload_is_a_u32(max_payload: int) -> None:
    with pytest.raises(ValueError, match="max_payload_bytes"):
        FrameDecoder(max_payload_bytes=max_payload)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Frame.chunk(5, 4, b"", codec=Codec.ZLIB), r"articles 5..4"),
        (lambda: Frame.gap(-1, 3), r"articles -1..3"),
        (lambda: Frame.end(MAX_ARTICLE + 1), "not a range within"),
        (lambda: Frame(FrameKind.KEEPALIVE, payload=b"x"), "1 bytes of payload"),
        (lambda: Frame(FrameKind.GAP, 1, 2, Codec.GZIP), "only CHUNK frames have a codec"),
        (lambda: Frame(FrameKind.ERROR, payload=b"\xff"), "not UTF-8"),
    ],
)
def test_invalid_frames_cannot_be_built(build: Callable[[], Frame], message: str) -> None:
    with pytest.raises(LocalProtocolError, match=message):
        build()


def test_error_messages_are_cut_at_a_character_and_made_utf8() -> None:
    long = Frame.error("é" * 2000)
    assert len(long.payload) == MAX_ERROR_BYTES
    assert long.message == "é" * (MAX_ERROR_BYTES // 2)
    odd = Frame.error("x" + "é" * 600)  # 1201 bytes: the cut falls inside a character
    assert len(odd.payload) == MAX_ERROR_BYTES - 1
    assert Frame.error("lone \udcff").message == "lone ?"
    assert Frame.error("").message == "error"


def test_a_large_payload_in_small_pieces_is_linear() -> None:
    payload = bytes(range(256)) * (32 * 1024)  # 8 MiB
    frames = [Frame.chunk(1, 10**6, payload, codec=Codec.ZLIB), Frame.end(10**6)]
    data = stream(frames)
    started = time.perf_counter()
    # 1 KiB pieces: a decoder that copied its buffer per piece would move ~32 GB.
    assert decode_all(fed_in(data, 1024), max_payload=16 * 1024 * 1024) == frames
    assert time.perf_counter() - started < 2


def _decoding_cpu(count: int) -> float:
    """This thread's CPU seconds to decode `count` keepalives and an end in one piece."""
    data = stream([Frame.keepalive()] * count + [Frame.end(1)])
    started = time.thread_time()
    assert len(decode_all([data])) == count + 1
    return time.thread_time() - started


def test_many_small_frames_in_one_piece_are_linear() -> None:
    # Ten times the frames cost about ten times the CPU; a decoder that copied
    # what is left of its buffer per frame would cost about a hundred times.
    # A ratio in one process, CPU not wall time: a loaded machine moves both alike.
    small = min(_decoding_cpu(10_000) for _ in range(3))
    large = min(_decoding_cpu(100_000) for _ in range(3))
    assert large < 30 * max(small, 1e-3), (small, large)


def fed_in(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


articles = st.integers(min_value=0, max_value=MAX_ARTICLE)


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    kind = draw(st.sampled_from([FrameKind.CHUNK, FrameKind.GAP, FrameKind.KEEPALIVE]))
    if kind == FrameKind.KEEPALIVE:
        return Frame.keepalive()
    first, last = sorted((draw(articles), draw(articles)))
    if kind == FrameKind.GAP:
        return Frame.gap(first, last)
    payload = draw(st.binary(max_size=300))
    return Frame.chunk(first, last, payload, codec=draw(st.sampled_from(Codec)))


@st.composite
def streams(draw: st.DrawFn) -> list[Frame]:
    body = draw(st.lists(frames(), max_size=8))
    last = draw(
        st.one_of(articles.map(Frame.end), st.text(min_size=1, max_size=50).map(Frame.error))
    )
    return [*body, last]


@settings(max_examples=200, deadline=1000)
@given(streams(), st.data())
def test_arbitrary_streams_round_trip_however_fed(sent: list[Frame], data: st.DataObject) -> None:
    encoded = stream(sent)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(encoded)), max_size=20)))
    pieces = [encoded[a:b] for a, b in zip([0, *cuts], [*cuts, len(encoded)], strict=True)]
    assert decode_all([encoded]) == sent
    assert decode_all(pieces) == sent
    assert decode_all(fed(encoded, "bytes")) == sent


@settings(max_examples=300, deadline=1000)
@given(
    st.one_of(st.binary(max_size=200), st.binary(max_size=200).map(lambda b: b"\xc1U\x01" + b)),
    st.integers(1, 50),
)
def test_arbitrary_bytes_give_frames_or_frame_error(data: bytes, piece: int) -> None:
    decoder = FrameDecoder(max_payload_bytes=100)
    with contextlib.suppress(FrameError):
        for chunk in fed_in(data, piece):
            decoder.receive_data(chunk)
            while isinstance(decoder.next_frame(), Frame):
                pass
        decoder.receive_eof()
        while isinstance(decoder.next_frame(), Frame):
            pass
