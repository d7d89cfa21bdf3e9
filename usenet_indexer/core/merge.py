"""Release chunks merged into catalog releases (the coordinator's merge, and `uidx index`'s).

Chunks of one release arrive from many batches, ranges and edges, in any
order, and a retried batch may bring the same chunk twice. Merging is
therefore by key and idempotent: files by file key, segments by number
(the first message-id seen for a number wins, so a duplicate post of a
segment does not double it), groups by union, dates by minimum.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from usenet_indexer.core.batch import FileChunk, ReleaseChunk, representative
from usenet_indexer.core.naming import release_name, upload_name
from usenet_indexer.core.uploads import Part, link
from usenet_indexer.core.uploads import representative as upload_key


@attrs.define(eq=False)
class _File:
    name: str
    subject: str
    index: int | None
    total_segments: int
    posted: int
    chunks: list[FileChunk]

    def segments(self) -> list[tuple[int, str, int]]:
        """(k, message-id, bytes) by k; for a repeated k the first chunk's wins."""
        if len(self.chunks) == 1:
            return list(self.chunks[0].segments())
        merged: dict[int, tuple[int, str, int]] = {}
        for chunk in self.chunks:
            for segment in chunk.segments():
                merged.setdefault(segment[0], segment)
        return [merged[k] for k in sorted(merged)]


@attrs.define(eq=False)
class _Release:
    key: bytes
    head_name: str | None
    poster: str
    files_announced: int | None
    groups: set[str]
    dropped: str | None
    order: tuple[int, bytes]  # batch.representative of the chunk the fields above are from
    chunks: int = 0
    files: dict[bytes, _File] = attrs.field(factory=dict)


@attrs.frozen
class CatalogFile:
    """A file of a catalog release with every segment seen of it."""

    name: str
    subject: str
    index: int | None
    total_segments: int
    posted: int
    segments: list[tuple[int, str, int]]  # (k, message-id, bytes), by k


@attrs.frozen
class CatalogRelease:
    """A release as the catalog holds it, merged from all its chunks.

    Attributes:
        key: the release key (16 bytes).
        name: the release's name (see naming.release_name).
        poster: the From header.
        groups: every group it was posted to.
        posted: unix seconds of its earliest file (0 when no date was readable).
        files_announced: M of the file counter, or None.
        complete: segments seen / segments announced, 0..1.
        bytes: the sum of the sizes of the segments seen.
        probe_candidate: a probe was asked for its real names.
        dropped: the rule that dropped it, or None.
        chunks: how many release chunks it was merged from.
        files: its files, in file-counter order.
    """

    key: bytes
    name: str
    poster: str
    groups: tuple[str, ...]
    posted: int
    files_announced: int | None
    complete: float
    bytes: int
    probe_candidate: bool
    dropped: str | None
    chunks: int
    files: tuple[CatalogFile, ...]

    def to_json(self) -> dict[str, Any]:
        """The release in the JSONL schema of `uidx index` and `uidx catalog export`."""
        return {
            "key": self.key.hex(),
            "name": self.name,
            "poster": self.poster,
            "groups": list(self.groups),
            "posted": self.posted,
            "files_announced": self.files_announced,
            "complete": self.complete,
            "bytes": self.bytes,
            "probe_candidate": self.probe_candidate,
            "dropped": self.dropped,
            "chunks": self.chunks,
            "files": [
                {
                    "name": f.name,
                    "subject": f.subject,
                    "index": f.index,
                    "total_segments": f.total_segments,
                    "date": f.posted,
                    "segments": f.segments,
                }
                for f in self.files
            ],
        }


@attrs.define(eq=False)
class ReleaseMerger:
    """Gathers release chunks and hands out merged catalog releases."""

    _releases: dict[bytes, _Release] = attrs.field(init=False, factory=dict)
    _probed: set[bytes] = attrs.field(init=False, factory=set)

    def __len__(self) -> int:
        return len(self._releases)

    def add(self, chunk: ReleaseChunk) -> None:
        """Merge one release chunk (adding the same chunk twice changes nothing but `chunks`)."""
        release = self._releases.get(chunk.key)
        order = representative(chunk.files) if chunk.files else (1 << 63, b"")
        if release is None:
            release = self._releases[chunk.key] = _Release(
                key=chunk.key,
                head_name=chunk.head_name,
                poster=chunk.poster,
                files_announced=chunk.files_announced,
                groups=set(chunk.groups),
                dropped=chunk.dropped,
                order=order,
            )
        else:
            if order < release.order:
                # An earlier file: its poster, head and [i/M] speak for the release.
                release.order = order
                release.head_name = chunk.head_name
                release.poster = chunk.poster
                release.files_announced = chunk.files_announced
            release.groups.update(chunk.groups)
            if chunk.dropped is None:
                # Kept anywhere means kept: a later batch saw more than executables.
                release.dropped = None
        release.chunks += 1
        for file in chunk.files:
            _merge_file(release.files, file)

    def mark_probe(self, release_key: bytes) -> None:
        """Note that a probe candidate was reported for a release."""
        self._probed.add(release_key)

    def add_all(self, chunks: Iterable[ReleaseChunk]) -> None:
        for chunk in chunks:
            self.add(chunk)

    def releases(self) -> Iterator[CatalogRelease]:
        """The merged releases, oldest first (then by name).

        Releases that are parts of one upload (`uploads.link`: one poster,
        one M, disjoint file indexes, posted together) come out as one.
        Each is built (its segment lists made) only when the iteration
        reaches it: the caller can write one and let it go.
        """
        order: list[tuple[int, str, bytes, list[_Release], list[_File]]] = []
        parts = {key: _part(release) for key, release in self._releases.items()}
        for keys in link(parts.values()):
            members = [self._releases[key] for key in keys]
            files = sorted(
                (f for member in members for f in member.files.values()), key=_file_order
            )
            dated = [f.posted for f in files if f.posted]
            # One part: the name its Part already has (release_name of its files).
            name = (
                parts[keys[0]].name
                if len(keys) == 1
                else upload_name(
                    [m.head_name for m in members], ((f.name, f.total_segments) for f in files)
                )
            )
            order.append((min(dated) if dated else 0, name, upload_key(keys), members, files))
        order.sort(key=lambda o: o[:3])
        return (self._build(members, files, name) for _, name, _, members, files in order)

    def _build(self, members: list[_Release], files: list[_File], name: str) -> CatalogRelease:
        release = members[0]
        built = [
            CatalogFile(
                name=f.name,
                subject=f.subject,
                index=f.index,
                total_segments=f.total_segments,
                posted=f.posted,
                segments=f.segments(),
            )
            for f in files
        ]
        seen = sum(len(f.segments) for f in built)
        announced = _announced(members)
        # Bytes of the segments kept: a segment posted again (a repost in a
        # later batch) counts once, like it does in the segment list.
        size = sum(
            sum(f.chunks[0].sizes) if len(f.chunks) == 1 else sum(s for _, _, s in b.segments)
            for f, b in zip(files, built, strict=True)
        )
        dated = [f.posted for f in built if f.posted]
        return CatalogRelease(
            key=release.key,
            name=name,
            poster=release.poster,
            groups=tuple(sorted(set().union(*(m.groups for m in members)))),
            posted=min(dated) if dated else 0,
            files_announced=release.files_announced,
            complete=min(1.0, seen / announced) if announced else 0.0,
            bytes=size,
            probe_candidate=any(m.key in self._probed for m in members),
            dropped=release.dropped,
            chunks=sum(m.chunks for m in members),
            files=tuple(built),
        )


def _file_order(file: _File) -> tuple[int, str, int, bytes]:
    # Index, name, then date and key: files of joined parts may share the
    # first two, and their order must not be the order chunks came in.
    return (
        file.index if file.index is not None else 1 << 30,
        file.name,
        file.posted,
        file.chunks[0].key,
    )


def _announced(members: list[_Release]) -> int:
    """Segments announced: those of the files seen, and for the files of an [i/M] not seen,
    as many as the seen files of that counter have on average.

    Parts joined by one M share a counter; Nyuu's collections each have
    their own, so each counter is made up on its own.
    """
    by_counter: dict[int | None, list[_File]] = {}
    for member in members:
        by_counter.setdefault(member.files_announced, []).extend(member.files.values())
    announced = 0
    for total, files in by_counter.items():
        segments = sum(f.total_segments for f in files)
        counted = len({f.index for f in files if f.index})  # index 0 is the .nzb, outside M
        if total and counted and counted < total:
            segments += segments * (total - counted) // counted
        announced += segments
    return announced


def _part(release: _Release) -> Part:
    """What uploads.link needs of a release: its poster, M, file indexes and dates."""
    dated = [f.posted for f in release.files.values() if f.posted]
    return Part(
        key=release.key,
        poster=release.poster,
        files_announced=release.files_announced,
        indexes=frozenset(f.index for f in release.files.values() if f.index is not None),
        first=min(dated) if dated else 0,
        last=max(dated) if dated else 0,
        dropped=release.dropped is not None,
        name=release_name(
            release.head_name, ((f.name, f.total_segments) for f in release.files.values())
        ),
    )


def _merge_file(files: dict[bytes, _File], chunk: FileChunk) -> None:
    file = files.get(chunk.key)
    if file is None:
        files[chunk.key] = _File(
            name=chunk.name,
            subject=chunk.subject,
            index=chunk.index,
            total_segments=chunk.total_segments,
            posted=chunk.posted,
            chunks=[chunk],
        )
        return
    if chunk.posted and (not file.posted or chunk.posted < file.posted):
        file.posted = chunk.posted
    file.chunks.append(chunk)
