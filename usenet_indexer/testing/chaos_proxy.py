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
"""

from __future__ import annotations

import logging
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


@attrs.define(eq=False)
class _Connection:
    """One proxied connection: whether the answer now coming is to be dropped."""

    dropper: ReplyDropper
    dropping: bool = False


async def serve_proxy(
    upstream: tuple[str, int],
    dropper: ReplyDropper,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Proxy connections on a free loopback port to `upstream` until cancelled.

    Args:
        upstream: the coordinator's (host, port).
        dropper: picks the batch replies to lose, and counts them.
        task_status: gets the port the proxy listens on.
    """
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port: int = listeners[0].socket.getsockname()[1]
    handler = partial(_proxy_one, upstream, dropper)
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(trio.serve_listeners, handler, listeners))
        task_status.started(port)


async def _proxy_one(
    upstream: tuple[str, int], dropper: ReplyDropper, client: trio.SocketStream
) -> None:
    try:
        server = await trio.open_tcp_stream(*upstream)
    except OSError:
        # The coordinator is down: the edge sees its connection closed and retries.
        await client.aclose()
        return
    connection = _Connection(dropper)
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
        try:
            data = await client.receive_some(READ_BYTES)
        except trio.BrokenResourceError:
            data = b""
        if not data:
            scope.cancel()
            return
        parser = _watch(parser, data, connection)
        try:
            await server.send_all(data)
        except trio.BrokenResourceError:
            scope.cancel()
            return


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
        if isinstance(event, h11.Request) and connection.dropper.picks(event.method, event.target):
            connection.dropping = True
        if isinstance(event, h11.ConnectionClosed):
            return parser


async def _answers(
    server: trio.SocketStream,
    client: trio.SocketStream,
    connection: _Connection,
    scope: trio.CancelScope,
) -> None:
    while True:
        try:
            data = await server.receive_some(READ_BYTES)
        except trio.BrokenResourceError:
            data = b""
        if not data:
            scope.cancel()
            return
        if connection.dropping:
            # The batch is stored; its answer goes nowhere, and the edge's
            # connection closes without one.
            connection.dropper.dropped += 1
            logger.info("chaos proxy: dropped the reply of batch post %d", connection.dropper.posts)
            scope.cancel()
            return
        try:
            await client.send_all(data)
        except trio.BrokenResourceError:
            scope.cancel()
            return
