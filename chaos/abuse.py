"""Bad input for scripts/chaos: requests the coordinator must refuse with a 4xx, never a 5xx.

Each case is one request a broken or hostile node could send: a bad or
unknown token, a gzip bomb, truncated gzip, unknown or chained encodings,
a body over the cap, batches with NUL bytes, invalid UTF-8 (what a lone
surrogate becomes on the wire), negative or overflowing article numbers,
a 1 MB name, control bodies that are not `{"epoch": N}`. They are sent with
a token of a node that holds no range, so a batch that passes every check
is still refused by the fence (409) and nothing is stored.

`bad_requests` builds the cases; `send_bad_requests` sends them.

Abuse of the HTTP side (issue 29), sent as raw bytes from an address of its
own: a 10 MB query string, 10,000 parameters, 1 GB bodies announced
(`abuse_requests`), and guessed API keys until the throttle answers 429
(`brute_force_request`); `send_raw` sends one.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import zlib
from array import array
from collections import Counter
from collections.abc import Mapping
from typing import Any

import attrs
import httpx
import msgpack

from usenet_indexer.core.batch import Batch, FileChunk, ReleaseChunk
from usenet_indexer.wire.batchwire import compress_body, encode_batch
from usenet_indexer.wire.packed import pack_batch

# A well-formed token that no node has (43 characters, like a real one).
UNKNOWN_TOKEN = "A" * 43
# Stands for three bytes of invalid UTF-8 in a packed document, then replaced.
_PLACEHOLDER = "\u00a7\u00a7"  # two characters, four bytes in UTF-8
_LONE_SURROGATE = b"\xed\xa0\x80\x41"  # U+D800 as CESU bytes, then "A": four bytes
_GZIP = {"Content-Encoding": "gzip"}


@attrs.frozen
class BadRequest:
    """One request to send and what it is."""

    name: str
    method: str
    path: str
    body: bytes = b""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    token: str | None = None  # None: the abuser's valid token


def gzip_bomb(inflated_bytes: int) -> bytes:
    """One gzip member that inflates to `inflated_bytes` zeros, about 1000 times smaller.

    A full flush ends each compressed MiB on a byte boundary with no reference
    to what came before, so the same piece repeated is valid deflate data.
    The CRC in the trailer is not computed (a capped inflate stops long before it).

    Args:
        inflated_bytes: what the body inflates to, in whole MiB (rounded down).

    Returns:
        The gzip member.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = compressor.compress(bytes(1 << 20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    mebibytes = max(1, inflated_bytes >> 20)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    trailer = struct.pack("<II", 0, (mebibytes << 20) & 0xFFFFFFFF)
    return header + piece * mebibytes + end + trailer


def _batch(first: int, group: str, poster: str = "someone <a@b.c>", name: str = "a.rar") -> Batch:
    file = FileChunk(
        key=b"f" * 16,
        name=name,
        subject=f'"{name}" yEnc (1/2)',
        index=None,
        total_segments=2,
        posted=1_700_000_000,
        numbers=array("I", [1]),
        message_ids="abc@example.invalid",
        sizes=array("I", [100]),
    )
    release = ReleaseChunk(
        key=b"r" * 16,
        head_name=None,
        poster=poster,
        groups=(group,),
        files_announced=None,
        files=(file,),
    )
    return Batch(
        group=group,
        first=first,
        next=first + 10,
        releases=(release,),
        rule_counts=(),
        probe_candidates=(),
        lines=1,
        skipped=(),
    )


def _document(range_id: int, first: int, group: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    packed = encode_batch(pack_batch(_batch(first, group)), range_id=range_id, epoch=1)
    document: dict[str, Any] = msgpack.unpackb(packed, raw=False)
    document.update(changes)
    return document


def _packed(document: Mapping[str, Any]) -> bytes:
    return msgpack.packb(document, use_bin_type=True)


def bad_requests(
    range_id: int, first: int, group: str, *, bomb_bytes: int, max_body_bytes: int
) -> list[BadRequest]:
    """Every bad request of a round, aimed at one range.

    Args:
        range_id: a range that exists (the abuser does not hold it).
        first: its first article.
        group: its group.
        bomb_bytes: what the gzip bomb inflates to.
        max_body_bytes: the coordinator's body cap (one case goes over it).

    Returns:
        The requests.
    """
    batches = f"ranges/{range_id}/batches"
    good = encode_batch(pack_batch(_batch(first, group)), range_id=range_id, epoch=1)
    surrogate = _packed(_document(range_id, first, group, {"group": _PLACEHOLDER})).replace(
        _PLACEHOLDER.encode(), _LONE_SURROGATE
    )
    huge_name = encode_batch(
        pack_batch(_batch(first, group, name="x" * 1_000_000 + ".rar")), range_id=range_id, epoch=1
    )
    cases = [
        BadRequest("no token", "POST", "lease", token=""),
        BadRequest("malformed token", "POST", "lease", token="not a token!"),
        BadRequest("unknown token", "POST", "lease", token=UNKNOWN_TOKEN),
        BadRequest(
            "unknown token batch", "POST", batches, compress_body(good), _GZIP, UNKNOWN_TOKEN
        ),
        BadRequest("gzip bomb", "POST", batches, gzip_bomb(bomb_bytes), _GZIP),
        BadRequest("truncated gzip", "POST", batches, compress_body(good)[:-20], _GZIP),
        BadRequest("corrupt gzip", "POST", batches, b"\x1f\x8b not gzip at all", _GZIP),
        BadRequest("unknown encoding", "POST", batches, good, {"Content-Encoding": "br"}),
        BadRequest(
            "chained encodings",
            "POST",
            batches,
            compress_body(compress_body(good)),
            {"Content-Encoding": "gzip, gzip"},
        ),
        BadRequest("over the body cap", "POST", batches, bytes(max_body_bytes + 1), _GZIP),
        BadRequest("not msgpack", "POST", batches, b"\xc1\xc1\xc1"),
        BadRequest(
            "NUL bytes",
            "POST",
            batches,
            _packed(_document(range_id, first, group, {"group": "a\0b"})),
        ),
        BadRequest("lone surrogate", "POST", batches, surrogate),
        BadRequest(
            "negative article",
            "POST",
            batches,
            _packed(_document(range_id, first, group, {"first": -5})),
        ),
        BadRequest(
            "overflowing article",
            "POST",
            batches,
            _packed(_document(range_id, first, group, {"next": 2**64 - 1})),
        ),
        BadRequest("1 MB name", "POST", batches, compress_body(huge_name), _GZIP),
        BadRequest("a batch of a range not held", "POST", batches, compress_body(good), _GZIP),
        BadRequest("control body not JSON", "POST", f"ranges/{range_id}/heartbeat", b"{{"),
        BadRequest(
            "control epoch not a number", "POST", f"ranges/{range_id}/release", b'{"epoch": true}'
        ),
        BadRequest("stream of a range not held", "GET", f"ranges/{range_id}/stream"),
        BadRequest("no such range", "POST", f"ranges/{2**63}/finish", b'{"epoch": 1}'),
    ]
    return cases


async def send_bad_requests(
    client: httpx.AsyncClient, token: str, requests: list[BadRequest]
) -> Counter[int]:
    """Send each request; count the answers by status (a network error counts as 0).

    Args:
        client: a client with the node API's base URL.
        token: the abuser's valid token (cases may use another).
        requests: from `bad_requests`.

    Returns:
        Statuses and how often each came back.
    """
    statuses: Counter[int] = Counter()
    for request in requests:
        used = token if request.token is None else request.token
        headers = dict(request.headers)
        if used:
            headers["Authorization"] = f"Bearer {used}"
        try:
            response = await client.request(
                request.method, request.path, content=request.body, headers=headers
            )
        except httpx.TransportError:
            statuses[0] += 1
            continue
        statuses[response.status_code] += 1
    return statuses


# --- abuse of the HTTP side: sent as raw bytes, from an address of its own -----------------

# The abuse comes from another loopback address than the edges' (127.0.0.1):
# the coordinator counts failed keys per address, and would slow the edges.
ABUSER_ADDRESS = "127.0.0.2"
# Far more than the coordinator's throttle lets through (core/throttle.py's
# block_after, per coordinator process).
BRUTE_FORCE_TRIES = 100


@attrs.frozen
class RawRequest:
    """One request as bytes: what httpx would refuse to send (a 10 MB URL)."""

    name: str
    head: bytes
    body: bytes = b""


def abuse_requests(range_id: int) -> list[RawRequest]:
    """The size abuses of issue 29: each must be a 4xx or a closed connection.

    Args:
        range_id: a range that exists.

    Returns:
        The requests.
    """
    params = "&".join(f"p{n}={n}" for n in range(10_000)).encode()
    gigabyte = b"Content-Length: 1073741824\r\n\r\n"
    return [
        RawRequest(
            "10 MB query string",
            b"GET /api?t=search&apikey=nope&q="
            + b"a" * (10 << 20)
            + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        ),
        RawRequest(
            "10,000 parameters",
            b"GET /api?t=search&apikey=nope&" + params + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        ),
        RawRequest(
            "1 GB batch announced",
            f"POST /api/v1/node/ranges/{range_id}/batches HTTP/1.1\r\nHost: x\r\n".encode()
            + b"Authorization: Bearer nope\r\nContent-Encoding: gzip\r\n"
            + gigabyte,
            bytes(1 << 20),
        ),
        RawRequest(
            "1 GB body to the newznab API",
            b"POST /api?t=search&apikey=nope HTTP/1.1\r\nHost: x\r\n" + gigabyte,
            bytes(1 << 20),
        ),
    ]


def brute_force_request(attempt: int) -> RawRequest:
    """A guess at an API key: a new wrong key each time."""
    return RawRequest(
        f"wrong key {attempt}",
        f"GET /api?t=search&q=x&apikey=guess{attempt:06} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
    )


def send_raw(host: str, port: int, request: RawRequest) -> int:
    """Send one request from ABUSER_ADDRESS; the answer's status (0: closed without one).

    Sync (sockets with a timeout), for a worker thread.
    """
    with socket.create_connection(
        (host, port), timeout=60, source_address=(ABUSER_ADDRESS, 0)
    ) as conn:
        # Refused while still sending: as good as an answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.sendall(request.head + request.body)
        answer = b""
        with contextlib.suppress(ConnectionResetError):
            while len(answer) < 12 and (data := conn.recv(65536)):
                answer += data
    if not answer.startswith(b"HTTP/1.1 ") or not answer[9:12].isdigit():
        return 0
    return int(answer[9:12])
