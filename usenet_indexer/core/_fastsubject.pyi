# The compiled part's signature (core/_fastsubject.pyx); see indexer.COMPILED_SUBJECT.
from usenet_indexer.core.subject import FileSubject

def file_subject(prefix: bytes) -> FileSubject | None: ...
