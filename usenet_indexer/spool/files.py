"""Spool chunk files: written whole (temporary name, fsync, rename) or not at all.

A chunk file holds the overview lines of articles [first, last] of one group,
compressed. Its index row (store/spool.py) is written only after the rename,
so a row always names a complete file, and a crash leaves at most a
temporary file, which `write_chunk` never reuses and a sweep may remove.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import attrs
from isal import isal_zlib

from usenet_indexer.wire.frames import Codec

# isal level 2: ~400 MB/s here and about the size of zlib -6 on overview text.
LEVEL = 2


def chunk_path(group: str, first: int, last: int) -> Path:
    """The chunk's path relative to the spool folder."""
    return Path(group) / f"{first:020d}-{last:020d}.zlib"


def write_chunk(
    spool_dir: Path, group: str, first: int, last: int, text: bytes
) -> tuple[Path, int, Codec]:
    """Compress and write a chunk atomically; returns (relative path, bytes, codec)."""
    relative = chunk_path(group, first, last)
    final = spool_dir / relative
    final.parent.mkdir(parents=True, exist_ok=True)
    data = isal_zlib.compress(text, LEVEL)
    temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        temporary.rename(final)
    finally:
        temporary.unlink(missing_ok=True)
    return relative, len(data), Codec.ZLIB


@attrs.define(eq=False)
class ChunkWriter:
    """A chunk file written piece by piece (compressed as it comes), then committed.

    Only compressed bytes are held, so a 50k-line chunk costs ~2.5 MB, not
    the ~15 MB of its text. Until `commit` the data is in a temporary file
    that no index row names; `abort` (or a crash) leaves nothing that is read.
    """

    final: Path
    relative: Path
    _temporary: Path
    _stream: BinaryIO
    _compressor: Any
    lines: int = 0

    @classmethod
    def open(cls, spool_dir: Path, group: str, first: int, last: int) -> ChunkWriter:
        relative = chunk_path(group, first, last)
        final = spool_dir / relative
        final.parent.mkdir(parents=True, exist_ok=True)
        temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        stream = temporary.open("wb")
        return cls(final, relative, temporary, stream, isal_zlib.compressobj(LEVEL))

    def write(self, blocks: Sequence[bytes], lines: int) -> None:
        """Add overview lines: `lines` of them in `blocks` of text, each line ended by LF."""
        for block in blocks:
            self._stream.write(self._compressor.compress(block))
        self.lines += lines

    def commit(self) -> tuple[str, int, Codec]:
        """Finish, fsync and rename; returns (relative path, bytes, codec)."""
        try:
            self._stream.write(self._compressor.flush())
            self._stream.flush()
            os.fsync(self._stream.fileno())
            size = self._stream.tell()
            self._stream.close()
            self._temporary.rename(self.final)
        finally:
            self.abort()
        return str(self.relative), size, Codec.ZLIB

    def abort(self) -> None:
        """Drop the temporary file (nothing once committed)."""
        self._stream.close()
        self._temporary.unlink(missing_ok=True)


def chunk_files(spool_dir: Path, older_than_seconds: float) -> list[Path]:
    """The chunk files (paths relative to `spool_dir`) last written at least
    `older_than_seconds` ago; no temporary file."""
    cutoff = time.time() - older_than_seconds
    found: list[Path] = []
    if spool_dir.is_dir():
        for path in spool_dir.glob("*/*.zlib"):
            try:
                written = path.stat().st_mtime
            except FileNotFoundError:
                continue  # swept meanwhile
            if written <= cutoff:
                found.append(path.relative_to(spool_dir))
    return found


def remove_temporary_files(spool_dir: Path) -> int:
    """Remove the temporary files of writers that died; returns how many.

    The writer's pid is in the name; a file of a live process is left alone.
    """
    removed = 0
    if spool_dir.is_dir():
        for path in spool_dir.glob("*/.*.tmp"):
            pid = path.name.rsplit(".", 2)[-2]
            if pid.isdigit() and _alive(int(pid)):
                continue
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
