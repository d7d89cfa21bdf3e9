"""The stores the node API works with, opened on one connection pool."""

from __future__ import annotations

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.spool import SpoolIndex


@attrs.frozen
class Stores:
    """One of each store the node API calls (all sync; call them from worker threads).

    Attributes:
        nodes: bearer tokens -> node ids.
        ranges: leases, heartbeats, finish and release.
        batches: the fenced store of a batch.
        spool: the spool's chunk index.
    """

    nodes: NodeStore
    ranges: RangeStore
    batches: BatchStore
    spool: SpoolIndex

    @classmethod
    def from_pool(cls, pool: ConnectionPool, *, fenced: bool = True) -> Stores:
        """Every store on one pool.

        Args:
            pool: an open pool (see `usenet_indexer.store.pool.open_pool`).
            fenced: False only for the chaos script's negative control (see
                `BatchStore.fenced`).

        Returns:
            The stores.
        """
        return cls(
            nodes=NodeStore(pool),
            ranges=RangeStore(pool),
            batches=BatchStore(pool, fenced=fenced),
            spool=SpoolIndex(pool),
        )
