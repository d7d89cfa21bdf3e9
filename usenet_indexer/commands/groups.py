"""`uidx groups add|list`: the groups the coordinator indexes."""

from __future__ import annotations

import argparse

from usenet_indexer.config import from_process
from usenet_indexer.store.database import opened
from usenet_indexer.store.groups import GroupStore


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("groups", help="add and list the groups to index")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a group")
    add.add_argument("name")
    add.add_argument(
        "--backfill-days", type=int, help="how far back `ranges plan --days` goes by default"
    )
    add.add_argument(
        "--low", type=int, help="the server's lowest article (until the NNTP client asks it)"
    )
    add.add_argument("--high", type=int, help="the server's highest article")
    actions.add_parser("list", help="the groups, with their planned and indexed articles")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with opened(from_process(args.config)) as pool:
        store = GroupStore(pool)
        if args.action == "add":
            store.add(args.name, backfill_days=args.backfill_days, low=args.low, high=args.high)
            print(f"added {args.name}")
            return 0
        rows = store.list()
    print(f"{'group':40} {'ranges':>8} {'done':>6} {'indexed':>14} {'planned':>14}  {'low..high'}")
    for row in rows:
        span = f"{row.low}..{row.high}" if row.low is not None else "-"
        print(
            f"{row.name:40} {row.ranges:>8} {row.ranges_done:>6} {row.articles_indexed:>14,} "
            f"{row.articles_planned:>14,}  {span}"
        )
    return 0
