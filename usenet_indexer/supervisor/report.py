"""A worker's start-up error, said once by the supervisor for all its workers.

The supervisor hands every worker the write end of one pipe (`--report-fd
FD`). A worker that cannot start (the coordinator refused its token) writes
why on it, one line `PID REASON`, and exits with EXIT_STARTUP_ERROR. N
workers with the same token all fail the same way within a moment of each
other, before the supervisor's halt reaches them: logged by each worker,
the refusal was said N times; the arbiter says each distinct reason once
(in its halt line). A line is one write of at most MAX_REPORT_BYTES, below
PIPE_BUF, so the lines of workers writing at once never interleave. The
worker writes before it exits, so the arbiter, which reads the pipe before
it reaps, has the reason when it sees the exit status.

Without a supervisor (no `--report-fd`), or when the pipe refuses the
write, the worker logs the reason itself.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

REPORT_FD_OPTION = "--report-fd"

# One line's most bytes: below PIPE_BUF (4,096 on Linux, at least 512 by
# POSIX), so one write is atomic; a reason is one short sentence.
MAX_REPORT_BYTES = 512


def report_startup_error(fd: int | None, reason: str) -> None:
    """Say why this worker cannot start: to the supervisor, or in the log.

    Args:
        fd: the supervisor's report pipe (`--report-fd`), or None.
        reason: one sentence (no secrets: the supervisor logs it).
    """
    if fd is not None:
        try:
            os.write(fd, encode_report(os.getpid(), reason))
            return
        except OSError as error:
            logger.debug("cannot tell the supervisor (report fd %d): %s", fd, error)
    logger.error("%s", reason)


def encode_report(pid: int, reason: str) -> bytes:
    """The line a worker writes: `PID REASON\\n`, one line, at most MAX_REPORT_BYTES."""
    text = " ".join(reason.split())
    line = f"{pid} {text}".encode(errors="replace")[: MAX_REPORT_BYTES - 1]
    return line.decode(errors="ignore").encode() + b"\n"


def decode_report(line: bytes) -> tuple[int, str] | None:
    """A report line's (pid, reason), without its newline; None for a malformed one."""
    pid, _, reason = line.decode(errors="replace").partition(" ")
    if not pid.isdigit() or not reason:
        return None
    return int(pid), reason
