# The compiled figures of a merged file (core/_fastmerge.pyx); see merge.Figures.
from collections.abc import Sequence
from typing import Any

from usenet_indexer.core.batch import FileChunk

def figures(chunks: Sequence[FileChunk]) -> tuple[int, int, bool] | None: ...

# An upload's catalog files (merge._files_built's twin); see merge.FilesBuilt.
def files_built(
    files: list[Any], catalog_file: type, segments: type
) -> tuple[list[Any], int, int, int] | None: ...

# A merged file's segments as orjson writes their list (merge.Segments.json_text's twin).
def segments_json(chunks: list[FileChunk]) -> bytes | None: ...
