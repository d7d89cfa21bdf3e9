"""Packed fragments: the segments of one release chunk, as the catalog keeps them.

Never one row per segment (the older indexers' per-segment tables are their
users' first complaint), nor one per file: one bytea per release chunk (the
files of a release seen in one batch), compressed in one call:

    version (1 byte: 1)
    deflate of:
        file count        u32 little-endian
        per file          16-byte file key, u32 LE segment count
        numbers           u32 LE each, file after file, ascending within a file
        sizes             u32 LE each, in the same order
        message-ids       UTF-8, "\\n"-joined, file after file, without <>

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
_ENTRY = struct.Struct("<16sI")

FragmentFile = tuple[
    bytes, "array[int]", "array[int]", str
]  # (file key, numbers, sizes, message-ids)


class BadFragment(RemoteProtocolError):
    """A stored fragment does not unpack."""


def _little(values: array[int]) -> bytes:
    if sys.byteorder == "little":
        return values.tobytes()
    swapped = array("I", values)
    swapped.byteswap()
    return swapped.tobytes()


def pack(files: Sequence[FileChunk]) -> bytes:
    """Pack the segments of a release chunk's files."""
    parts = [_U32.pack(len(files))]
    parts.extend(_ENTRY.pack(f.key, len(f.numbers)) for f in files)
    parts.extend(_little(f.numbers) for f in files)
    parts.extend(_little(f.sizes) for f in files)
    parts.append("\n".join(f.message_ids for f in files).encode())
    return bytes((VERSION,)) + isal_zlib.compress(b"".join(parts), LEVEL)


def unpack(data: bytes) -> list[FragmentFile]:
    """The files of a packed release chunk: (key, numbers, sizes, message-ids joined by "\\n").

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
    total = sum(n for _, n in entries)
    if total > MAX_SEGMENTS or len(raw) < at + 8 * total:
        raise BadFragment(f"fragment claims {total} segments in {len(raw)} bytes")
    numbers = array("I", raw[at : at + 4 * total])
    sizes = array("I", raw[at + 4 * total : at + 8 * total])
    if sys.byteorder != "little":
        numbers.byteswap()
        sizes.byteswap()
    message_ids = raw[at + 8 * total :].decode().split("\n") if total else []
    if len(message_ids) != total:
        raise BadFragment("fragment's message-ids do not match its segment count")
    files: list[FragmentFile] = []
    start = 0
    for key, n in entries:
        files.append(
            (
                key,
                numbers[start : start + n],
                sizes[start : start + n],
                "\n".join(message_ids[start : start + n]),
            )
        )
        start += n
    return files
