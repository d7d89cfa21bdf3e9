"""Chunks stored but never indexed: which of them no stream will ever read. Pure.

Theory of operation
-------------------
A prefetcher stores a chunk, then writes its index row (prefetch/landing.py).
Killed between the two, or with the row refused by its database, it leaves
a chunk in the store that no row names. Most such chunks are taken up
again: the chunk is fetched again under the same key, and the store keeps
what is there (an S3 spool's conditional PUT answers 412, spool/s3.py). But
a chunk of the live head is cut at the server's high water mark of that
moment, and its next fetch is cut elsewhere, under another key: nothing
reads the first one, and no sweep lists it (a sweep deletes what rows name).

The spool's leftover removal (prefetch/housekeeping.py: soon after a
prefetcher starts, then hourly) lists the store and deletes such a chunk
only when it is provably dead, one of:

- its group and first article have an index row under another key (or a
  gap): its own row can never be written (`ON CONFLICT DO NOTHING`), and
  no fetch lists articles a row covers;
- each of its articles is in a range and every range it overlaps is past
  it (the sweep's rule, store/spool.py's _SWEEPABLE: a resume point only
  moves forward, so no stream and no fetch wants those articles again).

A chunk stored less than a grace period ago is not even listed (it may be
between its upload and its row); one of a group the database does not know,
one with articles in no range, and a key not of the chunks' form stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

# A chunk's key (spool/files.chunk_path): GROUP/FIRST-LAST.zlib, both numbers
# with 20 digits.
_KEY = re.compile(r"(?P<group>[^/]+)/(?P<first>\d{20})-(?P<last>\d{20})\.zlib")


@attrs.frozen
class ChunkKey:
    """A stored chunk's key, and the articles [first, last] of the group it names."""

    key: str
    group: str
    first: int
    last: int

    @classmethod
    def parse(cls, key: str) -> ChunkKey | None:
        """The chunk a key names; None for a key not of the chunks' form (not ours)."""
        match = _KEY.fullmatch(key)
        if match is None:
            return None
        first, last = int(match["first"]), int(match["last"])
        if not 0 < first <= last:
            return None
        return cls(key, match["group"], first, last)


@attrs.frozen
class Leftover:
    """What the index says of a stored chunk (store/spool.py's `leftovers`).

    Attributes:
        chunk: the stored chunk.
        known_group: whether the database has its group.
        row: whether an index row (a chunk or a gap) starts at its first article.
        row_path: that row's key (None: none, or a gap).
        planned: how many of its articles are in ranges.
        needed: whether a range it overlaps is not past it (its resume point at
            or before the chunk's last article in it).
    """

    chunk: ChunkKey
    known_group: bool
    row: bool
    row_path: str | None
    planned: int
    needed: bool

    @property
    def indexed(self) -> bool:
        """Whether the row at its first article names it (older versions stored a
        folder spool's files by their absolute paths)."""
        path, key = self.row_path, self.chunk.key
        return path is not None and (path == key or path.endswith("/" + key))

    @property
    def dead(self) -> bool:
        """Whether no stream will read it and no landing will index it (see above)."""
        if not self.known_group or self.indexed:
            return False
        if self.row:
            return True  # another key (or a gap) holds its first article for good
        size = self.chunk.last - self.chunk.first + 1
        return self.planned == size and not self.needed


def dead_keys(found: Iterable[Leftover]) -> list[str]:
    """The keys of the chunks that are provably dead, in the order found."""
    return [leftover.chunk.key for leftover in found if leftover.dead]
