# The compiled loop's signature (core/_fastindex.pyx); see indexer.Scan.
from array import array
from collections.abc import Callable
from typing import Any

def scan(
    data: bytes,
    fast: dict[bytes, Any],
    slow: Callable[[list[bytes]], None],
    opened: dict[tuple[bytes, bytes, int], Any],
    make: Callable[..., Any],
    limits: tuple[int, int, int, int],
) -> tuple[int, int]: ...
def file_segments(
    segments: bytearray, total: int, max_message_id: int, shuffle: int
) -> tuple[array[int], array[int], str, int, int, list[tuple[int, int]]] | None: ...
