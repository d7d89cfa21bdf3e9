"""What `uidx status` shows, read from the stores: one `Status` value.

The groups, ranges (and the parked ones, with why), nodes, servers, spool
and the catalog's lag and builds come from their own stores (their SQL
stays there); this module holds the queries of its own, the throughput of
the batches stored lately, overall and per node.

Throughput is measured over the time the work took, not over the lookback:
among the batches stored in the last `LOOKBACK_SECONDS`, from the first one's
store to the last one's. The first batch's headers were indexed before that
span began, so the rates count only the batches stored after it (n batches
stored at equal steps T apart give their true rate, L/T, for any n >= 2).
A node's headers per second (the status page's) are the same measure over
that node's batches alone, so one node's run shows one figure.
"""

from __future__ import annotations

from datetime import datetime

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core.health import Health, judged
from usenet_indexer.core.sweep import SweepState
from usenet_indexer.store.builds import BuildStore, CatalogLag
from usenet_indexer.store.catalog import CatalogTable, ReleaseStates
from usenet_indexer.store.groups import GroupRow, GroupStore
from usenet_indexer.store.health import HealthStore
from usenet_indexer.store.nodes import NodeRow, NodeStore
from usenet_indexer.store.probes import ProbeCount, ProbeStore
from usenet_indexer.store.ranges import ParkedRange, RangeStateRow, RangeStore
from usenet_indexer.store.servers import ServerReport, ServerStore
from usenet_indexer.store.spool import SpoolIndex
from usenet_indexer.store.sweep import SweepStore

# How far back the throughput looks: long enough to hold several batches of a
# busy edge (one a few seconds), short enough to say what is happening now.
LOOKBACK_SECONDS = 300

# The batches are ordered by when they were stored (ties by their keys) so that
# exactly one of them is the first, whose headers the rates leave out.
_THROUGHPUT = """
    WITH recent AS (
        SELECT lines, release_chunks, stored_at,
               row_number() OVER (ORDER BY stored_at, range_id, batch_first) AS n
        FROM batches WHERE stored_at > now() - make_interval(secs => %(lookback)s)
    )
    SELECT count(*), coalesce(sum(lines), 0), coalesce(sum(release_chunks), 0),
           coalesce(sum(lines) FILTER (WHERE n > 1), 0),
           coalesce(sum(release_chunks) FILTER (WHERE n > 1), 0),
           min(stored_at), max(stored_at), now()
    FROM recent
"""


@attrs.frozen
class Throughput:
    """The batches stored in the lookback, and their rates over the time they took."""

    lookback_seconds: float
    batches: int
    headers: int
    release_chunks: int
    headers_after_first: int  # the headers of every batch but the first
    release_chunks_after_first: int
    first_stored_at: datetime | None  # None when no batch was stored in the lookback
    last_stored_at: datetime | None
    now: datetime  # the database's clock when asked

    @property
    def window_seconds(self) -> float | None:
        """From the first batch's store to the last one's; None with fewer than two."""
        if self.batches < 2 or self.first_stored_at is None or self.last_stored_at is None:
            return None
        return (self.last_stored_at - self.first_stored_at).total_seconds()

    @property
    def headers_per_second(self) -> float | None:
        """Headers stored per second over the window; None without a window of time."""
        return self._rate(self.headers_after_first)

    @property
    def release_chunks_per_second(self) -> float | None:
        """Release chunks stored per second over the window; None without one."""
        return self._rate(self.release_chunks_after_first)

    @property
    def idle_seconds(self) -> float | None:
        """Since the last batch was stored; None when none was in the lookback."""
        if self.last_stored_at is None:
            return None
        return max(0.0, (self.now - self.last_stored_at).total_seconds())

    def _rate(self, count: int) -> float | None:
        window = self.window_seconds
        # Batches stored in one instant (parallel edges) give no span to divide by.
        return None if not window else count / window


@attrs.frozen
class SpoolSize:
    """The spool's chunks (gaps count as chunks of no lines and no bytes)."""

    chunks: int
    bytes: int
    lines: int


@attrs.frozen
class Status:
    """Everything `uidx status` shows, as read in one call."""

    groups: tuple[GroupRow, ...]
    ranges: tuple[RangeStateRow, ...]
    nodes: tuple[NodeRow, ...]
    throughput: Throughput
    servers: tuple[ServerReport, ...]
    spool: SpoolSize
    catalog: CatalogLag  # the keys waiting for the catalog build, the builds lately
    releases: ReleaseStates  # the catalog's releases: whole, repairable, broken, waiting
    probes: tuple[ProbeCount, ...] = ()
    parked: tuple[ParkedRange, ...] = ()  # ranges parked as failed, with why
    health: tuple[Health, ...] = ()  # core/health.judged: unhealthy first
    sweep: SweepState | None = None  # where the catalog sweep is (core/sweep.py)

    @property
    def taken_at(self) -> datetime:
        """The database's clock when the throughput was read."""
        return self.throughput.now


# Each node's rate as the throughput's: its batches after its first, over the
# time from its first batch's store to its last one's.
_NODE_WORK = """
    WITH recent AS (
        SELECT node_id, lines, stored_at,
               row_number() OVER (PARTITION BY node_id
                                  ORDER BY stored_at, range_id, batch_first) AS n
        FROM batches WHERE stored_at > now() - make_interval(secs => %(lookback)s)
    ), rated AS (
        SELECT node_id, coalesce(sum(lines) FILTER (WHERE n > 1), 0) AS lines,
               extract(epoch FROM max(stored_at) - min(stored_at))::float8 AS window
        FROM recent GROUP BY node_id
    )
    SELECT n.name,
           (SELECT string_agg(g.name || ' ' || r.first_article || '-' || r.last_article
                              || ' at ' || r.resume
                              || CASE WHEN r.deadline < now() THEN ' (lease expired)'
                                      ELSE '' END, ', ' ORDER BY r.id)
              FROM ranges r JOIN groups g ON g.id = r.group_id
             WHERE r.holder = n.id AND r.state = 'leased'),
           rated.lines, rated.window
    FROM nodes n LEFT JOIN rated ON rated.node_id = n.id
    WHERE n.revoked_at IS NULL ORDER BY n.name
"""


@attrs.frozen
class NodeWork:
    """What a node is doing: its leased ranges ("group first-last at resume", "(lease
    expired)" after one whose deadline has passed: its node stopped), and its
    headers per second as `Throughput.headers_per_second` measures them, over its own
    batches in the lookback (None with fewer than two, or all stored at one instant)."""

    name: str
    current: str | None
    headers_per_second: float | None


@attrs.define(eq=False)
class StatusStore:
    pool: ConnectionPool

    def ping(self) -> None:
        """Ask the database the simplest question (/healthz); raises when it does not answer."""
        with self.pool.connection() as conn:
            conn.execute("SELECT 1")

    def throughput(self, lookback_seconds: float = LOOKBACK_SECONDS) -> Throughput:
        """The batches stored in the last `lookback_seconds` (database clock)."""
        with self.pool.connection() as conn:
            row = conn.execute(_THROUGHPUT, {"lookback": float(lookback_seconds)}).fetchone()
        assert row is not None  # an aggregate without GROUP BY gives one row
        batches, headers, chunks, headers_after, chunks_after, first, last, now = row
        return Throughput(
            lookback_seconds=lookback_seconds,
            batches=int(batches),
            headers=int(headers),
            release_chunks=int(chunks),
            headers_after_first=int(headers_after),
            release_chunks_after_first=int(chunks_after),
            first_stored_at=first,
            last_stored_at=last,
            now=now,
        )

    def node_work(self, lookback_seconds: float = LOOKBACK_SECONDS) -> list[NodeWork]:
        """Each live node's leased ranges and headers per second (the status page's)."""
        with self.pool.connection() as conn:
            rows = conn.execute(_NODE_WORK, {"lookback": float(lookback_seconds)}).fetchall()
        return [
            NodeWork(str(name), current, None if not window else int(lines) / window)
            for name, current, lines, window in rows
        ]

    def snapshot(self) -> Status:
        """Read every part of the status (each store in its own short transaction)."""
        return Status(
            groups=tuple(GroupStore(self.pool).list()),
            ranges=tuple(RangeStore(self.pool).states()),
            nodes=tuple(NodeStore(self.pool).list()),
            throughput=self.throughput(),
            servers=tuple(ServerStore(self.pool).list()),
            spool=SpoolSize(*SpoolIndex(self.pool).size()),
            catalog=BuildStore(self.pool).lag(LOOKBACK_SECONDS),
            probes=tuple(ProbeStore(self.pool).counts()),
            parked=tuple(RangeStore(self.pool).parked()),
            releases=CatalogTable(self.pool).states(),
            health=self.health(),
            sweep=SweepStore(self.pool).state(),
        )

    def health(self) -> tuple[Health, ...]:
        """The health rows as shown (core/health.judged, on the database's clock)."""
        rows, now = HealthStore(self.pool).list()
        return tuple(judged(rows, now)) if now is not None else ()
