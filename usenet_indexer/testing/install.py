"""Debian packages the test tools need (INN2, libfaketime), installed once.

Theory of operation
-------------------
The tools install what they miss when they run as root: `newsd` installs
inn2, the chaos run's clock part faketime. Several of them may want the
same package at the same moment: the chaos run's prefetch part and its run
on several machines each start a private INN2, at once. On a machine
without INN2 both ran `apt-get install inn2`; the second failed on dpkg's
lock, was taken for "INN2 cannot be installed here", and its part was left
out of the run (with every fault of its kinds) while the first installed
it.

`install_once` runs an install under an exclusive lock on one file
(`flock`, across processes and threads) and looks again, under the lock,
whether the package is there: whoever waited finds it installed and does
nothing. `apt_get_install` has apt-get wait for dpkg's lock too, for an apt
that is not ours (a person's, or another project's).
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

logger = logging.getLogger(__name__)

# One lock for every install of these tools, shared by all processes on the machine.
LOCK_FILE = Path(tempfile.gettempdir()) / "uidx-install.lock"
# How long apt-get waits for dpkg's lock held by an apt that is not ours: inn2
# installs in ~15 s here; an unattended upgrade may hold it for minutes.
DPKG_LOCK_SECONDS = 600


def install_once(
    present: Callable[[], bool],
    install: Callable[[], None],
    lock: Path = LOCK_FILE,
    *,
    waiting: Callable[[], None] | None = None,
) -> None:
    """Run `install` unless `present()`, one install at a time on this machine.

    Args:
        present: whether the package is there (asked again under the lock).
        install: installs it (it raises when it cannot).
        lock: the lock file (made when missing; every caller must name the same).
        waiting: called when another install holds the lock, before waiting
            for it (default: a log line).
    """
    if present():
        return
    with lock.open("a") as handle:
        # Held until the file is closed: also when `install` raises.
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is None:
                logger.info("another install runs (%s is locked); waiting for it", lock)
            else:
                waiting()
            fcntl.flock(handle, fcntl.LOCK_EX)
        if not present():
            install()


def apt_get_install(
    *packages: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`apt-get install -y PACKAGES`, waiting for dpkg's lock; its output captured.

    Args:
        packages: the Debian packages.
        env: the environment (default: this process's), DEBIAN_FRONTEND set.

    Returns:
        The finished apt-get (not checked: the caller tells why it failed).
    """
    environment = {**(os.environ if env is None else env), "DEBIAN_FRONTEND": "noninteractive"}
    argv = ["apt-get", "-o", f"DPkg::Lock::Timeout={DPKG_LOCK_SECONDS}", "install", "-y"]
    return subprocess.run(
        [*argv, *packages], env=environment, capture_output=True, text=True, check=False
    )
