"""A chunk found gone from the spool: the rest of its range asked of the store at once.

Theory of operation
-------------------
A chunk whose bytes are gone while its index row names it (a folder's file,
an S3 object) is found by whoever reads it: the folder stream's own read
(stream.py), or the store's HEAD after an edge's 404 (http/node.py). Its row
is forgotten and the prefetcher fetches it again. A chunk is seldom lost
alone, though: a spool lost whole (the folder deleted, the bucket emptied, a
database restored without its spool) leaves every row of a range naming
nothing. Found one at a time, as the stream reached each, every chunk waited
for the one before it to be fetched and streamed, and then for the
prefetcher's next look at the work list (`prefetch_poll_seconds`), before it
was even known to be gone: a range of 100 chunks took 100 such rounds.

So once one chunk is gone, the range's chunks after it (at most LOST_BATCH:
a whole range's at the default sizes, never the whole spool) are asked of
the store in one go (`SpoolStore.missing`: a stat each, or HEADs side by
side), and the rows of those gone are forgotten in one statement, under the
same rule as the first (`SpoolIndex.forget_lost_each`: only while a range
needs them). The prefetcher's next read of the work list lists them all. A
store that cannot tell, or a database error here, only leaves the rest to
be found as before, chunk by chunk: the chunk found first is forgotten
already.
"""

from __future__ import annotations

import logging

import psycopg

from usenet_indexer.errors import SpoolStoreError
from usenet_indexer.spool.store import SpoolStore
from usenet_indexer.store.spool import SpoolIndex

logger = logging.getLogger(__name__)

# The chunks after a lost one looked up at once: a range's, at the default sizes
# (range_articles 5,000,000 / prefetch_chunk_articles 50,000). On S3 that is 100
# HEADs, a few round trips side by side; a longer range's rest is looked up when
# the stream reaches the next lost chunk.
LOST_BATCH = 100


def forget_lost_after(
    index: SpoolIndex, spool: SpoolStore, group_id: int, after: int, last: int, where: str
) -> int:
    """The chunks of articles `after` + 1 .. `last` (a range's rest) asked of the store
    once the one ending at `after` was found gone, and the rows of those gone too
    forgotten (in a worker thread). Logged here, with `where` (the range).

    Returns:
        How many rows were forgotten (0 as well when the store or the database could
        not tell: the stream then finds each as it reaches it, as before).
    """
    try:
        following = index.chunks_from(group_id, after + 1, last, LOST_BATCH)
        keys = {chunk.path: chunk.first for chunk in following if chunk.path is not None}
        gone = spool.missing(list(keys))
        forgotten = index.forget_lost_each(group_id, [(keys[key], key) for key in gone])
    except (OSError, SpoolStoreError, psycopg.Error) as error:
        logger.warning(
            "%s: cannot tell whether the range's next chunks are gone from %s as well"
            " (each is found as the stream reaches it): %s",
            *(where, spool.describe(), error),
        )
        return 0
    if forgotten:
        logger.warning(
            "%s: %d more chunks of the range are gone too from %s (of the %d after article"
            " %d looked up): their index rows are forgotten, the prefetcher fetches them again",
            *(where, forgotten, spool.describe(), len(keys), after),
        )
    return forgotten
