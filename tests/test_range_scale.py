"""Range queries that stay cheap however many ranges are done (migrations/0032_range_scale.sql).

The follower plans a live range at every poll that finds new posts (1,440 a day
for a busy group), and done ranges are kept. Every poll, `uidx status`, the status
page, /metrics and the spool's sweep read all of them before: 0.6-2.4 s each at 2M
done ranges, growing every day. These tests hold the figures to a count of every
range (the queries as they were, kept here as the oracle) and the queries to
reading only what they need.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from test_store import TTL, Stores, node

from usenet_indexer.config import Settings
from usenet_indexer.core.batch import Batch
from usenet_indexer.core.follow import Kind
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.store import groups as groups_sql
from usenet_indexer.store import ranges as ranges_sql
from usenet_indexer.store import spool as spool_sql
from usenet_indexer.store import status as status_sql
from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.catalog import CatalogStore
from usenet_indexer.store.groups import GroupRow, GroupStore
from usenet_indexer.store.migrate import load_migrations, migrate
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import (
    Finish,
    PlanOverlap,
    Progress,
    RangeStateRow,
    RangeStore,
)
from usenet_indexer.wire.packed import pack_batch

# The figures as a scan of every range gave them (the queries before 0032).
_EVERY_GROUP = """
    SELECT g.name, g.backfill_days, g.low, g.high, g.checked_at,
           count(r.id), count(r.id) FILTER (WHERE r.state = 'done'),
           coalesce(sum(r.resume - r.first_article), 0)::bigint,
           coalesce(sum(r.last_article - r.first_article + 1), 0)::bigint,
           max(r.resume) FILTER (WHERE r.resume > r.first_article) - 1,
           g.enabled, g.followed_to, g.backfill_floor, g.quirk, g.quirk_at,
           coalesce(min(r.resume) FILTER (WHERE r.kind = 'live' AND r.state <> 'done') - 1,
                    max(r.last_article) FILTER (WHERE r.kind = 'live')),
           min(r.first_article) FILTER (WHERE r.kind = 'backfill' AND r.state = 'done'),
           CASE WHEN count(r.id) FILTER (WHERE r.kind = 'live') > 0
                THEN coalesce(extract(epoch FROM now() - min(r.planned_at)
                                      FILTER (WHERE r.kind = 'live' AND r.state <> 'done')), 0)
           END::float8
    FROM groups g LEFT JOIN ranges r ON r.group_id = g.id
    GROUP BY g.id ORDER BY g.name
"""
_EVERY_STATE = """
    SELECT g.name, r.state, count(*), coalesce(sum(r.resume - r.first_article), 0)::bigint,
           coalesce(sum(r.last_article - r.first_article + 1), 0)::bigint,
           count(*) FILTER (WHERE r.state = 'leased' AND r.deadline < now())
    FROM ranges r JOIN groups g ON g.id = r.group_id
    GROUP BY g.name, r.state ORDER BY g.name, r.state
"""
_EVERY_RANGE_PROGRESS = """
    SELECT count(*) FILTER (WHERE state IN ('planned', 'leased')), count(*),
           count(*) FILTER (WHERE state = 'failed')
    FROM ranges
"""


@pytest.fixture
def stores(pool: ConnectionPool) -> Stores:
    """test_store's stores, on the test's pool."""
    return Stores(
        GroupStore(pool), NodeStore(pool), RangeStore(pool), BatchStore(pool), CatalogStore(pool)
    )


def _empty_batch(group: str, first: int, next_article: int) -> Batch:
    indexer = RangeIndexer(group=group, first=first)
    indexer.add_data(b"", next_article)
    return indexer.take()


def _oracle(of: ConnectionPool) -> tuple[list[GroupRow], list[RangeStateRow], Progress]:
    with of.connection() as conn:
        groups = [GroupRow(*row) for row in conn.execute(_EVERY_GROUP).fetchall()]
        states = [RangeStateRow(*row) for row in conn.execute(_EVERY_STATE).fetchall()]
        row = conn.execute(_EVERY_RANGE_PROGRESS).fetchone()
    assert row is not None
    return groups, states, Progress(planned=row[1], not_done=row[0], parked=row[2])


def _shown(stores: Stores) -> tuple[list[GroupRow], list[RangeStateRow], Progress]:
    return stores.groups.list(), stores.ranges.states(), stores.ranges.progress()


def _without_lag(rows: list[GroupRow]) -> list[tuple[Any, ...]]:
    # The lag is now() less a time: two statements, two nows.
    return [(*(getattr(r, f) for f in GroupRow.__attrs_attrs__.__dict__ if f != "lag_seconds"),
             r.lag_seconds is None) for r in rows]  # fmt: skip


def _assert_as_a_scan_shows(stores: Stores) -> None:
    groups, states, progress = _shown(stores)
    want_groups, want_states, want_progress = _oracle(stores.ranges.pool)
    assert _without_lag(groups) == _without_lag(want_groups)
    assert states == want_states
    assert progress == want_progress


def test_what_status_shows_of_ranges_is_what_a_count_of_every_range_gives(
    stores: Stores,
) -> None:
    """Plans of every kind, leases, batches, finishes, parking and retries: after each
    step `uidx groups list`, `uidx status`'s ranges and the progress line are what a
    scan of every range counts (the done ones now come from their counts)."""
    rng = random.Random(5)
    followed = stores.groups.add("alt.binaries.followed", backfill_days=30)
    manual = stores.groups.add("alt.binaries.manual")
    stores.groups.add("alt.binaries.empty")
    edge = node(stores, "edge")
    _assert_as_a_scan_shows(stores)
    stores.ranges.plan(followed, 10_000, 10_999, 100, kind=Kind.LIVE)
    stores.ranges.plan(followed, 5_000, 9_999, 1_000, kind=Kind.BACKFILL)
    stores.ranges.plan(followed, 20_000, 20_499, 250)  # by hand, above
    stores.ranges.plan(manual, 0, 2_999, 300)
    _assert_as_a_scan_shows(stores)
    for step in range(40):
        lease = stores.ranges.lease(edge, TTL if step % 7 else -1.0)  # some leases expire
        if lease is None:
            break
        end = lease.last + 1
        cut = rng.choice([lease.next + (end - lease.next) // 2, end])
        if cut > lease.next:  # (a range given back at its end holds nothing more)
            batch = pack_batch(_empty_batch(lease.group, lease.next, cut))
            stores.batches.store(edge, lease.range_id, lease.epoch, batch, 10, TTL)
        if cut == end and rng.random() < 0.8:
            assert stores.ranges.finish(edge, lease.range_id, lease.epoch) is Finish.OK
        elif rng.random() < 0.5:
            stores.ranges.refuse(edge, lease.range_id, lease.epoch, "refused here", limit=1)
        else:
            stores.ranges.release(edge, lease.range_id, lease.epoch)
        _assert_as_a_scan_shows(stores)
        if step == 20:
            assert stores.ranges.retry(None)
            _assert_as_a_scan_shows(stores)
    assert any(r.state == "done" for r in stores.ranges.states())


def test_done_ranges_of_a_database_made_before_are_counted_when_it_is_migrated(
    pg_empty_url: str,
) -> None:
    """An upgrade: the counts start from the ranges the database holds."""
    migrations = load_migrations()
    before = [m for m in migrations if m.version < 32]
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        migrate(conn, before)
        conn.execute("INSERT INTO groups (name) VALUES ('a'), ('b')")
        conn.execute(
            "INSERT INTO ranges (group_id, first_article, last_article, resume, state)"
            " SELECT 1 + i % 2, i * 10, i * 10 + 9, i * 10 + 10, 'done'"
            " FROM generate_series(0, 99) i"
        )
        conn.execute(
            "INSERT INTO ranges (group_id, first_article, last_article, resume)"
            " VALUES (1, 5000, 5999, 5000)"
        )
        migrate(conn, migrations)
        done = conn.execute("SELECT group_id, ranges, indexed, articles FROM range_done"
                            " ORDER BY group_id").fetchall()  # fmt: skip
    assert done == [(1, 50, 500, 500), (2, 50, 500, 500)]
    with open_pool(pg_empty_url, Settings(home=Path("/nonexistent"))) as pool:
        assert [(g.name, g.ranges, g.ranges_done) for g in GroupStore(pool).list()] == [
            ("a", 51, 50),
            ("b", 50, 50),
        ]


# An operator's removal of a group by hand (no command removes one): its batches, its
# ranges, its spool's rows, then the group.
_REMOVE_GROUP = (
    "DELETE FROM batches WHERE range_id IN (SELECT id FROM ranges WHERE group_id = %(id)s)",
    "DELETE FROM ranges WHERE group_id = %(id)s",
    "DELETE FROM spool_chunks WHERE group_id = %(id)s",
    "DELETE FROM groups WHERE id = %(id)s",
)


def test_a_group_with_done_ranges_can_be_removed_by_hand(stores: Stores) -> None:
    """A group whose ranges were done, removed with its ranges and batches by hand: the
    done ranges' count (range_done, kept by triggers, which an operator need not know
    of) goes with the group instead of refusing its delete."""
    gone = stores.groups.add("alt.binaries.gone")
    kept = stores.groups.add("alt.binaries.kept")
    edge = node(stores, "edge")
    for group in (gone, kept):
        stores.ranges.plan(group, 0, 99, 100)
        lease = stores.ranges.lease(edge, TTL)
        assert lease is not None
        batch = pack_batch(_empty_batch(lease.group, lease.next, lease.last + 1))
        stores.batches.store(edge, lease.range_id, lease.epoch, batch, 10, TTL)
        assert stores.ranges.finish(edge, lease.range_id, lease.epoch) is Finish.OK
    with stores.ranges.pool.connection() as conn:
        for statement in _REMOVE_GROUP:
            conn.execute(statement, {"id": gone})
        left = conn.execute("SELECT group_id, ranges FROM range_done").fetchall()
    assert left == [(kept, 1)]
    assert [g.name for g in stores.groups.list()] == ["alt.binaries.kept"]
    _assert_as_a_scan_shows(stores)


def test_plans_never_overlap_whatever_is_planned_around_them(stores: Stores) -> None:
    """The overlap check by position refuses exactly the spans a scan of every range
    would (inside, around, across either end, touching), and nothing else."""
    rng = random.Random(11)
    group = stores.groups.add("g")
    taken: list[tuple[int, int]] = []
    for _ in range(300):
        first = rng.randrange(0, 3_000)
        last = first + rng.choice([0, 1, 5, 40, 300])
        clash = any(a <= last and b >= first for a, b in taken)
        if clash:
            with pytest.raises(PlanOverlap):
                stores.ranges.plan(group, first, last, rng.choice([1, 7, 1_000]))
        else:
            stores.ranges.plan(group, first, last, rng.choice([1, 7, 1_000]))
            taken.append((first, last))
    assert len(taken) > 20


def _rows_read(
    conn: psycopg.Connection[Any],
    statement: str,
    params: Mapping[str, object] | None = None,
    table: str = "ranges",
) -> int:
    """How many rows of `table` a statement's plan read (returned or filtered out)."""
    row = psycopg.ClientCursor(conn).execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
    (plan,) = row.fetchone() or ("[]",)
    tree = plan if isinstance(plan, list) else json.loads(str(plan))
    read = 0
    stack = [tree[0]["Plan"]]
    while stack:
        step = stack.pop()
        stack.extend(step.get("Plans", ()))
        if step.get("Relation Name") == table:
            rows = step["Actual Rows"] + step.get("Rows Removed by Filter", 0)
            read += int(rows * step["Actual Loops"])
    return read


def test_a_poll_a_status_and_a_sweep_read_only_the_ranges_they_need(pg_conn: Any) -> None:
    """50,000 done ranges in each of two groups (a month of minute polls in one; in the
    other a history planned by hand, then followed with a backfill from a floor above
    most of it), each with its batch, a few not done, chunks in the spool: the
    follower's view, `uidx groups list`, the range figures, the progress line, an
    overlap check and the sweep each read a few dozen rows of `ranges`, not the done
    ones; the throughput and the nodes' rates read the last minutes' batches, not the
    month's."""
    done = 50_000
    conn = pg_conn
    conn.execute(
        "INSERT INTO groups (name, backfill_days, followed_to, backfill_floor)"
        " VALUES ('followed', 30, %(top)s, 1000),"
        "        ('manual', 30, %(top)s + 99, (%(done)s - 20) * 100)",
        {"top": done * 100, "done": done},
    )
    conn.execute(
        "INSERT INTO ranges (group_id, first_article, last_article, resume, state, kind)"
        " SELECT g, i * 100, i * 100 + 99, i * 100 + 100, 'done',"
        "        CASE WHEN g = 1 THEN 'live' ELSE 'manual' END"
        " FROM generate_series(1, 2) g, generate_series(10, %(done)s - 1) i",
        {"done": done},
    )
    conn.execute(
        "INSERT INTO ranges (group_id, first_article, last_article, resume, state, kind)"
        " SELECT g, i * 100, i * 100 + 99, i * 100, 'planned', k FROM"
        " (VALUES (1, %(done)s, 'live'), (1, %(done)s + 1, 'live'), (1, 5, 'backfill'),"
        "         (1, 8, 'manual'), (2, %(done)s, 'live')) AS p(g, i, k)",
        {"done": done},
    )
    conn.execute(
        "INSERT INTO spool_chunks (group_id, first_article, last_article, codec, path)"
        " SELECT g, i * 100, i * 100 + 99, 0, 'c' || g || '-' || i"
        " FROM generate_series(1, 2) g, generate_series(%(done)s - 5, %(done)s + 1) i",
        {"done": done},
    )
    conn.execute("INSERT INTO nodes (name, token_hash) VALUES ('edge', 'x')")
    conn.execute(
        "INSERT INTO batches (range_id, batch_first, batch_next, node_id, epoch, lines,"
        " release_chunks, segments, body_bytes, stored_at)"
        " SELECT id, first_article, last_article + 1, 1, 1, 100, 1, 100, 1000,"
        "        now() - make_interval(secs => 86400 + id)"
        " FROM ranges WHERE state = 'done'"
    )
    conn.execute(
        "INSERT INTO batches (range_id, batch_first, batch_next, node_id, epoch, lines,"
        " release_chunks, segments, body_bytes)"
        " SELECT id, first_article, first_article + 10, 1, 1, 10, 1, 10, 100"
        " FROM ranges WHERE state <> 'done'"
    )
    conn.execute("ANALYZE")
    assert conn.execute("SELECT sum(ranges) FROM range_done").fetchone() == (2 * (done - 10),)
    statements = {
        "follower's view": (groups_sql._FOLLOWED, None),
        "groups list": (groups_sql._LIST, None),
        "range figures": (ranges_sql._STATES, None),
        "progress": (ranges_sql._PROGRESS, None),
        "overlap": (ranges_sql._OVERLAP, {"group": 1, "first": 2_000_000, "last": 2_000_050}),
        "overlap below": (ranges_sql._OVERLAP, {"group": 2, "first": 300_000, "last": 300_500}),
        "sweep": (spool_sql._SWEEPABLE, None),
    }
    read = {name: _rows_read(conn, sql, params) for name, (sql, params) in statements.items()}
    lookback = {"lookback": status_sql.LOOKBACK_SECONDS}
    read["throughput"] = _rows_read(conn, status_sql._THROUGHPUT, lookback, "batches")
    read["node rates"] = _rows_read(conn, status_sql._NODE_WORK, lookback, "batches")
    assert all(rows <= 100 for rows in read.values()), read
