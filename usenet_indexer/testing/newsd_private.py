"""A private INN2 for one test module or one chaos part: `newsd start`, `post`, `stop`.

The session's server of the tests is tests/nntp_fixtures.py; what needs a
server of its own (other groups, articles it must not share) uses
`private_news_server`. It runs `python -m usenet_indexer.testing.newsd` (see
nntp/newsd.py) in a new temporary folder, and always stops what it started
and removes the folder on the way out, each step under a time limit (a
stop that fails or times out is logged, not raised: it would hide what
ended the block).

Exit status 2 of newsd means INN2 is missing and cannot be installed here:
that is `CannotInstall`, which a test turns into a skip (a failure in CI)
and scripts/chaos into a part not run. Any other failure is `NewsdError`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs

from usenet_indexer.testing.newsd import (
    CannotInstall,
    Layout,
    NewsdError,
    PostedArticle,
    post_articles,
)

logger = logging.getLogger(__name__)

# A first start may install inn2 with apt-get: about a minute on a fresh machine.
START_TIMEOUT_SECONDS = 600.0
# `newsd stop` waits at most ~12 s (ctlinnd 5 s, TERM 5 s, KILL 2 s).
STOP_TIMEOUT_SECONDS = 60.0

__all__ = ["CannotInstall", "NewsdError", "PrivateNewsServer", "private_news_server"]


@attrs.frozen
class PrivateNewsServer:
    """A running private INN2: where it listens (newsd's JSON state) and its folder."""

    folder: Path
    host: str
    port: int
    tls_port: int
    feeder_port: int
    ca_file: str
    user: str | None = None
    password: str | None = None

    @classmethod
    def from_state(cls, folder: Path, state: dict[str, Any]) -> PrivateNewsServer:
        """What `newsd start` printed (nntp/newsd.py start()), typed."""
        return cls(
            folder=folder,
            host=str(state["host"]),
            port=int(state["port"]),
            tls_port=int(state["tls_port"]),
            feeder_port=int(state["feeder_port"]),
            ca_file=str(state["ca_file"]),
            user=state.get("user"),
            password=state.get("password"),
        )

    def url(self) -> str:
        """The plain reader URL, with the credentials when the server wants AUTHINFO."""
        credentials = ""
        if self.user is not None and self.password is not None:
            credentials = f"{quote(self.user)}:{quote(self.password)}@"
        return f"nntp://{credentials}{self.host}:{self.port}"

    def post(
        self,
        group: str,
        articles: int,
        *,
        seed: int = 0,
        days: float | None = None,
        end: int | None = None,
        timeout_seconds: float | None = None,
    ) -> dict[str, object]:
        """Feeds generated articles to the server (`newsd post`, TAKETHIS).

        Args:
            group: the group posted to (one of those it was started with).
            articles: how many (nntp.newsd.generate_articles(group, articles, seed)).
            seed: the articles' seed.
            days: None: those simple articles, all of one date; else the
                realistic ones of uidx's generator dated over the `days` days
                before `end` (nntp.newsd.realistic_articles).
            end: unix time the realistic dates end at; None: now.
            timeout_seconds: the longest `newsd post` may take; None: no limit.

        Returns:
            What `newsd post` printed (group, articles, seconds,
            articles_per_second, first_date, last_date).

        Raises:
            NewsdError: newsd post failed (its stderr says why).
        """
        command = ["post", str(self.folder), "--group", group, "--articles", str(articles)]
        command += ["--seed", str(seed)]
        if days is not None:
            command += ["--days", str(days)]
        if end is not None:
            command += ["--end", str(end)]
        printed = _newsd(*command, timeout=timeout_seconds)
        result: dict[str, object] = json.loads(printed)
        return result

    def post_articles(self, group: str, articles: Iterable[PostedArticle]) -> dict[str, object]:
        """Feeds these articles (a test's own: real yEnc bodies, chosen subjects) to the
        server with TAKETHIS, as `post` does its generated ones."""
        return post_articles(self.folder, group, articles)


@contextlib.contextmanager
def private_news_server(
    groups: Sequence[str],
    *,
    prefix: str = "uidx-newsd-",
    user: str | None = None,
    password: str | None = None,
    start_timeout_seconds: float = START_TIMEOUT_SECONDS,
    stop_timeout_seconds: float = STOP_TIMEOUT_SECONDS,
) -> Iterator[PrivateNewsServer]:
    """A private INN2 carrying `groups`, running while the block lasts.

    Args:
        groups: the groups, each "name" or "name:first" (first article number).
        prefix: the name of its temporary folder begins so (under the system's
            temporary folder: a test's tmp_path has parents private to root,
            and INN2 runs as `news`).
        user: with `password`, AUTHINFO is required; None: no authentication.
        password: the user's password.
        start_timeout_seconds: the longest `newsd start` may take.
        stop_timeout_seconds: the longest `newsd stop` may take on the way out.

    Yields:
        The server; it is stopped and its folder removed afterwards.

    Raises:
        CannotInstall: INN2 is not available here (newsd exited with status 2).
        NewsdError: newsd could not start it (its stderr says why).
        subprocess.TimeoutExpired: newsd start took longer than its time limit.
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        command = ["start", str(folder), "--groups", ",".join(groups)]
        for flag, value in (("--user", user), ("--password", password)):
            if value is not None:
                command += [flag, value]
        state = json.loads(_newsd(*command, timeout=start_timeout_seconds))
        yield PrivateNewsServer.from_state(folder, state)
    finally:
        # newsd removes its state file when a start fails, but not when it is
        # killed on the timeout with the servers already spawned: stop those too.
        if Layout(folder).state_file.exists():
            _stop(folder, stop_timeout_seconds)
        shutil.rmtree(folder, ignore_errors=True)


def _stop(folder: Path, timeout: float) -> None:
    try:
        _newsd("stop", str(folder), timeout=timeout)
    except (NewsdError, subprocess.TimeoutExpired):
        # Raised from here it would hide what ended the block (a failed test).
        logger.warning("newsd stop %s failed; INN2 may still run", folder, exc_info=True)


def _newsd(*args: str, timeout: float | None) -> str:
    """Runs newsd; its stdout. Status 2 is CannotInstall, any other failure NewsdError."""
    done = subprocess.run(
        [sys.executable, "-m", "usenet_indexer.testing.newsd", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode == 2:
        raise CannotInstall(done.stderr.strip())
    if done.returncode != 0:
        raise NewsdError(f"newsd {args[0]} failed (status {done.returncode}):\n{done.stderr}")
    return done.stdout
