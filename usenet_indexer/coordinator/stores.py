"""The stores the coordinator's APIs work with, opened on one connection pool."""

from __future__ import annotations

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.store.batches import BatchStore
from usenet_indexer.store.builds import BuildStore
from usenet_indexer.store.catalog import CatalogTable
from usenet_indexer.store.health import HealthStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.spool import SpoolIndex
from usenet_indexer.store.sweep import SweepStore
from usenet_indexer.store.users import UserStore


@attrs.frozen
class Stores:
    """One of each store the node API calls (all sync; call them from worker threads).

    Attributes:
        nodes: bearer tokens -> node ids.
        ranges: leases, heartbeats, finish and release.
        batches: the fenced store of a batch.
        spool: the spool's chunk index.
        catalog: the searchable catalog the newznab API serves.
        build: the catalog build (merges stored chunks into catalog rows; NZBs).
        builds: how far the catalog build is behind (pending keys, builds recorded).
        users: the newznab API's users.
        health: what processes report of themselves and what they see.
        sweeps: the catalog sweep (every stored release built again, a slice a tick).
    """

    nodes: NodeStore
    ranges: RangeStore
    batches: BatchStore
    spool: SpoolIndex
    catalog: CatalogTable
    users: UserStore
    build: CatalogBuild
    health: HealthStore
    builds: BuildStore
    sweeps: SweepStore

    @classmethod
    def from_pool(
        cls,
        pool: ConnectionPool,
        *,
        fenced: bool = True,
        pure: bool = False,
        edge_builds: bool = False,
    ) -> Stores:
        """Every store on one pool.

        Args:
            pool: an open pool (see `usenet_indexer.store.pool.open_pool`).
            fenced: False only for the chaos script's negative control (see
                `BatchStore.fenced`).
            pure: the catalog build unpacks fragments with the pure code even where
                the compiled one is built (settings.pure_indexer).
            edge_builds: edges are offered catalog builds (settings.edge_builds).

        Returns:
            The stores.
        """
        return cls(
            nodes=NodeStore(pool),
            ranges=RangeStore(pool),
            batches=BatchStore(pool, fenced=fenced),
            spool=SpoolIndex(pool),
            catalog=CatalogTable(pool),
            users=UserStore(pool),
            build=CatalogBuild(pool, pure=pure, edge_builds=edge_builds),
            health=HealthStore(pool),
            builds=BuildStore(pool),
            sweeps=SweepStore(pool),
        )
