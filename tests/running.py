"""What the tests that run `uidx standalone` for good share: a private INN2 of their own,
the uidx command, the daemon as a context, and a look at the database."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest

from usenet_indexer.testing.newsd_private import (
    CannotInstall,
    PrivateNewsServer,
    private_news_server,
)


@contextlib.contextmanager
def own_news_server(group: str, prefix: str) -> Iterator[PrivateNewsServer]:
    """A private INN2 carrying `group` (a test posts to it while uidx runs); skipped
    where INN2 cannot be installed, except in CI."""
    try:
        with private_news_server([group], prefix=prefix, start_timeout_seconds=600) as server:
            yield server
    except CannotInstall as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"INN2 is not available here: {error}")


def uidx(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A uidx command in `env`, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "usenet_indexer", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@contextlib.contextmanager
def standalone(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`uidx standalone` running for good (one edge); stopped with SIGTERM after, which
    it must take with exit status 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "usenet_indexer", "standalone", "--processes", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            _, rest = process.communicate(timeout=120)
        finally:
            process.kill()
            process.wait()
    assert process.returncode == 0, rest.decode()[-4000:]


def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    """The rows of one query of the test's database."""
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql).fetchall())


def probed_and_built(url: str) -> bool:
    """Every range indexed, every probe candidate probed (there are some) and no key left
    for the catalog's build: what a run with probes has come to when nothing is left."""
    ((left, candidates, pending, ranges),) = rows(
        url,
        "SELECT (SELECT count(*) FROM probe_candidates WHERE state IN ('new', 'probing')),"
        " (SELECT count(*) FROM probe_candidates),"
        " (SELECT count(*) FROM catalog_pending),"
        " (SELECT count(*) FROM ranges WHERE state <> 'done')",
    )
    return left == 0 and candidates != 0 and pending == 0 and ranges == 0
