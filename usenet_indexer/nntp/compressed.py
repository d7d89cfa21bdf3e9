"""Overview data compressed inside a reply: XFEATURE COMPRESS GZIP and XZVER (pure).

Theory of operation
-------------------
Besides RFC 8054 (a deflate layer under the whole connection, handled by the
client like TLS), usenet providers compress overview data in two
non-standard ways, both scoped to the data of one multi-line reply:

* ``XFEATURE COMPRESS GZIP [TERMINATOR]`` (Giganews, Highwinds, ...): after
  a 290 reply, the data of an OVER/XOVER reply (its status line usually says
  ``[COMPRESS=GZIP]``) is one compressed stream in place of the text. Despite
  the name it is a zlib stream (RFC 1950, ``78 xx``); some servers send real
  gzip (RFC 1952, ``1f 8b``). The first bytes tell which. Servers end the
  data in one of three ways, all accepted:

  a. the inflated text is the whole reply, its "." line included, and
     nothing follows the stream (TERMINATOR style);
  b. the same, and a plain ".\\r\\n" line follows the stream as well;
  c. the inflated text lacks the "." line, which follows the stream plain.

  In (a) the next bytes belong to the next reply, in (b) they are a "." line:
  a status line never starts with ".", so the connection drops one "." line
  met where a status line is due (`ReplyDecoder.stray_dot`).

* ``XZVER first-last`` (Astraweb's proposal, used by newznab, nZEDb, nntmux,
  pynntp): a 224 whose data lines are a yEnc block (``=ybegin``, data lines,
  ``=yend``, dot-stuffed like any data) of the deflated XOVER text. The
  references disagree on the deflate flavour (Astraweb says zlib's
  ``deflate()``; the clients inflate raw deflate), so the first two decoded
  bytes decide: a zlib header means zlib, anything else raw deflate.
  Highwinds servers answer XZVER with the same binary zlib stream as
  XFEATURE instead of yEnc; a reply starting with a zlib or gzip header is
  read as in the XFEATURE case. The inflated text may or may not hold the
  "." line. The ``=yend`` CRC (crc32=, pcrc32= or crc=) is checked when given.

`ReplyDecoder` turns the wire bytes of one reply's data into the plain,
dot-stuffed text of that reply ending in exactly one "." line, the form the
protocol core already parses. It takes bytes from the connection's buffer,
gives back those after the compressed data, and inflates at most
`TEXT_CHUNK_BYTES` per call, so nothing holds a whole reply. Data that does
not inflate, or framing it cannot follow, raises `CompressionError`: the
client then reopens the connection without that scheme.
"""

from __future__ import annotations

import enum
import zlib
from typing import Final

import attrs

from usenet_indexer.nntp.errors import CompressionError, LineTooLong

# How much inflated text one `feed` produces at most before the protocol core
# splits it into lines: large enough to amortize the per-call cost, small
# enough that a reply is never held whole (overview lines are < 1 KB).
TEXT_CHUNK_BYTES: Final = 256 * 1024

# yEnc: a byte b is sent as (b + 42) mod 256; an escaped one as "=" and then
# (b + 42 + 64) mod 256.
_YENC: Final = bytes((i - 42) & 0xFF for i in range(256))
_YENC_ESCAPED_OFFSET: Final = 42 + 64

_WBITS_ZLIB_OR_GZIP: Final = 47  # zlib or gzip by the header (32 + 15)
_WBITS_RAW: Final = -15


class Scheme(enum.Enum):
    """Which compression a reply's data is in."""

    GZIP = "GZIP"  # after XFEATURE COMPRESS GZIP
    XZVER = "XZVER"


def header_wbits(head: bytes) -> int | None:
    """The zlib `wbits` for a zlib or gzip header at the start of `head`, else None.

    A zlib header is CMF (method 8, window <= 32 KiB) and FLG with the
    check bits right and no preset dictionary; refusing FDICT keeps overview
    text ("80\\t..." passes the check bits) from passing for zlib.
    """
    if len(head) < 2:
        return None
    cmf, flg = head[0], head[1]
    if cmf == 0x1F and flg == 0x8B:
        return _WBITS_ZLIB_OR_GZIP
    if cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf << 8 | flg) % 31 == 0 and not flg & 0x20:
        return _WBITS_ZLIB_OR_GZIP
    return None


def _could_be_header(first: int) -> bool:
    """Whether a zlib or gzip header may start with this byte (one more byte decides)."""
    return first == 0x1F or (first & 0x0F == 8 and first >> 4 <= 7)


def yenc_decode(line: bytes, escaped: bool = False) -> tuple[bytes, bool]:
    """One yEnc line (no CRLF) decoded; `escaped` carries an "=" that ended the last line.

    Returns:
        The bytes, and whether this line ended with an "=" (escaping the next byte).
    """
    out = bytearray()
    start = 0
    if escaped and line:
        out.append((line[0] - _YENC_ESCAPED_OFFSET) & 0xFF)
        start = 1
    elif escaped:
        return b"", True
    while True:
        at = line.find(b"=", start)
        if at < 0:
            out += line[start:].translate(_YENC)
            return bytes(out), False
        out += line[start:at].translate(_YENC)
        if at + 1 == len(line):
            return bytes(out), True
        out.append((line[at + 1] - _YENC_ESCAPED_OFFSET) & 0xFF)
        start = at + 2


def _yend_crc(line: bytes) -> int | None:
    """The CRC of an =yend line (crc32=, else pcrc32=, else crc=), if it has one."""
    fields = dict(word.split(b"=", 1) for word in line.split()[1:] if b"=" in word)
    for key in (b"crc32", b"pcrc32", b"crc"):
        if key in fields:
            try:
                return int(fields[key], 16)
            except ValueError:
                raise CompressionError(
                    f"XZVER: a bad CRC in {line[:80]!r}", scheme=Scheme.XZVER.value
                ) from None
    return None


class _Mode(enum.Enum):
    SNIFF = "SNIFF"  # deciding what the data is
    PLAIN = "PLAIN"  # not compressed after all: the caller parses the data itself
    BINARY = "BINARY"  # a zlib/gzip stream
    TRAILER = "TRAILER"  # the stream ended without the "." line: it follows plain
    YENC = "YENC"  # yEnc lines of a deflate stream, up to the "." line
    DONE = "DONE"


@attrs.define(eq=False)
class ReplyDecoder:
    """The data of one compressed reply, turned back into plain dot-stuffed text.

    Args:
        scheme: GZIP (the data of a reply after XFEATURE) or XZVER.
        marked: the status line says ``COMPRESS=GZIP``: plain data is an error.
        max_line_bytes: the longest yEnc line accepted.
    """

    scheme: Scheme
    marked: bool = False
    max_line_bytes: int = 64 * 1024  # protocol.DEFAULT_MAX_LINE_BYTES (it imports us)
    # Inflated text not yet taken by the caller.
    text: bytearray = attrs.field(init=False, factory=bytearray)
    # After the stream and its "." line: a further plain "." line may follow.
    stray_dot: bool = attrs.field(init=False, default=False)
    _mode: _Mode = attrs.field(init=False, default=_Mode.SNIFF)
    _inflater: zlib._Decompress | None = attrs.field(init=False, default=None)
    _tail: bytes = attrs.field(init=False, default=b"")  # the last bytes of text made
    _made: int = attrs.field(init=False, default=0)  # bytes of text made in all
    # yEnc state: the header seen, a pending escape, decoded bytes before the
    # inflater exists, the CRC so far and the one =yend gave.
    _began: bool = attrs.field(init=False, default=False)
    _escaped: bool = attrs.field(init=False, default=False)
    _early: bytes = attrs.field(init=False, default=b"")
    _crc: int = attrs.field(init=False, default=0)
    _expected_crc: int | None = attrs.field(init=False, default=None)

    @property
    def done(self) -> bool:
        """The whole reply is in `text` (or was taken from it), its "." line included."""
        return self._mode is _Mode.DONE

    @property
    def plain(self) -> bool:
        """The data turned out not to be compressed: parse the buffer as plain data."""
        return self._mode is _Mode.PLAIN

    def feed(self, raw: bytearray) -> bool:
        """Moves what it can from `raw` (the connection's buffer) into `text`.

        Takes compressed bytes from the front of `raw` and leaves there what
        follows the compressed data. Stops once `text` holds TEXT_CHUNK_BYTES.

        Returns:
            Whether anything changed; False means more bytes are needed.

        Raises:
            CompressionError: the data does not inflate or is framed wrongly.
            LineTooLong: a yEnc line over the cap.
        """
        progressed = False
        while len(self.text) < TEXT_CHUNK_BYTES and self._step(raw):
            progressed = True
        return progressed

    def _step(self, raw: bytearray) -> bool:
        mode = self._mode
        if mode is _Mode.SNIFF:
            return self._sniff(raw)
        if mode is _Mode.BINARY:
            return self._inflate_binary(raw)
        if mode is _Mode.TRAILER:
            return self._trailer(raw)
        if mode is _Mode.YENC:
            return self._yenc_line(raw)
        return False  # PLAIN, DONE

    # -- deciding -----------------------------------------------------------

    def _sniff(self, raw: bytearray) -> bool:
        if not raw:
            return False
        first = raw[0]
        if first == ord(b".") and not self.marked:
            self._mode = _Mode.PLAIN  # an empty reply sent plain
            return True
        if first == ord(b"=") and self.scheme is Scheme.XZVER:
            self._mode = _Mode.YENC
            return True
        if len(raw) < 2 and _could_be_header(first):
            return False
        wbits = header_wbits(bytes(raw[:2]))
        if wbits is not None:
            self._inflater = zlib.decompressobj(wbits)
            self._mode = _Mode.BINARY
            return True
        if self.scheme is Scheme.GZIP and not self.marked:
            self._mode = _Mode.PLAIN
            return True
        raise self._error(f"the data is neither zlib, gzip nor yEnc: {bytes(raw[:16])!r}")

    # -- a binary zlib/gzip stream -----------------------------------------

    def _inflate_binary(self, raw: bytearray) -> bool:
        inflater = self._inflater
        assert inflater is not None  # set with the mode
        data = inflater.unconsumed_tail
        if not data:
            data = bytes(raw)
            raw.clear()
        if not data:
            return False
        out = self._inflate(inflater, data)
        if inflater.eof:
            raw[:0] = inflater.unused_data
            self._stream_ended(trailer=True)
        return bool(out) or len(inflater.unconsumed_tail) < len(data) or inflater.eof

    def _trailer(self, raw: bytearray) -> bool:
        """The "." line that follows a stream whose text lacks it (variant c)."""
        if not raw:
            return False
        end = raw.find(b"\n", 0, 3)
        if raw[0] != ord(b".") or (end < 0 and len(raw) >= 3):
            raise self._error(f"no '.' line after the compressed data: {bytes(raw[:16])!r}")
        if end < 0:
            return False
        if bytes(raw[: end + 1]) not in (b".\r\n", b".\n"):
            raise self._error(f"no '.' line after the compressed data: {bytes(raw[:16])!r}")
        del raw[: end + 1]
        self._emit(b".\r\n")
        self._mode = _Mode.DONE
        return True

    # -- a yEnc block of a deflate stream ----------------------------------

    def _yenc_line(self, raw: bytearray) -> bool:
        inflater = self._inflater
        if inflater is not None and inflater.unconsumed_tail:
            tail = inflater.unconsumed_tail
            self._inflate(inflater, tail)
            return True
        end = raw.find(b"\n")
        if end < 0:
            if len(raw) > self.max_line_bytes:
                raise LineTooLong(self.max_line_bytes)
            return False
        if end > self.max_line_bytes:
            raise LineTooLong(self.max_line_bytes)
        line = bytes(raw[:end]).removesuffix(b"\r")
        del raw[: end + 1]
        if line == b".":
            self._yenc_end()
        elif line.startswith(b"."):
            self._yenc_content(line[1:])  # dot-stuffed
        else:
            self._yenc_content(line)
        return True

    def _yenc_content(self, line: bytes) -> None:
        if not self._began:
            if not line.startswith(b"=ybegin"):
                raise self._error(f"the yEnc block does not start with =ybegin: {line[:40]!r}")
            self._began = True
        elif line.startswith(b"=yend"):
            self._expected_crc = _yend_crc(line)
        elif not line.startswith((b"=ypart", b"=ybegin")):
            data, self._escaped = yenc_decode(line, self._escaped)
            self._crc = zlib.crc32(data, self._crc)
            self._deflated(data)

    def _deflated(self, data: bytes) -> None:
        """Decoded yEnc bytes into the inflater (made once two bytes tell its kind)."""
        inflater = self._inflater
        if inflater is None:
            self._early += data
            if len(self._early) < 2:
                return
            wbits = header_wbits(self._early) or _WBITS_RAW
            inflater = self._inflater = zlib.decompressobj(wbits)
            data, self._early = self._early, b""
        if inflater.eof:
            if data:
                raise self._error("yEnc data after the end of the deflate stream")
            return
        self._inflate(inflater, inflater.unconsumed_tail + data)

    def _yenc_end(self) -> None:
        if not self._began:
            raise self._error("an empty yEnc block")
        if self._early:  # fewer than two bytes in all: only raw deflate is that short
            self._inflater = zlib.decompressobj(_WBITS_RAW)
            self._inflate(self._inflater, self._early)
        inflater = self._inflater
        if inflater is None or not inflater.eof:
            raise self._error("the deflate stream in the yEnc block is truncated")
        if inflater.unused_data:
            raise self._error("bytes after the end of the deflate stream")
        if self._expected_crc is not None and self._expected_crc != self._crc:
            raise self._error(
                f"yEnc CRC {self._crc:08x}, the =yend line says {self._expected_crc:08x}"
            )
        self._stream_ended(trailer=False)

    # -- shared -------------------------------------------------------------

    def _inflate(self, inflater: zlib._Decompress, data: bytes) -> bytes:
        try:
            out = inflater.decompress(data, TEXT_CHUNK_BYTES)
        except zlib.error as exc:
            raise self._error(f"the data does not inflate: {exc}") from None
        self._emit(out)
        return out

    def _emit(self, out: bytes) -> None:
        if out:
            self.text += out
            self._made += len(out)
            self._tail = (self._tail + out)[-4:]

    def _stream_ended(self, *, trailer: bool) -> None:
        """The compressed stream is complete: is the "." line in it, or still to come?"""
        tail, made = self._tail, self._made
        if tail.endswith((b"\n.\r\n", b"\n.\n")) or (
            made == len(tail) and tail in (b".\r\n", b".\n")
        ):
            self.stray_dot = trailer
            self._mode = _Mode.DONE
            return
        if made and not tail.endswith(b"\n"):
            self._emit(b"\r\n")  # the last line lacks its CRLF
        if trailer:
            self._mode = _Mode.TRAILER
        else:
            self._emit(b".\r\n")
            self._mode = _Mode.DONE

    def _error(self, what: str) -> CompressionError:
        return CompressionError(f"{self.scheme.value}: {what}", scheme=self.scheme.value)
