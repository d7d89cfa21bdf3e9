"""Abuse of the coordinator's HTTP side: huge query strings, huge bodies, too many
parameters. Each is a 4xx (or the connection closed before any answer), never a 5xx,
and the coordinator goes on answering (issue 29)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from functools import partial

import httpx
import pytest
import trio

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores

pytestmark = pytest.mark.trio


@pytest.fixture
async def listening(settings: Settings, stores: Stores) -> AsyncIterator[tuple[str, int, str]]:
    key = stores.users.create("sonarr")
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        yield host, port, key
        nursery.cancel_scope.cancel()


def _raw(host: str, port: int, head: bytes, body: bytes = b"") -> bytes:
    """Send a request as bytes; what came back (b"" when the server closed at once)."""
    with socket.create_connection((host, port), timeout=30) as conn:
        # Refused while still sending: as good as an answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.sendall(head + body)
        chunks = []
        try:
            while data := conn.recv(65536):
                chunks.append(data)
        except ConnectionResetError:
            pass
    return b"".join(chunks)


def _status(answer: bytes) -> int | None:
    if not answer.startswith(b"HTTP/1.1 "):
        return None
    return int(answer[9:12])


async def test_a_10_mb_query_string_is_refused_not_a_5xx(listening: tuple[str, int, str]) -> None:
    host, port, key = listening
    head = b"GET /api?t=search&apikey=" + key.encode() + b"&q=" + b"a" * (10 << 20)
    head += b" HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = await trio.to_thread.run_sync(_raw, host, port, head)
    status = _status(answer)
    assert status is None or 400 <= status < 500, answer[:200]
    await _still_answers(host, port)


async def test_a_1_gb_body_announced_is_413_at_once(listening: tuple[str, int, str]) -> None:
    host, port, _ = listening
    head = (
        b"POST /api/v1/node/lease HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n"
        b"Content-Length: 1073741824\r\n\r\n"
    )
    # A megabyte of it, not a gigabyte: the answer comes before the body.
    answer = await trio.to_thread.run_sync(_raw, host, port, head, bytes(1 << 20))
    status = _status(answer)
    assert status is not None, answer[:200]
    assert 400 <= status < 500, answer[:200]
    await _still_answers(host, port)


async def test_10000_parameters_are_refused_not_a_5xx(listening: tuple[str, int, str]) -> None:
    # 10,000 parameters do not fit in a request head (16 KiB: server.MAX_HEAD_BYTES).
    host, port, key = listening
    params = "&".join(f"p{n}={n}" for n in range(10_000)).encode()
    head = b"GET /api?t=search&apikey=" + key.encode() + b"&" + params
    head += b" HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = await trio.to_thread.run_sync(_raw, host, port, head)
    status = _status(answer)
    assert status is None or 400 <= status < 500, answer[:200]
    await _still_answers(host, port)


async def _still_answers(host: str, port: int) -> None:
    async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as client:
        caps = await client.get("/api", params={"t": "caps"})
    assert caps.status_code == 200
