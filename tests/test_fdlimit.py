"""The coordinator's open-file limit (fdlimit.py): raised from the soft limit it was
started with to the hard one, since every edge connection is a descriptor of its own.

The real command on the test's database, started with a soft limit of 256, as a
shell or a unit with a low LimitNOFILE starts it."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from process_logs import log_until

from usenet_indexer.testing.processes import child_env, free_port

LOW = 256
SECONDS = 60.0


def _open_files(pid: int) -> tuple[int, int]:
    """The soft and hard `Max open files` of a running process (/proc/PID/limits)."""
    limits = Path(f"/proc/{pid}/limits").read_text()
    found = re.search(r"^Max open files\s+(\d+)\s+(\d+)", limits, re.MULTILINE)
    assert found is not None, limits
    return int(found[1]), int(found[2])


def test_the_coordinator_raises_its_open_file_limit_to_the_hard_one(
    pg_url: str, tmp_path: Path
) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= LOW:
        pytest.skip(f"the hard limit here is {hard}: nothing to raise to")

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (LOW, hard))

    env = child_env(
        DATABASE_URL=pg_url, UIDX_HOME=str(tmp_path), UIDX_LISTEN=f"127.0.0.1:{free_port()}"
    )
    with subprocess.Popen(
        [sys.executable, "-m", "usenet_indexer", "coordinator", "--processes", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=low_soft_limit,  # the limit the process starts with
    ) as process:
        try:
            log_until(process, lambda line: "node API listening" in line, SECONDS)
            soft_now, hard_now = _open_files(process.pid)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=SECONDS) == 0
        finally:
            if process.returncode is None:
                process.kill()
                process.wait()
    assert hard_now == hard
    assert soft_now == min(hard, 1 << 20) > LOW
