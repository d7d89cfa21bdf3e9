"""What an operator sees when a command cannot do its work: one line, an exit status.

Every command that takes a path is run as the real program (`python -m
usenet_indexer`) with paths that cannot work: a missing folder, a folder
where a file goes, a file where a folder goes, a folder no one may write.
Each must end in one line on stderr naming the path and the reason, no
traceback, and exit status 1 (78 for a configuration mistake). Usage
mistakes are told by the (sub)command's own parser, with its own usage
(exit 2), and every (sub)command says what it does in its --help.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from usenet_indexer.cli import build_parser, main
from usenet_indexer.testing.processes import free_port

# Every run here is a program that fails at once; this is its deadline.
RUN_SECONDS = 60.0

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONFIG = 78

# Settings that the tests' environment may have and must not leak in.
SETTINGS = ("DATABASE_URL", "COORDINATOR_URL", "NODE_TOKEN")

# What the system says when a folder takes no new file or folder (sysfs, for
# root, refuses a new folder as not permitted).
REFUSED = ("Permission denied", "Operation not permitted")

# The reason a message must give: one text, or any one of several.
Reason = str | tuple[str, ...]

GOOD_LINE = "{n}\tsubject {n} (1/1)\tposter <p@x>\tdate\t<m{n}@x>\t\t100\t1\n"


def uidx(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `uidx ARGS` as its own process; what it did."""
    return subprocess.run(
        [sys.executable, "-m", "usenet_indexer", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )


def assert_refused(
    done: subprocess.CompletedProcess[str],
    path: Path | str,
    reason: Reason,
    status: int,
) -> None:
    """The run ended with `status` and its last line names `path` and `reason`; no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == status, done.stderr
    last = done.stderr.splitlines()[-1]
    assert str(path) in last, done.stderr
    reasons = (reason,) if isinstance(reason, str) else reason
    assert any(r.lower() in last.lower() for r in reasons), done.stderr


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a run: no uidx settings but a home of its own."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("UIDX_") and k not in SETTINGS}
    clean["UIDX_HOME"] = str(tmp_path / "home")
    return clean


@pytest.fixture
def db_env(env: dict[str, str], pg_url: str) -> dict[str, str]:
    """The environment of a run against the test's fresh database."""
    return {**env, "DATABASE_URL": pg_url}


def add_group(env: dict[str, str], name: str) -> None:
    """Add a group to the database of `env`, without asking any server."""
    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("INSERT INTO groups (name) VALUES (%s)", (name,))


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    """A small overview dump."""
    path = tmp_path / "dump.txt"
    path.write_text("".join(GOOD_LINE.format(n=n) for n in range(100, 110)))
    return path


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A folder in which no file or folder can be made (the system says one of REFUSED)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if not _accepts_a_file(folder):
            yield folder
            return
        # Root: a mode stops nobody; sysfs takes no new file from anyone.
        sysfs = Path("/sys/kernel")
        if sysfs.is_dir() and not _accepts_a_file(sysfs):
            yield sysfs
            return
        pytest.skip("no folder here refuses a new file")
    finally:
        folder.chmod(0o755)


def _accepts_a_file(folder: Path) -> bool:
    probe = folder / f"uidx-probe-{os.getpid()}"
    try:
        probe.touch()
    except OSError:
        return False
    probe.unlink()
    return True


# -- outputs


def refused_outputs(tmp_path: Path, unwritable: Path) -> list[tuple[Path, Reason]]:
    """Output paths that cannot be written, each with the reason the message must give."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    return [
        (tmp_path / "no-such-folder" / "out.jsonl", "No such file or directory"),
        (tmp_path, "is a directory"),
        (a_file / "out.jsonl", "Not a directory"),
        (unwritable / "out.jsonl", REFUSED),
    ]


def test_index_names_an_out_it_cannot_write(
    tmp_path: Path, env: dict[str, str], dump: Path, unwritable: Path
) -> None:
    for out, reason in refused_outputs(tmp_path, unwritable):
        done = uidx("index", dump, "--out", out, "--quiet", env=env)
        assert_refused(done, f"cannot write {out}", reason, EXIT_ERROR)


def test_index_names_an_nzb_folder_it_cannot_make(
    tmp_path: Path, env: dict[str, str], dump: Path, unwritable: Path
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    out = tmp_path / "releases.jsonl"
    cases: list[tuple[Path, Reason]] = [
        (a_file, "is not a directory"),
        (unwritable / "nzb", REFUSED),
    ]
    for folder, reason in cases:
        done = uidx("index", dump, "--out", out, "--nzb-dir", folder, "--quiet", env=env)
        assert_refused(done, f"cannot write {folder}", reason, EXIT_ERROR)
    # Found before the indexing: nothing was written.
    assert not out.exists()


def test_index_keeps_the_old_out_when_an_input_fails_midway(
    tmp_path: Path, env: dict[str, str], dump: Path
) -> None:
    out = tmp_path / "releases.jsonl"
    assert uidx("index", dump, "--out", out, "--quiet", env=env).returncode == 0
    before = out.read_bytes()
    assert before.count(b"\n") == 10
    # A gzip header, then nothing that inflates: found only while indexing.
    broken = tmp_path / "broken.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00" + b"not deflate data" * 64)
    done = uidx("index", dump, broken, "--out", out, "--quiet", env=env)
    assert_refused(done, broken, "cannot be read as overview data", EXIT_ERROR)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "broken.gz",
        "dump.txt",
        "releases.jsonl",
    ]


def test_generate_names_an_out_or_truth_it_cannot_write(
    tmp_path: Path, env: dict[str, str], unwritable: Path
) -> None:
    good = tmp_path / "lines.txt"
    truth = tmp_path / "truth.jsonl.gz"
    for path, reason in refused_outputs(tmp_path, unwritable):
        done = uidx("generate", "--articles", "10", "--out", path, "--truth", truth, env=env)
        assert_refused(done, f"cannot write {path}", reason, EXIT_ERROR)
        done = uidx("generate", "--articles", "10", "--out", good, "--truth", path, env=env)
        assert_refused(done, f"cannot write {path}", reason, EXIT_ERROR)
        # Neither is left behind: no lines without their truth, no truth of nothing.
        assert not good.exists()
        assert not truth.exists()


def test_catalog_export_names_an_out_it_cannot_write(
    tmp_path: Path, db_env: dict[str, str], unwritable: Path
) -> None:
    for out, reason in refused_outputs(tmp_path, unwritable):
        done = uidx("catalog", "export", "--out", out, env=db_env)
        assert_refused(done, f"cannot write {out}", reason, EXIT_ERROR)
        assert done.stderr.startswith("uidx catalog export: ")


def test_db_dump_names_a_file_it_cannot_write(
    tmp_path: Path, db_env: dict[str, str], unwritable: Path
) -> None:
    for out, reason in refused_outputs(tmp_path, unwritable):
        done = uidx("db", "dump", out, env=db_env)
        assert_refused(done, f"cannot write {out}", reason, EXIT_ERROR)
        # Said before the database is read: one line.
        assert done.stderr.splitlines() == [done.stderr.splitlines()[-1]]
        assert done.stderr.startswith("uidx db dump: ")


def test_spool_import_names_a_spool_it_cannot_write(
    db_env: dict[str, str], dump: Path, unwritable: Path
) -> None:
    add_group(db_env, "g")
    home = unwritable / "home"
    done = uidx("spool", "import", dump, "--group", "g", env={**db_env, "UIDX_HOME": str(home)})
    assert_refused(done, f"cannot write {home}", REFUSED, EXIT_ERROR)


# -- inputs


def refused_inputs(tmp_path: Path) -> list[tuple[Path, str]]:
    """Input paths that cannot be read as a dump, each with the reason to give."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    return [
        (tmp_path / "missing.txt", "No such file or directory"),
        (tmp_path, "is a directory"),
        (a_file / "dump.txt", "Not a directory"),
        (Path(os.devnull), "is not a regular file"),
    ]


def test_index_names_a_file_it_cannot_read(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "releases.jsonl"
    for path, reason in refused_inputs(tmp_path):
        done = uidx("index", path, "--out", out, "--quiet", env=env)
        assert_refused(done, f"cannot read {path}", reason, EXIT_ERROR)
    assert not out.exists()


def test_a_directory_is_called_a_directory(tmp_path: Path, env: dict[str, str]) -> None:
    done = uidx("index", tmp_path, "--out", tmp_path / "out.jsonl", env=env)
    assert done.stderr == f"uidx index: cannot read {tmp_path}: is a directory\n"
    assert done.returncode == EXIT_ERROR


def test_spool_import_names_a_file_it_cannot_read(tmp_path: Path, db_env: dict[str, str]) -> None:
    add_group(db_env, "g")
    for path, reason in refused_inputs(tmp_path):
        done = uidx("spool", "import", path, "--group", "g", env=db_env)
        assert_refused(done, f"cannot read {path}", reason, EXIT_ERROR)


def test_db_restore_names_a_file_it_cannot_read(tmp_path: Path, db_env: dict[str, str]) -> None:
    for path, reason in refused_inputs(tmp_path):
        done = uidx("db", "restore", path, env=db_env)
        assert_refused(done, f"cannot read {path}", reason, EXIT_ERROR)
        assert len(done.stderr.splitlines()) == 1, done.stderr


# -- settings and the uidx home


# One run of every command (arguments it would accept), for a wrong --config.
EVERY_COMMAND = [
    ["standalone"],
    ["index", "DUMP", "--out", "OUT"],
    ["generate", "--articles", "10", "--out", "OUT"],
    ["coordinator"],
    ["prefetch"],
    ["edge", "--ranges", "1"],
    ["groups", "list"],
    ["ranges", "plan", "g", "--from", "1", "--to", "9"],
    ["nodes", "list"],
    ["users", "list"],
    ["status"],
    ["spool", "import", "DUMP", "--group", "g"],
    ["catalog", "export", "--out", "OUT"],
    ["nzb", "0" * 32, "--out", "OUT"],
    ["db", "status"],
    ["db", "dump", "OUT"],
    ["db", "restore", "DUMP"],
]


def test_every_command_refuses_a_config_it_cannot_read(
    tmp_path: Path, db_env: dict[str, str], dump: Path
) -> None:
    assert {words[0] for words in EVERY_COMMAND} == set(_commands(build_parser()))
    out = tmp_path / "out.jsonl"

    def run(config: Path, words: list[str]) -> subprocess.CompletedProcess[str]:
        argv = [str(dump) if w == "DUMP" else str(out) if w == "OUT" else w for w in words]
        return uidx("--config", config, *argv, env=db_env)

    missing = tmp_path / "missing.toml"
    for words in EVERY_COMMAND:
        assert_refused(run(missing, words), missing, "No such file or directory", EXIT_CONFIG)
    # The check is one for all: a folder, for one command that reads the
    # settings and one that reads none.
    for words in (["status"], ["index", "DUMP", "--out", "OUT"]):
        assert_refused(run(tmp_path, words), tmp_path, "Is a directory", EXIT_CONFIG)
    assert not out.exists()


def test_a_config_that_is_no_regular_utf8_file_is_named(
    tmp_path: Path, env: dict[str, str], dump: Path
) -> None:
    # A FIFO was opened for reading, which waits for a writer: for ever.
    fifo = tmp_path / "uidx.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out.jsonl"
    for words in (["status"], ["index", str(dump), "--out", str(out)]):
        done = uidx("--config", fifo, *words, env=env)
        assert_refused(done, fifo, "is not a regular file", EXIT_CONFIG)
        assert len(done.stderr.splitlines()) == 1, done.stderr
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    done = uidx("--config", binary, "status", env=env)
    assert_refused(done, binary, "is not UTF-8 TOML", EXIT_CONFIG)
    assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("words", "variables", "named", "problem"),
    [
        (["status"], {"UIDX_STATEMENT_TIMEOUT_SECONDS": "inf"}, "statement_timeout", "finite"),
        (["status"], {"UIDX_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": "nan"}, "idle_in", "finite"),
        (["status"], {"UIDX_STATEMENT_TIMEOUT_SECONDS": "3000000"}, "statement_timeout", "most"),
        (["status"], {"UIDX_LEASE_TTL_SECONDS": "inf"}, "lease_ttl_seconds", "finite"),
        (["status"], {"UIDX_CATALOG_QUIET_SECONDS": "1e15"}, "catalog_quiet_seconds", "most"),
        (["status"], {"UIDX_HOME": ""}, "UIDX_HOME", "must name a folder"),
        (
            ["edge", "--ranges", "1"],
            {"UIDX_BATCH_ARTICLES": "0", "COORDINATOR_URL": "http://c:1", "NODE_TOKEN": "t"},
            "batch_articles",
            "at least 1",
        ),
        (
            ["edge", "--ranges", "1"],
            {"COORDINATOR_URL": "127.0.0.1:8750", "NODE_TOKEN": "t"},
            "COORDINATOR_URL",
            "http:// or https://",
        ),
        (
            ["coordinator", "--processes", "2"],
            {"UIDX_LISTEN": "127.0.0.1:99999"},
            "UIDX_LISTEN",
            "port must be 0-65535",
        ),
        (
            ["coordinator"],
            {"UIDX_METRICS_LISTEN": "127.0.0.1:99999"},
            "metrics_listen",
            "port must be 0-65535",
        ),
    ],
)
def test_a_setting_out_of_bounds_is_one_line_naming_it(
    db_env: dict[str, str],
    words: list[str],
    variables: dict[str, str],
    named: str,
    problem: str,
) -> None:
    """Each was a traceback, a 500 on every lease or build, or minutes of retries."""
    done = uidx(*words, env={**db_env, **variables})
    assert_refused(done, named, problem, EXIT_CONFIG)
    assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("words", "variables"),
    [
        (["status"], {}),
        (["groups", "list"], {}),
        (["db", "migrate"], {}),
        (["coordinator"], {"UIDX_LISTEN": "127.0.0.1:0"}),
        (["coordinator", "--processes", "2"], {"UIDX_LISTEN": "127.0.0.1:0"}),
        (["prefetch"], {"UIDX_NNTP": "nntp://127.0.0.1:9"}),
        (["standalone"], {"UIDX_NNTP": "nntp://127.0.0.1:9", "UIDX_LISTEN": "127.0.0.1:{port}"}),
    ],
)
def test_a_database_a_newer_uidx_migrated_stops_every_command_that_opens_it(
    db_env: dict[str, str], words: list[str], variables: dict[str, str]
) -> None:
    """An older uidx (a coordinator or a prefetcher not yet upgraded, an operator's
    command) on a database a newer one migrated: one line naming the newer migration's
    file and saying to upgrade, exit 78 (a supervisor and systemd do not restart into
    it). They ran on it with a warning. A supervisor (`--processes 2`, standalone) says
    it once and starts no worker: each of its coordinator workers said it, interleaved
    with the supervisor's lines about them."""
    newer = "9032_from_a_newer_uidx.sql"
    with psycopg.connect(db_env["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (9032, %s)", (newer,))
    port = str(free_port())
    done = uidx(*words, env={**db_env, **{k: v.format(port=port) for k, v in variables.items()}})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == EXIT_CONFIG, done.stderr
    refusals = [line for line in done.stderr.splitlines() if newer in line]
    assert len(refusals) == 1, done.stderr
    command = " ".join(w for w in words if not w.startswith("-") and not w.isdigit())
    assert refusals[0].startswith(f"uidx {command}: the database was migrated by a newer uidx")
    assert "upgrade uidx" in refusals[0], done.stderr
    assert "workers started" not in done.stderr, done.stderr


def test_a_database_url_that_is_not_one_is_named(env: dict[str, str]) -> None:
    for words in (["status"], ["groups", "list"], ["users", "list"]):
        done = uidx(*words, env={**env, "DATABASE_URL": "postgres//uidx@db/uidx"})
        assert_refused(
            done, "DATABASE_URL", "neither a postgresql:// URL nor a conninfo", EXIT_CONFIG
        )
        assert len(done.stderr.splitlines()) == 1, done.stderr


def test_a_home_that_is_a_file_is_a_configuration_mistake(
    tmp_path: Path, env: dict[str, str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    done = uidx("db", "status", "--home", a_file, env=env)
    assert_refused(done, a_file, "is not a directory", EXIT_CONFIG)
    done = uidx("db", "status", env={**env, "UIDX_HOME": str(a_file)})
    assert_refused(done, a_file, "is not a directory", EXIT_CONFIG)


def test_a_refused_path_deep_down_is_one_line_and_a_traceback_with_v(
    env: dict[str, str], unwritable: Path
) -> None:
    # The embedded cluster's folders are made in pgcluster: what the system
    # refuses there reaches the command line as it is.
    home = unwritable / "home"
    done = uidx("db", "start", "--home", home, env=env)
    assert_refused(done, home, REFUSED, EXIT_ERROR)
    assert done.stderr.startswith("uidx db start: ")
    assert len(done.stderr.splitlines()) == 1, done.stderr
    verbose = uidx("-v", "db", "start", "--home", home, env=env)
    assert verbose.returncode == EXIT_ERROR
    assert "Traceback" in verbose.stderr
    assert verbose.stderr.splitlines()[-1].startswith("uidx db start: ")


def test_a_daemon_that_cannot_use_its_home_says_so_in_one_line(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # The embedded cluster's folder is a file (or, not as root, a folder of
    # another user's: a cluster made by root's `uidx groups add` under a unit's
    # User=uidx). The one-process coordinator (what --processes 0 is on one
    # core) raises that from inside its nurseries: a traceback, where
    # `--processes 2` and every operator command said one line.
    home = tmp_path / "home"
    home.mkdir()
    (home / "postgres").write_text("")
    for processes in ("1", "2"):
        done = uidx(
            "coordinator",
            "--processes",
            processes,
            env={**env, "UIDX_HOME": str(home), "UIDX_LISTEN": "127.0.0.1:0"},
        )
        assert_refused(done, home / "postgres", "Not a directory", EXIT_ERROR)
        assert done.stderr.splitlines()[-1].startswith("uidx coordinator: "), done.stderr


# -- input that is not overview data


def test_a_file_without_overview_data_fails_unless_allowed(
    tmp_path: Path, env: dict[str, str], dump: Path
) -> None:
    # What a binary looks like to the indexer: lines with NUL bytes, lines without tabs.
    binary = tmp_path / "program"
    binary.write_bytes(b"\x7fELF\x02\x01\x00\nno tabs\n\x00\x00\nstill none\n1\t\x00\t2\nlast\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = tmp_path / "out.jsonl"

    done = uidx("index", dump, binary, "--out", out, "--quiet", env=env)
    assert done.returncode == EXIT_ERROR
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if "no overview data" in line]
    assert warnings == [
        f"uidx index: warning: {binary} holds no overview data:"
        " all 6 lines are malformed (is it an overview dump?)"
    ]
    assert "--allow-empty" in done.stderr.splitlines()[-1]
    figures = next(
        json.loads(line) for line in done.stderr.splitlines() if line.startswith('{"summary"')
    )
    # Every malformed line is a line read: 10 of the dump, 6 of the program.
    assert figures["lines"] == 16
    assert figures["malformed_skipped"] == 6
    assert out.read_text().count("\n") == 10  # the good file's releases are written

    done = uidx("index", empty, "--out", out, "--quiet", env=env)
    assert done.returncode == EXIT_ERROR
    assert f"{empty} holds no overview data: the file is empty" in done.stderr

    done = uidx("index", dump, binary, empty, "--out", out, "--quiet", "--allow-empty", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("holds no overview data") == 2
    assert uidx("index", dump, "--out", out, "--quiet", env=env).returncode == 0


def test_index_help_offers_allow_empty(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["index", "--help"])
    assert exited.value.code == 0
    assert "--allow-empty" in capsys.readouterr().out


# -- usage mistakes and descriptions


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def command_paths(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Every (sub)command of the parser: ("index",), ("db",), ("db", "start"), ..."""
    for name, sub in _commands(parser).items():
        yield (*path, name)
        yield from command_paths(sub, (*path, name))


EVERY_PATH = list(command_paths(build_parser()))


def test_the_walk_finds_the_subcommands() -> None:
    assert ("index",) in EVERY_PATH
    assert ("db", "start") in EVERY_PATH
    assert ("catalog", "export") in EVERY_PATH
    assert ("nodes", "create") in EVERY_PATH
    assert len(EVERY_PATH) > 20


@pytest.mark.parametrize("path", EVERY_PATH, ids=" ".join)
def test_a_usage_mistake_shows_the_commands_own_usage(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*path, "--no-such-flag"])
    assert exited.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"usage: uidx {' '.join(path)} "), err
    assert f"uidx {' '.join(path)}: error: " in err


def test_an_unknown_option_is_named_with_the_usage_of_its_command(
    env: dict[str, str],
) -> None:
    done = uidx("status", "--no-such-flag", env=env)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.startswith("usage: uidx status ")
    assert "uidx status: error: unrecognized arguments: --no-such-flag" in done.stderr
    done = uidx("db", "start", "--no-such-flag", env=env)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.startswith("usage: uidx db start ")


@pytest.mark.parametrize("path", EVERY_PATH, ids=" ".join)
def test_every_command_says_what_it_does(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    assert exited.value.code == 0
    paragraphs = capsys.readouterr().out.split("\n\n")
    assert paragraphs[0].startswith(f"usage: uidx {' '.join(path)} ")
    # After the usage, the description: not straight to the arguments.
    description = paragraphs[1].strip()
    assert not re.match(r"(positional arguments|options):", description), description


def parser_at(path: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser of a (sub)command; () for `uidx` itself."""
    parser = build_parser()
    for name in path:
        parser = _commands(parser)[name]
    return parser


@pytest.mark.parametrize(
    "path", [(), *(p for p in EVERY_PATH if _commands(parser_at(p)))], ids=" ".join
)
def test_every_subcommand_is_listed_with_what_it_does(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    names = list(_commands(parser_at(path)))
    assert names
    with pytest.raises(SystemExit):
        main([*path, "--help"])
    listing = capsys.readouterr().out
    for name in names:
        assert re.search(rf"^ +{re.escape(name)} {{2,}}\S", listing, re.MULTILINE), (name, listing)


def test_a_reader_that_stops_reading_ends_the_command_without_a_traceback(
    db_env: dict[str, str],
) -> None:
    """`uidx status | head -1`: the pipe closed before the command wrote to it."""
    child = subprocess.Popen(
        [sys.executable, "-m", "usenet_indexer", "status"],
        env=db_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    child.stdout.close()
    _, err = child.communicate(timeout=60)
    assert "Traceback" not in err.decode(), err.decode()
    assert "BrokenPipe" not in err.decode()
    assert child.returncode == 1


def _to_full_disk(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `uidx ARGS` with its standard output on /dev/full (every write: no space)."""
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-m", "usenet_indexer", *args],
            env=env,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=RUN_SECONDS,
            check=False,
        )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize(
    "command",
    [("status",), ("status", "--json"), ("groups", "list"), ("nodes", "list"), ("users", "list")],
)
def test_a_full_standard_output_is_one_line(
    command: tuple[str, ...], db_env: dict[str, str]
) -> None:
    done = _to_full_disk(*command, env=db_env)
    assert_refused(done, "standard output", "No space left on device", EXIT_ERROR)
    assert len(done.stderr.splitlines()) == 1, done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize(("kind", "made"), [("nodes", "node"), ("users", "user")])
def test_a_secret_that_cannot_be_shown_creates_nothing(
    kind: str, made: str, db_env: dict[str, str]
) -> None:
    """`uidx nodes create e1 > /dev/full`: no node whose token no one saw; the retry works."""
    done = _to_full_disk(kind, "create", "e1", env=db_env)
    assert_refused(done, "standard output", f"{made} e1 not created", EXIT_ERROR)
    again = uidx(kind, "create", "e1", env=db_env)
    assert again.returncode == 0, again.stderr
    assert len(again.stdout.splitlines()[0]) >= 32


def test_groups_add_gives_up_on_a_silent_server_after_the_nntp_timeout(
    db_env: dict[str, str],
) -> None:
    """UIDX_NNTP_TIMEOUT_SECONDS bounds the wait for a server that never answers."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        env = {
            **db_env,
            "UIDX_NNTP": f"nntp://127.0.0.1:{port}",
            "UIDX_NNTP_TIMEOUT_SECONDS": "0.5",
        }
        # The default timeout (60 s) would outlast this run's deadline.
        for argv in (("groups", "add", "g"), ("ranges", "plan", "g", "--days", "1")):
            if argv[0] == "ranges":
                add_group(env, "g")
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "usenet_indexer", *argv],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=20,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                pytest.fail(f"uidx {' '.join(argv)} waited past UIDX_NNTP_TIMEOUT_SECONDS")
            assert "Traceback" not in done.stderr, done.stderr
            assert done.returncode == EXIT_ERROR, done.stderr
            assert "0.5 s" in done.stderr.splitlines()[-1], done.stderr


def test_a_database_url_that_does_not_answer_is_one_line_naming_it(env: dict[str, str]) -> None:
    # Nothing listens on port 1: libpq's answer has its hint on a second line. A
    # supervisor's coordinator workers each said it, restarted until a crash loop halted it.
    for words in (
        ["status"],
        ["status", "--json"],
        ["groups", "list"],
        ["db", "migrate"],
        ["coordinator"],
        ["coordinator", "--processes", "2"],
    ):
        done = uidx(*words, env={**env, "DATABASE_URL": "postgresql://uidx@127.0.0.1:1/uidx"})
        assert_refused(done, "DATABASE_URL", "Connection refused", EXIT_ERROR)
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert "127.0.0.1" in done.stderr
