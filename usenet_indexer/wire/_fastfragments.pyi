# The compiled unpacking and checks (wire/_fastfragments.pyx); see fragments.CompiledFiles.
from collections.abc import Sequence

from usenet_indexer.core.batch import FileChunk

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
