"""Reading a child process's log (stderr) until a line says what a test waits for.

A blocking read is the event here: the test wakes when the process writes,
and fails with the log's tail when the process exits or the deadline passes.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Callable


def log_until(
    process: subprocess.Popen[bytes], condition: Callable[[str], bool], seconds: float
) -> list[str]:
    """The process's stderr lines up to the first that meets `condition`.

    Raises:
        AssertionError: the process ended, or `seconds` passed, first (with the log's tail).
    """
    assert process.stderr is not None
    fd = process.stderr.fileno()
    deadline = time.monotonic() + seconds
    seen: list[str] = []
    buffer = b""
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "no such line in time:\n" + "".join(seen)[-4000:]
        readable, _, _ = select.select([fd], [], [], left)
        if not readable:
            continue
        data = os.read(fd, 65536)
        assert data, "the process exited:\n" + "".join(seen)[-4000:]
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace")
            seen.append(line + "\n")
            if condition(line):
                return seen
