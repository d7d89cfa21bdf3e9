"""7z file names, from the header at the end of the archive (when it is in the data).

Theory of operation: a 7z archive starts with a 32-byte signature header
that points (offset, size, CRC) to the real header, which 7-Zip writes at
the END of the archive, after the packed data. A first segment of a big 7z
therefore names nothing: the listing is `names=()`, `complete=False`. Only
when the data holds the end header too (a small archive, or a probe of the
last segment prefixed by the first) are the names read. 7-Zip usually
compresses that header (an "encoded header": LZMA, sometimes LZMA2), which
is inflated here with the standard library's lzma, capped at
MAX_HEADER_BYTES and with the dictionary clamped to that size (the
dictionary size is a field of the data: it is never allocated as claimed).
An encoded header behind AES (`7z -mhe=on`) is `encrypted` and names
nothing; AES in the main streams' coders marks encrypted entries.

Source: 7zFormat.txt (7-Zip's DOC/, also py7zr's docs/7zFormat.rst).
"""

from __future__ import annotations

import lzma
import struct
import zlib

import attrs

from usenet_indexer.decode.errors import ArchiveError
from usenet_indexer.decode.listing import ArchiveListing, Cursor, malformed
from usenet_indexer.decode.names import clean_text

__all__ = ["MAX_HEADER_BYTES", "SEVENZIP_SIGNATURE", "list_7z"]

SEVENZIP_SIGNATURE = b"7z\xbc\xaf\x27\x1c"
# The header of 10,000 files is some 500 kB; one past this is not read.
MAX_HEADER_BYTES = 4 << 20
# 7-Zip's own limits on coders and streams in a folder.
_MAX_CODERS = 64

_END, _HEADER, _ARCHIVE_PROPERTIES, _ADDITIONAL_STREAMS, _MAIN_STREAMS = 0, 1, 2, 3, 4
_FILES, _PACK_INFO, _UNPACK_INFO, _SUBSTREAMS, _SIZE, _CRC, _FOLDER = 5, 6, 7, 8, 9, 10, 11
_UNPACK_SIZES, _UNPACK_STREAMS, _EMPTY_STREAM, _EMPTY_FILE = 12, 13, 14, 15
_NAME, _ATTRIBUTES, _ENCODED_HEADER = 17, 21, 23
_DIRECTORY_ATTRIBUTE = 0x10

_COPY, _LZMA, _LZMA2, _AES = b"\x00", b"\x03\x01\x01", b"\x21", b"\x06\xf1\x07\x01"


@attrs.frozen
class _Folder:
    coders: tuple[tuple[bytes, bytes], ...]  # (codec id, properties)
    outputs: int


@attrs.frozen
class _Streams:
    pack_position: int
    pack_sizes: tuple[int, ...]
    folders: tuple[_Folder, ...]
    unpack_sizes: tuple[tuple[int, ...], ...]


def list_7z(data: bytes) -> ArchiveListing:
    """The files a 7z archive's end header names, if `data` holds it (see the module doc)."""
    if len(data) < 32:
        return ArchiveListing("7z", (), False, False)
    start_crc, offset, size, header_crc = struct.unpack_from("<IQQI", data, 8)
    if zlib.crc32(data[12:32]) != start_crc:
        raise malformed("the 7z start header fails its CRC")
    if size == 0:
        return ArchiveListing("7z", (), True, False)
    at = 32 + offset
    if size > MAX_HEADER_BYTES or at + size > len(data):
        return ArchiveListing("7z", (), False, False)
    if zlib.crc32(memoryview(data)[at : at + size]) != header_crc:
        return ArchiveListing("7z", (), False, False)
    try:
        return _header(data, Cursor.over(data, at, size))
    except (ArchiveError, lzma.LZMAError, ValueError):
        return ArchiveListing("7z", (), False, False)


def _header(data: bytes, cursor: Cursor) -> ArchiveListing:
    kind = cursor.byte()
    if kind == _ENCODED_HEADER:
        streams = _streams_info(cursor)
        if any(codec == _AES for f in streams.folders for codec, _ in f.coders):
            return ArchiveListing("7z", (), False, True)
        decoded = _decode_header(data, streams)
        cursor = Cursor.over(decoded)
        kind = cursor.byte()
    if kind != _HEADER:
        raise malformed(f"7z header type {kind}")
    return _plain_header(cursor)


def _plain_header(cursor: Cursor) -> ArchiveListing:
    kind = cursor.byte()
    if kind == _ARCHIVE_PROPERTIES:
        while cursor.byte() != _END:
            cursor.skip(_number(cursor))
        kind = cursor.byte()
    if kind == _ADDITIONAL_STREAMS:
        _streams_info(cursor)
        kind = cursor.byte()
    encrypted = False
    if kind == _MAIN_STREAMS:
        streams = _streams_info(cursor)
        encrypted = any(codec == _AES for f in streams.folders for codec, _ in f.coders)
        kind = cursor.byte()
    names: tuple[str, ...] = ()
    if kind == _FILES:
        names = _files_info(cursor)
        kind = cursor.byte()
    if kind != _END:
        raise malformed(f"7z header property {kind} out of place")
    return ArchiveListing("7z", names, True, encrypted)


def _number(cursor: Cursor) -> int:
    """7z's UINT64: the first byte's high bits say how many bytes follow."""
    first = cursor.byte()
    mask, value = 0x80, 0
    for index in range(8):
        if not first & mask:
            return value | (first & (mask - 1)) << (8 * index)
        value |= cursor.byte() << (8 * index)
        mask >>= 1
    return value


def _bits(cursor: Cursor, count: int) -> list[bool]:
    octets = cursor.take((count + 7) // 8)
    return [bool(octets[i // 8] & (0x80 >> (i % 8))) for i in range(count)]


def _defined(cursor: Cursor, count: int) -> list[bool]:
    """An "all defined" byte, and the bit vector when it is 0."""
    return [True] * count if cursor.byte() else _bits(cursor, count)


def _digests(cursor: Cursor, count: int) -> list[bool]:
    """Which of `count` CRCs are defined (the CRCs themselves are skipped)."""
    if cursor.byte():
        cursor.skip(4 * count)  # checked before the list is made
        return [True] * count
    defined = _bits(cursor, count)
    cursor.skip(4 * sum(defined))
    return defined


def _streams_info(cursor: Cursor) -> _Streams:
    kind = cursor.byte()
    position = 0
    pack_sizes: tuple[int, ...] = ()
    folders: tuple[_Folder, ...] = ()
    unpack_sizes: tuple[tuple[int, ...], ...] = ()
    folder_crcs: list[bool] = []
    if kind == _PACK_INFO:
        position, streams = _number(cursor), cursor.count(_number(cursor))
        kind = cursor.byte()
        while kind != _END:
            if kind == _SIZE:
                pack_sizes = tuple(_number(cursor) for _ in range(streams))
            elif kind == _CRC:
                _digests(cursor, streams)
            else:
                raise malformed(f"7z pack info property {kind}")
            kind = cursor.byte()
        kind = cursor.byte()
    if kind == _UNPACK_INFO:
        if cursor.byte() != _FOLDER:
            raise malformed("7z unpack info without folders")
        count = cursor.count(_number(cursor))
        if cursor.byte():
            raise malformed("7z external folders")
        folders = tuple(_folder(cursor) for _ in range(count))
        if cursor.byte() != _UNPACK_SIZES:
            raise malformed("7z folders without unpack sizes")
        unpack_sizes = tuple(tuple(_number(cursor) for _ in range(f.outputs)) for f in folders)
        kind = cursor.byte()
        if kind == _CRC:
            folder_crcs = _digests(cursor, count)
            kind = cursor.byte()
        if kind != _END:
            raise malformed(f"7z unpack info property {kind}")
        kind = cursor.byte()
    if kind == _SUBSTREAMS:
        _substreams(cursor, len(folders), folder_crcs)
        kind = cursor.byte()
    if kind != _END:
        raise malformed(f"7z streams info property {kind}")
    return _Streams(position, pack_sizes, folders, unpack_sizes)


def _folder(cursor: Cursor) -> _Folder:
    count = _number(cursor)
    if not 0 < count <= _MAX_CODERS:
        raise malformed(f"a 7z folder of {count} coders")
    coders: list[tuple[bytes, bytes]] = []
    inputs = outputs = 0
    for _ in range(count):
        flags = cursor.byte()
        if flags & 0x80:
            raise malformed("7z alternative coder methods")
        codec = cursor.take(flags & 0x0F)
        ins, outs = (_number(cursor), _number(cursor)) if flags & 0x10 else (1, 1)
        if ins > _MAX_CODERS or outs > _MAX_CODERS:
            raise malformed(f"a 7z coder of {ins} inputs, {outs} outputs")
        properties = cursor.take(_number(cursor)) if flags & 0x20 else b""
        coders.append((codec, properties))
        inputs, outputs = inputs + ins, outputs + outs
    if outputs == 0:
        raise malformed("a 7z folder without outputs")
    for _ in range(outputs - 1):  # bind pairs
        _number(cursor), _number(cursor)
    packed = inputs - (outputs - 1)
    if packed > 1:
        for _ in range(packed):
            _number(cursor)
    return _Folder(tuple(coders), outputs)


def _substreams(cursor: Cursor, folders: int, folder_crcs: list[bool]) -> None:
    """Skip the substreams info (its layout depends on the counts in it)."""
    streams = [1] * folders
    kind = cursor.byte()
    if kind == _UNPACK_STREAMS:
        streams = [_number(cursor) for _ in range(folders)]
        kind = cursor.byte()
    if kind == _SIZE:
        for count in streams:
            for _ in range(cursor.count(max(count - 1, 0))):
                _number(cursor)
        kind = cursor.byte()
    while kind != _END:
        if kind != _CRC:
            raise malformed(f"7z substreams property {kind}")
        known = [n == 1 and i < len(folder_crcs) and folder_crcs[i] for i, n in enumerate(streams)]
        unknown = sum(n for n, k in zip(streams, known, strict=True) if not k)
        _digests(cursor, unknown)
        kind = cursor.byte()


def _decode_header(data: bytes, streams: _Streams) -> bytes:
    """The encoded header's first folder inflated (copy, LZMA or LZMA2), capped."""
    if len(streams.folders) != 1 or not streams.pack_sizes or not streams.unpack_sizes:
        raise malformed("an encoded 7z header of other than one folder")
    (folder,) = streams.folders
    if len(folder.coders) != 1:
        raise malformed("an encoded 7z header with a coder chain")
    size = streams.unpack_sizes[0][0]
    if size > MAX_HEADER_BYTES or streams.pack_sizes[0] > MAX_HEADER_BYTES:
        raise malformed(f"a 7z header of {size} bytes ({streams.pack_sizes[0]} packed)")
    packed = Cursor.over(data, 32 + streams.pack_position, streams.pack_sizes[0]).take(
        streams.pack_sizes[0]
    )
    codec, properties = folder.coders[0]
    if codec == _COPY:
        decoded = packed[:size]
    else:
        filters = [_lzma_filter(codec, properties, size)]
        decompressor = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters)
        decoded = decompressor.decompress(packed, max_length=size)
    if len(decoded) != size:
        raise ArchiveError("truncated", "the encoded 7z header is short")
    return decoded


def _lzma_filter(codec: bytes, properties: bytes, size: int) -> dict[str, int]:
    """The lzma filter for a coder, its dictionary clamped to what the output can need."""
    # A dictionary larger than the output is never used; liblzma's minimum is 4 KiB.
    cap = max(size, 4096)
    if codec == _LZMA and len(properties) == 5:
        lclppb, dictionary = properties[0], int.from_bytes(properties[1:5], "little")
        if lclppb >= 9 * 5 * 5:
            raise malformed("LZMA properties out of range")
        return {
            "id": lzma.FILTER_LZMA1,
            "lc": lclppb % 9,
            "lp": (lclppb // 9) % 5,
            "pb": lclppb // 45,
            "dict_size": min(max(dictionary, 4096), cap),
        }
    if codec == _LZMA2 and len(properties) == 1 and properties[0] <= 40:
        bits = properties[0]
        dictionary = 0xFFFFFFFF if bits == 40 else (2 | (bits & 1)) << (bits // 2 + 11)
        return {"id": lzma.FILTER_LZMA2, "dict_size": min(dictionary, cap)}
    raise malformed(f"7z header coder {codec.hex()}")


def _files_info(cursor: Cursor) -> tuple[str, ...]:
    # No entry takes less than a byte of header (its name's NUL is two).
    count = cursor.count(_number(cursor))
    names: list[str] = []
    empty_streams: list[bool] = [False] * count
    empty_files: list[bool] = []
    attributes: list[int | None] = [None] * count
    while (kind := _number(cursor)) != _END:
        size = _number(cursor)
        body = Cursor.over(cursor.data, cursor.at, size)
        cursor.skip(size)
        if kind == _NAME:
            names = _names(body, count)
        elif kind == _EMPTY_STREAM:
            empty_streams = _bits(body, count)
        elif kind == _EMPTY_FILE:
            empty_files = _bits(body, sum(empty_streams))
        elif kind == _ATTRIBUTES:
            attributes = _attributes(body, count)
    folder = _folders(count, empty_streams, empty_files, attributes)
    return tuple(n for n, is_folder in zip(names, folder, strict=False) if not is_folder)


def _names(body: Cursor, count: int) -> list[str]:
    if body.byte():
        return []  # names kept elsewhere (external): 7-Zip never writes these
    text = body.take(body.left).decode("utf-16-le", "replace")
    return [clean_text(n) for n in text.split("\0")[:count]]


def _attributes(body: Cursor, count: int) -> list[int | None]:
    defined = _defined(body, count)
    if body.byte():
        return [None] * count  # external
    return [body.u32() if is_defined else None for is_defined in defined]


def _folders(
    count: int, empty_streams: list[bool], empty_files: list[bool], attributes: list[int | None]
) -> list[bool]:
    """Which entries are folders: by attribute, else an empty stream that is no empty file."""
    folders: list[bool] = []
    empty_index = 0
    for index in range(count):
        attribute = attributes[index] if index < len(attributes) else None
        is_empty = index < len(empty_streams) and empty_streams[index]
        empty_file = is_empty and empty_index < len(empty_files) and empty_files[empty_index]
        empty_index += is_empty
        if attribute is not None:
            folders.append(bool(attribute & _DIRECTORY_ATTRIBUTE))
        else:
            folders.append(is_empty and not empty_file)
    return folders
