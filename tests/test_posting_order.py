"""store/posting_order.py: the runs of a whole build or export, a page of posting time at
a time, and the keys whose latest date is not known, a page of keys at a time, each page
reading what it returns (the statements over the whole catalog they replace are the
oracles)."""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from test_range_scale import _rows_read

from usenet_indexer.core.slices import Run
from usenet_indexer.store import posting_order
from usenet_indexer.store.posting_order import PostingOrder

APART = 6 * 3600
# How the runs were made before they were paged: one statement over every chunk, held
# by the server in a cursor (53 s and 1.7 GB of temporary files at 3M releases).
RUNS_IN_ONE = """
    WITH chunks AS (
        SELECT key, posted, coalesce(latest, posted) AS latest FROM release_times WHERE posted > 0
    ),
    marked AS (
        SELECT key, posted, latest,
               max(latest) OVER (PARTITION BY key ORDER BY posted, latest
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
        FROM chunks
    ),
    numbered AS (
        SELECT key, posted, latest,
               count(*) FILTER (WHERE before IS NULL OR posted - %(apart)s > before)
                   OVER (PARTITION BY key ORDER BY posted, latest ROWS UNBOUNDED PRECEDING) AS run
        FROM marked
    ),
    runs AS (
        SELECT key, min(posted) AS start, max(latest) AS finish FROM numbered GROUP BY key, run
        UNION ALL
        SELECT r.key, least(r.posted, 0), 0 FROM releases AS r
        WHERE NOT EXISTS (SELECT FROM release_times AS t WHERE t.key = r.key AND t.posted > 0)
    )
    SELECT runs.key, runs.start, runs.finish, r.segments,
           row_number() OVER (PARTITION BY runs.key ORDER BY runs.start) = 1
    FROM runs JOIN releases AS r ON r.key = runs.key
    ORDER BY runs.start, runs.key
"""
# The keys whose latest date is not known, before they were found through an index.
UNFILLED_SCAN = """
    SELECT r.key FROM releases AS r
    WHERE r.key > %(after)b
      AND (r.latest IS NULL
           OR EXISTS (SELECT FROM release_times AS t WHERE t.key = r.key AND t.latest IS NULL))
    ORDER BY r.key LIMIT %(most)s
"""
_RELEASE = "INSERT INTO releases (key, name, poster, groups, posted, latest, segments)"
_TIME = "INSERT INTO release_times (key, poster, posted, latest)"


def _random_catalog(conn: psycopg.Connection[Any], rng: random.Random) -> None:
    """Keys of 0-6 chunks each, stored as batches store them: a time row of each chunk
    dated above 0 (a few with no latest date), the release dated by its earliest chunk
    above 0 (else 0 or before 1970), a few releases with no latest date."""
    base = 1_600_000_000
    releases, times = [], []
    for _ in range(rng.randint(0, 400)):
        key = rng.randbytes(16)
        dates = [
            rng.choice((0, -rng.randint(1, 9), base + rng.randint(0, 40) * 3600))
            for _ in range(rng.randint(0, 6))
        ]
        dated = [d for d in dates if d > 0]
        for d in dated:
            latest = None if rng.random() < 0.05 else d + rng.randint(0, 8) * 3600
            times.append((key, d, latest))
        posted = min(dated) if dated else min(dates, default=0)
        latest = None if rng.random() < 0.05 else max(dated, default=0)
        releases.append((key, posted, latest, rng.randint(1, 500)))
    with conn.cursor() as cursor:
        cursor.executemany(_RELEASE + " VALUES (%s, 'r', 'p', ARRAY['g'], %s, %s, %s)", releases)
        cursor.executemany(_TIME + " VALUES (%s, 'p', %s, %s)", times)


def _in_one(conn: psycopg.Connection[Any]) -> list[Run]:
    rows = conn.execute(RUNS_IN_ONE, {"apart": APART}).fetchall()
    return [Run(bytes(k), int(s), int(e), int(n), bool(f)) for k, s, e, n, f in rows]


@pytest.mark.parametrize("seed", range(6))
def test_the_runs_read_page_by_page_are_those_one_statement_made(
    pool: ConnectionPool, seed: int
) -> None:
    rng = random.Random(seed)
    with pool.connection() as conn:
        _random_catalog(conn, rng)
        conn.commit()
        expected = _in_one(conn)
        # Each side's first `most` keys: the oracle scans every key, the pages an index.
        after, most = rng.randbytes(rng.randint(0, 2)), rng.randint(1, 50)
        unfilled = [
            bytes(k) for (k,) in conn.execute(UNFILLED_SCAN, {"after": after, "most": most})
        ]
    order = PostingOrder(pool, page_chunks=rng.randint(1, 40))
    with order.runs(APART) as runs:
        assert list(runs) == expected
        assert runs.releases == len({run.key for run in expected})
    assert order.unfilled(after, most) == unfilled
    assert order.any_unfilled() == bool(order.unfilled(b"", 1))


def test_a_page_of_runs_reads_its_chunks_and_their_keys_only(
    pg_conn: psycopg.Connection[Any],
) -> None:
    """100k keys of 1-3 runs of 1-3 chunks each over a year, one in a hundred undated, one
    in a thousand not dated to the last: a page of runs reads its chunks and those of their
    keys, a page of undated keys or of keys not dated to the last reads those keys, at the
    catalog's start, middle and end; one statement made every run from every chunk."""
    keys, page = 100_000, 2_000
    conn = pg_conn
    conn.execute(
        _RELEASE + " SELECT decode(md5(i::text), 'hex'), 'r', 'p', ARRAY['g'],"
        "  CASE WHEN i %% 100 = 0 THEN -(i %% 7) ELSE 1600000000 + i * 300 END,"
        "  CASE WHEN i %% 1000 <> 1 THEN 1600000000 + i * 300 END, 1"
        " FROM generate_series(1, %s) AS i",
        (keys,),
    )
    conn.execute(
        _TIME + " SELECT decode(md5(i::text), 'hex'), 'p', 1600000000 + i * 300 + r * 86400"
        "  + c * 600, 1600000000 + i * 300 + r * 86400 + c * 600 + 300"
        " FROM generate_series(1, %s) AS i, generate_series(0, i %% 3) AS r,"
        "  generate_series(0, (i / 3) %% 3) AS c WHERE i %% 100 <> 0",
        (keys,),
    )
    conn.execute("VACUUM ANALYZE releases, release_times")
    (chunks,) = conn.execute("SELECT count(*) FROM release_times").fetchone() or (0,)
    for at in (1, keys // 2, keys - 10):
        low = 1_600_000_000 + at * 300
        (high,) = conn.execute(
            posting_order._PAGE_END, {"low": low, "chunks": page}
        ).fetchone() or (0,)
        runs = {"low": low, "high": high, "apart": APART}
        # The page's chunks (the end, then its keys), and every chunk of those keys
        # (9 at most, which span some 3 days beyond the page).
        assert (
            _rows_read(conn, posting_order._PAGE_END, {"low": low, "chunks": page}, "release_times")
            <= page + 1
        )
        assert _rows_read(conn, posting_order._PAGE_RUNS, runs, "release_times") <= 12 * page
        assert _rows_read(conn, posting_order._PAGE_RUNS, runs, "releases") <= 4 * page
        after = bytes.fromhex(f"{at * 0xFFFF // keys:04x}") + bytes(14)
        unfilled = {"after": after, "most": 100}
        assert _rows_read(conn, posting_order._UNFILLED, unfilled, "releases") <= 300
        assert _rows_read(conn, posting_order._UNFILLED, unfilled, "release_times") <= 300
    undated = {"posted": -(2**63), "key": b"", "rows": 500}
    assert _rows_read(conn, posting_order._UNDATED, undated, "releases") <= 500
    assert _rows_read(conn, posting_order._UNDATED, undated, "release_times") == 0
    assert _rows_read(conn, RUNS_IN_ONE, {"apart": APART}, "release_times") >= 2 * chunks
