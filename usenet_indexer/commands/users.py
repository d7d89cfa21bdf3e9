"""`uidx users create|list|rotate|revoke|limits`: the newznab API's users, their API keys
and their own daily limits."""

from __future__ import annotations

import argparse
import sys

from usenet_indexer.commands import checked_name, int_column, show_secret
from usenet_indexer.config import from_process
from usenet_indexer.store.database import opened
from usenet_indexer.store.users import UserStore


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "users",
        help="create, list and revoke newznab API users",
        description="The users of the newznab API (/api) and their API keys.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        help="create a user and print its API key (shown once)",
        description="Create an API user and print its key on the first line: it is shown "
        "this once (Sonarr, Radarr, SABnzbd and Prowlarr call it the API key).",
    )
    create.add_argument("name", type=checked_name, help="the user's name")
    create.add_argument(
        "--operator",
        action="store_true",
        help="an operator: its key (or a login with it) shows the whole status page "
        "(groups, ranges, nodes, servers); a user's shows the search and NZB links only",
    )
    actions.add_parser(
        "list",
        help="the users, their roles, their requests, when they were last seen",
        description="List the API users: role, requests made, when last seen, revoked.",
    )
    rotate = actions.add_parser(
        "rotate",
        help="give a user a new API key (shown once); the old one stops working",
        description="Give an API user a new key and print it on the first line (shown this "
        "once): the old key is refused from now on and the user's logins end; its role, "
        "limits and counts stay. For a key that leaked (a shared screenshot of Sonarr's "
        "settings).",
    )
    rotate.add_argument("name", help="the user's name")
    revoke = actions.add_parser(
        "revoke",
        help="revoke a user's API key",
        description="Revoke a user's API key: its requests are refused (error 100) from now "
        "on. The name is free again: `create` of it makes a new user with a new key.",
    )
    revoke.add_argument("name", help="the user's name")
    limits = actions.add_parser(
        "limits",
        help="set a user's own daily limits (requests, NZB downloads)",
        description="Set a user's own limits per UTC day, instead of the settings' "
        "api_requests_per_day and api_grabs_per_day: a number (0: no limit), or 'default' "
        "for the settings' again. Past a limit the newznab API answers error 500 (requests) "
        "or 501 (downloads) with Retry-After, until the UTC day ends.",
    )
    limits.add_argument("name", help="the user's name")
    limits.add_argument("--requests-per-day", type=_limit, metavar="N|default")
    limits.add_argument("--grabs-per-day", type=_limit, metavar="N|default")
    parser.set_defaults(run=run)


_DEFAULT = "default"


def _limit(text: str) -> int | str:
    """A limit as given: a number >= 0, or 'default'."""
    if text == _DEFAULT:
        return text
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"a number >= 0 or 'default', not {text!r}")
    # Stored in an int column.
    return int_column(text)


def run(args: argparse.Namespace) -> int:
    """Create, revoke or list API users.

    Raises:
        UserExists: create, of a name a live user has (a revoked one's is free again).
        UnknownUser: rotate or revoke, of no live user of that name.
    """
    with opened(from_process(args.config)) as pool:
        store = UserStore(pool)
        if args.action == "create":
            # Shown before the user is committed: a key lost on the way
            # (stdout on a full disk) leaves no user, and a retry works.
            with store.creating(args.name, operator=args.operator) as key:
                role = "operator" if args.operator else "API user"
                said = f"(the API key of {args.name}, {role}; it is shown this once)"
                show_secret([key, said], undone=f"user {args.name} not created")
            return 0
        if args.action == "rotate":
            with store.replacing_key(args.name) as key:
                said = f"(the new API key of {args.name}; it is shown this once)"
                show_secret([key, said], undone=f"the key of {args.name} not changed")
            return 0
        if args.action == "revoke":
            store.revoke(args.name)
            print(f"revoked {args.name}")
            return 0
        if args.action == "limits":
            return _set_limits(store, args)
        rows = store.list()
    print(f"{'user':24} {'role':9} {'requests':>9}  {'last seen':32} {'today (limits)':24} revoked")
    for row in rows:
        role = "operator" if row.operator else "user"
        today = (
            f"{row.requests_today} ({_said(row.requests_per_day)}), "
            f"{row.grabs_today} NZB ({_said(row.grabs_per_day)})"
        )
        print(
            f"{row.name:24} {role:9} {row.requests:>9}  {row.last_seen or 'never'!s:32} "
            f"{today:24} {row.revoked_at or ''}"
        )
    return 0


def _said(limit: int | None) -> str:
    return _DEFAULT if limit is None else "none" if limit == 0 else str(limit)


def _set_limits(store: UserStore, args: argparse.Namespace) -> int:
    """`uidx users limits NAME --requests-per-day N --grabs-per-day N`.

    Raises:
        UnknownUser: no live user of that name.
    """
    given = {"requests_per_day": args.requests_per_day, "grabs_per_day": args.grabs_per_day}
    changes = {k: None if v == _DEFAULT else int(v) for k, v in given.items() if v is not None}
    if not changes:
        print("uidx users limits: give --requests-per-day or --grabs-per-day", file=sys.stderr)
        return 2
    store.set_limits(args.name, changes)
    said = ", ".join(f"{k.replace('_', ' ')}: {_said(v)}" for k, v in changes.items())
    print(f"{args.name}: {said}")
    return 0
