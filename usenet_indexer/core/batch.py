"""What the RangeIndexer hands over: a batch of release chunks and its counts.

A batch covers the articles [first, next) of one range. Each release seen in
the batch is one ReleaseChunk with its files' details once and their
fragments (the segments seen in this batch). Keys are 16-byte digests of
what every edge sees the same way, so chunks of one release from any batch,
range or edge merge into one catalog release (see merge.py).
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from functools import cached_property

import attrs

from usenet_indexer.core.naming import release_name


@attrs.frozen
class FileChunk:
    """One file of a release, with the segments of it seen in one batch.

    Attributes:
        key: 16-byte digest of the release key, subject and segment total.
        name: the file's name as the subject tells it.
        subject: the subject with the segment counter as (1/N).
        index: i of the file counter [i/M], or None.
        total_segments: N of the segment counter (k/N).
        posted: unix seconds of the first segment seen (0 when its date is bad).
        numbers: segment numbers k seen, ascending, no repeats (array of uint32).
        message_ids: the segments' message-ids without angle brackets, joined
            by "\n" (one string per file keeps a batch small in memory;
            message-ids cannot hold a newline).
        sizes: the segments' sizes in bytes (array of uint32).
    """

    key: bytes
    name: str
    subject: str
    index: int | None
    total_segments: int
    posted: int
    numbers: array[int]
    message_ids: str
    sizes: array[int]

    def segments(self) -> Iterator[tuple[int, str, int]]:
        """(k, message-id, bytes) of each segment, by k."""
        return zip(self.numbers, self.message_ids.split("\n"), self.sizes, strict=True)

    def numbered_ids(self) -> Iterator[tuple[int, str]]:
        """(k, message-id) of each segment, by k: `segments` without the sizes."""
        return zip(self.numbers, self.message_ids.split("\n"), strict=True)

    @property
    def first_message_id(self) -> str:
        """The message-id of the lowest segment seen."""
        ids = self.message_ids
        end = ids.find("\n")  # not partition: that copies every other id too
        return ids if end < 0 else ids[:end]


@attrs.frozen
class ReleaseChunk:
    """The files of one release seen in one batch.

    Attributes:
        key: 16-byte digest of the release basis and the poster.
        head_name: the name the subjects' head gives, or None (then the release
            is named after its main file; see `naming.release_name`).
        poster: the From header.
        groups: every group the release's articles are posted to (Xref).
        files_announced: M of the file counter [i/M], or None.
        files: the files seen in this batch.
        dropped: the name of the rule that dropped it; only set when the
            indexer was asked to keep dropped chunks (`uidx index --include-dropped`).
    """

    key: bytes
    head_name: str | None
    poster: str
    groups: tuple[str, ...]
    files_announced: int | None
    files: tuple[FileChunk, ...]
    dropped: str | None = None

    @cached_property
    def name(self) -> str:
        """The chunk's release name (`naming.release_name` of its head and files).

        Computed once: the indexer names a chunk for its probe candidate, and
        the edge packs the same name.
        """
        return release_name(self.head_name, ((f.name, f.total_segments) for f in self.files))


# A file without a readable date sorts after every dated one.
UNDATED = (1 << 63) - 1


# What a stored release chunk says of itself: its poster, head name and M (its
# ReleaseChunk's), kept beside its fragment (migration 0047); None for a chunk
# stored before, whose release row's stand for it.
Said = tuple[str, str | None, int | None] | None


def stored_chunk(
    key: bytes,
    row: tuple[object, str | None, str, Sequence[str], int | None],
    said: Said,
    files: tuple[FileChunk, ...],
) -> ReleaseChunk:
    """A stored release chunk of `key` rebuilt from its fragment's `files`: its poster,
    head and [i/M] as it says them (`said`), or, stored before migration 0047, its
    release row's (`row`: key, head name, poster, groups, M; the groups are the row's)."""
    _, head_name, poster, groups, announced = row
    if said is not None:
        poster, head_name, announced = said
    return ReleaseChunk(key, head_name, poster, tuple(groups), announced, files)


def representative_order(file: FileChunk) -> tuple[int, bytes]:
    """Where a file stands when a release's poster, head and [i/M] are chosen.

    A release's files may disagree on these (obfuscated uploads give each
    file a poster of its own; a separately posted .nfo says [1/1]). The
    release takes them from its earliest file, ties broken by file key: an
    order that does not depend on where batches were cut, so every edge, any
    batch size and `uidx index` agree.
    """
    return (file.posted or UNDATED, file.key)


def representative(files: Iterable[FileChunk]) -> tuple[int, bytes]:
    """The smallest `representative_order` of a chunk's files (it has at least one)."""
    return min(map(representative_order, files))


@attrs.frozen
class RuleCount:
    """How much one rule dropped under one key in one batch."""

    rule: str
    key: str
    releases: int
    segments: int


@attrs.frozen
class ProbeCandidate:
    """A release with an obfuscated name whose par2 (or nfo) would tell the real names.

    Attributes:
        release_key: the release's key.
        message_id: the segment whose body to fetch (without angle brackets).
        file_name: the par2 or nfo file it is the first segment of.
    """

    release_key: bytes
    message_id: str
    file_name: str


@attrs.frozen
class Batch:
    """Everything indexed from the articles [first, next) of a range.

    Attributes:
        group: the group the range belongs to.
        first: the first article the batch covers (the range's resume point
            before it); the coordinator's compare-and-set checks it.
        next: the resume point after this batch.
        releases: the release chunks kept (and dropped ones if asked for).
        rule_counts: drops by (rule, key).
        probe_candidates: releases to probe for their real names.
        lines: overview lines fed in this batch.
        skipped: lines not indexed, by reason (malformed and not binary).
    """

    group: str
    first: int
    next: int
    releases: tuple[ReleaseChunk, ...]
    rule_counts: tuple[RuleCount, ...]
    probe_candidates: tuple[ProbeCandidate, ...]
    lines: int
    skipped: tuple[tuple[str, int], ...]

    @property
    def segments(self) -> int:
        """Segments in the kept release chunks."""
        return sum(len(f.numbers) for r in self.releases if r.dropped is None for f in r.files)


def other_m(counted: Sequence[Collection[int | None]]) -> bool:
    """Whether two posters' files under one release key are of two uploads by the M of
    their [i/M] (`counted`: each poster's files' M): each poster's M of 2 or more are
    all others'. A file posted on its own ([1/1], an .nfo beside its rar set's [01/36],
    under a random From) or without a counter says nothing. The merge keeps such
    apart (merge.py's `_split`), and one pass gives each poster's its own chunk, as
    batch cuts do (indexer.py's `_poster_chunks`)."""
    sets = [{m for m in ms if m is not None and m > 1} for ms in counted]
    return any(a and b and not a & b for at, a in enumerate(sets) for b in sets[at + 1 :])
