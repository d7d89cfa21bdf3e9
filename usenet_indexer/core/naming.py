"""A release's name, and which of its files a probe should read.

Both the indexer (for rules and probe candidates, per batch) and the merge
(for the catalog, over all batches) name releases with these functions, so a
release has the same name whichever part of it is looked at, as long as the
head gives one. Without a head name the release is named after its main file:
the biggest file that is not a par2/nfo/sfv/nzb companion.
"""

from __future__ import annotations

from collections.abc import Iterable

from usenet_indexer.core.subject import NFO_SUFFIX, PAR2_SUFFIX, PAR2_VOLUME, extension, file_stem

_COMPANIONS = frozenset({"par2", "nfo", "sfv", "nzb", "txt", "jpg", "png", "md5", "srr", "srs"})


def release_name(head_name: str | None, files: Iterable[tuple[str, int]]) -> str:
    """The name of a release.

    Args:
        head_name: the name the subjects' head gives, if any.
        files: (file name, total segments) of the files known.

    Returns:
        The head name, else the stem of the main file, else of any file.
    """
    if head_name:
        return head_name
    best: tuple[int, int, str] | None = None
    for name, total in files:
        # Content before companions, then bigger, then the smaller name (stable).
        rank = (0 if extension(name) in _COMPANIONS else 1, total, name)
        if best is None or rank[:2] > best[:2] or (rank[:2] == best[:2] and rank[2] < best[2]):
            best = rank
    if best is None:
        return ""
    return file_stem(best[2]) or best[2]


def probe_file_rank(name: str) -> int | None:
    """How good a file is to probe for real names: lower is better, None for useless.

    The index .par2 (no volume number) is small and lists every file name; a
    volume .par2 lists them too; an .nfo often names the release.
    """
    if PAR2_SUFFIX.search(name):
        return 1 if PAR2_VOLUME.search(name) else 0
    if NFO_SUFFIX.search(name):
        return 2
    return None
