"""PAR2 packets read out of a .par2 file, or the first segment of one.

Theory of operation: a PAR2 file is a run of packets, each a 64-byte header
(magic b"PAR2\\0PKT", the packet's length as a little-endian uint64, the MD5
of the packet from the recovery set id to its end, the set id, the type)
and a body (Parity Volume Set Specification 2.0, §3). The reader walks the
packets; every length is checked against the data left before anything is
sliced or hashed (hashing is over a memoryview: no copy of a packet is made).
A packet that is malformed or fails its MD5 is counted and skipped, and the
reader looks for the next magic (resync), as the spec asks of clients. A
packet that runs past the end of the data ends the walk as `truncated` when
no magic follows it (the cut end of a first segment), and is skipped as bad
when one does (a length field that lies).

Clients repeat the file description packets in every volume, so files are
kept once per file id, in the order first seen. A probe usually reads the
first segment (700 kB or so) of the small index .par2, which holds them all.
"""

from __future__ import annotations

import hashlib
import struct

import attrs

from usenet_indexer.decode.errors import Par2Error
from usenet_indexer.decode.names import REPLACEMENT, clean_name, clean_text

__all__ = ["Par2Error", "Par2File", "Par2Index", "parse_par2"]

MAGIC = b"PAR2\0PKT"
HEADER_BYTES = 64
MAIN = b"PAR 2.0\0Main\0\0\0\0"
FILE_DESC = b"PAR 2.0\0FileDesc"
UNICODE_NAME = b"PAR 2.0\0UniFileN"
# The other types of the spec (and its optional ones): read past, not unknown.
OTHER_KNOWN = frozenset(
    (
        b"PAR 2.0\0IFSC\0\0\0\0",
        b"PAR 2.0\0RecvSlic",
        b"PAR 2.0\0Creator\0",
        b"PAR 2.0\0CommASCI",
        b"PAR 2.0\0CommUni\0",
    )
)
_HEADER = struct.Struct("<8sQ16s16s16s")
# A longer name is no file name (PATH_MAX is 4096): the packet is taken as malformed.
MAX_NAME_BYTES = 64 * 1024
# A file description body: file id, MD5, 16k MD5, length; the name after it.
_FILE_DESC = struct.Struct("<16s16s16sQ")
# A main packet body starts with the slice size.
_SLICE = struct.Struct("<Q")


@attrs.frozen
class Par2File:
    """A file of the recovery set, as its file description packet says.

    `name` is the UTF-8 name (undecodable bytes and control characters as
    U+FFFD; the NUL padding removed), or the Unicode filename packet's name
    where the UTF-8 one does not decode; `raw_name` is the name's bytes as sent.
    """

    file_id: bytes
    md5: bytes
    md5_16k: bytes
    length: int
    name: str
    raw_name: bytes


@attrs.frozen
class Par2Index:
    """What the packets in the data say.

    `packets` counts the packets whose MD5 checked out (of any type),
    `unknown_packets` those of them with a type not in the spec,
    `bad_packets` the malformed ones and the ones failing their MD5;
    `truncated` says the data ended inside a packet. `slice_bytes` is the
    set's block (slice) size, from its main packet (None: none read).
    """

    set_id: bytes | None
    files: tuple[Par2File, ...]
    packets: int
    bad_packets: int
    unknown_packets: int
    truncated: bool
    slice_bytes: int | None = None


@attrs.define
class _Walk:
    """What the walk has seen so far."""

    set_id: bytes | None = None
    main_set_id: bytes | None = None
    slice_bytes: int | None = None
    descriptions: dict[bytes, Par2File] = attrs.Factory(dict)
    unicode_names: dict[bytes, str] = attrs.Factory(dict)
    packets: int = 0
    bad: int = 0
    unknown: int = 0
    truncated: bool = False
    # Where the last good packet ended.
    end: int = 0


def parse_par2(data: bytes, *, max_packets: int = 10_000) -> Par2Index:
    """Read the packets of PAR2 data: a whole .par2 file or a prefix of one.

    Args:
        data: the bytes.
        max_packets: stop after this many packets (good, bad or unknown).

    Returns:
        The recovery set's id (of its main packet; without one, of the first
        good packet), its files, and the packets counted.

    Raises:
        Par2Error: only when not one packet in the data is valid (reason
            "no packets"); bad, unknown and truncated packets are counted.
    """
    view = memoryview(data)
    walk = _Walk()
    at = data.find(MAGIC)
    seen = 0
    while at >= 0 and seen < max_packets:
        seen += 1
        at = _step(data, view, at, walk)
    # Data cut in the middle of the next packet's magic.
    tail = data[walk.end :]
    if 0 < len(tail) < len(MAGIC) and MAGIC.startswith(tail):
        walk.truncated = True
    if walk.packets == 0:
        raise Par2Error("no packets", f"no valid PAR2 packet in {len(data)} bytes")
    return Par2Index(
        set_id=walk.main_set_id or walk.set_id,
        files=tuple(_named(f, walk.unicode_names) for f in walk.descriptions.values()),
        packets=walk.packets,
        bad_packets=walk.bad,
        unknown_packets=walk.unknown,
        truncated=walk.truncated,
        slice_bytes=walk.slice_bytes,
    )


def _step(data: bytes, view: memoryview, at: int, walk: _Walk) -> int:
    """Read the packet at `at` (its magic is there); where the next one starts, -1: none."""
    if len(data) - at < HEADER_BYTES:
        walk.truncated = True
        return -1
    _, length, md5, set_id, kind = _HEADER.unpack_from(data, at)
    if length < HEADER_BYTES or length % 4:
        walk.bad += 1
        return data.find(MAGIC, at + 8)
    if length > len(data) - at:
        following = data.find(MAGIC, at + 8)
        if following < 0:
            walk.truncated = True
        else:
            walk.bad += 1
        return following
    end = at + length
    if hashlib.md5(view[at + 32 : end], usedforsecurity=False).digest() != md5:
        walk.bad += 1
        return data.find(MAGIC, at + 8)
    body = view[at + HEADER_BYTES : end]
    if not _read(kind, set_id, body, walk):
        walk.bad += 1
        return data.find(MAGIC, at + 8)
    walk.packets += 1
    walk.set_id = walk.set_id or set_id
    walk.end = end
    return data.find(MAGIC, end)


def _read(kind: bytes, set_id: bytes, body: memoryview, walk: _Walk) -> bool:
    """Take in a packet that passed its MD5; False when its body is malformed."""
    if kind == MAIN:
        # Slice size (8), file count (4), then 16-byte file ids.
        if len(body) < 12 or (len(body) - 12) % 16:
            return False
        walk.main_set_id = walk.main_set_id or set_id
        if walk.slice_bytes is None:
            (slice_bytes,) = _SLICE.unpack_from(body)
            # The spec: a multiple of 4; 0 would divide nothing.
            walk.slice_bytes = slice_bytes if slice_bytes and not slice_bytes % 4 else None
    elif kind == FILE_DESC:
        if not _FILE_DESC.size <= len(body) <= _FILE_DESC.size + MAX_NAME_BYTES:
            return False
        file_id, md5, md5_16k, length = _FILE_DESC.unpack_from(body)
        raw_name = bytes(body[_FILE_DESC.size :]).rstrip(b"\0")
        if file_id not in walk.descriptions:
            walk.descriptions[file_id] = Par2File(
                file_id, md5, md5_16k, length, clean_name(raw_name), raw_name
            )
    elif kind == UNICODE_NAME:
        if not 16 <= len(body) <= 16 + 2 * MAX_NAME_BYTES or len(body) % 2:
            return False
        name = bytes(body[16:]).decode("utf-16-le", "replace").rstrip("\0")
        walk.unicode_names.setdefault(bytes(body[:16]), clean_text(name))
    elif kind not in OTHER_KNOWN:
        walk.unknown += 1
    return True


def _named(file: Par2File, unicode_names: dict[bytes, str]) -> Par2File:
    """The file with the Unicode packet's name where its UTF-8 one did not decode."""
    better = unicode_names.get(file.file_id)
    if better and REPLACEMENT in file.name:
        return attrs.evolve(file, name=better)
    return file
