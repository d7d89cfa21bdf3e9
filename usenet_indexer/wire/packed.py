"""A batch as an edge sends it and the coordinator stores it: release chunks packed.

The RangeIndexer's Batch holds each release chunk's files as Python values.
Before it travels, each kept chunk is packed into the fragment the catalog
keeps (fragments.py), and the figures its catalog row needs beside the
fragment (name, dates, counts) are taken from the files. The edge does this
work, so the coordinator (one per indexer, where every batch of every edge
arrives) stores fragments as they come: it checks them (`fragments.inspected`,
which yields the same figures) and keeps what they inflated to beside them
(`PackedRelease.inflated`), so that its catalog build unpacks the files of a
batch it stored without inflating and reading them again (store/catalog.py's
`CatalogStore.remember`).

`pack_release` on the edge and `checked_release` on the coordinator give
equal values for the same chunk; tests hold them to it. The release name is
the one figure the coordinator takes as sent (checked as text): it is
`naming.release_name` of the chunk's head and files, which a node could make
say anything through its subjects anyway.
"""

from __future__ import annotations

import builtins

import attrs

from usenet_indexer.core.batch import (
    Batch,
    ProbeCandidate,
    ReleaseChunk,
    RuleCount,
    representative,
)
from usenet_indexer.wire import fragments


@attrs.frozen
class PackedRelease:
    """One release chunk, its files packed, with the figures of its catalog row.

    Attributes:
        key: 16-byte release key.
        head_name: the name the subjects' head gives, or None.
        poster: the From header.
        groups: the groups its articles are posted to.
        files_announced: M of the file counter [i/M], or None.
        fragment: the files with their segments (fragments.pack).
        name: the release name (naming.release_name of head and files).
        posted: the earliest readable date of its files, 0 when none has one.
        latest: the latest readable date of its files, 0 when none has one (with
            `posted`, the span the catalog build looks in for the parts of one upload).
        representative: the smallest batch.representative_order of its files.
        files: file chunks in the fragment.
        segments: segments in the fragment.
        bytes: the segments' sizes, summed.
        inflated: the fragment inflated, where the coordinator checked it (None
            on the edge, which packed it); not part of its value.
    """

    key: bytes
    head_name: str | None
    poster: str
    groups: tuple[str, ...]
    files_announced: int | None
    fragment: bytes
    name: str
    posted: int
    latest: int
    representative: tuple[int, bytes]
    files: int
    segments: int
    bytes: int
    inflated: builtins.bytes | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class PackedBatch:
    """A Batch with its kept release chunks packed (dropped ones are not sent).

    Attributes are those of batch.Batch, `releases` packed.
    """

    group: str
    first: int
    next: int
    releases: tuple[PackedRelease, ...]
    rule_counts: tuple[RuleCount, ...]
    probe_candidates: tuple[ProbeCandidate, ...]
    lines: int
    skipped: tuple[tuple[str, int], ...]

    @property
    def segments(self) -> int:
        """Segments in the release chunks."""
        return sum(r.segments for r in self.releases)


def pack_release(chunk: ReleaseChunk, *, pure: bool = False) -> PackedRelease:
    """Pack a release chunk (it has at least one file) and take its row's figures;
    `pure`: its fragment laid out by the pure code (fragments.pack)."""
    files = chunk.files
    dated = [f.posted for f in files if f.posted]
    return PackedRelease(
        key=chunk.key,
        head_name=chunk.head_name,
        poster=chunk.poster,
        groups=chunk.groups,
        files_announced=chunk.files_announced,
        fragment=fragments.pack(files, pure=pure),
        name=chunk.name,
        posted=min(dated) if dated else 0,
        latest=max(dated) if dated else 0,
        representative=representative(files),
        files=len(files),
        segments=sum([len(f.numbers) for f in files]),
        bytes=sum([sum(f.sizes) for f in files]),
    )


def pack_batch(batch: Batch, *, pure: bool = False) -> PackedBatch:
    """The batch with its kept release chunks packed (`pure`: see pack_release)."""
    return PackedBatch(
        group=batch.group,
        first=batch.first,
        next=batch.next,
        releases=tuple(pack_release(r, pure=pure) for r in batch.releases if r.dropped is None),
        rule_counts=batch.rule_counts,
        probe_candidates=batch.probe_candidates,
        lines=batch.lines,
        skipped=batch.skipped,
    )


def checked_release(
    *,
    key: bytes,
    head_name: str | None,
    poster: str,
    groups: tuple[str, ...],
    files_announced: int | None,
    name: str,
    fragment: bytes,
    max_fragment_bytes: int,
    max_text_chars: int,
) -> tuple[PackedRelease, int]:
    """A release chunk from a node: its fragment checked, its figures taken from it.

    Returns:
        The release chunk, and the bytes its fragment inflated to.

    Raises:
        fragments.BadFragment: the fragment breaks what `fragments.inspect` checks.
    """
    facts, raw = fragments.inspected(
        fragment, max_bytes=max_fragment_bytes, max_text_chars=max_text_chars
    )
    release = PackedRelease(
        key=key,
        head_name=head_name,
        poster=poster,
        groups=groups,
        files_announced=files_announced,
        fragment=fragment,
        name=name,
        posted=facts.posted,
        latest=facts.latest,
        representative=facts.representative,
        files=facts.files,
        segments=facts.segments,
        bytes=facts.bytes,
        inflated=raw,
    )
    return release, facts.inflated
