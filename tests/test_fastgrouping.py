"""take()'s compiled grouping and executable rule (core/_fastsubject.pyx) against their
oracles.

A RangeIndexer that is not `pure` groups a batch's open files by release
with `_fastsubject.releases` (the twin of `indexer._releases`), judges them
with `_fastsubject.executable_verdict` where a rule is an `ExecutableRule`
(the twin of `ExecutableRule.verdict`) and counts a dropped release's
segments with `_fastsubject.segment_count` (the twin of `_OpenFile.count`
summed). Each must give what its oracle gives: the same releases in the
same order, the same files in each (the very objects, with equal `info`),
the same verdicts and counts, on every generator profile, the real corpus
and fuzzed subjects and file names. The whole batch is compared in
tests/test_fastindex.py. The compiled parts must be built here, or these
tests would compare the pure code with itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from usenet_indexer.core import indexer as indexer_module
from usenet_indexer.core.indexer import (
    COMPILED_GROUPING,
    COMPILED_SUBJECT,
    CompiledGrouping,
    RangeIndexer,
    _OpenFile,
    _parse_prefix,
    _releases,
)
from usenet_indexer.core.rules import ExecutableRule, ReleaseView
from usenet_indexer.synth.generator import PROFILES, GeneratorConfig, generate
from usenet_indexer.testing.corpus import corpus_lines

FIRST = 5_000_000


def grouping() -> CompiledGrouping:
    assert COMPILED_GROUPING is not None, "core/_fastsubject is not built: run scripts/bootstrap"
    return COMPILED_GROUPING


def open_files(lines: Sequence[bytes]) -> list[_OpenFile]:
    """The files a (compiled) indexer has open after the lines, in the order it opened them."""
    indexer = RangeIndexer(group="alt.binaries.test", first=FIRST)
    indexer.add_data(b"\n".join(lines) + b"\n", FIRST + len(lines) + 1)
    return list(indexer._open.values())


def groups_alike(files: list[_OpenFile]) -> dict[tuple[bytes, str], list[_OpenFile]]:
    """The compiled grouping of `files`, asserted to be the pure one's."""
    compiled = grouping().releases(files, _parse_prefix)
    compiled_infos = [f.info for f in files]
    pure = _releases(files, COMPILED_SUBJECT)
    assert list(compiled) == list(pure)
    for key, members in pure.items():
        assert [id(m) for m in compiled[key]] == [id(m) for m in members], key
    assert compiled_infos == [f.info for f in files]
    # And without the compiled subject parse: every subject parsed in Python.
    assert list(_releases(files, None)) == list(pure)
    return compiled


def judged_alike(
    by_release: dict[tuple[bytes, str], list[_OpenFile]], rule: ExecutableRule
) -> list[str | None]:
    """The compiled verdict and segment count of each release, asserted to be the pure ones."""
    verdicts = []
    for members in by_release.values():
        view = ReleaseView([m.info.file_name for m in members], lambda: "")
        verdict = grouping().executable_verdict(members, rule.extensions, rule.companions)
        assert verdict == rule.verdict(view), [m.info.file_name for m in members]
        assert grouping().segment_count(members) == sum(m.count for m in members)
        verdicts.append(verdict)
    # A batch's whole judging in one call, against take()'s loop over the rules.
    for keep_dropped in (False, True):
        indexer = RangeIndexer(
            group="alt.binaries.test", first=FIRST, rules=(rule,), keep_dropped=keep_dropped
        )
        drops: Counter[tuple[str, str]] = Counter()
        drop_segments: Counter[tuple[str, str]] = Counter()
        pure = indexer._judged(by_release, None, drops, drop_segments)
        counts: dict[str, list[int]] = {}
        compiled = grouping().executable_judged(
            by_release, rule.extensions, rule.companions, rule.name, keep_dropped, counts
        )
        assert [(r, list(map(id, m)), d) for r, m, d in compiled] == [
            (r, list(map(id, m)), d) for r, m, d in pure
        ]
        assert {(rule.name, key): n for key, (n, _) in counts.items()} == drops
        assert {(rule.name, key): n for key, (_, n) in counts.items()} == drop_segments
    return verdicts


def test_the_compiled_grouping_is_built() -> None:
    grouping()


@pytest.mark.parametrize("profile", PROFILES)
def test_every_generator_profile_groups_and_judges_alike(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=40_000, seed=11, profile=profile))
    by_release = groups_alike(open_files(generated.lines))
    assert len(by_release) > 300
    verdicts = judged_alike(by_release, ExecutableRule())
    # Both ways are taken: floods dropped, uploads kept.
    assert 0 < sum(v is not None for v in verdicts) < len(verdicts)
    # A rule with other extensions (rules come from the coordinator as data).
    judged_alike(by_release, ExecutableRule(extensions=frozenset({"rar", "exe", ""})))


def test_the_real_corpus_groups_and_judges_alike(corpus_dir: Path) -> None:
    by_release = groups_alike(open_files(corpus_lines(corpus_dir, FIRST, "a.b.test")))
    assert len(by_release) > 100
    judged_alike(by_release, ExecutableRule())


# File names and subjects of posting tools and floods, and what breaks the rule's
# inline extension: no dot, a dot last, long and upper-case suffixes, non-ASCII.
_NAME_PIECES = st.sampled_from(
    [
        "a",
        "Setup",
        ".",
        ".exe",
        ".EXE",
        ".Scr",
        ".nfo",
        ".par2",
        ".vol01+02.par2",
        ".rar",
        ".part01.rar",
        ".toolong",
        ".ᴇxᴇ",  # lowers to no ASCII extension
        ".İ",  # lowers to two characters
        "é",
        " ",
        "\x00",
    ]
)
_NAMES = st.lists(_NAME_PIECES, max_size=6).map("".join)


@settings(max_examples=2_000, deadline=None)
@given(
    names=st.lists(_NAMES, min_size=1, max_size=6),
    posters=st.lists(st.sampled_from([b"a@x", b"b@x"]), min_size=6, max_size=6),
    segments=st.lists(st.integers(1, 30), min_size=6, max_size=6),
    heads=st.lists(
        st.sampled_from([b"", b"[x] ", b"(????) ", b"Flood 2025 "]), min_size=6, max_size=6
    ),
)
@example(names=[""], posters=[b"a@x"] * 6, segments=[1] * 6, heads=[b""] * 6)
@example(names=["a.exe", "a.nfo", "b.SCR"], posters=[b"a@x"] * 6, segments=[3] * 6, heads=[b""] * 6)
def test_fuzzed_files_group_and_judge_alike(
    names: list[str], posters: list[bytes], segments: list[int], heads: list[bytes]
) -> None:
    lines = []
    article = FIRST
    for at, name in enumerate(names):
        subject = heads[at] + b'[%d/%d] - "%s" yEnc ' % (
            at + 1,
            len(names),
            name.encode("utf-8", "surrogateescape"),
        )
        for k in range(1, segments[at] + 1):
            lines.append(
                b"%d\t%s(%d/%d)\t%s\tMon, 6 May 2024 10:00:00 +0000\t<m%d@x>\t\t700000\t5400"
                % (article, subject, k, segments[at], posters[at], article)
            )
            article += 1
    files = open_files(lines)
    by_release = groups_alike(files)
    judged_alike(by_release, ExecutableRule())
    judged_alike(by_release, ExecutableRule(extensions=frozenset({"rar", "exe", ""})))


@settings(max_examples=1_000, deadline=None)
@given(names=st.lists(_NAMES, min_size=1, max_size=8))
def test_fuzzed_file_names_get_the_rules_verdict(names: list[str]) -> None:
    # The verdict reads nothing but each member's info.file_name.
    members: list[object] = [_Named(name) for name in names]
    view = ReleaseView(names, lambda: "")
    for rule in (
        ExecutableRule(),
        ExecutableRule(extensions=frozenset({"", "toolon", "exe"}), companions=frozenset({"ᴇxᴇ"})),
    ):
        verdict = grouping().executable_verdict(members, rule.extensions, rule.companions)  # type: ignore[arg-type]
        assert verdict == rule.verdict(view)


class _Named:
    """A release member as the verdict reads it: an `info` whose first field is the name."""

    def __init__(self, name: str) -> None:
        self.info = (name,)


def test_a_pure_indexer_groups_with_the_pure_code(monkeypatch: pytest.MonkeyPatch) -> None:
    # The pure_indexer setting must run the oracle: with the compiled grouping
    # made to fail, a pure indexer still takes its batch, a compiled one does not.
    monkeypatch.setattr(indexer_module, "COMPILED_GROUPING", _FailingGrouping)
    line = (
        b'%d\t[1/1] - "a.exe" yEnc (1/1)\tp@x\tMon, 6 May 2024 10:00:00 +0000\t<m@x>\t\t700000\t5400\n'
        % FIRST
    )
    pure = RangeIndexer(group="alt.binaries.test", first=FIRST, pure=True)
    pure.add_data(line, FIRST + 1)
    assert [c.rule for c in pure.take().rule_counts] == ["executable"]
    compiled = RangeIndexer(group="alt.binaries.test", first=FIRST)
    compiled.add_data(line, FIRST + 1)
    with pytest.raises(_GroupingFault):
        compiled.take()


class _GroupingFault(Exception):
    pass


def _fail(*args: object) -> None:
    raise _GroupingFault


# A named fake for a fault: every compiled grouping function raises.
_FailingGrouping = CompiledGrouping(_fail, _fail, _fail, _fail)  # type: ignore[arg-type]


class _Buffered:
    """A release member as the segment count reads it: a `segments` buffer."""

    def __init__(self, segments: bytearray) -> None:
        self.segments = segments


@settings(max_examples=1_000, deadline=None)
@given(buffers=st.lists(st.binary(max_size=300).map(bytearray), max_size=5))
@example(buffers=[bytearray(b"\t" * 17), bytearray(b"\x89\t\x09\xff" * 9)])
def test_segments_are_counted_as_the_files_count_them(buffers: list[bytearray]) -> None:
    # Any bytes, tabs or not, at any length: a file's count is its tabs // 5.
    members: list[object] = [_Buffered(buffer) for buffer in buffers]
    assert grouping().segment_count(members) == sum(b.count(b"\t") // 5 for b in buffers)  # type: ignore[arg-type]
