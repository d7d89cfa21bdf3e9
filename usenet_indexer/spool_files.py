"""Spool chunk files: written whole (temporary name, fsync, rename) or not at all.

A chunk file holds the overview lines of articles [first, last] of one group,
compressed. Its index row (store/spool.py) is written only after the rename,
so a row always names a complete file, and a crash leaves at most a
temporary file, which `write_chunk` never reuses and a sweep may remove.
"""

from __future__ import annotations

import os
from pathlib import Path

from isal import isal_zlib

from usenet_indexer.frames import Codec

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
