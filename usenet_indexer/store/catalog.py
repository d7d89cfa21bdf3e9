"""Reading the catalog back: stored fragments merged into releases by the merge code.

The same `merge.ReleaseMerger` that `uidx index` uses puts the stored chunks
together, so a catalog export and an offline index of the same lines agree.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core.batch import ReleaseChunk
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.wire import fragments

_RELEASES = "SELECT key, head_name, poster, groups, files_announced FROM releases"
_FRAGMENTS = "SELECT release_key, packed FROM fragments ORDER BY range_id, batch_first"
_PROBED = "SELECT release_key FROM probe_candidates"
_SIZES = """
    SELECT coalesce(sum(pg_total_relation_size(c)), 0)::bigint,
           (SELECT coalesce(sum(segments), 0)::bigint FROM fragments)
    FROM (SELECT 'releases'::regclass AS c
          UNION ALL SELECT inhrelid::regclass FROM pg_inherits
          WHERE inhparent = 'fragments'::regclass) AS tables
"""


@attrs.define(eq=False)
class CatalogStore:
    pool: ConnectionPool

    def chunks(self) -> Iterator[ReleaseChunk]:
        """Every stored release chunk, rebuilt from its fragment."""
        with self.pool.connection() as conn:
            releases = {bytes(r[0]): r for r in conn.execute(_RELEASES).fetchall()}
            rows = conn.execute(_FRAGMENTS).fetchall()
        for release_key, packed in rows:
            key = bytes(release_key)
            _, head_name, poster, groups, announced = releases[key]
            files = tuple(fragments.unpack(bytes(packed)))
            yield ReleaseChunk(key, head_name, poster, tuple(groups), announced, files)

    def export(self) -> list[CatalogRelease]:
        """The catalog as merged releases, oldest first."""
        merger = ReleaseMerger()
        merger.add_all(self.chunks())
        with self.pool.connection() as conn:
            for (key,) in conn.execute(_PROBED).fetchall():
                merger.mark_probe(bytes(key))
        return list(merger.releases())

    def bytes_per_segment(self) -> tuple[int, int]:
        """(bytes of the catalog tables with their indexes and TOAST, segments stored)."""
        with self.pool.connection() as conn:
            row = conn.execute(_SIZES).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])
