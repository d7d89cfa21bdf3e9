"""Whether a release can be downloaded: whole, repairable from its PAR2 recovery, or broken.

Pure: a merged release's files in, a `Completion` out (the catalog build
stores its state; the newznab API offers whole and repairable releases).

Theory of operation
-------------------
What a release announces comes from its subjects: the file counter [i/M]
says how many files the upload has, each file's segment counter (k/N) how
many articles it was cut into. What it has is what the headers show of
them. What it can rebuild comes from the names of its PAR2 recovery
volumes, which carry their block counts:

- par2cmdline (and QuickPar, MultiPar, ParPar's default) name a volume
  `base.vol{first}+{count}.par2`, both numbers zero-padded to the widest
  of the set (par2cmdline pads the firsts and the counts each to their own
  widest: `vol00+1`, `vol07+8`, `vol15+16`; `vol000+001` past 99);
- ParPar's other scheme names it `base.vol{first}-{end}.par2`, end
  exclusive (`vol01-03` holds two blocks);

and each volume's size, from its articles' sizes: the set's block (slice)
size is a volume's bytes, less the copies of the critical packets it
carries (each about the index file's size), over its blocks (the least of
its volumes' estimates), unless a probe read the par2 index's main
packet, which says it exactly. Sizes are taken raw: an article's bytes
less its headers and yEnc's overhead (`renames.ENCODED_RATIO`,
`HEADER_BYTES`), on both sides of every division.

A missing stretch of X bytes of a file can touch at most ceil(X / block)
+ 1 of the file's blocks (a file starts at a block's start, so a stretch
needs its length in blocks and one more where it straddles a boundary).
So each missing segment damages ceil(segment bytes / block) + 1 blocks,
and a run of consecutive missing segments, taken as one stretch, ceil(run
bytes / block) + 1 (a run of one: the same); an unseen segment is a full
article, the size of the release's biggest (a file's last is smaller). A
file the counter announces and no header shows is damaged whole, at the
size of the release's biggest data file (archive volumes but the last are
all that size). A release is:

- **whole** when every data file (anything but .par2) is there with every
  segment; missing recovery volumes or their segments do not matter;
- **repairable** when its usable recovery blocks (those of its volumes,
  less what their own missing segments destroy) are at least the damaged
  blocks times `REPAIR_MARGIN`;
- **broken** otherwise, and when the damage cannot be sized (no volume to
  tell the block size, no data file to size a missing one).

Which unseen files are recovery volumes: posting tools post a set's
volumes in name order, so a file missing between two seen volumes of one
set whose block ranges leave a gap is a volume (the gap proves one is
missing). Every other unseen file counts as data: a release is never
called whole on a guess.

Releases with two PAR2 sets (a sample with its own) are judged by the set
with the most blocks: blocks of one set cannot rebuild another's files.
"""

from __future__ import annotations

import bisect
import enum
import math
import re
from collections.abc import Sequence

import attrs

from usenet_indexer.core.merge import CatalogFile, segment_numbers, segment_sizes
from usenet_indexer.core.subject import MAX_FILES, PAR2_SUFFIX

# An article's bytes against the data it carries: yEnc's growth (1-4%, taken
# at its middle) and each article's headers (a posting tool's, ~600 bytes).
ENCODED_RATIO = 1.03
HEADER_BYTES = 600

# Recovery blocks must cover the damage with a fifth to spare: the block size
# is estimated from article bytes (yEnc adds 1-4%, headers vary, the copies of
# the critical packets are sized by the index file), an unseen file is sized
# like the biggest seen, and a server that lost these articles may lose one
# more before the download.
REPAIR_MARGIN = 1.2

_VOLUME = re.compile(r"\.vol(\d{1,6})([+-])(\d{1,6})\.par2$", re.IGNORECASE)
# A recovery packet's bytes besides its block: the packet head (64) and the exponent (4).
_RECOVERY_HEAD = 68
# Raw sizes are estimates within a few percent either way: a stretch within 2% of a
# whole number of blocks is that number (posters often make a block one article,
# whose estimate then comes out a hair over or under the block's).
_FIT = 0.02


class State(enum.Enum):
    """What a downloader makes of a release (the catalog's `state`, by value)."""

    WHOLE = "whole"
    REPAIRABLE = "repairable"
    BROKEN = "broken"


@attrs.frozen
class Volume:
    """A recovery volume's place in its set, from its name.

    Attributes:
        base: the set's name (the volume's name before `.vol`), lower case.
        first: the number of its first recovery block (the exponent).
        blocks: how many recovery blocks it holds.
    """

    base: str
    first: int
    blocks: int

    @property
    def end(self) -> int:
        return self.first + self.blocks


def volume(name: str) -> Volume | None:
    """A recovery volume's set, first block and block count, from its file name.

    Args:
        name: a file name (`x.vol03+04.par2`, `x.vol01-03.par2`, any case).

    Returns:
        The volume (`vol03+04`: 4 blocks from 3; `vol01-03`: 2 from 1), or None
        for any other name, and for a `-` name whose end is not past its first.
    """
    found = _VOLUME.search(name)
    if found is None:
        return None
    first, sign, last = int(found[1]), found[2], int(found[3])
    blocks = last if sign == "+" else last - first
    if blocks <= 0:
        return None
    return Volume(name[: found.start()].lower(), first, blocks)


@attrs.frozen
class Completion:
    """What a release has against what it announced, and what that makes it.

    Attributes:
        state: whole, repairable or broken.
        files: files seen.
        files_announced: files seen and those the file counter says are missing.
        segments: segments seen.
        segments_announced: segments the seen files announce, and an estimate
            for the missing files (as many as the seen files have on average).
        damaged_blocks: recovery blocks the missing data needs (0 when whole).
        recovery_blocks: usable blocks of the set judged by (0: none).
        block_bytes: the block size used (0: none needed, or none known).
    """

    state: State
    files: int
    files_announced: int
    segments: int
    segments_announced: int
    damaged_blocks: int = 0
    recovery_blocks: int = 0
    block_bytes: int = 0


def judge(
    files: Sequence[CatalogFile], files_announced: int | None, slice_bytes: int | None = None
) -> Completion:
    """Whether a release is whole, repairable or broken (see the module docstring).

    Args:
        files: the release's files, each with the segments seen of it.
        files_announced: M of its file counter [i/M], or None (no counter: files
            missing whole cannot be known, only missing segments).
        slice_bytes: the PAR2 set's block size, where a probe read it.

    Returns:
        The state, with the counts it was judged on.
    """
    unseen = _unseen(files, files_announced)
    lost = _unseen_data(files, unseen)
    # A build judges every release it merges: each file's count is asked once, and
    # only a file short of segments is asked whether it is a par2 (most are whole).
    counts_seen = [len(f.segments) for f in files]
    totals = [f.total_segments for f in files]
    seen = sum(counts_seen)
    announced = sum(map(max, totals, counts_seen))
    short = [
        f
        for f, count, total in zip(files, counts_seen, totals, strict=True)
        if count < total and not PAR2_SUFFIX.search(f.name)
    ]
    average = announced // len(files) if files else 0
    counts = {
        "files": len(files),
        "files_announced": len(files) + len(unseen),
        "segments": seen,
        "segments_announced": announced + average * len(unseen),
    }
    if not short and not lost:
        return Completion(State.WHOLE, **counts)
    # The poster's article size: its biggest article (a file's last is smaller).
    article = max((max(segment_sizes(f.segments), default=0) for f in files), default=0)
    volumes = _main_set(files)
    block = slice_bytes or _block_bytes(files, volumes, article)
    if not block:
        return Completion(State.BROKEN, **counts)
    recovery = sum(max(0, v.blocks - _damage(f, block, article)) for f, v in volumes)
    damage = sum(_damage(f, block, article) for f in short)
    if lost:
        data = [f for f in files if not PAR2_SUFFIX.search(f.name)]
        sizes = [_raw_file(f, article) for f in data if len(f.segments)]
        if not sizes:
            return Completion(State.BROKEN, **counts, recovery_blocks=recovery, block_bytes=block)
        damage += lost * _stretch(max(sizes), block)
    state = State.REPAIRABLE if recovery >= damage * REPAIR_MARGIN else State.BROKEN
    return Completion(
        state, **counts, damaged_blocks=damage, recovery_blocks=recovery, block_bytes=block
    )


def _unseen(files: Sequence[CatalogFile], files_announced: int | None) -> list[int]:
    """The file counter's numbers no seen file has (none without a counter)."""
    if not files_announced or files_announced > MAX_FILES:
        return []
    indexes = {f.index for f in files if f.index is not None}
    unseen = [i for i in range(1, files_announced + 1) if i not in indexes]
    # Files without a number (a part posted without the counter) may be some of them.
    unnumbered = sum(1 for f in files if f.index is None)
    return unseen[: max(0, len(unseen) - unnumbered)]


def _unseen_data(files: Sequence[CatalogFile], unseen: list[int]) -> int:
    """How many unseen files count as data: all but those between two seen volumes of
    one set whose block ranges leave a gap (a volume is missing there)."""
    if not unseen:
        return 0
    numbered = sorted((f.index, f.name) for f in files if f.index is not None)
    indexes = [index for index, _ in numbered]
    data = 0
    for number in unseen:
        at = bisect.bisect_left(indexes, number)
        low = volume(numbered[at - 1][1]) if at > 0 else None
        high = volume(numbered[at][1]) if at < len(numbered) else None
        if low is None or high is None or low.base != high.base:
            data += 1
            continue
        first, second = sorted((low, high), key=lambda v: v.first)
        if first.end >= second.first:
            data += 1  # no gap: what is missing there is no volume of the set
    return data


def _main_set(files: Sequence[CatalogFile]) -> list[tuple[CatalogFile, Volume]]:
    """The volumes of the set with the most blocks (ties: the first set by name)."""
    sets: dict[str, list[tuple[CatalogFile, Volume]]] = {}
    for file in files:
        found = volume(file.name)
        if found is not None:
            sets.setdefault(found.base, []).append((file, found))
    if not sets:
        return []
    return max(sorted(sets.items()), key=lambda item: sum(v.blocks for _, v in item[1]))[1]


def _block_bytes(
    files: Sequence[CatalogFile], volumes: list[tuple[CatalogFile, Volume]], article: int
) -> int:
    """The block size a set's volumes tell (0: no volume has a segment).

    A volume of c blocks holds c recovery packets (a 68-byte head and a block
    each) and copies of the critical packets (par2cmdline: as many as c has
    binary digits; ParPar likewise), each copy about the index file's size
    (the index holds one, and the creator's packet). Each volume's bytes less
    those copies, over its blocks, less the heads, is an estimate; the least of
    them is taken (a smaller block counts more damage). Without the index file,
    the copies are not taken off: the least is then the biggest volume's.
    """
    sized = [(f, v) for f, v in volumes if len(f.segments)]
    if not sized:
        return 0
    index = _index_bytes(files, sized[0][1].base, article)
    estimates = [
        (_raw_file(f, article) - v.blocks.bit_length() * index) / v.blocks - _RECOVERY_HEAD
        for f, v in sized
    ]
    if not any(e > 0 for e in estimates):  # the index was no measure of the copies
        estimates = [_raw_file(f, article) / v.blocks - _RECOVERY_HEAD for f, v in sized]
    positive = [e for e in estimates if e > 0]
    return max(1, int(min(positive))) if positive else 0


def _index_bytes(files: Sequence[CatalogFile], base: str, article: int) -> float:
    """The raw bytes of a set's index file (`base.par2`), whole; 0 when not seen whole."""
    for file in files:
        if file.name.lower() == f"{base}.par2" and len(file.segments) >= file.total_segments:
            return _raw_file(file, article)
    return 0.0


def _raw(encoded: float, articles: int) -> float:
    """What articles of `encoded` bytes hold of a file: less their headers, less yEnc's
    overhead."""
    return max(0.0, encoded - articles * HEADER_BYTES) / ENCODED_RATIO


def _raw_file(file: CatalogFile, article: int) -> float:
    """A file's raw bytes had every announced segment come (`_full_bytes`)."""
    return _raw(_full_bytes(file, article), max(file.total_segments, len(file.segments)))


def _full_bytes(file: CatalogFile, article: int) -> int:
    """A file's bytes had every announced segment come: those seen, and the unseen
    ones each a full article."""
    seen = sum(segment_sizes(file.segments))
    return seen + article * max(0, file.total_segments - len(file.segments))


def _damage(file: CatalogFile, block: int, article: int) -> int:
    """The blocks a file's missing segments damage: each run of consecutive missing
    numbers one stretch of that many full articles' raw bytes, ceil(stretch / block) + 1."""
    if len(file.segments) >= file.total_segments:
        return 0
    numbers = segment_numbers(file.segments)
    full = _raw(article, 1)
    damage = 0
    previous = 0
    # Numbers are distinct, ascending and at most N (the indexer keeps no other).
    for number in (*numbers, file.total_segments + 1):
        run = number - previous - 1
        if run > 0:
            damage += _stretch(run * full, block)
        previous = number
    return damage


def _stretch(raw: float, block: int) -> int:
    """The blocks a stretch of `raw` bytes can touch: its length in blocks (one within
    _FIT of a whole number of blocks taken as that number), and one more."""
    return max(1, math.ceil(raw / block - _FIT)) + 1
