"""One module per `uidx` subcommand: `add_parser(subparsers)` and `run(args)`.

What the subcommands share lives here: argument types, and `output(path)`,
the one way a command writes a file named on its command line.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import attrs

from usenet_indexer.errors import OutputError

# The path that means standard output, as in most Unix tools.
STDOUT = "-"

# The most days a command takes (a backfill, `ranges plan --days`): 100
# years, more than usenet's age and far more than any server's retention,
# and small enough that now - days is a date (datetime ends at year 1) and
# fits the int column of groups.backfill_days.
MAX_DAYS = 36_500


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (and at most a bigint)."""
    return _within(text, 1, _max_bigint())


def non_negative_int(text: str) -> int:
    """An argparse type: an integer of at least 0 (and at most a bigint)."""
    return _within(text, 0, _max_bigint())


def article_number(text: str) -> int:
    """An argparse type: an article number, 0 up to one below PostgreSQL's largest bigint.

    One below: a range's resume point, one past its last article, is a bigint too.
    """
    return _within(text, 0, _max_bigint() - 1)


def row_id(text: str) -> int:
    """An argparse type: a row's id, 1 up to PostgreSQL's bigint."""
    return _within(text, 1, _max_bigint())


def int_column(text: str) -> int:
    """An argparse type: a count stored in an int column, 0 up to PostgreSQL's int."""
    from usenet_indexer.wire.batchwire import MAX_INT

    return _within(text, 0, MAX_INT)


def _max_bigint() -> int:
    # Imported when a number is checked: batchwire (msgpack, the core) would
    # add ~45 ms to every command's start.
    from usenet_indexer.wire.batchwire import MAX_BIGINT

    return MAX_BIGINT


def days(text: str) -> int:
    """An argparse type: a number of days, 0 up to MAX_DAYS."""
    return _within(text, 0, MAX_DAYS)


# The longest name of a node or an API user: the tables take any text, but
# `list` shows names in columns of 24 and a name is typed by an operator.
MAX_NAME_CHARACTERS = 200


def checked_name(text: str) -> str:
    """An argparse type: the name of a node or a user, 1 to 200 printable characters."""
    if not text:
        raise argparse.ArgumentTypeError("a name cannot be empty")
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"{text!r} contains a control character")
    if len(text) > MAX_NAME_CHARACTERS:
        raise argparse.ArgumentTypeError(
            f"{len(text)} characters is more than {MAX_NAME_CHARACTERS}"
        )
    return text


def seconds(minimum: float, maximum: float) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds within [minimum, maximum]."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{value:g} is not within {minimum:g}..{maximum:g}")
        return value

    return parse


def _within(text: str, minimum: int, maximum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
    if value > maximum:
        raise argparse.ArgumentTypeError(f"{value} is more than {maximum}")
    return value


def show_secret(lines: Sequence[str], *, undone: str) -> None:
    """Print `lines` and flush them: a secret shown once, out before what it opens is kept.

    Args:
        undone: what is not done if they cannot be shown ("node e1 not created").

    Raises:
        OutputError: standard output refused them (a full disk, an I/O error).
        BrokenPipeError: the reader went away.
    """
    try:
        print("\n".join(lines), flush=True)
    except BrokenPipeError:
        raise
    except OutputError as error:
        raise OutputError(error.path, f"{error.reason} ({undone})") from error
    except OSError as error:
        raise OutputError("standard output", f"{error.strerror or error} ({undone})") from error


@attrs.define(eq=False)
class Output:
    """An output file being written, opened before the work that fills it.

    '-' is standard output. A new or regular file is written under a
    temporary name beside it and renamed by `commit()`, so a run that fails
    leaves the old file (or none) rather than a part that looks whole;
    anything else (a device, a pipe, a symbolic link) is written in place.
    Every method raises OutputError, naming the path, for what the system
    refuses.
    """

    path: Path
    _stream: BinaryIO
    _temporary: Path | None  # the name written under until commit()

    @classmethod
    def open(cls, path: Path) -> Output:
        """Open `path` for writing; see the class.

        Raises:
            OutputError: it is a folder, its folder is missing, or it cannot be created.
        """
        if str(path) == STDOUT:
            return cls(path, sys.stdout.buffer, None)
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            mode = None
        except OSError as error:
            raise OutputError.of(path, error) from error
        if mode is not None and stat.S_ISDIR(mode):
            raise OutputError(path, "is a directory")
        in_place = mode is not None and not stat.S_ISREG(mode)
        # The process id: two runs writing the same file do not share a temporary.
        temporary = None if in_place else path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            stream = (temporary or path).open("wb")
        except OSError as error:
            raise OutputError.of(path, error) from error
        return cls(path, stream, temporary)

    @property
    def shown(self) -> str:
        """The path as messages name it."""
        return "standard output" if self._stream is sys.stdout.buffer else str(self.path)

    def write(self, data: bytes) -> int:
        """Write `data`; how many bytes (all of them)."""
        try:
            return self._stream.write(data)
        except OSError as error:
            raise OutputError.of(self.shown, error) from error

    def flush(self) -> None:
        """Flush the written data to the system (a gzip stream on top calls this)."""
        try:
            self._stream.flush()
        except OSError as error:
            raise OutputError.of(self.shown, error) from error

    def commit(self) -> None:
        """Finish the file: flush, close, and rename it into place."""
        if self._stream is sys.stdout.buffer:
            self.flush()
            return
        try:
            self._stream.close()
            if self._temporary is not None:
                os.replace(self._temporary, self.path)
        except OSError as error:
            self.discard()
            raise OutputError.of(self.path, error) from error

    def discard(self) -> None:
        """Give up the file: close it and remove the temporary (a file written in place stays)."""
        if self._stream is sys.stdout.buffer:
            return
        # Called while another error goes up: the file is thrown away, and a
        # failure to flush it would only hide the error that matters.
        with contextlib.suppress(OSError):
            self._stream.close()
        if self._temporary is not None:
            self._temporary.unlink(missing_ok=True)


@contextlib.contextmanager
def output(path: Path) -> Iterator[Output]:
    """`Output.open(path)`, committed when the block ends, discarded when it raises.

    Raises:
        OutputError: the file cannot be created, written or renamed into place.
    """
    out = Output.open(path)
    try:
        yield out
    except BaseException:
        out.discard()
        raise
    out.commit()
