"""A TCP proxy for scripts/chaos that loses the reply of a stored batch.

Theory of operation
-------------------
Edges talk to the coordinator through this proxy. Bytes pass through
unchanged in both directions; the requests are also fed to an h11 parser
(server role), only to see each request's method and path. When a `POST
.../batches` is one that `ReplyDropper` picks, the request goes on to the
coordinator whole, and the first bytes of the answer (the batch is
committed by then: the coordinator answers after its transaction) end the
connection instead of reaching the edge: both sides are closed. The edge
sees a connection closed without an answer, a network error, and retries
the same batch, which the coordinator must answer "already stored".

HTTP/1.1 without pipelining (httpx never pipelines) makes this exact: a
client sends its next request on a connection only after reading the whole
answer to the one before, so whatever the coordinator sends after a picked
request began is that request's answer.

Named points (`Ambush`): the run may arm the proxy for one batch post of
one edge, told apart by its bearer token. At `BEFORE_POST` the request is
held (none of its bytes after the head's first read go on; the coordinator
sees at most a partial request, never a whole one) until the run has
killed the edge, then the connection is closed. At `AFTER_COMMIT` the
request goes on whole; the first bytes of the coordinator's answer (its
status line) are kept back until the run has killed the edge, then the
answer goes nowhere.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from functools import partial

import attrs
import h11
import trio

logger = logging.getLogger(__name__)

# Reads from either side: large enough for a batch body in a few reads.
READ_BYTES = 64 * 1024
# Request heads of the node API are short; h11's default would also do.
MAX_HEAD_BYTES = 64 * 1024


@attrs.define(eq=False)
class ReplyDropper:
    """Which batch posts lose their reply: every `every`-th, at most `limit` of them.

    Attributes:
        every: drop the reply of batch post number every, 2 x every, ...
        limit: drop no more than this many.
        posts: batch posts seen so far.
        dropped: replies dropped so far.
    """

    every: int
    limit: int
    posts: int = 0
    dropped: int = 0
    # Tokens of edges whose batch reply was lost, until their next batch post
    # (the retry, which must be answered "already stored": no ambush takes it).
    awaiting_retry: set[str] = attrs.field(factory=set)

    def picks(self, method: bytes, target: bytes) -> bool:
        """Whether the reply of this request is to be lost; counts batch posts.

        Args:
            method: the request method.
            target: the request target (path).

        Returns:
            True for a batch post whose reply goes nowhere.
        """
        if method != b"POST" or not target.endswith(b"/batches"):
            return False
        self.posts += 1
        return self.posts % self.every == 0 and self.dropped < self.limit


BEFORE_POST = "before_post"
AFTER_COMMIT = "after_commit"
POINTS = (BEFORE_POST, AFTER_COMMIT)


def bearer(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The bearer token of a request's headers (h11's: lower-case names), if any."""
    for name, value in headers:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return value[7:].strip().decode("ascii", "replace")
    return None


def batch_range(method: bytes, target: bytes) -> int | None:
    """The range id of a batch post (`POST .../ranges/<id>/batches`), else None."""
    parts = target.split(b"?", 1)[0].rstrip(b"/").split(b"/")
    if method != b"POST" or len(parts) < 3 or parts[-1] != b"batches" or parts[-3] != b"ranges":
        return None
    return int(parts[-2]) if parts[-2].isdigit() else None


def answer_status(data: bytes) -> int | None:
    """The status code of an answer's first bytes (`HTTP/1.1 200 OK...`), if they hold it."""
    fields = data.split(b"\r\n", 1)[0].split(b" ")
    if len(fields) >= 2 and fields[0].startswith(b"HTTP/") and fields[1].isdigit():
        return int(fields[1])
    return None


@attrs.define(eq=False)
class Ambush:
    """One named point armed for the next batch post of one of some edges.

    The run arms it with the tokens of the edges it may catch (`arm`),
    waits for `caught`, kills the edge whose token `caught_token` is, then
    sets `released`; the proxy then closes the held connection. One catch
    per arming (see the module docstring).

    Attributes:
        tokens: the bearer tokens of the edges it may catch; empty when not armed.
        point: BEFORE_POST or AFTER_COMMIT.
        caught_token: the token of the caught batch post.
        range_id: the range of the caught batch post.
        status: at AFTER_COMMIT, the status of the coordinator's answer kept back.
        caught: set when the proxy holds the request (or the answer).
        released: set by the run once the edge is killed.
    """

    tokens: frozenset[str] = frozenset()
    point: str = BEFORE_POST
    caught_token: str | None = None
    range_id: int | None = None
    status: int | None = None
    caught: trio.Event = attrs.field(factory=trio.Event)
    released: trio.Event = attrs.field(factory=trio.Event)

    def arm(self, tokens: Iterable[str], point: str) -> None:
        if point not in POINTS:
            raise ValueError(f"unknown point {point!r}")
        self.tokens, self.point = frozenset(tokens), point
        self.caught_token = self.range_id = self.status = None
        self.caught, self.released = trio.Event(), trio.Event()

    def disarm(self) -> None:
        self.tokens = frozenset()

    def catches(self, method: bytes, target: bytes, headers: Sequence[tuple[bytes, bytes]]) -> bool:
        """Whether this request is a batch post of an armed edge; disarms when it is."""
        if not self.tokens:
            return False
        range_id = batch_range(method, target)
        token = bearer(headers)
        if range_id is None or token not in self.tokens:
            return False
        self.tokens, self.caught_token, self.range_id = frozenset(), token, range_id
        return True


@attrs.define(eq=False)
class _Connection:
    """One proxied connection: whether the answer now coming is to be dropped or held."""

    dropper: ReplyDropper
    ambush: Ambush | None = None
    dropping: bool = False
    # The point at which this connection's current request is held, if any.
    held: str | None = None
    # The bearer token of the request now on the connection.
    token: str | None = None


async def serve_proxy(
    upstream: tuple[str, int],
    dropper: ReplyDropper,
    ambush: Ambush | None = None,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Proxy connections on a free loopback port to `upstream` until cancelled.

    Args:
        upstream: the coordinator's (host, port).
        dropper: picks the batch replies to lose, and counts them.
        ambush: the named point armed by the run, if any.
        task_status: gets the port the proxy listens on.
    """
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port: int = listeners[0].socket.getsockname()[1]
    handler = partial(_proxy_one, upstream, dropper, ambush)
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(trio.serve_listeners, handler, listeners))
        task_status.started(port)


async def _proxy_one(
    upstream: tuple[str, int],
    dropper: ReplyDropper,
    ambush: Ambush | None,
    client: trio.SocketStream,
) -> None:
    try:
        server = await trio.open_tcp_stream(*upstream)
    except OSError:
        # The coordinator is down: the edge sees its connection closed and retries.
        await client.aclose()
        return
    connection = _Connection(dropper, ambush)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_requests, client, server, connection, nursery.cancel_scope)
            nursery.start_soon(_answers, server, client, connection, nursery.cancel_scope)
    finally:
        with trio.CancelScope(shield=True):
            await server.aclose()
            await client.aclose()


async def _requests(
    client: trio.SocketStream,
    server: trio.SocketStream,
    connection: _Connection,
    scope: trio.CancelScope,
) -> None:
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    while True:
        data = await _receive(client)
        if not data:
            scope.cancel()
            return
        parser = _watch(parser, data, connection)
        if connection.held == BEFORE_POST and connection.ambush is not None:
            # Nothing more of this request goes on: the edge is killed meanwhile.
            connection.ambush.caught.set()
            await connection.ambush.released.wait()
            logger.info("chaos proxy: held batch post dropped (edge killed before it)")
            scope.cancel()
            return
        if not await _send(server, data):
            scope.cancel()
            return


async def _receive(stream: trio.SocketStream) -> bytes:
    """The next bytes, or b"" when the peer is gone (closed or broken)."""
    try:
        return await stream.receive_some(READ_BYTES)
    except trio.BrokenResourceError:
        return b""


async def _send(stream: trio.SocketStream, data: bytes) -> bool:
    """Send all of `data`; False when the peer is gone."""
    try:
        await stream.send_all(data)
    except trio.BrokenResourceError:
        return False
    return True


def _watch(parser: h11.Connection, data: bytes, connection: _Connection) -> h11.Connection:
    """Feed request bytes to the parser; mark the connection when a picked request starts."""
    parser.receive_data(data)
    while True:
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError:
            # Not HTTP we understand: stop looking, keep forwarding.
            return h11.Connection(h11.SERVER)
        if event is h11.NEED_DATA or event is h11.PAUSED:
            if event is h11.PAUSED:
                # One request read whole: a fresh parser takes the next one.
                leftover, _closed = parser.trailing_data
                parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
                parser.receive_data(leftover)
                continue
            return parser
        if isinstance(event, h11.Request):
            _seen_request(connection, event)
        if isinstance(event, h11.ConnectionClosed):
            return parser


def _seen_request(connection: _Connection, event: h11.Request) -> None:
    """Whether the request now starting is held (an ambush) or loses its reply (the dropper)."""
    dropper, ambush = connection.dropper, connection.ambush
    token = bearer(event.headers)
    connection.token = token
    retry = batch_range(event.method, event.target) is not None and token in dropper.awaiting_retry
    if retry:
        dropper.awaiting_retry.discard(str(token))
    if (
        not retry
        and ambush is not None
        and ambush.catches(event.method, event.target, event.headers)
    ):
        connection.held = ambush.point
    elif dropper.picks(event.method, event.target):
        connection.dropping = True


async def _answers(
    server: trio.SocketStream,
    client: trio.SocketStream,
    connection: _Connection,
    scope: trio.CancelScope,
) -> None:
    while True:
        data = await _receive(server)
        if not data:
            scope.cancel()
            return
        if connection.held == AFTER_COMMIT and connection.ambush is not None:
            # The coordinator answered (it commits before it does): the edge
            # is killed before the answer reaches it, and the answer is lost.
            connection.ambush.status = answer_status(data)
            connection.ambush.caught.set()
            await connection.ambush.released.wait()
            logger.info("chaos proxy: answer %s kept from a killed edge", connection.ambush.status)
            scope.cancel()
            return
        if connection.dropping:
            # The batch is stored; its answer goes nowhere, and the edge's
            # connection closes without one.
            connection.dropper.dropped += 1
            if connection.token is not None:
                connection.dropper.awaiting_retry.add(connection.token)
            logger.info("chaos proxy: dropped the reply of batch post %d", connection.dropper.posts)
            scope.cancel()
            return
        if not await _send(client, data):
            scope.cancel()
            return
