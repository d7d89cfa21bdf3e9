"""Packed fragments: the segments of one release chunk, as the catalog keeps them.

Never one row per segment (the older indexers' per-segment tables are their
users' first complaint), nor one per file: one bytea per release chunk (the
files of a release seen in one batch), compressed in one call:

    version (1 byte: 3)
    one zstd frame (level 1, its content size and checksum in it) of:
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

Version 2, the same layout as a zlib stream (isal level 1), is still read: the
catalogs and the edges that wrote it. zstd at level 1 makes fragments 4% smaller
and decompresses them 1.9 times as fast (a coordinator decompresses every
fragment a node sends, to check it) and compresses 1.5 times as fast (the
3,666 release chunks of a generated 500k-line posting-tools batch, 28.7 MB of
layout: isal 367 MB/s in, 624 out, ratio 0.296; zstd 565 and 1174, 0.284).

A file's details ride with its segments: a file seen in two batches has its
details twice, which costs less than a row per file (and its index) would.

What the compressor cannot see is the structure of the columns, so the layout hands
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

import codecs
import importlib
import struct
import sys
import threading
from array import array
from collections.abc import Callable, Sequence
from itertools import islice
from operator import lt
from typing import Any, Final

import attrs
import zstandard
from isal import isal_zlib

from usenet_indexer.core.batch import UNDATED, FileChunk
from usenet_indexer.core.subject import MAX_FILES as MAX_FILE_INDEX
from usenet_indexer.core.subject import MAX_SEGMENTS as MAX_TOTAL_SEGMENTS
from usenet_indexer.errors import RemoteProtocolError
from usenet_indexer.wire.inflate import INFLATE_ERROR

# The version written: one zstd frame. Level 1: the random part of message-ids
# decides the size; zstd 2-3 gain under 0.5% on the column layout, slower.
VERSION = 3
ZSTD_LEVEL = 1
# The version still read: a zlib stream (isal level 1; isal 2-3 and zlib 6-9
# gained under 1% at 1.5-5 times the time).
DEFLATED = 2
# zstd level 1 asks for a window of at most 512 KiB (windowLog 19): a frame that
# asks a decompressor for more memory than this is refused.
MAX_WINDOW = 1 << 23
# No release chunk holds more than this: the batch wire's cap on a whole batch
# (a 500k-article batch holds far fewer).
MAX_SEGMENTS = 4_000_000
MAX_FILES = 100_000
_HEAD = struct.Struct("<II")
_ENTRY = struct.Struct("<16sIIIqII")
_NEWLINE = ord("\n")

# The compiled twin of `_files` (wire/_fastfragments.pyx): the inflated bytes, the
# FileChunk class, MAX_FILES and MAX_SEGMENTS in; the files out, or None where
# the pure code raises.
CompiledFiles = Callable[[bytes, type[FileChunk], int, int], "list[FileChunk] | None"]


def compiled(module: str, name: str) -> Any:
    """A compiled twin from its extension module, or None where it was not built
    (no C compiler at install time) or was built before the twin was added (a
    checkout updated without `scripts/bootstrap`: the pure code runs, and
    tests/test_fastwire.py's "are built" tests fail)."""
    try:
        return getattr(importlib.import_module(f"usenet_indexer.wire.{module}"), name)
    except (ImportError, AttributeError):
        return None


COMPILED_FILES: CompiledFiles | None = compiled("_fastfragments", "files")
# The compiled twin of `_packed`: the files in, the bytes to deflate out, or None
# where the pure code must lay them out.
COMPILED_PACKED: Callable[[Sequence[FileChunk]], bytes | None] | None = compiled(
    "_fastfragments", "packed"
)


class BadFragment(RemoteProtocolError):
    """A fragment does not unpack, or breaks what `inspect` checks."""


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
    # Every stride-th byte a "\n" and the length right: `count` rows of W
    # bytes, which `_rows` gives back exactly.
    if width < 1 or len(ids) != count * stride - 1 or ids[width::stride] != b"\n" * (count - 1):
        return 0, ids
    return width, b"".join([ids[i::stride] for i in range(width)])


def pack(files: Sequence[FileChunk], *, pure: bool = False) -> bytes:
    """Pack a release chunk's files: their details and segments.

    `pure` lays them out with the pure code even where its compiled twin
    (`_fastfragments.packed`) was built: the same bytes, slower.
    """
    raw = None if COMPILED_PACKED is None or pure else COMPILED_PACKED(files)
    if raw is None:
        raw = _packed(files)
    return bytes((VERSION,)) + _codecs().compressor.compress(raw)


@attrs.frozen
class _Codecs:
    """One thread's zstd compressor and decompressor (neither may be shared
    between threads; making them for each fragment cost 60% more than the
    compressing: 9 us each)."""

    compressor: zstandard.ZstdCompressor
    decompressor: zstandard.ZstdDecompressor


# Per thread, made at its first fragment: a cache of configured codecs, the same
# in every thread, not state that changes what any call returns.
_THREAD = threading.local()


def _codecs() -> _Codecs:
    codecs_ = getattr(_THREAD, "codecs", None)
    if codecs_ is None:
        codecs_ = _THREAD.codecs = _Codecs(
            zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True),
            zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW),
        )
    return codecs_


def decompressor() -> zstandard.ZstdDecompressor:
    """This thread's zstd decompressor, configured as `inspect` reads a node's fragments
    (the compiled release checks, batchwire's, take it from here)."""
    return _codecs().decompressor


def _packed(files: Sequence[FileChunk]) -> bytes:
    """The layout `pack` deflates, in pure Python: the oracle of `_fastfragments.packed`."""
    # One pass over the files (this runs for every release chunk an edge posts).
    entry = _ENTRY.pack
    entries: list[bytes] = []
    ids: list[str] = []
    numbers: list[array[int]] = []
    sizes: list[array[int]] = []
    texts: list[bytes] = []
    count = 0
    for f in files:
        name = f.name.encode("utf-8", "surrogatepass")
        subject = f.subject.encode("utf-8", "surrogatepass")
        segments = len(f.numbers)
        index = 0 if f.index is None else f.index + 1
        entries.append(
            entry(f.key, segments, index, f.total_segments, f.posted, len(name), len(subject))
        )
        if segments:
            ids.append(f.message_ids)
        numbers.append(f.numbers)
        sizes.append(f.sizes)
        texts += (name, subject)
        count += segments
    width, id_columns = _columns("\n".join(ids).encode("utf-8", "surrogatepass"), count)
    parts = [_HEAD.pack(len(files), width), *entries]
    parts.append(_planes(_joined_little(numbers)))
    parts.append(_planes(_joined_little(sizes)))
    parts.append(id_columns)
    parts += texts
    return b"".join(parts)


def _joined_little(arrays: list[array[int]]) -> bytes:
    """The u32 values of `arrays`, one after the other, little-endian."""
    if sys.byteorder == "little":
        return b"".join(map(array.tobytes, arrays))
    return b"".join(map(_little, arrays))


def _unplanes_le(planes: bytes, count: int) -> bytearray:
    """The u32 LE values of `_planes` back in their order."""
    raw = bytearray(4 * count)
    for i in range(4):
        raw[i::4] = planes[i * count : (i + 1) * count]
    return raw


def _u32s(little: bytes | bytearray) -> array[int]:
    values = array("I", little)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def _unplanes(planes: bytes, count: int) -> array[int]:
    return _u32s(_unplanes_le(planes, count))


def _rows(columns: bytes, count: int, width: int) -> bytearray:
    """`count` ids of `width` bytes stored column-wise, back as "\\n"-joined rows."""
    stride = width + 1
    joined = bytearray(stride * count)
    for i in range(width):
        joined[i::stride] = columns[i * count : (i + 1) * count]
    joined[width::stride] = b"\n" * count
    return joined[:-1]


def unpack(data: bytes, *, pure: bool = False) -> list[FileChunk]:
    """The files of a packed release chunk, with their segments.

    Args:
        data: the fragment.
        pure: unpack with the pure code even where its compiled twin
            (wire/_fastfragments) is built (the same files, slower).

    Raises:
        BadFragment: the data is not a fragment of a version this reads.
    """
    return files_of(layout(data), pure=pure)


def layout(data: bytes) -> bytes:
    """A stored fragment's layout, decompressed (version 3 or 2): what `files_of` reads.

    Raises:
        BadFragment: the data is not a fragment of a version this reads.
    """
    if data and data[0] == VERSION:
        try:
            return _codecs().decompressor.decompress(memoryview(data)[1:])
        except zstandard.ZstdError as error:
            raise BadFragment(f"fragment does not decompress: {error}") from error
    if not data or data[0] != DEFLATED:
        raise BadFragment("unknown fragment version")
    _check_zlib_header(data)
    try:
        return isal_zlib.decompress(memoryview(data)[1:])
    except INFLATE_ERROR as error:
        raise BadFragment(f"fragment does not inflate: {error}") from error


def files_of(raw: bytes, *, pure: bool = False) -> list[FileChunk]:
    """The files of a fragment already inflated (`unpack` without the inflating; the
    coordinator unpacks what `inspected` inflated, rather than inflate it twice).

    Raises:
        BadFragment: the data is not an inflated fragment.
    """
    if COMPILED_FILES is not None and not pure:
        files = COMPILED_FILES(raw, FileChunk, MAX_FILES, MAX_SEGMENTS)
        if files is not None:
            return files
    # The pure code: the oracle, and what says what is wrong with a fragment.
    return _files(raw)


def _files(raw: bytes) -> list[FileChunk]:
    """The files of an inflated fragment (`unpack`'s pure code: the compiled twin,
    wire/_fastfragments.pyx, gives the same)."""
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
        if total < 2 or len(columns) != width * total or _NEWLINE in columns:
            raise BadFragment("fragment's message-id columns do not match its counts")
        ids = _rows(columns, total, width)
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


# --- checking a fragment from a node --------------------------------------------------

# The numbers 0..65535 as little-endian uint32s: most files' segments are a
# run first..last, which one slice comparison (a memcmp) proves strictly
# ascending; 256 KiB covers files of up to 65535 segments.
_RUN_LE: Final = _little(array("I", range(1 << 16)))
# Bytes a message-id may not hold, besides the "\\n" that separates them: the
# angle brackets are stripped (one inside would break `<...>` in NNTP commands
# and NZB files), the rest are separators or cannot be stored.
ID_FORBIDDEN: Final = (b"<", b">", b"\x00", b"\r", b"\t")
_UTF8: Final = codecs.getincrementaldecoder("utf-8")
_UTF8_SLICE: Final = 1 << 20

# The compiled twin of `_facts` (see `inspect`): raw, the limits in; the figures
# of a plain valid fragment out, or None for `_facts` to decide.
FactsFinder = Callable[
    [bytes, int, int, int, int, int, int],
    "tuple[int, int, int, int, int, tuple[int, bytes]] | None",
]

COMPILED_FACTS: FactsFinder | None = compiled("_fastfragments", "facts")


@attrs.frozen
class Facts:
    """What a checked fragment holds, as its catalog rows need it.

    Attributes:
        files: file chunks in it.
        segments: segments in it.
        posted: the earliest readable date of its files (0 when none has one).
        latest: the latest readable date of its files (0 when none has one).
        representative: the smallest `batch.representative_order` of its files.
        inflated: bytes it inflated to.
        bytes: the segments' sizes, summed.
    """

    files: int
    segments: int
    posted: int
    latest: int
    representative: tuple[int, bytes]
    inflated: int
    bytes: int


def inspect(data: bytes, *, max_bytes: int, max_text_chars: int) -> Facts:
    """Check a fragment a node sent, without building its files; what it holds.

    What `unpack` will need holds afterwards, and what a catalog reader
    relies on: at least one file, each with at least one segment, file keys
    unique, segment numbers strictly ascending within 1..total, message-ids
    non-empty, UTF-8 and free of "<", ">", NUL, CR, LF and TAB, names and
    subjects UTF-8 (no lone surrogates) without NUL and at most
    `max_text_chars` characters, nothing after the data.

    The checks after inflating run compiled (wire/_fastfragments.pyx) where the
    extension is built and the fragment is plain (valid, ASCII texts); any
    other fragment goes to the pure `_facts`, which decides and words the
    refusal.

    Args:
        data: the fragment.
        max_bytes: the most it may inflate to (a deflate bomb stops there).
        max_text_chars: the longest name or subject.

    Raises:
        BadFragment: the message says what is wrong.
    """
    return inspected(data, max_bytes=max_bytes, max_text_chars=max_text_chars)[0]


def inspected(data: bytes, *, max_bytes: int, max_text_chars: int) -> tuple[Facts, bytes]:
    """`inspect`, and the fragment inflated (for `files_of`)."""
    raw = _inflated(data, max_bytes)
    found = _compiled_facts(raw, max_text_chars)
    return (_facts(raw, max_text_chars) if found is None else found), raw


def _compiled_facts(raw: bytes, max_text_chars: int) -> Facts | None:
    """The compiled twin's answer for an inflated fragment: its Facts, or None where
    the pure `_facts` must decide (or the extension was not built)."""
    if COMPILED_FACTS is None:
        return None
    found = COMPILED_FACTS(
        raw, max_text_chars, MAX_FILES, MAX_SEGMENTS, MAX_TOTAL_SEGMENTS, MAX_FILE_INDEX, UNDATED
    )
    if found is None:
        return None
    files, segments, size, posted, latest, representative = found
    return Facts(
        files=files,
        segments=segments,
        bytes=size,
        posted=posted,
        latest=latest,
        representative=representative,
        inflated=len(raw),
    )


def _inflated(data: bytes, max_bytes: int) -> bytes:
    """A node's fragment decompressed, at most `max_bytes` (its version and stream checked)."""
    if data and data[0] == VERSION:
        return _unframed(data, max_bytes)
    if not data or data[0] != DEFLATED:
        version = data[0] if data else None
        raise BadFragment(f"version {version!r} is not {VERSION} (or {DEFLATED})")
    _check_zlib_header(data)
    inflater = isal_zlib.decompressobj()
    try:
        # One byte over the cap tells "over" from "exactly at it".
        raw = inflater.decompress(memoryview(data)[1:], max_bytes + 1)
    except INFLATE_ERROR as error:
        raise BadFragment(f"does not inflate: {error}") from error
    if len(raw) > max_bytes:
        raise BadFragment(f"inflates to more than {max_bytes} bytes")
    if not inflater.eof:
        raise BadFragment("the deflate stream is truncated")
    if inflater.unused_data:
        raise BadFragment(f"{len(inflater.unused_data)} bytes after the deflate stream")
    return raw


def _unframed(data: bytes, max_bytes: int) -> bytes:
    """A node's version 3 fragment decompressed: one zstd frame that says its size, at
    most `max_bytes`, and nothing after it. The size is read from the frame's header
    before any memory is given to it; zstd checks that the frame holds what it says
    (and its checksum, where it has one)."""
    frame = memoryview(data)[1:]
    try:
        header = zstandard.get_frame_parameters(frame)
    except zstandard.ZstdError as error:
        raise BadFragment(f"not a zstd frame: {error}") from error
    if header.content_size == zstandard.CONTENTSIZE_UNKNOWN:
        raise BadFragment("the zstd frame does not say its size")
    if header.content_size > max_bytes:
        raise BadFragment(f"inflates to more than {max_bytes} bytes")
    if header.window_size > MAX_WINDOW:
        raise BadFragment(f"the zstd frame asks for a window of {header.window_size} bytes")
    try:
        return _codecs().decompressor.decompress(frame, allow_extra_data=False)
    except zstandard.ZstdError as error:
        raise BadFragment(f"does not decompress: {error}") from error


def _facts(raw: bytes, max_text_chars: int) -> Facts:
    """`inspect`'s checks of an inflated fragment in pure Python: the oracle of the
    compiled `_fastfragments.facts` and the judge of every fragment it leaves (the
    checks run on whole byte ranges, C-level scans; Python loops only over files).

    Raises:
        BadFragment: the message says what is wrong.
    """
    if len(raw) < _HEAD.size:
        raise BadFragment("too short for its head")
    count, width = _HEAD.unpack_from(raw)
    at = _HEAD.size + _ENTRY.size * count
    if not 1 <= count <= MAX_FILES or len(raw) < at:
        raise BadFragment(f"claims {count} files in {len(raw)} bytes (1..{MAX_FILES})")
    entries = list(_ENTRY.iter_unpack(raw[_HEAD.size : at]))
    total = sum([e[1] for e in entries])
    name_bytes = [e[5] for e in entries]
    subject_bytes = [e[6] for e in entries]
    text = sum(name_bytes) + sum(subject_bytes)
    ids_end = len(raw) - text
    if total > MAX_SEGMENTS or ids_end < at + 8 * total:
        raise BadFragment(f"claims {total} segments in {len(raw)} bytes")
    if len({e[0] for e in entries}) != count:
        raise BadFragment("two files have the same key")
    numbers_le = _unplanes_le(raw[at : at + 4 * total], total)
    numbers = _u32s(numbers_le)
    sizes = _unplanes(raw[at + 4 * total : at + 8 * total], total)
    start = 0
    for i, (_, n, index, total_segments, _, _, _) in enumerate(entries):
        # The subject parser's caps on N of (k/N) and i of [i/M].
        if not 1 <= total_segments <= MAX_TOTAL_SEGMENTS or index > MAX_FILE_INDEX + 1 or n < 1:
            raise BadFragment(
                f"file {i}: {n} segments of {total_segments}, index {index - 1} "
                f"(1..{MAX_TOTAL_SEGMENTS} segments, index up to {MAX_FILE_INDEX})"
            )
        _check_run(numbers, numbers_le, start, n, total_segments, i)
        start += n
    _check_ids(raw[at + 8 * total : ids_end], total, width, max_text_chars)
    region = raw[ids_end:]
    if region.isascii() and b"\x00" not in region:
        longest = max(max(name_bytes), max(subject_bytes))
        if longest > max_text_chars:
            raise BadFragment(f"a name or subject of {longest} characters, over {max_text_chars}")
    else:
        _check_texts(raw, ids_end, entries, max_text_chars)
    dated = [e[4] for e in entries if e[4]]
    return Facts(
        files=count,
        segments=total,
        bytes=sum(sizes),
        posted=min(dated) if dated else 0,
        latest=max(dated) if dated else 0,
        representative=min((e[4] or UNDATED, e[0]) for e in entries),
        inflated=len(raw),
    )


def _check_run(
    numbers: array[int], numbers_le: bytearray, start: int, n: int, total: int, i: int
) -> None:
    first, last = numbers[start], numbers[start + n - 1]
    if first < 1:
        raise BadFragment(f"file {i}: segment number {first} (they count from 1)")
    if last > total:
        raise BadFragment(f"file {i}: segment {last} of a file of {total} segments")
    if (
        last - first == n - 1
        and numbers_le[4 * start : 4 * (start + n)] == _RUN_LE[4 * first : 4 * last + 4]
    ):
        return  # a run first..last, the common case: one memcmp
    if n > 1 and not all(
        map(lt, islice(numbers, start, start + n - 1), islice(numbers, start + 1, start + n))
    ):
        at = next(k for k in range(1, n) if numbers[start + k] <= numbers[start + k - 1])
        raise BadFragment(
            f"file {i}: segment numbers not strictly ascending at [{at}] "
            f"({numbers[start + at]} after {numbers[start + at - 1]})"
        )


def _check_ids(ids: bytes, count: int, width: int, cap: int) -> None:
    """`count` message-ids of at most `cap` bytes, column-wise with `width` bytes each
    or "\\n"-joined."""
    if width:
        if count < 2 or len(ids) != width * count:
            raise BadFragment(f"{len(ids)} bytes of message-id columns for {count} ids of {width}")
        if width > cap:
            raise BadFragment(f"message-ids of {width} bytes, over {cap}")
        if b"\n" in ids:
            raise BadFragment("a message-id holds '\\n'")
    else:
        separators = ids.count(b"\n")
        if separators != count - 1:
            raise BadFragment(f"{separators + 1} message-ids for {count} segments")
        if not ids or ids[0] == _NEWLINE or ids[-1] == _NEWLINE or b"\n\n" in ids:
            raise BadFragment("an empty message-id")
        if len(ids) > cap and max(map(len, ids.split(b"\n"))) > cap:
            raise BadFragment(f"a message-id of more than {cap} bytes")
    for forbidden in ID_FORBIDDEN:
        if forbidden in ids:
            raise BadFragment(f"a message-id holds {forbidden.decode()!r}")
    if ids.isascii():
        return
    if width:
        ids = bytes(_rows(ids, count, width))
    if not _is_utf8(ids):
        raise BadFragment("message-ids are not UTF-8")


def _is_utf8(data: bytes) -> bool:
    """Whether `data` is strict UTF-8, decoded a slice at a time (bounded memory)."""
    decoder = _UTF8()
    try:
        for at in range(0, len(data), _UTF8_SLICE):
            decoder.decode(data[at : at + _UTF8_SLICE])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _check_zlib_header(data: bytes) -> None:
    """The zlib header every inflater reads alike: deflate, window <= 32 KiB, no dictionary."""
    if len(data) < 3:
        raise BadFragment("too short for a zlib header")
    method, flags = data[1], data[2]
    if method & 0x0F != 8 or method >> 4 > 7 or flags & 0x20 or (method << 8 | flags) % 31:
        raise BadFragment(f"not a plain zlib stream (header {data[1:3].hex()})")


def _check_texts(
    raw: bytes, at: int, entries: list[tuple[bytes, int, int, int, int, int, int]], cap: int
) -> None:
    """Decode each file's name and subject (strict UTF-8); check NUL and length."""
    for i, (_, _, _, _, _, name_length, subject_length) in enumerate(entries):
        for what, length in (("name", name_length), ("subject", subject_length)):
            if length > 4 * cap:  # UTF-8: at most 4 bytes a character
                raise BadFragment(f"file {i}: its {what} has {length} bytes, over {4 * cap}")
            try:
                value = raw[at : at + length].decode("utf-8")
            except UnicodeDecodeError as error:
                raise BadFragment(f"file {i}: its {what} is not UTF-8: {error}") from error
            if "\x00" in value:
                raise BadFragment(f"file {i}: its {what} holds a NUL character")
            if len(value) > cap:
                raise BadFragment(f"file {i}: its {what} has {len(value)} characters, over {cap}")
            at += length
