"""`uidx nodes create|list|rotate|revoke`: the edge nodes and their tokens."""

from __future__ import annotations

import argparse

from usenet_indexer.commands import checked_name, show_secret
from usenet_indexer.config import from_process
from usenet_indexer.errors import UidxError
from usenet_indexer.store.database import opened
from usenet_indexer.store.nodes import NodeStore


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "nodes",
        help="create, list, rotate and revoke edge nodes",
        description="The edge nodes of the coordinator and their tokens.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        help="create a node and print its token (shown once)",
        description="Create a node and print its token: it is shown this once (NODE_TOKEN).",
    )
    create.add_argument("name", type=checked_name, help="the node's name")
    actions.add_parser(
        "list",
        help="the nodes, when they were last seen, what they hold",
        description="List the nodes: when they were last seen, how many ranges they hold.",
    )
    rotate = actions.add_parser(
        "rotate",
        help="give a node a new token (shown once); the old one stops working",
        description="Give a node a new token and print it (shown this once): edges with "
        "the old token are refused from now on, and the ranges the node holds are planned "
        "again (from where their last batch ended); restart its edges with the new "
        "NODE_TOKEN. For a token that leaked.",
    )
    rotate.add_argument("name", help="the node's name")
    revoke = actions.add_parser(
        "revoke",
        help="revoke a node's token",
        description="Revoke a node's token: its edges are refused from now on. The name "
        "is free again: `create` of it makes a new node with a new token.",
    )
    revoke.add_argument("name", help="the node's name")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with opened(from_process(args.config)) as pool:
        store = NodeStore(pool)
        # Shown before the node (or its new token) is committed: a token lost on the
        # way (stdout on a full disk) changes nothing, and a retry works.
        if args.action == "create":
            with store.creating(args.name) as token:
                _show(token, f"the token of {args.name}", f"node {args.name} not created")
            return 0
        if args.action == "rotate":
            with store.replacing_token(args.name) as token:
                _show(
                    token, f"the new token of {args.name}", f"the token of {args.name} not changed"
                )
            return 0
        if args.action == "revoke":
            if not store.revoke(args.name):
                raise UidxError(f"no live node named {args.name}")
            print(f"revoked {args.name}")
            return 0
        rows = store.list()
    print(f"{'node':24} {'leases':>6}  {'last seen':32} {'revoked'}")
    for row in rows:
        print(
            f"{row.name:24} {row.leases:>6}  {row.last_seen or 'never'!s:32} {row.revoked_at or ''}"
        )
    return 0


def _show(token: str, what: str, undone: str) -> None:
    said = f"({what}; it is shown this once: give it to the edge as NODE_TOKEN)"
    show_secret([token, said], undone=undone)
