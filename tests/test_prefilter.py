"""Literal prefilters of regular expressions (core/prefilter.py), and the category rules'.

A prefilter must never turn away a text its pattern matches: checked on
hand-made patterns, on random patterns with random texts (hypothesis), and
for every category rule (core/categories.py) on the real corpus's names,
subjects, file names and groups, on the names, files and groups both
generator profiles make, and on fuzzed names built from the rules' own
words. With every prefilter sound, `categorise` files each name as searching
every rule would; that is checked too, against that plain search.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.core import categories
from usenet_indexer.core.categories import HASHED, OTHER, VIDEO_EXTENSIONS, categorise
from usenet_indexer.core.prefilter import Index, Prefilter, lowered, prefilter
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.testing.corpus import load_corpus

RULES = categories._rules()
MATCHER_LISTS = (RULES.by_name, RULES.by_weak_name, RULES.by_group)


def _admits(pattern: str, text: str, flags: int = re.IGNORECASE) -> bool:
    return prefilter(re.compile(pattern, flags)).admits(lowered(text))


@pytest.mark.parametrize(
    ("pattern", "sets"),
    [
        (r"(?:^|[._])ps4(?=$|[._])", [{"ps4"}]),
        (r"s\d{1,3}e\d", [{f"s{d}" for d in "0123456789"}, {f"e{d}" for d in "0123456789"}]),
        (r"(?:xbox|x360)", [{"box", "360"}]),  # the parser takes the x out: x(?:box|360)
        (r"x264|h\.?264", [{"264"}]),  # x264 holds 264
        (r"a.*b", []),  # one character each: nothing more telling than no prefilter
        (r"(?:abc)?", []),
        (r"[^a]bc", [{"bc"}]),
    ],
)
def test_what_a_pattern_requires(pattern: str, sets: list[set[str]]) -> None:
    found = prefilter(re.compile(pattern, re.IGNORECASE))
    assert [set(s) for s in found.sets if min(map(len, s)) > 1] == sets


def test_a_text_without_the_strings_is_turned_away_and_one_with_them_admitted() -> None:
    assert not _admits(r"(?:^|[._])ps4(?=$|[._])", "Some.Game.PS3-GRP")
    assert _admits(r"(?:^|[._])ps4(?=$|[._])", "Some.Game.PS4-GRP")
    assert _admits(r"(?:^|[._])ps4(?=$|[._])", "xps4x")  # admitted; the search says no


def test_a_text_that_is_not_ascii_is_always_admitted() -> None:
    # IGNORECASE: the Kelvin sign matches k, the long s matches s.
    assert re.search("k", "\u212a", re.IGNORECASE)
    assert _admits(r"keygen", "\u212aeygen")
    assert re.search("s01", "\u017f01", re.IGNORECASE)
    assert _admits(r"s\d\d", "\u017f01")
    # \d matches other digits than 0-9 (Arabic-Indic three).
    assert _admits(r"x\d", "x\u0663")


def test_the_index_turns_away_what_none_of_a_prefilters_strings_is_in() -> None:
    found = [prefilter(re.compile(p, re.IGNORECASE)) for p in ("ps4", "xbox", "a.b")]
    index = Index.of(found)
    assert index.candidates(lowered("Game.PS4")) == 0b101  # "a.b" has no pair: always asked
    assert index.candidates(lowered("Game.XBOX")) == 0b110
    assert index.candidates(lowered("Gam\u00e9")) == 0b111


# Random patterns of a small grammar, and texts of their alphabet.
_ALPHABET = "abcxyz019._-[] "
_atoms = st.sampled_from(
    ["a", "b", "c", "x", "1", "0", r"\d", "[ab]", "[^a]", ".", r"\.", "[._-]", r"\[", "z"]
)


def _patterns() -> st.SearchStrategy[str]:
    leaf = st.lists(_atoms, min_size=1, max_size=5).map("".join)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3).map("".join),
            st.lists(inner, min_size=2, max_size=3).map(lambda ps: "(?:" + "|".join(ps) + ")"),
            st.tuples(inner, st.sampled_from(["?", "*", "+", "{1,3}", "{2}"])).map(
                lambda pq: f"(?:{pq[0]}){pq[1]}"
            ),
            inner.map(lambda p: f"(?=$|[._]){p}"),
            inner.map(lambda p: f"^{p}"),
        ),
        max_leaves=8,
    )


@given(_patterns(), st.text(alphabet=_ALPHABET + "AXZ\u212a\u017f", max_size=30), st.booleans())
@settings(max_examples=1500, deadline=None)
def test_a_random_pattern_prefilter_never_turns_a_match_away(
    pattern: str, text: str, ignore_case: bool
) -> None:
    compiled = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    found = prefilter(compiled)
    admits = found.admits(lowered(text))
    if admits:  # the index admits at least what the prefilter does
        assert Index.of([found]).candidates(lowered(text)) == 1
    if compiled.search(text):
        assert admits, (pattern, text, found)


# ---------------------------------------------------------------------------
# The category rules' prefilters


def _rule_words() -> list[str]:
    """Every string the rules' prefilters hold: the fuzzed names are made of them."""
    return sorted(
        {
            needle
            for matchers in MATCHER_LISTS
            for m in matchers.matchers
            for s in m.prefilter.sets
            for needle in s
        }
    )


@cache
def _generated_texts() -> tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]:
    """(name, groups, file names) of the uploads both generator profiles make."""
    rows = []
    for profile in ("default", "posting-tools"):
        truth = generate(GeneratorConfig(articles=30_000, seed=7, profile=profile)).truth
        for release in truth.releases:
            files = tuple(f.name for f in release.files)
            for name in {release.name, release.real_name}:
                rows.append((name, tuple(release.groups), files))
    return tuple(rows)


def _corpus_texts(corpus_dir: Path) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(text, groups, files) of the corpus: subjects.tsv's subjects and their names,
    and every NZB's subjects, file names and groups."""
    import csv

    from usenet_indexer.core.subject import parse_file_subject

    rows: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
    with (corpus_dir / "subjects.tsv").open(encoding="utf-8", newline="") as stream:
        for row in csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE):
            groups = tuple(g for g in row["group"].split(",") if g)
            info = parse_file_subject(row["subject"])
            files: tuple[str, ...] = (info.file_name,) if info.file_name else ()
            for text in (row["subject"], info.head_name, info.file_name):
                if text:
                    rows.append((text, groups, files))
    for name, nzb in load_corpus(corpus_dir / "nzb"):
        files = tuple(n for f in nzb.files if (n := parse_file_subject(f.subject).file_name))
        for file in nzb.files:
            rows.append((file.subject, tuple(file.groups), files))
        rows.append((name, tuple(nzb.files[0].groups) if nzb.files else (), files))
    return rows


def _check_sound(texts: list[str]) -> None:
    """Every rule's prefilter admits every text its pattern matches, and the index
    answers as the prefilters do (a set with a one-character string is not asked)."""
    for matchers in MATCHER_LISTS:
        for text in texts:
            low = lowered(text)
            admitted = matchers.index.candidates(low)
            for bit, matcher in enumerate(matchers.matchers):
                asked = Prefilter(tuple(s for s in matcher.prefilter.sets if min(map(len, s)) > 1))
                admits = matcher.prefilter.admits(low)
                assert bool(admitted >> bit & 1) == asked.admits(low), (matcher.category, text)
                if matcher.pattern.search(text):
                    assert admits, (matcher.category, text)


def _searched(matchers: categories._Matchers, texts: tuple[str, ...]) -> int | None:
    """The first rule whose pattern matches one of `texts`, every rule searched."""
    for matcher in matchers.matchers:
        if any(matcher.pattern.search(text) for text in texts):
            return matcher.category
    return None


def _check_same(rows: list[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> None:
    """`_Matchers.first` answers as searching every rule does, for names and groups."""
    for name, groups, _files in rows:
        for matchers in (RULES.by_name, RULES.by_weak_name):
            assert matchers.first((name,)) == _searched(matchers, (name,)), name
        assert RULES.by_group.first(groups) == _searched(RULES.by_group, groups)


def test_the_rules_prefilters_admit_every_corpus_text_they_match(corpus_dir: Path) -> None:
    rows = _corpus_texts(corpus_dir)
    assert len(rows) > 1000
    texts = sorted({t for text, groups, files in rows for t in (text, *groups, *files)})
    _check_sound(texts)
    _check_same(rows)
    # The corpus's names are filed by every rule kind: the check covers them.
    filed = {categorise(text, groups, files) for text, groups, files in rows}
    assert len(filed) >= 15
    assert {HASHED, OTHER} <= filed


@pytest.mark.slow
def test_the_rules_prefilters_admit_every_generated_text_they_match() -> None:
    rows = list(_generated_texts())
    texts = sorted({t for name, groups, files in rows for t in (name, *groups, *files)})
    _check_sound(texts)
    _check_same(rows)


_SEPARATORS = st.sampled_from([".", "_", "-", " ", "[", "]", "(", ")", "", "'"])


@st.composite
def _names(draw: st.DrawFn) -> str:
    """Names made of the rules' words, separators, digits and stray characters (some
    not ASCII), in any case."""
    words = st.one_of(
        st.sampled_from(_rule_words()),
        st.from_regex(r"(?:19|20)\d\d|S\d\dE\d\d|\d{1,4}|v\d\.\d", fullmatch=True),
        st.text(alphabet="abcdefxyzABC0123456789\u212a\u017f\u00f6", min_size=1, max_size=6),
    )
    parts = draw(st.lists(st.tuples(words, _SEPARATORS), min_size=1, max_size=8))
    text = "".join(w + s for w, s in parts)
    return draw(st.sampled_from([text, text.upper(), text.title()]))


@given(_names(), st.lists(st.sampled_from(["alt.binaries.teevee", "alt.binaries.mp3"]), max_size=2))
@settings(max_examples=2000, deadline=None)
def test_the_rules_prefilters_admit_every_fuzzed_name_they_match(
    name: str, groups: list[str]
) -> None:
    _check_sound([name, *groups])
    _check_same([(name, tuple(groups), ())])


def test_video_extensions_are_asked_last() -> None:
    """The prefilters change which searches run, never the order rules are asked in."""
    assert categorise("holiday", (), ("a.mkv",)) == VIDEO_EXTENSIONS["mkv"]
    assert categorise("holiday.1080p", (), ("a.mkv",)) == 2040


@given(st.lists(st.sampled_from(["a.mp3", "b.EPUB", "c.flac", "d.mkv", "e.avi", "f", "g.txt"])))
def test_the_extension_most_files_have_wins_and_of_equals_the_first_met(files: list[str]) -> None:
    """Files' extensions counted as `Counter.most_common(1)` counted them before."""
    from collections import Counter

    name = "holiday"  # no rule's word: the files decide
    kinds = [categories.EXTENSIONS.get(f.rpartition(".")[2].lower()) for f in files if "." in f]
    counted = Counter(kind for kind in kinds if kind is not None)
    videos = [categories.VIDEO_EXTENSIONS.get(f.rpartition(".")[2].lower()) for f in files]
    video = Counter(kind for kind in videos if kind is not None)
    expected = (
        counted.most_common(1)[0][0] if counted else video.most_common(1)[0][0] if video else OTHER
    )
    assert categorise(name, (), tuple(files)) == expected
