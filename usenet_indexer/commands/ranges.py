"""`uidx ranges plan`: cut a group's articles into ranges for the edges to lease;
`uidx ranges retry`: put ranges parked as failed back.

Either a span of articles (`--from A --to B`) or a span of time (`--days N`,
by default the group's backfill_days): from just below what is planned
already (or from the server's high water mark) down to the first article
posted N days ago, found by a bisect over the Date of OVER lines
(article_dates.py decides where to look; this module reads).

A range the coordinator refused again and again is parked as failed
(store/ranges.py); `uidx status` shows it with the reason, and `retry`
plans it again from its resume point, once what refused it is mended.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta

import attrs
import trio

from usenet_indexer.commands import MAX_DAYS, article_number, days, positive_int, row_id
from usenet_indexer.config import Settings, from_process
from usenet_indexer.errors import ConfigError
from usenet_indexer.nntp.carrier import carrying_as_set
from usenet_indexer.nntp.dated import first_posted_since
from usenet_indexer.store.database import opened
from usenet_indexer.store.groups import Group, GroupStore
from usenet_indexer.store.ranges import RangeStore


@attrs.frozen
class DatedSpan:
    """What the servers said for `--days`: the span to plan (empty when first > last)."""

    first: int
    last: int
    low: int
    high: int
    cutoff: datetime


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "ranges",
        help="plan article ranges",
        description="The article ranges of the groups, which the edges lease and index.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    plan = actions.add_parser(
        "plan",
        help="plan the articles FROM..TO of GROUP, or those of the last N days below the planned",
        description=(
            "Cut a group's articles into ranges for the edges to lease: the articles"
            " --from A --to B, or, with --days N (default: the group's backfill_days), from"
            " just below what is planned (or the server's high water mark) down to the first"
            " article posted N days ago, which the NNTP servers are asked for."
        ),
    )
    plan.add_argument("group", help="the group (added with `uidx groups add`)")
    plan.add_argument("--from", dest="first", type=article_number, help="first article")
    plan.add_argument("--to", dest="last", type=article_number, help="last article")
    plan.add_argument(
        "--days",
        type=days,
        help="plan down to the first article posted N days ago, from below what is planned "
        "(default: the group's backfill_days); asks the NNTP servers",
    )
    plan.add_argument(
        "--size",
        type=positive_int,
        help="articles per range (default: the range_articles setting)",
    )
    plan.set_defaults(run=run)
    retry = actions.add_parser(
        "retry",
        help="plan ranges parked as failed again (RANGE_ID ... or --all)",
        description=(
            "Put ranges parked as failed (refused again and again: `uidx status` shows them"
            " and why) back in the plan, from their resume points: the edges lease them again."
        ),
    )
    retry.add_argument("range_ids", metavar="RANGE_ID", type=row_id, nargs="*", help="a range's id")
    retry.add_argument("--all", action="store_true", help="every parked range")
    retry.set_defaults(run=run_retry)


def run_retry(args: argparse.Namespace) -> int:
    """`uidx ranges retry`: the named parked ranges (or --all) planned again."""
    if bool(args.range_ids) == args.all:
        raise ConfigError("RANGE_ID/--all", "give the ids of parked ranges, or --all")
    with opened(from_process(args.config)) as pool:
        back = RangeStore(pool).retry(None if args.all else args.range_ids)
    if not back:
        print("no range is parked")
    else:
        print(f"planned again: {len(back)} ranges ({', '.join(map(str, back))})")
    return 0


def run(args: argparse.Namespace) -> int:
    settings = from_process(args.config)
    size = settings.range_articles if args.size is None else args.size
    _check(args, size)
    with opened(settings) as pool:
        groups = GroupStore(pool)
        ranges = RangeStore(pool)
        group = groups.get(args.group)
        if args.first is not None:
            first, last, since = args.first, args.last, ""
        else:
            span = _dated_span(settings, group, args.days, ranges.lowest_planned(group.id))
            # GROUP was asked anyway: `uidx status` shows the lag from these.
            groups.set_watermarks(group.id, span.low, span.high)
            if span.first > span.last:
                print(f"nothing to plan in {args.group}: {_nothing(span)}")
                return 0
            first, last = span.first, span.last
            since = f" (posted since {span.cutoff:%Y-%m-%d %H:%M:%S} UTC)"
        ids = ranges.plan(group.id, first, last, size)
    print(
        f"planned {len(ids)} ranges of up to {size:,} articles in {args.group}: {first}..{last}{since}"
    )
    return 0


def _check(args: argparse.Namespace, size: int) -> None:
    by_articles = args.first is not None or args.last is not None
    if by_articles and args.days is not None:
        raise ConfigError("--days", "give either --from/--to or --days")
    if by_articles and (args.first is None or args.last is None):
        missing = "--to" if args.last is None else "--from"
        raise ConfigError(missing, "give --from and --to together (or --days)")
    if by_articles and args.first > args.last:
        raise ConfigError("--from/--to", f"{args.first}..{args.last} is not a span of articles")
    if size < 1:
        raise ConfigError("--size", "must be at least 1")


def _dated_span(
    settings: Settings, group: Group, days: int | None, lowest_planned: int | None
) -> DatedSpan:
    if days is None:
        days = group.backfill_days
    if days is None:
        raise ConfigError(
            "--days", f"give --from/--to or --days ({group.name} has no backfill_days)"
        )
    if days > MAX_DAYS:
        # Stored before `groups add` and `groups set` bounded it.
        raise ConfigError(
            "--days",
            f"{group.name}'s backfill_days {days} is more than {MAX_DAYS}:"
            " give --days, or change it with `uidx groups set`",
        )
    if not settings.nntp:
        raise ConfigError("nntp", "ranges plan --days asks the NNTP servers: set UIDX_NNTP")
    cutoff = datetime.now(UTC) - timedelta(days=days)
    return trio.run(_search, settings, group.name, cutoff, lowest_planned)


async def _search(
    settings: Settings, group: str, cutoff: datetime, lowest_planned: int | None
) -> DatedSpan:
    async with carrying_as_set(settings, group) as carrier:
        low, high = carrier.low, carrier.high
        last = high if lowest_planned is None else min(high, lowest_planned - 1)
        _progress(f"{group} on {carrier.server}: articles {low}..{high}; searching {low}..{last}")
        found = await first_posted_since(carrier.client, low, last, cutoff, _progress)
    first = found if found is not None else last + 1
    return DatedSpan(first, last, low, high, cutoff)


def _nothing(span: DatedSpan) -> str:
    since = f"{span.cutoff:%Y-%m-%d %H:%M:%S} UTC"
    if span.high < span.low:
        return f"the group is empty on the server (GROUP says {span.low}..{span.high})"
    if span.last < span.low:
        return f"the ranges planned start at {span.last + 1}, the server's low is {span.low}"
    return f"no article of {span.low}..{span.last} was posted since {since}"


def _progress(message: str) -> None:
    print(f"uidx ranges: {message}", file=sys.stderr, flush=True)
