"""What an archive's headers list, and the cursor the header readers share.

The cursor reads untrusted bytes: every length is checked against what is
left before anything is sliced, so a length field that claims gigabytes costs
nothing. Running out of bytes raises ArchiveError("truncated"), anything the
format does not allow ArchiveError("malformed"); the readers turn those into
an incomplete listing, except at the very start of the data.
"""

from __future__ import annotations

import struct

import attrs

from usenet_indexer.decode.errors import ArchiveError

__all__ = ["ArchiveListing", "Cursor", "malformed"]

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# A RAR 5 vint holds up to 64 bits in 7-bit groups: at most 10 bytes.
_MAX_VINT_BYTES = 10


@attrs.frozen
class ArchiveListing:
    """The files an archive's headers name, as far as the data goes.

    `kind` is "rar4", "rar5", "7z" or "zip"; `names` the files (not the
    folders) in header order; `complete` whether the listing ended within
    the data (the end of the headers was seen); `encrypted` whether the
    headers are encrypted (nothing more can be listed) or an entry is.
    """

    kind: str
    names: tuple[str, ...]
    complete: bool
    encrypted: bool


def malformed(detail: str) -> ArchiveError:
    return ArchiveError("malformed", detail)


@attrs.define
class Cursor:
    """A read position in `data`, which may not pass `end`.

    Reading past `end` raises ArchiveError(`short`): "truncated" where the
    end is the data's, "malformed" where it is a header's own end (a header
    that is all there and still too short for its fields).
    """

    data: bytes
    at: int
    end: int
    short: str = "truncated"

    @classmethod
    def over(cls, data: bytes, start: int = 0, length: int | None = None) -> Cursor:
        """A cursor over `length` bytes from `start` (all that is left: None), checked."""
        end = len(data) if length is None else start + length
        if not 0 <= start <= end <= len(data):
            raise ArchiveError("truncated", f"{length} bytes at {start} are past the data")
        return cls(data, start, end)

    @classmethod
    def header(cls, data: bytes, start: int, length: int) -> Cursor:
        """A cursor over a header of `length` bytes, all in the data (else "truncated")."""
        cursor = cls.over(data, start, length)
        cursor.short = "malformed"
        return cursor

    @property
    def left(self) -> int:
        return self.end - self.at

    def take(self, count: int) -> bytes:
        if not 0 <= count <= self.left:
            raise ArchiveError(self.short, f"{count} bytes wanted at {self.at}, {self.left} left")
        self.at += count
        return self.data[self.at - count : self.at]

    def skip(self, count: int) -> None:
        if not 0 <= count <= self.left:
            raise ArchiveError(self.short, f"{count} bytes to skip at {self.at}, {self.left} left")
        self.at += count

    def byte(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        value: int = _U16.unpack(self.take(2))[0]
        return value

    def u32(self) -> int:
        value: int = _U32.unpack(self.take(4))[0]
        return value

    def u64(self) -> int:
        value: int = _U64.unpack(self.take(8))[0]
        return value

    def vint(self) -> int:
        """A RAR 5 variable-length integer: 7 bits a byte, low first, high bit "more"."""
        value = 0
        for shift in range(0, 7 * _MAX_VINT_BYTES, 7):
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise malformed(f"a vint longer than {_MAX_VINT_BYTES} bytes")

    def count(self, value: int, each: int = 1) -> int:
        """`value`, checked as a count of items of at least `each` bytes still to come."""
        if value * each > self.left:
            raise malformed(f"{value} items of {each}+ bytes, {self.left} bytes left")
        return value
