"""A thin trio adapter around the sans-IO NNTP protocol.

`connect(url)` opens the stream (TCP, TLS on connect for nntps://, STARTTLS
for ?starttls=1), reads the greeting, asks CAPABILITIES, sends MODE READER
when the server wants it, AUTHINFO USER/PASS when the URL has a user, and
turns on the best compression the server offers: COMPRESS DEFLATE (RFC 8054)
> XFEATURE COMPRESS GZIP > XZVER (the last two from CAPABILITIES, else LIST
EXTENSIONS). It yields an `NNTPClient` whose methods each send commands and
read their replies.

Compression that does not inflate: DEFLATE is checked with DATE at connect;
GZIP and XZVER show only on the first OVER. Either way the connection is
reopened without that scheme (the next one offered is tried), a warning is
logged, the group is selected again and `over_pipelined` sends its unread
slices again: no slice is lost or half-yielded. `over` does the same when
nothing of the reply was yielded yet; otherwise it raises CompressionError
after reopening (what it yielded is void, the client stays usable).

Timeouts: every read and write waits at most `timeout_seconds`; a server
that sends nothing for that long raises `Timeout`. A long OVER reply that
keeps arriving never times out.

After any error (Timeout, ConnectionLost, RemoteProtocolError) or a
cancellation in the middle of a command the client is unusable: the stream
may be in the middle of a reply. Every later call raises ConnectionLost; the
caller opens a fresh connection. Reply errors (AuthRequired, NoSuchArticle,
...) leave the connection usable except Unavailable.

An overview line over `max_line_bytes` is a malformed line, not a broken
reply: the protocol drops it and the reply goes on; the client logs one
warning per reply that lost lines so (server, group, range, count).

Nothing half-delivered: `over_pipelined` yields a slice only when its reply
has ended, so a slice's lines are all there or the call raises. `over`
streams pieces as they arrive (it never holds a whole reply), so its caller
must treat what it got before an exception as void (the prefetcher writes a
chunk to a temporary file and renames it only at the end).
"""

from __future__ import annotations

import logging
import ssl
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import aclosing, asynccontextmanager, suppress
from typing import Final, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import attrs
import trio

from usenet_indexer.config import default
from usenet_indexer.errors import ConfigError
from usenet_indexer.nntp import protocol as p
from usenet_indexer.nntp.errors import (
    AuthRequired,
    CompressionError,
    ConnectionLost,
    IncompleteResponse,
    NoSuchArticle,
    NoSuchGroup,
    RemoteProtocolError,
    ReplyError,
    Timeout,
    Unavailable,
)
from usenet_indexer.nntp.replies import GroupStatus, ServerCapabilities, parse_date

logger = logging.getLogger(__name__)

# The nntp_timeout_seconds setting's default (written once, in config.py).
DEFAULT_TIMEOUT_SECONDS: Final[float] = default("nntp_timeout_seconds")
# Bytes asked of the socket per read, and the most one inflate step may give.
READ_BYTES: Final = 256 * 1024
# A par2 or nfo probe reads one segment (~750 KB of yEnc); 16 MiB refuses absurd bodies.
DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024
# OVER commands in flight in over_pipelined: two keep the server busy while we
# read (INN writes each reply in two writes); more only adds memory.
DEFAULT_PIPELINE_DEPTH: Final = 4
# The time QUIT and closing get when the client leaves (shielded).
CLOSE_TIMEOUT_SECONDS: Final = 2.0

Slice = tuple[int, int]
StreamFactory = Callable[[], Awaitable[trio.abc.Stream]]
# Opens a fresh connection to the same server without the given compression schemes.
Reopen = Callable[[frozenset[str]], Awaitable["NNTPClient"]]
_T = TypeVar("_T")


@attrs.frozen
class OverviewText:
    """A slice's overview lines as blocks of text, each line ended by LF (no CR).

    Attributes:
        blocks: the text, in the pieces it arrived in (join them, or write them in order).
        lines: how many lines the blocks hold.
    """

    blocks: list[bytes]
    lines: int


# The setting that lists the server URLs (UIDX_NNTP in the environment): the key
# a mistake in a URL names.
URL_KEY: Final = "nntp"
# How a boolean URL parameter may be spelt, in any case: as a boolean setting may.
_TRUE: Final = frozenset({"true", "yes", "on", "1"})
_FALSE: Final = frozenset({"false", "no", "off", "0"})
_EXPECTED: Final = "expected nntp[s]://[user:pass@]host[:port]"


@attrs.frozen(repr=False)
class ServerURL:
    """Where a server is and how to talk to it, from nntp[s]://[user:pass@]host[:port][?starttls=1]."""

    host: str
    port: int
    tls: bool = False
    starttls: bool = False
    user: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> ServerURL:
        """The server of `url`.

        Raises:
            ConfigError: anything but an nntp:// or nntps:// URL with a host, a
                port in 1..65535 and a boolean starttls. It names the key `nntp`
                and quotes the URL with its password masked.
        """
        shown = masked(url)
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError:
            # An unclosed [ or a port that is not a number (the message may quote
            # a piece of a password that holds a / ? or #).
            raise ConfigError(
                URL_KEY,
                f"{_EXPECTED} (a port in 1..65535; / ? # @ : in a password as %2F %3F"
                f" %23 %40 %3A), got {shown!r}",
            ) from None
        if parts.scheme not in ("nntp", "nntps") or not host:
            raise ConfigError(URL_KEY, f"{_EXPECTED}, got {shown!r}")
        if port == 0:
            raise ConfigError(URL_KEY, f"{shown}: port 0 is not in 1..65535")
        tls = parts.scheme == "nntps"
        starttls = _boolean(shown, "starttls", parse_qs(parts.query, keep_blank_values=True))
        if tls and starttls:
            raise ConfigError(
                URL_KEY, f"{shown}: nntps:// is TLS already; starttls=1 is for nntp://"
            )
        user = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        if user is not None and password is None:
            raise ConfigError(URL_KEY, f"{shown}: a user needs a password (user:pass@)")
        if port is None:
            port = 563 if tls else 119
        return cls(host, port, tls, starttls, user, password)

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"ServerURL({self.server}, tls={self.tls}, starttls={self.starttls}, user={self.user!r})"


def masked(url: str) -> str:
    """`url` with its password as *** (for a message or a log); the rest as written.

    Everything between the user's `:` and the last `@` counts as the password,
    so a password that holds an unencoded / ? # or @ is masked whole too.
    """
    scheme, sep, rest = url.partition("://") if "://" in url else ("", "", url)
    userinfo, at, where = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{sep}{userinfo.split(':', 1)[0]}:***@{where}"


def _boolean(shown: str, name: str, query: dict[str, list[str]]) -> bool:
    """The URL parameter `name` as a boolean (absent: False)."""
    value = query.get(name, ["0"])[-1]
    if value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(
        URL_KEY, f"{shown}: {name}={value!r} is not true/false, yes/no, on/off or 1/0"
    )


@attrs.define(eq=False)
class _Deflate:
    """RFC 8054: both directions are one raw deflate stream each."""

    inflater: zlib._Decompress = attrs.field(factory=lambda: zlib.decompressobj(-15))
    deflater: zlib._Compress = attrs.field(factory=lambda: zlib.compressobj(6, zlib.DEFLATED, -15))


@attrs.define(eq=False)
class NNTPClient:
    """One connection. Build it with `connect`; the methods are the commands."""

    _stream: trio.abc.Stream
    server: str
    timeout_seconds: float
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_line_bytes: int = p.DEFAULT_MAX_LINE_BYTES
    capabilities: ServerCapabilities = attrs.field(factory=lambda: ServerCapabilities({}))
    _conn: p.NNTPConnection = attrs.field(init=False)
    _deflate: _Deflate | None = attrs.field(init=False, default=None)
    _broken: str | None = attrs.field(init=False, default=None)
    # The compression in use: "DEFLATE", "GZIP", "XZVER" or None.
    _mode: str | None = attrs.field(init=False, default=None)
    # The schemes this connection must not use (their data did not inflate before).
    _disabled: frozenset[str] = attrs.field(init=False, default=frozenset())
    # Set by connect: how to reopen after compressed data that does not inflate.
    _reopen: Reopen | None = attrs.field(init=False, default=None)
    _group: str | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self._conn = p.NNTPConnection(max_line_bytes=self.max_line_bytes)

    @property
    def encrypted(self) -> bool:
        """Whether the stream is TLS (NNTPS or after STARTTLS)."""
        return isinstance(self._stream, trio.SSLStream)

    @property
    def compression(self) -> str | None:
        """The compression in use: "DEFLATE" (RFC 8054), "GZIP" (XFEATURE COMPRESS GZIP), "XZVER", or None."""
        return self._mode

    # -- the commands -------------------------------------------------------

    async def group(self, name: str) -> tuple[int, int, int]:
        """GROUP: (estimated count, low, high).

        Raises:
            NoSuchGroup: 411. AuthRequired: 480. Unavailable: 400/502.
        """
        response = await self._simple(p.Group(name), (211,))
        status = GroupStatus.from_text(response.text)
        self._group = name  # selected again after a reopen
        return status.count, status.low, status.high

    async def date(self) -> str:
        """DATE: the server's UTC time as yyyymmddhhmmss."""
        return parse_date((await self._simple(p.Date(), (111,))).text)

    async def overview_format(self) -> list[bytes]:
        """LIST OVERVIEW.FMT: the fields after the number, in order."""
        return [line async for piece in self._multi(p.ListOverviewFmt(), (215,)) for line in piece]

    async def over(
        self, first: int, last: int, *, xover: bool = False
    ) -> AsyncGenerator[list[bytes], None]:
        """OVER first-last: pieces of overview lines as they arrive; 420/423: nothing.

        What was yielded before an exception is void (see the module docstring).
        With XZVER on, XZVER is sent instead of OVER/XOVER.

        Raises:
            CompressionError: compressed data broke after some pieces were
                yielded; the connection was reopened without that compression.
        """
        yielded = False
        while True:
            command = self._over_command(first, last, xover)
            try:
                async with aclosing(self._multi(command, (224,), empty=(420, 423))) as pieces:
                    async for piece in pieces:
                        yielded = True
                        yield piece
                return
            except CompressionError as exc:
                await self._fall_back(exc)
                if yielded:
                    raise

    def over_pipelined(
        self, slices: Iterable[Slice], *, depth: int = DEFAULT_PIPELINE_DEPTH, xover: bool = False
    ) -> AsyncGenerator[tuple[Slice, list[bytes]], None]:
        """OVER for each (first, last) slice, `depth` commands in flight; yields whole slices.

        A slice is yielded only once its reply ended: all its lines or none.
        420/423 (no articles in the slice) yield an empty list. `slices` is
        pulled whenever the pipeline has room: an iterator that ran dry may
        be added to while its slices are read.
        """
        return self._pipelined(slices, depth, xover, False, self._read_over_reply)

    def over_text_pipelined(
        self, slices: Iterable[Slice], *, depth: int = DEFAULT_PIPELINE_DEPTH, xover: bool = False
    ) -> AsyncGenerator[tuple[Slice, OverviewText], None]:
        """`over_pipelined` with each slice's lines as blocks of text (lines ended by LF).

        For a reader that keeps the text as it is (the spool): no bytes object
        per line is made, nor joined again.
        """
        return self._pipelined(slices, depth, xover, True, self._read_over_text)

    async def _pipelined(
        self,
        slices: Iterable[Slice],
        depth: int,
        xover: bool,
        text: bool,
        read: Callable[[], Awaitable[_T]],
    ) -> AsyncGenerator[tuple[Slice, _T], None]:
        todo = iter(slices)
        sent: list[Slice] = []
        self._check_usable()
        try:
            await self._send_next(todo, sent, depth, xover, text)
            while sent:
                try:
                    reply = await read()
                except CompressionError as exc:
                    await self._fall_back(exc)
                    await self._send([self._over_command(a, b, xover, text) for a, b in sent])
                    continue
                done = sent.pop(0)
                await self._send_next(todo, sent, depth - len(sent), xover, text)
                yield done, reply
        except BaseException:
            if sent or self._conn.pending:
                self._broken = self._broken or "an OVER pipeline was abandoned"
            raise

    async def body(self, message_id: str) -> bytes:
        """BODY <message-id>: the body, lines joined with CRLF, at most max_body_bytes.

        Raises:
            NoSuchArticle: 430. ReplyError: the body is over max_body_bytes
            (the connection is closed then: the rest of the reply is unread).
        """
        parts: list[bytes] = []
        size = 0
        async with aclosing(self._multi(p.Body(message_id), (222,))) as pieces:
            async for piece in pieces:
                size += sum(map(len, piece)) + 2 * len(piece)
                if size > self.max_body_bytes:
                    # Closing the reply's generator marks the connection unusable.
                    raise ReplyError(
                        222,
                        f"body over {self.max_body_bytes} bytes",
                        command="BODY",
                        server=self.server,
                    )
                parts += piece
        parts.append(b"")
        return b"\r\n".join(parts)

    async def quit(self) -> None:
        """QUIT, and closes the stream; never raises for a server already gone."""
        if self._broken is None:
            with suppress(ReplyError, ConnectionLost, Timeout, RemoteProtocolError):
                await self._simple(p.Quit(), (205,))
        self._broken = "closed"
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self._stream.aclose()

    # -- the handshake (used by connect) ------------------------------------

    async def greet(self) -> None:
        response = await self._response()
        if response.code not in (200, 201):
            raise self._error(response)

    async def refresh_capabilities(self) -> None:
        try:
            lines = [x async for piece in self._multi(p.Capabilities(), (101,)) for x in piece]
        except ReplyError as exc:
            if exc.code not in (500, 501):
                raise
            lines = []  # an RFC 977 server: no CAPABILITIES
        self.capabilities = ServerCapabilities.from_lines(lines)

    async def mode_reader(self) -> None:
        await self._simple(p.ModeReader(), (200, 201))

    async def authenticate(self, user: str, password: str) -> None:
        response = await self._response_to(p.AuthInfoUser(user))
        if response.code == 381:
            response = await self._response_to(p.AuthInfoPass(password))
        if response.code in (400, 502):
            # A per-account connection cap shows here, not at the greeting (which
            # does not know the account): "too many connections", as 400/502 there.
            raise self._error(response)
        if response.code != 281:
            raise AuthRequired(response.code, response.text, command="AUTHINFO", server=self.server)

    async def start_tls(self, context: ssl.SSLContext, host: str) -> None:
        await self._simple(p.StartTLS(), (382,))
        if self._conn.next_event() is not p.PAUSED or self._conn.resume():
            # RFC 4642: the server must wait for our handshake.
            raise RemoteProtocolError("the server sent data before the TLS handshake")
        tls = trio.SSLStream(self._stream, context, server_hostname=host, https_compatible=True)
        await self._io(tls.do_handshake())
        self._stream = tls

    async def start_compress(self) -> bool:
        """COMPRESS DEFLATE; True when on. Checked with DATE: see connect()."""
        response = await self._response_to(p.Compress("DEFLATE"))
        if response.code != 206:
            self._refused("COMPRESS DEFLATE", response)
            return False
        if self._conn.next_event() is not p.PAUSED:
            raise RemoteProtocolError("no pause after 206")  # pragma: no cover
        self._deflate = _Deflate()
        self._mode = "DEFLATE"
        early = self._conn.resume()
        if early:
            self._feed(early)
        await self.date()
        return True

    async def start_xfeature_gzip(self, terminator: bool = False) -> bool:
        """XFEATURE COMPRESS GZIP [TERMINATOR]; True when on (290).

        Whether its data inflates shows only on the first OVER (see the module docstring).
        """
        response = await self._response_to(p.XFeatureCompressGzip(terminator))
        if response.code != p.XFeatureCompressGzip.ENABLED:
            self._refused("XFEATURE COMPRESS GZIP", response)
            return False
        self._mode = "GZIP"
        return True

    async def start_compression(self) -> None:
        """The best compression offered and not disabled: DEFLATE > GZIP > XZVER > none."""
        caps = self.capabilities
        wanted = caps.has("COMPRESS", "DEFLATE") and "DEFLATE" not in self._disabled
        if wanted and await self.start_compress():
            return
        if not (caps.xfeature_gzip() or caps.has("XZVER")):
            caps = caps.with_extensions(await self.list_extensions())
        wanted = caps.xfeature_gzip() and "GZIP" not in self._disabled
        if wanted and await self.start_xfeature_gzip(caps.xfeature_terminator()):
            return
        if "XZVER" not in self._disabled and caps.has("XZVER"):
            self._mode = "XZVER"  # no negotiation: OVER becomes XZVER

    async def list_extensions(self) -> ServerCapabilities:
        """LIST EXTENSIONS (RFC 2980); empty when the server does not know it."""
        try:
            lines = [
                x async for piece in self._multi(p.ListExtensions(), (202, 215)) for x in piece
            ]
        except ReplyError as exc:
            if isinstance(exc, Unavailable):
                raise
            return ServerCapabilities({})
        return ServerCapabilities.from_lines(lines)

    def _refused(self, what: str, response: p.Response) -> None:
        logger.info("%s: %s refused: %s %s", self.server, what, response.code, response.text)

    # -- plumbing -----------------------------------------------------------

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise ConnectionLost(f"connection unusable: {self._broken}", server=self.server)

    async def _simple(self, command: p.Command, ok: Sequence[int]) -> p.Response:
        response = await self._response_to(command)
        if response.code not in ok:
            raise self._error(response)
        return response

    async def _response_to(self, command: p.Command) -> p.Response:
        self._check_usable()
        await self._send([command])
        return await self._response()

    async def _multi(
        self, command: p.Command, ok: Sequence[int], *, empty: Sequence[int] = ()
    ) -> AsyncGenerator[list[bytes], None]:
        response = await self._response_to(command)
        if response.code in empty:
            return
        if response.code not in ok or not response.multiline:
            raise self._error(response)
        try:
            while True:
                event = await self._event()
                if isinstance(event, p.DataEnd):
                    self._note_overlong(command, event)
                    return
                assert isinstance(event, p.DataLines)  # the protocol guarantees it
                yield event.lines
        except BaseException:
            # An abandoned or failed reply leaves the stream mid-data.
            self._broken = self._broken or f"a {command!r} reply was abandoned"
            raise

    async def _send_next(
        self, todo: Iterable[Slice], sent: list[Slice], room: int, xover: bool, text: bool
    ) -> None:
        batch: list[Slice] = []
        for piece in todo:
            batch.append(piece)
            if len(batch) >= room:
                break
        if batch:
            await self._send([self._over_command(a, b, xover, text) for a, b in batch])
            sent.extend(batch)

    def _over_command(self, first: int, last: int, xover: bool, text: bool = False) -> p.Over:
        if self._mode == "XZVER":
            return p.XZver(first, last, text=text)
        return p.XOver(first, last, text=text) if xover else p.Over(first, last, text=text)

    async def _fall_back(self, exc: CompressionError) -> None:
        """Reopens the connection without the compression whose data broke; selects the group."""
        if self._reopen is None or exc.scheme in self._disabled:
            raise exc
        logger.warning(
            "%s: %s data does not inflate (%s); reopening the connection without it",
            self.server,
            exc.scheme,
            exc,
        )
        with trio.move_on_after(CLOSE_TIMEOUT_SECONDS, shield=True):
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self._stream.aclose()
        self._adopt(await self._reopen(self._disabled | {exc.scheme}))
        if self._group is not None:
            await self.group(self._group)

    def _adopt(self, fresh: NNTPClient) -> None:
        """Takes over a fresh connection's stream and state (callers keep this object)."""
        self._stream, self._conn, self._deflate = fresh._stream, fresh._conn, fresh._deflate
        self._mode, self._disabled, self._reopen = fresh._mode, fresh._disabled, fresh._reopen
        self.capabilities = fresh.capabilities
        self._broken = None

    async def _read_over_reply(self) -> list[bytes]:
        response = await self._response()
        if response.code in (420, 423):
            return []
        if response.code != 224 or not response.multiline:
            raise self._error(response)
        lines: list[bytes] = []
        while not isinstance(event := await self._event(), p.DataEnd):
            assert isinstance(event, p.DataLines)  # the protocol guarantees it
            lines += event.lines
        self._note_overlong(response.command, event)
        return lines

    async def _read_over_text(self) -> OverviewText:
        response = await self._response()
        if response.code in (420, 423):
            return OverviewText([], 0)
        if response.code != 224 or not response.multiline:
            raise self._error(response)
        blocks: list[bytes] = []
        lines = 0
        while not isinstance(event := await self._event(), p.DataEnd):
            assert isinstance(event, p.DataText)  # the protocol guarantees it
            blocks.append(event.text)
            lines += event.lines
        self._note_overlong(response.command, event)
        return OverviewText(blocks, lines)

    def _note_overlong(self, command: p.Command, end: p.DataEnd) -> None:
        """One warning for a reply that lost overview lines over the line cap.

        The protocol drops such a line (a spam article's huge header) and
        counts it; nothing else keeps that count (the spool's chunk rows hold
        the lines it got), so the log is where it shows.
        """
        if end.overlong:
            logger.warning(
                "%s %s %s: %d overview line(s) over %d bytes skipped",
                self.server,
                self._group,
                command.words(),
                end.overlong,
                self.max_line_bytes,
            )

    async def _response(self) -> p.Response:
        event = await self._event()
        if not isinstance(event, p.Response):
            raise RemoteProtocolError(f"expected a status line, got {event!r}")  # pragma: no cover
        return event

    async def _event(self) -> p.Event:
        while True:
            try:
                event = self._conn.next_event()
            except IncompleteResponse as exc:
                self._broken = "closed by the server mid-reply"
                raise ConnectionLost(f"closed mid-reply: {exc}", server=self.server) from exc
            except RemoteProtocolError:
                self._broken = "the server broke the protocol"
                raise
            if event is p.NEED_DATA:
                await self._receive()
            elif isinstance(event, p.ConnectionClosed):
                self._broken = "closed by the server"
                raise ConnectionLost("the server closed the connection", server=self.server)
            elif isinstance(event, p.Sentinel):  # PAUSED: only after STARTTLS/COMPRESS
                self._broken = "paused unexpectedly"  # pragma: no cover
                raise RemoteProtocolError(f"unexpected {event}")  # pragma: no cover
            else:
                return event

    async def _send(self, commands: Sequence[p.Command]) -> None:
        data = b"".join(self._conn.send(c) for c in commands)
        if self._deflate is not None:
            deflater = self._deflate.deflater
            data = deflater.compress(data) + deflater.flush(zlib.Z_SYNC_FLUSH)
        await self._io(self._stream.send_all(data))

    async def _receive(self) -> None:
        if self._deflate is not None and self._deflate.inflater.unconsumed_tail:
            self._inflate(self._deflate.inflater.unconsumed_tail)
            return
        data = await self._io(self._stream.receive_some(READ_BYTES))
        if not data:
            self._conn.receive_data(b"")
        else:
            self._feed(bytes(data))

    def _feed(self, data: bytes) -> None:
        if self._deflate is None:
            self._conn.receive_data(data)
        else:
            self._inflate(data)

    def _inflate(self, data: bytes) -> None:
        assert self._deflate is not None
        try:
            plain = self._deflate.inflater.decompress(data, READ_BYTES)
        except zlib.error as exc:
            self._broken = "COMPRESS DEFLATE data does not inflate"
            raise CompressionError(
                f"{self.server}: COMPRESS DEFLATE data does not inflate: {exc}", scheme="DEFLATE"
            ) from None
        if plain:
            self._conn.receive_data(plain)

    async def _io(self, work: Awaitable[_T]) -> _T:
        """Awaits one read, write or handshake under the timeout, mapping its failures."""
        try:
            with trio.fail_after(self.timeout_seconds):
                return await work
        except trio.Cancelled:
            self._broken = "cancelled in the middle of a command"
            raise
        except trio.TooSlowError:
            self._broken = "timed out"
            raise Timeout(f"nothing for {self.timeout_seconds} s", server=self.server) from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._broken = "connection lost"
            cause = exc.__cause__ or exc
            raise ConnectionLost(f"connection lost: {cause!r}", server=self.server) from exc

    def _error(self, response: p.Response) -> ReplyError:
        if isinstance(response.command, p.Greeting):
            name = "greeting"
        else:
            name = response.command.words().split(" ", 1)[0]
        cls: type[ReplyError] = ReplyError
        if response.code == 480:
            cls = AuthRequired
        elif response.code in (400, 502):
            self._broken = f"{response.code} {response.text}"
            cls = Unavailable
        elif response.code == 411:
            cls = NoSuchGroup
        elif response.code in (423, 430):
            cls = NoSuchArticle
        return cls(response.code, response.text, command=name, server=self.server)


def tls_context(ca_file: str | None = None) -> ssl.SSLContext:
    """Certificate and host name checks on; `ca_file` adds a private CA (or a self-signed cert).

    Raises:
        ConfigError: `ca_file` cannot be read or holds no PEM certificate (names
            the key `nntp_ca_file` and the path). The prefetcher calls this once
            at start-up, so a mistake stops it there, not in a connection.
    """
    try:
        return ssl.create_default_context(cafile=ca_file)
    except ssl.SSLError as error:  # an OSError too: first
        raise ConfigError(
            "nntp_ca_file", f"{ca_file}: no PEM CA certificate in it ({error.reason or error})"
        ) from None
    except OSError as error:
        raise ConfigError(
            "nntp_ca_file", f"{ca_file}: cannot be read: {error.strerror or error}"
        ) from None


@asynccontextmanager
async def connect(
    url: str,
    *,
    ca_file: str | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    compress: bool = True,
    max_line_bytes: int = p.DEFAULT_MAX_LINE_BYTES,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    open_stream: StreamFactory | None = None,
) -> AsyncIterator[NNTPClient]:
    """A ready connection to the server of `url`; QUIT and close on the way out.

    Args:
        url: nntp://[user:pass@]host[:119][?starttls=1] or nntps://...[:563].
        ca_file: a PEM file of CA certificates for a private server.
        timeout_seconds: the longest wait for any read or write.
        compress: use the best compression offered (COMPRESS DEFLATE >
            XFEATURE COMPRESS GZIP > XZVER). If its data does not inflate
            (DEFLATE: checked with DATE right after; the others: on the first
            OVER), the connection is reopened without it and a line is logged.
        open_stream: makes the transport instead of a TCP connection to the
            URL's host and port (tests give an in-memory fake server here).

    Raises:
        ConfigError: a bad URL. ConnectionLost, Timeout: as their names say.
        Unavailable: the greeting is 400/502. AuthRequired: AUTHINFO refused.
    """
    target = ServerURL.parse(url)
    options = _Options(ca_file, timeout_seconds, max_line_bytes, max_body_bytes)
    client = await _open(target, options, compress, open_stream or _tcp_opener(target))
    try:
        yield client
    finally:
        with trio.move_on_after(CLOSE_TIMEOUT_SECONDS, shield=True):
            await client.quit()


@attrs.frozen
class _Options:
    ca_file: str | None
    timeout_seconds: float
    max_line_bytes: int
    max_body_bytes: int


def _tcp_opener(target: ServerURL) -> StreamFactory:
    async def open_tcp() -> trio.abc.Stream:
        return await trio.open_tcp_stream(target.host, target.port)

    return open_tcp


async def _open(
    target: ServerURL,
    options: _Options,
    compress: bool,
    open_stream: StreamFactory,
    disabled: frozenset[str] = frozenset(),
) -> NNTPClient:
    """A ready client; compression whose check fails at connect is dropped (one at a time)."""
    while True:
        try:
            client = await _handshake(target, options, compress, open_stream, disabled)
        except CompressionError as exc:
            if exc.scheme in disabled:
                raise  # pragma: no cover - a scheme is never used once disabled
            logger.warning(
                "%s: %s data does not inflate; reopening without it", target.server, exc.scheme
            )
            disabled |= {exc.scheme}
            continue

        async def reopen(without: frozenset[str]) -> NNTPClient:
            return await _open(target, options, compress, open_stream, without)

        client._reopen = reopen
        return client


async def _handshake(
    target: ServerURL,
    options: _Options,
    compress: bool,
    open_stream: StreamFactory,
    disabled: frozenset[str],
) -> NNTPClient:
    context = tls_context(options.ca_file) if (target.tls or target.starttls) else None
    try:
        with trio.fail_after(options.timeout_seconds):
            stream = await open_stream()
    except trio.TooSlowError:
        raise Timeout("connect timed out", server=target.server) from None
    except OSError as exc:
        raise ConnectionLost(f"cannot connect: {exc}", server=target.server) from exc
    client = NNTPClient(
        stream,
        target.server,
        options.timeout_seconds,
        max_body_bytes=options.max_body_bytes,
        max_line_bytes=options.max_line_bytes,
    )
    client._disabled = disabled
    try:
        if target.tls:
            assert context is not None
            tls = trio.SSLStream(
                stream, context, server_hostname=target.host, https_compatible=True
            )
            await client._io(tls.do_handshake())
            client._stream = tls
        await _negotiate(client, target, context, compress)
    except BaseException:
        with trio.move_on_after(CLOSE_TIMEOUT_SECONDS, shield=True):
            await client._stream.aclose()
        raise
    return client


async def _negotiate(
    client: NNTPClient, target: ServerURL, context: ssl.SSLContext | None, compress: bool
) -> None:
    await client.greet()
    await client.refresh_capabilities()
    if target.starttls:
        assert context is not None
        if not client.capabilities.has("STARTTLS"):
            raise ReplyError(0, "STARTTLS not offered", command="STARTTLS", server=client.server)
        await client.start_tls(context, target.host)
        await client.refresh_capabilities()
    if client.capabilities.has("MODE-READER") and not client.capabilities.has("READER"):
        await client.mode_reader()
        await client.refresh_capabilities()
    if target.user is not None and target.password is not None:
        await client.authenticate(target.user, target.password)
        await client.refresh_capabilities()
    if compress:
        await client.start_compression()
