"""`uidx status` on a real database: throughput over the time the work took, --json, --help."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from nntp_fixtures import NewsServer
from psycopg_pool import ConnectionPool
from test_catalog_build import batches_of_generated

from usenet_indexer.cli import main
from usenet_indexer.coordinator.catalog_builder import build_once
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.builds import BuildStore
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.servers import ServerReport, ServerStore
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.wire.packed import pack_batch

TTL = 900.0
GROUP = "alt.binaries.status"


@pytest.fixture
def env(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    monkeypatch.delenv("UIDX_NNTP", raising=False)


def _generated_lines(articles: int) -> list[bytes]:
    generated = generate(GeneratorConfig(articles=articles, seed=5, first_article=1))
    return [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]


def _batches(group: str, lines: list[bytes], per_batch: int) -> list[Batch]:
    indexer = RangeIndexer(group=group, first=1)
    batches = []
    for start in range(0, len(lines), per_batch):
        part = lines[start : start + per_batch]
        indexer.add_data(b"\n".join(part), int(part[-1].split(b"\t", 1)[0]) + 1)
        batches.append(indexer.take())
    return batches


def _store(pool: ConnectionPool, group: str, batches: list[Batch], node: str) -> int:
    """Plan one range over the batches, lease it to a new node and store them; the node's id."""
    group_id = GroupStore(pool).id_of(group)
    RangeStore(pool).plan(group_id, 1, batches[-1].next - 1, 10**9)
    node_id = NodeStore(pool).authenticate(NodeStore(pool).create(node))
    assert node_id is not None
    lease = RangeStore(pool).lease(node_id, TTL)
    assert lease is not None
    for batch in batches:
        BatchStore(pool).store(node_id, lease.range_id, lease.epoch, pack_batch(batch), 1, TTL)
    return node_id


def _stored_seconds_ago(pool: ConnectionPool, seconds_ago: list[float]) -> None:
    """Date the stored batches, in article order, as stored that long before now.

    What a run of that length leaves behind, without waiting for one.
    """
    with pool.connection() as conn:
        keys = conn.execute(
            "SELECT range_id, batch_first FROM batches ORDER BY batch_first"
        ).fetchall()
        assert len(keys) == len(seconds_ago)
        for (range_id, first), ago in zip(keys, seconds_ago, strict=True):
            conn.execute(
                "UPDATE batches SET stored_at = now() - make_interval(secs => %s)"
                " WHERE range_id = %s AND batch_first = %s",
                (ago, range_id, first),
            )


def _status_json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    parsed: dict[str, Any] = json.loads(capsys.readouterr().out)
    return parsed


@pytest.mark.usefixtures("env")
def test_throughput_is_over_the_time_the_batches_took_not_the_lookback(
    pool: ConnectionPool, capsys: pytest.CaptureFixture[str]
) -> None:
    GroupStore(pool).add(GROUP)
    batches = _batches(GROUP, _generated_lines(10_000), 2_000)
    assert len(batches) == 5
    _store(pool, GROUP, batches, "edge-1")
    # A 3-second run (four batches, a second apart) after one batch of ten minutes ago.
    _stored_seconds_ago(pool, [600, 3, 2, 1, 0])
    recent = batches[1:]
    rated = sum(b.lines for b in recent[1:])  # the first one's work was before the window
    capsys.readouterr()

    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "throughput: the batches stored in the last 5 minutes" in out
    assert f"  4 batches, {sum(b.lines for b in recent):,} headers" in out
    assert f"{rated / 3:,.0f} headers/s" in out
    assert "over those 3.0 s" in out
    assert re.search(
        r"stored from \d\d:\d\d:\d\d UTC to \d\d:\d\d:\d\d UTC; the last one \d+ s ago", out
    )

    throughput = _status_json(capsys)["throughput"]
    assert throughput["lookback_seconds"] == 300
    assert throughput["batches"] == 4
    assert throughput["window_seconds"] == pytest.approx(3.0)
    assert throughput["headers_per_second"] == pytest.approx(rated / 3)
    chunks = sum(len(b.releases) for b in recent[1:])
    assert throughput["release_chunks_per_second"] == pytest.approx(chunks / 3)


@pytest.mark.usefixtures("env")
def test_one_batch_or_none_gives_no_rate(
    pool: ConnectionPool, capsys: pytest.CaptureFixture[str]
) -> None:
    GroupStore(pool).add(GROUP)
    assert main(["status"]) == 0
    assert (
        "throughput: the batches stored in the last 5 minutes\n  none\n" in capsys.readouterr().out
    )
    _store(pool, GROUP, _batches(GROUP, _generated_lines(1_000), 1_000), "edge-1")
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "  1 batch, " in out
    assert "  no rate: one batch" in out
    # Read as a person expects: a plural only for more than one, times to the second.
    assert re.search(r"  edge-1 +1 lease +last seen \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\n", out)
    throughput = _status_json(capsys)["throughput"]
    assert (throughput["batches"], throughput["window_seconds"]) == (1, None)
    assert throughput["headers_per_second"] is None


@pytest.mark.usefixtures("env")
def test_status_json_of_a_real_database(
    news_server: NewsServer,
    pool: ConnectionPool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A group checked against INN2, one added unchecked, a node with indexed batches,
    # a spool, and the prefetcher's figures for a server.
    monkeypatch.setenv("UIDX_NNTP", news_server.url())
    assert main(["groups", "add", news_server.group, "--backfill-days", "3"]) == 0
    assert main(["groups", "add", GROUP, "--unchecked"]) == 0
    lines = _generated_lines(6_000)
    batches = _batches(GROUP, lines, 2_000)
    _store(pool, GROUP, batches, "edge-1")
    assert main(["nodes", "create", "edge-2"]) == 0
    assert main(["nodes", "revoke", "edge-2"]) == 0
    assert (
        main(
            ["ranges", "plan", news_server.group, "--from", "1", "--to", "30000", "--size", "10000"]
        )
        == 0
    )
    dump = tmp_path / "dump.txt"
    dump.write_bytes(b"\n".join(lines) + b"\n")
    capsys.readouterr()
    assert main(["spool", "import", str(dump), "--group", GROUP, "--chunk-articles", "2500"]) == 0
    spooled = re.search(r"in (\d+) chunks", capsys.readouterr().out)
    assert spooled is not None
    server = f"{news_server.host}:{news_server.port}"
    ServerStore(pool).report(
        [ServerReport(server, 2, 4, 90_000, 45_000.5, "DEFLATE", 1, "502 busy")]
    )

    status = _status_json(capsys)
    assert status["schema"] == 1
    assert status["taken_at"].endswith("+00:00")

    groups = {g["name"]: g for g in status["groups"]}
    assert set(groups) == {news_server.group, GROUP}
    checked = groups[news_server.group]
    assert checked["state"] == "checked"
    assert checked["checked_at"] is not None
    assert (checked["low"], checked["high"]) == (1, news_server.articles)
    assert checked["indexed_to"] is None
    assert checked["lag"] == news_server.articles  # nothing indexed yet
    assert checked["backfill_days"] == 3
    assert (checked["ranges"], checked["ranges_done"], checked["articles_planned"]) == (
        3,
        0,
        30_000,
    )
    unchecked = groups[GROUP]
    assert unchecked["state"] == "unchecked"
    assert unchecked["checked_at"] is None
    assert (unchecked["low"], unchecked["high"], unchecked["lag"]) == (None, None, None)
    assert unchecked["indexed_to"] == batches[-1].next - 1
    assert unchecked["articles_indexed"] == batches[-1].next - 1

    by_state = {(r["group"], r["state"]): r for r in status["ranges"]}
    assert by_state[(news_server.group, "planned")]["ranges"] == 3
    assert by_state[(news_server.group, "planned")]["articles"] == 30_000
    leased = by_state[(GROUP, "leased")]
    assert (leased["ranges"], leased["expired_leases"]) == (1, 0)
    assert leased["articles_indexed"] == batches[-1].next - 1

    nodes = {n["name"]: n for n in status["nodes"]}
    assert (nodes["edge-1"]["state"], nodes["edge-1"]["leases"]) == ("active", 1)
    assert nodes["edge-1"]["last_seen"].endswith("+00:00")  # it authenticated
    assert nodes["edge-2"]["state"] == "revoked"
    assert nodes["edge-2"]["revoked_at"] is not None

    throughput = status["throughput"]
    assert throughput["batches"] == 3
    assert throughput["headers"] == sum(b.lines for b in batches)
    assert throughput["release_chunks"] == sum(len(b.releases) for b in batches)
    assert throughput["last_stored_at"] >= throughput["first_stored_at"]

    (reported,) = status["nntp_servers"]
    assert reported["server"] == server
    assert (reported["connections"], reported["connection_limit"]) == (2, 4)
    assert (reported["lines"], reported["lines_per_second"]) == (90_000, 45_000.5)
    assert (reported["compression"], reported["errors"], reported["last_error"]) == (
        "DEFLATE",
        1,
        "502 busy",
    )

    spool = status["spool"]
    assert spool["lines"] == len(lines)
    assert spool["chunks"] == int(spooled.group(1)) >= 3
    assert spool["bytes"] > 0


def test_status_help_says_what_it_shows(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["status", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "show groups, ranges, nodes, throughput, NNTP servers and the spool." in out
    assert "--json" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = " ".join(capsys.readouterr().out.split())  # as wrapped to the terminal
    assert "show groups, ranges, nodes, throughput, NNTP servers and the spool" in listed


def test_range_figures_are_integers(pool: ConnectionPool) -> None:
    """Sums of 64-bit article numbers come back as PostgreSQL numeric unless cast."""
    group = GroupStore(pool).add("alt.binaries.sums")
    RangeStore(pool).plan(group, 2**40, 2**40 + 999, 500)
    states = RangeStore(pool).states()
    assert [(type(s.articles), type(s.articles_indexed)) for s in states] == [(int, int)]
    assert states[0].articles == 1000


@pytest.mark.usefixtures("env")
def test_status_shows_the_keys_waiting_for_the_catalog_and_the_builds(
    stores: Stores, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = _status_json(capsys)["catalog"]
    assert (catalog["pending_keys"], catalog["oldest_pending_seconds"]) == (0, None)
    assert (catalog["builds"], catalog["last_build"]) == (0, None)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "  no keys pending\n" in out
    assert "  0 builds: 0 pending keys taken, 0.00 CPU s\n" in out
    assert "  no build recorded in the last day\n" in out

    for _ in batches_of_generated(stores, 4_000, 3, every=2_000):
        pass
    with stores.catalog.pool.connection() as conn:
        conn.execute("UPDATE catalog_pending SET since = since - interval '90 seconds'")
        row = conn.execute("SELECT count(*) FROM catalog_pending").fetchone()
    assert row is not None
    pending = int(row[0])
    assert pending > 1
    catalog = _status_json(capsys)["catalog"]
    assert catalog["pending_keys"] == pending
    assert 90 <= catalog["oldest_pending_seconds"] < 150
    assert catalog["oldest_pending_since"].endswith("+00:00")
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"  {pending:,} keys pending, the oldest for (9\d|1[0-4]\d) s \(since", out)

    built = build_once(stores.build, BuildStore(stores.catalog.pool), 3600.0)
    catalog = _status_json(capsys)["catalog"]
    assert catalog["builds"] == 1
    assert catalog["builds_pending_keys"] == built.pending > 0
    # How much of what was stored before each pending key brought back.
    assert catalog["builds_keys_merged"] == built.keys >= built.pending
    assert catalog["builds_merged_per_pending_key"] == pytest.approx(built.keys / built.pending)
    last = catalog["last_build"]
    assert (last["pending_keys"], last["keys_merged"], last["rows_written"]) == (
        built.pending,
        built.keys,
        built.written,
    )
    assert last["cpu_seconds"] == pytest.approx(built.cpu_s)
    assert last["at"].endswith("+00:00")
    assert last["pid"] > 0
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert (
        f"  1 build: {built.pending:,} pending keys taken, {built.keys:,} keys merged"
        f" ({built.keys / built.pending:,.2f} per pending key),"
    ) in out
    assert re.search(r"  the last at \d\d:\d\d:\d\d UTC, \d+ s ago:\n", out)
    assert f"    {built.pending:,} pending keys taken, {built.keys:,} keys merged," in out


@pytest.mark.usefixtures("env")
def test_status_counts_whole_repairable_and_broken_releases(
    stores: Stores, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _status_json(capsys)["releases"] == {
        "whole": 0,
        "repairable": 0,
        "broken": 0,
        "waiting": 0,
    }
    for _ in batches_of_generated(stores, 20_000, 5, every=5_000):
        pass
    stores.build.everything(quiet_seconds=0)
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute("SELECT state, count(*) FROM catalog GROUP BY state").fetchall()
    counted = {str(state): int(n) for state, n in rows}
    # The generator posts incomplete uploads: some whole, some with too little par2.
    assert counted["whole"] > 0
    assert counted["broken"] > 0
    releases = _status_json(capsys)["releases"]
    assert releases == {
        "whole": counted["whole"],
        "repairable": counted.get("repairable", 0),
        "broken": counted["broken"],
        "waiting": 0,
    }
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert (
        f"  {counted['whole']:,} whole, {counted.get('repairable', 0):,} repairable"
        f" (from their par2), {counted['broken']:,} broken; 0 incomplete not shown yet\n"
    ) in out


@pytest.mark.usefixtures("env")
def test_status_text_says_one_in_the_singular_and_figures_with_separators(
    pool: ConnectionPool, capsys: pytest.CaptureFixture[str]
) -> None:
    import attrs

    from usenet_indexer.commands.status import as_text
    from usenet_indexer.store.status import SpoolSize, StatusStore

    group = GroupStore(pool).add(GROUP, low=1, high=9_000_000)
    (range_id,) = RangeStore(pool).plan(group, 1_000_000, 1_999_999, 1_000_000)
    with pool.connection() as conn:
        conn.execute(
            "UPDATE ranges SET state = 'failed', resume = 1500000, refusals = 3,"
            " refusal = 'a batch past the end', failed_at = now()"
        )
    snapshot = StatusStore(pool).snapshot()
    one = attrs.evolve(
        snapshot,
        spool=SpoolSize(1, 2_000_000, 1),
        throughput=attrs.evolve(
            snapshot.throughput,
            batches=1,
            headers=1,
            release_chunks=1,
            first_stored_at=snapshot.taken_at,
            last_stored_at=snapshot.taken_at,
        ),
    )
    text = "\n".join(as_text(one))
    assert "\nspool: 1 chunk, 2.0 MB, 1 line\n" in text
    assert "\n  1 batch, 1 header, 1 release chunk, stored at " in text
    assert f"  range {range_id} {GROUP} 1,000,000..1,999,999 at 1,500,000: 3 refusals" in text


def _documented() -> tuple[dict[str, Any], dict[str, set[str]]]:
    """docs/status-json.md: its example, and the fields of each table by the heading
    above it ("object" for the first, "last_build" for the one after `last_build`:)."""
    doc = (Path(__file__).parent.parent / "docs" / "status-json.md").read_text()
    example = doc[doc.index("```json\n") + len("```json\n") :]
    tables: dict[str, set[str]] = {}
    heading = ""
    for line in doc.splitlines():
        named = re.fullmatch(r"#+ `?([a-z_]+)(\[\])?`?|#+ The (object)|`(last_build)`:", line)
        if named:
            heading = next(name for name in named.groups() if name and name != "[]")
        cell = re.match(r"\| `([a-z_]+)` ", line)
        if cell:
            tables.setdefault(heading, set()).add(cell.group(1))
    return json.loads(example[: example.index("```")]), tables


def _keys(value: Any) -> Any:
    """The keys of a JSON value, nested: an object's by key, a list's first element's."""
    if isinstance(value, dict):
        return {key: _keys(item) for key, item in value.items()}
    if isinstance(value, list):
        assert value, "an empty list shows no keys"
        return [_keys(value[0])]
    return None


@pytest.mark.usefixtures("env")
def test_the_documented_fields_are_those_status_json_emits(
    stores: Stores, pool: ConnectionPool, capsys: pytest.CaptureFixture[str]
) -> None:
    from usenet_indexer.core.health import Observed, State
    from usenet_indexer.store.builds import BuildRecord
    from usenet_indexer.store.probes import ProbeStore

    # Something in every list, and a last build: every field shows.
    group = GroupStore(pool).add(GROUP, low=1, high=100_000, checked=True)
    (parked, _) = RangeStore(pool).plan(group, 1, 20_000, 10_000)
    with pool.connection() as conn:
        conn.execute(
            "UPDATE ranges SET state = 'failed', refusals = 3, refusal = 'a batch past the end',"
            " failed_at = now() WHERE id = %s",
            (parked,),
        )
    NodeStore(pool).create("edge-1")
    BuildStore(pool).record(BuildRecord(4, 5, 6, 0, 0.5, 0.7, "idx1", 4242))
    ServerStore(pool).report([ServerReport("news:563", 1, 4, 900, 45.5, None, 0, None)])
    stores.health.report("idx1:1", "prefetcher", [Observed("group", GROUP, State.NOT_CARRIED)])
    ProbeStore(pool).add_more([(b"k" * 16, "<a@b>", "x.par2")])

    emitted = _keys(_status_json(capsys))
    example, tables = _documented()
    assert _keys(example) == emitted
    # Each table lists the fields of its object.
    assert tables.pop("object") == set(emitted)
    assert tables.pop("last_build") == set(emitted["catalog"]["last_build"])
    for name, fields in tables.items():
        shown = emitted[name]
        assert fields == set(shown[0] if isinstance(shown, list) else shown), name


@pytest.mark.usefixtures("env")
def test_status_text_columns_stay_aligned_with_a_group_name_longer_than_the_column(
    stores: Stores, pool: ConnectionPool, capsys: pytest.CaptureFixture[str]
) -> None:
    from usenet_indexer.core.health import Observed, State

    long = "alt.binaries.multimedia.anime.highspeed"  # 39 characters, a real group
    for name in (GROUP, long):
        RangeStore(pool).plan(GroupStore(pool).add(name, low=1, high=1_000), 1, 1_000, 1_000)
    stores.health.report(
        "idx1:1",
        "prefetcher",
        [
            Observed("group", long, State.NOT_CARRIED, "411"),
            Observed("server", "news:563", State.UNREACHABLE, "cannot connect"),
        ],
    )
    assert main(["status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for title, state in (("groups", "unchecked"), ("ranges", "planned")):
        header, *rows = lines[lines.index(title) + 1 :][:3]
        column = header.index(" state ") + 1
        for row in rows:  # the state under its header, the last figure where the header ends
            assert row[column - 1 : column + len(state) + 1] == f" {state} ", (header, row)
            assert len(row) == len(header), (header, row)
    problems = [line for line in lines if "(idx1:1)" in line]
    assert len(problems) == 2
    assert len({line.index(" since ") for line in problems}) == 1, problems
