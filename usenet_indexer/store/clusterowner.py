"""Who stops the embedded cluster: the process that started it, or took it over.

Theory of operation
-------------------
A daemon that finds no running cluster starts it and stops it at its end
(`uidx coordinator`; the supervisor of `uidx standalone` and of `uidx
coordinator --processes N`); a cluster it finds running is someone else's
(`uidx db start`'s, or a supervisor's that its workers find) and left alone.
A daemon killed with SIGKILL (or by the OOM killer) cannot stop its cluster;
a next start that only asked whether the cluster runs would take it for
someone else's and leave it running for good.

So the owner says so in the data folder, in the file OWNER_FILE:

- It holds an exclusive `flock` on the file for as long as it owns the
  cluster. The kernel lets go of the lock when the process ends, however it
  ends; the descriptor is not inherited (close-on-exec, and `subprocess`
  closes the others), so neither pg_ctl's postmaster nor a worker keeps it.
- It writes its pid in the file before it starts the server, and the
  server's identity (the postmaster's pid and start time, the first and
  third lines of `postmaster.pid`) once it runs. A clean stop empties it.

A start that gets the lock and finds the record of an owner with the cluster
running that owner started (or was starting) takes it over: the owner is
gone, as the free lock says, and the cluster is still that owner's, not one
an operator started again since (another postmaster). It says so in one
line and stops the cluster at its end as if it had started it. A lock held
by another process means a live owner: the cluster is theirs to stop.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

import attrs

from usenet_indexer.store.pgcluster import Cluster

logger = logging.getLogger(__name__)

# In the data folder (beside pgdata/, not in it: the server's folder is its own).
OWNER_FILE = "owner"


@attrs.frozen
class OwnerRecord:
    """What OWNER_FILE says: the owner's pid, and the server it started (None until
    it runs)."""

    owner: int
    postmaster: str | None = None

    @classmethod
    def from_text(cls, text: str) -> OwnerRecord | None:
        """The record of the file's text; None for an empty (or unreadable) one."""
        fields = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
        try:
            return cls(int(fields["owner"]), fields.get("postmaster"))
        except (KeyError, ValueError):
            return None

    def to_text(self) -> str:
        """The file's text."""
        server = f"postmaster {self.postmaster}\n" if self.postmaster is not None else ""
        return f"owner {self.owner}\n{server}"


@attrs.define(eq=False)
class OwnedCluster:
    """The embedded cluster this process stops at its end; see the module's docstring."""

    cluster: Cluster
    _fd: int

    @property
    def data_dir(self) -> Path:
        return self.cluster.data_dir

    def stop(self) -> None:
        """Stop the cluster and give up owning it.

        Raises:
            DatabaseError: the server did not stop in time (the record stays: the
                next start takes the cluster over).
        """
        try:
            self.cluster.stop()
            _write(self._fd, "")
        finally:
            os.close(self._fd)


def start_if_stopped(cluster: Cluster | None) -> OwnedCluster | None:
    """Start the embedded cluster when it is not running, or take over the one a killed
    owner left running; the cluster this process stops at its end, or None: no cluster
    (DATABASE_URL), or one that is another's (`uidx db start`'s, the operator's, or a
    live supervisor's that its workers find: started here when it does not run).

    Raises:
        ConfigError: no PostgreSQL binaries.
        DatabaseError: the cluster cannot be made or started.
    """
    if cluster is None:
        return None
    cluster.init_once()  # the data folder, which holds OWNER_FILE (one initdb at a time)
    fd = _lock(cluster.data_dir / OWNER_FILE)
    if fd is None:
        if not cluster.status().running:
            cluster.start()
        return None
    try:
        return _take(cluster, fd)
    except BaseException:
        os.close(fd)
        raise


def _take(cluster: Cluster, fd: int) -> OwnedCluster | None:
    left = OwnerRecord.from_text(os.pread(fd, 4096, 0).decode(errors="replace"))
    if cluster.status().running:
        running = _postmaster(cluster)
        if left is None or left.postmaster not in (None, running):
            _write(fd, "")  # a stale record of a server that is gone
            os.close(fd)
            return None
        _write(fd, OwnerRecord(os.getpid(), running).to_text())
        logger.warning(
            "embedded PostgreSQL in %s was left running by process %d, which is gone"
            " (killed?): this process takes it over and stops it at its end",
            cluster.data_dir,
            left.owner,
        )
        return OwnedCluster(cluster, fd)
    _write(fd, OwnerRecord(os.getpid()).to_text())
    cluster.start()
    _write(fd, OwnerRecord(os.getpid(), _postmaster(cluster)).to_text())
    logger.info("embedded PostgreSQL in %s started", cluster.data_dir)
    return OwnedCluster(cluster, fd)


def _lock(path: Path) -> int | None:
    """The file's descriptor, locked; None when another process holds the lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def _postmaster(cluster: Cluster) -> str | None:
    """The running server's identity: its pid and start time (postmaster.pid's first and
    third lines); None when it does not run."""
    with contextlib.suppress(OSError):
        lines = (
            (cluster.pgdata / "postmaster.pid")
            .read_text(encoding="ascii", errors="replace")
            .splitlines()
        )
        if len(lines) >= 3:
            return f"{lines[0].strip()} {lines[2].strip()}"
    return None
