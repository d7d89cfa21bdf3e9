"""Literal prefilters of regular expressions: strings a match must contain.

A catalog build files every release it merges by some forty rules of
regular expressions (core/categories.py), most of which match no given
name; Python's `re` tries each at every position of the name. `prefilter`
reads a pattern's syntax tree and finds sets of literal strings such that
every match contains one string of each set (`ps4` for
`(?:^|[._-])ps4(?=$|[._-])`; `s0`..`s9` for an episode's `s\\d{1,3}e\\d{1,4}`;
a sport's names, and `19` or `20`, for a sport's event and year): where a
set has none in the text, the pattern cannot match, and the search is
skipped. Where it may match, the pattern itself decides: a prefilter only
skips searches that would find nothing.

`Index` asks many prefilters at once: which of them admit a text, as a
bit mask, from the text's character pairs (the few strings the text's
pairs begin are looked for, not every string of every pattern).
`Prefilter.admits`, one prefilter's test as plainly stated, is the oracle
`Index.candidates` is tested against (tests/test_prefilter.py).

What it assumes, so that it stays a necessary condition:

- the text is ASCII (a prefilter admits any other: IGNORECASE lets `K`
  (U+212A, Kelvin) match `k` and U+017F (a long s) match `s`, and `\\d` matches Unicode digits);
- strings and text are compared lower case (IGNORECASE or not: lowering
  both only loses precision);
- what it does not know (a category but `\\d`, a negated class, a class of
  more than `_CLASS` characters, a look-around, a repeat that may match
  nothing, an unknown node kind) requires nothing.

Pure: no I/O.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import attrs

# The syntax tree of a pattern: CPython's own parser (re._parser; node kinds are
# compared by name, and a kind not known here requires nothing).
_PARSER: Any = importlib.import_module("re._parser")

# The most characters of a class, and strings of a set, a set is made of; the most
# sets a prefilter keeps (each is a test).
_CLASS = 16
_MOST = 256
_SETS = 2
_SECOND = 32
_DIGITS = frozenset("0123456789")

Needles = frozenset[str]


@attrs.frozen
class Prefilter:
    """What every match of a pattern holds.

    Attributes:
        sets: sets of lower-case strings; a match (lowered) holds one string of
            each (none: nothing is known, every text may match). The first is the
            most telling.
    """

    sets: tuple[Needles, ...] = ()

    def admits(self, lowered: str | None) -> bool:
        """Whether the pattern may match a text (`lowered(text)`): False when it cannot."""
        if lowered is None:
            return True
        return all(any(map(lowered.__contains__, s)) for s in self.sets)


def lowered(text: str) -> str | None:
    """The text as prefilters compare it: lower case; None for a text that is not ASCII
    (every prefilter admits it)."""
    return text.lower() if text.isascii() else None


def prefilter(pattern: re.Pattern[str]) -> Prefilter:
    """What every match of `pattern` in an ASCII text holds (see the module docstring)."""
    try:
        tree = _PARSER.parse(pattern.pattern, pattern.flags)
    except re.error:
        return Prefilter()
    found = sorted(map(_minimal, _sequence(list(tree))), key=_rank, reverse=True)
    # The best set, and the next ones where they are few strings (a test each).
    return Prefilter(tuple(found[:1] + [s for s in found[1:_SETS] if len(s) <= _SECOND]))


def _minimal(needles: Needles) -> Needles:
    """The set without the strings that hold another of it (where they are, it is);
    a big set as it is (its pairs are compared, and it is seldom the one asked)."""
    if len(needles) > _SECOND:
        return needles
    return frozenset(n for n in needles if not any(o != n and o in n for o in needles))


def _rank(needles: Needles) -> tuple[int, int, int]:
    """How telling a set is: strings of two characters or more first (any letter or
    digit is in most names), then the fewer (each is a test), then the longer."""
    shortest = min(map(len, needles))
    return (min(shortest, 2), -len(needles), shortest)


def _best(found: list[Needles]) -> Needles | None:
    return max(found, key=_rank) if found else None


def _chars(node: tuple[Any, Any]) -> Needles | None:
    """The lower-case characters one character of the text may be, for a node that
    matches exactly one character; None for any other node (or too many)."""
    kind, value = str(node[0]), node[1]
    if kind == "LITERAL":
        return _lowered(frozenset(chr(value)))
    if kind == "IN":
        chars: set[str] = set()
        for item_kind, item in value:
            name = str(item_kind)
            if name == "LITERAL":
                chars.add(chr(item))
            elif name == "RANGE" and item[1] - item[0] < _CLASS:
                chars.update(chr(c) for c in range(item[0], item[1] + 1))
            elif name == "CATEGORY" and str(item) == "CATEGORY_DIGIT":
                chars.update(_DIGITS)
            else:
                return None  # a negated class, another category, a wide range
        return _lowered(frozenset(chars))
    return None


def _lowered(chars: frozenset[str]) -> Needles | None:
    if not chars or len(chars) > _CLASS or not all(c.isascii() for c in chars):
        return None
    return frozenset(c.lower() for c in chars)


def _sequence(items: list[tuple[Any, Any]]) -> list[Needles]:
    """The sets a sequence of nodes requires: each node's own, and each run of
    single-character nodes in a row (their characters' strings)."""
    found: list[Needles] = []
    run: set[str] = set()

    def close() -> None:
        nonlocal run
        if run:
            found.append(frozenset(run))
        run = set()

    def extend(chars: Needles) -> None:
        nonlocal run
        grown = {s + c for s in (run or {""}) for c in chars}
        if len(grown) > _MOST:
            close()
            grown = set(chars)
        run = grown

    for node in items:
        chars = _chars(node)
        if chars is not None:
            extend(chars)
            continue
        kind, value = str(node[0]), node[1]
        if kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") and value[0] >= 1:
            inner = list(value[2])
            one = _chars(inner[0]) if len(inner) == 1 else None
            if one is not None:
                extend(one)  # at least one character of the class: the run takes it, then ends
                close()
                continue
            close()
            found += _sequence(inner)  # matched once at least: all it requires
            continue
        close()
        found += _node(kind, value)
    close()
    return found


def _node(kind: str, value: Any) -> list[Needles]:
    """The sets a node requires that is neither a single character nor a repeat of one."""
    if kind == "SUBPATTERN":
        return _sequence(list(value[-1]))
    if kind == "ATOMIC_GROUP":
        return _sequence(list(value))
    if kind == "BRANCH":
        union: set[str] = set()
        for branch in value[1]:
            best = _best(_sequence(list(branch)))
            if best is None or len(union | best) > _MOST:
                return []
            union.update(best)
        return [frozenset(union)]
    return []  # anchors, look-arounds, any character, back references: nothing required


@attrs.frozen
class Index:
    """Which of many prefilters admit a text, at once: each set of each prefilter has a
    bit, set when one of its strings is in the text; a prefilter admits the text when
    the bits of all its sets are set (as `Prefilter.admits` says, one at a time).

    The strings are found from the text's character pairs: the pairs that begin a
    string are taken from the text's in one set operation, and only the strings they
    begin are looked for (most texts begin few).

    Attributes:
        size: the prefilters indexed (bit `i` of an answer is the `i`th).
        starts: each character pair that begins a string, and the strings it begins
            (with the bits of the sets each is in).
        pairs: the pairs of `starts`.
        always: the bits of the sets the pairs do not tell (a set with a one-character
            string, or no set: a prefilter of one set has its second set's bit here).
    """

    size: int
    starts: dict[tuple[str, str], tuple[tuple[str, int], ...]]
    always: int
    pairs: frozenset[tuple[str, str]] = attrs.field(init=False)

    @pairs.default
    def _pairs(self) -> frozenset[tuple[str, str]]:
        return frozenset(self.starts)  # the text's pairs are looked up in it, not copied

    @classmethod
    def of(cls, prefilters: Sequence[Prefilter]) -> Index:
        size = len(prefilters)
        strings: dict[str, int] = {}
        always = 0
        for bit, found in enumerate(prefilters):
            for number in range(_SETS):
                mask = 1 << (bit + number * size)
                needles = found.sets[number] if number < len(found.sets) else frozenset()
                if not needles or min(map(len, needles)) < 2:
                    always |= mask
                    continue
                for needle in needles:
                    strings[needle] = strings.get(needle, 0) | mask
        starts: dict[tuple[str, str], list[tuple[str, int]]] = {}
        for needle, mask in sorted(strings.items()):
            starts.setdefault((needle[0], needle[1]), []).append((needle, mask))
        return cls(size, {pair: tuple(found) for pair, found in starts.items()}, always)

    def candidates(self, lowered: str | None) -> int:
        """The bits of the prefilters that admit a text (`lowered(text)`; all of them for
        None: a text that is not ASCII)."""
        every = (1 << self.size) - 1
        if lowered is None:
            return every
        bits = self.always
        for pair in self.pairs.intersection(pairwise(lowered)):
            for needle, mask in self.starts[pair]:
                if len(needle) == 2 or needle in lowered:
                    bits |= mask
        admitted = bits & every
        for number in range(1, _SETS):
            admitted &= bits >> (number * self.size)
        return admitted
