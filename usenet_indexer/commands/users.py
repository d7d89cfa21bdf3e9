"""`uidx users create|list|revoke`: the newznab API's users and their API keys."""

from __future__ import annotations

import argparse

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
    create.add_argument("name", help="the user's name")
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
    revoke = actions.add_parser(
        "revoke",
        help="revoke a user's API key",
        description="Revoke a user's API key: its requests are refused (error 100) from now on.",
    )
    revoke.add_argument("name", help="the user's name")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Create, revoke or list API users.

    Raises:
        UserExists: create, of a name taken.
        UnknownUser: revoke, of no live user of that name.
    """
    with opened(from_process(args.config)) as pool:
        store = UserStore(pool)
        if args.action == "create":
            key = store.create(args.name, operator=args.operator)
            print(key)
            role = "operator" if args.operator else "API user"
            print(f"(the API key of {args.name}, {role}; it is shown this once)")
            return 0
        if args.action == "revoke":
            store.revoke(args.name)
            print(f"revoked {args.name}")
            return 0
        rows = store.list()
    print(f"{'user':24} {'role':9} {'requests':>9}  {'last seen':32} {'revoked'}")
    for row in rows:
        role = "operator" if row.operator else "user"
        print(
            f"{row.name:24} {role:9} {row.requests:>9}  {row.last_seen or 'never'!s:32} "
            f"{row.revoked_at or ''}"
        )
    return 0
