"""The `uidx` command line: one program for every role and operator command.

Each subcommand lives in `usenet_indexer.commands.<name>` and offers
`add_parser(subparsers)` and `run(args) -> int`; this module only wires them.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import Protocol

from usenet_indexer.errors import UidxError

# Subcommands, in the order `uidx --help` lists them.
COMMANDS = (
    "index",
    "generate",
    "coordinator",
    "edge",
    "groups",
    "ranges",
    "nodes",
    "status",
    "spool",
    "catalog",
    "db",
)


class _Command(Protocol):
    def add_parser(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    ) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uidx", description="A distributed usenet binary indexer."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument(
        "--config", type=Path, help="settings file (default: $UIDX_HOME/uidx.toml if it exists)"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module: _Command = import_module(f"usenet_indexer.commands.{name}")
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        result: int = args.run(args)
    except UidxError as error:
        print(f"uidx {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return result
