"""Who stops the embedded cluster (store/clusterowner.py), with the real server binaries:
a cluster is stopped by the process that started it, or by the next start once that
process was killed; never one an operator started, or a live owner's."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest

from usenet_indexer.store.clusterowner import OwnerRecord, start_if_stopped
from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.testing.postgres import scratch_dir

# A process that starts the cluster as a daemon does, then is killed with SIGKILL.
KILLED_OWNER = """
import os, signal, sys
from usenet_indexer.store.clusterowner import start_if_stopped
from usenet_indexer.store.pgcluster import Cluster

assert start_if_stopped(Cluster(sys.argv[1], durable=False)) is not None
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    # Not tmp_path: as root the server runs as another user, who must reach its folder.
    with scratch_dir() as folder:
        made = Cluster(folder / "postgres", durable=False)
        try:
            yield made
        finally:
            made.stop(mode="immediate")


def test_a_cluster_started_here_is_stopped_here(cluster: Cluster) -> None:
    owned = start_if_stopped(cluster)
    assert owned is not None
    assert cluster.status().running
    owned.stop()
    assert not cluster.status().running
    # Given up: the next start does not take a record of it for a killed owner's.
    assert (cluster.data_dir / "owner").read_text() == ""


def test_the_operators_cluster_is_left_to_the_operator(cluster: Cluster) -> None:
    cluster.start()  # `uidx db start`
    assert start_if_stopped(cluster) is None
    assert cluster.status().running


def test_a_live_owners_cluster_is_left_to_it(cluster: Cluster) -> None:
    # A supervisor's, which its workers find running.
    owner = start_if_stopped(cluster)
    assert owner is not None
    try:
        assert start_if_stopped(cluster) is None
        assert cluster.status().running
    finally:
        owner.stop()


@pytest.mark.parametrize("restarted", [False, True], ids=["left-running", "restarted-since"])
def test_a_killed_owners_cluster_is_taken_over_unless_restarted_since(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, restarted: bool
) -> None:
    killed = subprocess.Popen(
        [sys.executable, "-c", KILLED_OWNER, str(cluster.data_dir)],
        stderr=subprocess.PIPE,
        text=True,
    )
    _, said = killed.communicate(timeout=120)
    assert killed.returncode == -9, said
    assert cluster.status().running  # nothing could stop it
    if restarted:
        # The operator stopped it and started it again (`uidx db stop`, `uidx db start`):
        # theirs now, though the killed owner's record is still there.
        cluster.stop()
        cluster.start()
    caplog.set_level(logging.INFO)
    taken = start_if_stopped(cluster)
    if restarted:
        assert taken is None
        assert cluster.status().running
        assert "left running" not in caplog.text
        return
    assert taken is not None
    (line,) = [r.getMessage() for r in caplog.records if "left running" in r.getMessage()]
    assert f"left running by process {killed.pid}, which is gone" in line
    taken.stop()
    assert not cluster.status().running


def test_the_owner_record_reads_back_what_was_written() -> None:
    for record in (OwnerRecord(12), OwnerRecord(12, "345 1700000000")):
        assert OwnerRecord.from_text(record.to_text()) == record
    assert OwnerRecord.from_text("") is None
    assert OwnerRecord.from_text("owner x\n") is None
