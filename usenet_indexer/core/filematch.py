"""Which posted file is which file of a par2's list, where the sizes leave no doubt: pure.

Theory of operation
-------------------
An obfuscated upload's files are posted under random names; its par2 index
lists the real ones, each with its exact length (core/probing.py reads it).
What the headers tell of a posted file is its articles' sizes (overview's
bytes): the yEnc-encoded data plus each article's headers. So a par2 file of
length L posted in n articles takes, in overview bytes, between
`L * ENCODED_MIN + n * ARTICLE_MIN` and `L * ENCODED_MAX + n * ARTICLE_MAX`:
yEnc grows data by its escapes (4 of 256 byte values: 1.6% of random data;
plain text has almost none) and a line end per line (2 bytes of 128 or 256:
1.6% or 0.8%), and each article carries its headers and the =ybegin,
=ypart and =yend lines (a few hundred bytes; long subjects, paths and
crossposts make more). A posted file *fits* a par2 file when its bytes
(those seen, and at most a full article more per article missing) meet
that span and its name's extension, when it has one, is the real one's
(ngPost and Nyuu keep the extension, NewsUP drops it: no extension says
nothing).

A fit is not a match: rar volumes have one length, and files of close
sizes fit each other's spans. A file takes a real name only without doubt:

1. **unique both ways**: the file fits that par2 file only, and no other
   posted file fits it;
2. **one to one**: when every file the upload announced was seen (its
   [i/M] counter: no listed file can be missing), the posted files left
   are as many as the par2's files left and they can be paired one to one
   by their fits, every file is one of them (nothing unprotected beside
   them): a file that fits one par2 file only is that file, and a par2 file
   that one posted file fits is that file, one after the other. (A file
   missing and an unprotected one posted would make the counts agree by
   chance, and the pairs wrong: so only a whole upload;)
3. **the upload's own encoding**: the files named so far (of two articles
   or more) say how much this upload's yEnc grew the data (one posting tool,
   one line length): the spans of the other files of two articles or more
   are narrowed to that growth (less the articles' headers' share, with a
   margin), and 1 and 2 are tried again.

Files of one length (rar volumes), or of sizes too close for the span,
keep their posted names; so do par2 files (the list does not name them)
and files whose name is a real one already. The order files were posted
in is not used: a tool may post them in any order, and one that sorts the
random names sorts them by the random name.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence

import attrs

from usenet_indexer.core.subject import PAR2_SUFFIX, extension

# yEnc's growth of a file's data, from plain text on long lines to random
# data on 64-character lines (see the module docstring).
ENCODED_MIN = 1.0
ENCODED_MAX = 1.06
# Each article's headers and yEnc lines, in bytes: a bare article to one with
# a long subject, path and crossposts.
ARTICLE_MIN = 200
ARTICLE_MAX = 4_000
# How far the growth of one upload's files may stray from what its named
# files say (escapes vary a little with the data: a hundredth of a percent
# for random data of a megabyte, more for text).
GROWTH_MARGIN = 0.005
# Rule 2 pairs the files by augmenting paths, a recursion as deep as the files:
# a release of more files left unmatched is not tried (rule 1 still is).
ONE_TO_ONE_MOST = 400


@attrs.frozen
class Posted:
    """What the headers tell of a posted file's size.

    Attributes:
        name: its name as posted.
        articles: its articles (the segment count it announces).
        low: the bytes of its articles seen.
        high: at most that many bytes with the missing articles (inf when no
            full article was seen to bound them).
    """

    name: str
    articles: int
    low: int
    high: float

    @classmethod
    def of(cls, name: str, announced: int, segments: Sequence[tuple[int, str, int]]) -> Posted:
        """A file of `announced` segments of which `segments` (k, message-id, bytes) were seen."""
        sizes = [size for _, _, size in segments]
        articles = max(announced, len(sizes), 1)
        missing = articles - len(sizes)
        full = [size for k, _, size in segments if k != articles]
        high = sum(sizes) + missing * max(full) if full else math.inf
        return cls(name, articles, sum(sizes), high if missing else sum(sizes))

    def lengths(self, growth: tuple[float, float]) -> tuple[float, float]:
        """The least and most a file's length can be for these bytes, yEnc growing its
        data by a factor within `growth`."""
        return (
            (self.low - self.articles * ARTICLE_MAX) / growth[1],
            (self.high - self.articles * ARTICLE_MIN) / growth[0],
        )

    def keeps(self, name: str) -> bool:
        """Whether the posted name's extension, if it has one, is the name's."""
        posted = extension(self.name)
        return not posted or posted == extension(name)

    def growth(self, length: int) -> tuple[float, float]:
        """The growths of the data for which this file's bytes are `length` bytes encoded."""
        return (
            (self.low - self.articles * ARTICLE_MAX) / length,
            (self.high - self.articles * ARTICLE_MIN) / length,
        )


def real_names(
    posted: Sequence[Posted], listed: Mapping[str, int], *, whole: bool
) -> dict[int, str]:
    """The real names of the posted files that the par2's list gives without doubt.

    Args:
        posted: a release's files (see `Posted`), in any order.
        listed: the par2's files, name -> length (0: unknown, never matched).
        whole: every file the upload announced was seen (rule 2 needs it).

    Returns:
        Index in `posted` -> real name, for the files matched (see the module
        docstring); the others keep their names.
    """
    present = {p.name for p in posted}
    left = {n: length for n, length in listed.items() if length > 0 and n not in present}
    open_ = {
        i: p
        for i, p in enumerate(posted)
        if p.name not in listed and not PAR2_SUFFIX.search(p.name)
    }
    named: dict[int, str] = {}
    growth = (ENCODED_MIN, ENCODED_MAX)
    while open_ and left:
        fits = _fits(open_, left, growth)
        found = _certain(fits, len(left) if whole else None)
        if not found:
            narrowed = _own_growth(posted, listed, named)
            if narrowed is None or narrowed == growth:
                break
            growth = narrowed
            continue
        for i, name in found.items():
            named[i] = name
            del open_[i], left[name]
    return named


def _fits(
    posted: Mapping[int, Posted], left: Mapping[str, int], growth: tuple[float, float]
) -> dict[int, set[str]]:
    """The listed files each posted file fits: those of a length in its span (found by
    bisection: a release of many files costs no product of their counts) that it keeps
    the extension of."""
    ordered = sorted((length, name) for name, length in left.items())
    lengths = [length for length, _ in ordered]
    fits = {}
    for i, p in posted.items():
        least, most = p.lengths(_growth(p, growth))
        span = ordered[bisect.bisect_left(lengths, least) : bisect.bisect_right(lengths, most)]
        fits[i] = {name for _, name in span if p.keeps(name)}
    return fits


def _growth(posted: Posted, upload: tuple[float, float]) -> tuple[float, float]:
    """The span of growth tried for a file: the upload's own for a file of several
    articles; a file of one article may be of another kind of data (an nfo, an sfv)."""
    return upload if posted.articles > 1 else (ENCODED_MIN, ENCODED_MAX)


def _certain(fits: Mapping[int, set[str]], listed: int | None) -> dict[int, str]:
    """The matches the fits leave no doubt about (rules 1 and 2 of the docstring; `listed`:
    the listed files left, None when the upload is not whole: rule 2 is not tried)."""
    fitted = _fitted(fits)
    found = {
        i: next(iter(names))
        for i, names in fits.items()
        if len(names) == 1 and len(fitted[next(iter(names))]) == 1
    }
    if found or len(fits) != listed or len(fits) > ONE_TO_ONE_MOST or not _pairable(fits):
        return found
    return _one_to_one({i: set(names) for i, names in fits.items()}, _fitted(fits))


def _fitted(fits: Mapping[int, set[str]]) -> dict[str, set[int]]:
    """The posted files that fit each listed file."""
    fitted: dict[str, set[int]] = {}
    for i, names in fits.items():
        for name in names:
            fitted.setdefault(name, set()).add(i)
    return fitted


def _pairable(fits: Mapping[int, set[str]]) -> bool:
    """Whether every posted file can be paired with a listed file it fits, each listed
    file once (a matching of all of them, by augmenting paths)."""
    holder: dict[str, int] = {}

    def place(i: int, tried: set[str]) -> bool:
        free = next((n for n in fits[i] if n not in holder), None)
        if free is not None:
            holder[free] = i
            return True
        for name in fits[i] - tried:
            tried.add(name)
            if place(holder[name], tried):
                holder[name] = i
                return True
        return False

    return all(place(i, set()) for i in fits)


def _one_to_one(fits: dict[int, set[str]], fitted: dict[str, set[int]]) -> dict[int, str]:
    """Every posted file is one of the listed, as many of each, and they can be paired:
    the pairs that forces, one after the other (a file that fits one listed file only,
    a listed file that one file fits)."""
    found: dict[int, str] = {}
    while fits:
        forced = next(((i, next(iter(n))) for i, n in fits.items() if len(n) == 1), None)
        if forced is None:
            forced = next(((next(iter(f)), n) for n, f in fitted.items() if len(f) == 1), None)
        if forced is None:
            break
        i, name = forced
        found[i] = name
        for other in fits.pop(i):
            fitted[other].discard(i)
        for j in fitted.pop(name):
            fits[j].discard(name)
    return found


def _own_growth(
    posted: Sequence[Posted], listed: Mapping[str, int], named: Mapping[int, str]
) -> tuple[float, float] | None:
    """The growth this upload's named files of several articles agree on, with the margin;
    None when there are none, or when they do not agree."""
    spans = [posted[i].growth(listed[name]) for i, name in named.items() if posted[i].articles > 1]
    if not spans:
        return None
    low = max(s[0] for s in spans) - GROWTH_MARGIN
    high = min(s[1] for s in spans) + GROWTH_MARGIN
    low, high = max(low, ENCODED_MIN), min(high, ENCODED_MAX)
    return (low, high) if low <= high else None
