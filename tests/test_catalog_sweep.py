"""The catalog sweep (core/sweep.py, store/sweep.py, coordinator/catalog_builder.py):
every stored release key marked pending again once per `catalog_sweep_hours`, a
slice a tick, in key order, so that a catalog followed batch by batch becomes what
a whole rebuild makes, on a real PostgreSQL.

The sweep's clock is its row's `swept_at`, on the database's clock: a test moves
it back (as time passing would) instead of waiting. `FlakySweeps` is a fake of the
store for the one fault a real database does not give on demand mid-test (the
database unavailable for one tick)."""

from __future__ import annotations

import logging
import random
import re
import threading
from datetime import UTC, datetime, timedelta
from itertools import chain
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import psycopg
import pytest
import trio
import trio.testing
from psycopg_pool import ConnectionPool
from test_catalog_build import batches_of_lines, catalog_rows
from test_catalog_windows import DAY, START, a_fill_beyond_the_windows, posted

from usenet_indexer.commands.status import as_json, as_text
from usenet_indexer.config import Settings, default, load
from usenet_indexer.coordinator.catalog_builder import CatalogDue, sweep_catalog_forever
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.core.sweep import MAX_CATCH_UP_SECONDS, MAX_KEYS, Pace, pace, position
from usenet_indexer.errors import ConfigError
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.status import StatusStore
from usenet_indexer.store.sweep import SweepStore, Swept

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
POSTER = "someone <someone@example.com>"
# A cycle of 6 minutes: 30 s a key of 12 (a pause is made up for MAX_CATCH_UP_SECONDS
# at most, so a test moves the clock back by less).
HOURS = 0.1


def test_a_tick_marks_the_keys_the_time_since_the_last_is_worth_and_keeps_the_rest() -> None:
    # 1,000 keys a day: 86.4 s a key. 200 s are worth 2 keys (and 27.2 s kept).
    due = pace(1_000, 24.0, T0, T0 + timedelta(seconds=200))
    assert due == Pace(2, T0 + timedelta(seconds=172.8))
    # Less than a key's worth: nothing, and the clock where it was.
    assert pace(1_000, 24.0, T0, T0 + timedelta(seconds=80)) == Pace(0, T0)
    # A pause longer than MAX_CATCH_UP_SECONDS is counted as that much.
    late = pace(100_000, 1.0, T0, T0 + timedelta(days=1))
    assert late.keys == 100_000 * MAX_CATCH_UP_SECONDS // 3600 < MAX_KEYS
    # Never more than MAX_KEYS in one tick; the clock moves by just their worth.
    capped = pace(100_000_000, 1.0, T0, T0 + timedelta(seconds=60))
    assert capped.keys == MAX_KEYS
    assert capped.swept_at == T0 + timedelta(seconds=MAX_KEYS * 3600 / 100_000_000)
    assert pace(0, 24.0, T0, T0 + timedelta(hours=5)).keys == 0
    with pytest.raises(ValueError, match=r"a sweep of 0\.0 hours"):
        pace(10, 0.0, T0, T0)


def test_a_cycles_position_is_its_last_keys_place_in_the_key_space() -> None:
    assert position(None) == 0.0
    assert position(b"\x80" + b"\0" * 15) == 0.5
    assert position(b"\xff" * 16) == pytest.approx(1.0)


def ticked(total: int, hours: float, seconds: float, every: float = 30.0) -> int:
    """The keys marked by ticks every `every` seconds for `seconds`, as the store keeps
    swept_at (moved only by a tick that marked keys)."""
    swept_at, now, marked = T0, T0, 0
    while now < T0 + timedelta(seconds=seconds):
        now += timedelta(seconds=every)
        due = pace(total, hours, swept_at, now, every)
        if due.keys:
            swept_at = due.swept_at
            marked += due.keys
    return marked


@pytest.mark.parametrize(
    ("total", "hours", "every"),
    [
        # helper-104: a catalog whose key is worth more than MAX_CATCH_UP_SECONDS (fewer
        # than 144 keys at 24 h) was never swept: a tick that marks nothing keeps
        # swept_at, and the catch-up never reached a key's worth.
        (100, 24.0, 30.0),
        (143, 24.0, 30.0),
        (144, 24.0, 30.0),
        (1_000, 240.0, 30.0),
        # A tick slower than MAX_CATCH_UP_SECONDS (catalog_build_seconds 1200) made a
        # cycle take twice its hours.
        (1_000_000, 24.0, 1200.0),
    ],
)
def test_the_pace_marks_every_key_once_a_cycle_whatever_the_catalogs_size_and_the_tick(
    total: int, hours: float, every: float
) -> None:
    assert ticked(total, hours, hours * 3600 + 2 * every) >= 0.99 * total


def test_the_pace_never_runs_ahead_of_the_clock() -> None:
    rng = random.Random(4)
    for _ in range(2_000):
        total = rng.choice([1, 7, 144, 1_000, 12_345, 10**7, 10**9])
        hours = rng.choice([0.001, 0.1, 1.0, 24.0, 240.0, 87_600.0])
        swept_at = T0 - timedelta(seconds=rng.uniform(0, 2_000))
        due = pace(total, hours, swept_at, T0, 30.0)
        assert due.swept_at <= T0 + timedelta(microseconds=1)
        assert due.keys <= max(total * MAX_CATCH_UP_SECONDS / (hours * 3600), 2) + 1


def test_the_pace_goes_on_over_the_autumn_clock_change() -> None:
    # helper-104: psycopg gives timestamptz in the session's zone, and Python subtracts
    # two datetimes of one zone by their wall clocks. 03:00 CEST becomes 02:00 CET:
    # swept_at 02:59:50 CEST, now 30 s later (02:00:20 CET), a key every 30 s: one is
    # due, not none for an hour.
    berlin = ZoneInfo("Europe/Berlin")
    swept_at = datetime(2026, 10, 25, 0, 59, 50, tzinfo=UTC).astimezone(berlin)
    now = datetime(2026, 10, 25, 1, 0, 20, tzinfo=UTC).astimezone(berlin)
    assert now.timestamp() - swept_at.timestamp() == 30
    assert pace(2_880, 24.0, swept_at, now).keys == 1


def test_catalog_sweep_hours_is_checked_and_zero_is_no_sweep() -> None:
    assert default("catalog_sweep_hours") == 168.0
    assert (
        load(
            {"UIDX_HOME": "/tmp/uidx-sweep-test", "UIDX_CATALOG_SWEEP_HOURS": "0"}
        ).catalog_sweep_hours
        == 0.0
    )
    with pytest.raises(ConfigError, match="catalog_sweep_hours"):
        load({"UIDX_HOME": "/tmp/uidx-sweep-test", "UIDX_CATALOG_SWEEP_HOURS": "-1"})


def releases(stores: Stores, count: int) -> list[bytes]:
    """`count` uploads of one poster a day apart, stored and built; their release keys,
    in key order (the table analysed: the sweep's estimate of them is exact)."""
    uploads = [
        posted(
            f"Show.Name.S01E{n:02}.720p.WEB-GRP",
            POSTER,
            [(1, f"e{n}.part1.rar"), (2, f"e{n}.part2.rar")],
            2,
            at=START + n * DAY,
            tag=f"u{n}",
        )
        for n in range(count)
    ]
    lines = [f"{n}\t{line}".encode() for n, line in enumerate(chain(*uploads), 1000)]
    for _ in batches_of_lines(stores, "alt.binaries.test", lines, len(lines)):
        stores.build.drain(quiet_seconds=0)
    with stores.catalog.pool.connection() as conn:
        conn.execute("ANALYZE releases")
        keys = [bytes(k) for (k,) in conn.execute("SELECT key FROM releases ORDER BY key")]
    assert len(keys) == count
    return keys


def back(stores: Stores, seconds: float) -> None:
    """The sweep's clock moved back, as `seconds` passing would."""
    with stores.catalog.pool.connection() as conn:
        conn.execute(
            "UPDATE catalog_sweep SET swept_at = swept_at - make_interval(secs => %s)",
            (seconds,),
        )


def pending(stores: Stores) -> list[bytes]:
    with stores.catalog.pool.connection() as conn:
        return [bytes(k) for (k,) in conn.execute("SELECT key FROM catalog_pending ORDER BY key")]


def test_the_sweep_marks_every_key_once_a_cycle_in_key_order(stores: Stores) -> None:
    keys = releases(stores, 12)
    assert pending(stores) == []
    # The first tick only starts the clock.
    assert stores.sweeps.tick(HOURS) == Swept(0, ended=False)
    started = stores.sweeps.state()
    assert (started.cycles, started.position) == (0, 0.0)
    assert started.swept_at is not None
    # 12 keys in 6 minutes (30 s a key): 2 minutes are worth 4, the first 4 in key order.
    back(stores, 120)
    assert stores.sweeps.tick(HOURS) == Swept(4, ended=False)
    assert pending(stores) == keys[:4]
    assert stores.sweeps.state().after == keys[3]
    assert stores.build.drain(quiet_seconds=0).pending == 4
    # The next slice goes on after the last key marked.
    back(stores, 120)
    assert stores.sweeps.tick(HOURS) == Swept(4, ended=False)
    assert pending(stores) == keys[4:8]
    stores.build.drain(quiet_seconds=0)
    # 3 minutes are worth 6: the last 4 are marked and the cycle ends; the next
    # starts again from the first key.
    back(stores, 180)
    assert stores.sweeps.tick(HOURS) == Swept(4, ended=True)
    assert pending(stores) == keys[8:]
    ended = stores.sweeps.state()
    assert (ended.cycles, ended.after, ended.position) == (1, None, 0.0)
    stores.build.drain(quiet_seconds=0)
    back(stores, 30)
    assert stores.sweeps.tick(HOURS) == Swept(1, ended=False)
    assert pending(stores) == keys[:1]


def test_the_sweep_gives_way_while_the_build_is_behind_the_batches(stores: Stores) -> None:
    keys = releases(stores, 12)
    stores.sweeps.tick(HOURS)
    back(stores, 120)
    clock = stores.sweeps.state().swept_at
    with stores.catalog.pool.connection() as conn:
        conn.execute(
            "INSERT INTO catalog_pending (key, since) VALUES (%s, now() - interval '10 seconds')",
            (keys[5],),
        )
    # The oldest pending key has waited 10 s, more than the 5 s allowed: nothing marked,
    # the sweep's clock unmoved.
    assert stores.sweeps.tick(HOURS, behind_seconds=5.0) == Swept(0, ended=False, gave_way=True)
    assert pending(stores) == [keys[5]]
    giving = stores.sweeps.state()
    assert giving.swept_at == clock
    # `uidx status` says so, and since the first tick that gave way (the next keeps it).
    assert giving.giving_way_since is not None
    back(stores, 30)
    assert stores.sweeps.tick(HOURS, behind_seconds=5.0).gave_way
    assert stores.sweeps.state().giving_way_since == giving.giving_way_since
    status = StatusStore(stores.catalog.pool).snapshot()
    (line,) = [line for line in as_text(status) if "giving way since" in line]
    assert "the build is behind the batches" in line
    assert as_json(status)["catalog_sweep"]["giving_way_since"] is not None
    # Once it is built, the tick marks what is due (the 150 s since are worth 5), and
    # no longer gives way.
    stores.build.drain(quiet_seconds=0)
    assert stores.sweeps.tick(HOURS, behind_seconds=5.0) == Swept(5, ended=False)
    assert pending(stores) == keys[:5]
    status = StatusStore(stores.catalog.pool).snapshot()
    assert status.sweep is not None
    assert status.sweep.giving_way_since is None
    assert not [line for line in as_text(status) if "giving way" in line]
    assert as_json(status)["catalog_sweep"]["giving_way_since"] is None


def test_status_says_how_far_through_which_cycle_the_sweep_is(stores: Stores) -> None:
    pool = stores.catalog.pool

    def said() -> list[str]:
        return [line for line in as_text(StatusStore(pool).snapshot()) if "catalog sweep" in line]

    assert said() == [
        "catalog sweep: not begun (catalog_sweep_hours 0, or no coordinator ran since)"
    ]
    stores.sweeps.tick(HOURS)
    (first,) = said()
    assert re.fullmatch(
        r"catalog sweep: 0% through its first cycle \(begun \d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
        r" UTC\): every stored release is built again once a cycle",
        first,
    )
    with pool.connection() as conn:
        conn.execute("UPDATE catalog_sweep SET cycles = 2, after = %s", (b"\x40" + bytes(15),))
    (third,) = said()
    assert "catalog sweep: 25% through cycle 3 (begun " in third
    assert " UTC; 2 cycles ended): " in third


def test_a_tick_that_marks_the_last_key_ends_the_cycle(stores: Stores) -> None:
    # helper-104: it did not, and the next tick spent its worth marking nothing.
    keys = releases(stores, 12)
    stores.sweeps.tick(HOURS)
    for at in range(3):
        back(stores, 120)
        assert stores.sweeps.tick(HOURS) == Swept(4, ended=at == 2)
    back(stores, 60)
    assert stores.sweeps.tick(HOURS) == Swept(2, ended=False)
    assert pending(stores)[:2] == keys[:2]


def test_every_key_once_a_cycle_in_key_order_whatever_the_pauses(stores: Stores) -> None:
    # Random pauses between ticks (some beyond MAX_CATCH_UP_SECONDS), the pending
    # marks cleared after each: cycle after cycle, the keys in key order, each once.
    keys = releases(stores, 12)
    rng = random.Random(1)
    stores.sweeps.tick(HOURS)
    cycles: list[list[bytes]] = [[]]
    for _ in range(300):
        back(stores, rng.choice([5, 29, 30, 31, 90, 200, 700]))
        swept = stores.sweeps.tick(HOURS)
        got = pending(stores)
        assert len(got) == swept.keys
        with stores.catalog.pool.connection() as conn:
            conn.execute("DELETE FROM catalog_pending")
        cycles[-1] += got
        if swept.ended:
            cycles.append([])
    assert len(cycles) > 5
    for cycle in cycles[:-1]:
        assert cycle == keys
    assert cycles[-1] == keys[: len(cycles[-1])]
    assert stores.sweeps.state().cycles == len(cycles) - 1


def test_a_catalog_of_a_dozen_releases_is_swept_too(stores: Stores) -> None:
    # 12 keys over 3 hours (a key every 900 s: more than MAX_CATCH_UP_SECONDS), ticks
    # every 30 s for a cycle and a bit: each key marked once.
    keys = releases(stores, 12)
    stores.sweeps.tick(3.0)
    marked: list[bytes] = []
    for _ in range(int(3 * 3600 / 30) + 60):
        back(stores, 30)
        stores.sweeps.tick(3.0, tick_seconds=30.0)
        marked += pending(stores)
        with stores.catalog.pool.connection() as conn:
            conn.execute("DELETE FROM catalog_pending")
    assert marked[:12] == keys


def test_the_sweep_keeps_its_pace_in_a_database_of_another_time_zone(
    pg_url: str, pool: ConnectionPool, settings: Settings
) -> None:
    # An external PostgreSQL keeps the TimeZone its initdb found (helper-104): the
    # pool's sessions read timestamps in UTC all the same, and the pace takes them
    # in UTC too.
    with pool.connection() as conn:
        (name,) = conn.execute("SELECT current_database()").fetchone() or ("",)
        conn.execute(f"ALTER DATABASE {name} SET timezone = 'Europe/Berlin'")
    with open_pool(pg_url, settings) as berlin:
        sweeps = SweepStore(berlin)
        sweeps.tick(24.0)
        state = sweeps.state()
    assert state.swept_at is not None
    assert str(state.now.tzinfo) == "UTC"


def test_coordinators_ticking_at_once_mark_the_due_keys_once(stores: Stores) -> None:
    keys = releases(stores, 12)
    stores.sweeps.tick(HOURS)
    back(stores, 120)
    gate = threading.Barrier(4)
    swept: list[Swept] = []

    def tick() -> None:
        gate.wait()
        swept.append(stores.sweeps.tick(HOURS))

    threads = [threading.Thread(target=tick) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # One of them marked the 4 keys due; the others found nothing due.
    assert sorted(s.keys for s in swept) == [0, 0, 0, 4]
    assert pending(stores) == keys[:4]


def sweep_a_cycle(stores: Stores) -> None:
    """A whole cycle marked at one tick (a cycle's worth of time passed), then built."""
    stores.sweeps.tick(1.0)
    back(stores, MAX_CATCH_UP_SECONDS)
    assert stores.sweeps.tick(MAX_CATCH_UP_SECONDS / 3600 / 2).ended
    stores.build.drain(quiet_seconds=0)


def sweep_key_by_key(stores: Stores) -> None:
    """A cycle at the pace of a catalog of millions (helper-104): one poster's keys come
    a tick apart, a key a tick here, each built before the next is marked."""
    with stores.catalog.pool.connection() as conn:
        conn.execute("ANALYZE releases")
        (total,) = conn.execute("SELECT count(*) FROM releases").fetchone() or (0,)
    hours = total * 100.0 / 3600  # 100 s a key
    stores.sweeps.tick(hours)
    for _ in range(total):
        back(stores, 100.001)
        assert stores.sweeps.tick(hours).keys == 1
        stores.build.drain(quiet_seconds=0)
    assert stores.sweeps.state().cycles == 1


SWEEPS = {"at once": sweep_a_cycle, "key by key": sweep_key_by_key}


def spread(
    head: str, poster: str, files: list[tuple[int, str]], *, at: int, step: int, tag: str
) -> list[str]:
    """Files of M 10 posted `step` seconds apart (each two segments, as `posted`)."""
    return [
        line
        for n, (i, name) in enumerate(files)
        for line in posted(head, poster, [(i, name)], 10, at=at + n * step, tag=f"{tag}{i}")
    ]


def a_repost_a_day_later() -> tuple[list[list[str]], list[int]]:
    # helper-102's case: under NewsUP's From, key O: files 1 and 7 at t, then files 2
    # and 7 at t+20m: 7 again starts a second generation G2 = {2, 7}. F (1, 2, 9) at
    # t+40m stays apart (index 2 is G2's). A day later O's file 2 is posted again:
    # t+20m's 2 is now a file posted again later, so it stays in the first generation,
    # G2 = {7} alone, and F joins it. (With no file 1 at t, the 2 minutes after a
    # generation of 7 alone, a 7 next, is a repost's first file: merge.RESTART_SECONDS.) The repost's build looks around O's fresh run only
    # (a tool's From), not around t: no window or row finds F.
    poster = "NewsUP <NewsUP@somewhere.cbr>"
    t = START + 3 * DAY
    head = "Other.Beta.2019.1080p-GRP"
    o1 = posted(
        head, poster, [(1, "other.part01.rar"), (7, "other.part07.rar")], 10, at=t, tag="o1"
    )
    o2 = posted(
        head, poster, [(2, "other.part02.rar"), (7, "other.part07.rar")], 10, at=t + 1200, tag="o2"
    )
    f = posted(
        "Fifth.Eps.2020.2160p-GRP",
        poster,
        [(1, "fifth.part01.rar"), (2, "fifth.part02.rar"), (9, "fifth.part09.rar")],
        10,
        at=t + 2400,
        tag="f",
    )
    again = posted(head, poster, [(2, "other.part02.rar")], 10, at=t + DAY, tag="o3")
    return [o1, o2, f, again], [1, 3, 4]


def a_fill_beyond_every_window() -> tuple[list[list[str]], list[int]]:
    # helper-100's case (test_catalog_windows, its strict xfail): the random names
    # join B once A is filled in, but lie beyond every window the fill's build looks
    # in. A cycle of the sweep builds the random names' key again, looking around its
    # whole span: B is found there. B with the random names (5 files), A with its
    # fill (3).
    return a_fill_beyond_the_windows(earlier=False), [3, 5]


def a_part_moving_between_generations() -> tuple[list[list[str]], list[int]]:
    # helper-102's case: key K under a poster's own From: G1 files 1 at t and 2 at
    # t+50m; file 1 again at t+40m: G2 (1). S (3 5) at t+55m joins G1's upload, Q (5)
    # at t+72m fits none. Then X (3) at t+10m joins G1, so S goes on G2, and Q now
    # fits G1's upload: but X's build finds no row that lost a part, and Q lies 32
    # minutes past X's window.
    t = START + 3 * DAY
    head = "Show.Alpha.S01E01.720p.WEB-GRP"
    g1 = spread(
        head, POSTER, [(1, "alpha.part01.rar"), (2, "alpha.part02.rar")], at=t, step=3000, tag="g"
    )
    g2 = posted(head, POSTER, [(1, "alpha.part01.rar")], 10, at=t + 2400, tag="g2")
    s_ = posted(
        "Other.Beta.2019.1080p-GRP",
        POSTER,
        [(3, "beta.part03.rar"), (5, "beta.part05.rar")],
        10,
        at=t + 3300,
        tag="s",
    )
    q = posted(
        "Third.Gamma.2018.720p-GRP", POSTER, [(5, "gamma.part05.rar")], 10, at=t + 4320, tag="q"
    )
    x = posted(
        "Fourth.Delta.S02E03.1080p-GRP", POSTER, [(3, "delta.part03.rar")], 10, at=t + 600, tag="x"
    )
    return [g1, g2, s_, q, x], [3, 4]


@pytest.mark.parametrize("sweep", SWEEPS)
@pytest.mark.parametrize(
    "case", [a_fill_beyond_every_window, a_repost_a_day_later, a_part_moving_between_generations]
)
def test_a_cycle_of_the_sweep_mends_what_builds_of_batches_leave_split(
    stores: Stores, case: Any, sweep: str
) -> None:
    parts, files = case()
    lines = [f"{n}\t{line}".encode() for n, line in enumerate(chain(*parts), 1000)]
    for _ in batches_of_lines(stores, "alt.binaries.test", lines, [len(p) for p in parts]):
        stores.build.drain(quiet_seconds=0)
    followed = catalog_rows(stores)
    SWEEPS[sweep](stores)
    swept = catalog_rows(stores)
    stores.build.everything(quiet_seconds=0)
    whole = catalog_rows(stores)
    assert followed != whole  # the hole the sweep is for
    assert swept == whole
    assert sorted(int(str(row[3])) for row in whole.values()) == files


def test_a_cycle_of_the_sweep_gives_rows_written_before_0044_their_anchors(
    stores: Stores,
) -> None:
    releases(stores, 6)
    with stores.catalog.pool.connection() as conn:
        anchors: dict[object, object] = dict(
            conn.execute("SELECT guid, anchor FROM catalog").fetchall()
        )
        conn.execute("UPDATE catalog SET anchor = NULL")
    assert len(anchors) == 6
    assert None not in anchors.values()
    sweep_a_cycle(stores)
    with stores.catalog.pool.connection() as conn:
        assert dict(conn.execute("SELECT guid, anchor FROM catalog").fetchall()) == anchors


@pytest.mark.trio
async def test_the_sweeper_marks_what_is_due_and_pokes_the_builder(
    stores: Stores, autojump_clock: trio.testing.MockClock
) -> None:
    keys = await trio.to_thread.run_sync(releases, stores, 12)
    await trio.to_thread.run_sync(stores.sweeps.tick, HOURS)
    await trio.to_thread.run_sync(back, stores, 120)
    due = CatalogDue()
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: sweep_catalog_forever(
                stores.sweeps, due, hours=HOURS, every_seconds=30.0, task_status=task_status
            )
        )
        await due.wait_since(0)
        nursery.cancel_scope.cancel()
    assert await trio.to_thread.run_sync(pending, stores) == keys[:4]


async def start_sweeper(
    nursery: trio.Nursery, sweeps: object, due: CatalogDue, behind_seconds: float = 0.0
) -> None:
    """`sweep_catalog_forever` on a fake of the sweep's store (a day's cycle, a tick
    every 30 s), started in `nursery`."""
    await nursery.start(
        lambda task_status: sweep_catalog_forever(
            sweeps,  # type: ignore[arg-type]
            due,
            hours=24.0,
            every_seconds=30.0,
            behind_seconds=behind_seconds,
            task_status=task_status,
        )
    )


@attrs.define(eq=False)
class FlakySweeps:
    """A fake of the sweep's store: the database unavailable at the first tick, then
    `swept` at each; when each tick came (the mock clock) is kept."""

    swept: Swept
    ticks: list[float] = attrs.field(factory=list)

    def tick(self, hours: float, behind_seconds: float, tick_seconds: float) -> Swept:
        self.ticks.append(trio.from_thread.run_sync(trio.current_time))
        if len(self.ticks) == 1:
            raise psycopg.OperationalError("connection refused")
        return self.swept


@pytest.mark.trio
async def test_a_tick_without_the_database_is_a_warning_and_the_next_tick_goes_on(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    sweeps = FlakySweeps(Swept(3, ended=False))
    due = CatalogDue()
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        await start_sweeper(nursery, sweeps, due)
        await due.wait_since(0)
        nursery.cancel_scope.cancel()
    assert [round(t - start, 3) for t in sweeps.ticks] == [0.0, 30.0]
    (warning,) = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "catalog sweep put off: database unavailable" in warning.getMessage()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert "catalog sweep: 3 release keys marked" in caplog.text


@attrs.define(eq=False)
class ScriptedSweeps:
    """A fake of the sweep's store: each tick answers the next of `answers` (the last
    one again once they run out); `answered` set at the tick after the last (the
    sweeper has acted on every answer then)."""

    answers: list[Swept]
    ticks: int = 0
    answered: trio.Event = attrs.field(factory=trio.Event)

    def tick(self, hours: float, behind_seconds: float, tick_seconds: float) -> Swept:
        answer = self.answers[min(self.ticks, len(self.answers) - 1)]
        self.ticks += 1
        if self.ticks == len(self.answers) + 1:
            trio.from_thread.run_sync(self.answered.set)
        return answer


@pytest.mark.trio
async def test_the_log_says_once_when_the_sweep_gives_way_and_once_when_it_goes_on(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    way, swept = Swept(0, ended=False, gave_way=True), Swept(2, ended=False)
    sweeps = ScriptedSweeps([way, way, way, swept, swept, way, swept])
    due = CatalogDue()
    async with trio.open_nursery() as nursery:
        await start_sweeper(nursery, sweeps, due, behind_seconds=5.0)
        await sweeps.answered.wait()
        nursery.cancel_scope.cancel()
    said = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith(("catalog sweep gives way", "catalog sweep goes on"))
    ]
    assert said == [
        "catalog sweep gives way: the build is behind the batches",
        "catalog sweep goes on: the build caught up with the batches",
        "catalog sweep gives way: the build is behind the batches",
        "catalog sweep goes on: the build caught up with the batches",
    ]
