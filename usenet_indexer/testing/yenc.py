"""A test helper: yEnc articles made from bytes, written from the yEnc 1.3 spec.

Independent of the decoder under test (sabctools): the data is shifted by 42
with a translate table, the critical bytes (NUL, LF, CR, "=") escaped, and
cut into lines. Lines may start with "." (yEnc does not require that one
escaped), so the bodies exercise dot-stuffing. The bodies come as a client
hands them over: dot-unstuffed lines joined with CRLF.
"""

from __future__ import annotations

import zlib

__all__ = ["encode_lines", "yenc_article", "yenc_articles"]

_SHIFT = bytes((i + 42) % 256 for i in range(256))
_ESCAPES = ((b"\x00", b"=@"), (b"\n", b"=J"), (b"\r", b"=M"))


def encode_lines(data: bytes, line_length: int = 128) -> bytes:
    """The yEnc data lines of `data`, joined with CRLF (no trailing line end)."""
    shifted = data.translate(_SHIFT).replace(b"=", b"=}")
    for byte, escape in _ESCAPES:
        shifted = shifted.replace(byte, escape)
    lines: list[bytes] = []
    start = 0
    while start < len(shifted):
        end = min(start + line_length, len(shifted))
        if shifted[end - 1 : end] == b"=":
            end += 1  # never cut an escape in two
        lines.append(shifted[start:end])
        start = end
    return b"\r\n".join(lines)


def yenc_article(
    data: bytes,
    name: bytes,
    *,
    part: int | None = None,
    total: int | None = None,
    begin: int = 1,
    size: int | None = None,
    crc: int | None = None,
) -> bytes:
    """One article body: =ybegin (with part/total), =ypart when `part` is given, =yend.

    Args:
        data: this part's bytes.
        name: the `name=` field as sent.
        part, total: the part number and the count (None: a single-part post).
        begin: this part's 1-based offset in the file.
        size: the file's size (default: len(data), a single part).
        crc: the trailer's CRC (default: the right one): a test makes a wrong one.
    """
    size = len(data) if size is None else size
    crc = zlib.crc32(data) if crc is None else crc
    numbers = b"" if part is None else b"part=%d " % part
    numbers += b"" if total is None else b"total=%d " % total
    lines = [b"=ybegin %sline=128 size=%d name=%s" % (numbers, size, name)]
    if part is not None:
        lines.append(b"=ypart begin=%d end=%d" % (begin, begin + len(data) - 1))
    if data:
        lines.append(encode_lines(data))
    if part is None:
        lines.append(b"=yend size=%d crc32=%08x" % (len(data), crc))
    else:
        lines.append(b"=yend size=%d part=%d pcrc32=%08x" % (len(data), part, crc))
    return b"\r\n".join(lines) + b"\r\n"


def yenc_articles(data: bytes, name: bytes, part_size: int) -> list[bytes]:
    """`data` posted in parts of `part_size` bytes, one article body per part."""
    pieces = [data[i : i + part_size] for i in range(0, len(data), part_size)] or [b""]
    return [
        yenc_article(
            piece, name, part=n, total=len(pieces), begin=1 + (n - 1) * part_size, size=len(data)
        )
        for n, piece in enumerate(pieces, 1)
    ]
