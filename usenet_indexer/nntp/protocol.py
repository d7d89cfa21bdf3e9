"""The NNTP client protocol (RFC 3977) without I/O: bytes in, events out.

Theory of operation
-------------------
Like h11, `NNTPConnection` never touches a socket. The caller turns commands
into bytes with `send(command)`, writes them however it likes, hands whatever
it reads to `receive_data(data)` (`b""` for EOF) and pulls events with
`next_event()` until it returns `NEED_DATA`.

Every command sent is appended to a queue; replies are matched to it in order,
so any number of commands may be in flight (pipelining). The greeting is the
answer to an implicit first command, so it is the first event. Whether a reply
is multi-line depends on the command and the code (224 to OVER, 101 to
CAPABILITIES, ...): a multi-line reply is a `Response`, then `DataLines`
pieces as the data arrives (each piece holds the complete lines received so
far, dot-unstuffed, without their CRLF), then `DataEnd`. Nothing keeps a
whole reply: the buffer holds at most one incomplete line plus what the last
`receive_data` brought, and a line longer than the cap raises `LineTooLong`.

Except in the data of an OVER, XOVER or XZVER reply: there a line over the
cap is one malformed overview line (a spam article's huge folded Subject or
References, which INN keeps unfolded), not a broken server. It is dropped up
to its line end as it arrives (never buffered whole), counted, and the reply
goes on; `DataEnd.overlong` says how many lines the reply lost so. A status
line, or a line of any other reply, over the cap still raises.

STARTTLS (382) and COMPRESS (206) change what the bytes on the wire are. After
such a reply `next_event()` returns `PAUSED` until the caller has switched its
stream and calls `resume()`, which hands back the bytes that arrived after the
reply (they belong to the new layer: TLS records or deflate data).

Compressed overview data (see compressed.py): after a 290 reply to
XFEATURE COMPRESS GZIP the connection is in GZIP mode, and the data of an
OVER/XOVER reply (or of any reply whose status line says COMPRESS=GZIP) goes
through a `ReplyDecoder` first; so does the data of every XZVER reply. The
decoder hands back the reply as plain dot-stuffed text, which is then split
into lines exactly like plain data, and leaves the bytes after the compressed
data (the next reply) in the buffer. Events are the same either way.

Peer mistakes raise `RemoteProtocolError` subclasses; ours (a CR or LF in an
argument, a command sent while paused) raise `LocalProtocolError`. After a
RemoteProtocolError the connection is unusable: every later call raises again.
"""

from __future__ import annotations

import enum
import re
from collections import deque
from typing import ClassVar, Final, TypeAlias

import attrs

from usenet_indexer.nntp.compressed import ReplyDecoder, Scheme
from usenet_indexer.nntp.errors import (
    CompressionError,
    IncompleteResponse,
    LineTooLong,
    LocalProtocolError,
    MalformedResponse,
    RemoteProtocolError,
)

# Overview lines of real binary groups are under 1 KB; the longest legitimate
# lines seen (a long Xref, a References header) are a few KB. 64 KiB keeps a
# wide margin and bounds what a server that never sends LF can make us buffer.
DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024

# RFC 3977 3.1: a command line is at most 512 octets including the CRLF.
MAX_COMMAND_BYTES: Final = 512


class Sentinel(enum.Enum):
    NEED_DATA = "NEED_DATA"
    PAUSED = "PAUSED"


NEED_DATA: Final = Sentinel.NEED_DATA
PAUSED: Final = Sentinel.PAUSED


# -- commands ---------------------------------------------------------------


def _argument(value: str, what: str, *, spaces: bool = False) -> str:
    """A command argument, refused when it could break the command line."""
    if not value:
        raise LocalProtocolError(f"{what} is empty")
    bad = "\r\n\0" if spaces else "\r\n\0 \t"
    if any(c in bad for c in value):
        raise LocalProtocolError(f"{what} contains a control character or a space: {value!r}")
    return value


def _number(value: int, what: str) -> str:
    if value < 0:
        raise LocalProtocolError(f"{what} is negative: {value}")
    return str(value)


@attrs.frozen
class Command:
    """A command; subclasses say their words and which codes start multi-line data."""

    MULTILINE: ClassVar[frozenset[int]] = frozenset()
    # STARTTLS and COMPRESS change the wire's layer after this code.
    SWITCH_CODE: ClassVar[int | None] = None

    def words(self) -> str:
        raise NotImplementedError

    def encode(self) -> bytes:
        line = (self.words() + "\r\n").encode("utf-8")
        if len(line) > MAX_COMMAND_BYTES:
            raise LocalProtocolError(
                f"command line longer than {MAX_COMMAND_BYTES} bytes: {line[:60]!r}..."
            )
        return line


@attrs.frozen
class Greeting(Command):
    """The implicit first command: the server's greeting answers it."""

    def words(self) -> str:  # pragma: no cover - never sent
        raise LocalProtocolError("the greeting is not a command")


@attrs.frozen
class Capabilities(Command):
    MULTILINE: ClassVar[frozenset[int]] = frozenset({101})

    def words(self) -> str:
        return "CAPABILITIES"


@attrs.frozen
class ModeReader(Command):
    def words(self) -> str:
        return "MODE READER"


@attrs.frozen
class AuthInfoUser(Command):
    user: str

    def words(self) -> str:
        return "AUTHINFO USER " + _argument(self.user, "user name", spaces=True)


@attrs.frozen(repr=False)
class AuthInfoPass(Command):
    password: str

    def words(self) -> str:
        return "AUTHINFO PASS " + _argument(self.password, "password", spaces=True)

    def __repr__(self) -> str:
        return "AuthInfoPass(password=<hidden>)"


@attrs.frozen
class Group(Command):
    name: str

    def words(self) -> str:
        return "GROUP " + _argument(self.name, "group name")


@attrs.frozen
class Over(Command):
    """OVER first-last (inclusive); last None means "to the end"."""

    first: int
    last: int | None = None
    # The reply's data as DataText blocks (lines ended by LF) instead of DataLines.
    text: bool = attrs.field(default=False, kw_only=True)
    VERB: ClassVar[str] = "OVER"
    MULTILINE: ClassVar[frozenset[int]] = frozenset({224})

    def words(self) -> str:
        first = _number(self.first, "first article")
        if self.last is None:
            return f"{self.VERB} {first}-"
        if self.last < self.first:
            raise LocalProtocolError(f"empty range {self.first}-{self.last}")
        return f"{self.VERB} {first}-{_number(self.last, 'last article')}"


@attrs.frozen
class XOver(Over):
    """XOVER: the pre-RFC 3977 name of OVER, for servers without OVER."""

    VERB: ClassVar[str] = "XOVER"


@attrs.frozen
class XZver(Over):
    """XZVER: XOVER whose data is compressed (see compressed.py)."""

    VERB: ClassVar[str] = "XZVER"


@attrs.frozen
class XFeatureCompressGzip(Command):
    """XFEATURE COMPRESS GZIP [TERMINATOR]; after 290, OVER data comes compressed."""

    terminator: bool = False
    ENABLED: ClassVar[int] = 290

    def words(self) -> str:
        return "XFEATURE COMPRESS GZIP" + (" TERMINATOR" if self.terminator else "")


@attrs.frozen
class ListExtensions(Command):
    """LIST EXTENSIONS (RFC 2980): the extensions of a server older than CAPABILITIES."""

    MULTILINE: ClassVar[frozenset[int]] = frozenset({202, 215})

    def words(self) -> str:
        return "LIST EXTENSIONS"


@attrs.frozen
class ListOverviewFmt(Command):
    MULTILINE: ClassVar[frozenset[int]] = frozenset({215})

    def words(self) -> str:
        return "LIST OVERVIEW.FMT"


@attrs.frozen
class Date(Command):
    def words(self) -> str:
        return "DATE"


def _message_id(value: str) -> str:
    _argument(value, "message-id")
    if not (value.startswith("<") and value.endswith(">")):
        raise LocalProtocolError(f"a message-id is written <...>: {value!r}")
    return value


@attrs.frozen
class Body(Command):
    message_id: str
    MULTILINE: ClassVar[frozenset[int]] = frozenset({222})

    def words(self) -> str:
        return "BODY " + _message_id(self.message_id)


@attrs.frozen
class Head(Command):
    message_id: str
    MULTILINE: ClassVar[frozenset[int]] = frozenset({221})

    def words(self) -> str:
        return "HEAD " + _message_id(self.message_id)


@attrs.frozen
class Article(Command):
    message_id: str
    MULTILINE: ClassVar[frozenset[int]] = frozenset({220})

    def words(self) -> str:
        return "ARTICLE " + _message_id(self.message_id)


@attrs.frozen
class Quit(Command):
    def words(self) -> str:
        return "QUIT"


@attrs.frozen
class StartTLS(Command):
    SWITCH_CODE: ClassVar[int | None] = 382

    def words(self) -> str:
        return "STARTTLS"


@attrs.frozen
class Compress(Command):
    """RFC 8054 COMPRESS; after 206 both directions are raw deflate."""

    algorithm: str = "DEFLATE"
    SWITCH_CODE: ClassVar[int | None] = 206

    def words(self) -> str:
        return "COMPRESS " + _argument(self.algorithm, "compression algorithm")


# -- events -----------------------------------------------------------------


@attrs.frozen
class Response:
    """A status line: the whole of a single-line reply, the start of a multi-line one."""

    code: int
    text: str
    command: Command
    multiline: bool = False


@attrs.frozen
class DataLines:
    """The next complete lines of a multi-line reply (dot-unstuffed, no CRLF)."""

    lines: list[bytes]


@attrs.frozen
class DataText:
    """The next complete lines of a multi-line reply as one block (for OVER with `text`).

    The lines DataLines would give, each ended by LF, with every CR dropped
    (one pass over the block: no overview field holds a CR, and the indexer
    drops them all the same). Made without a bytes object per line where no
    line starts with a dot (overview lines start with their number).
    """

    text: bytes
    lines: int


@attrs.frozen
class DataEnd:
    """The "." that ends a multi-line reply.

    Attributes:
        overlong: lines of an OVER/XOVER/XZVER reply dropped for being over
            the line cap (see the module docstring); 0 for any other reply.
    """

    overlong: int = 0


@attrs.frozen
class ConnectionClosed:
    """The server closed the connection with no reply outstanding."""


Event: TypeAlias = Response | DataLines | DataText | DataEnd | ConnectionClosed


# -- the connection ---------------------------------------------------------


class _State(enum.Enum):
    STATUS = "STATUS"  # waiting for a status line (or nothing is pending)
    DATA = "DATA"  # inside multi-line data
    PAUSED = "PAUSED"  # after 382/206: the caller switches its stream
    CLOSED = "CLOSED"  # EOF was reported
    ERROR = "ERROR"  # the peer broke the rules


# A line that starts with a dot (stuffed, or the "." that ends the data). A
# regular expression, not bytes.find: it looks for LF with memchr and then at
# the byte after it, about twice as fast as find's two-byte search here.
_LINE_WITH_DOT = re.compile(rb"\n\.")


@attrs.define(eq=False)
class NNTPConnection:
    """One client connection's protocol state (see the module docstring)."""

    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    _pending: deque[Command] = attrs.field(init=False, factory=lambda: deque([Greeting()]))
    _buffer: bytearray = attrs.field(init=False, factory=bytearray)
    _state: _State = attrs.field(init=False, default=_State.STATUS)
    _eof: bool = attrs.field(init=False, default=False)
    _error: RemoteProtocolError | None = attrs.field(init=False, default=None)
    # The "." was read with the last DataLines; DataEnd is the next event.
    _end_pending: bool = attrs.field(init=False, default=False)
    # XFEATURE COMPRESS GZIP is on (a 290 was read).
    _gzip: bool = attrs.field(init=False, default=False)
    # The current reply's data goes out as DataText (an OVER sent with `text`).
    _text: bool = attrs.field(init=False, default=False)
    # The current reply's data is compressed: it goes through this first.
    _decoder: ReplyDecoder | None = attrs.field(init=False, default=None)
    # A compressed reply (of this scheme) ended with its "." inside; a plain "."
    # line may follow.
    _stray_dot: Scheme | None = attrs.field(init=False, default=None)
    # The current reply's lines over the cap are dropped (OVER data), not an error.
    _drops_overlong: bool = attrs.field(init=False, default=False)
    # Inside a line over the cap: its bytes are dropped up to its LF.
    _dropping: bool = attrs.field(init=False, default=False)
    # Lines of the current reply dropped for being over the cap.
    _overlong: int = attrs.field(init=False, default=0)

    @property
    def gzip(self) -> bool:
        """Whether XFEATURE COMPRESS GZIP is on (its 290 reply was read)."""
        return self._gzip

    @property
    def pending(self) -> int:
        """How many commands (the greeting included) still wait for their reply."""
        return len(self._pending)

    def send(self, command: Command) -> bytes:
        """The bytes of `command`; its reply is expected after those already pending.

        Raises:
            LocalProtocolError: a bad argument, or the connection cannot take a
                command now (paused, closed, or after STARTTLS/COMPRESS in flight).
        """
        if self._state in (_State.PAUSED, _State.CLOSED, _State.ERROR):
            raise LocalProtocolError(
                f"cannot send {command!r}: the connection is {self._state.value}"
            )
        if self._pending and self._pending[-1].SWITCH_CODE is not None:
            raise LocalProtocolError(f"cannot pipeline {command!r} after {self._pending[-1]!r}")
        data = command.encode()
        self._pending.append(command)
        return data

    def receive_data(self, data: bytes) -> None:
        """Bytes read from the server; `b""` means the server closed the connection."""
        if self._eof:
            if data:
                raise LocalProtocolError("receive_data after EOF")
            return
        if data:
            self._buffer += data
        else:
            self._eof = True

    def resume(self) -> bytes:
        """Leave PAUSED after a STARTTLS or COMPRESS switch; returns the bytes that followed."""
        if self._state is not _State.PAUSED:
            raise LocalProtocolError(f"resume() while {self._state.value}")
        rest = bytes(self._buffer)
        self._buffer.clear()
        self._state = _State.STATUS
        return rest

    def next_event(self) -> Event | Sentinel:
        """The next event, `NEED_DATA`, or `PAUSED`.

        Raises:
            RemoteProtocolError: the server broke RFC 3977 (and will every call after).
        """
        if self._error is not None:
            raise self._error
        try:
            return self._next_event()
        except RemoteProtocolError as exc:
            self._state = _State.ERROR
            self._error = exc
            raise

    def _next_event(self) -> Event | Sentinel:
        if self._state is _State.PAUSED:
            return PAUSED
        if self._state is _State.DATA:
            return self._data_event()
        if self._state is _State.CLOSED:
            return ConnectionClosed()
        return self._status_event()

    def _status_event(self) -> Event | Sentinel:
        if self._stray_dot is not None and not self._skip_stray_dot(self._stray_dot):
            return NEED_DATA if not self._eof else self._closed_event()
        end = self._buffer.find(b"\n")
        if end < 0:
            self._check_partial(len(self._buffer))
            if not self._eof:
                return NEED_DATA
            return self._closed_event()
        if end > self.max_line_bytes:
            raise LineTooLong(self.max_line_bytes)
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        if not self._pending:
            raise MalformedResponse(f"unsolicited reply: {line[:100]!r}")
        code, text = _parse_status(line.removesuffix(b"\r"))
        command = self._pending.popleft()
        multiline = code in command.MULTILINE
        if multiline:
            self._state = _State.DATA
            self._text = isinstance(command, Over) and command.text
            self._drops_overlong = isinstance(command, Over)
            self._decoder = self._decoder_for(command, text)
        elif code == command.SWITCH_CODE:
            self._state = _State.PAUSED
        elif isinstance(command, XFeatureCompressGzip) and code == command.ENABLED:
            self._gzip = True
        return Response(code, text, command, multiline)

    def _closed_event(self) -> Event:
        """EOF where a status line is due."""
        if self._buffer or self._pending:
            raise IncompleteResponse(f"connection closed before the reply to {self._waiting()}")
        self._state = _State.CLOSED
        return ConnectionClosed()

    def _skip_stray_dot(self, scheme: Scheme) -> bool:
        """Drops the plain "." line some servers send after a compressed reply.

        Returns False while the buffer cannot tell yet.
        """
        buffer = self._buffer
        if not buffer:
            return False
        if buffer[0] == ord(b"."):
            end = buffer.find(b"\n", 0, 3)
            if end < 0 and len(buffer) < 3:
                return False
            if end < 0 or bytes(buffer[: end + 1]) not in (b".\r\n", b".\n"):
                raise CompressionError(
                    f"{scheme.value}: not a '.' line after the compressed data: "
                    f"{bytes(buffer[:20])!r}",
                    scheme=scheme.value,
                )
            del buffer[: end + 1]
        self._stray_dot = None
        return True

    def _decoder_for(self, command: Command, text: str) -> ReplyDecoder | None:
        """A decoder when this reply's data is compressed (XZVER, or OVER in GZIP mode)."""
        if isinstance(command, XZver):
            return ReplyDecoder(Scheme.XZVER, max_line_bytes=self.max_line_bytes)
        if self._gzip:
            marked = "COMPRESS=GZIP" in text.upper()
            if marked or isinstance(command, Over):
                return ReplyDecoder(Scheme.GZIP, marked, self.max_line_bytes)
        return None

    def _waiting(self) -> str:
        return repr(self._pending[0]) if self._pending else "nothing"

    def _check_partial(self, length: int) -> None:
        if length > self.max_line_bytes:
            raise LineTooLong(self.max_line_bytes)

    def _data_event(self) -> Event | Sentinel:
        if self._end_pending:
            return self._end_data()
        if self._decoder is not None:
            return self._decoded_event(self._decoder)
        return self._lines_event(self._buffer, self._eof)

    def _decoded_event(self, decoder: ReplyDecoder) -> Event | Sentinel:
        """The next lines of a compressed reply: inflate until a line is complete."""
        while True:
            event = self._lines_event(decoder.text, False)
            if event is not NEED_DATA:
                return event
            if decoder.plain:  # not compressed after all (nothing was taken)
                self._decoder = None
                return self._lines_event(self._buffer, self._eof)
            if not decoder.feed(self._buffer):
                if self._eof:
                    raise IncompleteResponse("connection closed inside compressed data")
                return NEED_DATA

    def _end_data(self) -> Event | Sentinel:
        """DataEnd, once a compressed reply's stream is complete too."""
        decoder = self._decoder
        if decoder is not None:
            while not decoder.done and not decoder.text:
                if not decoder.feed(self._buffer):
                    if self._eof:
                        raise IncompleteResponse("connection closed inside compressed data")
                    return NEED_DATA
            if decoder.text:
                raise CompressionError(
                    f"{decoder.scheme.value}: data after the '.' line of the compressed text",
                    scheme=decoder.scheme.value,
                )
            self._stray_dot = decoder.scheme if decoder.stray_dot else None
            self._decoder = None
        self._end_pending = False
        self._state = _State.STATUS
        overlong, self._overlong = self._overlong, 0
        return DataEnd(overlong)

    def _lines_event(self, buffer: bytearray, eof: bool) -> Event | Sentinel:
        """DataLines (DataText for an OVER sent with `text`) of the complete lines in `buffer`.

        `buffer` holds plain or inflated text.
        """
        if self._dropping and not self._drop_rest(buffer):
            return self._partial(buffer, eof)
        end = buffer.rfind(b"\n")
        if end < 0:
            return self._partial(buffer, eof)
        if not self._drops_overlong and self._over_cap(buffer, end + 1):
            raise LineTooLong(self.max_line_bytes)
        chunk = bytes(buffer[: end + 1])
        event: DataLines | DataText
        block = self._text_block(chunk) if self._text else None
        if block is not None:
            text, count, consumed, finished = block
            event = DataText(text, count)
        else:
            lines, consumed, finished = self._line_block(chunk)
            count = len(lines)
            if self._text:
                event = DataText((b"\n".join(lines) + b"\n").translate(None, b"\r"), count)
            else:
                event = DataLines(lines)
        del buffer[:consumed]
        if finished:
            self._end_pending = True
            if not count:
                return self._end_data()
        elif not count:
            # Every complete line was over the cap: what is left has no LF.
            return self._partial(buffer, eof)
        return event

    def _partial(self, buffer: bytearray, eof: bool) -> Sentinel:
        """NEED_DATA: `buffer` holds no LF (an incomplete line, or nothing).

        In OVER data a line already over the cap starts to be dropped here, so
        the buffer never holds more than the cap of it.

        Raises:
            LineTooLong: the incomplete line is over the cap (not OVER data).
            IncompleteResponse: at EOF.
        """
        if self._over_cap(buffer, 0):
            if not self._drops_overlong:
                raise LineTooLong(self.max_line_bytes)
            self._overlong += 1
            self._dropping = True
            buffer.clear()
        if eof:
            raise IncompleteResponse("connection closed inside multi-line data")
        return NEED_DATA

    def _over_cap(self, buffer: bytearray, start: int) -> bool:
        """Whether the incomplete line at `start` of `buffer` is over the cap already.

        Measured as a complete line is, after dot-unstuffing: whether a line
        is over the cap does not depend on where the reads cut it.
        """
        stuffed = buffer[start : start + 1] == b"."
        return len(buffer) - start - stuffed > self.max_line_bytes

    def _drop_rest(self, buffer: bytearray) -> bool:
        """Drops the rest of a line over the cap; whether its LF was in `buffer`."""
        end = buffer.find(b"\n")
        if end < 0:
            buffer.clear()
            return False
        del buffer[: end + 1]
        self._dropping = False
        return True

    def _line_block(self, chunk: bytes) -> tuple[list[bytes], int, bool]:
        """(lines, bytes consumed, finished) of `chunk`'s complete lines, split one by one.

        Dot-unstuffed and without CR; the "." line ends them (finished). A
        line over the cap is dropped and counted in OVER data.

        Raises:
            LineTooLong: a line is over the cap (not OVER data).
        """
        lines = chunk.split(b"\n")
        lines.pop()  # the empty piece after the last LF
        consumed = len(chunk)
        finished = False
        if chunk.startswith(b".") or _LINE_WITH_DOT.search(chunk):
            terminator = self._unstuff(lines)
            if terminator is not None:
                index, consumed = terminator
                lines = lines[:index]
                finished = True
        cap = self.max_line_bytes
        if len(lines) and max(map(len, lines)) > cap:
            if not self._drops_overlong:
                raise LineTooLong(cap)
            kept = [x for x in lines if len(x) <= cap]
            self._overlong += len(lines) - len(kept)
            lines = kept
        return [x[:-1] if x.endswith(b"\r") else x for x in lines], consumed, finished

    def _text_block(self, chunk: bytes) -> tuple[bytes, int, int, bool] | None:
        """(text, lines, bytes consumed, finished) of `chunk`'s complete lines, as one block.

        None when a line before the "." line starts with a dot (stuffed: the
        line by line path unstuffs it), or when a line may be too long (that
        path takes it, or drops and counts it).
        """
        if chunk.startswith(b"."):
            return None
        found = _LINE_WITH_DOT.search(chunk)
        if found is None:
            body, consumed, finished = chunk, len(chunk), False
        else:
            dot = found.start()
            after = chunk[dot + 1 : dot + 4]
            if after == b".\r\n":
                consumed = dot + 4
            elif after[:2] == b".\n":
                consumed = dot + 3
            else:
                return None
            body, finished = chunk[: dot + 1], True
        # Every `step` bytes hold a LF: then no line is longer than 2 * step - 2.
        step = self.max_line_bytes // 2
        for start in range(0, len(body), step):
            if body.find(b"\n", start, start + step) < 0:
                return None
        return body.translate(None, b"\r"), body.count(b"\n"), consumed, finished

    @staticmethod
    def _unstuff(lines: list[bytes]) -> tuple[int, int] | None:
        """Unstuffs lines in place; (index, bytes up to and with it) of the "." line, if any."""
        offset = 0
        for i, x in enumerate(lines):
            offset += len(x) + 1
            if x.startswith(b"."):
                if x in (b".\r", b"."):
                    return i, offset
                lines[i] = x[1:]
        return None


def _parse_status(line: bytes) -> tuple[int, str]:
    """(code, text) of a status line: three digits, then a space or the end."""
    head = line[:3]
    if len(head) != 3 or not head.isdigit() or (len(line) > 3 and line[3:4] != b" "):
        raise MalformedResponse(f"not an NNTP status line: {line[:100]!r}")
    code = int(head)
    if not 100 <= code <= 599:
        raise MalformedResponse(f"status code out of range: {line[:100]!r}")
    return code, line[4:].decode("utf-8", "replace")
