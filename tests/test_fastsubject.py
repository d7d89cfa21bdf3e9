"""The compiled subject parse (core/_fastsubject.pyx) against its oracle, the pure one.

take() parses each new file's subject, the text before its segment counter,
with `_fastsubject.file_subject` where it is built and `subject.parse_file_subject`
where it answers None (or the indexer is `pure`). Wherever the compiled one
answers, its FileSubject must be the pure parse's of the decoded text, field
for field and type for type: on every generator profile, on the real corpus
(subjects.tsv and the NZBs' subjects) and on fuzzed subjects. It must be
built here (CI builds it with `pip install -e .`), and answer for most real
subjects, or these tests would compare the pure parse with itself.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from usenet_indexer.core.indexer import COMPILED_SUBJECT, RangeIndexer, decode
from usenet_indexer.core.subject import FileSubject, parse_file_subject
from usenet_indexer.synth.generator import PROFILES, GeneratorConfig, generate
from usenet_indexer.testing.corpus import load_corpus


def compiled(prefix: bytes) -> FileSubject | None:
    assert COMPILED_SUBJECT is not None, "core/_fastsubject is not built: run scripts/bootstrap"
    return COMPILED_SUBJECT(prefix)


def agrees(prefix: bytes) -> bool:
    """Whether the compiled parse answered for `prefix`; asserts it is the pure parse's."""
    found = compiled(prefix)
    if found is None:
        return False
    pure = parse_file_subject(decode(prefix))
    assert found == pure, prefix
    assert [type(field) for field in found] == [type(field) for field in pure], prefix
    assert type(found) is FileSubject
    return True


def prefixes(subjects: Iterable[bytes]) -> list[bytes]:
    """Each subject's text before its last "(", as the indexer keeps a file's prefix."""
    return [subject.rpartition(b"(")[0] for subject in subjects]


def test_the_compiled_parse_is_built() -> None:
    assert COMPILED_SUBJECT is not None, "core/_fastsubject is not built: run scripts/bootstrap"


def test_a_file_subject_made_without_its_new_is_the_named_tuple_it_makes() -> None:
    # _fastsubject makes a FileSubject as tuple.__new__(FileSubject, fields) does: its
    # type's tp_alloc and the six items in this order; a field added, or a class that
    # is no plain NamedTuple any more, would be made wrong.
    from usenet_indexer.core import _fastsubject

    assert FileSubject._fields == _fastsubject._SUBJECT_FIELDS
    assert FileSubject.__bases__ == (tuple,)
    assert getattr(FileSubject, "__slots__", None) == ()
    found = compiled(b'x [1/2] - "a.rar" yEnc ')
    pure = parse_file_subject('x [1/2] - "a.rar" yEnc ')
    assert found == pure
    assert found is not None
    assert found.keyed_by_poster is True
    # The references its name is held by (the tuple, `name`, getrefcount's
    # argument): as many as the pure parse's name.
    name, pure_name = found[0], pure[0]
    assert sys.getrefcount(name) == sys.getrefcount(pure_name) == 3


@pytest.mark.parametrize(
    ("subject", "name", "head", "counter", "basis", "keyed"),
    [
        # A board's head and [i/M]: keyed by the head, with the poster.
        (
            b'[148850]-[FULL]-[#a.b.cd.image@EFNet]-[ ubuntu-17.04 ]-[14/26] - "ubuntu-17.04.part13.rar" yEnc ',
            "ubuntu-17.04.part13.rar",
            "[148850]-[FULL]-[#a.b.cd.image@EFNet]-[ ubuntu-17.04 ]-",
            (14, 26),
            "148850]-[full]-[#a.b.cd.image@efnet]-[ ubuntu-17.04\x1f26",
            True,
        ),
        # PowerPost's placeholder head: the track's stem keys it.
        (
            b'(????) [05/13] - "05-artist_name-track_title.flac" yEnc ',
            "05-artist_name-track_title.flac",
            "(????) ",
            (5, 13),
            "\x1e05-artist_name-track_title",
            False,
        ),
        # No head, a par2 volume of a random name: only the poster and M.
        (
            b'[03/05] - "070de4f9561148a7b2e3910a8c2d1f00.vol00+01.par2" yEnc ',
            "070de4f9561148a7b2e3910a8c2d1f00.vol00+01.par2",
            "",
            (3, 5),
            "\x1e\x1f5",
            True,
        ),
        # An executable flood's lone file, the counter after the name.
        (
            b'Re: "Nero.Suite.2025.v4.x64.exe" [1/1] yEnc ',
            "Nero.Suite.2025.v4.x64.exe",
            "",
            (1, 1),
            "\x1enero.suite.2025.v4.x64",
            True,
        ),
        # A counter of six digits is none; an index above M is dropped.
        (b'(123456/2) "a.b.mkv" yEnc ', "a.b.mkv", "(123456/2) ", None, "123456/2\x1fNone", True),
        (b'x [9/3] - "a.b.mkv" yEnc ', "a.b.mkv", "x ", None, "x\x1fNone", True),
    ],
)
def test_common_subjects_are_parsed_compiled(
    subject: bytes,
    name: str,
    head: str,
    counter: tuple[int, int] | None,
    basis: str,
    keyed: bool,
) -> None:
    found = compiled(subject)
    assert found is not None
    index, announced = counter or (None, None)
    assert found == (name, head, index, announced, basis, keyed)
    assert agrees(subject)


@pytest.mark.parametrize(
    "subject",
    [
        'Über.Film.2020 [1/2] - "Über.Film.2020.mkv" yEnc '.encode(),  # UTF-8
        b'caf\xe9 [1/2] - "caf\xe9.mkv" yEnc ',  # Latin-1
        b"[1/2] - name.mkv yEnc ",  # no quotes
        b'[PRiVATE]-[WtFnZb]-[name.mkv]-[1/2] - "" yEnc ',  # empty quotes
        b'[1/2] - "name.mkv yEnc ',  # one quote
    ],
)
def test_other_subjects_are_left_to_the_pure_parse(subject: bytes) -> None:
    assert compiled(subject) is None
    # ... which the indexer then runs: its file is named as the pure indexer names it.
    for pure in (True, False):
        indexer = RangeIndexer(group="alt.binaries.test", first=1, pure=pure)
        line = b"1\t%s(1/1)\tp@x\tMon, 6 May 2024 10:00:00 +0000\t<m@x>\t\t700000\t5400\n"
        indexer.add_data(line % subject, 2)
        batch = indexer.finish()
        assert [f.name for r in batch.releases for f in r.files] == [
            parse_file_subject(decode(subject)).file_name
        ]


@pytest.mark.parametrize("profile", PROFILES)
def test_every_generator_profile_parses_alike(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=40_000, seed=7, profile=profile))
    subjects = {line.split(b"\t")[1] for line in generated.lines if line.count(b"\t") >= 2}
    found = [agrees(prefix) for prefix in set(prefixes(subjects))]
    assert len(found) > 1_500
    assert sum(found) > 0.9 * len(found)  # the compiled parse answers for most


def test_the_real_corpus_parses_alike(corpus_dir: Path) -> None:
    with (corpus_dir / "subjects.tsv").open("rb") as stream:
        subjects = [row.split(b"\t")[1] for row in stream.read().splitlines()[1:]]
    subjects += [
        file.subject.encode("utf-8", "surrogateescape")
        for _, nzb in load_corpus(corpus_dir / "nzb")
        for file in nzb.files
    ]
    texts = prefixes(subjects) + subjects  # and whole, as a subject without a counter is kept
    found = [agrees(text) for text in texts]
    assert sum(found) > 0.5 * len(texts)  # (many real subjects have no quoted name)


# Pieces of subjects: what posting tools write, and what breaks parsers.
_PIECES = st.sampled_from(
    [
        b'"',
        b'"',
        b"'",
        b" ",
        b" - ",
        b"[",
        b"]",
        b"(",
        b")",
        b"/",
        b".",
        b"-",
        b"[1/13]",
        b"(05/13)",
        b"[00012/99999]",
        b"[1/100000]",
        b"(123456/2)",
        b"[3/2)",
        b"(18446744073709551616/18446744073709551615)",
        b"(????)",
        b"yEnc ",
        b"Re: ",
        b"rE: ",
        b"\x00",
        b"\n",
        b"\t",
        b"\x0b",
        b"\x1c",
        b"\x1f",
        b"\xe9",
        b"\xff\xfe",
        "é".encode(),
        b"Show.S01E01.1080p.WEB",
        b"am9295 post",
        b"#a.b.teevee@EFNet",
        b"070de4f9561148a7b2e3910a8c2d1f00",
        b"L3iMP7Tg4Xq9Zr2w",
        b"aBcDeFgHiJkLmNoP",
        b"ABCDEFGH12345678",
        b"rename.with.this",
        b"Book.Vol.2",
        b"hash",
        b".part01.rar",
        b".part123456.rar",
        b".vol00+01.par2",
        b".vol0000+001.PAR2",
        b".vol123456+1.par2",
        b".vol-01.par2",
        b".vol01.par2",
        b".vol+.par2",
        b".7z.001",
        b".zip.002",
        b".rar.003",
        b".r00",
        b".s123",
        b".z07",
        b".001",
        b".10",
        b".7",
        b".mkv",
        b".MKV",
        b".exe",
        b".Scr",
        b".nfo",
        b".flac",
        b".x264",
        b".toolongext",
        b"2**64 18446744073709551616",
    ]
)
_SUBJECTS = st.lists(_PIECES, max_size=24).map(b"".join)
_BITS = st.lists(_PIECES, max_size=6).map(b"".join)
_COUNTERS = st.sampled_from(
    [b"", b"", b"[1/13]", b"(05/13)", b"[7/7]", b"(0/3)", b"[123456/2]", b"(1/2]", b"(8/3)"]
)
# The shape of a posting tool's subject, each part fuzzed: head, counters
# around the quoted name, a tail.
_SHAPED = st.tuples(_BITS, _COUNTERS, _BITS, _COUNTERS, _BITS, _BITS, _COUNTERS, _BITS).map(
    lambda p: p[0] + p[1] + p[2] + p[3] + b' - "' + p[4] + b'"' + p[5] + p[6] + p[7] + b" yEnc "
)


@settings(max_examples=3_000, deadline=None)
@given(subject=st.one_of(_SUBJECTS, _SHAPED))
@example(subject=b'"' + b"x" * 1_000_000 + b'.mkv" yEnc ')  # a 1 MB subject
@example(subject=b"[1/2] " + b"(" * 500_000 + b' - "a.rar" yEnc ')
@example(subject=b'"a\x00b.exe" [1/2] yEnc ')  # a NUL byte
@example(subject=b'[1/1] - "Iain M. Banks - Tiger (1989).epub" yEnc ')
@example(subject=b'""a.rar"" [1/2]')  # quotes inside quotes
@example(subject=b'[1/2] " \x1c.part01.rar\x0b " yEnc')  # str.strip's white space
@example(subject=b'" .vol01.par2"')
@example(subject=b'"a.b\n.rar"')  # a newline: the name's stem in Python
@example(subject=b'[1/13] x (2/3) - "a.rar" (4/5) yEnc ')  # the counter nearest the name
def test_fuzzed_subjects_parse_alike(subject: bytes) -> None:
    agrees(subject)
    agrees(subject.rpartition(b"(")[0])


@settings(max_examples=500, deadline=None)
@given(subject=st.binary(max_size=200))
def test_random_bytes_parse_alike(subject: bytes) -> None:
    agrees(subject)
