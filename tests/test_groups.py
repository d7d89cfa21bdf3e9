"""`uidx groups`: no half-made group without a server, `--unchecked`, and checked by GROUP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio
from nntp_fixtures import NewsServer
from psycopg_pool import ConnectionPool

from usenet_indexer.cli import EXIT_CONFIG, main
from usenet_indexer.core.retry import RetryPolicy
from usenet_indexer.prefetch.daemon import Landed, Prefetcher, PrefetchOptions
from usenet_indexer.prefetch.servers import ServerState, server_configs
from usenet_indexer.store.migrate import load_migrations, migrate

DEADLINE_SECONDS = 120


@pytest.fixture
def env(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    monkeypatch.delenv("UIDX_NNTP", raising=False)


def _status_groups(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    return {g["name"]: g for g in status["groups"]}


def _status_line(capsys: pytest.CaptureFixture[str], group: str) -> str:
    capsys.readouterr()
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    groups = out.split("\nranges\n")[0]
    (line,) = [line for line in groups.splitlines() if line.split()[:1] == [group]]
    return line


@pytest.mark.usefixtures("env")
def test_without_a_server_groups_add_refuses_in_one_line_naming_uidx_nntp(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for marks in ([], ["--low", "1", "--high", "9"]):
        assert main(["groups", "add", "alt.binaries.half", *marks]) == EXIT_CONFIG
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "UIDX_NNTP" in err
        assert "--unchecked" in err
        assert "Traceback" not in err
    assert main(["groups", "list"]) == 0
    assert "alt.binaries.half" not in capsys.readouterr().out


@pytest.mark.usefixtures("env")
def test_unchecked_adds_the_group_as_not_yet_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["groups", "add", "alt.binaries.later", "--unchecked"]) == 0
    assert "unchecked" in capsys.readouterr().out
    assert (
        main(["groups", "add", "alt.binaries.given", "--unchecked", "--low", "5", "--high", "9"])
        == 0
    )
    assert "as given" in capsys.readouterr().out
    groups = _status_groups(capsys)
    assert groups["alt.binaries.later"]["state"] == "unchecked"
    assert groups["alt.binaries.later"]["checked_at"] is None
    given = groups["alt.binaries.given"]
    assert (given["state"], given["low"], given["high"], given["lag"]) == ("unchecked", 5, 9, 5)
    assert _status_line(capsys, "alt.binaries.later").split()[1] == "unchecked"


@pytest.mark.trio
@pytest.mark.usefixtures("env")
async def test_an_unchecked_group_is_checked_once_the_prefetcher_has_its_group_answer(
    news_server: NewsServer,
    pool: ConnectionPool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # With servers, --unchecked adds the group without asking them now.
    monkeypatch.setenv("UIDX_NNTP", news_server.url())
    assert main(["groups", "add", news_server.group, "--unchecked"]) == 0
    assert main(["ranges", "plan", news_server.group, "--from", "1", "--to", "5000"]) == 0
    before = _status_groups(capsys)[news_server.group]
    assert (before["state"], before["low"], before["high"]) == ("unchecked", None, None)
    assert _status_line(capsys, news_server.group).split()[1] == "unchecked"

    done = trio.Event()

    def observe(event: object) -> None:
        if isinstance(event, Landed):
            done.set()

    options = PrefetchOptions(
        spool=tmp_path / "spool",
        slice_articles=5_000,
        chunk_articles=5_000,
        poll_seconds=0.2,
        retry=RetryPolicy(base_seconds=0.05),
    )
    state = ServerState.of(server_configs([news_server.url()], 1)[0])
    with trio.fail_after(DEADLINE_SECONDS):
        async with trio.open_nursery() as nursery:
            await nursery.start(Prefetcher(pool, options, [state], observe).run)
            await done.wait()
            nursery.cancel_scope.cancel()

    after = _status_groups(capsys)[news_server.group]
    assert after["state"] == "checked"
    assert after["checked_at"] is not None
    assert (after["low"], after["high"]) == (1, news_server.articles)
    assert _status_line(capsys, news_server.group).split()[1] == "checked"


def test_groups_and_each_action_say_what_they_do(capsys: pytest.CaptureFixture[str]) -> None:
    described = {
        (): "add, change and list the groups to index.",
        ("add",): "add a group, checked against the NNTP servers (UIDX_NNTP) unless --unchecked.",
        ("set",): "change a group's backfill.",
        ("disable",): "stop following and indexing a group (its plan is kept).",
        ("enable",): "follow and index a disabled group again.",
        ("list",): "list the groups, with their state, planned and indexed articles and backfill.",
    }
    for action, description in described.items():
        with pytest.raises(SystemExit) as exited:
            main(["groups", *action, "--help"])
        assert exited.value.code == 0
        assert description in " ".join(capsys.readouterr().out.split())


def test_migration_0006_counts_a_group_with_both_marks_as_checked(pg_empty_url: str) -> None:
    migrations = load_migrations()
    assert migrations[5].name == "0006_group_checked.sql"
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        migrate(conn, migrations[:5])
        conn.execute(
            "INSERT INTO groups (name, low, high) VALUES ('a.whole', 1, 9), ('a.half', NULL, NULL)"
        )
        assert migrate(conn, migrations[:6]) == ["0006_group_checked.sql"]
        rows = conn.execute(
            "SELECT name, checked_at = created_at FROM groups ORDER BY name"
        ).fetchall()
    assert rows == [("a.half", None), ("a.whole", True)]


@pytest.mark.usefixtures("env")
def test_set_disable_and_enable_change_what_the_daemon_does_and_status_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["groups", "add", "alt.binaries.later", "--unchecked"]) == 0
    assert main(["groups", "set", "alt.binaries.later", "--backfill-days", "30"]) == 0
    assert "backfill 30 days" in capsys.readouterr().out
    assert _status_groups(capsys)["alt.binaries.later"]["backfill_days"] == 30
    assert main(["groups", "disable", "alt.binaries.later"]) == 0
    group = _status_groups(capsys)["alt.binaries.later"]
    assert (group["state"], group["enabled"]) == ("disabled", False)
    assert "disabled" in _status_line(capsys, "alt.binaries.later")
    # `groups list` says what status says: the state and the backfill (none reached yet).
    assert _list_cells(capsys, "alt.binaries.later") == {"state": "disabled", "backfill": "0/30d"}
    assert main(["groups", "enable", "alt.binaries.later"]) == 0
    assert main(["groups", "set", "alt.binaries.later", "--no-backfill"]) == 0
    group = _status_groups(capsys)["alt.binaries.later"]
    assert (group["state"], group["backfill_days"]) == ("unchecked", None)
    assert _list_cells(capsys, "alt.binaries.later") == {"state": "unchecked", "backfill": "-"}


def _list_cells(capsys: pytest.CaptureFixture[str], group: str) -> dict[str, str]:
    """The state and backfill cells of the group's line of `uidx groups list`, by the
    heading's words (each cell one word, the backfill's figure too)."""
    capsys.readouterr()
    assert main(["groups", "list"]) == 0
    heading, *lines = capsys.readouterr().out.splitlines()
    (line,) = [line for line in lines if line.split()[:1] == [group]]
    cells = dict(zip(heading.split(), line.split(), strict=True))
    return {name: cells.get(name, "") for name in ("state", "backfill")}


@pytest.mark.usefixtures("env")
def test_changing_a_group_that_is_not_there_is_one_line_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for action in (
        ["set", "alt.binaries.none", "--backfill-days", "3"],
        ["disable", "alt.binaries.none"],
    ):
        assert main(["groups", *action]) != 0
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "alt.binaries.none" in err
        assert "Traceback" not in err
    # A value no day count can be is a usage mistake, told by the option's parser (exit 2).
    with pytest.raises(SystemExit) as refused:
        main(["groups", "set", "alt.binaries.none", "--backfill-days", "-1"])
    assert refused.value.code == 2
    assert "--backfill-days" in capsys.readouterr().err
