"""Inflating untrusted data with a cap (pure): a bomb never allocates past it.

One `decompress` call with `max_length` is incremental inside zlib: it
stops when the output reaches the limit. Asking for one byte more than the
cap tells "exactly at the cap" from "over".
"""

from __future__ import annotations

import enum

from isal import isal_zlib

# isal's inflate error (igzip_lib.IsalError), typed for mypy.
INFLATE_ERROR: type[Exception] = isal_zlib.error  # type: ignore[assignment]


class Problem(enum.Enum):
    """Why data did not inflate."""

    CORRUPT = "corrupt"
    TOO_LARGE = "too large"
    TRUNCATED = "truncated"
    TRAILING = "trailing bytes"


class InflateFailed(Exception):
    """Raised by `capped_inflate`; callers turn it into their own error."""

    def __init__(self, problem: Problem, detail: str) -> None:
        super().__init__(detail)
        self.problem = problem
        self.detail = detail


def capped_inflate(data: bytes, *, wbits: int, max_bytes: int) -> bytes:
    """Inflate one whole stream (zlib, gzip or raw by `wbits`) to at most `max_bytes`.

    Raises:
        InflateFailed: corrupt, over the cap, truncated, or followed by bytes.
    """
    inflater = isal_zlib.decompressobj(wbits=wbits)
    try:
        inflated = inflater.decompress(data, max_bytes + 1)
    except INFLATE_ERROR as error:
        raise InflateFailed(Problem.CORRUPT, str(error)) from error
    if len(inflated) > max_bytes:
        raise InflateFailed(Problem.TOO_LARGE, f"inflates to over {max_bytes} bytes")
    if not inflater.eof:
        raise InflateFailed(
            Problem.TRUNCATED,
            f"{len(data)} bytes inflate to {len(inflated)} without reaching the end of the stream",
        )
    if inflater.unused_data:
        raise InflateFailed(
            Problem.TRAILING, f"{len(inflater.unused_data)} bytes follow the stream"
        )
    return inflated
