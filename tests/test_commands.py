"""Operator commands against a real database: groups, ranges, nodes, status."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from psycopg_pool import ConnectionPool
from s3_fixtures import TestSpool

from usenet_indexer.cli import main
from usenet_indexer.commands import index, output
from usenet_indexer.commands import spool as spool_command
from usenet_indexer.commands.index import index_files, write_releases
from usenet_indexer.config import Settings
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.errors import OutputError
from usenet_indexer.spool.store import open_spool
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.spool import SpoolChunk, SpoolIndex
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.testing.objectstore import ObjectStore
from usenet_indexer.testing.processes import child_env


@pytest.fixture
def env(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))


@pytest.mark.usefixtures("env")
def test_an_operator_plans_a_group_and_sees_it(capsys: pytest.CaptureFixture[str]) -> None:
    server = ["--low", "5000000000", "--high", "5000099999"]
    assert main(["groups", "add", "alt.binaries.test", "--unchecked", *server]) == 0
    assert (
        main(
            [
                "ranges",
                "plan",
                "alt.binaries.test",
                "--from",
                "5000000000",
                "--to",
                "5000024999",
                "--size",
                "10000",
            ]
        )
        == 0
    )
    assert "planned 3 ranges" in capsys.readouterr().out
    assert main(["nodes", "create", "edge-1"]) == 0
    token = capsys.readouterr().out.splitlines()[0]
    assert len(token) >= 40
    assert main(["status"]) == 0
    status = capsys.readouterr().out
    assert "alt.binaries.test" in status
    assert "planned        3" in status
    # Nothing indexed yet: the whole server span is behind.
    assert "100,000" in status
    assert "edge-1" in status
    assert token not in status
    assert main(["groups", "list"]) == 0
    assert "25,000" in capsys.readouterr().out


@pytest.mark.usefixtures("env")
def test_mistakes_are_clear_and_change_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    # An error is exit status 1; 2 is argparse's, for a usage mistake.
    assert main(["ranges", "plan", "alt.binaries.none", "--from", "1", "--to", "9"]) == 1
    assert "uidx ranges plan: no group 'alt.binaries.none'" in capsys.readouterr().err
    assert main(["groups", "add", "g", "--unchecked"]) == 0
    assert main(["ranges", "plan", "g", "--from", "1", "--to", "100"]) == 0
    assert main(["ranges", "plan", "g", "--from", "50", "--to", "150"]) == 1
    assert "planned already" in capsys.readouterr().err
    assert main(["ranges", "plan", "g", "--from", "9", "--to", "1"]) == 78  # EX_CONFIG
    assert main(["nodes", "create", "e"]) == 0
    assert main(["nodes", "create", "e"]) == 1
    assert main(["nodes", "revoke", "e"]) == 0
    assert main(["nodes", "revoke", "e"]) == 1


def test_an_unknown_setting_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    monkeypatch.setenv("UIDX_LEASE_TTL", "5")
    assert main(["status"]) == 78  # EX_CONFIG: a supervisor must not restart into it
    assert "UIDX_LEASE_TTL" in capsys.readouterr().err


@pytest.mark.usefixtures("env")
def test_spool_import_covers_the_dump_in_whole_chunks(
    tmp_path: Path, pg_url: str, any_spool: TestSpool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zlib

    import psycopg

    for name, value in any_spool.env.items():
        monkeypatch.setenv(name, value)

    lines = [f"{n}\tsubject {n} (1/1)\tposter\tdate\t<m{n}@x>\t\t100\t1" for n in range(5000, 5250)]
    dump = tmp_path / "dump.txt"
    dump.write_text("\n".join(lines) + "\n")
    assert main(["groups", "add", "g", "--unchecked"]) == 0
    assert main(["spool", "import", str(dump), "--group", "g", "--chunk-articles", "100"]) == 0
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT first_article, last_article, path, lines FROM spool_chunks ORDER BY 1"
        ).fetchall()
    assert [(r[0], r[1], r[3]) for r in rows] == [
        (5000, 5099, 100),
        (5100, 5199, 100),
        (5200, 5249, 50),
    ]
    text = b"".join(zlib.decompress(any_spool.store.read(r[2])) for r in rows)
    assert text.decode().splitlines() == lines
    assert any_spool.stored() == {r[2] for r in rows}
    assert not any_spool.leftovers()


@pytest.mark.usefixtures("env")
def test_catalog_export_of_an_empty_catalog(tmp_path: Path) -> None:
    out = tmp_path / "catalog.jsonl"
    assert main(["catalog", "export", "--out", str(out)]) == 0
    assert out.read_text() == ""


def test_an_edge_without_its_two_settings_names_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    monkeypatch.delenv("COORDINATOR_URL", raising=False)
    monkeypatch.delenv("NODE_TOKEN", raising=False)
    assert main(["edge", "--ranges", "1"]) == 78
    err = capsys.readouterr().err
    assert "COORDINATOR_URL" in err
    assert "NODE_TOKEN" in err


@pytest.mark.usefixtures("env")
def test_without_nntp_servers_groups_add_says_so_and_plan_days_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("UIDX_NNTP", raising=False)
    assert main(["groups", "add", "g", "--unchecked"]) == 0
    assert "no NNTP servers configured" in capsys.readouterr().out
    assert main(["ranges", "plan", "g", "--days", "3"]) == 78
    assert "UIDX_NNTP" in capsys.readouterr().err
    assert main(["ranges", "plan", "g"]) == 78  # no --days and no backfill_days
    assert "backfill_days" in capsys.readouterr().err
    assert main(["ranges", "plan", "g", "--days", "3", "--from", "1", "--to", "9"]) == 78
    assert main(["ranges", "plan", "g", "--from", "1"]) == 78
    assert "None" not in capsys.readouterr().err  # was "1..None is not a span of articles"
    assert main(["ranges", "plan", "g", "--to", "9"]) == 78
    assert "give --from and --to" in capsys.readouterr().err
    assert main(["groups", "list"]) == 0
    listed = capsys.readouterr().out
    assert "\ng " in listed
    assert "\nh " not in listed


def _offline_releases(tmp_path: Path) -> list[CatalogRelease]:
    result = generate(GeneratorConfig(articles=30_000, seed=3))
    dump = tmp_path / "overview.txt"
    dump.write_bytes(b"\n".join(result.lines) + b"\n")
    merger, _ = index_files([dump])
    return list(merger.releases())


def test_index_writes_every_release_in_order_in_many_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Many times WRITE_BYTES of lines: many writes, each of whole lines.
    monkeypatch.setattr(index, "WRITE_BYTES", 64 << 10)
    releases = _offline_releases(tmp_path)
    expected = b"".join(
        orjson.dumps(r.to_json(fragments=True), option=orjson.OPT_APPEND_NEWLINE) for r in releases
    )
    assert len(expected) > 10 * index.WRITE_BYTES
    path = tmp_path / "releases.jsonl"
    with output(path) as out:
        write_releases(releases, out)
    assert path.read_bytes() == expected


def test_index_names_a_device_that_refuses_a_write_midway(tmp_path: Path) -> None:
    # /dev/full: every write fails with ENOSPC, as a full disk does midway.
    releases = _offline_releases(tmp_path)
    with pytest.raises(OutputError) as caught, output(Path("/dev/full")) as out:
        write_releases(releases, out)
    assert "/dev/full" in str(caught.value)
    assert "No space left on device" in str(caught.value)


def test_index_starts_without_what_it_does_not_use(tmp_path: Path) -> None:
    # Start-up is part of every `uidx index` (scripts/bench-index times the whole
    # process): no TOML reader without a settings file, and no OpenSSL for blake2b.
    dump = tmp_path / "empty.gz"
    dump.write_bytes(gzip.compress(b""))
    code = (
        "import sys; from usenet_indexer.cli import main; main(sys.argv[1:]);"
        "print(sorted({'tomllib', '_hashlib', 'hashlib'} & set(sys.modules)))"
    )
    words = ["index", str(dump), "--out", str(tmp_path / "out.jsonl"), "--quiet", "--allow-empty"]
    result = subprocess.run(
        [sys.executable, "-c", code, *words],
        capture_output=True,
        text=True,
        check=True,
        env=child_env(UIDX_HOME=str(tmp_path)),
    )
    assert result.stdout.splitlines()[-1] == "[]", result.stderr


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], status: int, *said: str) -> None:
    """`uidx ARGV` exits with `status`, its last line on stderr saying all of `said`."""
    if status == 2:  # argparse's usage mistake
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
    else:
        assert main(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    for words in said:
        assert words in last, err


@pytest.mark.usefixtures("env")
@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("", "group name is empty"),
        ("a b c", "contains a control character or a space"),
        ("x\x01y", "contains a control character"),
        ("a" * 600, "longer than 512 bytes"),
    ],
)
def test_a_group_name_no_server_can_be_asked_for_is_refused(
    name: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _refused(capsys, ["groups", "add", name, "--unchecked"], 78, "uidx groups add: name:", said)
    assert main(["groups", "list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # the heading only


@pytest.mark.usefixtures("env")
def test_numbers_past_what_the_database_and_the_dates_hold_are_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    big = "99999999999999999999"
    for argv, option in [
        (["ranges", "plan", "g", "--from", "1", "--to", str(2**63 - 1)], "--to"),
        (["groups", "add", "g", "--unchecked", "--backfill-days", "999999999"], "--backfill-days"),
        (["groups", "add", "g", "--unchecked", "--backfill-days", "-1"], "--backfill-days"),
        (["groups", "add", "g", "--unchecked", "--high", big], "--high"),
        (["groups", "add", "g", "--unchecked", "--low", "-10", "--high", "-5"], "--low"),
        (["groups", "set", "g", "--backfill-days", "99999999999"], "--backfill-days"),
        (["ranges", "plan", "g", "--from", "100", "--to", big + "999"], "--to"),
        (["ranges", "plan", "g", "--days", "99999999"], "--days"),
        (["ranges", "plan", "g", "--from", "1", "--to", "10", "--size", "0"], "--size"),
        (["ranges", "retry", big], "RANGE_ID"),
        (["users", "limits", "u1", "--requests-per-day", big], "--requests-per-day"),
        (
            ["generate", "--articles", "1", "--out", "x", "--first-article", big + "999"],
            "--first-article",
        ),
    ]:
        _refused(capsys, argv, 2, f"argument {option}:")
    assert main(["groups", "add", "g", "--unchecked", "--backfill-days", "36500"]) == 0
    assert main(["groups", "set", "g", "--backfill-days", "0"]) == 0
    capsys.readouterr()
    _refused(
        capsys,
        ["groups", "add", "h", "--unchecked", "--low", "10", "--high", "5"],
        78,
        "--low/--high: 10..5",
    )
    assert main(["groups", "list"]) == 0
    assert "\nh " not in capsys.readouterr().out


@pytest.mark.usefixtures("env")
def test_ranges_near_the_largest_article_number_are_planned(
    capsys: pytest.CaptureFixture[str], pg_url: str
) -> None:
    import psycopg

    assert main(["groups", "add", "g", "--unchecked"]) == 0
    top = 2**63 - 2  # the largest: a range's resume point (last + 1) is a bigint
    argv = ["ranges", "plan", "g", "--from", str(top - 7), "--to", str(top), "--size", "3"]
    assert main(argv) == 0
    assert "planned 3 ranges" in capsys.readouterr().out
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT first_article, last_article FROM ranges ORDER BY 1").fetchall()
    assert rows == [(top - 7, top - 5), (top - 4, top - 2), (top - 1, top)]


@pytest.mark.usefixtures("env")
def test_nodes_and_users_need_a_name_to_show(capsys: pytest.CaptureFixture[str]) -> None:
    for kind in ("nodes", "users"):
        for name, said in [
            ("", "cannot be empty"),
            ("a\nb", "control character"),
            ("n" * 201, "201 characters is more than 200"),
        ]:
            _refused(capsys, [kind, "create", name], 2, "argument name:", said)
    _refused(
        capsys, ["nodes", "revoke", "nosuch"], 1, "uidx nodes revoke: no live node named nosuch"
    )
    assert main(["nodes", "create", "n" * 200]) == 0


@pytest.mark.usefixtures("env")
def test_spool_import_refuses_articles_spooled_already_and_leaves_no_stray_chunk(
    tmp_path: Path,
    pg_url: str,
    any_spool: TestSpool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import psycopg

    for key, value in any_spool.env.items():
        monkeypatch.setenv(key, value)

    def dump(name: str, numbers: range) -> str:
        path = tmp_path / name
        path.write_text("".join(f"{n}\ts {n} (1/1)\tp\td\t<m{n}@x>\t\t100\t1\n" for n in numbers))
        return str(path)

    assert main(["groups", "add", "g", "--unchecked"]) == 0
    first = dump("first.txt", range(5000, 5250))
    imported = ["spool", "import", "--group", "g", "--chunk-articles", "100"]
    assert main([*imported, first]) == 0
    capsys.readouterr()
    stored = any_spool.stored()
    # The same dump again, then one that starts at the same article but ends elsewhere.
    assert main([*imported, first]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "uidx spool import: articles 5000..5099 of g are spooled already"
        " (chunk 5000..5099); nothing spooled"
    )
    assert main([*imported, dump("other.txt", range(5000, 5040))]) == 1
    # A dump that runs into spooled articles keeps what it spooled before them.
    assert main([*imported, dump("below.txt", range(4800, 5010))]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "uidx spool import: articles 5000..5009 of g are spooled already"
        " (chunk 5000..5099); spooled before it: 2 chunks, articles 4800..4999"
    )
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT first_article, last_article, path FROM spool_chunks").fetchall()
    assert sorted((r[0], r[1]) for r in rows) == [
        (4800, 4899),
        (4900, 4999),
        (5000, 5099),
        (5100, 5199),
        (5200, 5249),
    ]
    # Every chunk file is indexed, and those of the first import are untouched.
    assert any_spool.stored() == {r[2] for r in rows}
    assert stored < any_spool.stored()


@pytest.mark.usefixtures("env")
def test_spool_import_names_a_bucket_that_is_not_there_and_imports_nothing(
    tmp_path: Path,
    object_store: ObjectStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A mistyped bucket: the import asks the store first, as the coordinator and the
    prefetcher do. It stored the chunks in a bucket SeaweedFS made for the first PUT
    (exit 0; the coordinator, on the right bucket, then links to objects that are not
    there: every range parked), or, on AWS S3, ended in PutObject's NoSuchBucket."""
    for key, value in object_store.environment("p").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("UIDX_SPOOL", "s3://uidx-mistyped/p")
    dump = tmp_path / "dump.txt"
    dump.write_text("".join(f"{n}\ts {n} (1/1)\tp\td\t<m{n}@x>\t\t100\t1\n" for n in range(1, 11)))
    assert main(["groups", "add", "g", "--unchecked"]) == 0
    capsys.readouterr()
    assert main(["spool", "import", str(dump), "--group", "g"]) == 78
    assert capsys.readouterr().err.splitlines()[-1] == (
        "uidx spool import: spool_url: no bucket 'uidx-mistyped' there"
    )
    buckets = object_store.client().list_buckets()["Buckets"]
    assert [bucket["Name"] for bucket in buckets] == [object_store.bucket]


@pytest.mark.usefixtures("env")
def test_spool_import_names_what_is_in_the_spool_where_a_chunk_would_go(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    def dump(name: str, numbers: range) -> str:
        path = tmp_path / name
        path.write_text("".join(f"{n}\ts {n} (1/1)\tp\td\t<m{n}@x>\t\t100\t1\n" for n in numbers))
        return str(path)

    assert main(["groups", "add", "g", "--unchecked"]) == 0
    imported = ["spool", "import", "--group", "g", "--chunk-articles", "100"]
    assert main([*imported, dump("chunk.txt", range(5200, 5300))]) == 0
    with psycopg.connect(pg_url) as conn:
        # A gap: articles the server did not have (prefetch/landing.py records them).
        conn.execute(
            "INSERT INTO spool_chunks (group_id, first_article, last_article, codec, path)"
            " SELECT id, 5050, 5099, 0, NULL FROM groups WHERE name = 'g'"
        )
    capsys.readouterr()
    # A chunk of the dump, 5000..5099, would hold the gap's articles: they are
    # not spooled, and 5000..5049 are not in the spool at all.
    assert main([*imported, dump("gap.txt", range(5000, 5100))]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "uidx spool import: articles 5050..5099 of g are a gap in the spool"
        " (5050..5099: articles the server did not have); nothing spooled"
    )
    # 5150..5249 runs into the chunk at 5200: only its first 50 articles are spooled.
    assert main([*imported, dump("into.txt", range(5150, 5250))]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "uidx spool import: articles 5200..5249 of g are spooled already"
        " (chunk 5200..5299); nothing spooled"
    )
    # A chunk over both names the first in article order.
    wide = ["spool", "import", "--group", "g", "--chunk-articles", "300"]
    assert main([*wide, dump("both.txt", range(5000, 5300))]) == 1
    assert "articles 5050..5099 of g are a gap" in capsys.readouterr().err.splitlines()[-1]
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT first_article, last_article FROM spool_chunks ORDER BY 1")
        assert rows.fetchall() == [(5050, 5099), (5200, 5299)]


@pytest.mark.usefixtures("env")
def test_spool_import_of_a_file_without_overview_lines_is_a_mistake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["groups", "add", "g", "--unchecked"]) == 0
    empty, noise = tmp_path / "empty.txt", tmp_path / "noise.bin"
    empty.write_bytes(b"")
    noise.write_bytes(bytes(range(256)) * 40)
    capsys.readouterr()
    for path in (empty, noise):
        assert main(["spool", "import", str(path), "--group", "g"]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.splitlines()[-1] == (
            f"uidx spool import: {path} holds no overview lines (is it an overview dump?);"
            " nothing spooled (--allow-empty accepts it)"
        )
    assert main(["spool", "import", str(empty), "--group", "g", "--allow-empty"]) == 0
    assert "spooled 0 lines" in capsys.readouterr().out


def test_seconds_that_are_no_finite_span_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, said in [
        (["db", "start", "--timeout", "0"], "argument --timeout: 0 is not within 1..86400"),
        (["db", "start", "--timeout", "-1"], "argument --timeout: -1 is not within"),
        (["db", "start", "--timeout", "nan"], "argument --timeout: 'nan' is not a finite number"),
        (["catalog", "build", "--quiet-seconds", "nan"], "'nan' is not a finite number"),
        (["catalog", "build", "--quiet-seconds", "inf"], "'inf' is not a finite number"),
        (["catalog", "build", "--quiet-seconds", "1e15"], "1e+15 is not within 0.."),
    ]:
        _refused(capsys, argv, 2, said)


def test_an_import_that_lost_the_race_for_a_chunk_leaves_the_winners_file(
    settings: Settings, pool: ConnectionPool
) -> None:
    """Another writer (a second `uidx spool import` of the dump) indexed the same
    articles between this import's check and its index row: the file at that path is
    the winner's now, and stays (the spool would hold an indexed chunk without its
    file)."""
    spool = open_spool(settings)
    index = SpoolIndex(pool)
    groups = GroupStore(pool)
    groups.add("alt.test", backfill_days=None, low=1, high=20, checked=True)
    group_id = groups.id_of("alt.test")
    text = b"1\tsubject\n"
    path, size, codec = spool.write_chunk("alt.test", 1, 10, text)
    assert index.add_new(group_id, SpoolChunk(1, 10, int(codec), str(path), 1), size)
    lost = spool_command._import(
        spool, index, group_id, "alt.test", SpoolChunk(1, 10, 0, None, 1), text
    )
    assert lost is False
    assert index.path_at(group_id, 1) == str(path)
    assert spool.read(str(path))


def test_a_leaked_key_or_token_is_rotated_and_the_old_one_refused(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`uidx users rotate` and `uidx nodes rotate`: a new secret shown once, the old one
    refused at once, the user's logins ended and its role kept, the node's ranges
    planned again for the next lease (its edges with the old token can do nothing)."""
    from usenet_indexer.store.nodes import NodeStore
    from usenet_indexer.store.pool import open_pool
    from usenet_indexer.store.ranges import RangeStore
    from usenet_indexer.store.users import UserStore

    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    assert main(["users", "create", "sonarr", "--operator"]) == 0
    old_key = capsys.readouterr().out.splitlines()[0]
    assert main(["nodes", "create", "edge-1"]) == 0
    old_token = capsys.readouterr().out.splitlines()[0]
    assert main(["groups", "add", "g", "--unchecked"]) == 0
    assert main(["ranges", "plan", "g", "--from", "1", "--to", "100", "--size", "100"]) == 0
    with open_pool(pg_url, Settings(home=tmp_path)) as pool:
        users, nodes, ranges = UserStore(pool), NodeStore(pool), RangeStore(pool)
        user = users.authenticate(old_key)
        assert user is not None
        session = users.open_session(user, 3600)
        node_id = nodes.authenticate(old_token)
        assert node_id is not None
        lease = ranges.lease(node_id, 900)
        assert lease is not None
        capsys.readouterr()

        assert main(["users", "rotate", "sonarr"]) == 0
        new_key, said = capsys.readouterr().out.splitlines()
        assert "shown this once" in said
        assert users.authenticate(old_key) is None
        assert users.session(session) is None
        rotated = users.authenticate(new_key)
        assert rotated is not None
        assert (rotated.id, rotated.name, rotated.operator) == (user.id, "sonarr", True)

        assert main(["nodes", "rotate", "edge-1"]) == 0
        new_token = capsys.readouterr().out.splitlines()[0]
        assert nodes.authenticate(old_token) is None
        assert nodes.authenticate(new_token) == node_id
        assert ranges.held(node_id, lease.range_id) is None
        again = ranges.lease(node_id, 900)
        assert again is not None
        assert (again.range_id, again.epoch) == (lease.range_id, lease.epoch + 1)

        for kind, name, said in [
            ("users", "nosuch", "no API user named 'nosuch'"),
            ("nodes", "nosuch", "no live node named 'nosuch'"),
        ]:
            assert main([kind, "rotate", name]) == 1
            assert f"uidx {kind} rotate: {said}" in capsys.readouterr().err


def test_a_revoked_name_is_created_again_as_a_new_identity(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`uidx users create` and `uidx nodes create` of a revoked name: a new user (node),
    its own id and a new secret; the revoked one stays revoked and listed, with its
    history. A live name is still taken, and rotate and revoke act on the live one."""
    from usenet_indexer.store.nodes import NodeStore
    from usenet_indexer.store.pool import open_pool
    from usenet_indexer.store.users import UserStore

    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))

    def created(kind: str, name: str) -> str:
        capsys.readouterr()
        assert main([kind, "create", name]) == 0
        return capsys.readouterr().out.splitlines()[0]

    with open_pool(pg_url, Settings(home=tmp_path)) as pool:
        users, nodes = UserStore(pool), NodeStore(pool)

        def listed(kind: str) -> list[tuple[str, bool]]:
            """What `list` lists: (name, revoked), the revoked first."""
            rows = users.list() if kind == "users" else nodes.list()
            return [(row.name, row.revoked_at is not None) for row in rows]

        old_key, old_token = created("users", "sonarr"), created("nodes", "edge-1")
        old_user, old_node = users.authenticate(old_key), nodes.authenticate(old_token)
        assert old_user is not None
        assert old_node is not None
        assert main(["users", "revoke", "sonarr"]) == 0
        assert main(["nodes", "revoke", "edge-1"]) == 0

        new_key, new_token = created("users", "sonarr"), created("nodes", "edge-1")
        new_user, new_node = users.authenticate(new_key), nodes.authenticate(new_token)
        assert new_user is not None
        assert (new_user.name, new_user.id != old_user.id) == ("sonarr", True)
        assert new_node not in (None, old_node)
        assert users.authenticate(old_key) is None
        assert nodes.authenticate(old_token) is None
        assert listed("users") == [("sonarr", True), ("sonarr", False)]
        assert listed("nodes") == [("edge-1", True), ("edge-1", False)]

        for kind, name in (("users", "sonarr"), ("nodes", "edge-1")):
            capsys.readouterr()
            assert main([kind, "create", name]) == 1  # the live one has it
            assert "exists already" in capsys.readouterr().err
            assert main([kind, "rotate", name]) == 0
        assert users.authenticate(new_key) is None
        assert nodes.authenticate(new_token) is None
        assert main(["users", "revoke", "sonarr"]) == 0
        assert main(["nodes", "revoke", "edge-1"]) == 0
        assert listed("users") == [("sonarr", True), ("sonarr", True)]
