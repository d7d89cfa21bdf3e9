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

from usenet_indexer.errors import ConfigError, UidxError

# The exit status of a settings mistake (sysexits.h EX_CONFIG); the
# supervisor halts on it instead of restarting.
EXIT_CONFIG = 78

# Subcommands, in the order `uidx --help` lists them.
COMMANDS = (
    "standalone",
    "index",
    "generate",
    "coordinator",
    "prefetch",
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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `uidx` parser; with `only`, just that subcommand's (its imports alone)."""
    parser = argparse.ArgumentParser(
        prog="uidx", description="A distributed usenet binary indexer."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument(
        "--config", type=Path, help="settings file (default: $UIDX_HOME/uidx.toml if it exists)"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Importing a subcommand imports what it runs on (the coordinator: trio,
    # hypercorn, psycopg); `uidx index` should not pay for those.
    for name in (only,) if only else COMMANDS:
        module: _Command = import_module(f"usenet_indexer.commands.{name}")
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((w for w in words if w in COMMANDS), None)
    parser = build_parser(chosen if chosen and "-h" not in words[: words.index(chosen)] else None)
    args = parser.parse_args(words)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        # The process id tells a supervisor's workers apart in one journal.
        format="%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not args.verbose:
        # One line per HTTP request of an edge is noise; -v shows them.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        result: int = args.run(args)
    except ConfigError as error:
        # EX_CONFIG: a supervisor or systemd must not restart into the same mistake.
        print(f"uidx {args.command}: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except UidxError as error:
        print(f"uidx {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return result
