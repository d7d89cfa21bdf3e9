"""The embedded PostgreSQL cluster, with the real server binaries (as root too)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from usenet_indexer.errors import ConfigError, DatabaseError
from usenet_indexer.store.pgcluster import (
    PORT,
    SOCKET_FILE,
    SOCKET_PATH_MAX,
    Cluster,
    database_url,
    find_binaries,
)
from usenet_indexer.testing.postgres import scratch_dir


@pytest.fixture
def reachable_dir() -> Iterator[Path]:
    # Not tmp_path: pytest's folders are 0700 root, and as root the server
    # runs as another user who must reach its folder.
    with scratch_dir() as folder:
        yield folder


def _uid_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    line = next(line for line in status.splitlines() if line.startswith("Uid:"))
    return int(line.split()[1])


# "deep": the socket path would not fit in 107 bytes, so it goes to /tmp.
# The durable cluster is the one operators get; tests use the other kind.
@pytest.mark.parametrize(("depth", "durable"), [("short", True), ("deep", False)])
def test_cluster_lifecycle_keeps_data(reachable_dir: Path, depth: str, durable: bool) -> None:
    data_dir = reachable_dir / ("d" * 70 if depth == "deep" else "") / "postgres"
    cluster = Cluster(data_dir, durable=durable)
    assert cluster.status().state == "uninitialized"
    try:
        assert cluster.init() is True
        assert cluster.init() is False
        assert cluster.status().state == "stopped"

        cluster.start(timeout_seconds=30)
        cluster.start(timeout_seconds=30)  # already running: fine
        status = cluster.status()
        assert status.running
        assert status.pid is not None
        assert status.data_version == find_binaries().major
        assert status.socket_dir == cluster.socket_dir
        assert (cluster.socket_dir / SOCKET_FILE).is_socket()
        assert cluster.socket_dir.is_relative_to(data_dir) is (depth == "short")
        if os.geteuid() == 0:
            assert _uid_of(status.pid) != 0, "the server must not run as root"
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (word text)")
            conn.execute("INSERT INTO kept VALUES ('still here')")

        cluster.stop()
        assert cluster.status().state == "stopped"
        assert cluster.status().pid is None
        cluster.stop()  # already stopped: fine

        cluster.start(timeout_seconds=30)
        with psycopg.connect(cluster.url()) as conn:
            assert conn.execute("SELECT word FROM kept").fetchall() == [("still here",)]
        psql = subprocess.run(
            [*cluster.psql_args(), "-Atc", "SELECT current_database()"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert psql.stdout.strip() == "uidx"
    finally:
        cluster.stop(mode="immediate")
    assert (data_dir / "postgresql.log").is_file()
    assert cluster.socket_dir.exists() is (depth == "short")  # none left in /tmp


def test_commands_starting_a_new_cluster_at_once_all_get_it(reachable_dir: Path) -> None:
    # First use: an operator command and the coordinator (or two commands of a
    # script) start the cluster of a new home at the same moment. Each ran
    # initdb, and all but one failed: "directory ... exists but is not empty".
    home = reachable_dir / "home"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    # One of them a daemon's start (store/clusterowner.py), which made the data
    # folder outside the start's lock.
    daemon = (
        "import sys; from pathlib import Path;"
        " from usenet_indexer.store.clusterowner import start_if_stopped;"
        " from usenet_indexer.store.pgcluster import Cluster;"
        " start_if_stopped(Cluster(Path(sys.argv[1]) / 'postgres'))"
    )
    commands = [
        [sys.executable, "-m", "usenet_indexer", "db", "start", "--home", str(home)],
        [sys.executable, "-c", daemon, str(home)],
        [sys.executable, "-m", "usenet_indexer", "db", "start", "--home", str(home)],
    ]
    starts = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for command in commands
    ]
    try:
        said = [start.communicate(timeout=120) for start in starts]
        assert [start.returncode for start in starts] == [0, 0, 0], said
        assert Cluster(home / "postgres").status().running
    finally:
        Cluster(home / "postgres").stop(mode="immediate")


def test_failed_start_shows_the_log(reachable_dir: Path) -> None:
    cluster = Cluster(reachable_dir / "postgres", durable=False)
    cluster.init()
    with (cluster.pgdata / "postgresql.auto.conf").open("a") as conf:
        conf.write("shared_buffers = 'lots'\n")
    with pytest.raises(DatabaseError, match=r"did not start(.|\n)*shared_buffers"):
        cluster.start(timeout_seconds=30)
    assert not cluster.status().running


def test_missing_binaries_say_how_to_install(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "postgres", bindir=tmp_path / "no-binaries-here")
    with pytest.raises(ConfigError, match=r"apt-get install -y postgresql") as raised:
        cluster.init()
    assert raised.value.key == "DATABASE_URL"
    assert not (tmp_path / "postgres").exists()


def test_binaries_of_another_version_are_refused() -> None:
    with pytest.raises(DatabaseError, match=r"postgresql-7\.4"):
        find_binaries(want_major="7.4")


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another user")
def test_folder_closed_to_the_server_user_is_explained(reachable_dir: Path) -> None:
    closed = reachable_dir / "closed"
    closed.mkdir(mode=0o700)  # like /root
    cluster = Cluster(closed / "uidx" / "postgres")
    with pytest.raises(DatabaseError, match=r"cannot reach .*UIDX_HOME=/var/lib/uidx"):
        cluster.init()
    assert not cluster.initialized


def test_socket_dir_fits_the_socket_path_limit() -> None:
    assert Cluster(Path("/srv/uidx/postgres")).socket_dir == Path("/srv/uidx/postgres/socket")
    deep = Cluster(Path("/srv") / ("x" * 120) / "postgres")
    other = Cluster(Path("/srv") / ("y" * 120) / "postgres")
    assert deep.socket_dir.parent == Path("/tmp")
    assert len(str(deep.socket_dir / SOCKET_FILE)) <= SOCKET_PATH_MAX
    assert deep.socket_dir == Cluster(deep.data_dir).socket_dir  # stable
    assert deep.socket_dir != other.socket_dir


def test_url_names_socket_user_and_database() -> None:
    url = Cluster(Path("/srv/my uidx/postgres")).url("other")
    params = psycopg.conninfo.conninfo_to_dict(url)
    assert params == {
        "host": "/srv/my uidx/postgres/socket",
        "port": str(PORT),
        "user": "uidx",
        "dbname": "other",
    }


def test_database_url_prefers_the_setting(tmp_path: Path) -> None:
    assert database_url("postgresql://db.example/uidx", tmp_path) == (
        "postgresql://db.example/uidx",
        None,
    )
    for unset in (None, ""):
        url, cluster = database_url(unset, tmp_path)
        assert cluster == Cluster(tmp_path / "postgres")
        assert url == cluster.url()
