# The compiled fragment checks' signature (wire/_fastwire.pyx); see fragments.FactsFinder.
def facts(
    raw: bytes,
    max_text_chars: int,
    max_files: int,
    max_segments: int,
    max_total_segments: int,
    max_file_index: int,
    undated: int,
) -> tuple[int, int, int, int, int, tuple[int, bytes]] | None: ...
