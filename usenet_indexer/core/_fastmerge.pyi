# The compiled figures of a merged file (core/_fastmerge.pyx); see merge.Figures.
from collections.abc import Sequence

from usenet_indexer.core.batch import FileChunk

def figures(chunks: Sequence[FileChunk]) -> tuple[int, int, bool] | None: ...
