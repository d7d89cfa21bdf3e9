"""A release's name, and which of its files a probe should read.

Both the indexer (for rules and probe candidates, per batch) and the merge
(for the catalog, over all batches) name releases with these functions, so a
release has the same name whichever part of it is looked at, as long as the
head gives one. Without a head name the release is named after its main file:
the biggest file that is not a par2/nfo/sfv/nzb companion.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from usenet_indexer.core.subject import (
    FIXED_STEMS,
    NFO_SUFFIX,
    PAR2_SUFFIX,
    PAR2_VOLUME,
    extension,
    file_stem,
    looks_obfuscated,
)

# Extensions of the files that come beside an upload's content (not its content).
COMPANIONS = frozenset({"par2", "nfo", "sfv", "nzb", "txt", "jpg", "png", "md5", "srr", "srs"})


def release_name(head_name: str | None, files: Iterable[tuple[str, int]]) -> str:
    """The name of a release.

    The head's name, unless the head says less than the files do: a random
    head (`[N3wZ] \\6aZWVk237607\\::[PRiVATE]-[WtFnZb]-[Show.S01E02...mkv]`) gives
    way to the main file's stem when that is not random, and a poster's word
    (`Film - "Jerry Maguire (1996) 1080p ...-PHD.part13.rar"`, `panter -
    "74518-The Hunters (2011).par2"`) when the stem says more (a scene mark or
    two words at least).

    Args:
        head_name: the name the subjects' head gives, if any.
        files: (file name, total segments) of the files known.

    Returns:
        The head name or the stem of the main file, else of any file.
    """
    named = head_name if head_name and not looks_obfuscated(head_name) else None
    if named and _says_something(named):
        return named  # most releases: the files are not looked at
    stem = _main_stem(files)
    if not stem or looks_obfuscated(stem) or stem.lower() in FIXED_STEMS:
        return named or head_name or stem
    if named and not _says_something(stem):
        return named
    return stem


def _main_stem(files: Iterable[tuple[str, int]]) -> str:
    """The stem of the main file: content before companions, then the bigger,
    then the smaller name (stable); "" without files."""
    best: tuple[int, int, str] | None = None
    for name, total in files:
        rank = (0 if extension(name) in COMPANIONS else 1, total, name)
        if best is None or rank[:2] > best[:2] or (rank[:2] == best[:2] and rank[2] < best[2]):
            best = rank
    if best is None:
        return ""
    return file_stem(best[2]) or best[2]


# Words of a name: what spaces, dots and underscores part.
_WORD_GAPS = re.compile(r"[\s._]+")


def _says_something(name: str) -> bool:
    """Whether a name tells a release: a scene mark (-GROUP, an episode, a year,
    a resolution) or two words at least; a lone word is a poster's or a crew's."""
    if _GROUP_SUFFIX.search(name) or _SCENE_MARK.search(name):
        return True
    return len([word for word in _WORD_GAPS.split(name) if word]) >= 2


# What scene names have that volume names and random names lack: a -GROUP
# at the end, an episode, a year or a resolution.
_GROUP_SUFFIX = re.compile(r"-[A-Za-z0-9]{2,}$")
_SCENE_MARK = re.compile(r"(?i)\bS\d{1,2}E\d{1,3}\b|(?:19|20)\d\d|\b\d{3,4}p\b")


def upload_name(head_names: Sequence[str | None], files: Iterable[tuple[str, int]]) -> str:
    """The name of an upload made of one or more releases (`uploads.link`).

    One release: `release_name`. Several: its parts were named differently
    (volumes `grp-show.s08e08.2160p.r00` beside `Show.S08E08.2160p.NF.WEB-DL-GRP.nfo`,
    a random `.mkv` beside par2 volumes named after the release), and the
    most release-like of their head names and file stems names it: not
    random, then the most scene marks (a -GROUP, an episode, a year or a
    resolution, upper and lower case), then a content file's, then the
    bigger file's.

    Args:
        head_names: each part's head name (None: no head).
        files: (file name, total segments) of every file of the upload.
    """
    if len(head_names) == 1:
        return release_name(head_names[0], files)
    ranked: list[tuple[tuple[bool, int, int, int], str]] = [
        ((True, _scene_marks(head), 1, 1 << 30), head) for head in head_names if head
    ]
    # What a stem says, once per stem: an upload's volumes and par2s share a few.
    said: dict[str, tuple[bool, int]] = {}
    for name, total in files:
        stem = file_stem(name) or name
        content = 0 if extension(name) in COMPANIONS else 1
        says = said.get(stem)
        if says is None:
            says = said[stem] = (not looks_obfuscated(stem), _scene_marks(stem))
        ranked.append(((*says, content, total), stem))
    if not ranked:
        return ""
    best = max(rank for rank, _ in ranked)
    return min(name for rank, name in ranked if rank == best)


def _scene_marks(name: str) -> int:
    marks = bool(_GROUP_SUFFIX.search(name)) + len(_SCENE_MARK.findall(name))
    return marks + (name != name.lower() and name != name.upper())


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
