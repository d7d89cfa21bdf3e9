"""The `uidx` command line: one program for every role and operator command.

Each subcommand lives in `usenet_indexer.commands.<name>` and offers
`add_parser(subparsers)` and `run(args) -> int`; this module wires them and
turns what goes wrong into one line on stderr and an exit status:

    0    done
    1    an error (UidxError), a file the system refused (an OSError
         naming it: path and reason, the traceback only with -v), or
         standard output refused (a full disk)
    2    a usage mistake, reported by the (sub)command's own parser
    78   a configuration mistake (ConfigError, sysexits.h EX_CONFIG), or a
         database another (newer) uidx migrated (SchemaMismatch): restarting
         into either changes nothing
    130  interrupted (SIGINT)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import Protocol, TextIO, cast

import attrs

from usenet_indexer.config import check_file
from usenet_indexer.errors import ConfigError, OutputError, SchemaMismatch, UidxError

logger = logging.getLogger(__name__)

# The exit status of a settings mistake (sysexits.h EX_CONFIG); the
# supervisor halts on it instead of restarting.
EXIT_CONFIG = 78
# The exit status of any other error.
EXIT_ERROR = 1

# Every uidx process logs in this form; the process id tells a supervisor's
# workers apart in one journal (and testing/logcheck reads it).
LOG_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"

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
    "users",
    "status",
    "spool",
    "catalog",
    "nzb",
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
    """Run `uidx` with `argv` (default: the process's arguments); the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((w for w in words if w in COMMANDS), None)
    parser = build_parser(chosen if chosen and "-h" not in words[: words.index(chosen)] else None)
    args = parse(parser, words)
    # Messages name the whole command: `uidx db start: ...`.
    command = chosen_parser(parser, args).prog
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format=LOG_FORMAT,
        stream=sys.stderr,
    )
    if not args.verbose:
        # One line per HTTP request of an edge is noise; -v shows them.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    stdout = sys.stdout
    sys.stdout = cast(TextIO, _Stdout(stdout))
    try:
        _check_config_file(args.config)
        result: int = args.run(args)
        # Out now, not at exit where a refused write is only a warning.
        sys.stdout.flush()
    except (ConfigError, SchemaMismatch) as error:
        # EX_CONFIG: a supervisor or systemd must not restart into the same mistake
        # (nor into a schema only a newer uidx knows).
        return _report(command, str(error), EXIT_CONFIG)
    except UidxError as error:
        return _report(command, str(error), EXIT_ERROR)
    except BrokenPipeError:
        # `uidx status | head`: the reader has what it wanted. Python would
        # report the pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except OSError as error:
        # The last resort for a file no command expected to be refused: named
        # by the system, it is the operator's to fix, not a bug to trace.
        if error.filename is None:
            raise
        return _report(command, _os_problem(error), EXIT_ERROR)
    except KeyboardInterrupt:
        return 130
    finally:
        sys.stdout = stdout
    return result


@attrs.define(eq=False)
class _Stdout:
    """Standard output whose refused writes are an OutputError naming it.

    A print() that the system refuses (stdout on a full disk) raises an
    OSError naming no file, which tells nothing of where it was written.
    A closed pipe stays a BrokenPipeError. Everything else is the stream's.
    """

    _stream: TextIO

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError.of("standard output", error) from error

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError.of("standard output", error) from error

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def parse(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.Namespace:
    """The parsed arguments; a mistake is reported by the deepest parser chosen (exit 2).

    `parse_args` has the top parser report arguments that no parser knows,
    with the top usage; the usage of the (sub)command they were given to
    says what it does take.
    """
    args, unknown = parser.parse_known_args(words)
    if unknown:
        chosen_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def chosen_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the deepest subcommand `args` chose (`uidx db start`: that of `start`)."""
    while True:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subparsers[0].dest, None) if subparsers else None
        if name is None or name not in subparsers[0].choices:
            return parser
        parser = subparsers[0].choices[name]


def _check_config_file(path: Path | None) -> None:
    # Every command, also one that reads no settings (index, generate): a
    # --config that names nothing readable is a mistake, never ignored.
    # Nor one that is no regular file: opening a FIFO waited for a writer.
    if path is not None:
        check_file(path)


def _os_problem(error: OSError) -> str:
    where = str(error.filename)
    if error.filename2 is not None:
        where += f" -> {error.filename2}"
    return f"{where}: {error.strerror or error}"


def _drop_refused_stdout() -> None:
    # What standard output refused may stay in its buffer: Python would
    # report the refusal again when it flushes stdout at exit.
    try:
        sys.stdout.flush()
    except (OSError, UidxError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _report(command: str, message: str, status: int) -> int:
    # Only with -v: where it was raised, for a bug report; before the
    # message, which stays the last line.
    logger.debug("%s: where it was raised", command, exc_info=True)
    # A command that failed to write its output (`uidx nodes create` with
    # stdout on a full disk) leaves it in stdout's buffer.
    _drop_refused_stdout()
    print(f"{command}: {message}", file=sys.stderr)
    return status
