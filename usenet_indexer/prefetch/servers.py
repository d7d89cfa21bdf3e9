"""The prefetcher's NNTP servers: what the settings say, and what each is doing now."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from urllib.parse import parse_qs, urlsplit

import attrs

from usenet_indexer.core.health import Observed, State
from usenet_indexer.errors import ConfigError
from usenet_indexer.nntp.client import ServerURL
from usenet_indexer.nntp.errors import AuthRequired, ConnectionLost, Timeout, Unavailable
from usenet_indexer.store.servers import ServerReport

# Connections per server beyond this are a typo, not a plan (providers allow 10-100).
MAX_CONNECTIONS = 500
# A server in one of these states (and no connection of it open) fetches nothing:
# it carries no group for the prefetcher, which claims no chunk while all of its
# servers are so. Not "refusing connections": 400/502 at the greeting is most
# often the account's connection cap, and the pool lowers itself to what the
# server takes (one connection at least keeps fetching).
NOT_ANSWERING = frozenset({State.LOGIN_REFUSED, State.UNREACHABLE})


@attrs.frozen(repr=False)
class ServerConfig:
    """One NNTP server of the settings: its URL (credentials and all) and its pool size."""

    url: str
    server: str  # "host:port", for logs and `uidx status`: never the credentials
    connections: int

    def __repr__(self) -> str:
        return f"ServerConfig({self.server}, connections={self.connections})"


# What a server's URL may say after `?` (nntp/client.py reads starttls).
PARAMETERS = frozenset({"connections", "starttls"})


def server_configs(urls: Sequence[str], default_connections: int) -> list[ServerConfig]:
    """The servers of the `nntp` setting, in order (a group goes to the first that has it).

    Args:
        urls: the `nntp` setting.
        default_connections: the `nntp_connections` setting, for a URL without `connections=`.

    Raises:
        ConfigError: no server, a bad URL, an unknown parameter (`?conections=4`) or a
            bad `connections=` (names the key `nntp`); `default_connections` not in
            1..MAX_CONNECTIONS (names `nntp_connections`).
    """
    if not urls:
        raise ConfigError("nntp", "the prefetcher needs at least one NNTP server (UIDX_NNTP)")
    if not 1 <= default_connections <= MAX_CONNECTIONS:
        raise ConfigError(
            "nntp_connections", f"{default_connections} is not in 1..{MAX_CONNECTIONS}"
        )
    configs = []
    for url in urls:
        target = ServerURL.parse(url)
        query = parse_qs(urlsplit(url).query, keep_blank_values=True)
        for unknown in sorted(set(query) - PARAMETERS):
            near = difflib.get_close_matches(unknown, PARAMETERS, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise ConfigError(
                "nntp",
                f"{target.server}: unknown parameter {unknown!r}{hint};"
                f" known: {', '.join(sorted(PARAMETERS))}",
            )
        raw = query.get("connections", [str(default_connections)])[-1]
        try:
            connections = int(raw)
        except ValueError:
            raise ConfigError(
                "nntp", f"{target.server}: connections={raw!r} is not a number"
            ) from None
        if not 1 <= connections <= MAX_CONNECTIONS:
            raise ConfigError(
                "nntp", f"{target.server}: connections={connections} is not in 1..{MAX_CONNECTIONS}"
            )
        configs.append(ServerConfig(url, target.server, connections))
    return configs


@attrs.define(eq=False)
class ServerState:
    """What one server's connections are doing; mutated only by the prefetcher's tasks."""

    config: ServerConfig
    limit: int
    open: int = 0
    lines: int = 0
    chunks: int = 0
    errors: int = 0
    last_error: str | None = None
    compression: str | None = None
    rate: float = 0.0
    lowered_at: float = 0.0
    probing: int = 0  # connections the prober holds now: as many header slots yield
    health: State = State.OK  # what the last connection's outcome says of the server
    health_detail: str = ""
    _lines_at_report: int = 0

    @classmethod
    def of(cls, config: ServerConfig) -> ServerState:
        return cls(config, config.connections)

    @property
    def answering(self) -> bool:
        """Whether the server takes logins and connections: a connection of it is open,
        or the last one's outcome did not say otherwise."""
        return self.open > 0 or self.health not in NOT_ANSWERING

    def failed(self, error: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(error).__name__}: {error}"

    def connected(self) -> None:
        """A connection was made: the server takes logins and connections."""
        self.health, self.health_detail = State.OK, ""

    def judge(self, error: BaseException, connected: bool) -> None:
        """What `error` says of the server (`nntp_state`), if anything."""
        state = nntp_state(error, connected)
        if state is not None:
            self.health, self.health_detail = state, f"{type(error).__name__}: {error}"

    def observed(self) -> Observed:
        """The server's health, for the prefetcher's report."""
        return Observed("server", self.config.server, self.health, self.health_detail)

    def lower_limit(self, now: float) -> int:
        """One connection fewer (400/502 "too many connections"), never below one."""
        self.limit = max(1, self.limit - 1)
        self.lowered_at = now
        return self.limit

    def restore_one(self, now: float, quiet_seconds: float) -> None:
        """One connection back once `quiet_seconds` passed without a refusal."""
        if self.limit < self.config.connections and now - self.lowered_at >= quiet_seconds:
            self.limit += 1
            self.lowered_at = now

    def report(self, seconds: float) -> ServerReport:
        """The figures for `uidx status`; the rate is over the last `seconds`."""
        if seconds > 0:
            self.rate = (self.lines - self._lines_at_report) / seconds
        self._lines_at_report = self.lines
        return ServerReport(
            self.config.server,
            self.open,
            self.limit,
            self.lines,
            self.rate,
            self.compression,
            self.errors,
            self.last_error,
        )


def nntp_state(error: BaseException, connected: bool) -> State | None:
    """What an NNTP error says of its server, or None when it says nothing of it (a
    reply to one command, a dropped connection after it worked).

    Args:
        error: the error a connection met.
        connected: whether the connection had been made (greeting and login
            passed) before it.
    """
    if isinstance(error, AuthRequired):
        return State.LOGIN_REFUSED
    if isinstance(error, Unavailable) and not connected:
        return State.REFUSING_CONNECTIONS
    if isinstance(error, ConnectionLost | Timeout) and not connected:
        return State.UNREACHABLE
    return None
