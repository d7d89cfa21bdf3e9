# The compiled unpacking and checks (wire/_fastfragments.pyx); see fragments.CompiledFiles.
from collections.abc import Sequence

from zstandard import ZstdDecompressor

from usenet_indexer.core.batch import FileChunk
from usenet_indexer.wire.packed import PackedRelease

def files(
    raw: bytes, chunk: type[FileChunk], max_files: int, max_segments: int
) -> list[FileChunk] | None: ...

# The compiled checks' signature; see fragments.FactsFinder.
def facts(
    raw: bytes,
    max_text_chars: int,
    max_files: int,
    max_segments: int,
    max_total_segments: int,
    max_file_index: int,
    undated: int,
) -> tuple[int, int, int, int, int, tuple[int, bytes]] | None: ...

# The compiled layout of a release chunk's files; see fragments.COMPILED_PACKED.
def packed(files: Sequence[FileChunk]) -> bytes | None: ...

# The compiled checks of a release chunk a node sent; see batchwire.COMPILED_CHECKS.
class ReleaseChecks:
    def __init__(
        self,
        cls: type[PackedRelease],
        decompressor: ZstdDecompressor,
        max_text_chars: int,
        max_groups: int,
        max_files_announced: int,
        max_files: int,
        max_segments: int,
        max_total_segments: int,
        max_file_index: int,
        undated: int,
        max_window: int,
    ) -> None: ...
    def check(self, wire: object, budget: int) -> tuple[PackedRelease, int] | None: ...
