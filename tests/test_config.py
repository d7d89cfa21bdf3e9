"""Settings: defaults, TOML, environment, and loud mistakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from usenet_indexer.cli import main
from usenet_indexer.config import Settings, default, load
from usenet_indexer.edge.options import EdgeOptions
from usenet_indexer.errors import ConfigError
from usenet_indexer.nntp.client import DEFAULT_TIMEOUT_SECONDS
from usenet_indexer.prefetch.options import PrefetchOptions
from usenet_indexer.store.pool import open_pool

EXAMPLE = Path(__file__).resolve().parent.parent / "systemd" / "uidx.toml.example"


def test_defaults_and_home(tmp_path: Path) -> None:
    assert load({"UIDX_HOME": str(tmp_path)}).home == tmp_path
    assert load({}, is_root=True).home == Path("/var/lib/uidx")
    settings = load({"UIDX_HOME": str(tmp_path)})
    assert settings.listen_host_port == ("127.0.0.1", 8750)
    assert settings.lease_ttl_seconds == 900.0


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "uidx.toml").write_text(
        'listen = "0.0.0.0:9000"\nlease_ttl_seconds = 30\nnntp = ["nntp://a", "nntp://b"]\n'
    )
    settings = load(
        {"UIDX_HOME": str(tmp_path), "UIDX_LISTEN": "127.0.0.1:8751", "UIDX_PROCESSES": "4"}
    )
    assert settings.listen == "127.0.0.1:8751"
    assert settings.lease_ttl_seconds == 30.0
    assert settings.processes == 4
    assert settings.nntp == ("nntp://a", "nntp://b")
    assert load({"UIDX_HOME": str(tmp_path), "UIDX_NNTP": "nntp://x nntps://y"}).nntp == (
        "nntp://x",
        "nntps://y",
    )


@pytest.mark.parametrize(
    ("env", "file", "key"),
    [
        ({"UIDX_LEASE_TTL": "5"}, "", "UIDX_LEASE_TTL"),
        ({}, "lease_ttl = 5\n", "lease_ttl"),
        ({"UIDX_PROCESSES": "many"}, "", "processes"),
        ({}, 'batch_articles = "lots"\n', "batch_articles"),
        ({}, "lease_ttl_seconds = -1\n", "lease_ttl_seconds"),
        ({}, "processes = true\n", "processes"),
        ({"UIDX_OFFER_BROKEN_RELEASES": "perhaps"}, "", "offer_broken_releases"),
        ({}, "offer_broken_releases = 1\n", "offer_broken_releases"),
        ({}, "listen = [\n", "uidx.toml"),
        ({"UIDX_SPOOL": "s3://"}, "", "UIDX_SPOOL"),
        ({"UIDX_SPOOL": "s3://Bad_Bucket/p"}, "", "UIDX_SPOOL"),
        ({}, 'spool_url = "https://bucket/p"\n', "spool_url"),
        ({"UIDX_SPOOL_URL": "s3://bucket"}, "", "UIDX_SPOOL_URL"),
        ({"AWS_ENDPOINT_URL": "localhost:8333"}, "", "spool_endpoint_url"),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, env: dict[str, str], file: str, key: str) -> None:
    if file:
        (tmp_path / "uidx.toml").write_text(file)
    with pytest.raises(ConfigError, match=key):
        load({"UIDX_HOME": str(tmp_path), **env})


@pytest.mark.parametrize(
    ("env", "file", "offered"),
    [
        ({}, "", False),
        ({}, "offer_broken_releases = true\n", True),
        ({"UIDX_OFFER_BROKEN_RELEASES": "true"}, "", True),
        ({"UIDX_OFFER_BROKEN_RELEASES": "0"}, "offer_broken_releases = true\n", False),
        ({"UIDX_OFFER_BROKEN_RELEASES": "Yes"}, "", True),
    ],
)
def test_a_switch_is_true_or_false(
    tmp_path: Path, env: dict[str, str], file: str, offered: bool
) -> None:
    (tmp_path / "uidx.toml").write_text(file)
    assert load({"UIDX_HOME": str(tmp_path), **env}).offer_broken_releases is offered


def test_the_spool_is_a_folder_or_a_bucket_with_aws_variables_as_fallbacks(
    tmp_path: Path,
) -> None:
    home = {"UIDX_HOME": str(tmp_path)}
    assert load(home).spool_url == ""
    assert load({**home, "UIDX_SPOOL": "/srv/spool"}).spool_url == "/srv/spool"
    aws = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:8333",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_REGION": "eu-central-1",
        "AWS_ACCESS_KEY_ID": "from-aws",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
    }
    settings = load({**home, **aws, "UIDX_SPOOL": "s3://spool/uidx/"})
    assert (settings.spool_url, settings.spool_endpoint_url, settings.spool_region) == (
        "s3://spool/uidx",
        "http://127.0.0.1:8333",
        "eu-central-1",
    )
    assert (settings.spool_access_key_id, settings.spool_secret_access_key) == (
        "from-aws",
        "aws-secret",
    )
    assert "aws-secret" not in repr(settings)
    # A uidx setting wins over the AWS variable (file or environment).
    (tmp_path / "uidx.toml").write_text('spool_access_key_id = "from-file"\n')
    assert load({**home, **aws}).spool_access_key_id == "from-file"
    assert load({**home, **aws, "UIDX_SPOOL_REGION": "us-east-1"}).spool_region == "us-east-1"


def test_a_named_config_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load({"UIDX_HOME": str(tmp_path)}, config_file=tmp_path / "missing.toml")


def test_the_example_documents_every_key_and_loads(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    for field in attrs.fields(Settings):
        assert f"\n{field.name} = " in text, field.name
    settings = load({}, config_file=EXAMPLE)
    assert settings == Settings(home=Path("/var/lib/uidx"))


def test_the_token_is_not_in_the_repr(tmp_path: Path) -> None:
    settings = load({"UIDX_HOME": str(tmp_path), "NODE_TOKEN": "s3cret-token"})
    assert settings.node_token == "s3cret-token"
    assert "s3cret-token" not in repr(settings)


def test_defaults_are_written_once_and_read_by_the_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The settings' defaults are the edge's, `uidx index`'s, and what their help says."""
    settings = Settings(home=tmp_path)
    assert default("batch_articles") == settings.batch_articles
    options = EdgeOptions(coordinator_url="http://c", node_token="t")
    assert (options.batch_articles, options.idle_seconds) == (
        settings.batch_articles,
        settings.idle_seconds,
    )
    for command in ("index", "edge"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert str(settings.batch_articles) in " ".join(capsys.readouterr().out.split())


def test_options_built_without_settings_are_the_default_settings_options(tmp_path: Path) -> None:
    """Each role's options at their defaults are those of the default settings (issue 25)."""
    settings = Settings(home=tmp_path)
    assert PrefetchOptions(tmp_path / "spool") == PrefetchOptions.from_settings(settings)
    assert PrefetchOptions(tmp_path).budget_bytes == 20 << 30
    edge = attrs.evolve(settings, coordinator_url="http://c", node_token="t")
    assert EdgeOptions(coordinator_url="http://c", node_token="t") == EdgeOptions.from_settings(
        edge
    )
    assert settings.nntp_timeout_seconds == DEFAULT_TIMEOUT_SECONDS


@pytest.mark.parametrize(
    ("env", "file", "key", "problem"),
    [
        # Not finite: PostgreSQL and trio refused them at their first use.
        ({"UIDX_STATEMENT_TIMEOUT_SECONDS": "inf"}, "", "statement_timeout_seconds", "finite"),
        ({"UIDX_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "nan"}, "", "idle_in", "finite"),
        ({"UIDX_LEASE_TTL_SECONDS": "inf"}, "", "lease_ttl_seconds", "finite"),
        ({"UIDX_LEASE_TTL_SECONDS": "nan"}, "", "lease_ttl_seconds", "finite"),
        ({}, "lease_ttl_seconds = inf\n", "lease_ttl_seconds", "finite"),
        ({}, f"idle_seconds = 1{'0' * 400}\n", "idle_seconds", "finite"),
        # Past what PostgreSQL takes: milliseconds in an int, intervals from now().
        ({"UIDX_STATEMENT_TIMEOUT_SECONDS": "3000000"}, "", "statement_timeout", "at most 2147483"),
        ({"UIDX_STATEMENT_TIMEOUT_SECONDS": "0.0001"}, "", "statement_timeout", "at least 0.001"),
        ({"UIDX_CATALOG_QUIET_SECONDS": "1e15"}, "", "catalog_quiet_seconds", "at most"),
        ({"UIDX_LEASE_TTL_SECONDS": "1e12"}, "", "lease_ttl_seconds", "at most"),
        # 0 articles, connections or bytes cuts or reads nothing.
        ({"UIDX_BATCH_ARTICLES": "0"}, "", "batch_articles", "at least 1"),
        ({}, "range_articles = 0\n", "range_articles", "at least 1"),
        ({"UIDX_NNTP_CONNECTIONS": "0"}, "", "nntp_connections", "at least 1"),
        ({"UIDX_MAX_BODY_BYTES": "0"}, "", "max_body_bytes", "at least 1"),
        ({"UIDX_PROBE_SHARE": "1.5"}, "", "probe_share", "at most 1"),
        ({"UIDX_SPOOL_PRESIGN_SECONDS": "604801"}, "", "spool_presign_seconds", "at most 604800"),
        # A whole number is asked for as one, from the file and the environment.
        ({}, "processes = 1.5\n", "processes", "must be a whole number"),
        ({"UIDX_PROCESSES": "1.5"}, "", "processes", "must be a whole number"),
    ],
)
def test_numbers_out_of_bounds_name_the_key(
    tmp_path: Path, env: dict[str, str], file: str, key: str, problem: str
) -> None:
    (tmp_path / "uidx.toml").write_text(file)
    with pytest.raises(ConfigError) as refused:
        load({"UIDX_HOME": str(tmp_path), **env})
    assert refused.value.key.startswith(key)
    assert problem in refused.value.problem
    assert "must be a number" not in str(refused.value)


def test_numbers_at_their_bounds_are_taken(tmp_path: Path) -> None:
    env = {
        "UIDX_HOME": str(tmp_path),
        "UIDX_STATEMENT_TIMEOUT_SECONDS": "0.001",
        "UIDX_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "2147483",
        "UIDX_CATALOG_QUIET_SECONDS": "0",
        "UIDX_LEASE_TTL_SECONDS": "315360000",
        "UIDX_PROCESSES": "0",
        "UIDX_SPOOL_BUDGET_BYTES": "0",
        "UIDX_PROBE_SHARE": "1",
        "UIDX_SPOOL_PRESIGN_SECONDS": "604800",
    }
    settings = load(env)
    assert (settings.statement_timeout_seconds, settings.idle_in_transaction_timeout_seconds) == (
        0.001,
        2147483.0,
    )
    assert (settings.catalog_quiet_seconds, settings.lease_ttl_seconds) == (0.0, 315360000.0)
    assert (settings.processes, settings.spool_budget_bytes, settings.probe_share) == (0, 0, 1.0)


def test_the_timeout_bounds_are_postgresqls(tmp_path: Path, pg_url: str) -> None:
    """Both ends of the millisecond bounds open sessions with that timeout (not off)."""
    env = {
        "UIDX_HOME": str(tmp_path),
        "UIDX_STATEMENT_TIMEOUT_SECONDS": "2147483",
        "UIDX_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "0.001",
    }
    with open_pool(pg_url, load(env), max_size=1) as pool, pool.connection() as conn:
        # Read outside a transaction: idle in one for a millisecond ends the session.
        conn.autocommit = True
        shown = conn.execute(
            "SELECT current_setting('statement_timeout'),"
            " current_setting('idle_in_transaction_session_timeout')"
        ).fetchone()
    assert shown == ("2147483s", "1ms")


@pytest.mark.parametrize("home", ["", "  ", " /srv/uidx"])
def test_an_empty_home_is_refused_not_the_current_folder(tmp_path: Path, home: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load({"UIDX_HOME": home})
    assert refused.value.key == "UIDX_HOME"
    path = tmp_path / "uidx.toml"
    path.write_text(f"home = {home!r}\n")
    with pytest.raises(ConfigError) as in_the_file:
        load({}, config_file=path)
    assert in_the_file.value.key == "home"


@pytest.mark.parametrize(
    ("env", "key", "problem"),
    [
        ({"UIDX_LISTEN": "127.0.0.1:99999"}, "UIDX_LISTEN", "port must be 0-65535"),
        ({"UIDX_LISTEN": "127.0.0.1:65536"}, "UIDX_LISTEN", "port must be 0-65535"),
        ({"UIDX_LISTEN": "8750"}, "UIDX_LISTEN", "HOST:PORT"),
        ({"UIDX_LISTEN": ":8750"}, "UIDX_LISTEN", "HOST:PORT"),
        ({"UIDX_LISTEN": "127.0.0.1:http"}, "UIDX_LISTEN", "HOST:PORT"),
        ({"UIDX_METRICS_LISTEN": "127.0.0.1:99999"}, "metrics_listen", "port must be 0-65535"),
        ({"COORDINATOR_URL": "127.0.0.1:8750"}, "COORDINATOR_URL", "http:// or https://"),
        ({"COORDINATOR_URL": "ftp://x"}, "COORDINATOR_URL", "http:// or https://"),
        ({"COORDINATOR_URL": "http://"}, "COORDINATOR_URL", "host"),
        ({"COORDINATOR_URL": "http://u:p@c:8750"}, "COORDINATOR_URL", "no user or password"),
        ({"COORDINATOR_URL": "http://c:99999"}, "COORDINATOR_URL", "port must be 1-65535"),
        ({"COORDINATOR_URL": "http://c:8750/?x=1"}, "COORDINATOR_URL", "no query"),
    ],
)
def test_addresses_are_checked_when_read(
    tmp_path: Path, env: dict[str, str], key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load({"UIDX_HOME": str(tmp_path), **env})
    assert (refused.value.key, problem in refused.value.problem) == (key, True)


def test_good_addresses_are_taken(tmp_path: Path) -> None:
    home = {"UIDX_HOME": str(tmp_path)}
    # Port 0: any free port (the tests' coordinators); IPv6 with or without brackets.
    for listen in ("127.0.0.1:0", "0.0.0.0:65535", "[::1]:8750", "::1:8750", "indexer:80"):
        assert load({**home, "UIDX_LISTEN": listen}).listen == listen
    assert load({**home, "UIDX_METRICS_LISTEN": ""}).metrics_listen == ""
    for url in ("http://c:8750", "https://indexer.example.org/uidx/", "http://[::1]:8750", ""):
        assert load({**home, "COORDINATOR_URL": url}).coordinator_url == url
    (tmp_path / "uidx.toml").write_text('coordinator_url = "ftp://x"\n')
    with pytest.raises(ConfigError, match=r"^coordinator_url: "):
        load(home)


def test_a_settings_file_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "uidx.toml"
    path.write_bytes(b'listen = "\xff"\n')
    with pytest.raises(ConfigError) as refused:
        load({}, config_file=path)
    assert (refused.value.key, refused.value.problem) == (
        str(path),
        "is not UTF-8 TOML (at byte 10)",
    )


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("prefetch_chunk_articles", 0, "must be at least 1"),
        ("probe_share", 1.5, "at most 1"),
        ("probe_max_body_bytes", 1024, "at least 65536"),
        ("live_poll_seconds", 0.0, "must be positive"),
        ("live_margin_articles", -1, "must not be negative"),
        ("lease_ttl_seconds", float("inf"), "finite"),
        ("batch_articles", 2.5, "whole number"),
    ],
)
def test_settings_made_in_code_hold_the_bounds_the_reader_checks(
    tmp_path: Path, key: str, value: Any, why: str
) -> None:
    """One place for a number's bounds (config._BOUNDS): a Settings made by a command or a
    test with attrs.evolve is refused as the reader refuses the same value, naming the key
    (the prefetcher's options checked five of them again, differently worded)."""
    with pytest.raises(ConfigError, match=why) as refused:
        attrs.evolve(Settings(home=tmp_path), **{key: value})
    assert refused.value.key == key


@pytest.mark.parametrize("token", ["s3cret!pass", "p@ss word", "ab=cd", "x" * 513, "tok\u00e9n"])
def test_a_metrics_token_no_scraper_can_send_is_refused(tmp_path: Path, token: str) -> None:
    """/metrics reads `Authorization: Bearer TOKEN` as RFC 6750 says: a token of other
    characters was taken, then every scrape was 401 "a bearer token is required"."""
    with pytest.raises(ConfigError) as refused:
        load({"UIDX_HOME": str(tmp_path), "UIDX_METRICS_TOKEN": token})
    assert refused.value.key == "metrics_token"
    assert "bearer token" in refused.value.problem
    assert token not in str(refused.value)  # a secret is not repeated in the message


def test_a_metrics_token_a_scraper_can_send_is_taken(tmp_path: Path) -> None:
    for token in ("m" * 48, "Ab0-._~+/", "dG9rZW4=", ""):
        assert (
            load({"UIDX_HOME": str(tmp_path), "UIDX_METRICS_TOKEN": token}).metrics_token == token
        )
