"""A FAKE NNTP server in memory, for the faults a real server will not make on demand.

The round trips run against a real INN2 (tests/nntp_fixtures.py); this fake
is for what INN2 cannot be made to do at a given moment: a 502 at the
greeting, a connection dropped halfway through a reply, a stall, a 480 to
GROUP, garbage where compressed data should be, article numbers past 2^31.

Theory of operation
-------------------
Each connection is a pair of trio memory streams; `open_stream` (a
`StreamFactory` for `connect`) hands the client one end and serves the other
in the nursery given to `run_in`. Commands are answered in order, one line
at a time: a connection's fault first (`faults`, one per connection, in the
order they are opened), then what `replies` scripts for the command line or
its verb, then the fake's own answers from `groups` and `overview`.
Everything the client sent is kept in `received`.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Literal

import attrs
import trio
import trio.testing

from usenet_indexer.nntp.client import StreamFactory

Reply = bytes | None  # None: drop the connection
Scripted = Reply | Callable[[str], Awaitable[Reply]]
# What a whole connection does wrong: "502" (too many connections at the
# greeting), "drop" (it closes halfway through the first OVER reply), "480"
# (GROUP answers 480), "stall" (OVER is never answered), "ok" (nothing).
Fault = Literal["ok", "502", "drop", "480", "stall"]
# Overview lines -> the data of a compressed reply (the wire forms are the tests').
OverviewEncoder = Callable[[Sequence[bytes]], bytes]


def multiline(status: str, lines: Sequence[bytes]) -> bytes:
    """A whole multi-line reply: the status line, the dot-stuffed lines, ".".

    Args:
        status: the status line without its CRLF ("224 overview").
        lines: the lines without their CRLF.

    Returns:
        The reply as a server sends it.
    """
    return status.encode() + b"\r\n" + _stuffed(lines, dot=True)


def _stuffed(lines: Sequence[bytes], *, dot: bool) -> bytes:
    text = b"".join((b"." + x if x.startswith(b".") else x) + b"\r\n" for x in lines)
    return text + b".\r\n" if dot else text


async def stall(_line: str) -> Reply:
    """A scripted reply that never comes (the client's timeout must end the wait)."""
    await trio.sleep_forever()
    raise AssertionError("unreachable")  # pragma: no cover


@attrs.define(eq=False)
class _Session:
    """What one fake connection does wrong and has switched on."""

    fault: Fault = "ok"
    gzip: bool = False
    hang_up: bool = False  # close once the reply being sent is out


@attrs.define(eq=False)
class FakeNNTPServer:
    """A scripted NNTP server on trio memory streams: a FAKE, for faults INN2 will not make.

    `replies` maps a command line (or its verb) to the bytes to answer; a
    callable may also stall (`stall`) or return None to drop the connection.
    `faults` gives the connections, in the order they are opened, a fault
    each (see `Fault`); the ones after the list have none.

    GROUP is answered from `groups` (name -> (low, high)), OVER and XOVER
    from `overview` (article number -> line; 423 when none is in the range).

    Compressed overview (INN2 offers neither): with `gzip_overview`,
    XFEATURE COMPRESS GZIP is answered 290 and the OVER/XOVER data after it
    is what that function makes of the lines; with `xzver_overview`, XZVER
    is answered with what that one makes. `garble` maps a command line to how
    its compressed data breaks ("junk": from the start; "half", GZIP only:
    half the lines, then a wrong checksum); plain replies are never garbled.
    """

    greeting: bytes = b"200 fake server ready\r\n"
    capabilities: list[str] = attrs.field(factory=lambda: ["VERSION 2", "READER", "OVER"])
    replies: dict[str, Scripted] = attrs.field(factory=dict)
    groups: dict[str, tuple[int, int]] = attrs.field(factory=dict)
    overview: dict[int, bytes] = attrs.field(factory=dict)
    faults: list[Fault] = attrs.field(factory=list)
    received: list[str] = attrs.field(factory=list)
    connections: int = 0
    gzip_overview: OverviewEncoder | None = None
    xzver_overview: OverviewEncoder | None = None
    extensions: list[str] = attrs.field(factory=list)  # LIST EXTENSIONS; empty: 500
    garble: dict[str, str] = attrs.field(factory=dict)
    _nursery: trio.Nursery = attrs.field(init=False)

    def run_in(self, nursery: trio.Nursery) -> FakeNNTPServer:
        """Serves the connections opened from now on as tasks of `nursery`.

        Returns:
            The fake itself.
        """
        self._nursery = nursery
        return self

    async def open_stream(self) -> trio.abc.Stream:
        """A new connection (a `StreamFactory` for `connect`); run_in must come first.

        Returns:
            The client's end; the fake serves the other.
        """
        client_end, server_end = trio.testing.memory_stream_pair()
        fault = self.faults[self.connections] if self.connections < len(self.faults) else "ok"
        self.connections += 1
        self._nursery.start_soon(self.serve, server_end, fault)
        return client_end

    def for_slot(self, _slot: int) -> StreamFactory:
        """The prefetcher's opener (one StreamFactory per connection slot): all alike here."""
        return self.open_stream

    async def serve(self, stream: trio.abc.Stream, fault: Fault = "ok") -> None:
        """Answers one connection until the client hangs up (a trio.serve_tcp handler too)."""
        # The client may close while replies it will never read are being sent.
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async with stream:
                await self._converse(stream, _Session(fault))

    async def _converse(self, stream: trio.abc.Stream, session: _Session) -> None:
        if session.fault == "502":
            await stream.send_all(b"502 too many connections\r\n")
            return
        await stream.send_all(self.greeting)
        if not self.greeting.startswith(b"20"):
            return
        buffer = b""
        while data := await stream.receive_some(65536):
            buffer += data
            while b"\r\n" in buffer:
                line, buffer = buffer.split(b"\r\n", 1)
                reply = await self._answer(line.decode(), session)
                if reply is None:
                    return
                await stream.send_all(reply)
                if session.hang_up:
                    return

    async def _answer(self, line: str, session: _Session) -> Reply:
        self.received.append(line)
        verb = line.split(" ", 1)[0].upper()
        if (faulty := await self._fault(verb, line, session)) is not None:
            return faulty
        scripted = self.replies.get(line, self.replies.get(verb, b""))
        if callable(scripted):
            return await scripted(line)
        if scripted is None or scripted:
            return scripted
        return self._default(verb, line, session)

    async def _fault(self, verb: str, line: str, session: _Session) -> bytes | None:
        """The connection's fault's answer to this command; None: answer as usual."""
        if session.fault == "480" and verb == "GROUP":
            return b"480 authentication required\r\n"
        if session.fault == "stall" and verb == "OVER":
            await trio.sleep_forever()
        if session.fault == "drop" and verb == "OVER":
            session.hang_up = True
            lines = self._lines(line)
            return b"224 overview\r\n" + _stuffed(lines[: len(lines) // 2], dot=False)
        return None

    def _default(self, verb: str, line: str, session: _Session) -> bytes:
        if verb == "CAPABILITIES":
            return multiline("101 capabilities", [c.encode() for c in self.capabilities])
        if verb == "QUIT":
            return b"205 bye\r\n"
        if verb == "DATE":
            return b"111 20261130120000\r\n"
        if verb == "GROUP":
            name = line.split()[1]
            if name not in self.groups:
                return b"411 no such group\r\n"
            low, high = self.groups[name]
            return f"211 {high - low + 1} {low} {high} {name}\r\n".encode()
        if verb == "XFEATURE" and self.gzip_overview is not None:
            session.gzip = True
            return b"290 feature enabled\r\n"
        if line.upper() == "LIST EXTENSIONS" and self.extensions:
            return multiline(
                "202 extensions supported", [f" {x}".encode() for x in self.extensions]
            )
        if verb in ("OVER", "XOVER") or (verb == "XZVER" and self.xzver_overview is not None):
            return self._overview_reply(verb, line, session)
        return b"500 unknown command\r\n"

    def _lines(self, line: str) -> list[bytes]:
        """The overview lines of the range of `line` ("OVER first-last")."""
        first, _, last = line.split()[1].partition("-")
        return [self.overview[n] for n in range(int(first), int(last) + 1) if n in self.overview]

    def _overview_reply(self, verb: str, line: str, session: _Session) -> bytes:
        lines = self._lines(line)
        if not lines:
            return b"423 no articles\r\n"
        if verb == "XZVER":
            assert self.xzver_overview is not None
            data = self.xzver_overview(lines)
        elif session.gzip:
            assert self.gzip_overview is not None
            data = self.gzip_overview(lines)
        else:
            return multiline("224 overview", lines)
        how = self.garble.get(line)
        if how == "junk":
            data = _stuffed([b"=ybegin", b"garbage", b"=yend"], dot=True)
            data = data if verb == "XZVER" else b"\x78\x9c" + b"\xff" * 40 + data
        elif how == "half":  # half the lines, then a wrong zlib checksum
            block = zlib.compress(_stuffed(lines[: len(lines) // 2], dot=False))
            data = block[:-1] + bytes([block[-1] ^ 0xFF]) + b".\r\n"
        marker = " [COMPRESS=GZIP]" if session.gzip else ""
        return f"224 overview follows{marker}\r\n".encode() + data
