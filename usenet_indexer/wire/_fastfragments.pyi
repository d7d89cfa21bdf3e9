# The compiled unpacking's signature (wire/_fastfragments.pyx); see fragments.CompiledFiles.
from usenet_indexer.core.batch import FileChunk

def files(
    raw: bytes, chunk: type[FileChunk], max_files: int, max_segments: int
) -> list[FileChunk] | None: ...
