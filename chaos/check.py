"""The pure half of scripts/chaos: the catalog checked against what it should hold.

Theory of operation
-------------------
The chaos script (`chaos.suite`) runs real processes and
injects faults; what it concludes is decided here, from values, with no I/O
and no clock, so that the conclusions themselves are unit-tested.

The catalog is checked by message-id, the one thing that names a segment
whatever batch or range it was indexed in. The stored side counts every
copy: every segment of every stored fragment (`CatalogStore.chunks()`, not
the merged export, which would fold a doubled segment into one). The
expected side is the set of message-ids that indexing the same lines with
the edges' batch cuts puts in the catalog (chaos_setup). Then:

- lost: expected, and stored nowhere;
- doubled: every copy of a message-id after its first (stored twice: 1);
- unexpected: stored, not expected (reported, not a failure).

The lease figures come from samples of the `ranges` table and from the
`batches` rows: one holder per (range, epoch) ever seen, and per range a
chain of batches that covers the range once, in epochs that never go back
(a row of an older epoch after a newer one is a write that a 409 should
have stopped).

The prefetcher's spool (the prefetch part) is checked the same way: its
chunks and gaps must cover every planned range once (`check_spool_coverage`:
holes and overlaps), and each chunk must hold exactly the lines the server
returns for OVER over its articles (`check_chunk_lines`).

The catalog rows the builders wrote as batches came (their pending builds,
some of them killed) must be those a whole rebuild makes from the same
fragments (`check_rebuild`: rows missing, extra or changed).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

import attrs

from usenet_indexer.core.batch import ReleaseChunk

# Message-ids quoted in a report: enough to look one up, not a flood.
SAMPLE = 5


@attrs.frozen
class CatalogCheck:
    """The catalog against the expected segments, by message-id.

    Attributes:
        expected: distinct message-ids expected.
        stored: segments stored, every copy counted.
        lost: expected message-ids stored nowhere.
        doubled: copies beyond the first of each stored message-id.
        unexpected: distinct stored message-ids that were not expected.
        lost_sample: a few lost message-ids.
        doubled_sample: a few doubled message-ids.
    """

    expected: int
    stored: int
    lost: int
    doubled: int
    unexpected: int
    lost_sample: tuple[str, ...] = ()
    doubled_sample: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Nothing lost, nothing doubled."""
        return self.lost == 0 and self.doubled == 0


def check_catalog(expected: Iterable[str], stored: Iterable[str]) -> CatalogCheck:
    """Compare stored message-ids (every copy) with the expected ones.

    Args:
        expected: the message-ids the catalog should hold (repeats ignored).
        stored: the message-ids of every stored segment, copies included.

    Returns:
        The figures, with a few examples of what is lost or doubled.
    """
    wanted = set(expected)
    copies = Counter(stored)
    lost = sorted(wanted.difference(copies))
    doubled = sorted(mid for mid, count in copies.items() if count > 1)
    return CatalogCheck(
        expected=len(wanted),
        stored=copies.total(),
        lost=len(lost),
        doubled=sum(copies[mid] - 1 for mid in doubled),
        unexpected=len(copies.keys() - wanted),
        lost_sample=tuple(lost[:SAMPLE]),
        doubled_sample=tuple(doubled[:SAMPLE]),
    )


def chunk_message_ids(chunks: Iterable[ReleaseChunk]) -> Iterator[str]:
    """The message-ids of stored release chunks, every copy.

    Args:
        chunks: release chunks rebuilt from stored fragments.

    Yields:
        Each segment's message-id.
    """
    for chunk in chunks:
        for file in chunk.files:
            if file.message_ids:
                yield from file.message_ids.split("\n")


@attrs.frozen
class RebuildCheck:
    """The catalog the builders followed against a whole rebuild, row by row (by guid).

    Attributes:
        rows: rows of the whole rebuild.
        missing: rows the rebuild makes that the builders did not.
        extra: rows the builders made that the rebuild does not.
        changed: rows of both whose columns differ.
        sample: a few guids of those rows.
    """

    rows: int
    missing: int
    extra: int
    changed: int
    sample: tuple[str, ...] = ()

    @property
    def differing(self) -> int:
        """Rows missing, extra or changed."""
        return self.missing + self.extra + self.changed


def check_rebuild(
    followed: Mapping[str, Sequence[object]], rebuilt: Mapping[str, Sequence[object]]
) -> RebuildCheck:
    """Compare the catalog rows the builders left with those a whole rebuild makes.

    Args:
        followed: the rows after the pending builds, by guid (their other columns).
        rebuilt: the rows after `CatalogBuild.everything`, the same way.

    Returns:
        The counts of rows missing, extra and changed, with a few guids.
    """
    missing = sorted(rebuilt.keys() - followed.keys())
    extra = sorted(followed.keys() - rebuilt.keys())
    changed = sorted(
        guid for guid in followed.keys() & rebuilt.keys() if followed[guid] != rebuilt[guid]
    )
    return RebuildCheck(
        rows=len(rebuilt),
        missing=len(missing),
        extra=len(extra),
        changed=len(changed),
        sample=tuple((missing + extra + changed)[:SAMPLE]),
    )


def not_injected(wanted: Iterable[str], injected: Mapping[str, int]) -> list[str]:
    """The kinds of `wanted` (each once, in its order) that got no fault yet."""
    return [kind for kind in dict.fromkeys(wanted) if injected.get(kind, 0) < 1]


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile of `values` (None when there are none).

    Args:
        values: the samples, in any order.
        fraction: 0.5 for the median, 0.95 for p95.

    Returns:
        The smallest sample with at least `fraction` of the samples at or below it.
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@attrs.frozen
class RangeRow:
    """One range as a sample of the `ranges` table saw it."""

    range_id: int
    state: str
    holder: int | None
    epoch: int
    resume: int
    live: bool  # leased, and its deadline not passed


def holder_violations(samples: Iterable[Sequence[RangeRow]]) -> int:
    """(range, epoch) pairs seen with more than one holder across all samples.

    An epoch is granted once, to one node: two holders under one epoch would
    let two nodes write the same range with a valid fence.

    Args:
        samples: the rows of each sample of the `ranges` table.

    Returns:
        How many (range, epoch) pairs had more than one holder.
    """
    holders: dict[tuple[int, int], set[int]] = defaultdict(set)
    for rows in samples:
        for row in rows:
            if row.state == "leased" and row.holder is not None:
                holders[row.range_id, row.epoch].add(row.holder)
    return sum(1 for nodes in holders.values() if len(nodes) > 1)


def grant_violations(grants: Iterable[tuple[int, int]]) -> int:
    """Grants that repeat an epoch of a range, or go back, in the order they were made.

    Args:
        grants: (range, epoch) of each lease granted, in the coordinator's log order.

    Returns:
        How many grants did not raise their range's epoch.
    """
    last: dict[int, int] = {}
    bad = 0
    for range_id, epoch in grants:
        if epoch <= last.get(range_id, 0):
            bad += 1
        last[range_id] = max(epoch, last.get(range_id, 0))
    return bad


@attrs.frozen
class BatchRow:
    """One row of the `batches` table."""

    range_id: int
    first: int
    next: int
    epoch: int
    node_id: int


@attrs.frozen
class ChainCheck:
    """The batches of every range, in article order.

    Attributes:
        gaps: places where a batch does not start where the one before ended
            (articles stored by no batch, or stored twice).
        stale_rows: rows of an older epoch after a row of a newer one.
        incomplete: ranges whose batches do not reach from first to last.
    """

    gaps: int
    stale_rows: int
    incomplete: int


def check_chains(rows: Iterable[BatchRow], ranges: Mapping[int, tuple[int, int]]) -> ChainCheck:
    """Check that each range's batches cover it once, in epochs that never go back.

    Args:
        rows: every `batches` row.
        ranges: range id -> (first article, last article), for ranges that are done.

    Returns:
        The counts of each kind of break.
    """
    by_range: dict[int, list[BatchRow]] = defaultdict(list)
    for row in rows:
        by_range[row.range_id].append(row)
    gaps = stale = incomplete = 0
    for range_id, (first, last) in ranges.items():
        chain = sorted(by_range.get(range_id, ()), key=lambda row: row.first)
        at, epoch = first, 0
        for row in chain:
            gaps += row.first != at
            stale += row.epoch < epoch
            at, epoch = row.next, max(epoch, row.epoch)
        incomplete += at != last + 1
    return ChainCheck(gaps=gaps, stale_rows=stale, incomplete=incomplete)


def lease_state_lost(before: Sequence[RangeRow], after: Sequence[RangeRow]) -> int:
    """Ranges whose lease state went back between two samples (a restart must keep it).

    Args:
        before: a sample taken before the coordinator was killed.
        after: one taken after it answers again.

    Returns:
        Ranges that are missing, no longer done, or whose epoch or resume point went back.
    """
    now = {row.range_id: row for row in after}
    lost = 0
    for old in before:
        new = now.get(old.range_id)
        lost += (
            new is None
            or (old.state == "done" and new.state != "done")
            or new.epoch < old.epoch
            or new.resume < old.resume
        )
    return lost


def taken_over(old: RangeRow, rows: Sequence[RangeRow]) -> bool:
    """Whether the range of `old` is done, or leased again under a newer epoch."""
    for row in rows:
        if row.range_id == old.range_id:
            return row.state == "done" or (row.state == "leased" and row.epoch > old.epoch)
    return False


# --- the spool's view (the prefetcher under kill -9 and NNTP faults) ------------------------


@attrs.frozen
class SpoolCoverage:
    """The spool's chunks (and gaps) against the planned ranges.

    Attributes:
        holes: runs of articles of a planned range that no chunk covers.
        overlaps: chunks that begin inside the chunk before them.
        lost_articles: articles of planned ranges that no chunk covers.
        doubled_articles: articles covered by more than one chunk (every extra copy).
    """

    holes: int
    overlaps: int
    lost_articles: int
    doubled_articles: int


def check_spool_coverage(
    ranges: Iterable[tuple[int, int]], chunks: Iterable[tuple[int, int]]
) -> SpoolCoverage:
    """Whether the chunks cover every range exactly once.

    Args:
        ranges: (first, last) of each planned range (they do not overlap).
        chunks: (first, last) of each indexed chunk or gap of the group.

    Returns:
        The holes and overlaps found (all zero: exactly once).
    """
    ordered = sorted(chunks)
    overlaps = doubled = 0
    reach = -1  # the last article covered so far
    for first, last in ordered:
        if first <= reach:
            overlaps += 1
            doubled += min(last, reach) - first + 1
        reach = max(reach, last)
    holes = lost = 0
    for first, last in sorted(ranges):
        at = first
        for start, end in ordered:
            if end < at or start > last:
                continue
            if start > at:
                holes += 1
                lost += start - at
            at = max(at, end + 1)
        if at <= last:
            holes += 1
            lost += last - at + 1
    return SpoolCoverage(holes, overlaps, lost, doubled)


def article_number(line: bytes) -> int:
    """The article number an overview line starts with (-1 when it has none)."""
    head = line.split(b"\t", 1)[0]
    return int(head) if head.isdigit() else -1


def check_chunk_lines(
    first: int,
    last: int,
    indexed_lines: int,
    lines: Sequence[bytes] | None,
    server: Mapping[int, bytes],
) -> int:
    """The bad lines of one spool chunk, against what the server returns for OVER.

    Args:
        first: the chunk's first article.
        last: its last article.
        indexed_lines: the line count its index row gives.
        lines: the lines its file inflates to (None: a gap, no file).
        server: article number -> the server's overview line (a bare OVER read).

    Returns:
        0 when the chunk holds exactly the server's lines of [first, last], in
        order, as many as its row says; else a count of the differences: lines
        that differ or are missing or extra, lines outside [first, last], and
        the difference between the row's count and the file's.
    """
    expected = [server[n] for n in range(first, last + 1) if n in server]
    got = list(lines) if lines is not None else []
    differ = sum(1 for a, b in zip(got, expected, strict=False) if a != b)
    differ += abs(len(got) - len(expected))
    outside = sum(1 for line in got if not first <= article_number(line) <= last)
    return differ + outside + abs(len(got) - indexed_lines)
