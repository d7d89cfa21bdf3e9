"""Zip file names from the local file headers, in order: what a first segment holds.

Theory of operation: a zip's central directory is at its end (maybe
gigabytes away), but every entry also starts with a local file header
(APPNOTE.TXT 4.3.7: signature PK\\3\\4, sizes, the name) right before its
data. The listing walks them, skipping each entry's compressed data by its
size (the Zip64 extra field's when the 32-bit one is 0xFFFFFFFF). It is
complete when the central directory (or the end record) is reached. An
entry written with a data descriptor (flag bit 3) has no sizes in its local
header, so the walk cannot find the next header without inflating: the
listing stops there, incomplete. Names are UTF-8 when flag bit 11 says so or
they decode as UTF-8 (what tools write today), else IBM code page 437 (the
APPNOTE's default); an Info-ZIP Unicode Path extra field (0x7075) wins.
"""

from __future__ import annotations

import struct
import zlib

from usenet_indexer.decode.errors import ArchiveError
from usenet_indexer.decode.listing import ArchiveListing, Cursor
from usenet_indexer.decode.names import clean_name, clean_text

__all__ = ["ZIP_SIGNATURES", "list_zip"]

LOCAL = b"PK\x03\x04"
CENTRAL = b"PK\x01\x02"
END = b"PK\x05\x06"
ZIP64_END = b"PK\x06\x06"
DESCRIPTOR = b"PK\x07\x08"  # also the first bytes of a split archive
ZIP_SIGNATURES = (LOCAL, END, DESCRIPTOR + LOCAL)

_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_ENCRYPTED, _DESCRIPTOR_FLAG, _UTF8 = 0x0001, 0x0008, 0x0800
_ZIP64_EXTRA, _UNICODE_PATH_EXTRA = 0x0001, 0x7075
_FULL = 0xFFFFFFFF


def list_zip(data: bytes) -> ArchiveListing:
    """The files the local headers at the start of a zip name (`data` starts with one)."""
    names: list[str] = []
    at = 4 if data.startswith(DESCRIPTOR) else 0
    encrypted = complete = False
    while True:
        signature = data[at : at + 4]
        if signature in (CENTRAL, END, ZIP64_END):
            complete = True
            break
        if signature != LOCAL:
            break
        try:
            name, flags, at = _entry(data, at)
        except ArchiveError as error:
            if not names and error.reason == "malformed":
                raise
            break
        encrypted = encrypted or bool(flags & _ENCRYPTED)
        if name is not None:
            names.append(name)
        if at < 0:
            break
    return ArchiveListing("zip", tuple(names), complete, encrypted)


def _entry(data: bytes, at: int) -> tuple[str | None, int, int]:
    """The local header at `at`: its name (None: a folder), flags, the next header (-1: unknown)."""
    cursor = Cursor.over(data, at)
    fields = _LOCAL.unpack(cursor.take(_LOCAL.size))
    flags, packed, unpacked, name_size, extra_size = (fields[i] for i in (2, 7, 8, 9, 10))
    raw = cursor.take(name_size)
    extra = _extra_fields(cursor.take(extra_size))
    name = _name(raw, flags, extra.get(_UNICODE_PATH_EXTRA))
    if _FULL in (packed, unpacked) and _ZIP64_EXTRA in extra:
        packed = _zip64_packed(extra[_ZIP64_EXTRA], packed, unpacked)
    following = cursor.at + packed
    if flags & _DESCRIPTOR_FLAG or following > len(data):
        return name, flags, -1
    return name, flags, following


def _extra_fields(extra: bytes) -> dict[int, bytes]:
    """The extra field's records by header id (a broken tail is ignored)."""
    records: dict[int, bytes] = {}
    at = 0
    while at + 4 <= len(extra):
        header_id, size = struct.unpack_from("<HH", extra, at)
        if at + 4 + size > len(extra):
            break
        records.setdefault(header_id, extra[at + 4 : at + 4 + size])
        at += 4 + size
    return records


def _zip64_packed(record: bytes, packed: int, unpacked: int) -> int:
    """The compressed size, from the Zip64 extra record where the header's is 0xFFFFFFFF.

    The record holds the sizes that are 0xFFFFFFFF in the header, in a fixed
    order: the uncompressed size first, then the compressed one.
    """
    if packed != _FULL:
        return packed
    cursor = Cursor.over(record)
    if unpacked == _FULL:
        cursor.u64()
    return cursor.u64()


def _name(raw: bytes, flags: int, unicode_path: bytes | None) -> str | None:
    # Unicode Path: version 1, the CRC32 of the header's name, the UTF-8 name.
    if (
        unicode_path
        and len(unicode_path) > 5
        and unicode_path[0] == 1
        and struct.unpack_from("<I", unicode_path, 1)[0] == zlib.crc32(raw)
    ):
        raw, flags = unicode_path[5:], flags | _UTF8
    if raw.endswith((b"/", b"\\")):
        return None
    if flags & _UTF8:
        return clean_name(raw)
    try:
        return clean_text(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return clean_name(raw, "cp437")
