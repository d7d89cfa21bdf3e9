"""Compressed overview replies (XFEATURE COMPRESS GZIP, XZVER) in the sans-IO core.

Every reply is fed whole, one byte at a time, in threes, and followed by the
next pipelined reply. The wire forms are built here (`gzip_data`,
`xzver_data`); tests/test_nntp_client.py serves them from its fake server.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Sequence

import pytest
from chunkers import CHUNKERS, Chunker, bytewise, in_threes, whole
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.nntp import compressed as c
from usenet_indexer.nntp import protocol as p
from usenet_indexer.nntp.errors import (
    CompressionError,
    IncompleteResponse,
    LineTooLong,
    RemoteProtocolError,
)

# -- the wire forms (what a server sends) --------------------------------------


def stuffed_text(lines: Sequence[bytes], *, dot: bool = True) -> bytes:
    """The plain data of a multi-line reply: dot-stuffed lines, then "." if `dot`."""
    text = b"".join((b"." + x if x.startswith(b".") else x) + b"\r\n" for x in lines)
    return text + b".\r\n" if dot else text


def gzip_data(lines: Sequence[bytes], variant: str = "a", *, real_gzip: bool = False) -> bytes:
    """The data of an OVER reply after XFEATURE COMPRESS GZIP, ended in one of three ways.

    a: the "." line inside the stream; b: inside, and a plain "." line after;
    c: the "." line only after the stream.
    """
    text = stuffed_text(lines, dot=variant in ("a", "b"))
    block = gzip.compress(text) if real_gzip else zlib.compress(text)
    return block + (b".\r\n" if variant in ("b", "c") else b"")


def yenc_lines(data: bytes, width: int = 128) -> list[bytes]:
    """yEnc-encoded lines (NUL, LF, CR and "=" escaped), not yet dot-stuffed."""
    lines: list[bytes] = []
    line = bytearray()
    for byte in data:
        code = (byte + 42) & 0xFF
        if code in (0, 10, 13, 61):
            line += bytes([61, (code + 64) & 0xFF])
        else:
            line.append(code)
        if len(line) >= width:
            lines.append(bytes(line))
            line = bytearray()
    if line:
        lines.append(bytes(line))
    return lines


def xzver_data(
    lines: Sequence[bytes],
    *,
    raw: bool = True,
    dot_inside: bool = False,
    crc: bool = True,
    width: int = 128,
) -> bytes:
    """The data of an XZVER reply: a yEnc block of the deflated overview text."""
    text = stuffed_text(lines, dot=dot_inside)
    if raw:
        deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
        payload = deflater.compress(text) + deflater.flush()
    else:
        payload = zlib.compress(text)
    trailer = f"=yend size={len(payload)} crc32={zlib.crc32(payload):08x}" if crc else "=yend"
    block = [b"=ybegin line=128 size=-1 name=xzver", *yenc_lines(payload, width), trailer.encode()]
    return stuffed_text(block)


# -- helpers -------------------------------------------------------------------


def overview(n: int) -> bytes:
    return f"{n}\tsubject {n} yEnc (1/1)\tposter\tdate\t<{n}@x>\t\t1000\t1".encode()


LINES = [overview(n) for n in range(1, 6)]
DATE_REPLY = b"111 20260101000000\r\n"


def connection(*, gzip_mode: bool) -> p.NNTPConnection:
    """Past the greeting, and past a 290 to XFEATURE COMPRESS GZIP when `gzip_mode`."""
    conn = p.NNTPConnection(max_line_bytes=1000)
    conn.receive_data(b"200 ready\r\n")
    assert isinstance(conn.next_event(), p.Response)
    if gzip_mode:
        command = p.XFeatureCompressGzip()
        conn.send(command)
        conn.receive_data(b"290 feature enabled\r\n")
        assert conn.next_event() == p.Response(290, "feature enabled", command)
        assert conn.gzip
    return conn


def feed(conn: p.NNTPConnection, data: bytes, chunker: Chunker) -> list[p.Event]:
    events: list[p.Event] = []
    for piece in chunker(data):
        conn.receive_data(piece)
        while not isinstance(event := conn.next_event(), p.Sentinel):
            events.append(event)
    return events


def lines_of(events: list[p.Event]) -> list[bytes]:
    return [x for e in events if isinstance(e, p.DataLines) for x in e.lines]


def check_reply(
    command: p.Command, status: bytes, data: bytes, lines: list[bytes], *, gzip_mode: bool
) -> None:
    """The reply gives its status, `lines` and DataEnd: alone and before a pipelined DATE."""
    code, text = int(status[:3]), status[4:].decode()
    for chunker in CHUNKERS:
        for trailing in (b"", DATE_REPLY):
            conn = connection(gzip_mode=gzip_mode)
            conn.send(command)
            if trailing:
                conn.send(p.Date())
            events = feed(conn, status + b"\r\n" + data + trailing, chunker)
            where = f"{chunker.__name__}, trailing {trailing!r}"
            assert events[0] == p.Response(code, text, command, multiline=True), where
            assert lines_of(events) == lines, where
            assert isinstance(events[-1 if not trailing else -2], p.DataEnd), where
            if trailing:
                assert events[-1] == p.Response(111, "20260101000000", p.Date()), where
            assert conn.pending == 0, where
            assert conn.next_event() is p.NEED_DATA, where


# -- XFEATURE COMPRESS GZIP ------------------------------------------------------


@pytest.mark.parametrize("variant", ["a", "b", "c"])
@pytest.mark.parametrize("real_gzip", [False, True])
def test_gzip_terminator_variants(variant: str, real_gzip: bool) -> None:
    data = gzip_data(LINES, variant, real_gzip=real_gzip)
    status = b"224 Overview information follows [COMPRESS=GZIP]"
    check_reply(p.XOver(1, 5), status, data, LINES, gzip_mode=True)
    check_reply(p.Over(1, 5), b"224 unmarked", data, LINES, gzip_mode=True)


def test_gzip_empty_reply_and_stuffed_lines() -> None:
    for variant in ("a", "b", "c"):
        check_reply(
            p.Over(1, 5), b"224 [COMPRESS=GZIP]", gzip_data([], variant), [], gzip_mode=True
        )
    odd = [b".starts with a dot", b"..two", b"", overview(9)]
    check_reply(p.Over(1, 9), b"224 ok", gzip_data(odd, "a"), odd, gzip_mode=True)


def test_gzip_pipelined_replies_of_every_variant() -> None:
    commands = [p.Over(1, 5), p.Over(6, 6), p.Over(7, 8), p.Over(9, 9), p.Date()]
    wire = (
        b"224 a [COMPRESS=GZIP]\r\n" + gzip_data(LINES, "a")
        + b"423 no articles\r\n"
        + b"224 b [COMPRESS=GZIP]\r\n" + gzip_data([overview(7), overview(8)], "b")
        + b"224 c [COMPRESS=GZIP]\r\n" + gzip_data([overview(9)], "c")
        + DATE_REPLY
    )  # fmt: skip
    for chunker in CHUNKERS:
        conn = connection(gzip_mode=True)
        for command in commands:
            conn.send(command)
        events = feed(conn, wire, chunker)
        codes = [e.code for e in events if isinstance(e, p.Response)]
        assert codes == [224, 423, 224, 224, 111], chunker.__name__
        assert lines_of(events) == [*LINES, overview(7), overview(8), overview(9)]
        assert sum(isinstance(e, p.DataEnd) for e in events) == 3
        assert conn.pending == 0


def test_gzip_mode_leaves_plain_replies_alone() -> None:
    # An unmarked reply that is not zlib/gzip is plain; so are replies to other commands.
    check_reply(p.Over(1, 5), b"224 plain", stuffed_text(LINES), LINES, gzip_mode=True)
    body = [b"=ybegin line=128", b"x\x9c is not compressed here"]
    check_reply(p.Body("<a@b>"), b"222 0 <a@b>", stuffed_text(body), body, gzip_mode=True)


def test_a_marked_reply_of_another_command_is_inflated() -> None:
    caps = [b"VERSION 2", b"READER"]
    data = gzip_data(caps, "c")
    check_reply(p.Capabilities(), b"101 list [COMPRESS=GZIP]", data, caps, gzip_mode=True)


def test_without_xfeature_nothing_is_inflated() -> None:
    conn = connection(gzip_mode=False)
    conn.send(p.XFeatureCompressGzip())
    conn.receive_data(b"500 what?\r\n")
    assert isinstance(conn.next_event(), p.Response)
    assert not conn.gzip
    check_reply(p.Over(1, 5), b"224 plain", stuffed_text(LINES), LINES, gzip_mode=False)


def test_xfeature_command_bytes() -> None:
    conn = p.NNTPConnection()
    assert conn.send(p.XFeatureCompressGzip()) == b"XFEATURE COMPRESS GZIP\r\n"
    assert conn.send(p.XFeatureCompressGzip(True)) == b"XFEATURE COMPRESS GZIP TERMINATOR\r\n"
    assert conn.send(p.XZver(5, 9)) == b"XZVER 5-9\r\n"
    assert conn.send(p.ListExtensions()) == b"LIST EXTENSIONS\r\n"


@pytest.mark.parametrize(
    ("status", "data"),
    [
        (b"224 [COMPRESS=GZIP]", b"1\tnot compressed\r\n.\r\n"),  # marked but plain
        (b"224 ok", b"\x78\x9c" + b"garbage that does not inflate\r\n.\r\n"),
        (b"224 ok", zlib.compress(b"1\tx\r\n") + b"2\tplain after the stream\r\n.\r\n"),
        (b"224 ok", zlib.compress(b"1\tx\r\n.\r\n2\tafter the dot\r\n")),
        (b"224 ok", zlib.compress(b"1\tx\r\n.\r\n") + b"...\r\n"),
    ],
)
def test_gzip_data_that_does_not_inflate(status: bytes, data: bytes) -> None:
    for chunker in CHUNKERS:
        conn = connection(gzip_mode=True)
        conn.send(p.Over(1, 2))
        conn.send(p.Date())
        with pytest.raises(CompressionError) as caught:
            feed(conn, status + b"\r\n" + data + DATE_REPLY, chunker)
        assert caught.value.scheme == "GZIP"
        with pytest.raises(CompressionError):  # the error sticks
            conn.next_event()


def test_eof_inside_compressed_data() -> None:
    data = gzip_data(LINES, "a")
    for cut in (1, len(data) // 2, len(data) - 1):
        conn = connection(gzip_mode=True)
        conn.send(p.Over(1, 5))
        feed(conn, b"224 ok\r\n" + data[:cut], whole)
        conn.receive_data(b"")
        with pytest.raises(IncompleteResponse):
            conn.next_event()
    conn = connection(gzip_mode=True)
    conn.send(p.Over(1, 5))
    feed(conn, b"224 ok\r\n" + gzip_data(LINES, "c")[:-2], whole)  # the "." line cut
    conn.receive_data(b"")
    with pytest.raises(IncompleteResponse):
        conn.next_event()


def test_a_bomb_is_one_overlong_line_dropped_as_it_inflates() -> None:
    conn = connection(gzip_mode=True)
    conn.send(p.Over(1, 2))
    bomb = zlib.compress(b"\0" * 50_000_000, 9)  # 50 MB without a line end
    events = feed(conn, b"224 ok\r\n" + bomb, whole)
    decoder = conn._decoder
    assert decoder is not None
    assert len(decoder.text) <= c.TEXT_CHUNK_BYTES  # dropped as it came: never held
    assert events[1:] == []
    assert feed(conn, b".\r\n", whole) == [p.DataEnd(overlong=1)]


# Overview lines over the cap (1000) beside a dot-stuffed line and the "." line.
WITH_OVERLONG = [overview(1), b"2\t" + b"s" * 1200, b".3\tstuffed", b"4\t" + b"t" * 3000]


@pytest.mark.parametrize("variant", ["a", "b", "c"])
def test_gzip_overlong_overview_lines_are_dropped_and_counted(variant: str) -> None:
    data = gzip_data(WITH_OVERLONG, variant)
    kept = [overview(1), b".3\tstuffed"]
    check_reply(p.Over(1, 4), b"224 [COMPRESS=GZIP]", data, kept, gzip_mode=True)
    for chunker in CHUNKERS:
        conn = connection(gzip_mode=True)
        conn.send(p.Over(1, 4))
        events = feed(conn, b"224 ok\r\n" + data, chunker)
        assert events[-1] == p.DataEnd(overlong=2), chunker.__name__


def test_gzip_an_overlong_line_of_another_reply_is_refused() -> None:
    conn = connection(gzip_mode=True)
    conn.send(p.Capabilities())
    with pytest.raises(LineTooLong):
        feed(conn, b"101 list [COMPRESS=GZIP]\r\n" + gzip_data(WITH_OVERLONG, "c"), whole)


@pytest.mark.parametrize("dot_inside", [False, True])
def test_xzver_overlong_overview_lines_are_dropped_and_counted(dot_inside: bool) -> None:
    data = xzver_data(WITH_OVERLONG, dot_inside=dot_inside)
    kept = [overview(1), b".3\tstuffed"]
    check_reply(p.XZver(1, 4), b"224 compressed", data, kept, gzip_mode=False)
    for chunker in CHUNKERS:
        conn = connection(gzip_mode=False)
        conn.send(p.XZver(1, 4))
        events = feed(conn, b"224 compressed\r\n" + data, chunker)
        assert events[-1] == p.DataEnd(overlong=2), chunker.__name__


def test_a_large_reply_streams_in_pieces() -> None:
    lines = [overview(n) for n in range(1, 100_001)]
    conn = connection(gzip_mode=True)
    conn.send(p.Over(1, 100_000))
    conn.receive_data(b"224 ok\r\n" + gzip_data(lines, "a"))
    assert isinstance(conn.next_event(), p.Response)
    pieces = 0
    got: list[bytes] = []
    while isinstance(event := conn.next_event(), p.DataLines):
        pieces += 1
        got += event.lines
        # Never much more inflated text held than one chunk.
        decoder = conn._decoder
        assert decoder is None or len(decoder.text) <= 2 * c.TEXT_CHUNK_BYTES
    assert event == p.DataEnd()
    assert got == lines
    assert pieces > 10  # ~9 MB of text in 256 KiB chunks, not one list


# -- XZVER ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [True, False])
@pytest.mark.parametrize("dot_inside", [False, True])
def test_xzver_yenc_block(raw: bool, dot_inside: bool) -> None:
    data = xzver_data(LINES, raw=raw, dot_inside=dot_inside)
    check_reply(p.XZver(1, 5), b"224 compressed data follows", data, LINES, gzip_mode=False)


def test_xzver_many_lines_with_stuffed_yenc_lines() -> None:
    lines = [overview(n) for n in range(1, 3001)]
    # A line width at which some yEnc line starts with "." (stuffed on the wire).
    data = next(d for w in range(100, 200) if b"\r\n.." in (d := xzver_data(lines, width=w)))
    for chunker in (whole, in_threes):
        conn = connection(gzip_mode=False)
        conn.send(p.XZver(1, 3000))
        events = feed(conn, b"224 compressed\r\n" + data, chunker)
        assert lines_of(events) == lines
        assert events[-1] == p.DataEnd()


def test_xzver_binary_zlib_as_highwinds_sends_it() -> None:
    for variant in ("a", "b", "c"):
        data = gzip_data(LINES, variant)
        check_reply(p.XZver(1, 5), b"224 [COMPRESS=GZIP]", data, LINES, gzip_mode=False)


def test_xzver_empty() -> None:
    check_reply(p.XZver(1, 5), b"224 none", xzver_data([]), [], gzip_mode=False)
    check_reply(p.XZver(1, 5), b"224 none", b".\r\n", [], gzip_mode=False)
    conn = connection(gzip_mode=False)
    conn.send(p.XZver(1, 5))
    conn.receive_data(b"423 no articles\r\n")
    assert conn.next_event() == p.Response(423, "no articles", p.XZver(1, 5))


def _bad_crc() -> bytes:
    return xzver_data(LINES).replace(b"crc32=", b"crc32=1")


def _not_deflate() -> bytes:
    block = [b"=ybegin line=128 size=-1", *yenc_lines(b"\xff\xff\xff\xff not deflate"), b"=yend"]
    return stuffed_text(block)


def _truncated() -> bytes:
    deflated = zlib.compress(stuffed_text(LINES))[:-10]
    return stuffed_text([b"=ybegin size=-1", *yenc_lines(deflated), b"=yend"])


@pytest.mark.parametrize(
    "data",
    [
        _bad_crc(),
        _not_deflate(),
        _truncated(),
        stuffed_text([b"=yend without a begin"]),
        stuffed_text(LINES),  # plain XOVER lines are not XZVER data
        stuffed_text([b"=ybegin", b"=yend"]),  # an empty block
    ],
)
def test_xzver_data_that_does_not_inflate(data: bytes) -> None:
    for chunker in (whole, bytewise):
        conn = connection(gzip_mode=False)
        conn.send(p.XZver(1, 5))
        with pytest.raises(CompressionError) as caught:
            feed(conn, b"224 compressed\r\n" + data, chunker)
        assert caught.value.scheme == "XZVER"


def test_xzver_yenc_line_over_the_cap() -> None:
    conn = connection(gzip_mode=False)
    conn.send(p.XZver(1, 5))
    with pytest.raises(LineTooLong):
        feed(conn, b"224 compressed\r\n=ybegin\r\n" + b"a" * 2000 + b"\r\n", whole)


# -- the pure parts ------------------------------------------------------------------


def test_yenc_decode() -> None:
    data = bytes(range(256)) * 3
    encoded = yenc_lines(data, width=50)
    decoded = b""
    escaped = False
    for line in encoded:
        piece, escaped = c.yenc_decode(line, escaped)
        decoded += piece
    assert decoded == data
    assert not escaped
    # An escape split over two lines, and an escaped "=" (an "==" pair).
    assert c.yenc_decode(b"ab=") == (b"78", True)
    assert c.yenc_decode(b"}cd", escaped=True) == (b"\x139:", False)
    assert c.yenc_decode(b"==") == (bytes([(61 - 106) & 0xFF]), False)
    assert c.yenc_decode(b"", escaped=True) == (b"", True)


def test_header_sniffing() -> None:
    assert c.header_wbits(zlib.compress(b"x")) is not None
    assert c.header_wbits(gzip.compress(b"x")) is not None
    for level in range(10):
        assert c.header_wbits(zlib.compress(b"x", level)) is not None
    # Overview lines (digits first) never pass for a header: "80" has FDICT set.
    for first in range(10, 100):
        assert c.header_wbits(f"{first}\t".encode()) is None
    assert c.header_wbits(b".\r") is None
    assert c.header_wbits(b"x") is None


def test_decoder_gives_back_what_follows_the_stream() -> None:
    decoder = c.ReplyDecoder(c.Scheme.GZIP)
    raw = bytearray(gzip_data(LINES, "a") + b"224 next reply")
    assert decoder.feed(raw)
    assert decoder.done
    assert decoder.stray_dot
    assert bytes(decoder.text) == stuffed_text(LINES)
    assert raw == b"224 next reply"
    assert not decoder.feed(raw)


def test_decoder_output_is_bounded_per_feed() -> None:
    lines = [overview(n % 10) for n in range(200_000)]
    decoder = c.ReplyDecoder(c.Scheme.GZIP)
    raw = bytearray(gzip_data(lines, "c"))
    assert decoder.feed(raw)
    assert c.TEXT_CHUNK_BYTES <= len(decoder.text) <= 2 * c.TEXT_CHUNK_BYTES
    assert not decoder.done


@settings(max_examples=300, deadline=2000)
@given(
    data=st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from(
                [
                    b"\r\n",
                    b".\r\n",
                    b"224 x\r\n",
                    b"224 [COMPRESS=GZIP]\r\n",
                    b"=ybegin\r\n",
                    b"=yend crc32=zz\r\n",
                    b"\x78\x9c",
                    b"\x1f\x8b",
                    zlib.compress(b"1\tx\r\n"),
                ]
            ),
        ),
        max_size=30,
    ),
    eof=st.booleans(),
)
def test_arbitrary_bytes_raise_only_remote_errors(data: list[bytes], eof: bool) -> None:
    conn = p.NNTPConnection(max_line_bytes=64)
    conn.receive_data(b"200 hi\r\n290 on\r\n")
    conn.send(p.XFeatureCompressGzip())
    for command in (p.Over(1, 5), p.XZver(1, 5), p.Capabilities(), p.Over(6, 7)):
        conn.send(command)
    try:
        for piece in [*data, b""] if eof else data:
            conn.receive_data(piece)
            for _ in range(1000):
                event = conn.next_event()
                if event in (p.NEED_DATA, p.PAUSED) or isinstance(event, p.ConnectionClosed):
                    break
    except RemoteProtocolError:
        pass
