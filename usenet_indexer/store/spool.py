"""The spool's chunk index: which compressed chunk files hold which articles of a group.

The prefetcher writes a chunk file whole (temporary name, fsync, rename) and
only then its row here, so a row always names a complete file; a row without
a path is a gap (articles the server does not have), recorded, never skipped.
"""

from __future__ import annotations

import attrs
from psycopg_pool import ConnectionPool

_FROM = """
    SELECT first_article, last_article, codec, path, lines FROM spool_chunks
    WHERE group_id = %(group)s AND last_article >= %(article)s AND first_article <= %(last)s
    ORDER BY first_article
    LIMIT %(limit)s
"""
_ADD = """
    INSERT INTO spool_chunks (group_id, first_article, last_article, codec, path, lines, bytes)
    VALUES (%s, %s, %s, %s, %s, %s, %s)
"""
_SIZE = "SELECT count(*), coalesce(sum(bytes), 0)::bigint, coalesce(sum(lines), 0)::bigint FROM spool_chunks"


@attrs.frozen
class SpoolChunk:
    """A chunk of a group's articles [first, last]; path None for a gap."""

    first: int
    last: int
    codec: int
    path: str | None
    lines: int


@attrs.define(eq=False)
class SpoolIndex:
    pool: ConnectionPool

    def chunks_from(self, group_id: int, article: int, last: int, limit: int) -> list[SpoolChunk]:
        """The chunks covering [article, last], in article order, at most `limit`."""
        args = {"group": group_id, "article": article, "last": last, "limit": limit}
        with self.pool.connection() as conn:
            return [SpoolChunk(*row) for row in conn.execute(_FROM, args).fetchall()]

    def add(self, group_id: int, chunk: SpoolChunk, size: int) -> None:
        """Index a chunk whose file is complete (or a gap)."""
        with self.pool.connection() as conn:
            conn.execute(
                _ADD,
                (group_id, chunk.first, chunk.last, chunk.codec, chunk.path, chunk.lines, size),
            )

    def size(self) -> tuple[int, int, int]:
        """(chunks, bytes, lines) in the spool."""
        with self.pool.connection() as conn:
            row = conn.execute(_SIZE).fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])
