"""`uidx ranges plan`: cut a group's articles into ranges for the edges to lease."""

from __future__ import annotations

import argparse

from usenet_indexer.config import from_process
from usenet_indexer.errors import ConfigError
from usenet_indexer.store.database import opened
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.ranges import RangeStore


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("ranges", help="plan article ranges")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    plan = actions.add_parser("plan", help="plan the articles FROM..TO of GROUP, oldest first")
    plan.add_argument("group")
    plan.add_argument("--from", dest="first", type=int, required=True, help="first article")
    plan.add_argument("--to", dest="last", type=int, required=True, help="last article")
    plan.add_argument(
        "--size", type=int, help="articles per range (default: the range_articles setting)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = from_process(args.config)
    size = args.size or settings.range_articles
    if args.first < 0 or args.last < args.first:
        raise ConfigError("--from/--to", f"{args.first}..{args.last} is not a span of articles")
    if size < 1:
        raise ConfigError("--size", "must be at least 1")
    with opened(settings) as pool:
        group = GroupStore(pool).id_of(args.group)
        ids = RangeStore(pool).plan(group, args.first, args.last, size)
    print(
        f"planned {len(ids)} ranges of up to {size:,} articles in {args.group}: {args.first}..{args.last}"
    )
    return 0
