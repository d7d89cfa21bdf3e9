"""Every stored release key in posting order, read a slice at a time: what a whole
catalog build or export walks (coordinator/catalog_whole.py, cut by core/slices.py).

The runs (core/slices.Run: a key's chunks posted within `apart` seconds of
each other) are made from `release_times` (one row per stored dated chunk)
a page of posting time at a time, each page a statement of its own bounded
by PAGE_CHUNKS chunks: one statement over every chunk, held in a cursor,
took 53 s and 1.7 GB of temporary files at 3M releases (12M chunks) before
the build could start, and grows with the catalog. A page is the runs that
start in an interval of posting time: its keys are those of the chunks
posted in it (release_times_posted), and each key's runs are made from all
its chunks (release_times_key), so that a run is cut and ends as it would
over the whole catalog. Each page is read as it is reached, in its own
snapshot: a batch stored meanwhile may add runs to the pages not read yet.

A key with no time row (no chunk dated: undated, or dated before 1970;
`release_times` keeps dates above 0) is one run from its earliest date (0 at
most) to 0, so that an undated release comes first, as it sorts; those are
paged first, in order of date and key (releases_undated: a release dated
above 0 has the time row of that chunk). A key's chunks without a time row
beside dated ones make no run: a release of those only (dated 0 or before)
is placed by its keys' first runs (core/slices.placed). Keys stored before
each chunk's dates were kept (migration 0027: one time row, the release's
span, however many fragments) are placed by that span.

Releases stored before their latest date was kept (migration 0013) have it
filled in by a whole build first (`unfilled`, then CatalogTable.fill_latest),
found a page of keys at a time through the partial indexes of migration 0036.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core.slices import Run

# The runs that start in [low, high), in order of start then key. A chunk starts a
# run of its key when it begins more than `apart` after the latest date of the
# key's chunks before it (ordered by their start); `first` marks each key's earliest
# run, so that the runs read count the releases done. Every chunk of the page's keys
# is read: a run starting in the page is cut by the chunks before it and ends with
# those after. Each key looked up on its own (LATERAL, OFFSET 0: not made a join, which the
# planner ran as a hash join over every chunk).
_PAGE_RUNS = """
    WITH keys AS (
        SELECT DISTINCT key FROM release_times WHERE posted >= %(low)s AND posted < %(high)s
    ),
    chunks AS (
        SELECT keys.key, t.posted, coalesce(t.latest, t.posted) AS latest
        FROM keys CROSS JOIN LATERAL (
            SELECT posted, latest FROM release_times WHERE key = keys.key AND posted > 0 OFFSET 0
        ) AS t
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
        SELECT key, run, min(posted) AS start, max(latest) AS finish FROM numbered GROUP BY key, run
    )
    SELECT runs.key, runs.start, runs.finish, r.segments, runs.run = 1
    FROM runs CROSS JOIN LATERAL (SELECT segments FROM releases WHERE key = runs.key OFFSET 0) AS r
    WHERE runs.start >= %(low)s AND runs.start < %(high)s
    ORDER BY runs.start, runs.key
"""
# Where the page starting at `low` ends: the date of the chunk PAGE_CHUNKS on (None:
# fewer are left), on release_times_posted.
_PAGE_END = """
    SELECT posted FROM release_times WHERE posted >= %(low)s ORDER BY posted
    OFFSET %(chunks)s LIMIT 1
"""
# The keys with no dated chunk after (posted, key), in that order: a release dated
# above 0 has a dated chunk (store/batches.py keeps the earliest date above 0), so
# they are among those of releases_undated.
_UNDATED = """
    SELECT r.key, r.posted, 0, r.segments, true FROM releases AS r
    WHERE r.posted <= 0 AND (r.posted, r.key) > (%(posted)s, %(key)s)
      AND NOT EXISTS (SELECT FROM release_times AS t WHERE t.key = r.key AND t.posted > 0)
    ORDER BY r.posted, r.key LIMIT %(rows)s
"""
_RELEASES = "SELECT count(*) FROM releases"
# Stored before `releases.latest` was kept (migration 0013; release_times' rows
# copied from those, 0027): page by page in key order, each side on its partial
# index (migration 0036), the first `most` keys of each after `after`.
_ANY_UNFILLED = """
    SELECT EXISTS (SELECT FROM releases WHERE latest IS NULL)
        OR EXISTS (SELECT FROM release_times WHERE latest IS NULL)
"""
_UNFILLED = """
    SELECT key FROM (
        (SELECT key FROM releases WHERE latest IS NULL AND key > %(after)b
         ORDER BY key LIMIT %(most)s)
        UNION
        (SELECT DISTINCT t.key FROM release_times AS t
         WHERE t.latest IS NULL AND t.key > %(after)b
           AND EXISTS (SELECT FROM releases AS r WHERE r.key = t.key)
         ORDER BY t.key LIMIT %(most)s)
    ) AS unfilled
    ORDER BY key LIMIT %(most)s
"""
# Chunks (release_times rows) posted in one page of runs, at most (and those of one
# second beyond): each of their keys' chunks are read too, some 5 MB of runs.
PAGE_CHUNKS = 50_000
# Undated keys read at a time.
_UNDATED_PAGE = 5_000
# Above every date (bigint): the last page's end.
_NEVER = 2**63 - 1
_BEFORE_ALL = -(2**63)


@attrs.define(eq=False)
class Runs:
    """The runs of a whole build, read a page of posting time at a time.

    Attributes:
        releases: the stored releases when the runs were begun (the progress's total).
    """

    _pool: ConnectionPool
    _apart: int
    _chunks: int
    releases: int

    def __iter__(self) -> Iterator[Run]:
        yield from self._undated()
        low: int | None = 1  # release_times keeps dates above 0
        while low is not None:
            high = self._end(low)
            yield from self._page(low, _NEVER if high is None else high)
            low = high

    def _undated(self) -> Iterator[Run]:
        posted, key = _BEFORE_ALL, b""
        while True:
            params = {"posted": posted, "key": key, "rows": _UNDATED_PAGE}
            with self._pool.connection() as conn:
                rows = conn.execute(_UNDATED, params).fetchall()
            yield from _runs(rows)
            if len(rows) < _UNDATED_PAGE:
                return
            posted, key = int(rows[-1][1]), bytes(rows[-1][0])

    def _end(self, low: int) -> int | None:
        """Where the page starting at `low` ends (None: with the last chunk); a page
        holds a second at least."""
        with self._pool.connection() as conn:
            row = conn.execute(_PAGE_END, {"low": low, "chunks": self._chunks}).fetchone()
        return None if row is None else max(int(row[0]), low + 1)

    def _page(self, low: int, high: int) -> list[Run]:
        params = {"low": low, "high": high, "apart": self._apart}
        with self._pool.connection() as conn:
            return _runs(conn.execute(_PAGE_RUNS, params).fetchall())


def _runs(rows: list[tuple[Any, ...]]) -> list[Run]:
    return [
        Run(bytes(key), int(start), int(end), int(segments), bool(first))
        for key, start, end, segments, first in rows
    ]


@attrs.define(eq=False)
class PostingOrder:
    """The stored releases walked whole, in the order they were posted.

    Attributes:
        pool: the database's connection pool.
        page_chunks: chunks posted in one page of runs, at most (beside one second's).
    """

    pool: ConnectionPool
    page_chunks: int = PAGE_CHUNKS

    @contextmanager
    def runs(self, apart: int) -> Iterator[Runs]:
        """Every stored key's runs (chunks within `apart` seconds), in order of start then
        key, read a page at a time as they are taken."""
        with self.pool.connection() as conn:
            row = conn.execute(_RELEASES).fetchone()
        yield Runs(self.pool, apart, self.page_chunks, 0 if row is None else int(row[0]))

    def any_unfilled(self) -> bool:
        """Whether releases were stored before their latest date was kept."""
        with self.pool.connection() as conn:
            row = conn.execute(_ANY_UNFILLED).fetchone()
        return bool(row and row[0])

    def unfilled(self, after: bytes, most: int) -> list[bytes]:
        """Keys after `after` (in key order) whose latest date is not known, at most `most`."""
        with self.pool.connection() as conn:
            rows = conn.execute(_UNFILLED, {"after": after, "most": most}).fetchall()
        return [bytes(key) for (key,) in rows]
