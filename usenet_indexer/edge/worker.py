"""The edge worker: lease a range, run it, lease the next; idle when there is none.

Ranges overlap: once a range's stream has sent its END, the next range is
leased and its stream opened while the last chunk is indexed; it indexes
once the range before has handed over its last batch, while that range's
last post and `finish` go on, at most one range in its tail at a time (see
range_runner's "The tail").

Running for good, a lease call asks the coordinator to hold it up to
LEASE_WAIT_SECONDS for a range to be planned, so a new range (the live
head) is leased a moment after its plan. A stop cuts the call short at
once (the connection closes, and the coordinator leases nothing to a node
that went away, or gives back what it leased just then); a lease answered
just before the stop is given back here, shielded, for a short while
(`stop_give_back_seconds`: a lease not given back expires by itself). A 204
after such a wait means nothing came: the worker asks again at once. A 204
at once (an older coordinator) or a failed call: it waits `idle_seconds`
(cut short by a stop) first; with `ranges` set it asks without waiting and
ends instead, so a script's `uidx edge --ranges N` returns when the work is
done. A failed range, or one given back before it stored a batch (its
stream broke at once: a chunk link the store refuses, an ERROR frame), is
followed by the same wait, so a range that fails every time (a corrupt
chunk, a coordinator bug, a store that refuses the coordinator's links) is
not leased and given back in a tight loop; and the coordinator counts such
failures against the range (range_runner's "Endings"), so it is parked,
with the reason, after `refusals_to_park` of them in a row.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial

import attrs
import httpx
import trio

from usenet_indexer.config import Settings
from usenet_indexer.edge.client import EdgeLease, NodeApiError, NodeClient, open_client
from usenet_indexer.edge.events import Observer, ignore
from usenet_indexer.edge.options import EdgeOptions
from usenet_indexer.edge.range_runner import Outcome, RangeReport, RangeRunner
from usenet_indexer.edge.stopping import cancel_when_set
from usenet_indexer.errors import sole_error
from usenet_indexer.gcpolicy import collect_all

logger = logging.getLogger(__name__)

# A refused token (401) or a forbidden node (403) will not get better by
# asking again: the worker stops, and a supervisor halts instead of restarting it.
FATAL_STATUSES = frozenset({401, 403})
# How long a lease call waits on the coordinator for new work (the
# coordinator caps it at the same).
LEASE_WAIT_SECONDS = 30.0


@attrs.frozen
class EdgeTotals:
    """How the ranges of one worker run ended."""

    finished: int = 0
    given_back: int = 0
    lost: int = 0
    failed: int = 0

    @classmethod
    def from_counts(cls, counts: Counter[Outcome]) -> EdgeTotals:
        return cls(
            finished=counts[Outcome.FINISHED],
            given_back=counts[Outcome.GIVEN_BACK],
            lost=counts[Outcome.LOST],
            failed=counts[Outcome.FAILED],
        )


async def run(
    settings: Settings,
    *,
    options: EdgeOptions | None = None,
    stop: trio.Event | None = None,
    observe: Observer = ignore,
    transport: httpx.AsyncBaseTransport | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> EdgeTotals:
    """Run one edge worker until stopped, or until `options.ranges` ranges are done.

    Args:
        settings: coordinator_url, node_token, batch_articles, idle_seconds,
            lease_ttl_seconds (unused when `options` is given).
        options: the worker's options; None for `EdgeOptions.from_settings(settings)`.
        stop: set it to stop at once (the range is given back from its stored resume point).
        observe: told of each lease, keepalive and stored batch.
        transport: another httpx transport (a test's fake coordinator).
        task_status: started once the client is ready.

    Returns:
        How the ranges ended.

    Raises:
        ConfigError: COORDINATOR_URL or NODE_TOKEN is missing.
        NodeApiError: the token is refused; or, with `ranges`, a lease call
            fails for good.
    """
    if options is None:
        options = EdgeOptions.from_settings(settings)
    stop = stop if stop is not None else trio.Event()
    async with open_client(
        options.coordinator_url, options.node_token, retry=options.retry, transport=transport
    ) as client:
        task_status.started()
        return await _leases(client, options, stop, observe)


async def _leases(
    client: NodeClient, options: EdgeOptions, stop: trio.Event, observe: Observer
) -> EdgeTotals:
    outcomes: Counter[Outcome] = Counter()

    async def run_range(runner: RangeRunner) -> None:
        report = await runner.run()
        outcomes[report.outcome] += 1

    try:
        async with trio.open_nursery() as ranges:
            if options.ranges is None:
                # Running for good: catalog builds beside the ranges (edge/builds.py,
                # imported here: an edge given --ranges never builds, and starts
                # ~0.04 s sooner without the catalog merge's modules).
                from usenet_indexer.edge.builds import build_forever

                ranges.start_soon(
                    partial(
                        build_forever,
                        client,
                        stop,
                        pure=options.pure_indexer,
                        observe=observe,
                        give_back_seconds=options.stop_give_back_seconds,
                    )
                )
            await _lease_loop(client, options, stop, observe, ranges, run_range)
    except BaseExceptionGroup as group:
        # A refused token or a failed lease (with `ranges`) comes out bare, as before the nursery.
        error = sole_error(group)
        if isinstance(error, NodeApiError):
            raise error from None
        raise
    totals = EdgeTotals.from_counts(outcomes)
    logger.info("edge worker done: %s", totals)
    return totals


async def _lease_loop(
    client: NodeClient,
    options: EdgeOptions,
    stop: trio.Event,
    observe: Observer,
    ranges: trio.Nursery,
    run_range: Callable[[RangeRunner], Awaitable[None]],
) -> None:
    tail = trio.Semaphore(1)
    # The range before's `indexed`: the next range feeds nothing until it is set.
    previous: trio.Event | None = None
    leased = 0
    while not stop.is_set() and (options.ranges is None or leased < options.ranges):
        asked = trio.current_time()
        lease = await _lease_unless_stopped(client, options, stop)
        if stop.is_set():
            if lease is not None:
                await _give_back(client, lease, options)
            break
        if lease is None:
            if options.ranges is not None:
                break
            # A coordinator that held the call for new work: ask again at once.
            # One that answered at once (older, or the call failed): idle first.
            held = trio.current_time() - asked >= LEASE_WAIT_SECONDS / 2
            await _idle(stop, 0.0 if held else options.idle_seconds)
            continue
        leased += 1
        runner = RangeRunner(client, lease, options, stop, observe, tail=tail, after=previous)
        ranges.start_soon(run_range, runner)
        await runner.streamed.wait()
        previous = runner.indexed
        if runner.report is not None and _pause_after(runner.report):
            await _idle(stop, options.idle_seconds)


def _pause_after(report: RangeReport) -> bool:
    """Whether the worker waits `idle_seconds` before its next lease: after a failed
    range, and after one given back before it stored anything (a stream that breaks
    at once, e.g. a chunk link the store refuses, or an ERROR frame): the range is
    leased again first, and the same thing comes back, so without a pause the worker
    would lease and give it back in a tight loop."""
    if report.outcome is Outcome.FAILED:
        return True
    return report.outcome is Outcome.GIVEN_BACK and report.resume == report.lease.next


async def _lease_unless_stopped(
    client: NodeClient, options: EdgeOptions, stop: trio.Event
) -> EdgeLease | None:
    """A lease (as `_lease`), the call cut short by a stop: then None, or the lease
    answered just before it (the caller gives that back)."""
    lease: EdgeLease | None = None
    with trio.CancelScope() as call:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_when_set, stop, call)
            lease = await _lease(client, options)
            nursery.cancel_scope.cancel()
    return lease


async def _give_back(client: NodeClient, lease: EdgeLease, options: EdgeOptions) -> None:
    """Give back a range leased just as the worker was told to stop (shielded, for
    `stop_give_back_seconds` at most)."""
    with trio.move_on_after(options.stop_give_back_seconds, shield=True) as limit:
        try:
            await client.release(lease, stopping=True)
        except NodeApiError as error:
            # Lost meanwhile, or the coordinator is away: the lease expires by itself.
            logger.warning(
                "%s: leased as the worker stopped; could not give it back: %s", lease, error
            )
            return
        logger.info("%s: leased as the worker stopped; given back", lease)
    if limit.cancelled_caught:
        logger.warning(
            "%s: leased as the worker stopped; not given back within %.1f s (the coordinator"
            " does not answer); its lease expires there by itself",
            *(lease, options.stop_give_back_seconds),
        )


async def _lease(client: NodeClient, options: EdgeOptions) -> EdgeLease | None:
    """A lease, or None for nothing to do (or, running for good, a lease call that failed)."""
    # Running for good, the call waits for work on the coordinator (a new
    # range is leased within a moment of its plan); for N ranges it does not.
    wait = LEASE_WAIT_SECONDS if options.ranges is None else 0.0
    try:
        return await client.lease(wait)
    except NodeApiError as error:
        if options.ranges is not None or error.status in FATAL_STATUSES:
            raise
        logger.warning("lease failed: %s; asking again in %.0f s", error, options.idle_seconds)
        return None


async def _idle(stop: trio.Event, seconds: float) -> None:
    # Without automatic cyclic GC (gcpolicy), an idle worker collects here.
    collect_all()
    if seconds > 0:
        with trio.move_on_after(seconds):
            await stop.wait()
