"""Reading overview dumps: plain, gzip or zlib files, in blocks of whole lines.

isal's igzip/zlib inflate several times faster than the standard library's
and read the same formats, so a dump inflates faster than it indexes. They
inflate without holding the GIL, so `read_blocks` reads and inflates in a
background thread a few blocks ahead: on a second core the inflating
overlaps the caller's work on the blocks before. That thread gets the GIL
back only between the caller's long compiled calls, so it reads and
inflates in big steps (a gzip file `INFLATE_READ_BYTES` at a time).
"""

from __future__ import annotations

import contextlib
import io
import queue
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import BinaryIO

from isal import igzip, isal_zlib

from usenet_indexer.errors import InputError
from usenet_indexer.wire.inflate import INFLATE_ERROR

# Bytes read at a time: big enough that per-block costs vanish, small enough
# that a block of text stays a few MB in memory.
BLOCK_BYTES = 4 << 20
# Bytes of a gzip file read (and inflated) at a time (see _GzipStream).
INFLATE_READ_BYTES = 8 << 20
# Blocks the background reader keeps ready: enough that the caller never
# waits for one while the reader can keep up, few enough to stay small.
READ_AHEAD = 2


def check_readable(path: Path) -> None:
    """Check that a dump can be opened, before the work on the dumps named before it.

    Raises:
        InputError: `path` is missing, a folder, not a regular file, or
            cannot be opened; the message names it and says which.
    """
    if path.is_dir():
        raise InputError(f"cannot read {path}: is a directory")
    if path.exists() and not path.is_file():
        # A pipe or a device: read_blocks looks at the first bytes and starts again.
        raise InputError(f"cannot read {path}: is not a regular file")
    open_overview(path).close()


def open_overview(path: Path) -> BinaryIO:
    """Open a dump for reading, inflating gzip transparently (zlib is inflated by the reader).

    Raises:
        InputError: the file cannot be opened.
    """
    try:
        raw = path.open("rb")
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from error
    try:
        magic = raw.read(2)
        raw.seek(0)
    except OSError as error:
        raw.close()
        raise InputError(f"cannot read {path}: {error.strerror or error}") from error
    if magic == b"\x1f\x8b":
        return _GzipStream(raw)
    return raw


class _GzipStream(io.BufferedReader):
    """A gzip file's inflated bytes: what IGzipFile reads (its reader, isal's
    `_GzipReader`: members one after another, the same errors), reading the
    file `INFLATE_READ_BYTES` at a time rather than isal's 512 kB; closing it
    closes the file.

    The reader thread (`_read_ahead`) needs the GIL back after each read of
    the file and each inflate, and gets it only between the indexer's long
    compiled calls: in 512 kB steps it was starved, and the inflating of a
    dump (~0.2 s a 1M lines) ran between the indexing, not beside it.
    """

    def __init__(self, file: BinaryIO) -> None:
        # (isal's stub types the reader more loosely than BufferedReader asks.)
        reader = igzip._IGzipReader(file, buffersize=INFLATE_READ_BYTES)
        super().__init__(reader)  # type: ignore[arg-type]
        self._file = file

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._file.close()


def read_blocks(path: Path, block_bytes: int = BLOCK_BYTES) -> Generator[bytes, None, None]:
    """The file's content in blocks that end at a line end (the last may not).

    The blocks are read (and inflated, and cut at line ends) in a background
    thread, `READ_AHEAD` blocks ahead of the caller; stopping early or
    failing stops that thread and waits for it, which closes the file.

    Raises:
        InputError: the file cannot be read or does not inflate.
    """
    yield from _read_ahead(_blocks(path, block_bytes))


def _read_ahead(blocks: Generator[bytes, None, None], depth: int = READ_AHEAD) -> Iterator[bytes]:
    """`blocks`, made in a background thread up to `depth` ahead; what it raises is
    raised here, after the thread has ended."""
    handoff: queue.Queue[bytes | BaseException | None] = queue.Queue(depth)
    stop = threading.Event()
    worker = threading.Thread(
        target=_hand_over, args=(blocks, handoff, stop), name="read-ahead", daemon=True
    )
    worker.start()
    try:
        while (item := handoff.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        # Take what it still hands over, so that a full queue does not hold it.
        while worker.is_alive():
            with contextlib.suppress(queue.Empty):
                handoff.get(timeout=0.01)
        worker.join()


def _hand_over(
    blocks: Generator[bytes, None, None],
    handoff: queue.Queue[bytes | BaseException | None],
    stop: threading.Event,
) -> None:
    """The background thread: each block, then None at the end or the error that ended it."""
    try:
        for block in blocks:
            if stop.is_set():
                return
            handoff.put(block)
        handoff.put(None)
    except BaseException as error:  # raised again in the caller's thread
        handoff.put(error)
    finally:
        blocks.close()  # stopped early: closes the file


def _blocks(path: Path, block_bytes: int) -> Generator[bytes, None, None]:
    """The blocks of `read_blocks`, made in the thread that iterates this (the background one)."""
    with open_overview(path) as stream:
        try:
            first = stream.read(block_bytes)
        except (OSError, EOFError, INFLATE_ERROR) as error:
            # A small file fails on its first read already.
            raise InputError(f"{path}: cannot be read as overview data: {error}") from error
        inflate = None
        if len(first) >= 2 and first[0] == 0x78 and (first[0] << 8 | first[1]) % 31 == 0:
            inflate = isal_zlib.decompressobj()
        rest = b""
        data = first
        try:
            while data:
                if inflate is not None:
                    data = inflate.decompress(data)
                cut = data.rfind(b"\n") + 1
                if cut:
                    # One copy: the rest of the last block and this one up to its last line end.
                    yield b"".join((rest, memoryview(data)[:cut])) if rest else data[:cut]
                    rest = data[cut:]
                else:
                    rest += data
                data = stream.read(block_bytes)
        except (OSError, EOFError, INFLATE_ERROR) as error:
            raise InputError(f"{path}: cannot be read as overview data: {error}") from error
        if inflate is not None:
            rest += inflate.flush()
        if rest:
            yield rest


def last_article(block: bytes) -> int | None:
    """The article number of the last line in a block that has one."""
    end = len(block)
    while end > 0:
        start = block.rfind(b"\n", 0, end - 1) + 1
        line = block[start:end]
        tab = line.find(b"\t")
        if tab > 0 and line[:tab].isdigit():
            return int(line[:tab])
        end = start
    return None


def dump_chunks(path: Path, articles: int) -> Iterator[tuple[int, int, bytes, int]]:
    """(first, last, text, lines) of each spool chunk of `articles` articles of a dump, in order.

    A line without an article number stays with the chunk it is in (the
    indexer counts it as malformed); `uidx spool import` and the chaos
    harness cut dumps so.
    """
    current: list[bytes] = []
    first = -1
    for block in read_blocks(path):
        for line in block.split(b"\n"):
            head = line.split(b"\t", 1)[0]
            if not head.isdigit():
                if line and current:
                    current.append(line)  # malformed: the indexer counts it
                continue
            number = int(head)
            if first < 0:
                first = number
            if number - first >= articles and current:
                yield first, number - 1, b"\n".join(current) + b"\n", len(current)
                current, first = [], number
            current.append(line)
    if current:
        last = (
            int(current[-1].split(b"\t", 1)[0])
            if current[-1].split(b"\t", 1)[0].isdigit()
            else first
        )
        yield first, last, b"\n".join(current) + b"\n", len(current)
