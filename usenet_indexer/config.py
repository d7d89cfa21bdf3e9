"""Settings: read once, typed, and loud about mistakes.

Sources, later ones winning: the defaults below, a TOML file (`--config`,
default `$UIDX_HOME/uidx.toml`, absent is fine unless named), then the
environment: `DATABASE_URL`, `UIDX_HOME`, `UIDX_LISTEN`, `UIDX_NNTP`,
`COORDINATOR_URL`, `NODE_TOKEN`, and `UIDX_<KEY>` for every other key (for
example `UIDX_LEASE_TTL_SECONDS=60`). An unknown key in the file or an
unknown `UIDX_` variable is an error that names it; so is a value of the
wrong type. This is the one module that reads `os.environ`: `load` takes the
environment as an argument, and callers pass `os.environ` once.

systemd/uidx.toml.example documents every key.
"""

from __future__ import annotations

import io
import ipaddress
import math
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs

from usenet_indexer.errors import ConfigError

# Where uidx keeps its data when UIDX_HOME is not set. As root the home of
# a user's ~ is unreachable for the unprivileged user that runs the embedded
# PostgreSQL, so a system install lives in /var/lib/uidx.
USER_HOME = "~/.local/share/uidx"
SYSTEM_HOME = "/var/lib/uidx"

# Environment variables with names of their own (the rest are UIDX_<KEY>).
_NAMED_ENV = {
    "DATABASE_URL": "database_url",
    "UIDX_HOME": "home",
    "UIDX_LISTEN": "listen",
    "UIDX_NNTP": "nntp",
    "COORDINATOR_URL": "coordinator_url",
    "NODE_TOKEN": "node_token",
    "UIDX_SPOOL": "spool_url",
    # Set by systemd for Type=notify units: where READY=1 and STOPPING=1 go.
    "NOTIFY_SOCKET": "notify_socket",
}

# The usual AWS variables, for an S3 spool: used where the spool_ setting is
# not given (in the file or as UIDX_SPOOL_...); the first one set wins.
_AWS_ENV = {
    "spool_endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "spool_region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "spool_access_key_id": ("AWS_ACCESS_KEY_ID",),
    "spool_secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
}


@attrs.frozen
class Settings:
    """Every setting of every role. Units are in the names.

    Attributes:
        home: the data folder (embedded PostgreSQL, spool).
        database_url: the coordinator's PostgreSQL; empty for the embedded cluster.
        listen: host:port of the coordinator's HTTP side.
        nntp: NNTP server URLs (`nntps://user:pass@host:563?connections=20`).
        coordinator_url: where an edge finds the coordinator.
        node_token: an edge's bearer token (never logged).
        processes: worker processes of a daemon (0 = one per core).
        lease_ttl_seconds: a lease without a batch or heartbeat for this long
            passes to the next node.
        batch_articles: articles per batch an edge posts.
        max_body_bytes: the largest compressed batch body the coordinator reads.
        max_inflated_bytes: the most a batch body may inflate to.
        statement_timeout_seconds: PostgreSQL statement_timeout of the coordinator's sessions.
        idle_in_transaction_timeout_seconds: PostgreSQL idle_in_transaction_session_timeout.
        range_articles: articles per planned range (`uidx ranges plan --size`).
        idle_seconds: how long an edge waits after a 204 before asking again.
        notify_socket: systemd's NOTIFY_SOCKET (the supervisor reports READY there).
        nntp_connections: connections per NNTP server whose URL has no `?connections=N`.
        nntp_ca_file: a PEM file of CA certificates for private NNTP servers.
        nntp_timeout_seconds: the longest an NNTP server may stay silent in a command.
        prefetch_slice_articles: articles per OVER command of the prefetcher.
        prefetch_chunk_articles: articles per spool chunk (several slices).
        prefetch_poll_seconds: how often the prefetcher looks for new work when idle.
        spool_budget_bytes: the spool's size past which only leased ranges are
            fetched (0 = no limit).
        catalog_build_seconds: how often the coordinator builds the searchable
            catalog anyway (it builds a moment after each batch it stores).
        catalog_quiet_seconds: an incomplete release is shown (with its
            completion) once no chunk of it came for this long; a complete
            one at once.
        catalog_max_lag_seconds: a stored batch's answer is held (at most 30 s)
            while the catalog build's oldest pending key has waited longer than
            this, so edges go at the pace the catalog is built (0: never held).
        catalog_sweep_hours: every stored release is built again once per this
            many hours, a slice at a time (core/sweep.py), so the catalog
            followed batch by batch becomes what a whole rebuild makes; it gives
            way while the build is more than catalog_max_lag_seconds behind (0: never).
        live_poll_seconds: how often the prefetcher asks each enabled group's
            high water mark and plans the new articles (the live head).
        live_margin_articles: how far below the high water mark the live head stays.
        backfill_ranges_ahead: backfill ranges waiting before the daemon plans
            the next slice below them.
        probe_share: the share of each server's connections that may probe
            obfuscated releases (0: none; a server with too few for a share
            probes on one connection while header fetching is idle).
        probe_max_body_bytes: the largest article body a probe reads.
        metrics_token: the bearer token /metrics asks of a scraper (never
            logged); empty: /metrics is closed (404).
        metrics_listen: host:port of a listener that serves /metrics (and
            /healthz) only, to anyone who reaches it, without a token; empty: none.
        public_url: the site's root as its users reach it
            ("https://indexer.example.org"): every link, guid and enclosure
            starts with it; empty: the request's own (see trusted_proxies).
        trusted_proxies: addresses or networks of the proxies in front of the
            coordinator whose X-Forwarded-Proto and X-Forwarded-Host are believed
            (without public_url); nobody else's are.
        api_requests_per_day: newznab requests (searches, feeds, details) per key
            and UTC day; past it, error 500 with Retry-After; 0 = no limit. A
            user's own limit (`uidx users limits`) wins.
        api_grabs_per_day: NZB downloads (t=get) per key and UTC day; past it,
            error 501 with Retry-After; 0 = no limit.
        offer_broken_releases: the newznab API lists broken releases too (those
            missing more than their PAR2 recovery rebuilds: a downloader fails
            them); off, feeds and searches offer whole and repairable ones only.
        edge_builds: the coordinator offers its catalog builds to edges (edges
            running for good ask for them between their ranges' work), so the
            build grows with the edges; its own builder then builds only keys
            no edge took within 30 s (false: the coordinator builds them all).
        pure_indexer: edges and `uidx index` run the RangeIndexer's pure-Python
            per-line loop and subject parse, edges the pure fragment layout
            (fragments._packed), the coordinator's catalog build the pure fragment
            unpacking, and both the merge's pure file figures (core/_fastmerge's
            twin), even where the compiled ones are built (the same output,
            slower: for tests and for telling a fault of compiled code apart).
        spool_url: where the header spool's chunks are (`UIDX_SPOOL`): empty for
            `$UIDX_HOME/spool`, a folder, or `s3://bucket/prefix` (an
            S3-compatible object store; edges then read chunks from it directly).
        spool_endpoint_url: the S3 endpoint (`http://127.0.0.1:8333`); empty:
            AWS_ENDPOINT_URL(_S3), else AWS's own.
        spool_region: the S3 region; empty: AWS_REGION, else the SDK's default.
        spool_access_key_id: the S3 access key; empty: AWS_ACCESS_KEY_ID.
        spool_secret_access_key: the S3 secret key (never logged); empty:
            AWS_SECRET_ACCESS_KEY.
        spool_presign_seconds: how long a chunk link the coordinator hands an
            edge stays valid.
    """

    home: Path
    database_url: str = ""
    listen: str = "127.0.0.1:8750"
    nntp: tuple[str, ...] = ()
    coordinator_url: str = ""
    node_token: str = attrs.field(default="", repr=False)
    processes: int = 1
    lease_ttl_seconds: float = 900.0
    batch_articles: int = 500_000
    max_body_bytes: int = 256 << 20
    max_inflated_bytes: int = 2 << 30
    statement_timeout_seconds: float = 60.0
    idle_in_transaction_timeout_seconds: float = 60.0
    range_articles: int = 5_000_000
    idle_seconds: float = 30.0
    notify_socket: str = ""
    nntp_connections: int = 4
    nntp_ca_file: str = ""
    nntp_timeout_seconds: float = 60.0
    prefetch_slice_articles: int = 10_000
    prefetch_chunk_articles: int = 50_000
    prefetch_poll_seconds: float = 5.0
    spool_budget_bytes: int = 20 << 30
    catalog_build_seconds: float = 30.0
    catalog_quiet_seconds: float = 600.0
    catalog_max_lag_seconds: float = 5.0
    catalog_sweep_hours: float = 168.0
    live_poll_seconds: float = 60.0
    live_margin_articles: int = 0
    backfill_ranges_ahead: int = 2
    probe_share: float = 0.1
    probe_max_body_bytes: int = 4 << 20
    metrics_token: str = attrs.field(default="", repr=False)
    metrics_listen: str = ""
    public_url: str = ""
    trusted_proxies: tuple[str, ...] = ()
    api_requests_per_day: int = 0
    api_grabs_per_day: int = 0
    offer_broken_releases: bool = False
    pure_indexer: bool = False
    edge_builds: bool = True
    spool_url: str = ""
    spool_endpoint_url: str = ""
    spool_region: str = ""
    spool_access_key_id: str = attrs.field(default="", repr=False)
    spool_secret_access_key: str = attrs.field(default="", repr=False)
    spool_presign_seconds: int = 3600

    def __attrs_post_init__(self) -> None:
        # Every number within its bounds, however the settings were made: the
        # reader checks each value first (and names the variable it came
        # from); a Settings made in code or by attrs.evolve is checked here.
        for field in attrs.fields(Settings):
            value = getattr(self, field.name)
            if isinstance(field.default, bool) or not isinstance(field.default, (int, float)):
                continue
            try:
                _bounded(field.name, field.default, value)
            except (TypeError, ValueError) as error:
                raise ConfigError(field.name, f"{value!r}: {error}") from error

    @property
    def listen_host_port(self) -> tuple[str, int]:
        """`listen` split into host and port."""
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


def default(key: str) -> Any:
    """The default of setting `key`: the one place it is written (commands and help read it).

    Raises:
        KeyError: there is no such setting (a mistake in uidx, not the operator's).
    """
    return attrs.fields_dict(Settings)[key].default


def default_home(env: Mapping[str, str], is_root: bool) -> Path:
    """UIDX_HOME, else /var/lib/uidx as root, else ~/.local/share/uidx.

    Raises:
        ConfigError: UIDX_HOME is set but empty or blank (named).
    """
    if "UIDX_HOME" in env:
        try:
            return _home(env["UIDX_HOME"])
        except ValueError as error:
            raise ConfigError("UIDX_HOME", f"{env['UIDX_HOME']!r}: {error}") from error
    return Path(SYSTEM_HOME if is_root else USER_HOME).expanduser()


def load(
    env: Mapping[str, str], *, config_file: Path | None = None, is_root: bool = False
) -> Settings:
    """Read the settings once: defaults, then the TOML file, then the environment.

    Args:
        env: the environment (pass `os.environ`).
        config_file: the TOML file named with --config (must exist); None for
            `$UIDX_HOME/uidx.toml` if it exists.
        is_root: whether uidx runs as root (decides the default home).

    Returns:
        The settings.

    Raises:
        ConfigError: an unknown key, a value of the wrong type or out of its
            bounds, a file that cannot be read; the message names the key
            (the variable, for one of the environment's own names) or file.
    """
    home = default_home(env, is_root)
    values: dict[str, Any] = {}
    path = config_file if config_file is not None else home / "uidx.toml"
    # The home's file may be absent, but anything else there (a folder, a
    # FIFO) is refused rather than passed over.
    if config_file is not None or path.exists():
        values.update(_read_toml(path))
    from_env = _from_env(env)
    values.update(from_env)
    for key, names in _AWS_ENV.items():
        if not values.get(key) and (found := next((env[n] for n in names if env.get(n)), None)):
            values[key] = found
    values.setdefault("home", str(home))
    # A mistake in COORDINATOR_URL is told as COORDINATOR_URL: the setting's
    # name in the file (coordinator_url) is not what the operator wrote.
    named = {key: name for name, key in _NAMED_ENV.items() if key in from_env}
    return _build(values, named)


def from_process(config_file: Path | None = None) -> Settings:
    """The settings of this process: its environment, its user, the named file.

    The one place uidx reads `os.environ`.
    """
    return load(os.environ, config_file=config_file, is_root=os.geteuid() == 0)


def check_file(path: Path) -> None:
    """Refuse a settings file that cannot be read, or is no regular file.

    Opening a FIFO waits for a writer (for ever, if none comes), a device
    may never end (/dev/zero), a folder is no settings file.

    Raises:
        ConfigError: naming the path and why.
    """
    _open_regular(path).close()


def _open_regular(path: Path) -> io.BufferedReader:
    # O_NONBLOCK: opening a FIFO for reading returns at once instead of
    # waiting for a writer; fstat of what was opened leaves no race.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise ConfigError(str(path), f"cannot be read: {error.strerror or error}") from error
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ConfigError(str(path), f"is {kind}, not a TOML settings file")
    return os.fdopen(fd, "rb")


def _read_toml(path: Path) -> dict[str, Any]:
    # Imported here: most runs read no settings file, and tomllib (with its
    # regular expressions and datetime) was ~2% of `uidx index`'s start-up.
    import tomllib

    with _open_regular(path) as stream:
        try:
            data = tomllib.load(stream)
        except OSError as error:
            raise ConfigError(str(path), f"cannot be read: {error.strerror or error}") from error
        except UnicodeDecodeError as error:
            raise ConfigError(str(path), f"is not UTF-8 TOML (at byte {error.start})") from error
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(str(path), f"is not valid TOML: {error}") from error
    return data


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    fields = _field_names()
    values: dict[str, Any] = {}
    for name, value in env.items():
        if name in _NAMED_ENV:
            values[_NAMED_ENV[name]] = value
        elif name.startswith("UIDX_"):
            key = name[5:].lower()
            if key not in fields or key in _NAMED_ENV.values():
                raise ConfigError(name, "is not a uidx setting (see systemd/uidx.toml.example)")
            values[key] = value
    return values


def _field_names() -> set[str]:
    return {field.name for field in attrs.fields(Settings)}


# Times where 0 means "at once" rather than nothing at all.
_MAY_BE_ZERO = frozenset(
    {"catalog_quiet_seconds", "catalog_max_lag_seconds", "catalog_sweep_hours", "probe_share"}
)


@attrs.frozen
class _Bounds:
    """The values a number setting may take, both ends included, and why."""

    least: float = -math.inf
    most: float = math.inf
    why: str = ""


# PostgreSQL keeps these timeouts as whole milliseconds in an int: under 1 ms
# is 0, which switches the timeout off; over 2^31-1 ms the SET is refused and
# no session of the pool ever opens.
_MILLISECONDS = _Bounds(0.001, 2_147_483, "PostgreSQL counts it in milliseconds, in an int")

# Settings PostgreSQL adds to or takes from now() as an interval: past about
# 294,000 years the timestamp is out of range and every query with it fails.
# Ten years is far beyond any lease or wait anyone means.
TEN_YEARS_SECONDS = 10 * 365 * 24 * 3600
_TEN_YEARS = _Bounds(most=TEN_YEARS_SECONDS, why="ten years")

# Beyond the rules of all numbers (finite; a whole number not negative; any
# other more than 0, or not negative if in _MAY_BE_ZERO).
_BOUNDS = {
    # Articles per batch, range, OVER command or chunk: 0 would cut nothing.
    "batch_articles": _Bounds(least=1),
    "range_articles": _Bounds(least=1),
    "prefetch_slice_articles": _Bounds(least=1),
    "prefetch_chunk_articles": _Bounds(least=1),
    # 0 would refuse every batch body.
    "max_body_bytes": _Bounds(least=1),
    "max_inflated_bytes": _Bounds(least=1),
    # The connections of a server whose URL names none: 0 fetches nothing.
    "nntp_connections": _Bounds(least=1),
    # 0: no backfill range would ever be planned.
    "backfill_ranges_ahead": _Bounds(least=1),
    "probe_max_body_bytes": _Bounds(least=1 << 16, why="a segment's size"),
    "probe_share": _Bounds(most=1, why="a share of the connections"),
    "statement_timeout_seconds": _MILLISECONDS,
    "idle_in_transaction_timeout_seconds": _MILLISECONDS,
    "lease_ttl_seconds": _TEN_YEARS,
    "catalog_quiet_seconds": _TEN_YEARS,
    # A cycle of ten years is no sweep anyone means (and its pace no timestamp holds).
    "catalog_sweep_hours": _Bounds(most=10 * 365 * 24, why="ten years"),
    # S3 (SigV4) refuses a presigned URL that lasts longer than 7 days.
    "spool_presign_seconds": _Bounds(1, 7 * 24 * 3600, "S3 presigns for 1 s to 7 days"),
}


def _build(values: dict[str, Any], named: Mapping[str, str]) -> Settings:
    """Settings of raw values; a mistake names the key, or `named[key]` if there."""
    fields = {field.name: field for field in attrs.fields(Settings)}
    typed: dict[str, Any] = {}
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(key, "is not a uidx setting (see systemd/uidx.toml.example)")
        try:
            typed[key] = _convert(key, fields[key].default, value)
        except (TypeError, ValueError) as error:
            # A secret (a field kept out of repr) is not repeated in the message.
            said = "the value" if not fields[key].repr else repr(value)
            raise ConfigError(named.get(key, key), f"{said}: {error}") from error
    return Settings(**typed)


def _convert(key: str, default: object, value: object) -> object:
    """A raw value (TOML or environment string) as the type of the key's default.

    Raises:
        TypeError, ValueError: the value does not fit; the message says why.
    """
    if key == "home":
        return _home(value)
    if key in ("listen", "metrics_listen"):
        # metrics_listen may be empty (no metrics listener); listen may not.
        return _listen(value) if value or key == "listen" else ""
    if key == "coordinator_url":
        return _coordinator_url(value)
    if key == "nntp":
        return _words(value, "a list of URLs (or, in the environment, URLs separated by spaces)")
    if key == "trusted_proxies":
        expected = "a list of addresses or networks (in the environment: separated by spaces)"
        return _networks(_words(value, expected))
    if key == "public_url":
        return _public_url(value)
    if key == "spool_url":
        return _spool_url(value)
    if key == "spool_endpoint_url" and value:
        return _endpoint_url(value)
    if key == "metrics_token" and value:
        return _bearer_token(value)
    if isinstance(default, bool):
        return _boolean(value)
    if isinstance(default, (int, float)):
        return _number(key, default, value)
    if isinstance(value, str):
        return value
    raise TypeError("must be a string")


def _number(key: str, default: float, value: object) -> float:
    """A whole number if the default is one, else any finite number, within the key's bounds."""
    if isinstance(value, bool):
        raise TypeError("must be a number or a string, not a boolean")
    return _bounded(key, default, _whole(value) if isinstance(default, int) else _real(value))


def _bounded(key: str, default: float, number: float) -> float:
    """`number` if it is within the key's bounds (a number's rules, then `_BOUNDS`').

    Raises:
        TypeError, ValueError: it is not; the message says why.
    """
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise TypeError("must be a number")
    if isinstance(default, int) and not isinstance(number, int):
        raise TypeError("must be a whole number")
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    if number < 0:
        raise ValueError("must not be negative")
    if number == 0 and isinstance(default, float) and key not in _MAY_BE_ZERO:
        raise ValueError("must be positive")
    bounds = _BOUNDS.get(key, _Bounds())
    why = f" ({bounds.why})" if bounds.why else ""
    if number < bounds.least:
        raise ValueError(f"must be at least {bounds.least:g}{why}")
    if number > bounds.most:
        raise ValueError(f"must be at most {bounds.most:.0f}{why}")
    return number


def _whole(value: object) -> int:
    # int("1.5") and a TOML 1.5 are both told the same way.
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise TypeError("must be a whole number")


def _real(value: object) -> float:
    if not isinstance(value, (int, float, str)):
        raise TypeError("must be a number")
    try:
        number = float(value)
    except ValueError:
        raise TypeError("must be a number") from None
    except OverflowError:
        number = math.inf  # a TOML integer of hundreds of digits
    # TOML and float() both take inf and nan: no timeout, lease or wait can
    # be either (PostgreSQL's intervals and trio's deadlines refuse them).
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    return number


def _home(value: object) -> Path:
    """The data folder; an empty value is refused, not taken as the current folder."""
    if not isinstance(value, str):
        raise TypeError("must be a string")
    if not value.strip():
        # `UIDX_HOME=$DATA` with DATA unset: the default home would be a
        # silent guess, and Path("") is the current folder.
        raise ValueError("must name a folder (unset it for the default home)")
    if value != value.strip():
        raise ValueError("must not begin or end with spaces")
    return Path(value).expanduser()


# host:port of a listener: a name, an IPv4 address, or an IPv6 one (in
# brackets or not: the port is after the last colon).
_LISTEN_HOST = re.compile(r"\[?[A-Za-z0-9._:-]{1,253}\]?")


def _listen(value: object) -> str:
    """HOST:PORT, a port in 0..65535 (0: any free port, which tests use)."""
    if not isinstance(value, str):
        raise TypeError("must be a string")
    host, colon, port = value.strip().rpartition(":")
    if not colon or not re.fullmatch(r"[0-9]{1,5}", port) or not _LISTEN_HOST.fullmatch(host):
        raise ValueError("must be HOST:PORT (0.0.0.0:PORT for every interface)")
    if int(port) > 65535:
        raise ValueError("the port must be 0-65535")
    return value.strip()


def _coordinator_url(value: object) -> str:
    """http(s)://host[:port][/path] ("" stays: not an edge)."""
    return _http_url(value, " (http://HOST:8750)")


def _words(value: object, expected: str) -> tuple[str, ...]:
    """A list of strings: a TOML list, or an environment value split at spaces."""
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(expected)


def _networks(values: tuple[str, ...]) -> tuple[str, ...]:
    """Addresses or networks ("10.0.0.1", "192.168.0.0/16", "::1"), as networks."""
    networks = []
    for value in values:
        try:
            networks.append(str(ipaddress.ip_network(value, strict=False)))
        except ValueError as error:
            raise ValueError(f"{value!r} is no address or network") from error
    return tuple(networks)


# A URL's host[:port]: a host name or a bracketed IPv6 address (no user, no password).
_URL_HOST = re.compile(r"^(?:[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$")


def _check_host(netloc: str) -> None:
    """A URL's host[:port], the port in 1..65535."""
    if not _URL_HOST.match(netloc):
        raise ValueError("must name a host and an optional port (no user or password)")
    _, colon, port = netloc.rpartition(":")
    if colon and "]" not in port and not 1 <= int(port) <= 65535:
        raise ValueError("the port must be 1-65535")


def _public_url(value: object) -> str:
    """http(s)://host[:port][/path], without a trailing "/" ("" stays: no public URL)."""
    return _http_url(value).rstrip("/")


def _http_url(value: object, example: str = "") -> str:
    """http(s)://host[:port][/path], stripped ("" stays); `example` follows the scheme's
    refusal."""
    if not isinstance(value, str):
        raise TypeError("must be a string")
    url = value.strip()
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"must start with http:// or https://{example}")
    _check_host(parts.netloc)
    if "?" in url or "#" in url:
        raise ValueError("must have no query (?) or fragment (#)")
    return url


def _spool_url(value: object) -> str:
    """ "" (the home's spool folder), a folder, or s3://BUCKET[/PREFIX]."""
    if not isinstance(value, str):
        raise TypeError("must be a string")
    url = value.strip()
    if url.startswith("s3://"):
        bucket = url[5:].partition("/")[0]
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            raise ValueError("must be s3://BUCKET/PREFIX with a bucket name of 3-63 a-z 0-9 . -")
        return url.rstrip("/")
    if "://" in url:
        raise ValueError("must be a folder or s3://BUCKET/PREFIX")
    return url


def _endpoint_url(value: object) -> str:
    """http(s)://host[:port]."""
    if not isinstance(value, str):
        raise TypeError("must be a string")
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError("must be http(s)://HOST[:PORT]")
    _check_host(parts.netloc)
    return value.strip().rstrip("/")


# What a switch may be written as (TOML's true and false, or these in the environment).
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


# What a scraper can send as `Authorization: Bearer TOKEN` and the coordinator reads
# (RFC 6750's b64token, at most node.MAX_TOKEN_CHARS): any other token would be taken
# here and never match (/metrics 401 for ever).
_BEARER_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]{1,512}=*")


def _bearer_token(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("must be a string")
    if not _BEARER_TOKEN.fullmatch(value) or len(value) > 512:
        raise ValueError(
            "must be a bearer token of at most 512 letters, digits and -._~+/ (then any"
            " '='), as a scraper sends it; e.g. the output of"
            " python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return value


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise TypeError("must be true or false")
