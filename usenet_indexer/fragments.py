"""Packed fragments: the segments of one release chunk, as the catalog keeps them.

Never one row per segment (the older indexers' per-segment tables are their
users' first complaint), nor one per file: one bytea per release chunk (the
files of a release seen in one batch), compressed in one call:

    version (1 byte: 2)
    deflate (zlib format) of:
        file count        u32 little-endian
        id width          u32 LE: W > 0 when every message-id has W bytes
                          (then they are stored column-wise), 0 when not
        per file          16-byte file key, u32 LE segment count, u32 LE index + 1
                          (0: none), u32 LE total segments, i64 LE posted,
                          u32 LE bytes of the name, u32 LE bytes of the subject
        numbers           u32 LE each, file after file, ascending within a file,
                          as 4 byte planes (every low byte, then every second ...)
        sizes             the same, in the same order
        message-ids       UTF-8, without <>, file after file: with a width W,
                          byte 0 of every id, then byte 1 of every id, ...;
                          without, "\\n"-joined
        names, subjects   UTF-8, per file its name then its subject, concatenated
                          (their lengths are in the file entries)

A file's details ride with its segments: a file seen in two batches has its
details twice, which costs less than a row per file (and its index) would.

What deflate cannot see is the structure of the columns, so the layout hands
it over: byte planes make numbers (1, 2, 3, ...) and sizes (nearly constant)
runs and repeats; posting tools write message-ids of one width within a
release (random letters, then a counter and "@host"), and column-wise the
constant and counter columns are runs, leaving only the random part (generated
batches: 19.2 B per segment instead of 23.3 for the plain layout). No
per-segment Python: the arrays and columns go in and out as byte slices.
Names and subjects are stored exactly (any character). Pure code: bytes in,
bytes out.
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

VERSION = 2
# isal level 1: the random part of message-ids decides the size; isal 2-3 and
# zlib 6-9 gain under 1% on the column layout at 1.5-5 times the time.
LEVEL = 1
# No release chunk holds more than this (a 500k-article batch holds fewer).
MAX_SEGMENTS = 2_000_000
MAX_FILES = 100_000
_HEAD = struct.Struct("<II")
_ENTRY = struct.Struct("<16sIIIqII")
_NEWLINE = ord("\n")


class BadFragment(RemoteProtocolError):
    """A stored fragment does not unpack."""


def _planes(values: bytes) -> bytes:
    """u32 LE values as 4 byte planes: a run of numbers becomes runs of bytes."""
    return values[0::4] + values[1::4] + values[2::4] + values[3::4]


def _little(values: array[int]) -> bytes:
    if sys.byteorder == "little":
        return values.tobytes()
    swapped = array("I", values)
    swapped.byteswap()
    return swapped.tobytes()


def _columns(ids: bytes, count: int) -> tuple[int, bytes]:
    """(W, the ids column-wise) when all `count` "\\n"-joined ids have W bytes, else (0, ids)."""
    if count < 2:
        return 0, ids
    width = ids.find(b"\n")
    stride = width + 1
    if (
        width < 1
        or len(ids) != count * stride - 1
        or ids.count(b"\n") != count - 1
        or ids[width::stride] != b"\n" * (count - 1)
    ):
        return 0, ids
    return width, b"".join([ids[i::stride] for i in range(width)])


def pack(files: Sequence[FileChunk]) -> bytes:
    """Pack a release chunk's files: their details and segments."""
    count = sum(len(f.numbers) for f in files)
    width, ids = _columns(
        "\n".join([f.message_ids for f in files if f.numbers]).encode("utf-8", "surrogatepass"),
        count,
    )
    names = [f.name.encode("utf-8", "surrogatepass") for f in files]
    subjects = [f.subject.encode("utf-8", "surrogatepass") for f in files]
    parts = [_HEAD.pack(len(files), width)]
    parts.extend(
        _ENTRY.pack(
            f.key,
            len(f.numbers),
            0 if f.index is None else f.index + 1,
            f.total_segments,
            f.posted,
            len(name),
            len(subject),
        )
        for f, name, subject in zip(files, names, subjects, strict=True)
    )
    parts.append(_planes(b"".join([_little(f.numbers) for f in files])))
    parts.append(_planes(b"".join([_little(f.sizes) for f in files])))
    parts.append(ids)
    for name, subject in zip(names, subjects, strict=True):
        parts += (name, subject)
    return bytes((VERSION,)) + isal_zlib.compress(b"".join(parts), LEVEL)


def _unplanes(planes: bytes, count: int) -> array[int]:
    raw = bytearray(4 * count)
    for i in range(4):
        raw[i::4] = planes[i * count : (i + 1) * count]
    values = array("I", raw)
    if sys.byteorder != "little":
        values.byteswap()
    return values


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
    if len(raw) < _HEAD.size:
        raise BadFragment("fragment too short")
    count, width = _HEAD.unpack_from(raw)
    at = _HEAD.size + _ENTRY.size * count
    if count > MAX_FILES or len(raw) < at:
        raise BadFragment(f"fragment claims {count} files in {len(raw)} bytes")
    entries = [_ENTRY.unpack_from(raw, _HEAD.size + _ENTRY.size * i) for i in range(count)]
    total = sum(e[1] for e in entries)
    text_bytes = sum(e[5] + e[6] for e in entries)
    if total > MAX_SEGMENTS or len(raw) < at + 8 * total + text_bytes:
        raise BadFragment(f"fragment claims {total} segments in {len(raw)} bytes")
    numbers = _unplanes(raw[at : at + 4 * total], total)
    sizes = _unplanes(raw[at + 4 * total : at + 8 * total], total)
    at += 8 * total
    ids_end = len(raw) - text_bytes
    columns = raw[at:ids_end]
    if width:
        stride = width + 1
        if total < 2 or len(columns) != width * total or _NEWLINE in columns:
            raise BadFragment("fragment's message-id columns do not match its counts")
        joined = bytearray(stride * total)
        for i in range(width):
            joined[i::stride] = columns[i * total : (i + 1) * total]
        joined[width::stride] = b"\n" * total
        ids = joined[:-1]
    else:
        ids = bytearray(columns)
        if (ids.count(b"\n") + 1 if total else len(ids)) != total:
            raise BadFragment("fragment's message-ids do not match its counts")
    lines: list[str] | None = None
    if not width:
        try:
            lines = ids.decode("utf-8", "surrogatepass").split("\n")
        except UnicodeDecodeError as error:
            raise BadFragment(f"fragment's message-ids are not UTF-8: {error}") from error
    files: list[FileChunk] = []
    start = 0
    at = ids_end
    for key, n, index, total_segments, posted, name_bytes, subject_bytes in entries:
        name_end = at + name_bytes
        try:
            name = raw[at:name_end].decode("utf-8", "surrogatepass")
            subject = raw[name_end : name_end + subject_bytes].decode("utf-8", "surrogatepass")
            if not n:
                message_ids = ""
            elif lines is None:
                stride = width + 1
                message_ids = ids[start * stride : (start + n) * stride - 1].decode(
                    "utf-8", "surrogatepass"
                )
            else:
                message_ids = "\n".join(lines[start : start + n])
        except UnicodeDecodeError as error:
            raise BadFragment(f"fragment's text is not UTF-8: {error}") from error
        at = name_end + subject_bytes
        files.append(
            FileChunk(
                key=key,
                name=name,
                subject=subject,
                index=index - 1 if index else None,
                total_segments=total_segments,
                posted=posted,
                numbers=numbers[start : start + n],
                message_ids=message_ids,
                sizes=sizes[start : start + n],
            )
        )
        start += n
    return files
