"""What a clean run's log must not hold: ERROR lines, tracebacks, 5xx answers.

A retry can hide a 500 from every figure a run counts at its clients (the
edge retried, the batch was stored once, the proxy saw a 200 in the end);
the coordinator's own log still says it. Every run that counts 5xx (the
end-to-end tests, `scripts/chaos`, `scripts/bench-edge`) reads the log of
each uidx process it ran with `problems` and fails on what it finds.

The lines are uidx's log format (`cli.main`): `DATE TIME LEVEL [PID]
LOGGER: MESSAGE`, and the node API writes every 5xx it answers as
`...: answered 5NN ...` (`coordinator/http/asgi.py`).
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable
from pathlib import Path

import attrs

_LOG_LINE = re.compile(r"^\S+ \S+ [A-Z]+ \[\d+\] ")
_LEVEL = re.compile(r"^\S+ \S+ (ERROR|CRITICAL) \[\d+\] ")
_ANSWERED_5XX = re.compile(r": answered (5\d\d)\b")
_TRACEBACK = "Traceback (most recent call last)"


@attrs.frozen
class LogProblems:
    """The lines of a log that a clean run must not have.

    Attributes:
        errors: ERROR or CRITICAL lines, and each traceback (by the line that
            logged it and the exception it ends with).
        answered_5xx: the lines that record a 5xx answer, by status.
    """

    errors: tuple[str, ...]
    answered_5xx: tuple[tuple[int, str], ...]

    def __bool__(self) -> bool:
        return bool(self.errors or self.answered_5xx)

    def __add__(self, other: LogProblems) -> LogProblems:
        return LogProblems(self.errors + other.errors, self.answered_5xx + other.answered_5xx)

    def without(self, *statuses: int) -> LogProblems:
        """These problems less the 5xx answers of `statuses` (503 while the database is down)."""
        kept = tuple((s, line) for s, line in self.answered_5xx if s not in statuses)
        return LogProblems(self.errors, kept)

    def describe(self, limit: int = 10) -> str:
        """A few of the lines, for a failure's message."""
        lines = [*self.errors, *(line for _, line in self.answered_5xx)]
        more = f"\n... and {len(lines) - limit} more" if len(lines) > limit else ""
        return "\n".join(lines[:limit]) + more


def problems(lines: Iterable[str]) -> LogProblems:
    """The ERROR lines, tracebacks and 5xx answers in a uidx log.

    A traceback is told by the log line it follows and its last line (the
    exception), so a failure's message says what raised and where it was
    logged.
    """
    errors: list[str] = []
    answered: list[tuple[int, str]] = []
    logged = ""  # the last log line (a traceback follows the line that logged it)
    in_traceback = False
    last = ""  # the traceback's last line so far: in the end, its exception
    for raw in itertools.chain(lines, [""]):
        line = raw.rstrip("\n")
        if in_traceback and (_LOG_LINE.match(line) or not line):
            errors.append(f"{_TRACEBACK} after {logged!r}: {last.strip()}")
            in_traceback = False
        if line.startswith(_TRACEBACK):
            in_traceback = True
        if in_traceback:
            last = line
        if _LOG_LINE.match(line):
            logged = line
            if _LEVEL.match(line):
                errors.append(line)
        found = _ANSWERED_5XX.search(line)
        if found is not None:
            answered.append((int(found[1]), line))
    return LogProblems(tuple(errors), tuple(answered))


def file_problems(*paths: Path) -> LogProblems:
    """`problems` of the log files (each read whole; a missing one has none)."""
    found = LogProblems((), ())
    for path in paths:
        if path.exists():
            with path.open("r", encoding="utf-8", errors="replace") as stream:
                found += problems(stream)
    return found


def record_problems(records: Iterable[logging.LogRecord]) -> LogProblems:
    """`problems` of log records captured in-process (pytest's caplog)."""
    errors: list[str] = []
    answered: list[tuple[int, str]] = []
    for record in records:
        line = f"{record.levelname} {record.name}: {record.getMessage()}"
        if record.levelno >= logging.ERROR:
            errors.append(line)
        found = _ANSWERED_5XX.search(line)
        if found is not None:
            answered.append((int(found[1]), line))
    return LogProblems(tuple(errors), tuple(answered))
