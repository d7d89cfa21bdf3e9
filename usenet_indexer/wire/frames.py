"""The spool stream frame codec: a range's chunks, coordinator -> edge.

Theory of operation
-------------------
`GET ranges/{id}/stream` answers with one binary stream of frames. The
coordinator writes each chunk of the range from its spool as a CHUNK frame,
as stored (compressed; the codec byte says how), in article order; a GAP
says the server does not have some articles (the edge moves its resume point
over them); KEEPALIVE frames go out while the next chunk is still being
fetched (so proxies and the edge's read timeout see a live stream); END
closes a complete range; ERROR closes it with a short UTF-8 reason. After END
or ERROR nothing follows. Where the spool is in an object store, a LINK
stands for a CHUNK: its payload is a presigned URL the edge GETs the chunk's
stored bytes from (the codec byte is the chunk's), so the chunks' bytes do
not pass through the coordinator.

Every frame is a fixed 25-byte header and a payload, big-endian:

    offset  size  field
    0       2     magic   0xC1 0x55 ("\\xc1U": 0xC1 never occurs in UTF-8,
                          so an HTML or JSON error body is told apart at
                          its first byte)
    2       1     version 1
    3       1     kind    1 CHUNK, 2 GAP, 3 KEEPALIVE, 4 END, 5 ERROR, 6 LINK
    4       8     first   article (u64, at most 2**63 - 1)
    12      8     last    article (u64, at most 2**63 - 1, >= first)
    20      1     codec   0 none, 1 zlib (deflate), 2 gzip, 3 zstd (reserved)
    21      4     length  of the payload (u32)
    25      ...   payload

Rules per kind, checked when a Frame is built and by the decoder as soon as
a header is in (so a bad length is refused before its payload is waited for,
let alone buffered):

    CHUNK      first <= last, any codec, any length up to the receiver's max
    GAP        first <= last, codec 0, no payload
    KEEPALIVE  first = last = 0, codec 0, no payload
    END        first = last (the range's last article), codec 0, no payload
    ERROR      first = last = 0, codec 0, 1..MAX_ERROR_BYTES bytes of UTF-8
    LINK       first <= last, any codec, 1..MAX_LINK_BYTES bytes of UTF-8 (an http(s) URL)

The decoder is sans-IO in the manner of h11 and wsproto: feed it bytes with
`receive_data`, call `next_frame` until it answers NEED_DATA, and at the
end of the stream call `receive_eof`: then `next_frame` answers CLOSED after
an END or ERROR frame, and raises FrameError for a stream cut anywhere else
(inside a frame or between frames), so a dropped connection is never
mistaken for a complete range. It buffers in one bytearray with a read
offset and compacts only when more than half of it is consumed, so a large
payload fed in small pieces costs one append per piece and one copy out.
Inflating a CHUNK's payload is the caller's business (in a worker thread).
"""

from __future__ import annotations

import enum
import struct
from typing import Final

import attrs

from usenet_indexer.errors import LocalProtocolError, RemoteProtocolError

MAGIC: Final = b"\xc1U"
VERSION: Final = 1
_HEADER: Final = struct.Struct(">2sBBQQBI")
HEADER_BYTES: Final = _HEADER.size  # 25

# Article numbers need 64 bits; PostgreSQL bigint (and so every resume
# point) stops at 2**63 - 1.
MAX_ARTICLE: Final = 2**63 - 1

# The payload length is a u32.
MAX_PAYLOAD_BYTES: Final = 2**32 - 1

# An ERROR frame carries a reason for a log line, not a document.
MAX_ERROR_BYTES: Final = 1024

# A presigned URL: ~600 bytes with SigV4, a few KB with a session token.
MAX_LINK_BYTES: Final = 8192


class FrameKind(enum.IntEnum):
    """What a frame says; the values are the kind byte."""

    CHUNK = 1
    GAP = 2
    KEEPALIVE = 3
    END = 4
    ERROR = 5
    LINK = 6


class Codec(enum.IntEnum):
    """How a CHUNK's payload is compressed; the values are the codec byte."""

    NONE = 0
    ZLIB = 1
    GZIP = 2
    ZSTD = 3  # reserved: no end writes it yet


class FrameError(RemoteProtocolError):
    """The stream broke the frame format (or ended where it may not)."""


class Signal(enum.Enum):
    """What `FrameDecoder.next_frame` answers when it has no frame."""

    NEED_DATA = "need data"
    CLOSED = "closed"


NEED_DATA: Final = Signal.NEED_DATA
CLOSED: Final = Signal.CLOSED

# By byte value, for the decoder (a dict lookup, not an Enum call per frame).
_KINDS: Final = {kind.value: kind for kind in FrameKind}
_CODECS: Final = {codec.value: codec for codec in Codec}
# Kinds that end the stream.
_LAST_KINDS: Final = frozenset({FrameKind.END, FrameKind.ERROR})


def _header_ok(kind: int, first: int, last: int, codec: int, length: int) -> bool:
    """Whether a frame header keeps the rules of its kind (the per-frame fast check)."""
    if not (0 <= first <= last <= MAX_ARTICLE and 0 <= length <= MAX_PAYLOAD_BYTES):
        return False
    if kind == FrameKind.CHUNK:
        return codec in _CODECS
    if kind == FrameKind.LINK:
        return codec in _CODECS and 0 < length <= MAX_LINK_BYTES
    if codec != Codec.NONE:
        return False
    if kind == FrameKind.ERROR:
        return last == 0 and 0 < length <= MAX_ERROR_BYTES
    if length != 0:
        return False
    if kind == FrameKind.KEEPALIVE:
        return last == 0
    if kind == FrameKind.END:
        return first == last
    return kind == FrameKind.GAP


def _header_problem(kind: int, first: int, last: int, codec: int, length: int) -> str:
    """What is wrong with a header `_header_ok` refused, for the error message."""
    if kind not in _KINDS:
        return f"unknown frame kind {kind}"
    name = _KINDS[kind].name
    if codec not in _CODECS:
        return f"{name} frame: unknown codec {codec}"
    if not 0 <= first <= last <= MAX_ARTICLE:
        return f"{name} frame: articles {first}..{last} are not a range within 0..{MAX_ARTICLE}"
    if not 0 <= length <= MAX_PAYLOAD_BYTES:
        return f"{name} frame: payload length {length} is out of range"
    if kind == FrameKind.LINK:
        return f"LINK frame: {length} bytes of URL (1..{MAX_LINK_BYTES})"
    if codec != Codec.NONE:
        return f"{name} frame: codec {codec} (only CHUNK frames have a codec)"
    if kind in {FrameKind.KEEPALIVE, FrameKind.ERROR} and last != 0:
        return f"{name} frame: articles {first}..{last} (it names none)"
    if kind == FrameKind.END and first != last:
        return f"END frame: articles {first}..{last} (it names the range's last article)"
    if kind == FrameKind.ERROR:
        return f"ERROR frame: {length} bytes of message (1..{MAX_ERROR_BYTES})"
    return f"{name} frame: {length} bytes of payload (it has none)"


@attrs.frozen
class Frame:
    """One frame of the spool stream; always valid (checked when built).

    Build frames with the named constructors.

    Attributes:
        kind: what the frame says.
        first: the first article it covers (0 for KEEPALIVE and ERROR).
        last: the last article it covers (0 for KEEPALIVE and ERROR).
        codec: how a CHUNK's payload is compressed (NONE for other kinds).
        payload: a CHUNK's compressed overview text, an ERROR's UTF-8 reason.

    Raises:
        LocalProtocolError: the fields break the rules of the kind.
    """

    kind: FrameKind
    first: int = 0
    last: int = 0
    codec: Codec = Codec.NONE
    payload: bytes = b""

    def __attrs_post_init__(self) -> None:
        length = len(self.payload)
        if not _header_ok(self.kind, self.first, self.last, self.codec, length):
            raise LocalProtocolError(
                _header_problem(self.kind, self.first, self.last, self.codec, length)
            )
        if (self.kind == FrameKind.ERROR or self.kind == FrameKind.LINK) and (
            problem := _utf8_problem(self.kind, self.payload)
        ):
            raise LocalProtocolError(problem)

    @classmethod
    def chunk(cls, first: int, last: int, payload: bytes, *, codec: Codec) -> Frame:
        """The articles first..last as stored in the spool, compressed with `codec`."""
        return cls(FrameKind.CHUNK, first, last, codec, payload)

    @classmethod
    def link(cls, first: int, last: int, url: str, *, codec: Codec) -> Frame:
        """The articles first..last are at `url` (a presigned GET), compressed with `codec`."""
        return cls(FrameKind.LINK, first, last, codec, url.encode())

    @classmethod
    def gap(cls, first: int, last: int) -> Frame:
        """The server does not have the articles first..last."""
        return cls(FrameKind.GAP, first, last)

    @classmethod
    def keepalive(cls) -> Frame:
        """Nothing yet: the next chunk is still being fetched."""
        return cls(FrameKind.KEEPALIVE)

    @classmethod
    def end(cls, last: int) -> Frame:
        """The range is complete; `last` is its last article."""
        return cls(FrameKind.END, last, last)

    @classmethod
    def error(cls, message: str) -> Frame:
        """The stream stops for `message`, cut to MAX_ERROR_BYTES of UTF-8.

        Characters UTF-8 cannot carry (lone surrogates) become "?".
        """
        data = (message or "error").encode("utf-8", "replace")
        # Cut at a character boundary: drop a partial character at the end.
        data = data[:MAX_ERROR_BYTES].decode("utf-8", "ignore").encode()
        return cls(FrameKind.ERROR, payload=data)

    @property
    def message(self) -> str:
        """An ERROR frame's reason ("" for other kinds)."""
        return self.payload.decode() if self.kind == FrameKind.ERROR else ""

    @property
    def url(self) -> str:
        """A LINK frame's URL ("" for other kinds)."""
        return self.payload.decode() if self.kind == FrameKind.LINK else ""


def encode_header(frame: Frame) -> bytes:
    """The 25-byte header of a frame (send it, then `frame.payload`, to avoid a copy).

    Args:
        frame: the frame.

    Returns:
        The header bytes.
    """
    return _HEADER.pack(
        MAGIC, VERSION, frame.kind, frame.first, frame.last, frame.codec, len(frame.payload)
    )


def encode_frame(frame: Frame) -> bytes:
    """A frame as bytes: header and payload.

    Args:
        frame: the frame (valid by construction).

    Returns:
        The bytes to send.
    """
    return encode_header(frame) + frame.payload


def _utf8_problem(kind: FrameKind, payload: bytes) -> str | None:
    try:
        payload.decode()
    except UnicodeDecodeError as exc:
        return f"{kind.name} frame: the {'URL' if kind == FrameKind.LINK else 'message'} is not UTF-8 ({exc.reason} at byte {exc.start})"
    return None


def _check_max_payload(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not 0 <= value <= MAX_PAYLOAD_BYTES:
        raise ValueError(f"max_payload_bytes must be within 0..{MAX_PAYLOAD_BYTES}, not {value}")


# on_setattr NO_OP: the validator runs once, in __init__, not on every
# assignment to the read offset (attrs would hook __setattr__ otherwise).
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class FrameDecoder:
    """Turns the bytes of a spool stream into frames (sans-IO).

    Args:
        max_payload_bytes: the largest payload accepted; a header announcing
            more is refused before its payload is buffered.
    """

    max_payload_bytes: int = attrs.field(validator=_check_max_payload)
    _buffer: bytearray = attrs.field(init=False, factory=bytearray)
    _start: int = attrs.field(init=False, default=0)  # read offset into _buffer
    _eof: bool = attrs.field(init=False, default=False)
    _finished: bool = attrs.field(init=False, default=False)  # END or ERROR returned
    _broken: str | None = attrs.field(init=False, default=None)

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as frames."""
        return len(self._buffer) - self._start

    def receive_data(self, data: bytes) -> None:
        """Add bytes received from the stream (b"" is a no-op; see `receive_eof`).

        Args:
            data: the next bytes of the stream, any amount.

        Raises:
            LocalProtocolError: called after `receive_eof`.
        """
        if self._eof:
            raise LocalProtocolError("receive_data after receive_eof")
        if self._start and self._start * 2 >= len(self._buffer):
            # More than half consumed: moving the rest costs less than what
            # was consumed, so compaction stays linear overall.
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def receive_eof(self) -> None:
        """The stream has ended; `next_frame` then returns what is left, then CLOSED or raises."""
        self._eof = True

    def next_frame(self) -> Frame | Signal:
        """The next whole frame, or NEED_DATA, or CLOSED after END/ERROR and the stream's end.

        Returns:
            A Frame; NEED_DATA when more bytes are needed; CLOSED when the
            stream ended cleanly after its END or ERROR frame.

        Raises:
            FrameError: a bad header (magic, version, kind, articles, codec,
                length over `max_payload_bytes`), an ERROR message that is not
                UTF-8, bytes after the END or ERROR frame, or the stream ended
                inside a frame or before END. Once raised, every later call
                raises it again.
        """
        if self._broken is not None:
            raise FrameError(self._broken)
        try:
            return self._next_frame()
        except FrameError as exc:
            self._broken = str(exc)
            raise

    def _next_frame(self) -> Frame | Signal:
        available = len(self._buffer) - self._start
        if self._finished:
            if available:
                raise FrameError(f"{available} bytes after the stream's last frame")
            return CLOSED if self._eof else NEED_DATA
        if available < HEADER_BYTES:
            if not self._eof:
                return NEED_DATA
            if available:
                raise FrameError(
                    f"the stream ended inside a frame header ({available} of {HEADER_BYTES} bytes)"
                )
            raise FrameError("the stream ended before its END frame")
        kind, first, last, codec, length = self._header()
        end = self._start + HEADER_BYTES + length
        if end > len(self._buffer):
            if self._eof:
                raise FrameError(
                    f"the stream ended inside a {_KINDS[kind].name} frame's payload "
                    f"({available - HEADER_BYTES} of {length} bytes)"
                )
            return NEED_DATA
        payload = b""
        if length:
            with memoryview(self._buffer) as view:
                payload = bytes(view[self._start + HEADER_BYTES : end])
        self._start = end
        if (kind == FrameKind.ERROR or kind == FrameKind.LINK) and (
            problem := _utf8_problem(_KINDS[kind], payload)
        ) is not None:
            raise FrameError(problem)
        frame = Frame(_KINDS[kind], first, last, _CODECS[codec], payload)
        self._finished = frame.kind in _LAST_KINDS
        return frame

    def _header(self) -> tuple[int, int, int, int, int]:
        """The buffered frame header, checked before its payload is waited for."""
        magic, version, kind, first, last, codec, length = _HEADER.unpack_from(
            self._buffer, self._start
        )
        if magic != MAGIC:
            raise FrameError(f"not a spool stream frame: magic {magic!r}, not {MAGIC!r}")
        if version != VERSION:
            raise FrameError(f"frame version {version} is not supported (only {VERSION})")
        if not _header_ok(kind, first, last, codec, length):
            raise FrameError(_header_problem(kind, first, last, codec, length))
        if length > self.max_payload_bytes:
            raise FrameError(
                f"{_KINDS[kind].name} frame: payload of {length} bytes, "
                f"over the cap of {self.max_payload_bytes}"
            )
        return kind, first, last, codec, length
