"""The edge's share of the catalog build: jobs the coordinator offers, merged here.

With `edge_builds` on, a coordinator offers the catalog build it would do
itself (coordinator/catalog_build.py's `offer`): some shards' pending keys
and their closure, with their stored fragments and what probes asked and
found. An edge worker running for good asks for one whenever it has none
(`build_forever`, beside its ranges), merges it in a worker thread with the
very code a coordinator builds with (core/catalog.py's `made`) and sends the
rows back. So the build, the coordinator's largest cost, grows with the
edges, and the coordinator only reads and writes rows. With nothing pending
the coordinator holds the ask (`builds?wait=N`) until keys are, or for
BUILD_WAIT_SECONDS: idle edges cost it an ask each every ~11 s.

Nothing is lost when an edge dies or stalls mid-job: the job's keys stay
pending in the database until its rows are written, and a job not answered
within its lease (coordinator/http/node.py's BUILD_LEASE_SECONDS) is
refused and built again by another. A stop abandons the job at once and gives
it back (`DELETE builds/{job}`, for `give_back_seconds` at most), so that its
keys go to the next builder now, not when the job expires.
"""

from __future__ import annotations

import logging
import math
import time
from functools import partial

import attrs
import trio

from usenet_indexer.core import catalog as core
from usenet_indexer.core.batch import stored_chunk
from usenet_indexer.edge.client import BuildOffer, LeaseLostError, NodeApiError, NodeClient
from usenet_indexer.edge.events import EdgeEvent, EventKind, Observer, ignore
from usenet_indexer.edge.options import STOP_GIVE_BACK_SECONDS
from usenet_indexer.edge.stopping import cancel_when_set
from usenet_indexer.errors import RemoteProtocolError
from usenet_indexer.wire import fragments
from usenet_indexer.wire.buildjob import (
    BuildJob,
    BuildResult,
    BuildWireError,
    OtherKeys,
    decode_job,
    encode_result,
)
from usenet_indexer.wire.fragments import BadFragment

logger = logging.getLogger(__name__)

# After a failed ask or job, the next ask comes this much later.
BUILD_POLL_SECONDS = 1.0
# With nothing pending, the coordinator holds an ask up to this long (its
# BUILD_WAIT_MAX_SECONDS) and answers as soon as keys are: an idle edge asks
# every ~11 s, not every second (each ask is an offer, a few PostgreSQL
# transactions, on the coordinator). An older coordinator answers at once.
BUILD_WAIT_SECONDS = 10.0
# A coordinator that offers no builds (404: edge_builds off, or older) is asked
# again this much later (it may be restarted with them on).
NO_BUILDS_SECONDS = 60.0
# Refused tokens end the build loop (the lease loop ends the worker).
_FATAL = frozenset({401, 403})


def run_job(job: BuildJob, *, pure: bool, categories: core.Categories) -> BuildResult:
    """What a build job makes (sync: a worker thread's), and what it cost this thread.

    Raises:
        BuildWireError: the job's release rows are not rows.
        RemoteProtocolError: a stored fragment does not unpack, or has no release row.
    """
    started, cpu = time.monotonic(), time.thread_time()
    rows = job.releases.by_key()
    chunks = []
    for key, packed, said in job.fragments:
        row = rows.get(key)
        if row is None:
            raise BadFragment(f"the job has a fragment of key {key.hex()} but no release row")
        chunks.append(stored_chunk(key, row, said, tuple(fragments.unpack(packed, pure=pure))))
    made = core.made(
        chunks,
        frozenset(job.pending),
        job.probed,
        job.found,
        job.changed,
        job.asked,
        categories=categories,
        pure=pure,
        pins=job.pins,
    )
    return BuildResult(made, time.thread_time() - cpu, time.monotonic() - started)


async def build_forever(
    client: NodeClient,
    stop: trio.Event,
    *,
    pure: bool = False,
    max_wait_seconds: float = math.inf,
    observe: Observer = ignore,
    give_back_seconds: float = STOP_GIVE_BACK_SECONDS,
) -> int:
    """Ask for build jobs and do them until `stop` is set (a job then abandoned, and
    given back for `give_back_seconds` at most); how many were done. `observe` is told
    of each job whose rows were taken; between asks it waits what the coordinator said
    (at most `max_wait_seconds`). Cancelled from outside (the worker's ranges failed, a
    second stop signal), it gives its job back the same way."""
    done = 0
    held = _Held()
    try:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_when_set, stop, scope)
                categories = core.Categories()
                while True:
                    try:
                        job_id, wait = await _one_job(client, pure, categories, held)
                    except NodeApiError as error:
                        # A refused token: the lease loop meets it too and ends the worker,
                        # which says it (once, through the supervisor): not said here too.
                        logger.debug("no more catalog builds: %s", error)
                        scope.cancel()  # the stop watcher too
                        break
                    if wait is None:
                        done += 1
                        observe(EdgeEvent(EventKind.BUILT, job_id, 0))
                    else:
                        await trio.sleep(min(wait, max_wait_seconds))
    finally:
        # Also when cancelled from outside: `_give_back` is shielded and time-limited.
        if held.job_id is not None:
            await _give_back(client, held.job_id, give_back_seconds)
    return done


@attrs.define
class _Held:
    """The job being done (None: none, or none to give back: its rows were sent, or
    it is left to expire)."""

    job_id: int | None = None


async def _give_back(
    client: NodeClient, job_id: int, seconds: float, why: str = "stopping"
) -> None:
    # Shielded and time-limited: a coordinator that does not answer lets the job
    # expire by itself, and the stopping edge is gone within seconds.
    with trio.move_on_after(seconds, shield=True) as limit:
        try:
            await client.give_back_build(job_id)
        except LeaseLostError:
            # Its rows, posted as the stop came, were written meanwhile; or it expired.
            logger.info("build job %d: had ended when given back (%s)", job_id, why)
            return
        except NodeApiError as error:
            logger.warning("build job %d: not given back: %s", job_id, error)
            return
        logger.info("build job %d given back unbuilt (%s)", job_id, why)
    if limit.cancelled_caught:
        logger.warning(
            "build job %d: not given back within %.1f s (%s): it expires by itself",
            job_id, seconds, why,
        )  # fmt: skip


async def _one_job(
    client: NodeClient, pure: bool, categories: core.Categories, held: _Held
) -> tuple[int, float | None]:
    """Ask for a job and do it: its id and None (its rows taken), or the seconds to wait
    before asking again. `held` names the job while it is being done."""
    try:
        offer = await client.build_job(BUILD_WAIT_SECONDS)
    except NodeApiError as error:
        if error.status in _FATAL:
            raise
        if error.status == 404:
            return 0, NO_BUILDS_SECONDS
        logger.warning("asking for a catalog build failed: %s", error)
        return 0, BUILD_POLL_SECONDS
    if not isinstance(offer, BuildOffer):
        return 0, offer  # nothing to do now: the coordinator said when to ask again
    held.job_id = offer.job_id
    body = offer.body
    try:
        # Decoded, merged and encoded in a worker thread: the event loop (the
        # ranges' posts, heartbeats) only moves bytes.
        job_id, rows, result = await trio.to_thread.run_sync(
            partial(_done, body, pure=pure, categories=categories), abandon_on_cancel=True
        )
    except OtherKeys as error:
        # Given back at once (an older coordinator names no job: left to expire): its
        # keys go to a builder of the coordinator's version.
        held.job_id = None
        if offer.job_id is not None:
            await _give_back(client, offer.job_id, STOP_GIVE_BACK_SECONDS, "another version")
        logger.warning("no catalog builds for this edge: %s", error)
        return 0, NO_BUILDS_SECONDS
    except BuildWireError as error:
        held.job_id = None  # left to expire
        logger.error("the coordinator's build job does not decode: %s", error)
        return 0, BUILD_POLL_SECONDS
    except RemoteProtocolError as error:
        # Left to expire: its keys stay pending for another builder.
        held.job_id = None
        logger.error("a build job's stored fragments cannot be merged: %s", error)
        return 0, BUILD_POLL_SECONDS
    try:
        await client.post_build(job_id, rows)
    except LeaseLostError as error:
        held.job_id = None
        # Expired, or the coordinator rebuilt the catalog meanwhile: another builds it.
        logger.warning("build job %d: its rows were refused: %s", job_id, error)
        return job_id, BUILD_POLL_SECONDS
    except NodeApiError as error:
        held.job_id = None  # left to expire
        if error.status in _FATAL:
            raise
        logger.error("build job %d: its rows were not taken: %s", job_id, error)
        return job_id, BUILD_POLL_SECONDS
    held.job_id = None
    made = result.made
    logger.info(
        "build job %d: %d rows, %d no album's, %d probes, cpu_s=%.3f wall_s=%.3f",
        *(job_id, len(made.entries), len(made.no_album), len(made.probes)),
        *(result.cpu_s, result.wall_s),
    )
    return job_id, None


def _done(
    body: bytes, *, pure: bool, categories: core.Categories
) -> tuple[int, bytes, BuildResult]:
    """A job's body done (sync: a worker thread's): its id, the rows to send, the result."""
    started = time.monotonic()
    job = decode_job(body)
    made = run_job(job, pure=pure, categories=categories)
    result = attrs.evolve(made, wall_s=time.monotonic() - started)
    return job.job_id, encode_result(result), result
