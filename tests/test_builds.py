"""store/builds.py: the catalog's pending keys with the time each FIRST became
pending, and the builds recorded by the builder (coordinator/catalog_builder.py)."""

from __future__ import annotations

import logging
from datetime import datetime

import pytest
from test_catalog_build import batches_of_generated

from usenet_indexer.coordinator.catalog_builder import build_once
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.store.builds import KEEP_SECONDS, BuildRecord, BuildStore

HOUR = 3600.0


def _pending(stores: Stores) -> dict[bytes, tuple[int, datetime]]:
    with stores.catalog.pool.connection() as conn:
        rows = conn.execute("SELECT key, seq, since FROM catalog_pending").fetchall()
    return {bytes(key): (seq, since) for key, seq, since in rows}


def test_a_key_marked_again_keeps_the_time_it_first_became_pending(stores: Stores) -> None:
    stored = batches_of_generated(stores, 6_000, 3, every=1_000)
    next(stored)
    first = _pending(stores)
    assert first
    for _ in stored:
        pass
    later = _pending(stores)
    again = [key for key in first if later[key][0] != first[key][0]]
    assert again  # a later batch marked some of the first batch's keys again...
    assert all(later[key][1] == first[key][1] for key in first)  # ...their `since` stays
    newer = later.keys() - first.keys()
    assert newer
    oldest = min(since for _, since in first.values())
    assert all(later[key][1] > oldest for key in newer)  # marked by later transactions

    lag = BuildStore(stores.catalog.pool).lag(300)
    assert lag.pending_keys == len(later)
    assert lag.oldest_pending_since == oldest
    assert lag.oldest_pending_seconds is not None
    assert lag.oldest_pending_seconds >= 0
    assert (lag.builds, lag.last) == (0, None)


def test_a_build_is_recorded_with_what_it_took(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in batches_of_generated(stores, 6_000, 3, every=2_000):
        pass
    builds = BuildStore(stores.catalog.pool)
    pending = builds.lag(300).pending_keys
    assert pending > 0
    with caplog.at_level(logging.INFO):
        built = build_once(stores.build, builds, HOUR)
    stores.build.drain(quiet_seconds=HOUR)  # what drain builds is not recorded
    lag = builds.lag(300)
    assert lag.builds == 1
    last = lag.last
    assert last is not None
    assert (last.pending, last.keys, last.written, last.shown) == (
        built.pending,
        built.keys,
        built.written,
        built.shown,
    )
    assert last.pending > 0
    assert last.cpu_s == pytest.approx(built.cpu_s)
    assert last.wall_s >= 0
    assert last.pid > 0
    assert last.host
    assert lag.builds_pending == built.pending
    assert lag.last_build_seconds is not None
    assert "catalog built: pending=" in caplog.text
    # And why it merged more keys than were pending: what found those.
    assert f"beyond its dates; merged again: {built.again})" in caplog.text
    assert built.again.total == built.keys - built.pending
    assert lag.pending_keys == 0
    # A build with nothing to do is not a row.
    build_once(stores.build, builds, HOUR)
    assert builds.lag(300).builds == 1


def test_builds_older_than_a_day_are_forgotten_as_rows_are_added(stores: Stores) -> None:
    builds = BuildStore(stores.catalog.pool)
    record = BuildRecord(5, 7, 3, 0, 0.25, 0.5, "host", 42)
    builds.record(record)
    with stores.catalog.pool.connection() as conn:
        conn.execute(
            "UPDATE catalog_builds SET at = now() - make_interval(secs => %s)",
            (KEEP_SECONDS + 60.0,),
        )
    assert builds.lag(300).builds == 0  # out of the lookback, still the last one
    builds.record(record)
    with stores.catalog.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM catalog_builds").fetchone()
    assert row == (1,)
    lag = builds.lag(300)
    assert (lag.builds, lag.builds_pending, lag.builds_cpu_s) == (1, 5, 0.25)
    assert lag.last is not None
    assert (lag.last.keys, lag.last.host, lag.last.pid) == (7, "host", 42)
