"""Pytest fixtures for NNTP: a private INN2 for the session (scripts/newsd).

Loaded by tests/conftest.py (`pytest_plugins`). The server is started once,
fed generated articles with TAKETHIS, and stopped at the end of the session.
Where INN2 cannot be installed (not root, no package source) the tests that
need it are skipped, except in CI (the CI environment variable), where that
is a failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import attrs
import pytest

from usenet_indexer.testing.newsd_private import CannotInstall, private_news_server

GROUP = "alt.binaries.uidx.test"
# A group that starts near INN2's largest article number (2^31 - 1).
HIGH_GROUP = "alt.binaries.uidx.high"
HIGH_FIRST = 2**31 - 5_000
# The round trip: 100k articles (posted in ~5 s with TAKETHIS into CNFS).
ARTICLES = 100_000
HIGH_ARTICLES = 2_000
SEED = 7
USER = "uidx"
PASSWORD = "not a secret"
# Installing inn2 with apt-get takes about a minute on a fresh machine.
START_TIMEOUT_SECONDS = 600
POST_TIMEOUT_SECONDS = 300


@attrs.frozen
class NewsServer:
    """The session's INN2: where it listens and what was posted to it."""

    host: str
    port: int
    tls_port: int
    ca_file: str
    folder: Path
    posting: dict[str, float]  # articles per second, by group
    group: str = GROUP
    articles: int = ARTICLES
    high_group: str = HIGH_GROUP
    high_first: int = HIGH_FIRST
    high_articles: int = HIGH_ARTICLES
    seed: int = SEED

    def url(self, *, tls: bool = False, starttls: bool = False, auth: bool = True) -> str:
        """A URL for connect(): plain, nntps:// (TLS on connect) or ?starttls=1."""
        credentials = f"{quote(USER)}:{quote(PASSWORD)}@" if auth else ""
        host = "localhost" if tls or starttls else self.host  # the certificate names both
        if tls:
            return f"nntps://{credentials}{host}:{self.tls_port}"
        query = "?starttls=1" if starttls else ""
        return f"nntp://{credentials}{host}:{self.port}{query}"


def _cannot_run(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"INN2 is required in CI: {reason}")
    pytest.skip(f"INN2 is not available here: {reason}")


@pytest.fixture(scope="session")
def news_server() -> Iterator[NewsServer]:
    """A private INN2 (scripts/newsd) with GROUP and HIGH_GROUP posted, AUTHINFO required."""
    groups = [GROUP, f"{HIGH_GROUP}:{HIGH_FIRST}"]
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(
                private_news_server(
                    groups,
                    user=USER,
                    password=PASSWORD,
                    start_timeout_seconds=START_TIMEOUT_SECONDS,
                )
            )
        except CannotInstall as error:
            _cannot_run(str(error))
        posting = {}
        for group, count in ((GROUP, ARTICLES), (HIGH_GROUP, HIGH_ARTICLES)):
            posted = server.post(group, count, seed=SEED, timeout_seconds=POST_TIMEOUT_SECONDS)
            posting[group] = float(str(posted["articles_per_second"]))
        yield NewsServer(
            server.host, server.port, server.tls_port, server.ca_file, server.folder, posting
        )
