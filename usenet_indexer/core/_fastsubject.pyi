# The compiled part's signature (core/_fastsubject.pyx); see indexer.COMPILED_SUBJECT
# and indexer.COMPILED_GROUPING.
from collections.abc import Callable
from typing import Any

from usenet_indexer.core.subject import FileSubject

def file_subject(prefix: bytes) -> FileSubject | None: ...
def releases(
    files: list[Any], parse: Callable[[bytes], FileSubject]
) -> dict[tuple[bytes, str], list[Any]]: ...
def executable_verdict(
    members: list[Any], extensions: frozenset[str], companions: frozenset[str]
) -> str | None: ...
def segment_count(members: list[Any]) -> int: ...
def executable_judged(
    by_release: dict[tuple[bytes, str], list[Any]],
    extensions: frozenset[str],
    companions: frozenset[str],
    rule: str,
    keep_dropped: bool,
    counts: dict[str, list[int]],
) -> list[tuple[tuple[bytes, str], list[Any], str | None]]: ...

# FileSubject's fields, in the order the compiled parse makes it.
_SUBJECT_FIELDS: tuple[str, ...]
