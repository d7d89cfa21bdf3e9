"""`uidx groups add|set|disable|enable|list`: the groups the coordinator indexes.

The daemon follows every enabled group by itself (prefetch/follower.py):
the new articles above its high water mark as they come (the live head),
and, with `--backfill-days N`, the articles of the last N days below, a
slice at a time behind the head. `disable` stops both (the plan is kept,
and nothing of the group is leased); `enable` resumes them.

`add` asks the NNTP servers (UIDX_NNTP) for the group (GROUP, the first
server in the list that carries it) and stores its low and high water marks:
the group is checked. A group no server carries is not added. Without
servers, or to add it without asking now, `--unchecked` adds it as not yet
checked (`uidx status` says so); it becomes checked when a server answers
GROUP for it (the prefetcher, `uidx ranges plan --days`).
"""

from __future__ import annotations

import argparse

import trio

from usenet_indexer.commands import article_number, days
from usenet_indexer.commands.status import backfill_reached
from usenet_indexer.config import Settings, from_process
from usenet_indexer.errors import ConfigError, LocalProtocolError
from usenet_indexer.nntp.carrier import carrying_as_set
from usenet_indexer.nntp.protocol import Group
from usenet_indexer.store.database import opened
from usenet_indexer.store.groups import GroupStore

_GROUPS = "add, change and list the groups to index"
_ADD = "add a group, checked against the NNTP servers (UIDX_NNTP) unless --unchecked"
_SET = "change a group's backfill"
_DISABLE = "stop following and indexing a group (its plan is kept)"
_ENABLE = "follow and index a disabled group again"
_LIST = "list the groups, with their state, planned and indexed articles and backfill"
_BACKFILL = (
    "how many days back the daemon indexes, below the live head (and the default of"
    " `ranges plan --days`)"
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("groups", help=_GROUPS, description=f"{_GROUPS}.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help=_ADD, description=f"{_ADD}.")
    add.add_argument("name")
    add.add_argument("--backfill-days", type=days, help=_BACKFILL)
    add.add_argument(
        "--unchecked",
        action="store_true",
        help="add it without asking a server; it is checked when one answers GROUP for it",
    )
    add.add_argument(
        "--low",
        type=article_number,
        help="the server's lowest article (only with --unchecked, no servers)",
    )
    add.add_argument("--high", type=article_number, help="the server's highest article (likewise)")
    change = actions.add_parser("set", help=_SET, description=f"{_SET}.")
    change.add_argument("name")
    backfill = change.add_mutually_exclusive_group(required=True)
    backfill.add_argument("--backfill-days", type=days, help=_BACKFILL)
    backfill.add_argument("--no-backfill", action="store_true", help="index only the live head")
    for action, text in (("disable", _DISABLE), ("enable", _ENABLE)):
        actions.add_parser(action, help=text, description=f"{text}.").add_argument("name")
    actions.add_parser("list", help=_LIST, description=f"{_LIST}.")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = from_process(args.config)
    if args.action == "add":
        return _add(args, settings)
    if args.action in ("set", "disable", "enable"):
        return _change(args, settings)
    with opened(settings) as pool:
        rows = GroupStore(pool).list()
    # The state and the backfill as `uidx status` shows them (disabled, unchecked; the
    # lowest article the backfill reached).
    print(
        f"{'group':40} {'state':9} {'ranges':>8} {'done':>6} {'indexed':>14} {'planned':>14}"
        f" {'backfill':>16}  {'low..high'}"
    )
    for row in rows:
        span = f"{row.low}..{row.high}" if row.low is not None else "-"
        print(
            f"{row.name:40} {row.state:9} {row.ranges:>8} {row.ranges_done:>6}"
            f" {row.articles_indexed:>14,} {row.articles_planned:>14,}"
            f" {backfill_reached(row):>16}  {span}"
        )
    return 0


def _add(args: argparse.Namespace, settings: Settings) -> int:
    _check_name(args.name)
    by_hand = args.low is not None or args.high is not None
    if settings.nntp and by_hand:
        raise ConfigError("--low/--high", "the NNTP servers (UIDX_NNTP) are asked instead")
    if args.low is not None and args.high is not None and args.low > args.high:
        # GROUP answers high < low for an empty group, but a mark typed by hand
        # so is a mistake: the follower would plan from a high below the low.
        raise ConfigError("--low/--high", f"{args.low}..{args.high}: the low is above the high")
    if args.unchecked:
        return _add_unchecked(args, settings)
    if not settings.nntp:
        # Added so, the group would have no water marks and no sign that no
        # server was ever asked whether it exists.
        raise ConfigError(
            "UIDX_NNTP",
            f"no NNTP server is configured to check {args.name} against;"
            " set it, or add the group with --unchecked",
        )
    # Ask first: a group no server carries is not stored.
    count, low, high, server = trio.run(_water_marks, settings, args.name)
    with opened(settings) as pool:
        GroupStore(pool).add(
            args.name, backfill_days=args.backfill_days, low=low, high=high, checked=True
        )
    print(f"added {args.name}: articles {low}..{high} (about {count:,}) on {server}")
    return 0


def _change(args: argparse.Namespace, settings: Settings) -> int:
    with opened(settings) as pool:
        groups = GroupStore(pool)
        if args.action == "set":
            groups.set_backfill(args.name, args.backfill_days)
            said = (
                "no backfill: the live head only"
                if args.backfill_days is None
                else f"backfill {args.backfill_days} days (the daemon plans it at its next poll)"
            )
        else:
            groups.set_enabled(args.name, args.action == "enable")
            said = (
                "enabled: followed and indexed again"
                if args.action == "enable"
                else "disabled: not followed, its ranges not leased (the plan is kept)"
            )
    print(f"{args.name}: {said}")
    return 0


def _add_unchecked(args: argparse.Namespace, settings: Settings) -> int:
    with opened(settings) as pool:
        GroupStore(pool).add(
            args.name, backfill_days=args.backfill_days, low=args.low, high=args.high
        )
    asked = "not asked" if settings.nntp else "no NNTP servers configured"
    marks = "as given" if args.low is not None or args.high is not None else "unknown"
    print(
        f"added {args.name}, unchecked ({asked}; low/high water marks {marks}):"
        " checked when a server answers GROUP for it"
    )
    return 0


def _check_name(name: str) -> None:
    # The NNTP layer's own rule (the GROUP command it would send): a name it
    # refuses would be stored and then fail every poll of the prefetcher.
    try:
        Group(name).encode()
    except LocalProtocolError as error:
        raise ConfigError("name", f"{error}; no NNTP server could be asked for it") from None
    # That rule lets other control characters through (they break no command
    # line); no group has one, and `groups list` and `status` would print it.
    if not name.isprintable():
        raise ConfigError("name", f"group name contains a control character: {name!r}")


async def _water_marks(settings: Settings, group: str) -> tuple[int, int, int, str]:
    async with carrying_as_set(settings, group) as carrier:
        return carrier.count, carrier.low, carrier.high, carrier.server
