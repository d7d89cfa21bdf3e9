"""What can go wrong decoding a probe's body.

    UidxError
    └── DecodeError          the bytes are not what the decoder reads (`.reason`)
        ├── YencError        no =ybegin, no =yend (truncated), a CRC mismatch, a bad field
        ├── Par2Error        not one valid PAR2 packet in the data
        └── ArchiveError     no RAR, 7z or zip signature, or malformed at the start

Each carries a short `reason` (a word or two, fit to count by) besides its
message: a probe counts its failures by reason, and never crashes on them.
"""

from __future__ import annotations

from usenet_indexer.errors import UidxError

__all__ = ["ArchiveError", "DecodeError", "Par2Error", "YencError"]


class DecodeError(UidxError):
    """The data cannot be decoded; `reason` says why in a word or two, `detail` says more."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class YencError(DecodeError):
    """A body with no yEnc, a truncated one (no =yend), a CRC mismatch or a malformed field."""


class Par2Error(DecodeError):
    """Data in which not one PAR2 packet is valid."""


class ArchiveError(DecodeError):
    """Data that starts with no RAR, 7z or zip signature, or is malformed at the start."""
