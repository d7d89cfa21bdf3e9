"""RAR 4 (1.5 to 4.x) and RAR 5 block headers: the names of the files in a volume.

Theory of operation: a RAR volume is a run of blocks, each a header and
maybe a data area whose size the header gives; file headers hold the names
and come before each file's data. Reading a first segment, the listing walks
the headers and skips each data area by its size: it ends complete at the
end-of-archive block, and incomplete where the data (or a data area) runs
out, or where a header is malformed or fails its CRC. Headers encrypted
with a password (RAR 4's main header flag, RAR 5's archive encryption
header) stop the listing: `encrypted`, nothing named.

Sources: RAR 5.0 archive format (rarlab.com/technote.htm); RAR 4.x, the
"RAR version 4.00 - Technical information" text shipped with WinRAR and
unrar's headers (arcread.cpp, for the Unicode name encoding).
"""

from __future__ import annotations

import zlib

from usenet_indexer.decode.errors import ArchiveError
from usenet_indexer.decode.listing import ArchiveListing, Cursor, malformed
from usenet_indexer.decode.names import clean_name, clean_text

__all__ = ["RAR4_SIGNATURE", "RAR5_SIGNATURE", "list_rar4", "list_rar5"]

RAR4_SIGNATURE = b"Rar!\x1a\x07\x00"
RAR5_SIGNATURE = b"Rar!\x1a\x07\x01\x00"

# RAR 5 caps a header at 2 MB (technote: "Header size ... 2 MB").
_RAR5_MAX_HEADER = 2 << 20
_RAR5_MAIN, _RAR5_FILE, _RAR5_SERVICE, _RAR5_CRYPT, _RAR5_END = 1, 2, 3, 4, 5
_RAR5_EXTRA, _RAR5_DATA = 0x0001, 0x0002
_RAR5_DIRECTORY, _RAR5_MTIME, _RAR5_CRC = 0x0001, 0x0002, 0x0004
_RAR5_FILE_ENCRYPTION = 0x01

_RAR4_MAIN, _RAR4_FILE, _RAR4_SERVICE, _RAR4_END = 0x73, 0x74, 0x7A, 0x7B
_RAR4_BASE = 7  # HEAD_CRC, HEAD_TYPE, HEAD_FLAGS, HEAD_SIZE
_RAR4_LONG_BLOCK = 0x8000  # an ADD_SIZE (data size) follows
_RAR4_MAIN_PASSWORD = 0x0080  # the block headers are encrypted
_RAR4_FILE_PASSWORD, _RAR4_LARGE, _RAR4_UNICODE = 0x0004, 0x0100, 0x0200
_RAR4_DIRECTORY = 0x00E0  # the dictionary bits all set


def list_rar5(data: bytes) -> ArchiveListing:
    """The files a RAR 5 volume's headers name (`data` starts with the signature)."""
    names: list[str] = []
    at = len(RAR5_SIGNATURE)
    encrypted = complete = False
    while True:
        try:
            block = _rar5_block(data, at)
        except ArchiveError as error:
            if at == len(RAR5_SIGNATURE) and error.reason == "malformed":
                raise
            break
        kind, name, encrypted_entry, at = block
        encrypted = encrypted or encrypted_entry or kind == _RAR5_CRYPT
        if name is not None:
            names.append(name)
        if kind in (_RAR5_CRYPT, _RAR5_END) or at > len(data):
            complete = kind == _RAR5_END
            break
    return ArchiveListing("rar5", tuple(names), complete, encrypted)


def _rar5_block(data: bytes, at: int) -> tuple[int, str | None, bool, int]:
    """The block at `at`: its type, a file's name, whether encrypted, where the next starts."""
    cursor = Cursor.over(data, at)
    crc = cursor.u32()
    size = cursor.vint()
    if not 0 < size <= _RAR5_MAX_HEADER:
        raise malformed(f"a RAR 5 header of {size} bytes")
    start = cursor.at
    header = Cursor.header(data, start, size)
    if zlib.crc32(data[at + 4 : start + size]) != crc:
        raise malformed(f"the RAR 5 header at {at} fails its CRC")
    kind, flags = header.vint(), header.vint()
    extra = header.vint() if flags & _RAR5_EXTRA else 0
    data_size = header.vint() if flags & _RAR5_DATA else 0
    name, encrypted = None, False
    if kind == _RAR5_FILE:
        name, encrypted = _rar5_file(header, extra)
    # Past the data when the data area runs past it: the caller stops there.
    return kind, name, encrypted, start + size + data_size


def _rar5_file(header: Cursor, extra: int) -> tuple[str | None, bool]:
    """A file header's name (None for a folder) and whether the file is encrypted."""
    if extra > header.left:
        raise malformed("an extra area longer than its header")
    file_flags = header.vint()
    header.vint()  # unpacked size
    header.vint()  # attributes
    header.skip((4 if file_flags & _RAR5_MTIME else 0) + (4 if file_flags & _RAR5_CRC else 0))
    header.vint()  # compression information
    header.vint()  # host OS
    raw_name = header.take(header.vint())
    records = Cursor.header(header.data, header.end - extra, extra)
    encrypted = False
    while records.left:
        size = records.count(records.vint())
        record = Cursor.header(records.data, records.at, size)
        encrypted = encrypted or record.vint() == _RAR5_FILE_ENCRYPTION
        records.skip(record.end - records.at)
    return (None if file_flags & _RAR5_DIRECTORY else clean_name(raw_name)), encrypted


def list_rar4(data: bytes) -> ArchiveListing:
    """The files a RAR 4 (1.5-4.x) volume's headers name (`data` starts with the signature)."""
    names: list[str] = []
    at = len(RAR4_SIGNATURE)
    encrypted = complete = False
    while True:
        try:
            kind, flags, name, at = _rar4_block(data, at)
        except ArchiveError as error:
            if at == len(RAR4_SIGNATURE) and error.reason == "malformed":
                raise
            break
        if kind == _RAR4_MAIN and flags & _RAR4_MAIN_PASSWORD:
            encrypted = True
            break
        if kind == _RAR4_FILE and flags & _RAR4_FILE_PASSWORD:
            encrypted = True
        if name is not None:
            names.append(name)
        if kind == _RAR4_END or at > len(data):
            complete = kind == _RAR4_END
            break
    return ArchiveListing("rar4", tuple(names), complete, encrypted)


def _rar4_block(data: bytes, at: int) -> tuple[int, int, str | None, int]:
    """The block at `at`: its type, flags, a file's name, where the next block starts."""
    cursor = Cursor.over(data, at)
    crc, kind, flags, size = cursor.u16(), cursor.byte(), cursor.u16(), cursor.u16()
    if size < _RAR4_BASE + (4 if flags & _RAR4_LONG_BLOCK else 0):
        raise malformed(f"a RAR 4 header of {size} bytes")
    header = Cursor.header(data, cursor.at, size - _RAR4_BASE)
    data_size = header.u32() if flags & _RAR4_LONG_BLOCK else 0
    name = None
    if kind in (_RAR4_FILE, _RAR4_SERVICE):
        if zlib.crc32(data[at + 2 : at + size]) & 0xFFFF != crc:
            raise malformed(f"the RAR 4 file header at {at} fails its CRC")
        header.at = cursor.at  # PACK_SIZE is the data size just read
        data_size, name = _rar4_file(header, flags)
        if kind == _RAR4_SERVICE:
            name = None
    # Past the data when the data area runs past it: the caller stops there.
    return kind, flags, name, at + size + data_size


def _rar4_file(header: Cursor, flags: int) -> tuple[int, str | None]:
    """A file header's packed size and name (None for a folder)."""
    packed = header.u32()
    header.skip(4 + 1 + 4 + 4 + 1 + 1)  # UNP_SIZE HOST_OS FILE_CRC FTIME UNP_VER METHOD
    name_size = header.u16()
    header.skip(4)  # ATTR
    if flags & _RAR4_LARGE:
        packed |= header.u32() << 32
        header.skip(4)  # HIGH_UNP_SIZE
    raw = header.take(name_size)
    if flags & _RAR4_DIRECTORY == _RAR4_DIRECTORY:
        return packed, None
    # RAR 4 keeps DOS paths; uidx shows names with "/" as RAR 5 and zip do.
    return packed, _rar4_name(raw, flags).replace("\\", "/")


def _rar4_name(raw: bytes, flags: int) -> str:
    """A RAR 4 name: plain (UTF-8, else the DOS code page), or Unicode after a NUL."""
    if flags & _RAR4_UNICODE:
        plain, nul, encoded = raw.partition(b"\0")
        if not nul:
            return clean_name(raw)
        return clean_text(_rar4_unicode(plain, encoded))
    try:
        return clean_text(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return clean_name(raw, "cp437")


def _rar4_unicode(plain: bytes, encoded: bytes) -> str:
    """RAR 3's compressed Unicode name (unrar's EncodeFileName::Decode, read from the format).

    Two flag bits a character: a low byte (high byte 0), a low byte with the
    name's high byte, a whole UTF-16 unit, or a run copied from the plain
    name (with a correction added to each byte).
    """
    units: list[int] = []
    if not encoded:
        return plain.decode("latin-1")
    high, at = encoded[0], 1
    flags = bits = 0
    limit = len(plain) + len(encoded)  # a name cannot be longer than its bytes
    while at < len(encoded) and len(units) < limit:
        if bits == 0:
            flags, bits, at = encoded[at], 8, at + 1
            if at >= len(encoded):
                break
        bits -= 2
        mode = (flags >> bits) & 3
        if mode == 0:
            units.append(encoded[at])
            at += 1
        elif mode == 1:
            units.append(encoded[at] | high << 8)
            at += 1
        elif mode == 2:
            if at + 1 >= len(encoded):
                break
            units.append(encoded[at] | encoded[at + 1] << 8)
            at += 2
        else:
            run = encoded[at]
            at += 1
            correction = 0
            if run & 0x80:
                if at >= len(encoded):
                    break
                correction, at = encoded[at], at + 1
            for _ in range((run & 0x7F) + 2):
                if len(units) >= len(plain):
                    break
                byte = plain[len(units)]
                units.append(((byte + correction) & 0xFF) | high << 8 if run & 0x80 else byte)
    return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le", "replace")
