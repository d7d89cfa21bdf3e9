"""The environment of a uidx process that a test, a benchmark or the chaos harness starts."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx

# Variables of this process that must not reach uidx's children: their own
# settings are set explicitly, and config.py refuses unknown UIDX_ variables.
CHILD_DROPS = ("DATABASE_URL", "COORDINATOR_URL", "NODE_TOKEN", "NOTIFY_SOCKET")


def free_port() -> int:
    """A loopback port free now (the kernel's pick), for a child to listen on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def compile_bytecode() -> None:
    """Write the bytecode caches of uidx's modules, as an installed uidx has them.

    A benchmark times whole processes. Where PYTHONDONTWRITEBYTECODE is set
    (some CI and sandbox shells set it) every run would first compile each
    module it imports from source, which an operator's install never does
    (pip compiles at install time; otherwise the first run writes the
    caches): 0.09 s of an edge's start here.
    """
    import compileall

    import usenet_indexer

    compileall.compile_dir(Path(usenet_indexer.__file__).parent, quiet=1)


def child_env(**settings: str) -> dict[str, str]:
    """This process's environment without uidx's settings, plus `settings`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("UIDX_") and name not in CHILD_DROPS
    }
    env.update(settings)
    return env


def wait_until_answering(
    child: subprocess.Popen[bytes], url: str, errors: Path, *, who: str, seconds: float
) -> None:
    """Until the coordinator `child` answers HTTP at `url` (SystemExit, naming `who` and
    with the tail of its log `errors`, when it exits or `seconds` pass first)."""
    deadline = time.monotonic() + seconds
    while True:
        if child.poll() is not None:
            tail = errors.read_text(errors="replace")[-4000:]
            raise SystemExit(f"{who}: the coordinator exited ({child.returncode}):\n{tail}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"{who}: the coordinator did not answer within {seconds:.0f} s"
                ) from None
            time.sleep(0.1)
