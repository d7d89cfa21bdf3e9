"""Where spool chunks are kept: a folder (files.py) or an S3 bucket (s3.py), behind one interface.

Theory of operation
-------------------
The spool's index (store/spool.py, in PostgreSQL) names each chunk by its
key, `GROUP/FIRST-LAST.zlib` (files.chunk_path), whatever holds it. A
`SpoolStore` holds the chunks' bytes under those keys:

- the prefetcher's connections open a `ChunkSink` per chunk, write the
  chunk's lines into it as they come (compressed), and `commit` it in the
  landing's thread call just before the index row is written: a row always
  names a whole chunk;
- the coordinator's stream `read`s a chunk, or, where the store can hand out
  links (S3: `presign`), sends the edge a link to it instead of its bytes;
- the coordinator asks whether a chunk `exists` when an edge says its link
  answered 404: a chunk really gone (a spool lost, a database restored
  without it) has its index row forgotten and is fetched again, where an
  edge's word alone would let it drop chunks; and which of the range's next
  chunks are `missing` too, in one go (a spool lost whole is then fetched
  again at once, not chunk by chunk as the stream reaches each);
- the prefetcher's sweep `delete`s the chunks whose rows it removed;
- at a prefetcher's start `remove_leftovers` drops what writers that died
  left (a folder's temporary files; an S3 spool has none: an object is
  visible only once its PUT is complete);
- the prefetcher's housekeeping lists the chunks `stored` (hourly), to
  delete those stored but never indexed that no stream will ever read
  (spool/leftovers.py).

`open_spool(settings)` picks the store from `spool_url`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import attrs

from usenet_indexer.config import Settings
from usenet_indexer.spool import files
from usenet_indexer.wire.frames import Codec


class ChunkSink(Protocol):
    """One chunk being written: lines in, then committed whole or aborted."""

    @property
    def lines(self) -> int:
        """The overview lines written so far."""
        ...

    def write(self, blocks: Sequence[bytes], lines: int) -> None:
        """Add overview lines: `lines` of them in `blocks` of text, each line ended by LF."""
        ...

    def commit(self) -> tuple[str, int, Codec]:
        """Make the chunk whole and visible; returns (key, stored bytes, codec).

        Raises:
            OSError: a folder spool cannot be written.
            SpoolStoreError: the object store refused or cannot be reached.
        """
        ...

    def abort(self) -> None:
        """Drop what was written (nothing once committed)."""
        ...


class SpoolStore(Protocol):
    """The chunks' bytes under their keys (see the module docstring)."""

    def open_chunk(self, group: str, first: int, last: int) -> ChunkSink:
        """A sink for the chunk of articles first..last of `group`."""
        ...

    def write_chunk(self, group: str, first: int, last: int, text: bytes) -> tuple[str, int, Codec]:
        """Compress and store a whole chunk at once; returns (key, stored bytes, codec)."""
        ...

    def read(self, key: str) -> bytes:
        """A chunk's stored (compressed) bytes.

        Raises:
            OSError, SpoolStoreError: it cannot be read.
        """
        ...

    def presign(self, key: str) -> str | None:
        """A URL an edge may GET the chunk from without credentials; None: stream it."""
        ...

    def exists(self, key: str) -> bool:
        """Whether the chunk is stored (False only when the store says it is not there).

        Raises:
            OSError, SpoolStoreError: the store cannot tell (refused, unreachable).
        """
        ...

    def missing(self, keys: Sequence[str]) -> list[str]:
        """Those of `keys` the store says are not there (as `exists`, for a batch).

        Raises:
            OSError, SpoolStoreError: the store cannot tell of one (refused, unreachable).
        """
        ...

    def delete(self, keys: Sequence[str]) -> None:
        """Delete chunks (a key already gone is fine)."""
        ...

    def remove_leftovers(self) -> int:
        """Drop the partial chunks of writers that died; returns how many."""
        ...

    def stored(self, older_than_seconds: float) -> list[str]:
        """The keys of the whole chunks stored at least `older_than_seconds` ago (by the
        store's own clock where it has one), indexed or not.

        Raises:
            OSError, SpoolStoreError: the store cannot be listed.
        """
        ...

    def describe(self) -> str:
        """Where the chunks are, for log lines."""
        ...

    def check(self) -> None:
        """Whether the store can be used, asked once at a daemon's start.

        Raises:
            ConfigError: a mistake of the settings (no such bucket, keys refused).
            SpoolStoreError: the store cannot be reached now.
        """
        ...


@attrs.frozen
class FolderSpool:
    """Chunks as files under `folder` (written atomically: temporary name, fsync, rename).

    Attributes:
        folder: the spool folder; keys are paths relative to it (an absolute
            path in the index, from older versions, is used as it is).
    """

    folder: Path

    def open_chunk(self, group: str, first: int, last: int) -> files.ChunkWriter:
        return files.ChunkWriter.open(self.folder, group, first, last)

    def write_chunk(self, group: str, first: int, last: int, text: bytes) -> tuple[str, int, Codec]:
        path, size, codec = files.write_chunk(self.folder, group, first, last, text)
        return str(path), size, codec

    def read(self, key: str) -> bytes:
        return (self.folder / key).read_bytes()

    def presign(self, key: str) -> str | None:
        return None

    def exists(self, key: str) -> bool:
        try:
            (self.folder / key).stat()
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def missing(self, keys: Sequence[str]) -> list[str]:
        return [key for key in keys if not self.exists(key)]

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            (self.folder / key).unlink(missing_ok=True)

    def remove_leftovers(self) -> int:
        return files.remove_temporary_files(self.folder)

    def stored(self, older_than_seconds: float) -> list[str]:
        return [str(path) for path in files.chunk_files(self.folder, older_than_seconds)]

    def describe(self) -> str:
        return str(self.folder)

    def check(self) -> None:
        return None  # the folder is made with the first chunk


def as_spool(value: SpoolStore | Path) -> SpoolStore:
    """A store as it is; a folder as its FolderSpool (an options field's converter)."""
    return FolderSpool(value) if isinstance(value, Path) else value


def open_spool(settings: Settings) -> SpoolStore:
    """The spool store of `spool_url`: `s3://bucket/prefix`, a folder, or `$UIDX_HOME/spool`.

    Raises:
        ConfigError: an S3 spool's URL without a bucket, or a bad endpoint (missing
            or refused keys and a missing bucket: `check`).
    """
    if settings.spool_url.startswith("s3://"):
        from usenet_indexer.spool.s3 import S3Spool  # boto3 is loaded for an S3 spool only

        return S3Spool.from_settings(settings)
    if settings.spool_url:
        return FolderSpool(Path(settings.spool_url).expanduser())
    return FolderSpool(settings.home / "spool")
