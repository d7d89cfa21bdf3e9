"""yEnc article bodies decoded: the =ybegin/=ypart/=yend fields, the data, its CRC.

Theory of operation: the header and trailer lines are small and read here, in
Python, because their raw bytes matter (the `name=` field as sent, the part
numbers, which sabctools does not hand back). The data lines between them are
decoded by sabctools (SABnzbd's SIMD yEnc decoder). Its `Decoder` reads a
whole NNTP response as it comes off the wire (a status line, dot-stuffed
lines, the terminating "."), so the lines we were given (already unstuffed)
are stuffed again and framed as one; the CRC is then checked here against the
trailer with zlib.

Size: at most `max_bytes` of decoded data are kept. Because an encoded byte
decodes to at most one byte and escapes make two of one, only the first
`2 * max_bytes` encoded bytes (plus a margin, to a line end) are decoded; a
longer body is `cut`, and its CRC is not checked (`crc_ok` None) since the
rest was never read. A truncated body (no =yend) is an error, also a huge
one: the trailer is looked for before anything is cut.
"""

from __future__ import annotations

import zlib

import attrs
import sabctools

from usenet_indexer.decode.errors import YencError
from usenet_indexer.decode.names import clean_name

__all__ = ["YencError", "YencPart", "decode_body"]

# A response frame sabctools accepts: any 2xx status of a BODY works.
_STATUS_LINE = b"222 0 <probe@uidx>\r\n"
# Room for the line ends and a last escape beyond 2 * max_bytes.
_MARGIN = 4096
# Longer digit strings are not sizes (and int() of huge ones is slow).
_MAX_DIGITS = 19
# A =y line longer than this is no header (a name is at most a few hundred bytes).
_MAX_LINE = 64 * 1024


@attrs.frozen
class YencPart:
    """One decoded yEnc part.

    `begin`/`end` are the 1-based offsets of =ypart (None for a single-part
    post); `size` is the whole file's size from =ybegin. `crc_ok` is True when
    the trailer's pcrc32 (or, for a single part, crc32) matched, None when it
    has none or the data was `cut`.
    """

    name: str
    raw_name: bytes
    part: int | None
    total: int | None
    begin: int | None
    end: int | None
    size: int
    data: bytes
    cut: bool
    crc_ok: bool | None


def decode_body(body: bytes, *, max_bytes: int = 8 << 20) -> YencPart:
    """Decode the yEnc part in an article body.

    Args:
        body: the body's lines after dot-unstuffing, joined with b"\\r\\n";
            text lines before =ybegin are skipped.
        max_bytes: keep at most this many decoded bytes (a longer part is cut).

    Returns:
        The part, its fields and its data.

    Raises:
        YencError: `reason` "no yenc" (no =ybegin line), "truncated" (no
            =yend), "crc" (a mismatch), "size" (the data is not the =yend
            size), "malformed" (a field that is not a number, no size=).
    """
    begin_at = _line_start(body, b"=ybegin ", 0)
    if begin_at < 0:
        raise YencError("no yenc", "no =ybegin line in the body")
    ybegin, at = _line(body, begin_at)
    name_at = ybegin.find(b" name=")
    head = _fields(ybegin[:name_at] if name_at >= 0 else ybegin)
    raw_name = ybegin[name_at + 6 :].strip(b" \t") if name_at >= 0 else b""
    ypart: dict[str, bytes] = {}
    if body.startswith(b"=ypart ", at):
        line, at = _line(body, at)
        ypart = _fields(line)
    end_at = _line_start(body, b"=yend", at)
    if end_at < 0:
        raise YencError("truncated", "no =yend line after the data")
    yend = _fields(_line(body, end_at)[0])
    size = _number(head, "size")
    if size is None:
        raise YencError("malformed", "=ybegin has no size=")
    data, cut = _decode_lines(body, at, end_at, max_bytes)
    total = _number(head, "total")
    return YencPart(
        name=clean_name(raw_name),
        raw_name=raw_name,
        part=_number(head, "part"),
        total=total,
        begin=_number(ypart, "begin"),
        end=_number(ypart, "end"),
        size=size,
        data=data,
        cut=cut,
        crc_ok=None if cut else _check(data, yend, single=not ypart and total in (None, 1)),
    )


def _line_start(body: bytes, prefix: bytes, start: int) -> int:
    """Where the first line at or after `start` that begins with `prefix` begins; -1: none."""
    if body.startswith(prefix, start):
        return start
    found = body.find(b"\r\n" + prefix, start)
    return found + 2 if found >= 0 else -1


def _line(body: bytes, start: int) -> tuple[bytes, int]:
    """The =y line at `start` (without its end) and where the next one starts."""
    end = body.find(b"\r\n", start, start + _MAX_LINE)
    if end >= 0:
        return body[start:end], end + 2
    if len(body) - start > _MAX_LINE:
        raise YencError("malformed", f"a =y line longer than {_MAX_LINE} bytes")
    return body[start:], len(body)


def _fields(line: bytes) -> dict[str, bytes]:
    """The key=value words of a =y line (its first word, the keyword, is skipped)."""
    fields: dict[str, bytes] = {}
    for word in line.split()[1:]:
        key, equals, value = word.partition(b"=")
        if not equals:
            raise YencError("malformed", f"a word without '=' in {line[:80]!r}")
        fields[key.decode("ascii", "replace").lower()] = value
    return fields


def _number(fields: dict[str, bytes], key: str) -> int | None:
    value = fields.get(key)
    if value is None:
        return None
    if not value.isdigit() or len(value) > _MAX_DIGITS:
        raise YencError("malformed", f"{key}={value[:40]!r} is not a number")
    return int(value)


def _crc(fields: dict[str, bytes], key: str) -> int | None:
    value = fields.get(key)
    if value is None:
        return None
    try:
        if not 0 < len(value) <= 8:
            raise ValueError(value)
        return int(value, 16)
    except ValueError:
        raise YencError("malformed", f"{key}={value[:40]!r} is not a CRC32") from None


def _check(data: bytes, yend: dict[str, bytes], *, single: bool) -> bool | None:
    """Whether the data matches the trailer's size and CRC (None: no CRC to check)."""
    size = _number(yend, "size")
    if size is not None and size != len(data):
        raise YencError("size", f"=yend size={size}, decoded {len(data)} bytes")
    # crc32 is the whole file's: it checks a part only when that is the file.
    expected = _crc(yend, "pcrc32")
    if expected is None and single:
        expected = _crc(yend, "crc32")
    if expected is None:
        return None
    actual = zlib.crc32(data)
    if actual != expected:
        raise YencError("crc", f"CRC32 {actual:08x}, the trailer says {expected:08x}")
    return True


def _decode_lines(body: bytes, start: int, end: int, max_bytes: int) -> tuple[bytes, bool]:
    """The data lines in body[start:end] decoded, at most `max_bytes` of them, and whether cut."""
    budget = 2 * max_bytes + _MARGIN
    cut = end - start > budget
    # Sliced within the budget: a huge body is never copied whole.
    encoded = body[start : min(end, start + budget)]
    if cut:
        line_end = encoded.rfind(b"\r\n")
        encoded = encoded[: line_end + 2] if line_end >= 0 else encoded.rstrip(b"=")
    data = _sabctools_decode(encoded)
    if len(data) > max_bytes:
        return data[:max_bytes], True
    return data, cut


def _sabctools_decode(encoded: bytes) -> bytes:
    """Data lines decoded by sabctools, framed as the BODY response it reads."""
    if not encoded.strip(b"\r\n"):
        return b""
    stuffed = (b"\r\n" + encoded).replace(b"\r\n.", b"\r\n..")[2:]
    if not stuffed.endswith(b"\r\n"):
        stuffed += b"\r\n"
    # A header of our own: sabctools needs one, and the real one (its name
    # with NULs, say) was read by the caller. The size is an upper bound.
    header = b"=ybegin line=128 size=%d name=probe\r\n" % len(encoded)
    response = b"".join((_STATUS_LINE, header, stuffed, b".\r\n"))
    decoder = sabctools.Decoder(len(response))
    memoryview(decoder)[: len(response)] = response
    decoder.expect(None)
    decoder.process(len(response))
    decoded = next(iter(decoder), None)
    if decoded is None or decoded.data is None:
        raise YencError("malformed", "sabctools found no yEnc data in the part")
    return bytes(decoded.data)
