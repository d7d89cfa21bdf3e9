"""The node API as an edge sees it: httpx, a bearer token, retries with backoff.

Theory of operation
-------------------
Every call goes through `_attempts`: a network error or a 5xx is tried again
after `RetryPolicy.next_delay(attempt)` (exponential, capped; 8 tries in
all by default), anything else is final. The answers map to errors once,
here::

    UidxError
    └── NodeApiError        a call failed for good (status, or network trouble)
        └── LeaseLostError  409: the range is no longer ours; store nothing more

A chunk of an S3 spool comes as a link (a presigned GET URL in the stream's
LINK frame): `chunk` fetches it with a second client that sends no token
(the URL carries its own signature; S3 refuses a request signed twice), with
the same retries, and a cap on its size.

Retrying a batch POST is safe: the coordinator answers a batch it stored
before (its reply lost) with "already stored", and refuses anything stale.
The token goes into the client's default headers and nowhere else; log
lines name the call and the status, never a header.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Final

import attrs
import httpx
import trio

from usenet_indexer.core.merge import KEYS
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.core.rules import Rule, rule_from_wire
from usenet_indexer.errors import RemoteProtocolError, UidxError

logger = logging.getLogger(__name__)

# Where the node API lives under the coordinator's URL (coordinator/http/node.py's PREFIX; not
# imported: an edge has no use for the server's modules).
NODE_API_PATH: Final = "/api/v1/node/"

# Connecting is quick or not at all; storing a batch took up to 16 s in the
# earlier system, so a reply may be long in coming; a stream sends a
# keepalive every few seconds, so a minute of silence means it is dead.
TIMEOUT: Final = httpx.Timeout(connect=10.0, read=120.0, write=120.0, pool=10.0)
STREAM_TIMEOUT: Final = httpx.Timeout(connect=10.0, read=60.0, write=60.0, pool=10.0)

# An error body goes into a log line and an exception: the start of it is enough.
MAX_ERROR_CHARS: Final = 300

# An S3 error document's code and message, looked for in its first bytes (the
# message comes before the resource and request ids that follow it).
S3_ERROR_CHARS: Final = 2000
_S3_CODE: Final = re.compile(r"<Error>\s*<Code>([^<]{1,100})</Code>")
_S3_MESSAGE: Final = re.compile(r"<Message>([^<]{1,1000})</Message>")

BATCH_HEADERS: Final = {"Content-Type": "application/x-msgpack"}
BUILD_HEADERS: Final = {"Content-Type": "application/msgpack"}
# The build job's id beside its body (coordinator/http/node.py's BUILD_JOB_HEADER);
# an older coordinator does not send it.
BUILD_JOB_HEADER: Final = "x-uidx-build-job"


@attrs.frozen
class BuildOffer:
    """A catalog build to do: its body as sent (wire/buildjob.py's `decode_job` reads
    it) and its job's id when the coordinator named it apart (None: an older one), so
    that the job can be given back before the body is decoded."""

    body: bytes
    job_id: int | None = None


class NodeApiError(UidxError):
    """A node API call failed for good.

    Attributes:
        action: the call ("lease", "batches", ...).
        status: the HTTP status, or None after network trouble.
    """

    def __init__(self, action: str, status: int | None, message: str) -> None:
        super().__init__(f"{action}: {message}")
        self.action = action
        self.status = status


@attrs.frozen
class UnreadableChunk:
    """A chunk of the range the edge could not read: its articles, and why."""

    first: int
    last: int
    problem: str


class LeaseLostError(NodeApiError):
    """409: another node holds the range now, or our epoch is stale."""


def _non_negative_int(document: Mapping[str, Any], key: str) -> int:
    value = document.get(key)
    # type(), not isinstance: true is not a number.
    if type(value) is not int or value < 0:
        raise RemoteProtocolError(f"lease: {key!r} is not an article number or id: {value!r}")
    return value


def _ttl(value: object) -> float | None:
    # Absent (an older coordinator): None. True is no number of seconds.
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf:
        return float(value)
    raise RemoteProtocolError(f"lease: 'ttl_seconds' is not a number of seconds: {value!r}")


@attrs.frozen
class EdgeLease:
    """A range leased to this node, from its resume point.

    Attributes:
        range_id: the range.
        group: its group.
        first: its first article.
        last: its last article.
        next: the resume point (the first article not stored yet).
        epoch: the fencing token every later call names.
        rules: the rules to index it with.
        ttl_seconds: the coordinator's lease_ttl_seconds (None from a coordinator
            that does not say it): a lease without a batch or heartbeat for this
            long passes to the next node.
    """

    range_id: int
    group: str
    first: int
    last: int
    next: int
    epoch: int
    rules: tuple[Rule, ...]
    ttl_seconds: float | None = None

    @classmethod
    def from_json(cls, document: object) -> EdgeLease:
        """A lease from the coordinator's 200 answer.

        Raises:
            RemoteProtocolError: the document is not a lease.
        """
        if not isinstance(document, dict):
            raise RemoteProtocolError("lease: the answer is not a JSON object")
        wire, rules = document.get("range"), document.get("rules")
        if not isinstance(wire, dict) or not isinstance(rules, list):
            raise RemoteProtocolError("lease: the answer has no 'range' object or 'rules' list")
        group = wire.get("group")
        if not isinstance(group, str):
            raise RemoteProtocolError(f"lease: 'group' is not a string: {group!r}")
        if not all(isinstance(rule, dict) for rule in rules):
            raise RemoteProtocolError("lease: a rule is not a JSON object")
        lease = cls(
            range_id=_non_negative_int(wire, "id"),
            group=group,
            first=_non_negative_int(wire, "first"),
            last=_non_negative_int(wire, "last"),
            next=_non_negative_int(wire, "next"),
            epoch=_non_negative_int(wire, "epoch"),
            rules=tuple(rule_from_wire(rule) for rule in rules),
            ttl_seconds=_ttl(document.get("ttl_seconds")),
        )
        if not lease.first <= lease.next <= lease.last + 1:
            raise RemoteProtocolError(
                f"lease: resume point {lease.next} is outside {lease.first}..{lease.last}"
            )
        return lease

    def __str__(self) -> str:
        return f"{self.group} range {self.range_id} ({self.first}..{self.last}, epoch {self.epoch})"


@attrs.frozen
class BatchAnswer:
    """The coordinator's answer to a batch: stored now, or stored before (a retry)."""

    already: bool


def api_base(coordinator_url: str) -> str:
    """The node API's base URL under a coordinator URL (given with or without the path)."""
    base = coordinator_url.rstrip("/")
    if base.endswith(NODE_API_PATH.rstrip("/")):
        return base + "/"
    return base + NODE_API_PATH


def tls_verify(url: str) -> bool:
    """httpx's `verify` for a client of `url`: on for https, off for a plain http URL.

    httpx builds its certificate context (certifi's CA bundle) when a client
    is made, whatever the URL: measured, ~0.05 s of an edge's start, which a
    plain http URL never uses. No client follows redirects (httpx's default),
    so a plain URL never leads to a TLS one; an https URL is verified as ever.
    """
    return httpx.URL(url).scheme == "https"


@asynccontextmanager
async def open_client(
    coordinator_url: str,
    token: str,
    *,
    retry: RetryPolicy,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[NodeClient]:
    """A node API client for the duration of the block.

    Args:
        coordinator_url: the coordinator's URL.
        token: the node's bearer token.
        retry: the backoff of failed calls.
        transport: another transport (a test's fake coordinator), or None.

    Yields:
        The client.
    """
    base = api_base(coordinator_url)
    async with (
        AsyncExitStack() as later,
        httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT,
            transport=transport,
            verify=tls_verify(base),
        ) as http,
    ):
        yield NodeClient(http, retry, _Links(transport, later))


@attrs.define(eq=False)
class _Links:
    """The client of an S3 spool's presigned chunk links, made at the first link.

    Links may be https, so it verifies certificates, and httpx loads its CA
    bundle when a client is made: ~0.03-0.05 s of every edge's start, which an
    edge of a folder spool (no links) never uses. Closed with `open_client`.
    """

    transport: httpx.AsyncBaseTransport | None
    later: AsyncExitStack
    client: httpx.AsyncClient | None = None

    async def get(self) -> httpx.AsyncClient:
        if self.client is None:
            # Set before it is entered: a second link meanwhile uses the same one.
            self.client = httpx.AsyncClient(timeout=STREAM_TIMEOUT, transport=self.transport)
            await self.later.enter_async_context(self.client)
        return self.client


@attrs.define(eq=False)
class NodeClient:
    """The calls of the node API; see the module docstring for errors and retries.

    Args:
        http: an httpx client with the base URL and the bearer header.
        retry: the backoff of failed calls.
    """

    _http: httpx.AsyncClient
    retry: RetryPolicy
    _links: _Links

    async def lease(self, wait_seconds: float = 0.0) -> EdgeLease | None:
        """A range to index, or None when there is nothing to do (204).

        Args:
            wait_seconds: with nothing to lease, the coordinator holds the call
                up to this long (at most 30 s) for a range to be planned.

        Raises:
            NodeApiError: the call failed (401: the token was refused).
            RemoteProtocolError: the answer is not a lease.
        """
        params = {"wait": f"{wait_seconds:g}"} if wait_seconds > 0 else None
        response = await self._attempts("lease", lambda: self._http.post("lease", params=params))
        if response.status_code == 204:
            return None
        return EdgeLease.from_json(_json(response, "lease"))

    @asynccontextmanager
    async def stream(self, lease: EdgeLease) -> AsyncIterator[httpx.Response]:
        """The range's frame stream from its resume point: a 200 whose body is unread.

        Raises:
            LeaseLostError: the range is not ours (409).
            NodeApiError: the stream could not be opened.
        """
        request = self._http.build_request(
            "GET", f"ranges/{lease.range_id}/stream", timeout=STREAM_TIMEOUT
        )
        response = await self._attempts(
            "stream", lambda: self._http.send(request, stream=True), streaming=True
        )
        try:
            yield response
        finally:
            await response.aclose()

    async def chunk(self, url: str, max_bytes: int) -> bytes:
        """A spool chunk's stored bytes from its link (a LINK frame's presigned URL).

        Raises:
            NodeApiError: the store refused (403: the link expired), kept
                failing, or the chunk is over `max_bytes`.
        """
        links = await self._links.get()
        request = links.build_request("GET", url)
        response = await self._attempts(
            "chunk", lambda: links.send(request, stream=True), streaming=True
        )
        try:
            data = bytearray()
            async for block in response.aiter_bytes():
                data += block
                if len(data) > max_bytes:
                    raise NodeApiError("chunk", 200, f"larger than {max_bytes} bytes")
            return bytes(data)
        except httpx.TransportError as error:
            raise NodeApiError("chunk", None, transport_problem(error)) from error
        finally:
            await response.aclose()

    async def post_batch(self, lease: EdgeLease, body: bytes) -> BatchAnswer:
        """Store one batch (a msgpack body from batchwire.encode_batch).

        Raises:
            LeaseLostError: 409; nothing was stored.
            NodeApiError: the batch was refused or could not be sent.
        """
        response = await self._attempts(
            "batches",
            lambda: self._http.post(
                f"ranges/{lease.range_id}/batches", content=body, headers=BATCH_HEADERS
            ),
        )
        answer = _json(response, "batches")
        return BatchAnswer(already=isinstance(answer, dict) and answer.get("already") is True)

    async def build_job(self, wait_seconds: float = 0.0) -> BuildOffer | float:
        """A catalog build to do, as sent (wire/buildjob.py's `decode_job` reads it: in
        the worker thread that does it), or the seconds to wait before asking again
        (204: none to do now; its Retry-After, 1 s without one, at most 30 s).

        Args:
            wait_seconds: with nothing pending, the coordinator holds the call up to
                this long (at most 10 s) for keys to be; an older one answers at once.

        Raises:
            NodeApiError: the call failed (404: the coordinator offers no builds).
        """
        # How this uidx keys generations (merge.KEYS): a coordinator that keys them
        # otherwise offers no job (an older one does not ask).
        params = {"keys": str(KEYS)}
        if wait_seconds > 0:
            params["wait"] = f"{wait_seconds:g}"
        response = await self._attempts("builds", lambda: self._http.post("builds", params=params))
        if response.status_code == 204:
            return _retry_after(response.headers.get("retry-after"))
        named = response.headers.get(BUILD_JOB_HEADER, "")
        job_id = int(named) if named.isascii() and named.isdigit() else None
        return BuildOffer(response.content, job_id)

    async def post_build(self, job_id: int, body: bytes) -> None:
        """Send the rows made of a build job (an encode_result body).

        Raises:
            LeaseLostError: 409: the job expired or is another's; nothing was written.
            NodeApiError: the rows were refused or could not be sent.
        """
        await self._attempts(
            "built",
            lambda: self._http.post(f"builds/{job_id}", content=body, headers=BUILD_HEADERS),
        )

    async def give_back_build(self, job_id: int) -> None:
        """Give a build job back unbuilt (this edge stops): its keys go to the next
        builder at once instead of when the job expires.

        Raises:
            LeaseLostError: 409: the job had ended (expired, or another's).
            NodeApiError: the call failed.
        """
        await self._attempts("unbuilt", lambda: self._http.delete(f"builds/{job_id}"))

    async def heartbeat(self, lease: EdgeLease) -> None:
        """Keep the lease (its deadline moves on by the TTL)."""
        await self._control(lease, "heartbeat")

    async def finish(self, lease: EdgeLease) -> None:
        """Mark the range done (every batch up to its end is stored)."""
        await self._control(lease, "finish")

    async def release(
        self,
        lease: EdgeLease,
        unreadable: UnreadableChunk | None = None,
        *,
        stopping: bool = False,
    ) -> None:
        """Give the range back; the next node resumes at the last stored batch.

        Args:
            unreadable: the chunk that could not be read, when that is why:
                the coordinator counts it against the range (the same chunk
                again and again parks it instead of leasing it for ever).
            stopping: the worker stops: the coordinator leases nothing more to
                this node on the lease calls it holds open meanwhile.
        """
        document: dict[str, object] = {}
        if unreadable is not None:
            document["unreadable"] = attrs.asdict(unreadable)
        if stopping:
            document["stopping"] = True
        await self._control(lease, "release", document)

    async def _control(
        self, lease: EdgeLease, action: str, document: Mapping[str, object] | None = None
    ) -> None:
        path = f"ranges/{lease.range_id}/{action}"
        body = {"epoch": lease.epoch, **(document or {})}
        await self._attempts(action, lambda: self._http.post(path, json=body))

    async def _attempts(
        self,
        action: str,
        send: Callable[[], Awaitable[httpx.Response]],
        *,
        streaming: bool = False,
    ) -> httpx.Response:
        """Send until an answer below 500, within the retry policy; only a 2xx comes back.

        Raises:
            LeaseLostError: 409.
            NodeApiError: another 4xx, or no answer below 500 within the tries.
        """
        attempt = 0
        while True:
            attempt += 1
            error: httpx.TransportError | None = None
            try:
                response = await send()
            except httpx.TransportError as caught:
                error, problem = caught, transport_problem(caught)
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return response
                if streaming:
                    # The error body of a stream request is read for its message.
                    await response.aread()
                    await response.aclose()
                if status < 500:
                    raise _failure(action, response)
                problem = f"HTTP {status}: {_message(response)}"
            delay = self.retry.next_delay(attempt)
            if delay is None:
                raise NodeApiError(action, None, f"gave up after {attempt} tries: {problem}")
            logger.warning(
                "%s: %s; try %d of %d in %.1f s",
                *(action, problem, attempt + 1, self.retry.tries, delay),
                exc_info=error,
            )
            await trio.sleep(delay)


def _retry_after(value: str | None) -> float:
    """A 204's Retry-After in seconds (1 when absent or not a number; 0.1 to 30)."""
    try:
        seconds = float(value) if value is not None else 1.0
    except ValueError:
        seconds = 1.0
    return min(max(seconds, 0.1), 30.0) if seconds == seconds else 1.0


def transport_problem(error: httpx.TransportError) -> str:
    """What went wrong: httpx's error and the first message in its causes.

    httpx often says nothing itself (a refused certificate is a ConnectError
    with no message); the reason is further down the chain.
    """
    reason: BaseException | None = error
    seen: set[int] = set()  # a chain can loop
    while reason is not None and not str(reason) and id(reason) not in seen:
        seen.add(id(reason))
        reason = reason.__cause__ or reason.__context__
    said = str(reason) if reason is not None else ""
    return f"{type(error).__name__}: {said or 'no reason given'}"


def _failure(action: str, response: httpx.Response) -> NodeApiError:
    """The error for a final answer that is not a success."""
    message = f"HTTP {response.status_code}: {_message(response)}"
    if response.status_code == 409:
        return LeaseLostError(action, 409, message)
    return NodeApiError(action, response.status_code, message)


def _message(response: httpx.Response) -> str:
    """The `error` of a JSON error body, an S3 error's code and message (a chunk's
    link), else the start of the body."""
    try:
        document = response.json()
    except ValueError:
        return _s3_error(response.text) or response.text[:MAX_ERROR_CHARS]
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        return str(document["error"])[:MAX_ERROR_CHARS]
    return response.text[:MAX_ERROR_CHARS]


def _s3_error(text: str) -> str | None:
    """ "Code: Message" of an S3 error document (`<Error><Code>AccessDenied</Code>
    <Message>...</Message>...`), which names what the store refused far better than
    its first bytes; None for any other body."""
    head = text[:S3_ERROR_CHARS]
    code = _S3_CODE.search(head)
    if code is None:
        return None
    message = _S3_MESSAGE.search(head)
    said = code[1] if message is None else f"{code[1]}: {message[1]}"
    return said[:MAX_ERROR_CHARS]


def _json(response: httpx.Response, action: str) -> object:
    try:
        return response.json()
    except ValueError as error:
        raise RemoteProtocolError(f"{action}: the answer is not JSON: {error}") from error
