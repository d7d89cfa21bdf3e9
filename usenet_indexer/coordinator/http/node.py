"""The node API: the calls edge nodes make, under /api/v1/node/.

Theory of operation
-------------------
The App (asgi.py) hands this API every request under `PREFIX`. Each goes
route (method and path; 404, 405) -> authenticate (the bearer token -> a
node id, one worker-thread hop; 401) -> handler. The node is whoever the
token says, never a field of the request. Handlers return a `Response` or
raise; the errors with a meaning in this API (a batch body's
`BatchWireError`, `LeaseLost`, `BatchRejected`, `WrongGroup`) become a `Refused` with a
JSON `{"error": ...}` here, so bad input never turns into a 5xx, and the App
answers the rest (503 for the database, 500). The stream answers by itself:
once its 200 is out, failures go into an ERROR frame (coordinator/stream.py).

Database work runs in `trio.to_thread.run_sync`, one hop per unit of work,
under one CapacityLimiter. Decoding a batch runs in the same hop as storing
it: it is CPU work on up to `max_inflated_bytes`, and the limiter then
bounds the memory of batches in flight as well as threads and connections.
The store gets the batch as checked (`PackedBatch`) with the range and
epoch it names: the wire format ends here.

A batch the store refuses for its range (422: past the range's end, no
article) and a finish before the range's end (409) are counted on the
range in the same hop (`RangeStore.refuse`, only the holder's with its
epoch); so are a release naming a chunk the edge could not read (unless
the spool's store says that chunk is gone: then its index row is forgotten
and the prefetcher fetches it again; or the coordinator has no descriptor
to ask the store: `_uncounted`), and the stream's own
failures at the range's articles (coordinator/stream.py);
`refusals_to_park` in a row park it as failed, so an edge never
leases, is refused and gives back one range for ever. A body that does not
decode is not counted: it does not say reliably which lease it is of, and
it changes nothing; nor is a batch of another group than its range's (422,
`WrongGroup`): the edge takes the group from its lease, so the range's data
cannot cause it. The token only enters
`_authenticate`; nothing here logs a header.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final, TypeVar, TypeVarTuple, Unpack
from urllib.parse import parse_qsl

import attrs
import orjson
import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.catalog_build import Built
from usenet_indexer.coordinator.catalog_builder import SETTLE_SECONDS, CatalogDue
from usenet_indexer.coordinator.http.asgi import (
    Denied,
    Exchange,
    Headers,
    Refused,
    Response,
    header,
    read_body,
    retry_after,
)
from usenet_indexer.coordinator.landings import Landings
from usenet_indexer.coordinator.lost import forget_lost_after
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.coordinator.stream import RangeStream, SpoolReader, Streamed, StreamTiming
from usenet_indexer.core.merge import KEYS
from usenet_indexer.core.rules import DEFAULT_RULES
from usenet_indexer.errors import HOST_LIMITS, SpoolStoreError, sole_error
from usenet_indexer.spool.store import SpoolStore, as_spool, open_spool
from usenet_indexer.store.batches import BatchRejected, LeaseLost, Stored, WrongGroup
from usenet_indexer.store.builds import BuildRecord
from usenet_indexer.store.ranges import Finish, Lease, Look
from usenet_indexer.wire.batchwire import (
    MAX_BIGINT,
    BatchWireError,
    WireBatch,
    decode_batch,
    decode_body,
)
from usenet_indexer.wire.buildjob import BuildWireError, decode_result, job_pieces
from usenet_indexer.wire.frames import Frame, encode_header

logger = logging.getLogger(__name__)

PREFIX: Final = "/api/v1/node/"

# A lease call with nothing to lease waits at most this long for work
# (`POST lease?wait=N`), looking again this often (expired leases are
# not announced).
LEASE_WAIT_MAX_SECONDS: Final = 30.0
LEASE_RECHECK_SECONDS: Final = 2.0
# Giving back a range leased to a node that went away before its answer: one
# small UPDATE; past this the lease expires by itself.
GIVE_BACK_SECONDS: Final = 10.0
# A stored batch's answer waits at most this long for the catalog build to
# catch up (`catalog_max_lag_seconds`; well inside an edge's read timeout),
# looking again this often.
HOLD_MAX_SECONDS: Final = 30.0
HOLD_RECHECK_SECONDS: Final = 0.25

# (Range ids and epochs are PostgreSQL bigints: batchwire.MAX_BIGINT; a larger
# number is none of ours.)

# heartbeat, finish and release carry `{"epoch": N}` (a release also may say
# which chunk could not be read, and why, and that its node stops): a few bytes.
CONTROL_BODY_BYTES: Final = 4096
MAX_PROBLEM_CHARS: Final = 1000
# A range refused this many times in a row is parked: one refusal may be a
# transient mistake of one edge (given back, another takes it over), the
# same refusal three leases in a row is the range's own (issue 25: 1,270
# refusals in 10 minutes at 100% CPU, the range never done).
REFUSALS_TO_PARK: Final = 3

# A token is 43 characters (32 random bytes, base64url); anything much
# longer is not one and is refused before it reaches the database.
MAX_TOKEN_CHARS: Final = 512

_BEARER: Final = ((b"www-authenticate", b"Bearer"),)
_INVALID: Final = ((b"www-authenticate", b'Bearer error="invalid_token"'),)

_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")


class Action(enum.Enum):
    """The calls of the node API; the values are the last path segment."""

    LEASE = "lease"
    STREAM = "stream"
    BATCHES = "batches"
    HEARTBEAT = "heartbeat"
    FINISH = "finish"
    RELEASE = "release"
    BUILD = "builds"  # POST builds: a catalog build to do (edge_builds)
    BUILT = "built"  # POST builds/{job}: its rows
    UNBUILT = "unbuilt"  # DELETE builds/{job}: given back unbuilt (its edge stops)


_METHODS: Final = {
    action: "GET" if action is Action.STREAM else "DELETE" if action is Action.UNBUILT else "POST"
    for action in Action
}
_RANGE_ACTIONS: Final = {
    action.value: action
    for action in Action
    if action not in (Action.LEASE, Action.BUILD, Action.BUILT, Action.UNBUILT)
}
# The 200 answering `POST builds` names its job's id here too, so that an edge can
# give the job back (`DELETE builds/{job}`) before it has decoded the body.
BUILD_JOB_HEADER: Final = "x-uidx-build-job"
# An edge's build job is reserved for it this long: past it, its rows are
# refused (409) and its keys, still pending, built again by another.
BUILD_LEASE_SECONDS: Final = 120.0
_MSGPACK: Final = ((b"content-type", b"application/msgpack"),)
# A 204 to an edge asking for a build says when to ask again (Retry-After):
# nothing pending, or what is pending held by other builders.
BUILD_RETRY_SECONDS: Final = 1
BUILD_BUSY_SECONDS: Final = 3
# ... and to an edge of another uidx version, which keys generations (the rows'
# guids) otherwise (`merge.KEYS`): it builds nothing until it is upgraded.
BUILD_OTHER_KEYS_SECONDS: Final = 30
# A builds call with nothing pending waits at most this long for keys to be
# (`POST builds?wait=N`): an idle edge asks every ~11 s instead of every second,
# and each ask is an authentication and an offer (~3.5 PostgreSQL transactions:
# 48 idle edges cost the coordinator 10% of a core and 170 commits/s). Kept well
# under catalog_build.ASKING_SECONDS: the offer each call begins with counts the
# edges as asking, and a coordinator's own builder leaves fresh keys to them
# meanwhile.
BUILD_WAIT_MAX_SECONDS: Final = 10.0


class _NoJob(enum.Enum):
    """Why a builds call is answered without a job (a 204), and when to ask again."""

    NOTHING = "nothing pending that no builder holds"
    BUSY = "what is pending is held by other builders"
    OTHER_KEYS = "the edge keys generations otherwise (another uidx version)"

    @property
    def retry_seconds(self) -> int:
        if self is _NoJob.OTHER_KEYS:
            return BUILD_OTHER_KEYS_SECONDS
        return BUILD_BUSY_SECONDS if self is _NoJob.BUSY else BUILD_RETRY_SECONDS


@attrs.frozen
class _Offered:
    """A build job made for an edge: its id and its body as sent, in pieces
    (wire/buildjob.py's `job_pieces`)."""

    job_id: int
    pieces: tuple[bytes, ...]


def _is_nothing(offered: _Offered | _NoJob) -> bool:
    return offered is _NoJob.NOTHING


class _Gone(enum.Enum):
    """A held call's client went away (`NodeApi._held`): nothing to answer."""

    GONE = "the client went away"


_GONE: Final = _Gone.GONE


@attrs.frozen
class _Pokes:
    """What wakes a held call (`NodeApi._held`): `mark()` before a look, and
    `wait_since(mark)`, which returns once poked after it (or at the stop): ranges
    planned (Landings), catalog keys pending (CatalogDue)."""

    mark: Callable[[], int]
    wait_since: Callable[[int], Awaitable[None]]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, not {value}")


def _not_negative(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value >= 0:
        raise ValueError(f"{attribute.name} must be 0 or more, not {value}")


@attrs.frozen(kw_only=True)
class ApiOptions:
    """What the node API needs to know; `from_settings` takes it from the settings.

    Attributes:
        max_body_bytes: the largest batch body read (compressed).
        max_inflated_bytes: the most a batch body may inflate to.
        lease_ttl_seconds: how long a batch or heartbeat keeps a lease.
        spool: where the spool's chunks are (a Path: a folder spool).
        stream: keepalive and poll intervals of range streams.
        body_timeout_seconds: the longest a request body may take to arrive
            (then 408): a slow client cannot hold a request forever.
        idle_timeout_seconds: a connection is closed when it has been idle
            this long, or when the head of its request has not arrived in full
            after this long (hypercorn's keep-alive timeout covers both).
        database_threads: worker threads for database calls at once (keep it
            at or under the pool's size, else threads wait for connections).
        retry_after_seconds: the Retry-After of a 503.
        quiet_seconds: an edge's build shows a release incomplete and quiet this long
            (catalog_quiet_seconds).
        refusals_to_park: a range whose holder's batch or finish is refused
            this many times in a row (a batch past its end, a finish before
            it) is parked as failed (store/ranges.py).
    """

    max_body_bytes: int
    max_inflated_bytes: int
    lease_ttl_seconds: float
    spool: SpoolStore = attrs.field(converter=as_spool)
    stream: StreamTiming = attrs.field(factory=StreamTiming)
    body_timeout_seconds: float = attrs.field(default=600.0, validator=_positive)
    idle_timeout_seconds: float = attrs.field(default=30.0, validator=_positive)
    database_threads: int = attrs.field(default=8, validator=_positive)
    retry_after_seconds: int = attrs.field(default=5, validator=_positive)
    refusals_to_park: int = attrs.field(default=REFUSALS_TO_PARK, validator=_positive)
    catalog_max_lag_seconds: float = attrs.field(default=0.0, validator=_not_negative)
    quiet_seconds: float = attrs.field(default=600.0, validator=_not_negative)
    hold_max_seconds: float = attrs.field(default=HOLD_MAX_SECONDS, validator=_positive)
    hold_recheck_seconds: float = attrs.field(default=HOLD_RECHECK_SECONDS, validator=_positive)

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiOptions:
        """The options of a coordinator with these settings (the rest at their defaults).

        Args:
            settings: max_body_bytes, max_inflated_bytes, lease_ttl_seconds, home.

        Returns:
            The options; change one with `attrs.evolve`.
        """
        return cls(
            max_body_bytes=settings.max_body_bytes,
            max_inflated_bytes=settings.max_inflated_bytes,
            lease_ttl_seconds=settings.lease_ttl_seconds,
            spool=open_spool(settings),
            catalog_max_lag_seconds=settings.catalog_max_lag_seconds,
            quiet_seconds=settings.catalog_quiet_seconds,
        )


@attrs.frozen
class Route:
    """Which call a request is."""

    action: Action
    range_id: int | None = None  # a build job's id for BUILT


def route(method: str, path: str) -> Route | Response:
    """The call a request makes, or the 404 or 405 to answer.

    Args:
        method: the request method.
        path: the request path (percent-decoded).

    Returns:
        The route, or the error response.
    """
    found = _parse_path(path)
    if found is None:
        return Response.error(404, f"no such call: {path[:200]}")
    if found.action is Action.BUILT and method == _METHODS[Action.UNBUILT]:
        return Route(Action.UNBUILT, found.range_id)
    expected = _METHODS[found.action]
    if method != expected:
        allow = "POST, DELETE" if found.action is Action.BUILT else expected
        return Response.error(
            405, f"{found.action.value} takes {allow}", headers=((b"allow", allow.encode()),)
        )
    return found


def _parse_path(path: str) -> Route | None:
    if not path.startswith(PREFIX):
        return None
    parts = path[len(PREFIX) :].split("/")
    if parts == ["lease"]:
        return Route(Action.LEASE)
    if parts == ["builds"]:
        return Route(Action.BUILD)
    if len(parts) == 2 and parts[0] == "builds":
        job_id = _range_id(parts[1])
        return None if job_id is None else Route(Action.BUILT, job_id)
    if len(parts) != 3 or parts[0] != "ranges" or parts[2] not in _RANGE_ACTIONS:
        return None
    range_id = _range_id(parts[1])
    return None if range_id is None else Route(_RANGE_ACTIONS[parts[2]], range_id)


def _asked(query: bytes, name: str) -> str | None:
    """The first value of `name` in a call's query string, or None."""
    return next((v for n, v in parse_qsl(query.decode("latin-1")) if n == name), None)


def _asked_wait(query: bytes, most: float) -> float:
    """The seconds a lease or builds call may wait for work (`?wait=N`, capped at `most`);
    0 when not asked or not a number (an older edge, or a bad value: it gets its 204 at
    once)."""
    value = _asked(query, "wait")
    if value is None:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        return 0.0
    if math.isnan(seconds):
        return 0.0
    return min(max(seconds, 0.0), most)


def _asked_keys(query: bytes) -> int:
    """How the asking edge keys generations (`?keys=N`, merge.KEYS); 0 when it does not
    say (an edge from before the scheme it names) or says it unreadably."""
    value = _asked(query, "keys")
    if value is None or not (value.isascii() and value.isdigit() and len(value) < 6):
        return 0
    return int(value)


def _range_id(text: str) -> int | None:
    # isascii first: str.isdigit accepts other scripts' digits, which int() reads.
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    value = int(text)
    return value if value <= MAX_BIGINT else None


def refused(exchange: Exchange, denied: Denied) -> Response:
    """The node API's refusal of a request without a node's token (`Route.refusal`):
    401 as `_authenticate` answers it, so an edge reads the same either way."""
    if denied is Denied.MISSING:
        return Response.error(401, "a bearer token is required", headers=_BEARER)
    return Response.error(401, "unknown or revoked token", headers=_INVALID)


def bearer_token(headers: Headers) -> str | None:
    """The token of the one `Authorization: Bearer` header, or None.

    Args:
        headers: the request headers (names lower case, as ASGI has them).

    Returns:
        The token; None when there is no such header, more than one, another
        scheme, or something that cannot be a token.
    """
    values = [value for name, value in headers if name == b"authorization"]
    if len(values) != 1:
        return None
    scheme, _, token = values[0].strip().partition(b" ")
    token = token.strip()
    if scheme.lower() != b"bearer" or not 0 < len(token) <= MAX_TOKEN_CHARS:
        return None
    if not _is_token68(token):
        return None
    return token.decode("ascii")


def _is_token68(token: bytes) -> bool:
    # RFC 6750's b64token: letters, digits and -._~+/ then any trailing "=".
    body = token.rstrip(b"=")
    return body.isascii() and all(c in b"-._~+/" or chr(c).isalnum() for c in body)


@attrs.define(eq=False)
class NodeApi:
    """The node API: the `asgi.Api` the coordinator's App mounts under `PREFIX`.

    Args:
        stores: the stores (sync; called from worker threads).
        options: limits, timeouts and intervals.
        landings: spool chunks landed, which waiting streams await, and ranges
            planned, which waiting lease calls await (counted by
            `coordinator.landings.listen_for_landings`, which `serve` runs).
        catalog_due: poked for each batch stored (the catalog builder looks).
    """

    stores: Stores
    options: ApiOptions
    landings: Landings = attrs.field(factory=Landings)
    catalog_due: CatalogDue = attrs.field(factory=CatalogDue)
    _stopping: bool = attrs.field(init=False, default=False)
    # How far behind the catalog build was, and when that was read: the held
    # answers share one look per hold_recheck_seconds, however many edges wait.
    _behind: float | None = attrs.field(init=False, default=None)
    _behind_read: float = attrs.field(init=False, default=-math.inf)
    _behind_lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    _offering: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    # The catalog_due mark as the last offer began: it saw the keys of every poke
    # counted so far (the held builds calls a poke wakes share one offer), and whether
    # what it found answers them too (`_offer`).
    _offered_at: int = attrs.field(init=False, default=-1)
    _offer_covers: bool = attrs.field(init=False, default=False)
    # The nodes told they key generations otherwise (`_note_other_keys`).
    _other_keys: set[int] = attrs.field(init=False, factory=set)
    _limiter: trio.CapacityLimiter = attrs.field(init=False)
    _streams: RangeStream = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._limiter = trio.CapacityLimiter(self.options.database_threads)
        reader = SpoolReader(self.stores, self.options.spool, self._refused)
        self._streams = RangeStream(reader, self._limiter, self.options.stream, self.landings)

    def stop_waiting(self) -> None:
        """The server stops: lease and builds calls that wait for work answer 204 now, and
        streams that wait for a chunk end (an ERROR frame) rather than hold the stop."""
        self._stopping = True
        self.landings.stop()
        self.catalog_due.stop()

    async def respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        """Answer a call of the node API (the App's `Api`; see the module docstring)."""
        try:
            return await self._respond(exchange, send)
        except (BatchWireError, BuildWireError, LeaseLost, BatchRejected, WrongGroup) as error:
            raise Refused(Response.error(_status_of(error), str(error))) from error

    async def _respond(self, exchange: Exchange, send: ASGISendCallable) -> Response | None:
        # None: the stream has answered by itself.
        found = route(exchange.method, exchange.path)
        if isinstance(found, Response):
            return found
        if exchange.user is not None and exchange.user.node_id is not None:
            node_id = exchange.user.node_id  # the App's Gate took the token already
        else:
            node_id = await self._authenticate(exchange.headers)
        exchange.caller = f"node {node_id}"
        if found.action is Action.BUILD:
            await self._read_body(exchange, CONTROL_BODY_BYTES)  # none expected
            keys = _asked_keys(exchange.query)
            if keys != KEYS:
                self._note_other_keys(node_id, keys)
                return _build_answer(_NoJob.OTHER_KEYS)
            wait_seconds = _asked_wait(exchange.query, BUILD_WAIT_MAX_SECONDS)
            return await self._offer_build(node_id, wait_seconds, exchange.body)
        if found.action is Action.BUILT:
            assert found.range_id is not None  # a job id: _parse_path
            return await self._built(node_id, found.range_id, exchange)
        if found.action is Action.UNBUILT:
            assert found.range_id is not None  # a job id: _parse_path
            await self._read_body(exchange, CONTROL_BODY_BYTES)  # none expected
            return await self._unbuilt(node_id, found.range_id)
        if found.range_id is None:
            await self._read_body(exchange, CONTROL_BODY_BYTES)  # none expected
            wait_seconds = _asked_wait(exchange.query, LEASE_WAIT_MAX_SECONDS)
            return await self._lease(node_id, wait_seconds, exchange.body)
        if found.action is Action.STREAM:
            await self._stream(node_id, found.range_id, exchange.body, send)
            return None
        if found.action is Action.BATCHES:
            return await self._batch(node_id, found.range_id, exchange)
        control = await self._control_body(exchange, found.action)
        epoch = control.epoch
        if control.unreadable is not None:
            parked = await self._unreadable(node_id, found.range_id, epoch, control.unreadable)
            if parked is not None:
                return parked
        return await self._control(
            node_id, found.action, found.range_id, epoch, stopping=control.stopping
        )

    def _note_other_keys(self, node_id: int, keys: int) -> None:
        """Say once per node (and process) that its builds calls get no job."""
        if node_id in self._other_keys:
            return
        self._other_keys.add(node_id)
        logger.warning(
            "node %d runs another uidx version: it keys a release's generations by scheme %s"
            " where this coordinator keys them by %d (the rows' guids); it is offered no"
            " catalog build until it runs this version",
            node_id,
            keys or "1 (it does not say)",
            KEYS,
        )

    async def _run(self, function: Callable[[Unpack[_Args]], _T], *args: *_Args) -> _T:
        """One worker-thread hop under the shared limiter."""
        return await trio.to_thread.run_sync(function, *args, limiter=self._limiter)

    async def _run_heavy(self, function: Callable[[Unpack[_Args]], _T], *args: *_Args) -> _T:
        """`_run` with automatic cyclic GC off in the process meanwhile (gcpolicy: a
        batch, a build offer, an edge's rows make tens of thousands of objects and no
        cycles; the collections they set off were 5% of the coordinator's CPU)."""
        return await self._run(self._without_gc, partial(function, *args))

    def _without_gc(self, work: Callable[[], _T]) -> _T:
        with self.stores.build.collection.off():
            return work()

    async def _authenticate(self, headers: Headers) -> int:
        token = bearer_token(headers)
        if token is None:
            raise Refused(Response.error(401, "a bearer token is required", headers=_BEARER))
        node_id = await self._run(self.stores.nodes.authenticate, token)
        if node_id is None:
            raise Refused(Response.error(401, "unknown or revoked token", headers=_INVALID))
        return node_id

    async def _lease(
        self, node_id: int, wait_seconds: float, receive: ASGIReceiveCallable
    ) -> Response | None:
        """A lease, 204 for none, or None (nothing to answer) when the node went away.

        A node that goes away while its call waits (an edge told to stop) stops
        the wait: nothing is leased to it. A range leased to it just as it
        went away is given back at once, not left leased until its deadline. A
        node that gives a range back as it stops (`{"stopping": true}`) ends its
        held calls with 204: the range is not leased straight back to it before
        the call's closed connection is seen.
        """
        ttl = self.options.lease_ttl_seconds
        # The node's stop count as the call's first look saw it (store/ranges.py:
        # once it moves, the node is going away and nothing is leased to it).
        began: list[int | None] = []

        async def look(seen: int | None) -> Look:
            # Shielded: a lease made in the database is never dropped by a
            # cancellation on its way back (`_held` gives it back instead).
            with trio.CancelScope(shield=True):
                stops = began[0] if began else None
                found = await self._run(self.stores.ranges.look, node_id, ttl, stops)
            if not began:
                began.append(found.stops)
            return found

        def idle(found: Look) -> bool:
            return found.lease is None and found.stops == began[0]

        looked = await self._held(
            receive,
            wait_seconds,
            _Pokes(self.landings.planned_mark, self.landings.wait_planned),
            look,
            idle,
            # An expired lease is not announced: looked for every few seconds.
            recheck_seconds=LEASE_RECHECK_SECONDS,
            give_back=partial(self._give_back_unanswered, node_id),
        )
        if looked is _GONE:
            logger.info("node %d: went away during its lease call", node_id)
            return None
        lease = looked.lease
        if lease is None:
            if looked.stops != began[0]:
                logger.info(
                    "node %d: stops (a range given back as it stops): nothing leased", node_id
                )
            else:
                logger.debug("node %d: nothing to lease", node_id)
            return Response(204)
        logger.info(
            "node %d leased range %d epoch %d: %s %d..%d from %d",
            *(node_id, lease.range_id, lease.epoch, lease.group),
            *(lease.first, lease.last, lease.next),
        )
        rules = [rule.to_wire() for rule in DEFAULT_RULES]
        # The lease's TTL: an edge's own lease_ttl_seconds (edges need only
        # COORDINATOR_URL and NODE_TOKEN) may be longer than this coordinator's,
        # and it beats well within this one.
        ttl = self.options.lease_ttl_seconds
        return Response.json(200, {"range": lease.to_json(), "rules": rules, "ttl_seconds": ttl})

    async def _held(
        self,
        receive: ASGIReceiveCallable,
        wait_seconds: float,
        pokes: _Pokes,
        look: Callable[[int | None], Awaitable[_T]],
        idle: Callable[[_T], bool],
        *,
        recheck_seconds: float | None = None,
        settle_seconds: float = 0.0,
        give_back: Callable[[_T], Awaitable[None]] | None = None,
    ) -> _T | _Gone:
        """A call held for work (`lease?wait=N`, `builds?wait=N`): what `look` found, or
        GONE when the client went away meanwhile.

        It looks at once (`look(None)`); while what it found is `idle`, it waits for a
        poke since the mark taken before that look, then `settle_seconds`, and looks
        again (`look(mark)`), until `wait_seconds` have passed or the server stops. With
        `recheck_seconds` it also looks that often and once more at its end (for what
        no poke tells: an expired lease); without, the end without a poke ends it.
        Only `receive` tells that the client went away: the wait is cancelled then,
        and something a look found that is not idle (a range leased to it just as it
        went away, or as the server is stopped) goes to `give_back`, not left held
        until its deadline.
        """
        found: list[_T] = []
        gone = True  # until the call ends with the client still there to answer
        try:
            with trio.CancelScope() as call:
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(_cancel_on_disconnect, receive, call)
                        await self._looks(
                            wait_seconds, pokes, look, idle, found, recheck_seconds, settle_seconds
                        )
                        nursery.cancel_scope.cancel()
                except BaseExceptionGroup as group:
                    # The look's own error bare (the database gone: a 503), not
                    # wrapped in a group the API would answer with a 500.
                    raise sole_error(group) from None
            gone = call.cancel_called
        finally:
            if gone and found and not idle(found[-1]) and give_back is not None:
                await give_back(found[-1])
        return _GONE if gone else found[-1]

    async def _looks(
        self,
        wait_seconds: float,
        pokes: _Pokes,
        look: Callable[[int | None], Awaitable[_T]],
        idle: Callable[[_T], bool],
        found: list[_T],
        recheck_seconds: float | None,
        settle_seconds: float,
    ) -> None:
        # `_held`'s looks, each one's outcome in `found` as soon as it is back (a
        # cancellation after it must not lose it).
        deadline = trio.current_time() + wait_seconds
        mark = pokes.mark()
        found.append(await look(None))
        while idle(found[-1]) and not self._stopping and trio.current_time() < deadline:
            wake = deadline
            if recheck_seconds is not None:
                wake = min(deadline, trio.current_time() + recheck_seconds)
            # move_on_at: the deadline may be past when the wait begins (a look that
            # outlasted it), which move_on_after refuses (a negative time).
            with trio.move_on_at(wake) as waited:
                await pokes.wait_since(mark)
            if self._stopping or (waited.cancelled_caught and recheck_seconds is None):
                break
            if settle_seconds:
                await trio.sleep(settle_seconds)
            mark = pokes.mark()
            found.append(await look(mark))

    async def _give_back_unanswered(self, node_id: int, found: Look) -> None:
        # The node went away (or the server stops) as the range was leased to
        # it, before the answer: the range is planned again now, for the next
        # lease call, instead of staying leased to nobody until its deadline.
        lease = found.lease
        if lease is None:  # the look ended the call for the node's stop: nothing leased
            return
        with trio.move_on_after(GIVE_BACK_SECONDS, shield=True):
            given = await self._run(
                self.stores.ranges.release, node_id, lease.range_id, lease.epoch
            )
            if given:
                self.landings.planned()
            logger.info(
                "node %d went away (or the server stops) as range %d epoch %d was leased to it: %s",
                *(node_id, lease.range_id, lease.epoch),
                "given back" if given else "not given back (lost meanwhile)",
            )

    async def _batch(self, node_id: int, range_id: int, exchange: Exchange) -> Response:
        body = await self._read_body(exchange, self.options.max_body_bytes)
        encoding = header(exchange.headers, b"content-encoding")
        wire, stored = await self._run_heavy(
            self._decode_and_store, node_id, range_id, body, encoding
        )
        _log_stored(node_id, wire, stored, len(body))
        if stored.release_chunks and not stored.already:
            self.catalog_due.due()
            await self._keep_pace(node_id, wire)
        answer = {
            "stored": True,
            "already": stored.already,
            "release_chunks": stored.release_chunks,
            "segments": stored.segments,
        }
        return Response.json(200, answer)

    async def _offer_build(
        self, node_id: int, wait_seconds: float, receive: ASGIReceiveCallable
    ) -> Response | None:
        """A catalog build for the edge to do (msgpack: wire/buildjob.py), 204 for none
        (nothing pending that no builder holds, or all of it held), 404 with edge_builds
        off; None (nothing to answer) when the node went away while its call waited.

        With nothing pending, a call that may wait (`builds?wait=N`) is answered once
        keys are (`CatalogDue`: a batch stored through any coordinator process, a probe's
        outcome), or after `wait_seconds`; an older edge's, at once (it asks every second).
        """
        if not self.stores.build.edge_builds:
            return Response.error(404, "this coordinator builds its catalog itself (edge_builds)")
        if not wait_seconds:
            if self._stopping or self._offering.locked():
                # One offer at a time per process: one that found its shards held
                # computed a closure for nothing, and such edges ask every second.
                return _build_answer(_NoJob.NOTHING)
            return _build_answer(await self._offer(node_id, None))
        offered = await self._held(
            receive,
            wait_seconds,
            _Pokes(self.catalog_due.mark, self.catalog_due.wait_since),
            partial(self._offer, node_id),
            _is_nothing,
            # A burst of batches (a range's edges, one after another) is one job.
            settle_seconds=SETTLE_SECONDS,
            give_back=partial(self._give_back_offered, node_id),
        )
        if offered is _GONE:
            logger.debug("node %d: went away during its builds call", node_id)
            return None
        return _build_answer(offered)

    async def _give_back_offered(self, node_id: int, offered: _Offered | _NoJob) -> None:
        # The edge went away (or the server stops) as a job was made for it: the
        # job is ended now, not left reserved for BUILD_LEASE_SECONDS.
        if isinstance(offered, _Offered):
            with trio.move_on_after(GIVE_BACK_SECONDS, shield=True):
                await self._drop_job(node_id, offered.job_id, "went away as it was offered")

    async def _unbuilt(self, node_id: int, job_id: int) -> Response:
        """A build job its edge gives back unbuilt (it stops): ended, so its keys go to
        the next builder at once (204; 409: not the node's, or it had ended)."""
        if not await self._drop_job(node_id, job_id, "given back unbuilt"):
            message = f"build job {job_id} is not this node's, or it ended"
            logger.info("node %d: %s", node_id, message)
            return Response.error(409, message)
        return Response(204)

    async def _drop_job(self, node_id: int, job_id: int, why: str) -> bool:
        dropped = await self._run(self.stores.build.give_back, node_id, job_id)
        if dropped:
            logger.info(
                "node %d: build job %d %s: its keys go to the next builder", node_id, job_id, why
            )
            self.catalog_due.due()  # held build asks offer them again
        return dropped

    async def _offer(self, node_id: int, seen: int | None) -> _Offered | _NoJob:
        """One offer, one at a time per process (`_offering`).

        `seen`: the pokes a woken call saw. An offer that began after them saw the
        keys this one would see, so the calls a poke wakes share one offer: this one
        is NOTHING without a look, when that offer found nothing pending or made a job
        (of every shard no other builder holds). One that found what is pending held
        by other builders (BUSY), or failed, answers only its own call: each woken call
        then makes its own (one look each; BUSY tells its edge to ask again in a few
        seconds, where sharing held the others until the next poke or their wait's
        end). None: a call's first look, always made (it also counts the node as
        asking).
        """
        async with self._offering:
            if self._stopping:
                return _NoJob.NOTHING
            if seen is not None and self._offered_at >= seen and self._offer_covers:
                return _NoJob.NOTHING
            self._offered_at = self.catalog_due.mark()
            self._offer_covers = False  # until it found something that does
            offered = await self._run_heavy(self._offered, node_id)
            self._offer_covers = offered is not _NoJob.BUSY
            return offered

    def _offered(self, node_id: int) -> _Offered | _NoJob:
        # In a worker thread: the job taken and encoded in one hop, or why none.
        job = self.stores.build.offer(node_id, BUILD_LEASE_SECONDS)
        if isinstance(job, Built):
            return _NoJob.BUSY
        if job is None:
            return _NoJob.NOTHING
        return _Offered(job.job_id, job_pieces(job))

    async def _built(self, node_id: int, job_id: int, exchange: Exchange) -> Response:
        """The rows an edge made of its build job, written (409: the job is no longer the
        node's or expired; 400/422: not rows of the job; nothing is written then)."""
        body = await self._read_body(exchange, self.options.max_inflated_bytes)
        built = await self._run_heavy(self._write_built, node_id, job_id, body)
        if built is None:
            message = f"build job {job_id} is not this node's, or it expired"
            logger.info("node %d: %s", node_id, message)
            return Response.error(409, message)
        return Response.json(200, {"written": built.written, "releases": built.releases})

    def _write_built(self, node_id: int, job_id: int, body: bytes) -> Built | None:
        # In a worker thread: decoded, checked and written in one hop.
        result = decode_result(body)
        started = time.monotonic()
        built = self.stores.build.finish(node_id, job_id, result.made, self.options.quiet_seconds)
        if built is None:
            return None
        logger.info(
            "catalog built: pending=%d merged=%d written=%d shown=%d cpu_s=%.3f"
            " wall_s=%.3f (%d releases, %d pruned, %d look-ups, %d keys built again beyond"
            " its dates; node %d job %d, %.3f s to write)",
            *(built.pending, built.keys, built.written, built.shown, result.cpu_s),
            *(result.wall_s, built.releases, built.pruned, built.rounds, built.beyond),
            *(node_id, job_id),
            time.monotonic() - started,
        )
        self.stores.builds.record(
            BuildRecord(
                *(built.pending, built.keys, built.written, built.shown, result.cpu_s),
                wall_s=result.wall_s,
                host=f"node {node_id}",
                pid=0,
            )
        )
        return built

    async def _keep_pace(self, node_id: int, wire: WireBatch) -> None:
        """Hold a stored batch's answer while the catalog build is behind (its oldest
        pending key waited over `catalog_max_lag_seconds`), at most `hold_max_seconds`:
        the edge indexes its next batch meanwhile and posts it once answered, so the
        edges go at the pace the catalog is built and the catalog's lag stays bounded
        (on a machine the edges share, the build gets the CPU they would have taken).
        0: never held. A stopping coordinator answers at once."""
        limit = self.options.catalog_max_lag_seconds
        if not limit:
            return
        started = trio.current_time()
        deadline = started + self.options.hold_max_seconds
        behind = await self._catalog_behind(started)
        while behind is not None and behind > limit and not self._stopping:
            if trio.current_time() >= deadline:
                break
            await trio.sleep(min(self.options.hold_recheck_seconds, deadline - trio.current_time()))
            recent = trio.current_time() - self.options.hold_recheck_seconds
            behind = await self._catalog_behind(max(started, recent))
        held = trio.current_time() - started
        if held >= self.options.hold_recheck_seconds:
            logger.info(
                "node %d batch %d..%d of range %d: answered after %.1f s held, the catalog "
                "build %s behind (catalog_max_lag_seconds=%g)",
                *(node_id, wire.batch.first, wire.batch.next - 1, wire.range_id, held),
                "no longer" if behind is None or behind <= limit else f"still {behind:.1f} s",
                limit,
            )

    async def _catalog_behind(self, since: float) -> float | None:
        """How far behind the catalog build is (`BuildStore.behind`), as read at `since`
        or later: one read serves every answer held meanwhile."""
        async with self._behind_lock:
            if self._behind_read < since:
                self._behind_read = trio.current_time()
                self._behind = await self._run(self.stores.builds.behind)
            return self._behind

    def _decode_and_store(
        self, node_id: int, range_id: int, body: bytes, encoding: str | None
    ) -> tuple[WireBatch, Stored]:
        # In a worker thread: inflate (capped), parse and check, then store.
        document = decode_body(
            body,
            content_encoding=encoding,
            max_body_bytes=self.options.max_body_bytes,
            max_inflated_bytes=self.options.max_inflated_bytes,
        )
        wire = decode_batch(document)
        if wire.range_id != range_id:
            message = f"range: the batch is for range {wire.range_id}, posted to range {range_id}"
            raise Refused(Response.error(422, message))
        ttl = self.options.lease_ttl_seconds
        batches = self.stores.batches
        try:
            stored = batches.store(node_id, range_id, wire.epoch, wire.batch, len(body), ttl)
        except BatchRejected as error:
            # Counted in the same hop: the edge gives the range back and it is
            # leased again at once, so the same batch comes back (parking).
            message = self._refused(node_id, range_id, wire.epoch, str(error))
            raise Refused(Response.error(422, message)) from error
        if not stored.already and not self.stores.build.edge_builds:
            # What the checks inflated, unpacked for this process's builds of it
            # (edges build from the stored fragments).
            self.stores.build.store.remember(range_id, wire.batch.first, wire.batch.releases)
        return wire, stored

    def _refused(self, node_id: int, range_id: int, epoch: int, reason: str) -> str:
        """Count a refusal of the holder's work on its range (in a worker thread); the answer.

        A batch past the range's end or a finish before it is refused again
        each time the range is leased, if the range's own data is the cause:
        the `refusals_to_park`-th refusal in a row parks the range
        (store/ranges.py), and the answer says so.
        """
        return self._count_refusal(node_id, range_id, epoch, reason)[0]

    def _count_refusal(
        self, node_id: int, range_id: int, epoch: int, reason: str
    ) -> tuple[str, bool]:
        # `_refused`'s work; also whether the range is parked now.
        limit = self.options.refusals_to_park
        counted = self.stores.ranges.refuse(node_id, range_id, epoch, reason, limit)
        if counted is None or not counted.parked:
            return reason, False
        logger.warning(
            "range %d parked as failed after %d refusals in a row (the last: %s);"
            " `uidx ranges retry %d` plans it again",
            *(range_id, counted.refusals, reason, range_id),
        )
        parked = f"{reason}; range {range_id} is parked as failed after {counted.refusals} refusals"
        return parked, True

    async def _control_body(self, exchange: Exchange, action: Action) -> Control:
        encoding = (header(exchange.headers, b"content-encoding") or "identity").strip().lower()
        if encoding != "identity":
            raise Refused(Response.error(415, "a control body is plain JSON: no encoding"))
        body = await self._read_body(exchange, CONTROL_BODY_BYTES)
        return _parse_control(body, release=action is Action.RELEASE)

    async def _unreadable(
        self, node_id: int, range_id: int, epoch: int, unreadable: Unreadable
    ) -> Response | None:
        """A range given back because a chunk of it could not be read at the edge.

        Counted as a refusal of the range (the next lease would stream the same
        chunk): the answer when that parks it, else None (then it is released).
        A chunk outside the range is 422 and counts nothing; a node that does
        not hold the range gets 409 from the release that follows. A chunk the
        store says is gone counts nothing either (`_uncounted`): it is
        fetched again, and the next lease waits for it; nor does one the store
        cannot be asked of for want of this host's descriptors or memory.
        """
        lease = await self._run(self.stores.ranges.held, node_id, range_id)
        if lease is None or lease.epoch != epoch:
            return None
        if not lease.first <= unreadable.first <= unreadable.last <= lease.last:
            raise Refused(
                Response.error(
                    422,
                    f"unreadable: articles {unreadable.first}..{unreadable.last} are not"
                    f" within range {range_id} ({lease.first}..{lease.last})",
                )
            )
        if await self._run(self._uncounted, lease, unreadable, node_id):
            return None
        reason = (
            f"spool chunk {unreadable.first}..{unreadable.last} cannot be read"
            f" by node {node_id}: {unreadable.problem}"
        )
        logger.warning("range %d epoch %d: %s", range_id, epoch, reason)
        message, parked = await self._run(self._count_refusal, node_id, range_id, epoch, reason)
        return Response.json(200, {"parked": message}) if parked else None

    def _uncounted(self, lease: Lease, unreadable: Unreadable, node_id: int) -> bool:
        """Whether the chunk an edge could not read is not counted on its range (in a
        worker thread): it is gone from the spool, and so its row forgotten and its
        articles fetched again; or this process has no descriptor or memory to ask the
        store (HOST_LIMITS: its own limit, not the range's, as for a folder chunk it
        cannot open, coordinator/stream.py), and nothing is forgotten.

        Asked of the store (`SpoolStore.exists`: a HEAD), never taken from the
        edge's word: a 404 of a link whose object the sweep deleted rightly (a
        stale stream, the range moved past it) or an edge's mistake must not make
        the prefetcher fetch a chunk again. Only a chunk the index names with
        those very articles is looked up, and `forget_lost` forgets it only while
        a range needs it; then the range's next chunks are asked of the store at
        once, and those gone forgotten too (coordinator/lost.py). A chunk that is
        there (a 403, bytes that do not inflate), or that the store cannot tell
        of otherwise (refused, unreachable), is counted as before.
        """
        where = f"range {lease.range_id} epoch {lease.epoch}"
        span = f"spool chunk {unreadable.first}..{unreadable.last}"
        found = self.stores.spool.chunks_from(lease.group_id, unreadable.first, unreadable.first, 1)
        chunk = found[0] if found else None
        if chunk is None or (chunk.first, chunk.last) != (unreadable.first, unreadable.last):
            return False  # not a chunk the index names: the edge's word alone, counted
        if chunk.path is None:
            return False  # a gap has no bytes to lose: counted
        path = chunk.path
        spool = self.options.spool
        try:
            if spool.exists(path):
                return False
        except OSError as error:
            if error.errno in HOST_LIMITS:
                logger.warning(
                    "%s: cannot ask whether %s is in the spool now: %s; not counted on the"
                    " range. Too many connections for the coordinator's open-file limit?"
                    " Raise it (LimitNOFILE)",
                    *(where, span, error),
                )
                return True
            logger.warning("%s: cannot tell whether %s is in the spool: %s", where, span, error)
            return False
        except SpoolStoreError as error:
            logger.warning("%s: cannot tell whether %s is in the spool: %s", where, span, error)
            return False
        if not self.stores.spool.forget_lost(lease.group_id, unreadable.first, path):
            return False
        logger.warning(
            "%s: %s is gone from %s (node %d: %s): its index row is forgotten, the"
            " prefetcher fetches it again",
            *(where, span, spool.describe(), node_id, unreadable.problem),
        )
        # Seldom alone (a spool lost whole): the range's next chunks are asked at once.
        forget_lost_after(
            self.stores.spool, spool, lease.group_id, unreadable.last, lease.last, where
        )
        return True

    async def _control(
        self, node_id: int, action: Action, range_id: int, epoch: int, *, stopping: bool = False
    ) -> Response:
        ranges, ttl = self.stores.ranges, self.options.lease_ttl_seconds
        if action is Action.HEARTBEAT:
            ok = await self._run(ranges.heartbeat, node_id, range_id, epoch, ttl)
            refusal = None if ok else LEASE_LOST
        elif action is Action.FINISH:
            refusal = _finish_refusal(await self._run(ranges.finish, node_id, range_id, epoch))
            if refusal == INCOMPLETE:
                refusal = await self._run(self._refused, node_id, range_id, epoch, refusal)
        else:
            ok = await self._run(
                partial(ranges.release, stopping=stopping), node_id, range_id, epoch
            )
            refusal = None if ok else LEASE_LOST
            if ok:
                self.landings.planned()  # a waiting lease call may take it
        what = f"node {node_id} {action.value} range {range_id} epoch {epoch}"
        if refusal is not None:
            logger.info("%s: refused, %s", what, refusal)
            return Response.error(409, refusal)
        # Heartbeats come every few minutes per node: not worth an info line.
        logger.log(logging.DEBUG if action is Action.HEARTBEAT else logging.INFO, "%s: ok", what)
        return Response.json(200, {})

    async def _read_body(self, exchange: Exchange, cap: int) -> bytes:
        timeout = self.options.body_timeout_seconds
        return await read_body(exchange, cap, timeout_seconds=timeout)

    async def _stream(
        self, node_id: int, range_id: int, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        lease = await self._run(self.stores.ranges.held, node_id, range_id)
        if lease is None:
            raise Refused(Response.error(409, f"range {range_id} is not leased to this node"))
        headers = [(b"content-type", b"application/octet-stream"), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        where = f"node {node_id} range {range_id} epoch {lease.epoch}"
        try:
            streamed = await self._stream_frames(node_id, lease, receive, send)
        except Exception as error:
            # The 200 is out: the edge learns of the failure from an ERROR frame.
            logger.error("%s: stream failed", where, exc_info=error)
            await _send_frame(send, Frame.error("internal error"))
        else:
            _log_streamed(where, lease.next, streamed)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _stream_frames(
        self, node_id: int, lease: Lease, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> Streamed | None:
        # None when the edge went away first.
        streamed = None
        async with trio.open_nursery() as nursery:
            # hypercorn takes sends after a disconnect and drops them: only
            # `receive` tells that the edge went away.
            nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
            streamed = await self._streams.run(node_id, lease, partial(_send_frame, send))
            nursery.cancel_scope.cancel()
        return streamed


def _build_answer(offered: _Offered | _NoJob) -> Response:
    if isinstance(offered, _Offered):
        headers = (*_MSGPACK, (BUILD_JOB_HEADER.encode(), str(offered.job_id).encode()))
        return Response(200, headers=headers, pieces=offered.pieces)
    return Response(204, headers=retry_after(offered.retry_seconds))


LEASE_LOST: Final = "the lease is lost: another node holds the range, or a newer epoch"
INCOMPLETE: Final = "resume point is not past the range's end"


def _status_of(
    error: BatchWireError | BuildWireError | LeaseLost | BatchRejected | WrongGroup,
) -> int:
    if isinstance(error, BatchWireError | BuildWireError):
        return error.http_status  # 400, 413, 415 or 422: the body says which
    return 409 if isinstance(error, LeaseLost) else 422


def _finish_refusal(outcome: Finish) -> str | None:
    if outcome is Finish.OK:
        return None
    return INCOMPLETE if outcome is Finish.INCOMPLETE else LEASE_LOST


@attrs.frozen
class Unreadable:
    """Why a range is given back: the edge could not read one of its chunks (a
    release's `{"unreadable": {"first": A, "last": B, "problem": "..."}}`).

    Attributes:
        first, last: the chunk's articles, as its frame gave them.
        problem: what the edge met (the store's 404, a chunk that does not inflate).
    """

    first: int
    last: int
    problem: str


@attrs.frozen
class Control:
    """A control call's body: `{"epoch": N}`; a release's may add `"unreadable":
    {...}` (`Unreadable`) and `"stopping": true` (the edge gives it back because it
    stops: store/ranges.py's `release`)."""

    epoch: int
    unreadable: Unreadable | None = None
    stopping: bool = False


def _parse_control(body: bytes, *, release: bool) -> Control:
    """A control call's body (`Control`); 400 for bad JSON, 422 for a bad document
    (a key named twice too)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise Refused(Response.error(400, f"the body is not JSON: {error}")) from error
    _refuse_repeated_keys(body)
    keys = {"epoch", "unreadable", "stopping"} if release else {"epoch"}
    if type(document) is not dict or "epoch" not in document or not set(document) <= keys:
        shape = '{"epoch": N}'
        if release:
            shape += ', with "unreadable": {...} and "stopping": true|false if need be'
        raise Refused(Response.error(422, f"the body must be {shape}"))
    epoch = _bigint(document, "epoch")
    stopping = document.get("stopping", False)
    if type(stopping) is not bool:
        raise Refused(Response.error(422, "stopping: expected true or false"))
    if "unreadable" not in document:
        return Control(epoch, None, stopping)
    chunk = document["unreadable"]
    if type(chunk) is not dict or set(chunk) != {"first", "last", "problem"}:
        raise Refused(Response.error(422, "unreadable: expected first, last and problem"))
    first, last, problem = _bigint(chunk, "first"), _bigint(chunk, "last"), chunk["problem"]
    if first > last:
        raise Refused(Response.error(422, f"unreadable: first {first} is after last {last}"))
    if type(problem) is not str or not 0 < len(problem) <= MAX_PROBLEM_CHARS or "\x00" in problem:
        raise Refused(
            Response.error(
                422, f"unreadable: problem must be 1..{MAX_PROBLEM_CHARS} characters, no NUL"
            )
        )
    return Control(epoch, Unreadable(first, last, problem), stopping)


def _refuse_repeated_keys(body: bytes) -> None:
    """422 for a body with an object that names a key twice.

    orjson keeps the last value and cannot tell; another reader may keep the
    first, so a repeated key is refused rather than guessed at. json's
    object_pairs_hook sees every pair: the body (at most CONTROL_BODY_BYTES,
    valid JSON: orjson read it) is read again for that. A batch is msgpack,
    checked by batchwire the same way.
    """
    try:
        json.loads(body, object_pairs_hook=_pairs_once)
    except RecursionError as error:
        # orjson reads 1023 levels; json runs out of stack sooner.
        raise Refused(Response.error(422, "the body nests too deep")) from error


def _pairs_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        keys = [key for key, _ in pairs]
        repeated = next(key for key in keys if keys.count(key) > 1)
        raise Refused(Response.error(422, f"the body repeats the key {repeated!r}"))
    return found


def _bigint(document: dict[str, Any], key: str) -> int:
    value = document[key]
    # type(), not isinstance: true is no number.
    if type(value) is not int or not 0 <= value <= MAX_BIGINT:
        raise Refused(Response.error(422, f"{key}: expected an integer 0..{MAX_BIGINT}"))
    return value


def _log_stored(node_id: int, wire: WireBatch, stored: Stored, body_bytes: int) -> None:
    batch = wire.batch
    logger.info(
        "node %d stored batch %d..%d of range %d epoch %d: "
        "%d release chunks, %d segments, %d lines, %d body bytes%s",
        *(node_id, batch.first, batch.next - 1, wire.range_id, wire.epoch),
        *(stored.release_chunks, stored.segments, batch.lines, body_bytes),
        " (already stored: a retry)" if stored.already else "",
    )


def _log_streamed(where: str, start: int, streamed: Streamed | None) -> None:
    if streamed is None:
        logger.info("%s: stream from %d: the node went away", where, start)
        return
    logger.info(
        "%s: stream from %d: %d chunks, %d gaps, %d bytes; %s",
        *(where, start, streamed.chunks, streamed.gaps, streamed.payload_bytes, streamed.ending),
    )


async def _send_frame(send: ASGISendCallable, frame: Frame) -> None:
    # Header and payload apart: a chunk's payload is sent as read, uncopied.
    await send({"type": "http.response.body", "body": encode_header(frame), "more_body": True})
    if frame.payload:
        await send({"type": "http.response.body", "body": frame.payload, "more_body": True})


async def _cancel_on_disconnect(receive: ASGIReceiveCallable, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
