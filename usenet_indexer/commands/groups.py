"""`uidx groups add|list`: the groups the coordinator indexes.

`add` asks the NNTP servers (UIDX_NNTP) for the group (GROUP, the first
server in the list that carries it) and stores its low and high water marks:
the group is checked. A group no server carries is not added. Without
servers, or to add it without asking now, `--unchecked` adds it as not yet
checked (`uidx status` says so); it becomes checked when a server answers
GROUP for it (the prefetcher, `uidx ranges plan --days`).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager

import attrs
import trio

from usenet_indexer.config import Settings, from_process
from usenet_indexer.errors import ConfigError, RemoteProtocolError
from usenet_indexer.nntp.client import NNTPClient, ServerURL, connect
from usenet_indexer.nntp.errors import NNTPError, NoSuchGroup
from usenet_indexer.store.database import opened
from usenet_indexer.store.groups import GroupStore

logger = logging.getLogger(__name__)


@attrs.frozen
class Carrier:
    """A server that carries the group: the connection, in the group, and what GROUP said."""

    client: NNTPClient
    count: int
    low: int
    high: int

    @property
    def server(self) -> str:
        return self.client.server


@asynccontextmanager
async def carrying(urls: Sequence[str], group: str) -> AsyncIterator[Carrier]:
    """A connection to the first server of `urls` that carries `group`, the group selected.

    A server that is down or refuses is logged and passed over.

    Raises:
        NoSuchGroup: every server answered 411.
        NNTPError: no server carries the group and some did not answer.
        ConfigError: a URL is not an NNTP URL.
    """
    refusals: list[str] = []
    missing = 0  # servers that answered 411
    for url in urls:
        async with AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(connect(url))
                count, low, high = await client.group(group)
            except (NNTPError, RemoteProtocolError) as error:
                # An NNTPError names its server; a protocol error does not (and the
                # URL may hold a password).
                said = str(error) if isinstance(error, NNTPError) else f"{_where(url)}: {error}"
                refusals.append(said)
                if isinstance(error, NoSuchGroup):
                    missing += 1
                else:
                    logger.warning("GROUP %s: passing over a server: %s", group, said)
                continue
            yield Carrier(client, count, low, high)
            return
    details = "; ".join(refusals)
    if missing == len(urls):
        raise NoSuchGroup(411, f"no server carries {group} ({details})", command=f"GROUP {group}")
    raise NNTPError(f"GROUP {group}: no server that answered carries it ({details})")


def _where(url: str) -> str:
    return ServerURL.parse(url).server


_GROUPS = "add and list the groups to index"
_ADD = "add a group, checked against the NNTP servers (UIDX_NNTP) unless --unchecked"
_LIST = "list the groups, with their planned and indexed articles"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("groups", help=_GROUPS, description=f"{_GROUPS}.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help=_ADD, description=f"{_ADD}.")
    add.add_argument("name")
    add.add_argument(
        "--backfill-days", type=int, help="how far back `ranges plan` goes without --from/--days"
    )
    add.add_argument(
        "--unchecked",
        action="store_true",
        help="add it without asking a server; it is checked when one answers GROUP for it",
    )
    add.add_argument(
        "--low", type=int, help="the server's lowest article (only with --unchecked, no servers)"
    )
    add.add_argument("--high", type=int, help="the server's highest article (likewise)")
    actions.add_parser("list", help=_LIST, description=f"{_LIST}.")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = from_process(args.config)
    if args.action == "add":
        return _add(args, settings)
    with opened(settings) as pool:
        rows = GroupStore(pool).list()
    print(f"{'group':40} {'ranges':>8} {'done':>6} {'indexed':>14} {'planned':>14}  {'low..high'}")
    for row in rows:
        span = f"{row.low}..{row.high}" if row.low is not None else "-"
        print(
            f"{row.name:40} {row.ranges:>8} {row.ranges_done:>6} {row.articles_indexed:>14,} "
            f"{row.articles_planned:>14,}  {span}"
        )
    return 0


def _add(args: argparse.Namespace, settings: Settings) -> int:
    if args.backfill_days is not None and args.backfill_days < 0:
        raise ConfigError("--backfill-days", "must not be negative")
    by_hand = args.low is not None or args.high is not None
    if settings.nntp and by_hand:
        raise ConfigError("--low/--high", "the NNTP servers (UIDX_NNTP) are asked instead")
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
    count, low, high, server = trio.run(_water_marks, settings.nntp, args.name)
    with opened(settings) as pool:
        GroupStore(pool).add(
            args.name, backfill_days=args.backfill_days, low=low, high=high, checked=True
        )
    print(f"added {args.name}: articles {low}..{high} (about {count:,}) on {server}")
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


async def _water_marks(servers: Sequence[str], group: str) -> tuple[int, int, int, str]:
    async with carrying(servers, group) as carrier:
        return carrier.count, carrier.low, carrier.high, carrier.server
