"""An NNTP fault proxy for scripts/chaos: the prefetcher talks to INN2 through it.

Theory of operation
-------------------
Bytes go from the prefetcher to INN2 and back through this proxy, which
follows the conversation with a small pure tracker: the client's command
lines (one verb each, queued in order: replies match commands in order,
pipelined or not) and the server's replies (a status line, then, for the
commands and codes that have one, data lines up to the "." line). A seeded
`FaultSchedule` numbers the events the faults hang on and picks some:

- nntp_502: the n-th new connection is answered `502 too many connections`
  and closed, INN2 never sees it (the prefetcher lowers its pool by one);
- nntp_480: the first GROUP of the n-th connection to send one is answered
  `480 authentication required` by the proxy and not forwarded (the proxy
  swallows that command line and nothing else; the client gives the chunk
  back, reconnects and retries);
- nntp_drop_mid_over: the n-th OVER reply is cut: its status line and part
  of its data (a random number of bytes, maybe mid-line) are forwarded,
  then both connections are closed;
- nntp_stall: the n-th OVER reply's status line is forwarded, then nothing
  more, past the prefetcher's NNTP timeout (it gives up and reconnects).

The proxy takes COMPRESS out of CAPABILITIES: with RFC 8054 compression on,
it could neither read the commands nor answer one itself. So the chaos run
exercises the plain path; the compressed one has tests of its own.
"""

from __future__ import annotations

import logging
import random
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from functools import partial

import attrs
import trio

logger = logging.getLogger(__name__)

DROP = "nntp_drop_mid_over"
REFUSE = "nntp_502"
AUTH = "nntp_480"
STALL = "nntp_stall"
NNTP_KINDS = (DROP, REFUSE, AUTH, STALL)
# What each fault hangs on: the counter of events it numbers.
_COUNTER = {DROP: "over", STALL: "over", REFUSE: "connection", AUTH: "group"}
# Replies with data lines after the status line, by command (RFC 3977, 2980, XZVER).
_MULTILINE: Mapping[str, frozenset[int]] = {
    "CAPABILITIES": frozenset({101}),
    "LIST": frozenset({202, 215}),
    "OVER": frozenset({224}),
    "XOVER": frozenset({224}),
    "XZVER": frozenset({224}),
    "HDR": frozenset({225}),
    "XHDR": frozenset({221}),
    "ARTICLE": frozenset({220}),
    "HEAD": frozenset({221}),
    "BODY": frozenset({222}),
    "LISTGROUP": frozenset({211}),
    "NEWNEWS": frozenset({230}),
    "NEWGROUPS": frozenset({231}),
    "HELP": frozenset({100}),
}
_OVER = frozenset({"OVER", "XOVER", "XZVER"})
READ_BYTES = 64 * 1024
REFUSAL = b"502 too many connections\r\n"
AUTH_REQUIRED = b"480 authentication required\r\n"


# --- the pure part: the schedule and the tracker ---------------------------------------------


@attrs.define(eq=False)
class FaultSchedule:
    """Which numbered events get which fault; counts what was injected.

    Attributes:
        at: fault kind -> the numbers (1-based) of the events that get it.
        seen: events seen so far, by counter ("connection", "group", "over").
        injected: faults injected so far, by kind.
        rng: picks where a dropped reply is cut.
        armed: whether events are counted and faults injected (off: a clean path).
    """

    at: dict[str, frozenset[int]]
    rng: random.Random
    armed: bool = True
    seen: Counter[str] = attrs.field(factory=Counter)
    injected: Counter[str] = attrs.field(factory=Counter)

    @classmethod
    def seeded(cls, seed: int, counts: Mapping[str, int], spacing: int = 3) -> FaultSchedule:
        """A schedule with `counts[kind]` faults of each kind among the first events.

        OVER faults are spread at random over the first `spacing` x (their
        number) + 1 OVER replies, never two on one reply. Connections and
        first GROUPs are few (a prefetcher opens its pool at once, and
        reconnects only after a failure): their faults take the events
        right after the first, one each, so that they all happen. The first
        event of each counter is left alone (a run starts cleanly).

        Args:
            seed: the seed (the same seed, the same schedule).
            counts: faults wanted, by kind (kinds of NNTP_KINDS).
            spacing: OVER replies per fault in the window they are drawn from.
        """
        rng = random.Random(seed)
        at: dict[str, frozenset[int]] = {}
        for counter in sorted(set(_COUNTER.values())):
            kinds = [
                k for k in NNTP_KINDS if _COUNTER[k] == counter for _ in range(counts.get(k, 0))
            ]
            if counter == "over":
                numbers = rng.sample(range(2, 2 + spacing * len(kinds)), len(kinds))
            else:
                numbers = list(range(2, 2 + len(kinds)))
            for kind in set(kinds):
                picked = [n for k, n in zip(kinds, numbers, strict=True) if k == kind]
                at[kind] = frozenset(picked)
        return cls(at, rng)

    def _next(self, counter: str, kinds: tuple[str, ...]) -> str | None:
        if not self.armed:
            return None
        self.seen[counter] += 1
        number = self.seen[counter]
        for kind in kinds:
            if number in self.at.get(kind, ()):
                self.injected[kind] += 1
                return kind
        return None

    def on_connection(self) -> bool:
        """A new connection: whether it is refused with 502."""
        return self._next("connection", (REFUSE,)) is not None

    def on_first_group(self) -> bool:
        """A connection's first GROUP: whether the proxy answers it 480."""
        return self._next("group", (AUTH,)) is not None

    def on_over_reply(self) -> str | None:
        """An OVER reply begins: DROP, STALL or None."""
        return self._next("over", (DROP, STALL))

    def cut(self, size: int) -> int:
        """Where to cut `size` bytes of a dropped reply's data: 0 .. size - 1."""
        return self.rng.randrange(size) if size > 0 else 0


@attrs.frozen
class Status:
    """A reply's status line (raw, with its line end)."""

    verb: str
    code: int
    raw: bytes
    multiline: bool


@attrs.frozen
class Data:
    """Whole data lines of a multi-line reply, as on the wire (dot-stuffed, CRLF)."""

    verb: str
    raw: bytes


@attrs.frozen
class End:
    """The "." line that ends a multi-line reply."""

    verb: str
    raw: bytes


Event = Status | Data | End


def verb_of(line: bytes) -> str:
    """The command word of a client's command line, upper case ("" for a blank line)."""
    words = line.split(None, 1)
    return words[0].decode("ascii", "replace").upper() if words else ""


@attrs.define(eq=False)
class ReplyTracker:
    """The server's side of one connection: which reply is which (pure).

    `sent` queues each command the client sent on; `feed` takes the
    server's bytes and returns them cut into events, each holding its raw
    bytes, so that forwarding them all forwards the stream unchanged. What
    is not a whole line yet stays in the buffer.
    """

    pending: deque[str] = attrs.field(factory=lambda: deque(["GREETING"]))
    _buffer: bytearray = attrs.field(factory=bytearray)
    _data_verb: str | None = None

    def sent(self, verb: str) -> None:
        """The client sent a command with this verb; its reply comes after the earlier ones."""
        self.pending.append(verb)

    def feed(self, data: bytes) -> list[Event]:
        """The server's next bytes, as events (the incomplete rest is kept)."""
        self._buffer += data
        events: list[Event] = []
        while self._buffer:
            event = self._status() if self._data_verb is None else self._data()
            if event is None:
                break
            events.append(event)
        return events

    def _status(self) -> Status | None:
        end = self._buffer.find(b"\n")
        if end < 0:
            return None
        raw = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        verb = self.pending.popleft() if self.pending else "?"
        code = int(raw[:3]) if raw[:3].isdigit() else 0
        multiline = code in _MULTILINE.get(verb, frozenset())
        if multiline:
            self._data_verb = verb
        return Status(verb, code, raw, multiline)

    def _data(self) -> Data | End | None:
        verb = self._data_verb
        assert verb is not None
        buffer = self._buffer
        if buffer.startswith(b".\r\n"):
            raw = bytes(buffer[:3])
            del buffer[:3]
            self._data_verb = None
            return End(verb, raw)
        # Up to the terminator if it is in, else every whole line: a data line
        # of just "." is dot-stuffed, so "\n.\r\n" is the terminator.
        end = buffer.find(b"\n.\r\n")
        end = end + 1 if end >= 0 else buffer.rfind(b"\n") + 1
        if end <= 0:
            return None
        raw = bytes(buffer[:end])
        del buffer[:end]
        return Data(verb, raw)


def hide_compression(raw: bytes) -> bytes:
    """CAPABILITIES data lines without the COMPRESS one."""
    lines = raw.splitlines(keepends=True)
    return b"".join(line for line in lines if not line.upper().startswith(b"COMPRESS"))


# --- the trio shell ------------------------------------------------------------------------


async def serve_nntp_proxy(
    upstream: tuple[str, int],
    schedule: FaultSchedule,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Proxy NNTP connections on a free loopback port to `upstream` until cancelled.

    Args:
        upstream: INN2's reader (host, port).
        schedule: decides the faults and counts them.
        task_status: gets the port the proxy listens on.
    """
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port: int = listeners[0].socket.getsockname()[1]
    handler = partial(_splice, upstream, schedule)
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(trio.serve_listeners, handler, listeners))
        task_status.started(port)


@attrs.define(eq=False)
class _Splice:
    """One proxied connection."""

    client: trio.SocketStream
    server: trio.SocketStream
    schedule: FaultSchedule
    tracker: ReplyTracker = attrs.field(factory=ReplyTracker)
    to_client: trio.Lock = attrs.field(factory=trio.Lock)
    grouped: bool = False
    dropping: bool = False

    async def send_to_client(self, data: bytes) -> None:
        async with self.to_client:
            await self.client.send_all(data)

    async def commands(self) -> None:
        buffer = b""
        while data := await _receive(self.client):
            *lines, buffer = (buffer + data).split(b"\n")
            forward: list[bytes] = []
            for line in lines:
                raw = line + b"\n"
                verb = verb_of(raw)
                if verb == "GROUP" and not self.grouped:
                    self.grouped = True
                    if not self.tracker.pending and self.schedule.on_first_group():
                        logger.info("chaos nntp: answered %r with 480", raw.strip())
                        await self.send_to_client(AUTH_REQUIRED)
                        continue
                self.tracker.sent(verb)
                forward.append(raw)
            if forward:
                await self.server.send_all(b"".join(forward))

    async def replies(self) -> None:
        while data := await _receive(self.server):
            out = bytearray()
            for event in self.tracker.feed(data):
                if isinstance(event, Status) and event.multiline and event.verb in _OVER:
                    fault = self.schedule.on_over_reply()
                    if fault == STALL:
                        await self.send_to_client(bytes(out) + event.raw)
                        logger.info("chaos nntp: stalled an OVER reply")
                        await trio.sleep_forever()
                    self.dropping = fault == DROP
                elif self.dropping:
                    # The reply's status line is out: a part of its data, then the end.
                    if isinstance(event, Data):
                        out += event.raw[: self.schedule.cut(len(event.raw))]
                    await self.send_to_client(bytes(out))
                    logger.info("chaos nntp: closed the connection mid-OVER")
                    break
                elif isinstance(event, Data) and event.verb == "CAPABILITIES":
                    out += hide_compression(event.raw)
                    continue
                out += event.raw
            else:
                await self.send_to_client(bytes(out))
                continue
            break


async def _receive(stream: trio.SocketStream) -> bytes:
    try:
        return await stream.receive_some(READ_BYTES)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b""


async def _splice(
    upstream: tuple[str, int], schedule: FaultSchedule, client: trio.SocketStream
) -> None:
    try:
        if schedule.on_connection():
            logger.info("chaos nntp: refused a connection with 502")
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await client.send_all(REFUSAL)
            return
        try:
            server = await trio.open_tcp_stream(*upstream)
        except OSError:
            return
        try:
            async with trio.open_nursery() as nursery:
                splice = _Splice(client, server, schedule)
                nursery.start_soon(_quietly, splice.commands, nursery.cancel_scope)
                nursery.start_soon(_quietly, splice.replies, nursery.cancel_scope)
        finally:
            with trio.CancelScope(shield=True):
                await server.aclose()
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()


async def _quietly(work: Callable[[], Awaitable[None]], scope: trio.CancelScope) -> None:
    # A peer that goes away mid-send ends the connection, not the proxy.
    try:
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await work()
    finally:
        scope.cancel()
