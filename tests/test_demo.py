"""An operator's first hour: where scripts/demo leaves its data, and which URL edges use.

The demo runs in a copy of the checkout (links to this one's scripts, code
and .venv), so that it neither empties this checkout's sample/home nor
depends on it; what it prints last is run as an operator would paste it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from process_logs import log_until

from usenet_indexer.coordinator.server import edges_connect_with
from usenet_indexer.testing.logcheck import problems
from usenet_indexer.testing.newsd import INN_BIN
from usenet_indexer.testing.postgres import scratch_dir

REPO = Path(__file__).resolve().parent.parent
DEMO_GROUP = "alt.binaries.uidx.demo"
DEMO_ARTICLES = 3_000
DEMO_OBFUSCATED = 3
# Two demo runs: each sets up (bootstrap, initdb) and starts the supervisor: ~25 s here.
DEMO_SECONDS = 600
STATUS_SECONDS = 120
LOG_SECONDS = 60
# The settings of this process must not leak into the demo's or the coordinator's.
UIDX_VARIABLES = ("DATABASE_URL", "COORDINATOR_URL", "NODE_TOKEN")


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without uidx's settings, plus `extra`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("UIDX_", "DEMO_")) and key not in UIDX_VARIABLES
    }
    return {**env, **extra}


@pytest.fixture
def checkout() -> Iterator[Path]:
    """A checkout of links to this one, in a folder the server's user can pass (as root)."""
    if not (INN_BIN / "innd").exists():
        if os.environ.get("CI"):
            pytest.fail("INN2 is required in CI (scripts/newsd installs it as root)")
        pytest.skip("INN2 is not installed (as root, scripts/newsd installs it)")
    # The copy shares this checkout's .venv: bootstrap it here first, or the
    # demo's bootstrap would reinstall it from the copy (scripts pointing
    # into a folder removed after the test).
    subprocess.run([str(REPO / "scripts" / "bootstrap")], capture_output=True, check=True)
    with scratch_dir() as folder:
        for name in ("scripts", "usenet_indexer", "pyproject.toml", ".venv"):
            (folder / name).symlink_to(REPO / name)
        try:
            yield folder
        finally:
            # `uidx status` starts the demo's PostgreSQL and leaves it running.
            subprocess.run(
                [str(REPO / ".venv/bin/uidx"), "db", "stop"],
                env=clean_env(UIDX_HOME=str(folder / "sample" / "home")),
                capture_output=True,
                timeout=STATUS_SECONDS,
                check=False,
            )


def run_demo(checkout: Path) -> str:
    done = subprocess.run(
        [str(checkout / "scripts" / "demo"), str(DEMO_ARTICLES)],
        cwd="/",
        # Three real obfuscated uploads, not twelve: par2cmdline takes seconds for each.
        env=clean_env(DEMO_OBFUSCATED=str(DEMO_OBFUSCATED)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=DEMO_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    # No ERROR line, traceback or 5xx answer on the way, retried or not.
    found = problems(done.stdout.splitlines())
    assert not found, found.describe()
    return done.stdout


@pytest.mark.slow
def test_the_demo_keeps_its_data_where_the_commands_it_prints_find_it(checkout: Path) -> None:
    home = checkout / "sample" / "home"
    first = run_demo(checkout)
    # Its first line of its own (after what bootstrap's pip may print) says where.
    own = [line for line in first.splitlines() if line.startswith("== ")]
    assert own[0].startswith(f"== the demo's data: UIDX_HOME={home}"), own[:2]
    # A second run starts from clean: its `groups add` finds no group in the way.
    second = run_demo(checkout)
    assert f"added {DEMO_GROUP}" in second
    # It waited for the probes, and says what they made of the real obfuscated uploads.
    assert re.search(r"== the probes: \d+ candidates, .*, 0 left unprobed", second), second
    assert (
        f"real obfuscated uploads found by their real name: {DEMO_OBFUSCATED} of {DEMO_OBFUSCATED}"
    ) in second
    # The last lines say how to look; pasted from another folder, they find the data.
    status_line = next(
        line.strip() for line in second.splitlines() if line.strip().endswith("uidx status")
    )
    assert status_line == f"UIDX_HOME={home} {checkout}/.venv/bin/uidx status"
    status = subprocess.run(
        ["bash", "-c", status_line],
        cwd="/",
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=STATUS_SECONDS,
        check=True,
    ).stdout
    ranges = status.split("\nranges\n", 1)[1].split("\nnodes", 1)[0]
    assert re.search(rf"{re.escape(DEMO_GROUP)}\s+done\s+1\s", ranges), status
    assert DEMO_GROUP in status.split("\nranges\n", 1)[0]
    # The releases were posted over many days (the last 14 of 28 are planned).
    catalog = (checkout / "sample" / "catalog.jsonl").read_text().splitlines()
    posted = [json.loads(line)["posted"] for line in catalog]
    assert len(posted) > 10
    assert max(posted) - min(posted) > 7 * 86_400


def test_edges_connect_with_says_where_the_url_works() -> None:
    assert edges_connect_with("0.0.0.0", 8750, "indexer") == (
        "edges connect with COORDINATOR_URL=http://indexer:8750 "
        "(listening on every interface: any address of indexer works)"
    )
    assert "COORDINATOR_URL=http://indexer:8750 " in edges_connect_with("::", 8750, "indexer")
    loopback = edges_connect_with("127.0.0.1", 8750, "indexer")
    assert loopback.startswith("edges connect with COORDINATOR_URL=http://127.0.0.1:8750, only")
    assert "UIDX_LISTEN=0.0.0.0:8750" in loopback
    assert "http://[::1]:8750, only from this machine" in edges_connect_with("::1", 8750, "x")
    assert edges_connect_with("10.1.2.3", 80, "x") == (
        "edges connect with COORDINATOR_URL=http://10.1.2.3:80"
    )


@pytest.mark.parametrize("listen", ["0.0.0.0:0", "127.0.0.1:0"])
def test_the_coordinator_logs_the_url_edges_must_use(
    listen: str, pg_url: str, tmp_path: Path
) -> None:
    env = clean_env(DATABASE_URL=pg_url, UIDX_HOME=str(tmp_path), UIDX_LISTEN=listen)
    process = subprocess.Popen(
        [sys.executable, "-m", "usenet_indexer", "coordinator"],
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        log = log_until(process, lambda line: "edges connect with" in line, LOG_SECONDS)
        found = re.search(r"edges connect with COORDINATOR_URL=(http://\S+?),? ", log[-1])
        assert found is not None, log[-1]
        url = found[1]
        if listen.startswith("0.0.0.0"):
            assert url.startswith(f"http://{socket.gethostname()}:")
        else:
            assert "only from this machine" in log[-1]
        # It is the URL an edge uses: the node API answers there (401: no token).
        answer = httpx.post(f"{url}/api/v1/node/lease", timeout=LOG_SECONDS)
        assert answer.status_code == 401
    finally:
        process.terminate()
        process.wait(timeout=LOG_SECONDS)
        assert process.stderr is not None
        process.stderr.close()


def test_the_readme_says_how_to_listen_on_every_interface() -> None:
    readme = (REPO / "README.md").read_text()
    assert "UIDX_LISTEN=0.0.0.0:8750" in readme
    assert "sample/home" in readme
