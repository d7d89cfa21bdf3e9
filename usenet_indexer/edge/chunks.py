"""What one frame of a range's stream gives the indexer (pure: no I/O, no clock).

A CHUNK's payload is inflated (in a worker thread: isal releases the GIL, so
the next chunk inflates while this one is indexed) into overview lines for
the articles first..last; a GAP moves the resume point over articles the
server does not have; END closes the range at its last article. Each becomes
a `Piece`: its text, and the resume point after it.

The text is inflated into blocks of `INFLATE_BLOCK_BYTES` (cut anywhere),
never into one buffer: isal grows one by doubling, each step a copy into
fresh pages with the GIL held, which the indexing loop beside the inflating
thread waited for. The indexing loop cuts the blocks into parts that end at
line ends (`line_parts`) as it feeds them. Measured on an 11 MB chunk, with
a thread spinning beside: the indexing thread lost ~15 ms to the old way
(inflate whole, then cut), ~11 ms to 256 KB blocks cut in the inflating
thread, ~2-5 ms to 1-2 MB blocks cut by the indexing loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import attrs

from usenet_indexer.errors import RemoteProtocolError
from usenet_indexer.wire.frames import Codec, Frame, FrameKind
from usenet_indexer.wire.inflate import InflateFailed, Problem, capped_inflate_blocks

# The blocks a chunk is inflated into (see the module docstring).
INFLATE_BLOCK_BYTES: Final = 1 << 20

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
        blocks: overview lines, in blocks cut anywhere (none for a gap or the
            end); `line_parts` cuts them at line ends.
        end: the range is complete after this piece.
    """

    first: int
    next_article: int
    blocks: tuple[bytes, ...] = ()
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
        return Piece(
            frame.first, frame.last + 1, inflate(frame.codec, frame.payload, max_text_bytes)
        )
    if frame.kind == FrameKind.GAP:
        return Piece(frame.first, frame.last + 1)
    if frame.kind == FrameKind.END:
        return Piece(frame.last, frame.last + 1, end=True)
    raise ValueError(f"a {frame.kind.name} frame carries no articles")


def inflate(codec: Codec, payload: bytes, max_bytes: int) -> tuple[bytes, ...]:
    """A chunk payload as overview text, inflated with a cap, in blocks cut anywhere.

    Args:
        codec: how the payload is compressed (NONE, ZLIB or GZIP).
        payload: the payload as the spool holds it.
        max_bytes: the most it may inflate to.

    Returns:
        The text in blocks (of `INFLATE_BLOCK_BYTES`, or the plain payload whole).

    Raises:
        ChunkError: a codec this edge does not read (ZSTD), corrupt or
            truncated data, trailing bytes, or more than `max_bytes`.
    """
    if codec == Codec.NONE:
        if len(payload) > max_bytes:
            raise ChunkError(f"a plain chunk of {len(payload)} bytes is over {max_bytes}")
        return (payload,) if payload else ()
    wbits = _WBITS.get(codec)
    if wbits is None:
        raise ChunkError(f"chunk codec {codec.name} is not supported by this edge (zlib, gzip)")
    try:
        blocks = capped_inflate_blocks(
            payload, wbits=wbits, max_bytes=max_bytes, block_bytes=INFLATE_BLOCK_BYTES
        )
    except InflateFailed as failed:
        if failed.problem is Problem.TOO_LARGE:
            raise ChunkError(f"a {codec.name} chunk {failed.detail}") from failed
        if failed.problem is Problem.CORRUPT:
            raise ChunkError(f"a {codec.name} chunk is corrupt: {failed.detail}") from failed
        raise ChunkError(
            f"a {codec.name} chunk is truncated or has bytes after its end"
        ) from failed
    return tuple(blocks)


def line_parts(blocks: Iterable[bytes], part_bytes: int) -> Iterator[bytes]:
    """The text of `blocks` (cut anywhere) in parts of about `part_bytes` that end at a line end.

    After its first line end a part holds at most `part_bytes` bytes (its
    first line may be longer: it may have begun in the block before); the
    last part ends where the text does (with or without a line end). A block
    that is a whole part is given as it is; any other part is copied once,
    when it is asked for.

    Raises:
        ValueError: `part_bytes` is not positive.
    """
    if part_bytes < 1:
        raise ValueError(f"part_bytes must be positive, not {part_bytes}")
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
                yield b"".join([*open_line, view[start:cut]])
                open_line = []
            elif start == 0 and cut == len(block):
                yield block
            else:
                yield bytes(view[start:cut])
            start = cut
        if end < len(block):
            open_line.append(view[end:])
    if open_line:
        yield b"".join(open_line)


def within(piece: Piece, resume: int, last: int) -> Piece | None:
    """What of `piece` the indexer takes: its articles from `resume` to the range's `last`.

    The spool is cut where it was cut (`uidx spool import` every N articles
    counted from the first one present after a cut, the prefetcher where its
    reads ended), the ranges where they were planned (round numbers), so a
    chunk may start before the resume point (the range before's tail, or
    what is stored already) and run past the range's last article (the next
    range's head). Both ends are cut off here, on the edge, where the text is
    inflated anyway: the coordinator sends the spool's files as they are (it
    never inflates one to cut it), and a fixed grid of chunks would not fit
    ranges planned in other sizes, the follower's live head, or a spool cut
    before. So a batch covers at most [resume, last + 1): the coordinator's
    422 for a batch past the range's end stays a guard that never fires.

    The cost: a chunk that straddles an end is read line by line once more
    (`lines_within`, about 1.4 us a line: 140 ms for a chunk of 100k lines,
    where indexing 50k of them takes 670 ms); at most two chunks of a range
    straddle, and none when the spool is cut where the ranges are.

    Args:
        piece: what one frame gave.
        resume: the indexer's resume point (the first article not indexed yet).
        last: the range's last article.

    Returns:
        The piece with its text and resume point inside the range; None when
        nothing of it is left to index. The `end` flag is kept.
    """
    next_article = min(piece.next_article, last + 1)
    if next_article <= resume:
        return None
    blocks = piece.blocks
    if blocks and (piece.first < resume or next_article < piece.next_article):
        blocks = lines_within(blocks, resume, last)
    return Piece(max(piece.first, resume), next_article, blocks, piece.end)


def lines_within(blocks: Sequence[bytes], first: int, last: int) -> tuple[bytes, ...]:
    """The lines of `blocks` for articles `first`..`last` (a chunk that straddles a range's end).

    Only a chunk that starts before the resume point or runs past the
    range's end needs this (see `within`). Lines without a number go with
    the line before them; the lines need not be in article order.

    Returns:
        The lines kept, as one block (none when no line is kept).
    """
    kept: list[bytes] = []
    keep = False
    for line in b"".join(blocks).split(b"\n"):
        number = line.split(b"\t", 1)[0]
        if number.isdigit():
            keep = first <= int(number) <= last
        if keep and line:
            kept.append(line)
    return (b"\n".join(kept) + b"\n",) if kept else ()
