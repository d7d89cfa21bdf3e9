"""Every stored release key in posting order, read a slice at a time: what a whole
catalog build or export walks (coordinator/catalog_whole.py, cut by core/slices.py).

The runs (core/slices.Run: a key's chunks posted within `apart` seconds of
each other) are made by one statement from `release_times` (one row per
stored dated chunk) and held by the server in a cursor (DECLARE ... WITH
HOLD, on a connection in autocommit): the client reads them a page at a
time and holds no more, and no transaction stays open while the build
works on other connections. A key with no time row (no chunk dated:
undated, or dated before 1970; `release_times` keeps dates above 0) is one
run from its earliest date (0 at most) to 0, so that an undated release
comes first, as it sorts. A key's chunks without a time row beside dated
ones make no run: a release of those only (dated 0 or before) is placed by
its keys' first runs (core/slices.placed). Keys stored before each chunk's
dates were kept (migration 0027: one time row, the release's span, however
many fragments) are placed by that span.

Releases stored before their latest date was kept (migration 0013) have it
filled in by a whole build first (`unfilled`, then CatalogTable.fill_latest).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import psycopg
from psycopg_pool import ConnectionPool

from usenet_indexer.core.slices import Run

# The runs, in order of start then key. A chunk starts a run of its key when it
# begins more than `apart` after the latest date of the key's chunks before it
# (ordered by their start); `first` marks each key's earliest run, so that the
# runs read count the releases done. A key without a time row (no dated chunk)
# is one run, by its release_times_key index.
_RUNS = """
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
_RUNS_CURSOR = "uidx_posting_order"
_RELEASES = "SELECT count(*) FROM releases"
_TIMEOUT = "SELECT current_setting('statement_timeout')"
_SET_TIMEOUT = "SELECT set_config('statement_timeout', %s, false)"
# Stored before `releases.latest` was kept (migration 0013; release_times' rows
# copied from those, 0027): page by page in key order, on the primary key.
_ANY_UNFILLED = """
    SELECT EXISTS (SELECT FROM releases WHERE latest IS NULL)
        OR EXISTS (SELECT FROM release_times WHERE latest IS NULL)
"""
_UNFILLED = """
    SELECT r.key FROM releases AS r
    WHERE r.key > %b
      AND (r.latest IS NULL
           OR EXISTS (SELECT FROM release_times AS t WHERE t.key = r.key AND t.latest IS NULL))
    ORDER BY r.key LIMIT %s
"""


@attrs.define(eq=False)
class Runs:
    """The runs of a whole build, held by the server, read a page at a time.

    Attributes:
        releases: the stored releases when the runs were made (the progress's total).
    """

    _cursor: psycopg.ServerCursor[Any]
    releases: int

    def __iter__(self) -> Iterator[Run]:
        while page := self._cursor.fetchmany(_PAGE):
            for key, start, end, segments, first in page:
                yield Run(bytes(key), int(start), int(end), int(segments), bool(first))


# Runs read at a time: a few hundred kB.
_PAGE = 5_000


@attrs.define(eq=False)
class PostingOrder:
    """The stored releases walked whole, in the order they were posted.

    Attributes:
        pool: the database's connection pool.
    """

    pool: ConnectionPool

    @contextmanager
    def runs(self, apart: int) -> Iterator[Runs]:
        """Every stored key's runs (chunks within `apart` seconds), in order of start then
        key, held on a connection of their own while this lasts."""
        with self.pool.connection() as conn:
            conn.autocommit = True
            # One statement over the whole catalog (a sort of its chunks): past the
            # sessions' timeout at scale, which is there for requests, not this.
            row = conn.execute(_TIMEOUT).fetchone()
            timeout = "0" if row is None else str(row[0])
            conn.execute(_SET_TIMEOUT, ("0",))
            cursor = conn.cursor(_RUNS_CURSOR, withhold=True)
            try:
                releases = conn.execute(_RELEASES).fetchone()
                cursor.execute(_RUNS, {"apart": apart})
                yield Runs(cursor, 0 if releases is None else int(releases[0]))
            finally:
                if not conn.closed:
                    cursor.close()
                    conn.execute(_SET_TIMEOUT, (timeout,))
                conn.autocommit = False

    def any_unfilled(self) -> bool:
        """Whether releases were stored before their latest date was kept."""
        with self.pool.connection() as conn:
            row = conn.execute(_ANY_UNFILLED).fetchone()
        return bool(row and row[0])

    def unfilled(self, after: bytes, most: int) -> list[bytes]:
        """Keys after `after` (in key order) whose latest date is not known, at most `most`."""
        with self.pool.connection() as conn:
            rows = conn.execute(_UNFILLED, (after, most)).fetchall()
        return [bytes(key) for (key,) in rows]
