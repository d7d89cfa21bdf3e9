"""The follower: the prefetcher asks for each group's high water mark and plans what is new.

Theory of operation
-------------------
The prefetcher is the process that holds the NNTP servers' settings and
connections (the coordinator needs none, an edge only the coordinator), so
the daemon follows its groups from here. Every `live_poll_seconds` the
follower asks, for every enabled group, the first configured server that
carries it for GROUP (its own short connection, one per group and poll),
and hands what it knows to core/follow.py, which decides:

- the live head: the articles above what is followed, planned as live
  ranges (leased first, and fetched first);
- the backfill, for a group with `backfill_days`: its floor (the first
  article posted that many days ago) is found by a bisect over OVER dates
  (nntp/dated.py) at the first poll and every `FLOOR_REFRESH_SECONDS`
  after, and one slice below the plan is planned once the last ones are
  nearly done;
- quirks (a high water mark that went down, articles expired below the low
  one), logged once each and stored for `uidx status`.

A plan commits with a notification that wakes waiting lease calls on the
coordinator, and the follower tells the prefetcher's own work list
(`on_planned`), so the new articles are fetched at once. A server that
does not answer is a warning and a try at the next poll; one group's
failure never stops the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

import attrs
import psycopg
import trio

from usenet_indexer.config import default
from usenet_indexer.core.follow import Decision, GroupView, follow
from usenet_indexer.errors import RemoteProtocolError
from usenet_indexer.nntp.carrier import Carrier, carrying
from usenet_indexer.nntp.client import StreamFactory
from usenet_indexer.nntp.dated import first_posted_since
from usenet_indexer.nntp.errors import NNTPError, NoSuchGroup
from usenet_indexer.store.groups import FollowedGroup, GroupStore
from usenet_indexer.store.ranges import PlanOverlap, RangeStore

logger = logging.getLogger(__name__)

# How often a backfill's floor is searched again: the cut-off moves with the
# clock, slowly; a bisect costs a few dozen OVER commands.
FLOOR_REFRESH_SECONDS: Final = 3600.0


@attrs.frozen
class FollowOptions:
    """What the follower needs of the settings.

    Attributes:
        poll_seconds: how often each group's high water mark is asked for.
        margin_articles: how far below the high water mark the live head stays.
        range_articles: articles per planned range, and per backfill slice.
        backfill_ahead: backfill ranges waiting before the next slice is planned.
    """

    poll_seconds: float = default("live_poll_seconds")
    margin_articles: int = default("live_margin_articles")
    range_articles: int = default("range_articles")
    backfill_ahead: int = default("backfill_ranges_ahead")


@attrs.define(eq=False)
class Follower:
    """Polls the groups' water marks and plans their live head and backfill."""

    groups: GroupStore
    ranges: RangeStore
    servers: Sequence[str]
    options: FollowOptions
    on_planned: Callable[[], None] = lambda: None
    ca_file: str | None = None
    open_stream: StreamFactory | None = None  # tests: a fake server
    # nntp_timeout_seconds, as the prefetcher's connections have it (no default:
    # the follower once asked GROUP with the default's 60 s whatever was set).
    timeout_seconds: float = attrs.field(kw_only=True)
    # Followed groups every server answered 411 for at the last poll, with why: the
    # prefetcher's health report says so (nothing else would while none is planned);
    # and those a server answered for (ok in the report).
    uncarried: dict[str, str] = attrs.field(factory=dict)
    carried: set[str] = attrs.field(factory=set)
    # The enabled groups of the last poll (None before the first): what the
    # connections saw of a group disabled since is not reported any more.
    followed: frozenset[str] | None = None
    _last_high: dict[int, int] = attrs.field(factory=dict)
    _said: dict[int, tuple[str, ...]] = attrs.field(factory=dict)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Poll every `poll_seconds` until cancelled."""
        task_status.started()
        while True:
            await self.poll()
            await trio.sleep(self.options.poll_seconds)

    async def poll(self) -> int:
        """One poll of every enabled group; returns the ranges planned."""
        try:
            groups = await trio.to_thread.run_sync(self.groups.followed)
        except psycopg.OperationalError as error:
            logger.warning("cannot read the groups to follow: %s", error)
            return 0
        planned = 0
        followed = {group.name for group in groups}
        self.followed = frozenset(followed)
        for name in [g for g in self.uncarried if g not in followed]:
            del self.uncarried[name]  # disabled or removed: not followed any more
        self.carried &= followed
        for group in groups:
            try:
                planned += await self._follow(group)
                self.uncarried.pop(group.name, None)
                self.carried.add(group.name)
            except NoSuchGroup as error:
                self.uncarried[group.name] = str(error)
                self.carried.discard(group.name)
                logger.warning("following %s: %s; trying again at the next poll", group.name, error)
            except (NNTPError, RemoteProtocolError) as error:
                logger.warning("following %s: %s; trying again at the next poll", group.name, error)
            except psycopg.OperationalError as error:
                logger.warning("following %s: database: %s", group.name, error)
        if planned:
            self.on_planned()
        return planned

    async def _follow(self, group: FollowedGroup) -> int:
        async with carrying(
            self.servers,
            group.name,
            ca_file=self.ca_file,
            timeout_seconds=self.timeout_seconds,
            open_stream=self.open_stream,
        ) as carrier:
            await trio.to_thread.run_sync(
                self.groups.set_watermarks, group.id, carrier.low, carrier.high
            )
            floor = await self._floor(group, carrier)
        view = GroupView(
            low=carrier.low,
            high=carrier.high,
            followed_to=group.followed_to,
            top=group.top,
            reached=group.reached,
            floor=floor,
            backfill_waiting=group.backfill_waiting,
            waiting_from=group.waiting_from,
            known_high=group.high,
            last_high=self._last_high.get(group.id),
            planned=group.planned,
        )
        self._last_high[group.id] = carrier.high
        decision = follow(
            view,
            margin=self.options.margin_articles,
            slice_articles=self.options.range_articles,
            ahead=self.options.backfill_ahead,
        )
        await self._report(group, decision)
        return await trio.to_thread.run_sync(self._plan, group, decision)

    async def _floor(self, group: FollowedGroup, carrier: Carrier) -> int | None:
        """The backfill's floor: stored, or searched now (first poll, or stale)."""
        if group.backfill_days is None:
            return None
        checked = group.backfill_checked_at
        fresh = checked is not None and datetime.now(UTC) - checked < timedelta(
            seconds=FLOOR_REFRESH_SECONDS
        )
        if fresh and group.backfill_floor is not None:
            return group.backfill_floor
        cutoff = datetime.now(UTC) - timedelta(days=group.backfill_days)
        found = await first_posted_since(carrier.client, carrier.low, carrier.high, cutoff)
        floor = found if found is not None else carrier.high + 1  # nothing that recent
        await trio.to_thread.run_sync(self.groups.set_floor, group.id, floor)
        logger.info(
            "%s: backfill to %d (the first article posted since %s UTC, on %s)",
            *(group.name, floor, f"{cutoff:%Y-%m-%d %H:%M}", carrier.server),
        )
        return floor

    async def _report(self, group: FollowedGroup, decision: Decision) -> None:
        if decision.quirks == self._said.get(group.id, ()):
            return
        self._said[group.id] = decision.quirks
        for quirk in decision.quirks:
            logger.warning("%s: %s", group.name, quirk)
            await trio.to_thread.run_sync(self.groups.note_quirk, group.id, quirk)

    def _plan(self, group: FollowedGroup, decision: Decision) -> int:
        # In a worker thread. The mark need not commit with the plan: ranges
        # planned above it (by a poll whose mark was not stored) are among those
        # core/follow.py plans around at the next poll.
        planned, overlapped = 0, False
        for span in decision.spans:
            try:
                ids = self.ranges.plan(
                    group.id, span.first, span.last, self.options.range_articles, kind=span.kind
                )
            except PlanOverlap as error:
                # An operator planned there since this poll read the plan: look again next time.
                logger.warning(
                    "%s: not planning %d..%d: %s", group.name, span.first, span.last, error
                )
                overlapped = True
                continue
            planned += len(ids)
            logger.info(
                "%s: planned %d %s ranges: %d..%d",
                *(group.name, len(ids), span.kind.value, span.first, span.last),
            )
        if not overlapped and decision.followed_to != group.followed_to:
            self.groups.set_followed(group.id, decision.followed_to)
            if group.followed_to is None:
                logger.info("following %s above article %d", group.name, decision.followed_to)
        return planned
