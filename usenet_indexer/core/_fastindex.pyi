# The compiled parts' signatures (core/_fastindex.pyx); see indexer.Scan and indexer.CompiledFiles.
from array import array
from collections.abc import Callable, Sequence
from typing import Any, final

def scan(
    data: bytes,
    fast: dict[bytes, Any],
    slow: Callable[[list[bytes]], None],
    opened: dict[tuple[bytes, bytes, int], Any],
    make: Callable[..., Any],
    limits: tuple[int, int, int, int],
) -> tuple[int, int]: ...

@final
class FileArrays:
    @property
    def segments(self) -> bytearray: ...
    @property
    def total(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def first(self) -> int: ...
    @property
    def last(self) -> int: ...
    @property
    def repeats(self) -> bool: ...
    @property
    def repeated_texts(self) -> bool: ...
    @property
    def ordered(self) -> bool: ...
    @property
    def pauses(self) -> list[tuple[int, int]]: ...
    @property
    def restarts(self) -> list[int]: ...

# A piece of a file: its numbers and sizes by number, its message-ids joined by
# "\n", the date text of its first line.
Piece = tuple[array[int], array[int], str, bytes]

def file_arrays(segments: bytearray, total: int, max_message_id: int) -> FileArrays | None: ...
def pass_starts(
    files: list[FileArrays], cut: bool = True, resets: Sequence[int] = ()
) -> list[int]: ...
def sorted_articles(files: list[FileArrays]) -> array[int]: ...
def file_pieces(f: FileArrays, starts: list[int]) -> tuple[list[Piece | None], int]: ...

# FileChunk's fields, in the order file_chunks sets them.
_CHUNK_FIELDS: tuple[str, ...]

def file_chunks(
    f: FileArrays,
    starts: list[int],
    chunk: type[Any],
    head: tuple[bytes, str, str, int | None, int],
    dates: dict[bytes, int],
    parsed: Callable[[dict[bytes, int], bytes], int],
) -> tuple[list[Any | None], int]: ...
def plain_date(date: bytes) -> int | None: ...
def chunk_head(open_file: Any) -> tuple[bytes, str, str, int | None, int]: ...

# ReleaseChunk's fields, in the order released sets them.
_RELEASE_FIELDS: tuple[str, ...]

def xref_groups(members: list[Any]) -> tuple[str, ...]: ...
def released(
    release_key: bytes,
    members: list[Any],
    found: list[tuple[list[Any | None], Any]],
    fallback: tuple[str, ...],
    chunk: type[Any],
    next_key: Callable[[bytes], bytes],
) -> list[Any]: ...
