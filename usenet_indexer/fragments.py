"""Packed fragments: the segments of one release chunk, as the catalog keeps them.

Never one row per segment (the older indexers' per-segment tables are their
users' first complaint), nor one per file: one bytea per release chunk (the
files of a release seen in one batch), compressed in one call:

    version (1 byte: 1)
    deflate of:
        file count        u32 little-endian
        per file          16-byte file key, u32 LE segment count, u32 LE index + 1
                          (0: none), u32 LE total segments, i64 LE posted
        numbers           u32 LE each, file after file, ascending within a file
        sizes             u32 LE each, in the same order
        message-ids       UTF-8, "\\n"-joined, file after file, without <>
        names             UTF-8, "\\n"-joined
        subjects          UTF-8, "\\n"-joined

A file's details ride with its segments: a file seen in two batches has its
details twice, which costs less than a row per file (and its index) would.
Numbers and sizes are nearly constant runs and deflate to almost nothing;
what remains is the random part of the message-ids. No per-segment Python:
the arrays go in and out as bytes. Pure code: bytes in, bytes out.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Sequence

from isal import isal_zlib

from usenet_indexer.batch import FileChunk
from usenet_indexer.errors import RemoteProtocolError

VERSION = 1
# isal level 1: the random part of message-ids decides the size; measured on
# generated batches, zlib 9 gives 21.2 B per segment, zlib 6 21.3, isal 1
# 22.1 at a fifth of zlib 6's time (the coordinator packs every chunk).
LEVEL = 1
# No release chunk holds more than this (a 500k-article batch holds fewer).
MAX_SEGMENTS = 2_000_000
MAX_FILES = 100_000
_U32 = struct.Struct("<I")
_ENTRY = struct.Struct("<16sIIIq")
# Sections after the arrays, each "\n"-joined, "\0" between them.
_SECTIONS = 3


class BadFragment(RemoteProtocolError):
    """A stored fragment does not unpack."""


def _little(values: array[int]) -> bytes:
    if sys.byteorder == "little":
        return values.tobytes()
    swapped = array("I", values)
    swapped.byteswap()
    return swapped.tobytes()


def _line(text: str) -> str:
    # Names come from one header line and hold no newline; a hostile edge's
    # might, and must not shift the sections.
    return text.replace("\n", " ") if "\n" in text else text


def pack(files: Sequence[FileChunk]) -> bytes:
    """Pack a release chunk's files: their details and segments."""
    parts = [_U32.pack(len(files))]
    parts.extend(
        _ENTRY.pack(
            f.key, len(f.numbers), 0 if f.index is None else f.index + 1, f.total_segments, f.posted
        )
        for f in files
    )
    parts.extend(_little(f.numbers) for f in files)
    parts.extend(_little(f.sizes) for f in files)
    text = (
        "\n".join(f.message_ids for f in files),
        "\n".join(_line(f.name) for f in files),
        "\n".join(_line(f.subject) for f in files),
    )
    parts.append("\x00".join(text).encode("utf-8", "surrogatepass"))
    return bytes((VERSION,)) + isal_zlib.compress(b"".join(parts), LEVEL)


def unpack(data: bytes) -> list[FileChunk]:
    """The files of a packed release chunk, with their segments.

    Raises:
        BadFragment: the data is not a fragment of this version.
    """
    if not data or data[0] != VERSION:
        raise BadFragment("unknown fragment version")
    try:
        raw = zlib.decompress(data[1:])
    except zlib.error as error:
        raise BadFragment(f"fragment does not inflate: {error}") from error
    if len(raw) < 4:
        raise BadFragment("fragment too short")
    (count,) = _U32.unpack_from(raw)
    at = 4 + _ENTRY.size * count
    if count > MAX_FILES or len(raw) < at:
        raise BadFragment(f"fragment claims {count} files in {len(raw)} bytes")
    entries = [_ENTRY.unpack_from(raw, 4 + _ENTRY.size * i) for i in range(count)]
    total = sum(e[1] for e in entries)
    if total > MAX_SEGMENTS or len(raw) < at + 8 * total:
        raise BadFragment(f"fragment claims {total} segments in {len(raw)} bytes")
    numbers = array("I", raw[at : at + 4 * total])
    sizes = array("I", raw[at + 4 * total : at + 8 * total])
    if sys.byteorder != "little":
        numbers.byteswap()
        sizes.byteswap()
    sections = raw[at + 8 * total :].decode("utf-8", "surrogatepass").split("\x00")
    if len(sections) != _SECTIONS:
        raise BadFragment("fragment's text sections are damaged")
    message_ids = sections[0].split("\n") if total else []
    names, subjects = sections[1].split("\n"), sections[2].split("\n")
    if len(message_ids) != total or len(names) != count or len(subjects) != count:
        raise BadFragment("fragment's names do not match its counts")
    files: list[FileChunk] = []
    start = 0
    for (key, n, index, total_segments, posted), name, subject in zip(
        entries, names, subjects, strict=True
    ):
        files.append(
            FileChunk(
                key=key,
                name=name,
                subject=subject,
                index=index - 1 if index else None,
                total_segments=total_segments,
                posted=posted,
                numbers=numbers[start : start + n],
                message_ids="\n".join(message_ids[start : start + n]),
                sizes=sizes[start : start + n],
            )
        )
        start += n
    return files
