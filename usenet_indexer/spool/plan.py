"""Which spool chunks to fetch next: pure, no I/O, no clock.

Theory of operation
-------------------
The prefetcher keeps the spool ahead of the edges. Its work list is made
from the ranges that are not done, leased ranges first (from their resume
point, in resume order: an edge is waiting for them), then planned ranges in
plan order. Within a range, what is missing is the part of [resume, last]
that no spool chunk (or recorded gap) covers; each missing interval is cut
into chunks of `chunk_articles` articles from its start, so a chunk never
crosses a range's end and a resumed range is fetched from its resume point.

A chunk is then clipped to what the server has (its GROUP low and high water
marks): the part above `high` waits (those articles do not exist yet); a
chunk wholly below `low` is recorded as a gap without asking the server.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs


@attrs.frozen
class WantedRange:
    """A range that is not done, as the work list needs it."""

    range_id: int
    group_id: int
    group: str
    first: int
    last: int
    resume: int
    leased: bool


@attrs.frozen
class ChunkJob:
    """Articles [first, last] of a group, to be fetched into one spool chunk."""

    group_id: int
    group: str
    first: int
    last: int
    leased: bool = False

    @property
    def key(self) -> tuple[int, int]:
        """What identifies the job among those in flight: (group, first article)."""
        return self.group_id, self.first


def missing(first: int, last: int, covered: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of [first, last] that no (first, last) interval of `covered` holds, in order."""
    gaps: list[tuple[int, int]] = []
    at = first
    for start, end in sorted(covered):
        if end < at:
            continue
        if start > last:
            break
        if start > at:
            gaps.append((at, start - 1))
        at = max(at, end + 1)
        if at > last:
            return gaps
    if at <= last:
        gaps.append((at, last))
    return gaps


def cut(first: int, last: int, size: int) -> list[tuple[int, int]]:
    """[first, last] as consecutive pieces of at most `size` articles."""
    if size < 1:
        raise ValueError(f"size must be positive, not {size}")
    return [(start, min(start + size - 1, last)) for start in range(first, last + 1, size)]


def work_list(
    ranges: Sequence[WantedRange],
    covered: dict[int, list[tuple[int, int]]],
    chunk_articles: int,
    *,
    busy: Iterable[ChunkJob] = (),
) -> list[ChunkJob]:
    """The chunks to fetch, most wanted first.

    Args:
        ranges: the ranges not done (any order: leased ones come first here).
        covered: per group id, the (first, last) of its spool chunks and gaps.
        chunk_articles: the most articles in one chunk.
        busy: jobs in flight (their articles count as covered).

    Returns:
        Jobs in order: leased ranges by resume point, then planned ranges in
        the given order; within a range, in article order.
    """
    ordered = sorted((r for r in ranges if r.leased), key=lambda r: (r.group_id, r.resume)) + [
        r for r in ranges if not r.leased
    ]
    taken: dict[int, list[tuple[int, int]]] = {}
    for job in busy:
        taken.setdefault(job.group_id, []).append((job.first, job.last))
    jobs: list[ChunkJob] = []
    for wanted in ordered:
        if wanted.resume > wanted.last:
            continue
        have = [*covered.get(wanted.group_id, ()), *taken.get(wanted.group_id, ())]
        for start, end in missing(wanted.resume, wanted.last, have):
            for piece_first, piece_last in cut(start, end, chunk_articles):
                jobs.append(
                    ChunkJob(wanted.group_id, wanted.group, piece_first, piece_last, wanted.leased)
                )
    return jobs


def claimable(
    jobs: Sequence[ChunkJob], claimed: dict[int, list[tuple[int, int]]], limit: int
) -> list[ChunkJob]:
    """The first `limit` of `jobs` that overlap no (first, last) another prefetcher
    claimed in their group (several prefetchers share the list; store/spool.py claims
    them under a per-group lock)."""
    chosen: list[ChunkJob] = []
    for job in jobs:
        if len(chosen) >= limit:
            break
        spans = claimed.get(job.group_id, ())
        if not any(first <= job.last and job.first <= last for first, last in spans):
            chosen.append(job)
    return chosen


def clip(job: ChunkJob, low: int, high: int) -> ChunkJob | None:
    """The job cut to the server's articles: None when none of it exists yet.

    A job wholly below `low` is returned as it is (it is a gap: the caller
    records it without asking the server); a job running past `high` ends at
    `high`.
    """
    if job.first > high:
        return None
    if job.last > high:
        return attrs.evolve(job, last=high)
    return job


def slices(first: int, last: int, size: int) -> list[tuple[int, int]]:
    """The OVER slices of a chunk: [first, last] in pieces of `size` articles."""
    return cut(first, last, size)
