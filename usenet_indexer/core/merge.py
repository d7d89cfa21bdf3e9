"""Release chunks merged into catalog releases (the coordinator's merge, and `uidx index`'s).

Chunks of one release arrive from many batches, ranges and edges, in any
order, and a retried batch may bring the same chunk twice. Merging is
therefore by key and idempotent: files by file key, segments by number
(the first message-id seen for a number wins, so a duplicate post of a
segment does not double it), groups by union, dates by minimum.

A release posted again (a repost: the same poster and names, new
message-ids) is a release of its own. Its chunks come under the key of the
release (from a batch that saw no earlier pass) or under `repost_key` of it
(from a batch that saw both; see reposts.py), so the chunks of a key and
of its chain of repost keys (pieces the indexer cut off after a pause or
a run of repeats) are taken together. In order of date, the files of each
piece (a release chunk) go to the generation nearest in date of those that
do not hold `min(RUN, N)` of the file's numbers under other message-ids
(or to a new one), never to one before the piece's earlier files', never
to one with a file of the same name under another key (another poster's
upload of one name), and, under a tool's default From, for a file new to
it, not to one whose latest file is more than `APART_SECONDS` away; of
those, to one holding a chunk of the piece's poster where one does (two
posters' uploads of one name at once). A file chunk that repeats some
numbers of its generation just before one that went on to a later
generation goes with it (a takedown's repost repeats only some numbers of
some files). A file's copies in several generations go to them in order
of date, the earliest to the earliest generation. The earliest
generation comes out under the release key, each later one under a key of
its own upload's (`reposts.generation_key` of the release key and its
earliest file chunk's first message-id); but a generation that holds a
stored row's anchor keeps that row's key (`Pins`, `_keyed`), so an upload
indexed late (a backfill) moves no row's guid. Parts are linked by their
keys as if no row were stored (`link_key`). What a generation says of itself is of the
chunks it holds, whatever key a batch cut gave them: whether a batch asked
a probe of it, and its poster, head and [i/M] (its earliest one's); a
file's subject is the fullest of its key's chunks. Its groups are the
release key's (a batch reads a file's groups from its first line there,
which one pass gives every post of the file).
"""

from __future__ import annotations

import builtins
from bisect import bisect_right
from collections.abc import Callable, Collection, Container, Iterable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Any, overload

import attrs
import orjson

from usenet_indexer.core.batch import (
    UNDATED,
    FileChunk,
    ReleaseChunk,
    representative,
)
from usenet_indexer.core.batch import other_m as _other_m
from usenet_indexer.core.naming import release_name, upload_name
from usenet_indexer.core.reposts import RUN, generation_key, repost_key
from usenet_indexer.core.subject import file_stem
from usenet_indexer.core.uploads import TOOL_FROMS, Part, link
from usenet_indexer.core.uploads import representative as upload_key

# How the merge keys generations (`_keyed`), which are the catalog rows' guids: 1 by
# their place among a release's generations (before migration 0043), 2 by their own
# upload, 3 by their own upload and kept by the rows' anchors (`Pins`, migration
# 0044), 4 as 3 with each stored chunk's own poster, head and M (migration 0047:
# a job's fragments carry them), 5 as 4 with each row's span (catalog.CatalogEntry.span,
# migration 0048: a pending build writes a tool's From's rows by it). An edge that
# builds catalog jobs says its own (`POST builds?keys=5`), and
# a coordinator offers jobs only to an edge that keys as it does.
KEYS = 5

# The stored rows' keys a merge keeps (`_keyed`), by a release key of their sources:
# (anchor, guid) pairs, the anchor the first message-id of the file chunk the row's
# key was first made of. The generation that holds a row's anchor keeps its guid.
Pins = tuple[tuple[str, bytes], ...]

# Under a posting tool's default From (uploads.TOOL_FROMS), a file new to a
# generation joins it only when posted within this long of its latest file:
# a key that several uploaders' uploads share (random names keyed by poster
# and M) is one upload per run.
# A file's chunks are dated by their first segment: an hour leaves room for
# a file posted for most of one.
APART_SECONDS = 60 * 60

# A file numbered before a generation's files, posted more than this after them, that
# begins a run of numbers below theirs in the order of the counter going on to one of
# theirs (or is followed by one of theirs at once) is another post's first file
# (`_another_post`, `_split`): a tool posts in the order of its file counter, a few
# seconds out of order over many connections at most, and starts over only in another
# post (a repost of an upload whose first post lost its first file; two uploads of one
# M at once under a tool's From, whose random names are one key: the second's [1/M]
# came seconds after the first's last volume began). Without such a run it fills the
# generation in.
RESTART_SECONDS = 10

# A post check re-sends what it found missing within minutes of the post
# (`_resends_then_more`: Nyuu checks after seconds and retries; PowerPost's AutoRetry).
RESEND_SECONDS = 10 * 60

_NUMBERS = attrgetter("numbers")


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
        numbers = list(chain.from_iterable(chunk.numbers for chunk in self.chunks))
        if len(set(numbers)) == len(numbers):
            # No k twice (a file that a batch cut in two, most often): every
            # segment, sorted with C-level operations.
            return sorted(
                chain.from_iterable(chunk.segments() for chunk in self.chunks), key=itemgetter(0)
            )
        merged: dict[int, tuple[int, str, int]] = {}
        for chunk in self.chunks:
            for segment in chunk.segments():
                merged.setdefault(segment[0], segment)
        return [merged[k] for k in sorted(merged)]


@attrs.define(eq=False)
class _Fields:
    """What a release says of itself, from the chunk that speaks for it."""

    key: bytes
    head_name: str | None
    poster: str
    files_announced: int | None
    groups: set[str]
    dropped: str | None
    order: tuple[int, bytes]  # batch.representative of the chunk the fields above are from
    chunks: int = 0


@attrs.define(eq=False)
class _Entry(_Fields):
    """Everything merged under one release key: its fields and every file chunk, as added."""

    # Each file chunk with the number of the release chunk it came in.
    files: list[tuple[FileChunk, int]] = attrs.field(factory=list)
    # Each release chunk's representative order, head, poster and [i/M].
    fields: dict[int, tuple[tuple[int, bytes], str | None, str, int | None]] = attrs.field(
        factory=dict
    )
    # What each release chunk was, as added: its fields and its files tuple's identity
    # (a Memo's key), and the files tuples (kept, so that no identity is reused).
    came: list[tuple[object, ...]] = attrs.field(factory=list)
    held: list[tuple[FileChunk, ...]] = attrs.field(factory=list)
    # The first release chunk added: a generation of it alone is named as it is
    # (`ReleaseChunk.name`, which the indexer has made already for its probe).
    first: ReleaseChunk | None = None


@attrs.define(eq=False)
class _Release(_Fields):
    """One generation of a release: an upload, with its files merged."""

    files: dict[bytes, _File] = attrs.field(factory=dict)
    repost_of: bytes | None = None  # the first post's key, for a later post by its poster
    sources: tuple[bytes, ...] = ()  # the release keys of its chain (whose chunks it may hold)
    # The release keys its files came under: a batch reports a probe candidate by one.
    came_under: frozenset[bytes] = frozenset()
    # Its name when known before `_part` (a generation of one release chunk: the chunk's).
    name: str | None = None
    # The first message-id of the file chunk its key was made of, or kept by (`_keyed`).
    anchor: str = ""
    # Whether its key is a stored row's it kept (`_kept`).
    kept: bool = False
    # Its key as if no row were stored: `uploads.link`'s (`_keyed`).
    link_key: bytes = b""


# A merged file's figures from its chunks (in the order merged): (segments, the bytes
# they hold, whether no number is in two chunks). The compiled twin of `_figures`
# (core/_fastmerge.pyx) answers None where the pure code must.
Figures = Callable[[Sequence[FileChunk]], "tuple[int, int, bool] | None"]


def _compiled_figures() -> Figures | None:
    """The compiled twin of `_figures`, or None where it was not built (no C compiler)."""
    try:
        from usenet_indexer.core._fastmerge import figures
    except ImportError:
        return None
    return figures


COMPILED_FIGURES = _compiled_figures()


def _compiled_segments_json() -> Callable[[list[FileChunk]], builtins.bytes | None] | None:
    """The compiled writer of a merged file's segments as JSON (`Segments.json_text`), or
    None where it was not built. Its oracle: orjson's text of the list (`_File.segments`)."""
    try:
        from usenet_indexer.core._fastmerge import segments_json
    except ImportError:
        return None
    return segments_json


COMPILED_SEGMENTS_JSON = _compiled_segments_json()


def _figures(chunks: Sequence[FileChunk]) -> tuple[int, int, bool]:
    """(segments, bytes, distinct) of a merged file: how many numbers its chunks hold,
    the sizes of its segments summed (of a number in two chunks, the first chunk's, as
    `_File.segments` keeps it), and whether no number is in two chunks (`_distinct`).
    The oracle of the compiled `_fastmerge.figures`."""
    if _distinct(chunks):
        count = sum(len(c.numbers) for c in chunks)
        return count, sum(chain.from_iterable(c.sizes for c in chunks)), True
    first: dict[int, int] = {}
    for chunk in chunks:
        for number, size in zip(chunk.numbers, chunk.sizes, strict=True):
            first.setdefault(number, size)
    return len(first), sum(first.values()), False


def figures(chunks: Sequence[FileChunk], *, pure: bool = False) -> tuple[int, int, bool]:
    """`_figures`, compiled where built (and not `pure`)."""
    if COMPILED_FIGURES is not None and not pure:
        found = COMPILED_FIGURES(chunks)
        if found is not None:
            return found
    return _figures(chunks)


class Segments(Sequence[tuple[int, str, int]]):
    """A merged file's segments (k, message-id, bytes) by k, made from its chunks when
    first read: a catalog build needs their count, numbers and sizes, which the
    chunks' arrays give (when no number is in two chunks: a file a batch cut in two),
    and the list itself only for an NZB, an export or a probe."""

    __slots__ = ("_count", "_distinct", "_file", "_made")

    def __init__(self, file: _File, count: int | None = None, distinct: bool | None = None) -> None:
        """`count`, `distinct`: the file's figures where known (`figures`)."""
        self._file = file
        self._made: list[tuple[int, str, int]] | None = None
        self._distinct = distinct
        self._count = count  # a build asks it of each file many times

    def listed(self) -> list[tuple[int, str, int]]:
        """The segments as a list (made once)."""
        if self._made is None:
            self._made = self._file.segments()
        return self._made

    def json_text(self) -> builtins.bytes | None:
        """The segments' list as orjson writes it, made from the chunks' arrays by the
        compiled writer (`_fastmerge.segments_json`) while the list is not made; None
        where it does not answer (then the list is written)."""
        if self._made is not None or COMPILED_SEGMENTS_JSON is None:
            return None
        return COMPILED_SEGMENTS_JSON(self._file.chunks)

    def _arrays(self) -> bool:
        """Whether the chunks' arrays are the segments (no number in two chunks) while
        the list is not made."""
        if self._made is not None:
            return False
        if self._distinct is None:
            self._distinct = _distinct(self._file.chunks)
        return self._distinct

    def numbers(self) -> Sequence[int]:
        """The segments' numbers k, ascending (from the chunks' arrays, no list of
        tuples made, when no number is in two chunks)."""
        if self._arrays():
            chunks = self._file.chunks
            if len(chunks) == 1:
                return chunks[0].numbers
            return sorted(chain.from_iterable(c.numbers for c in chunks))
        return [k for k, _, _ in self.listed()]

    def sizes(self) -> Iterable[int]:
        """The segments' sizes, in no set order (likewise from the chunks' arrays)."""
        if self._arrays():
            chunks = self._file.chunks
            return (
                chunks[0].sizes
                if len(chunks) == 1
                else chain.from_iterable(c.sizes for c in chunks)
            )
        return [size for _, _, size in self.listed()]

    def holds(self, message_id: str) -> bool:
        """Whether a segment has this message-id (when no number is in two chunks, every
        chunk's segments are the file's: their joined ids searched, the list not made)."""
        if self._arrays():
            line = f"\n{message_id}\n"
            # The id as a substring first: most chunks lack it, and the framed test
            # copies the chunk's ids.
            return any(
                message_id in c.message_ids and line in f"\n{c.message_ids}\n"
                for c in self._file.chunks
            )
        return any(m == message_id for _, m, _ in self.listed())

    def first(self) -> tuple[int, str, int]:
        """The segment of the lowest number (IndexError when none), the list not made:
        of the chunks that start with it, the first's (as `_File.segments` keeps it)."""
        if self._made is not None:
            return self._made[0]
        chunks = [c for c in self._file.chunks if c.numbers]
        if not chunks:
            raise IndexError("no segments")
        low = min(c.numbers[0] for c in chunks)
        chunk = next(c for c in chunks if c.numbers[0] == low)
        return low, chunk.first_message_id, chunk.sizes[0]

    def __len__(self) -> int:
        if self._count is None:
            chunks = self._file.chunks
            self._count = (
                sum(len(c.numbers) for c in chunks) if self._arrays() else len(self.listed())
            )
        return self._count

    @overload
    def __getitem__(self, at: int) -> tuple[int, str, int]: ...
    @overload
    def __getitem__(self, at: slice) -> list[tuple[int, str, int]]: ...
    def __getitem__(self, at: int | slice) -> tuple[int, str, int] | list[tuple[int, str, int]]:
        if at == 0 and self._made is None:
            return self.first()
        return self.listed()[at]

    def __iter__(self) -> Iterator[tuple[int, str, int]]:
        return iter(self.listed())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Segments):
            return self.listed() == other.listed()
        if isinstance(other, list):
            return self.listed() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a list's equality, a list's hash

    def __repr__(self) -> str:
        return repr(self.listed())


def _distinct(chunks: Sequence[FileChunk]) -> bool:
    """Whether no segment number is in two of a file's chunks: their spans apart (a
    file a batch cut in two), else the numbers counted."""
    if len(chunks) == 1:
        return True
    spans = sorted((c.numbers[0], c.numbers[-1]) for c in chunks if c.numbers)
    if all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1)):
        return True
    return sum(len(c.numbers) for c in chunks) == len({k for c in chunks for k in c.numbers})


def holds(segments: Sequence[tuple[int, str, int]], message_id: str) -> bool:
    """Whether a CatalogFile's segments have this message-id."""
    if isinstance(segments, Segments):
        return segments.holds(message_id)
    return any(m == message_id for _, m, _ in segments)


def segment_numbers(segments: Sequence[tuple[int, str, int]]) -> Sequence[int]:
    """A CatalogFile's segment numbers k, ascending."""
    if isinstance(segments, Segments):
        return segments.numbers()
    return [k for k, _, _ in segments]


def segment_sizes(segments: Sequence[tuple[int, str, int]]) -> Iterable[int]:
    """A CatalogFile's segment sizes, in no set order."""
    if isinstance(segments, Segments):
        return segments.sizes()
    return [size for _, _, size in segments]


def lowest(segments: Sequence[tuple[int, str, int]]) -> tuple[int, str, int]:
    """A CatalogFile's segment of the lowest number (it has one), its list not made."""
    return segments.first() if isinstance(segments, Segments) else min(segments)


def listed(segments: Sequence[tuple[int, str, int]]) -> list[tuple[int, str, int]]:
    """A CatalogFile's segments as a list (as JSON and NZB writers need them)."""
    return segments.listed() if isinstance(segments, Segments) else list(segments)


def _json_segments(
    segments: Sequence[tuple[int, str, int]],
) -> list[tuple[int, str, int]] | orjson.Fragment:
    """A CatalogFile's segments for orjson: their JSON text where it is made from the
    chunks' arrays (`Segments.json_text`), else the list."""
    if isinstance(segments, Segments):
        text = segments.json_text()
        if text is not None:
            return orjson.Fragment(text)
    return listed(segments)


@attrs.frozen
class CatalogFile:
    """A file of a catalog release with every segment seen of it."""

    name: str
    subject: str
    index: int | None
    total_segments: int
    posted: int
    # (k, message-id, bytes), by k: a list, or the merge's Segments (made when read).
    segments: Sequence[tuple[int, str, int]]


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
        repost_of: for a later post of a release by the same poster (a
            repost), the key of the first post; else None.
        sources: the release keys whose chunks it may hold (of the chains
            of its parts), sorted: merging those keys' chunks alone makes it
            again (the catalog rebuilds an NZB so).
        anchor: the first message-id of the file chunk its key was made of:
            stored with its row, and handed to the merges after (`Pins`), which
            keep its key for the generation that holds it.
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
    repost_of: builtins.bytes | None = None
    # Where it came from, not what it is: batch cuts make more or fewer keys.
    sources: tuple[builtins.bytes, ...] = attrs.field(default=(), eq=False)
    # The first message-id of the file chunk its key was made of (kept by `Pins`).
    anchor: str = attrs.field(default="", eq=False)
    # Its file chunks' earliest and latest date (each a batch's first line of its
    # file: a file posted over hours has its later chunks' dates here, not in its
    # `posted`); (0, 0) where one is not dated (catalog.row_span).
    dates: tuple[int, int] = attrs.field(default=(0, 0), eq=False)

    def to_json(self, *, fragments: bool = False) -> dict[str, Any]:
        """The release in the JSONL schema of `uidx index` and `uidx catalog export`.

        `fragments`: for orjson, each file's segments as their JSON text (an
        orjson.Fragment, the same bytes it writes of the list) where the compiled
        writer makes it (`Segments.json_text`), else the list.
        """
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
            "repost_of": None if self.repost_of is None else self.repost_of.hex(),
            "files": [
                {
                    "name": f.name,
                    "subject": f.subject,
                    "index": f.index,
                    "total_segments": f.total_segments,
                    "date": f.posted,
                    "segments": _json_segments(f.segments) if fragments else listed(f.segments),
                }
                for f in self.files
            ],
        }


# Generations of a repost chain a Memo keeps, by what its chunks were (see there).
_ChainMade = tuple[list[tuple[FileChunk, ...]], list[tuple["_Release", Part]]]
# An upload a Memo keeps: its members (kept: their identities are its key), its date,
# name and key, its files, and the release built of it (None until built).
_UploadMade = tuple[list["_Release"], int, str, bytes, list[_File], "list[CatalogRelease]"]


@attrs.define(eq=False)
class Memo:
    """What merging the same chunks made before, kept from build to build.

    A pending build merges again the keys around those a batch touched, and
    most of those did not change since the build before: the same stored
    fragments, which the catalog's reader keeps unpacked (store/catalog.py),
    so their files come back as the very same objects. A repost chain whose
    every release chunk is as before (its fields, and its files tuple the
    same object) has the generations it had, and an upload of the same
    generations the same release: a build takes them from here instead of
    making them again. Identity says "the same" here, never a guess: a chunk
    unpacked again is a new object and is merged again, and what is kept
    holds the objects its key names, so no identity is reused while kept.

    It is dropped whole (`cleared` counts how often) when the chains it keeps
    hold more than `segments` segments or it keeps more than `uploads` uploads:
    whatever else keeps a kept object (a row, core/catalog.Memo) goes with it,
    so the memory it holds stays bounded by those (besides the objects a
    build holds anyway).
    """

    segments: int = 2_000_000
    uploads: int = 100_000
    cleared: int = 0
    _chains: dict[tuple[object, ...], _ChainMade] = attrs.field(init=False, factory=dict)
    _held: int = attrs.field(init=False, default=0)  # segments of the chains kept
    _uploads: dict[tuple[object, ...], _UploadMade] = attrs.field(init=False, factory=dict)

    def chain(self, key: tuple[object, ...]) -> _ChainMade | None:
        return self._chains.get(key)

    def keep_chain(self, key: tuple[object, ...], made: _ChainMade) -> None:
        held = sum(map(len, map(_NUMBERS, chain.from_iterable(made[0]))))
        if self._held + held > self.segments:
            self.clear()
        self._chains[key] = made
        self._held += held

    def upload(self, key: tuple[object, ...]) -> _UploadMade | None:
        return self._uploads.get(key)

    def keep_upload(self, key: tuple[object, ...], made: _UploadMade) -> None:
        if len(self._uploads) >= self.uploads:
            self.clear()
        self._uploads[key] = made

    def clear(self) -> None:
        """Drop everything kept."""
        self._chains.clear()
        self._uploads.clear()
        self._held = 0
        self.cleared += 1


@attrs.define(eq=False)
class ReleaseMerger:
    """Gathers release chunks and hands out merged catalog releases.

    `memo`: what builds before made of the same chunks (see Memo), taken from
    and added to; None: everything is made here. `pure`: a file's figures by the
    pure code even where the compiled one (core/_fastmerge) is built. `pins`: the
    stored rows' anchors and guids by a release key of their sources (`Pins`), whose
    generations keep their keys (none: every key made as if nothing were stored).
    """

    memo: Memo | None = None
    pure: bool = False
    pins: Mapping[bytes, Pins] = attrs.field(factory=dict)
    _releases: dict[bytes, _Entry] = attrs.field(init=False, factory=dict)
    _probed: set[bytes] = attrs.field(init=False, factory=set)
    _added: int = attrs.field(init=False, default=0)

    def __len__(self) -> int:
        return len(self._releases)

    def add(self, chunk: ReleaseChunk) -> None:
        """Merge one release chunk (adding the same chunk twice changes nothing but `chunks`)."""
        release = self._releases.get(chunk.key)
        order = representative(chunk.files) if chunk.files else (1 << 63, b"")
        if release is None:
            release = self._releases[chunk.key] = _Entry(
                key=chunk.key,
                head_name=chunk.head_name,
                poster=chunk.poster,
                files_announced=chunk.files_announced,
                groups=set(chunk.groups),
                dropped=chunk.dropped,
                order=order,
                first=chunk,
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
        self._added += 1
        release.files.extend(zip(chunk.files, repeat(self._added)))
        release.fields[self._added] = (order, chunk.head_name, chunk.poster, chunk.files_announced)
        if self.memo is not None:
            release.came.append(
                (
                    chunk.head_name,
                    chunk.poster,
                    chunk.groups,
                    chunk.files_announced,
                    chunk.dropped,
                    id(chunk.files),
                )
            )
            release.held.append(chunk.files)

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
        order: list[tuple[int, str, bytes, list[_Release], list[_File], list[CatalogRelease]]] = []
        made = list(self._generations())
        generations = {g.link_key: g for g, _ in made}
        parts = {g.link_key: part for g, part in made}
        for keys in link(parts.values()):
            members = [generations[key] for key in keys]
            probed = tuple(map(self._candidate, members))
            memo_key = (*map(id, members), *probed)
            upload = None if self.memo is None else self.memo.upload(memo_key)
            if upload is None:
                files = sorted(
                    chain.from_iterable(member.files.values() for member in members),
                    key=_file_order,
                )
                # The earliest file's date: the earliest of the parts' (Part.first, 0 if
                # undated).
                posted = min((parts[key].first for key in keys if parts[key].first), default=0)
                # One part: the name its Part already has (release_name of its files).
                name = (
                    parts[keys[0]].name
                    if len(keys) == 1
                    else upload_name(
                        [m.head_name for m in members], ((f.name, f.total_segments) for f in files)
                    )
                )
                upload = (members, posted, name, upload_key(keys), files, [])
                if self.memo is not None:
                    self.memo.keep_upload(memo_key, upload)
            _, posted, name, key, files, built = upload
            order.append((posted, name, key, members, files, built))
        order.sort(key=lambda o: o[:3])
        return (
            self._built(members, files, name, built) for _, name, _, members, files, built in order
        )

    def _built(
        self, members: list[_Release], files: list[_File], name: str, built: list[CatalogRelease]
    ) -> CatalogRelease:
        """The upload's release: built before (`built`, a Memo's), else built now (and
        kept in `built` only for a memo: without one the caller lets it go once written,
        and `releases` holds no release it handed out)."""
        if built:
            return built[0]
        release = self._build(members, files, name)
        if self.memo is not None:
            built.append(release)
        return release

    def _generations(self) -> Iterator[tuple[_Release, Part]]:
        """Every key's chunks and its repost keys' chunks, as generations (see above),
        each with its Part."""
        entries = self._releases
        # Each key's repost key among the entries: hashed once per key.
        following = {key: later for key in entries if (later := repost_key(key)) in entries}
        reposts = set(following.values())
        memo = self.memo
        for key, entry in entries.items():
            if key in reposts:
                continue  # taken with the key it is a repost of
            chain = [entry]
            while (next_key := following.get(chain[-1].key)) is not None:
                chain.append(entries[next_key])
            pins = self.pins.get(key, ())
            if memo is None:
                yield from self._split(chain, pins)
                continue
            memo_key = (pins, *((e.key, *e.came) for e in chain))
            made = memo.chain(memo_key)
            if made is None:
                made = (
                    [files for e in chain for files in e.held],
                    list(self._split(chain, pins)),
                )
                memo.keep_chain(memo_key, made)
            yield from made[1]

    def _split(self, chain: list[_Entry], pins: Pins) -> Iterator[tuple[_Release, Part]]:
        sources = tuple(entry.key for entry in chain)
        for generation in _split(chain, pins):
            generation.sources = sources
            yield generation, _part(generation)

    def _candidate(self, generation: _Release) -> bool:
        """Whether a batch reported a probe candidate under a key the generation's files
        came under: its own key, or (the repost's chunk of a batch that saw no earlier
        pass) the release key, whose generation is the first post's."""
        return not self._probed.isdisjoint(generation.came_under)

    def _build(self, members: list[_Release], files: list[_File], name: str) -> CatalogRelease:
        release = members[0]
        made = (
            None
            if self.pure or COMPILED_FILES is None
            else COMPILED_FILES(files, CatalogFile, Segments)
        )
        built, seen, size, posted = _files_built(files, pure=self.pure) if made is None else made
        announced = _announced(members)
        # Its key: a stored row's one of its parts kept (parts are linked in order of
        # date, then of key: a part keyed anew may come before), else its first part's.
        keyed = next((member for member in members if member.kept), release)
        return CatalogRelease(
            key=keyed.key,
            name=name,
            poster=release.poster,
            groups=tuple(sorted(set().union(*(m.groups for m in members)))),
            posted=posted,
            files_announced=release.files_announced,
            complete=min(1.0, seen / announced) if announced else 0.0,
            bytes=size,
            probe_candidate=any(map(self._candidate, members)),
            dropped=release.dropped,
            chunks=sum(m.chunks for m in members),
            files=tuple(built),
            repost_of=release.repost_of,
            sources=tuple(sorted({key for m in members for key in m.sources})),
            anchor=keyed.anchor,
            dates=_chunk_dates(files),
        )


def _chunk_dates(files: list[_File]) -> tuple[int, int]:
    """The earliest and latest date of the files' chunks; (0, 0) where one is not dated."""
    dates = [chunk.posted for file in files for chunk in file.chunks]
    low = min(dates, default=0)
    return (0, 0) if low <= 0 else (low, max(dates))


# An upload's merged files made catalog files, with their figures summed: (the files,
# segments seen, the bytes they hold, the earliest date or 0). The compiled twin of
# `_files_built` (core/_fastmerge.pyx) answers None where the pure code must.
FilesBuilt = tuple[list[CatalogFile], int, int, int]


def _compiled_files() -> Callable[[list[_File], type, type], FilesBuilt | None] | None:
    """The compiled twin of `_files_built`, or None where it was not built."""
    try:
        from usenet_indexer.core._fastmerge import files_built
    except ImportError:
        return None
    return files_built


def _files_built(files: list[_File], *, pure: bool = False) -> FilesBuilt:
    """An upload's files (in file order) as catalog files, each file's segments a
    `Segments` with its figures, and (segments seen, bytes, earliest date or 0) summed;
    `pure`: the figures by the pure code. The oracle of `_fastmerge.files_built`."""
    built = []
    seen = size = posted = 0
    for f in files:  # one pass: a build makes every release of the keys around a batch
        # Bytes of the segments kept: a segment posted again (a repost in a
        # later batch) counts once, like it does in the segment list.
        count, held, distinct = figures(f.chunks, pure=pure)
        built.append(
            CatalogFile(
                f.name, f.subject, f.index, f.total_segments, f.posted, Segments(f, count, distinct)
            )
        )
        seen += count
        size += held
        if f.posted and (not posted or f.posted < posted):
            posted = f.posted
    return built, seen, size, posted


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
    files = list(release.files.values())
    dated = [f.posted for f in files if f.posted]
    return Part(
        key=release.link_key,
        poster=release.poster,
        files_announced=release.files_announced,
        indexes=frozenset([f.index for f in files if f.index is not None]),
        first=min(dated) if dated else 0,
        last=_first_run_end(dated),
        dropped=release.dropped is not None,
        name=(
            release.name
            if release.name is not None
            else release_name(release.head_name, ((f.name, f.total_segments) for f in files))
        ),
        files=frozenset([f.name for f in files]),
        headless=release.head_name is None,
        numbered=frozenset([(f.index, f.name) for f in files if f.index is not None]),
    )


def _first_run_end(dated: list[int]) -> int:
    """The date of the last file of a release's first run: its files from the
    earliest on, each posted within APART_SECONDS of the one before (0: none dated).

    `uploads.link` joins parts posted together; a release whose files were
    posted again days later (its poster filling it in: one generation) reaches
    no further for that than its first run, so the parts its poster posted in
    between are not joined to it for being between, and a build need not look
    at them when it is filled in (catalog.Closure: windows around runs).
    """
    if not dated:
        return 0
    ordered = sorted(dated)
    end = ordered[0]
    for posted in ordered[1:]:
        if posted - end > APART_SECONDS:
            break
        end = posted
    return end


def _split(chain: list[_Entry], pins: Pins = ()) -> list[_Release]:
    """The generations of a release from its entries (its key's and its repost keys'),
    keyed (`_keyed`, keeping the stored rows' keys `pins`).

    See the module's docstring.
    """
    base = chain[0]
    if len(chain) == 1 and (only := _only_generation(base)) is not None:
        _keyed(base.key, [only], pins)
        return [only]
    generations = [_generation(base, base.key)]
    placed: list[_Placed] = []
    # The pieces (release chunks: a batch's chunk under one key of the chain),
    # in order of date, then of content: never of the order they came in.
    pieces: dict[tuple[int, int], list[FileChunk]] = {}
    for at, entry in enumerate(chain):
        for file, source in entry.files:
            pieces.setdefault((at, source), []).append(file)
    latest = [0]  # the latest date in each generation (0: none yet)
    names: list[dict[str, bytes]] = [{}]  # each generation's file names, and their keys
    indexes: list[dict[int, str]] = [{}]  # each generation's [i/M] numbers, and their names
    posters: list[set[str]] = [set()]  # the posters of the chunks each generation holds
    counted: list[set[int]] = [set()]  # and their [i/M]'s M, where 2 or more
    poster_of = {number: got[2] for entry in chain for number, got in entry.fields.items()}
    m_of = {number: got[3] for entry in chain for number, got in entry.fields.items()}
    shared = base.poster.strip().lower() in TOOL_FROMS
    reposted = _Reposted(chain)
    # Every numbered file's date and [i/M] number, in order of date (`_another_post`).
    numbered = sorted(
        (f.posted, f.index)
        for fs in pieces.values()
        for f in fs
        if f.posted and f.index is not None
    )
    for (_, source), files in sorted(pieces.items(), key=lambda item: _piece_order(item[1])):
        # In order of date, each file to the generation nearest in date of
        # those that hold none of it under other message-ids (a new one if
        # none), never to one before its piece's earlier files'; of those, to
        # one that holds a chunk of the piece's poster where one does.
        floor = 0
        poster, m = poster_of[source], m_of[source]
        # Another poster's generation that holds a file of a name the piece has
        # under another key: the piece is another upload of that release name (two
        # posters posting one release at once), all of it, not only that file; a
        # file of it posted in the same second as the clashing one but sorted before
        # it went to that generation, and each upload lost a file to the other.
        clashing = {
            g
            for g in range(len(generations))
            if posters[g]
            and poster not in posters[g]
            and any(names[g].get(file.name, file.key) != file.key for file in files)
        }
        decided: list[_Placed] = []
        placed_latest: dict[int, int] = {}  # the latest file of the piece each holds
        for file in sorted(files, key=_file_chunk_order if shared else _counter_order):
            posted = file.posted or UNDATED
            levels = {
                g: _posted_again(generations[g], file) for g in range(floor, len(generations))
            }
            choices = [
                g
                for g, level in levels.items()
                if level != _AGAIN
                and g not in clashing
                # A file of that name from another poster: another upload's.
                and names[g].get(file.name, file.key) == file.key
                # Another name as the generation's i-th file: another upload's.
                and (
                    file.index is None
                    or _one_upload(indexes[g].get(file.index, file.name), file.name)
                )
                # A file numbered before every file the generation holds, posted
                # minutes after them, and followed by one of their numbers again: a
                # tool posts an upload's files in the order of their counter, so
                # another post's first (a repost of an upload whose first post lost
                # its first file). Not followed so: a part filled in.
                and not (
                    file.index is not None
                    and indexes[g]
                    and file.index < min(indexes[g])
                    and file.posted
                    and _another_post(
                        numbered,
                        posted,
                        file.index,
                        indexes[g],
                        posted - max(latest[g], placed_latest.get(g, 0)),
                    )
                )
                and (
                    not shared
                    or file.key in generations[g].files
                    or not file.posted
                    or not latest[g]
                    or abs(posted - latest[g]) <= APART_SECONDS
                )
                # Another poster's file of another upload's [i/M], or hours away:
                # another upload's (a track of another uploader's album keyed by its
                # name; the indexer gives it a chunk of its own, `_poster_chunks`),
                # but for a file posted on its own (M under 2 or none: an .nfo [1/1]
                # under a random From, weeks after its rar set's [01/36]).
                and (
                    poster in posters[g]
                    or m is None
                    or m < 2
                    or (
                        (not counted[g] or m in counted[g])
                        and (
                            not file.posted
                            or not latest[g]
                            or abs(posted - latest[g]) <= APART_SECONDS
                        )
                    )
                )
            ]
            if choices:
                # Two posters' uploads of one name at once (the indexer gives each its
                # own chunk): a batch cut leaves each poster's later files as near in
                # date to the other's earlier ones as to their own.
                own = [g for g in choices if poster in posters[g]]
                place = min(own or choices, key=lambda g: (abs(posted - latest[g]), g))
            else:
                place = len(generations)
                generations.append(_generation(base, base.key))  # keyed at the end
                latest.append(0)
                names.append({})
                indexes.append({})
                posters.append(set())
                counted.append(set())
                levels[place] = _NOTHING_AGAIN
            decided.append(_Placed(file, source, place, levels[place]))
            placed_latest[place] = max(placed_latest.get(place, 0), file.posted)
            names[place].setdefault(file.name, file.key)
            if file.index is not None:
                indexes[place].setdefault(file.index, file.name)
            floor = place
        # Files of the piece that post some of a generation again just before
        # one that went on to a later one (a repost of files its first post
        # lost segments of).
        _go_on(decided, settle=True)
        _join_next(decided, generations, latest, reposted)
        for item in decided:
            _merge_file(generations[item.place].files, item.file)
            latest[item.place] = max(latest[item.place], item.file.posted)
            posters[item.place].add(poster)
            if m is not None and m > 1:
                counted[item.place].add(m)
        placed += decided
    # A file's chunk likewise, before its next chunk (a batch cut between a
    # repost's first segments and the rest).
    by_file: dict[bytes, list[_Placed]] = {}
    for item in placed:
        by_file.setdefault(item.file.key, []).append(item)
    moved = False
    for items in by_file.values():
        items.sort(key=lambda item: _file_chunk_order(item.file))
        moved |= _go_on(items, settle=False, resent=_resent)
        moved |= _copies_in_order(items)
    if moved:
        for generation in generations:
            generation.files = {}
        for item in placed:
            _merge_file(generations[item.place].files, item.file)
    sources: list[set[int]] = [set() for _ in generations]
    for item in placed:
        sources[item.place].add(item.source)
    fields = {number: got for entry in chain for number, got in entry.fields.items()}
    under = {source: chain[at].key for at, source in pieces}
    for generation, came_in in zip(generations, sources, strict=True):
        generation.chunks = len(came_in)
        # The keys of the chunks it holds: a repost's chunk of a batch that saw no
        # earlier pass comes under the release key, beside the first post's.
        generation.came_under = frozenset(under[number] for number in came_in)
        # Poster, head and [i/M] of the earliest chunk that speaks for it (its
        # earliest file is one of the generation's: another poster's upload of
        # one name has its own), else of the release.
        speaking = [fields[number] for number in came_in if _holds(generation, fields[number][0])]
        if speaking:
            order, head, poster, announced = min(speaking)
            generation.order, generation.head_name = order, head
            generation.poster, generation.files_announced = poster, announced
    _subjects(chain, generations)
    made = [g for g in generations if g.files]
    _keyed(base.key, made, pins)
    for generation in made[1:]:
        if generation.poster == made[0].poster:
            generation.repost_of = made[0].key
    return made


def _keyed(key: bytes, made: list[_Release], pins: Pins = ()) -> None:
    """Give each generation its key (its row's guid) and the anchor it is kept by.

    A generation that holds a stored row's anchor keeps that row's key (`pins`: of
    the rows whose key is of the release key `key`; of two, the one of its earlier
    file chunk). Each other one gets a key of its own: the earliest (the first upload)
    the release key where no row keeps it, each later one a key of its own upload's
    (`reposts.generation_key` of the release key and the first message-id of its
    earliest file chunk), never of its place among the generations; its anchor is
    that message-id. So an upload indexed late (a backfill), earlier than the others
    or than its own earliest file chunk, moves no stored row's key to other content.
    """
    if not made:
        return
    firsts = [
        min(
            (chunk for file in generation.files.values() for chunk in file.chunks),
            key=_file_chunk_order,
        )
        for generation in made
    ]
    earliest = [chunk.first_message_id for chunk in firsts]
    # The keys as if no row were stored: `link` orders parts by them (its result is
    # then of the chunks alone, whatever the catalog's history; a tie of two parts
    # posted in one second went by a key the pins gave).
    taken: set[bytes] = set()
    for at, generation in enumerate(made):
        generation.link_key = _own(key, at, earliest[at], taken)
    kept, stored = _kept(key, made, pins, firsts) if pins else ({}, set())
    # Every stored row's key of the release key, kept or not: a row whose anchor went
    # to a generation that kept another row's is gone (its content is in that one),
    # and its key is given to no other content (helper-103's seeded case 208).
    taken = set(stored)
    for at, generation in enumerate(made):
        generation.kept = at in kept
        if generation.kept:
            generation.key, generation.anchor = kept[at]
        else:
            generation.key, generation.anchor = _own(key, at, earliest[at], taken), earliest[at]


def _own(key: bytes, at: int, earliest: str, taken: set[bytes]) -> bytes:
    """The key of the `at`-th generation of release `key` whose earliest file chunk
    starts with `earliest`, of those not `taken` (added to it)."""
    own = key if at == 0 and key not in taken else generation_key(key, earliest)
    while own in taken:  # two generations with one earliest message-id
        own = repost_key(own)
    taken.add(own)
    return own


def _kept(
    key: bytes, made: list[_Release], pins: Pins, firsts: list[FileChunk]
) -> tuple[dict[int, tuple[bytes, str]], set[bytes]]:
    """The stored keys (and anchors) the generations keep, by their place in `made`
    (`firsts`: each one's earliest file chunk).

    A pin's key is the release key's: itself, or `generation_key` of it and the
    anchor (or a `repost_key` of that: two generations with one earliest
    message-id). A generation holds a pin's anchor as a file chunk's first
    message-id (as any segment's when no chunk starts with it: its range indexed
    again in other batches). One anchor can start chunks of two generations (a
    batch that saw no earlier pass cuts a chunk of one upload's last segments and
    the next one's first), so each anchor goes to one generation and each
    generation keeps one pin: first to a generation whose own earliest file chunk
    starts with it (as its key was made), then by the order of the chunks. Two rows
    can have one anchor (two generations with one earliest message-id): each of
    the generations that hold it keeps one of their keys, in the order made.

    Also every stored key of the release key's, kept or not (`_keyed` gives none of
    them to a generation that keeps none: a row whose anchor went to a generation
    that kept another's is gone, and its key goes to no other content).
    """
    # Each anchor's rows' keys, in the order `_own` gives them (two generations with
    # one earliest message-id: the release key, then generation_key, then its
    # repost_keys), as (order, key).
    wanted: dict[str, list[tuple[int, bytes]]] = {}
    for anchor, guid in pins:
        own = generation_key(key, anchor)
        for depth in range(len(made)):
            if guid in (key, own):
                wanted.setdefault(anchor, []).append((-1 if guid == key else depth, guid))
                break
            own = repost_key(own)
    if not wanted:
        return {}, set()
    for guids in wanted.values():
        guids.sort()
    # (not its own earliest, chunk order, generation, anchor) of each holding
    held: list[tuple[bool, tuple[int, bytes, str], int, str]] = []
    for at, generation in enumerate(made):
        for file in generation.files.values():
            for chunk in file.chunks:
                anchor = chunk.first_message_id
                if anchor in wanted:
                    held.append((chunk is not firsts[at], _file_chunk_order(chunk), at, anchor))
    left = set(wanted).difference(anchor for *_, anchor in held)
    for anchor in sorted(left):
        holding = (
            (at, chunk)
            for at, generation in enumerate(made)
            for file in generation.files.values()
            for chunk in file.chunks
            if _holds_id(chunk.message_ids, anchor)
        )
        for at, chunk in holding:
            held.append((True, _file_chunk_order(chunk), at, anchor))
            break
    kept: dict[int, tuple[bytes, str]] = {}
    given: dict[str, int] = {}
    for *_, at, anchor in sorted(held):
        n = given.get(anchor, 0)
        if n < len(wanted[anchor]) and at not in kept:
            given[anchor] = n + 1
            kept[at] = (wanted[anchor][n][1], anchor)
    return kept, {guid for guids in wanted.values() for _, guid in guids}


def _holds_id(ids: str, message_id: str) -> bool:
    """Whether `ids` (message-ids joined by newlines) holds `message_id`."""
    end = len(message_id)
    at = ids.find(message_id)
    while at >= 0:
        if (at == 0 or ids[at - 1] == "\n") and (at + end == len(ids) or ids[at + end] == "\n"):
            return True
        at = ids.find(message_id, at + 1)
    return False


@attrs.define(eq=False)
class _Placed:
    """Where a file chunk went: its release chunk's number, its generation, what it posts again."""

    file: FileChunk
    source: int
    place: int
    level: int


def _go_on(
    items: list[_Placed],
    *,
    settle: bool,
    resent: Callable[[list[_Placed], int], bool] | None = None,
) -> bool:
    """Move each chunk that posts some of its generation again to the generation of the
    chunk after it when that one is later; whether any moved. `settle`: a moved chunk
    posts nothing again where it went (the files of one piece, told apart). `resent`:
    tells the chunk at a place that stays (a post check's re-send)."""
    moved = False
    for at in reversed(range(len(items) - 1)):
        item, following = items[at], items[at + 1]
        if item.level == _SOME_AGAIN and following.place > item.place:
            if resent is not None and resent(items, at):
                continue
            item.place = following.place
            if settle:
                item.level = _NOTHING_AGAIN
            moved = True
    return moved


def _copies_in_order(items: list[_Placed]) -> bool:
    """Put the copies of one file (its chunks in each generation; `items` in
    `_file_chunk_order`) in the generations in that order: the earliest copy in the
    earliest of them; whether any chunk moved.

    Pieces are placed in order of their earliest file, and a piece that holds a later
    copy of a file can come before the one holding the earlier: a post's .nfo alone in
    a batch, the rest of the post and its repost's .nfo in the next, all dated in one
    second. The copies then went to the generations the other way round, by where a
    batch cut fell; in one pass the post keeps its own."""
    copies: dict[int, list[_Placed]] = {}
    for item in items:
        copies.setdefault(item.place, []).append(item)
    if len(copies) < 2:
        return False
    ordered = sorted(copies.values(), key=lambda copy: _file_chunk_order(copy[0].file))
    moved = False
    for place, copy in zip(sorted(copies), ordered, strict=True):
        for item in copy:
            moved |= item.place != place
            item.place = place
    return moved


def _join_next(
    decided: list[_Placed],
    generations: list[_Release],
    latest: list[int],
    reposted: Container[tuple[bytes, str]],
) -> None:
    """Move each file of a piece that is new to its generation, just before one that went
    on to a later generation, there when it is nearer in date to that one than to its
    generation's latest file: the first files of a repost (or of another upload under
    the key) that its first post did not have, so nothing held them back.

    Never a file posted again later (`reposted`: its copy there is the repost's): the
    last files of a post (its par2 set), seconds before its repost's first, are the
    post's own. Whether they come in one piece with the repost's first file is where a
    batch cut falls; that the file is posted again is not.

    The generation's latest file is one it held before the piece, or one of the piece
    that goes on a file it holds: never one of the piece's other new files. A tool posts
    an upload's files one after another, so a repost's first new files (NewsUP's renamed
    par2 set before its fixed `rename.with.this.par2`) come a second or so apart; each
    is nearer to the next of them than to the file the generation last held, and they
    all go on with the file that went to the later generation. A tool posts them in the
    order of its file counter too: a file numbered after every file the generation
    holds (a sample set after the volumes) goes on its generation's upload, and stays.
    """
    for at in reversed(range(len(decided) - 1)):
        item, following = decided[at], decided[at + 1]
        posted = item.file.posted
        held = generations[item.place].files
        if (
            item.level != _NOTHING_AGAIN
            or following.place <= item.place
            or not posted
            or not following.file.posted
            or item.file.key in held
            or _numbered_after(item.file.index, held)
            or (item.file.key, item.file.first_message_id) in reposted
        ):
            continue
        before = max(latest[item.place], _posted_before(decided, at, held))
        if before and following.file.posted - posted < posted - before:
            item.place = following.place


@attrs.define(eq=False)
class _Reposted:
    """`_reposted(chain)`, worked out at the first look only: `_join_next` asks it last,
    after the checks that settle most files (it reads every segment of the chain's
    files that repeat numbers: a tenth of `uidx index`'s merge, asked for or not)."""

    chain: list[_Entry]
    _found: set[tuple[bytes, str]] | None = None

    def __contains__(self, file: object) -> bool:
        if self._found is None:
            self._found = _reposted(self.chain)
        return file in self._found


def _reposted(chain: list[_Entry]) -> set[tuple[bytes, str]]:
    """The file chunks (key, first message-id) of a chain whose file is posted again
    after them: the file's later chunks (in `_file_chunk_order`) hold min(RUN, n) of a
    chunk's n numbers under other message-ids (a post check re-sends one segment of a
    file of many). The later chunks are taken together, so how a batch cut them does
    not matter."""
    by_file: dict[bytes, list[FileChunk]] = {}
    for entry in chain:
        for file, _ in entry.files:
            by_file.setdefault(file.key, []).append(file)
    found: set[tuple[bytes, str]] = set()
    for files in by_file.values():
        if _distinct(files):
            continue  # no number twice (one chunk, or a file a batch cut): none again
        later: dict[int, set[str]] = {}  # the message-ids of each number, in later chunks
        for file in sorted(files, key=_file_chunk_order, reverse=True):
            pairs = list(file.numbered_ids())
            other = 0
            for number, message_id in pairs:
                ids = later.get(number)
                if ids is not None and (len(ids) > 1 or message_id not in ids):
                    other += 1
            if pairs and other >= min(RUN, len(pairs)):
                found.add((file.key, file.first_message_id))
            for number, message_id in pairs:
                later.setdefault(number, set()).add(message_id)
    return found


def _numbered_after(index: int | None, held: dict[bytes, _File]) -> bool:
    """Whether a file's [i/M] comes after those of every numbered file a generation holds
    (False when it or they have none)."""
    if index is None:
        return False
    highest = max((f.index for f in held.values() if f.index is not None), default=None)
    return highest is not None and index > highest


def _resent(items: list[_Placed], at: int) -> bool:
    """Whether a file's chunk that posts some numbers again is a post check's re-send of
    its generation's post of the file, not the start of the next (a batch cut inside a
    repost): it comes nearer in date to that post than to the file's next chunk."""
    item, following = items[at], items[at + 1]
    before = _posted_before(items, at)
    if not before or not item.file.posted or not following.file.posted:
        return False
    return item.file.posted - before < following.file.posted - item.file.posted


def _posted_before(items: list[_Placed], at: int, held: Container[bytes] | None = None) -> int:
    """The latest date of the items before `at` placed where it is (0: none dated);
    `held`: of those, only the items of these file keys."""
    place = items[at].place
    return max(
        (
            i.file.posted
            for i in items[:at]
            if i.place == place and (held is None or i.file.key in held)
        ),
        default=0,
    )


def _holds(generation: _Release, order: tuple[int, bytes]) -> bool:
    """Whether a generation holds the file chunk a release chunk's order names (date, key)."""
    posted, key = order
    file = generation.files.get(key)
    return file is not None and any((c.posted or UNDATED) == posted for c in file.chunks)


def _file_chunk_order(file: FileChunk) -> tuple[int, bytes, str]:
    return (file.posted or UNDATED, file.key, file.first_message_id)


def _counter_order(file: FileChunk) -> tuple[int, int, bytes, str]:
    """A file's place in its piece: its date, then its [i/M] number (a tool posts an
    upload's files in the order of its counter: of a repost's .nfo and the first
    volume its first post lost, posted in one second, the .nfo first), then as
    `_file_chunk_order`."""
    index = -1 if file.index is None else file.index
    return (file.posted or UNDATED, index, file.key, file.first_message_id)


def _piece_order(files: list[FileChunk]) -> tuple[int, int, bytes, str]:
    """A piece's place: its earliest file's date, then the lowest [i/M] number of its files
    of that date (a tool posts in the order of its counter: of two pieces cut in one
    second, the one holding the upload's first files), then its smallest file key and
    message-id."""
    posted = min((f.posted for f in files if f.posted), default=UNDATED)
    first = min(
        (f.index for f in files if (f.posted or UNDATED) == posted and f.index is not None),
        default=-1,
    )
    low = min(f.key for f in files)
    return (posted, first, low, min(f.first_message_id for f in files if f.key == low))


def _only_generation(entry: _Entry) -> _Release | None:
    """The entry as its one generation, or None when a file key comes more than once
    in its chunks, a file name under two keys, an [i/M] number under names of two
    stems (another upload's i-th file: random names under one poster and M share a
    key; an .nfo posted as [1/1] beside a rar set's [1/36] is of its stem), or,
    under a tool's From, a file posted more than APART_SECONDS from those before it
    (`_together`), or chunks of several posters with several M of 2 or more or so far
    apart (another uploader's upload with a file of one name): then `_split` places
    its pieces.

    Most entries are one generation: their files are made in one pass, without
    the checks of `_merge_file`.
    """
    files: dict[bytes, _File] = {}
    for chunk, _ in entry.files:
        if chunk.key in files:
            return None
        files[chunk.key] = _new_file(chunk)
    if len({file.name for file in files.values()}) < len(files):
        return None
    numbered: dict[int, str] = {}
    for file in files.values():
        if file.index is not None and not _one_upload(
            numbered.setdefault(file.index, file.name), file.name
        ):
            return None
    if entry.poster.strip().lower() in TOOL_FROMS and not _together(entry):
        return None  # `_split` starts another generation there
    if _counter_restarts(files.values()):
        return None  # another post's first file: `_split` starts its generation
    if len({fields[2] for fields in entry.fields.values()}) > 1 and (
        _other_m([{fields[3]} for fields in entry.fields.values()]) or not _together(entry)
    ):
        return None  # several posters' uploads: `_split` tells them apart
    only = _generation(entry, entry.key)
    only.files = files
    only.chunks = entry.chunks
    only.came_under = frozenset((entry.key,))
    if entry.chunks == 1 and entry.first is not None:
        # Its one chunk's head and files: `_part`'s release_name of them is the chunk's
        # name (release_name reads the files as a set: max by kind and size, then min
        # by name), made once for both.
        only.name = entry.first.name
    return only


def _counter_restarts(files: Iterable[_File]) -> bool:
    """Whether, in order of date, a file is numbered before every file posted before it
    and is another post's first (`_another_post`: `_split` starts another generation
    for it)."""
    dated = sorted((f.posted, f.index) for f in files if f.posted and f.index is not None)
    lowest, latest = None, 0
    seen: set[int] = set()
    for posted, index in dated:
        if (
            lowest is not None
            and index < lowest
            and _another_post(dated, posted, index, seen, posted - latest)
        ):
            return True
        lowest = index if lowest is None else min(lowest, index)
        latest = max(latest, posted)
        seen.add(index)
    return False


def _another_post(
    numbered: Sequence[tuple[int, int]],
    posted: int,
    index: int,
    held: Collection[int],
    pause: int,
) -> bool:
    """Whether file `index`, numbered before every number `held` (a generation's) and
    posted at `posted`, `pause` seconds after the latest of those files, is another
    post's first file: more than RESTART_SECONDS after them, it begins a run of numbers
    below theirs, in counter order, that goes on to one of theirs within APART_SECONDS.
    `numbered`: every numbered file's date and [i/M] number, in order of date (of one
    second, in the order of the counter, as a tool posts them)."""
    if pause <= RESTART_SECONDS:
        return False
    at = bisect_right(numbered, (posted, index))
    low = min(held)
    last = index
    while at < len(numbered) and numbered[at][0] - posted <= APART_SECONDS:
        number = numbered[at][1]
        if number in held:
            return True
        if number <= last or number >= low:
            return False  # out of counter order, or a number new to the generation
        last = number
        at += 1
    return False


def _one_upload(held: str, name: str) -> bool:
    """Whether a file `name` may be the i-th file of a generation whose i-th is `held`
    (`_split` and `_only_generation` alike): the same name, or one of its stem (an .nfo
    posted as [1/1] beside a rar set's [1/36]); another name is another upload's."""
    return held == name or file_stem(held).lower() == file_stem(name).lower()


def _together(entry: _Entry) -> bool:
    """Whether, taken as `_split` takes them (piece by piece in order of date), each
    of an entry's dated files is posted within APART_SECONDS of the latest file
    before its piece. Under a tool's From `_split` starts a new generation for a
    file that is not: one key's files posted days apart are two uploads there,
    whether or not a file key repeats (the catalog build's closure counts on
    it: core/catalog.py's `_runs`)."""
    dated = [chunk.posted for chunk, _ in entry.files if chunk.posted]
    if not dated or max(dated) - min(dated) <= APART_SECONDS:
        return True
    pieces: dict[int, list[FileChunk]] = {}
    for chunk, source in entry.files:
        pieces.setdefault(source, []).append(chunk)
    latest = 0
    for piece in sorted(pieces.values(), key=_piece_order):
        posted = [chunk.posted for chunk in piece if chunk.posted]
        if latest and any(abs(p - latest) > APART_SECONDS for p in posted):
            return False
        latest = max([latest, *posted])
    return True


def _generation(entry: _Entry, key: bytes) -> _Release:
    return _Release(
        key=key,
        head_name=entry.head_name,
        poster=entry.poster,
        files_announced=entry.files_announced,
        groups=entry.groups,
        dropped=entry.dropped,
        order=entry.order,
    )


# What a file chunk posts again of what a generation holds: nothing, some
# numbers, or min(RUN, N) of them (a post of its own).
_NOTHING_AGAIN, _SOME_AGAIN, _AGAIN = 0, 1, 2


def _posted_again(generation: _Release, chunk: FileChunk) -> int:
    """How much of a file chunk a generation holds under other message-ids (see above)."""
    file = generation.files.get(chunk.key)
    if file is None or _apart(file, chunk):
        return _NOTHING_AGAIN
    held = _held(file)
    again = [
        number
        for number, message_id in chunk.numbered_ids()
        if held.get(number, message_id) != message_id
    ]
    other = len(again)
    if other >= min(RUN, chunk.total_segments) and not _resends_then_more(again, chunk, held, file):
        return _AGAIN
    if other == len(held) and (
        len(chunk.numbers) - other >= RUN or len(chunk.numbers) == chunk.total_segments
    ):
        # All it holds again, and more (RUN more, or the whole file: a file
        # of a few segments): a repost of a file its first post lost most of
        # (a takedown), not a post check's re-send, which re-sends the
        # segment that failed and never the file's others.
        return _AGAIN
    return _SOME_AGAIN if other else _NOTHING_AGAIN


def _resends_then_more(
    again: list[int], chunk: FileChunk, held: Mapping[int, str], file: _File
) -> bool:
    """Whether a chunk's numbers posted again are a post check's re-sends: no more than
    RUN of them, each posted within RESEND_SECONDS after the chunk that first posted it,
    and below every number of the chunk new to the file, which go on from the file's
    highest (or, after the file's last segment, no new number: a few of a larger file).
    A tool re-posts what its check found missing as it goes on posting (several falling
    due at once come in a row); a repost starts the file over: a batch cut inside one
    leaves its numbers posted again among its new ones (what a takedown left of the
    first post), and a later one posts them again hours or days after.
    """
    if len(again) > RUN or not chunk.posted:
        return False
    # Each within RESEND_SECONDS after the chunk that first posted its number.
    first_posted: dict[int, int] = {}
    for earlier in reversed(file.chunks):  # as `_held`: the first chunk's wins
        first_posted.update(dict.fromkeys(earlier.numbers, earlier.posted))
    if not all(
        0 < first_posted[number] <= chunk.posted <= first_posted[number] + RESEND_SECONDS
        for number in again
    ):
        return False
    fresh = [number for number in chunk.numbers if number not in held]
    if not fresh:
        # Re-sent after the file's last segment (the tool posts the next file): a
        # few of a larger file, not all of them; a batch cut just after a repost's
        # first segments looks the same, and `_go_on` then moves the chunk on to
        # the repost's rest when it is nearer in date to that (`_resent`).
        return len(again) < chunk.total_segments and len(again) < len(held)
    return max(again) < fresh[0] and fresh[0] > max(held)


def _apart(file: _File, chunk: FileChunk) -> bool:
    """Whether a chunk's numbers lie outside the span of each of the file's chunks (a
    file a batch cut in two, most often): then none is held again, which `_posted_again`
    would find segment by segment."""
    numbers = chunk.numbers
    if not numbers or chunk.total_segments < 1:
        return False
    first, last = numbers[0], numbers[-1]
    return all(c.numbers and (c.numbers[-1] < first or c.numbers[0] > last) for c in file.chunks)


def _held(file: _File) -> dict[int, str]:
    """The message-id of each number a file holds, as `_File.segments` has them (the
    first chunk's wins), without making its segment list: only the ids are compared."""
    held: dict[int, str] = {}
    for chunk in reversed(file.chunks):
        held.update(chunk.numbered_ids())
    return held


def _merge_file(files: dict[bytes, _File], chunk: FileChunk) -> None:
    file = files.get(chunk.key)
    if file is None:
        files[chunk.key] = _new_file(chunk)
        return
    if chunk.posted and (not file.posted or chunk.posted < file.posted):
        file.posted = chunk.posted
    file.chunks.append(chunk)


def _subjects(chain: list[_Entry], generations: list[_Release]) -> None:
    """Give each file of the generations the fullest subject of its key's chunks in the
    chain: the longest (a batch that saw no segment under 10 of a "(01/30)" file wrote
    "(1/30)": it cannot tell how the poster pads, and one pass gives every post of the
    file the subject of its first line there), then the first in order of text; whatever
    the order the chunks come in and the generations they went to."""
    fullest: dict[bytes, str] = {}
    for entry in chain:
        for chunk, _ in entry.files:
            held = fullest.get(chunk.key)
            if held is None or (len(chunk.subject), held) > (len(held), chunk.subject):
                fullest[chunk.key] = chunk.subject
    for generation in generations:
        for key, file in generation.files.items():
            file.subject = fullest[key]


def _new_file(chunk: FileChunk) -> _File:
    return _File(
        name=chunk.name,
        subject=chunk.subject,
        index=chunk.index,
        total_segments=chunk.total_segments,
        posted=chunk.posted,
        chunks=[chunk],
    )


COMPILED_FILES = _compiled_files()
