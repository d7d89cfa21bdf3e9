"""What one frame of a range's stream gives the indexer (pure: no I/O, no clock).

A CHUNK's payload is inflated (in a worker thread: isal releases the GIL, so
the next chunk inflates while this one is indexed) into overview lines for
the articles first..last; a GAP moves the resume point over articles the
server does not have; END closes the range at its last article. Each becomes
a `Piece`: data for `RangeIndexer.add_data` and the resume point after it.
"""

from __future__ import annotations

from typing import Final

import attrs

from usenet_indexer.errors import RemoteProtocolError
from usenet_indexer.frames import Codec, Frame, FrameKind
from usenet_indexer.inflate import InflateFailed, Problem, capped_inflate

# zlib's wbits for each container the spool writes, and nothing else (47
# would take either, which is not what the codec byte says).
_WBITS: Final = {Codec.ZLIB: 15, Codec.GZIP: 31}


class ChunkError(RemoteProtocolError):
    """A chunk's payload cannot be read: unknown codec, corrupt, or too large."""


@attrs.frozen
class Piece:
    """What the indexer is fed for one frame.

    Attributes:
        first: the first article the data covers.
        next_article: the resume point after it (the frame's last article + 1).
        data: overview lines (empty for a gap or the end).
        end: the range is complete after this piece.
    """

    first: int
    next_article: int
    data: bytes = b""
    end: bool = False


def piece_of(frame: Frame, max_text_bytes: int) -> Piece:
    """The piece of a CHUNK, GAP or END frame (a CHUNK is inflated here: call it in a thread).

    Args:
        frame: a CHUNK, GAP or END frame.
        max_text_bytes: the most a chunk may inflate to.

    Returns:
        The piece.

    Raises:
        ChunkError: the chunk cannot be inflated.
        ValueError: another kind of frame (the caller handles those).
    """
    if frame.kind == FrameKind.CHUNK:
        text = inflate(frame.codec, frame.payload, max_text_bytes)
        return Piece(frame.first, frame.last + 1, text)
    if frame.kind == FrameKind.GAP:
        return Piece(frame.first, frame.last + 1)
    if frame.kind == FrameKind.END:
        return Piece(frame.last, frame.last + 1, end=True)
    raise ValueError(f"a {frame.kind.name} frame carries no articles")


def inflate(codec: Codec, payload: bytes, max_bytes: int) -> bytes:
    """A chunk payload as overview text, inflated with a cap.

    Args:
        codec: how the payload is compressed (NONE, ZLIB or GZIP).
        payload: the payload as the spool holds it.
        max_bytes: the most it may inflate to.

    Returns:
        The overview lines.

    Raises:
        ChunkError: a codec this edge does not read (ZSTD), corrupt or
            truncated data, trailing bytes, or more than `max_bytes`.
    """
    if codec == Codec.NONE:
        if len(payload) > max_bytes:
            raise ChunkError(f"a plain chunk of {len(payload)} bytes is over {max_bytes}")
        return payload
    wbits = _WBITS.get(codec)
    if wbits is None:
        raise ChunkError(f"chunk codec {codec.name} is not supported by this edge (zlib, gzip)")
    try:
        return capped_inflate(payload, wbits=wbits, max_bytes=max_bytes)
    except InflateFailed as failed:
        if failed.problem is Problem.TOO_LARGE:
            raise ChunkError(f"a {codec.name} chunk {failed.detail}") from failed
        if failed.problem is Problem.CORRUPT:
            raise ChunkError(f"a {codec.name} chunk is corrupt: {failed.detail}") from failed
        raise ChunkError(
            f"a {codec.name} chunk is truncated or has bytes after its end"
        ) from failed


def lines_from(data: bytes, article: int) -> bytes:
    """The lines of `data` for articles >= `article` (a chunk that starts before the resume point).

    Only a chunk that straddles the resume point needs this (the spool was
    cut differently from the batches): its lines below the resume point are
    stored already. Lines without a number go with the line before them.
    """
    kept: list[bytes] = []
    keep = False
    for line in data.split(b"\n"):
        number = line.split(b"\t", 1)[0]
        if number.isdigit():
            keep = int(number) >= article
        if keep and line:
            kept.append(line)
    return b"\n".join(kept)
