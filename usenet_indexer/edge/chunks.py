"""What one frame of a range's stream gives the indexer (pure: no I/O, no clock).

A CHUNK's payload is inflated (in a worker thread: isal releases the GIL, so
the next chunk inflates while this one is indexed) into overview lines for
the articles first..last; a GAP moves the resume point over articles the
server does not have; END closes the range at its last article. Each becomes
a `Piece`: its text for `RangeIndexer.add_data`, and the resume point after it.

The text comes in parts of about `part_bytes`, each ending at a line end: the
indexing loop feeds them one at a time, with a turn for the stream reader
after each. They are cut as the payload inflates (`capped_inflate_blocks`),
never as one buffer first: that buffer grew by copies with the GIL held,
which the indexing loop beside the inflating thread paid for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from usenet_indexer.errors import RemoteProtocolError
from usenet_indexer.frames import Codec, Frame, FrameKind
from usenet_indexer.inflate import InflateFailed, Problem, capped_inflate_blocks

# zlib's wbits for each container the spool writes, and nothing else (47
# would take either, which is not what the codec byte says).
_WBITS: Final = {Codec.ZLIB: 15, Codec.GZIP: 31}


class ChunkError(RemoteProtocolError):
    """A chunk's payload cannot be read: unknown codec, corrupt, or too large."""


@attrs.frozen
class Piece:
    """What the indexer is fed for one frame.

    Attributes:
        first: the first article the text covers.
        next_article: the resume point after it (the frame's last article + 1).
        parts: overview lines, in parts that end at a line end but maybe the
            last (none for a gap or the end).
        end: the range is complete after this piece.
    """

    first: int
    next_article: int
    parts: tuple[bytes, ...] = ()
    end: bool = False


def piece_of(frame: Frame, max_text_bytes: int, part_bytes: int) -> Piece:
    """The piece of a CHUNK, GAP or END frame (a CHUNK is inflated here: call it in a thread).

    Args:
        frame: a CHUNK, GAP or END frame.
        max_text_bytes: the most a chunk may inflate to.
        part_bytes: about how long a part of the text is.

    Returns:
        The piece.

    Raises:
        ChunkError: the chunk cannot be inflated.
        ValueError: another kind of frame (the caller handles those).
    """
    if frame.kind == FrameKind.CHUNK:
        parts = text_parts(frame.codec, frame.payload, max_text_bytes, part_bytes)
        return Piece(frame.first, frame.last + 1, parts)
    if frame.kind == FrameKind.GAP:
        return Piece(frame.first, frame.last + 1)
    if frame.kind == FrameKind.END:
        return Piece(frame.last, frame.last + 1, end=True)
    raise ValueError(f"a {frame.kind.name} frame carries no articles")


def text_parts(codec: Codec, payload: bytes, max_bytes: int, part_bytes: int) -> tuple[bytes, ...]:
    """A chunk payload as overview text, inflated with a cap, in parts cut at line ends.

    Args:
        codec: how the payload is compressed (NONE, ZLIB or GZIP).
        payload: the payload as the spool holds it.
        max_bytes: the most it may inflate to.
        part_bytes: about how long a part is (a part holds whole lines: a
            line longer than this makes its part longer).

    Returns:
        The text's parts; joined, the text.

    Raises:
        ChunkError: a codec this edge does not read (ZSTD), corrupt or
            truncated data, trailing bytes, or more than `max_bytes`.
    """
    if codec == Codec.NONE:
        if len(payload) > max_bytes:
            raise ChunkError(f"a plain chunk of {len(payload)} bytes is over {max_bytes}")
        return line_parts((payload,), part_bytes)
    wbits = _WBITS.get(codec)
    if wbits is None:
        raise ChunkError(f"chunk codec {codec.name} is not supported by this edge (zlib, gzip)")
    try:
        blocks = capped_inflate_blocks(
            payload, wbits=wbits, max_bytes=max_bytes, block_bytes=part_bytes
        )
    except InflateFailed as failed:
        if failed.problem is Problem.TOO_LARGE:
            raise ChunkError(f"a {codec.name} chunk {failed.detail}") from failed
        if failed.problem is Problem.CORRUPT:
            raise ChunkError(f"a {codec.name} chunk is corrupt: {failed.detail}") from failed
        raise ChunkError(
            f"a {codec.name} chunk is truncated or has bytes after its end"
        ) from failed
    return line_parts(blocks, part_bytes)


def line_parts(blocks: Iterable[bytes], part_bytes: int) -> tuple[bytes, ...]:
    """The text of `blocks` (cut anywhere) in parts of about `part_bytes` that end at a line end.

    After its first line end a part holds at most `part_bytes` bytes (its
    first line may be longer: it may have begun in the block before); the
    last part ends where the text does (with or without a line end). A block
    that is a whole part is kept as it is; any other part is copied once.
    """
    parts: list[bytes] = []
    open_line: list[bytes | memoryview] = []  # the start of a line that has not ended yet
    for block in blocks:
        end = block.rfind(b"\n") + 1
        if not end:
            if block:
                open_line.append(block)
            continue
        view = memoryview(block)
        start = 0
        while start < end:
            cut = end
            if end - start > part_bytes:
                # The last line end within part_bytes, else the first after (a long line).
                cut = block.rfind(b"\n", start, start + part_bytes) + 1 or (
                    block.find(b"\n", start + part_bytes) + 1
                )
            if open_line:
                parts.append(b"".join([*open_line, view[start:cut]]))
                open_line = []
            elif start == 0 and cut == len(block):
                parts.append(block)
            else:
                parts.append(bytes(view[start:cut]))
            start = cut
        if end < len(block):
            open_line.append(view[end:])
    if open_line:
        parts.append(b"".join(open_line))
    return tuple(parts)


def lines_from(parts: Sequence[bytes], article: int, part_bytes: int) -> tuple[bytes, ...]:
    """The lines of `parts` for articles >= `article` (a chunk that starts before the resume point).

    Only a chunk that straddles the resume point needs this (the spool was
    cut differently from the batches): its lines below the resume point are
    stored already. Lines without a number go with the line before them.

    Returns:
        The lines kept, in parts of about `part_bytes`.
    """
    kept: list[bytes] = []
    keep = False
    for line in b"".join(parts).split(b"\n"):
        number = line.split(b"\t", 1)[0]
        if number.isdigit():
            keep = int(number) >= article
        if keep and line:
            kept.append(line)
    if not kept:
        return ()
    return line_parts((b"\n".join(kept) + b"\n",), part_bytes)
