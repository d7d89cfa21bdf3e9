"""Tests for usenet_indexer.testing.corpus: real NZBs replayed as overview lines."""

from __future__ import annotations

import itertools
import random
import re
from collections import defaultdict
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest

from usenet_indexer.core.nzb import Nzb, NzbFile, NzbSegment
from usenet_indexer.synth.truth import grouping_score, perfect_releases
from usenet_indexer.testing.corpus import (
    CorpusLines,
    corpus_truth,
    files_in_their_upload_release,
    find_corpus,
    interleave_uploads,
    load_corpus,
    nzb_to_overview,
    segment_subject,
    upload_order,
)

CORPUS = find_corpus(Path(__file__).resolve().parent)
# Above 2**32: article numbers need 64 bits.
FIRST_ARTICLE = 5_000_000_000
SEED = 20251130
COUNTER = re.compile(r"\((\d+)/(\d+)\)")


@pytest.fixture(scope="module")
def corpus(corpus_dir: Path) -> list[tuple[str, Nzb]]:
    return load_corpus(corpus_dir / "nzb")


@pytest.fixture(scope="module")
def replayed(corpus: list[tuple[str, Nzb]]) -> CorpusLines:
    nzbs = [nzb for _, nzb in corpus]
    return nzb_to_overview(
        nzbs, first_article=FIRST_ARTICLE, rng=random.Random(SEED), uploads_in_flight=3
    )


def nzb_named(corpus: list[tuple[str, Nzb]], prefix: str) -> tuple[int, Nzb]:
    (match,) = [(i, nzb) for i, (name, nzb) in enumerate(corpus) if name.startswith(prefix)]
    return match


def last_counter(subject: str) -> re.Match[str] | None:
    return max(COUNTER.finditer(subject), key=lambda m: m.start(), default=None)


def counter_value(subject: str) -> int:
    counter = last_counter(subject)
    assert counter is not None
    return int(counter[1])


def make_file(
    subject: str, numbers: list[int], *, tag: str = "", date: int = 1_600_000_000
) -> NzbFile:
    segments = tuple(NzbSegment(k, 1000 + k, f"{tag}{subject[:3]}{k}@x") for k in numbers)
    return NzbFile("poster@x", date, subject, ("alt.binaries.test",), segments)


# --- subjects ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "number", "expected"),
    [
        ('x - "a.vol15+16.par2" yEnc (01/17)', 2, 'x - "a.vol15+16.par2" yEnc (02/17)'),
        ('x - "a.vol15+16.par2" yEnc (01/17)', 17, 'x - "a.vol15+16.par2" yEnc (17/17)'),
        ('x "a.part02.rar" yEnc (1/201)', 10, 'x "a.part02.rar" yEnc (10/201)'),
        ('x "a.part02.rar" yEnc (1/201)', 201, 'x "a.part02.rar" yEnc (201/201)'),
        ('x [001/109] - "b.rar" yEnc (001/015)', 15, 'x [001/109] - "b.rar" yEnc (015/015)'),
        ('[1/6] - "f.rar" yEnc (1/2) 1048576', 2, '[1/6] - "f.rar" yEnc (2/2) 1048576'),
        ('x "m.rar" yEnc  10485760 (1/15)', 9, 'x "m.rar" yEnc  10485760 (9/15)'),
        ('x "clip (1/3).avi" yEnc (1/40)', 7, 'x "clip (1/3).avi" yEnc (7/40)'),
        ("x (1/5)", 123, "x (123/5)"),
        ('no counter "a.bin" yEnc', 5, 'no counter "a.bin" yEnc'),
        ("", 3, ""),
    ],
)
def test_segment_subject_rewrites_the_last_counter(
    subject: str, number: int, expected: str
) -> None:
    assert segment_subject(subject, number) == expected


# --- posting order -----------------------------------------------------------


def test_upload_order_keeps_segment_order_and_a_few_files_in_flight() -> None:
    files = tuple(make_file(f"f{i:02d} (1/9)", [5, 1, 3, 2, 9, 4]) for i in range(8))
    nzb = Nzb(meta=(), files=files)
    for seed in range(20):
        order = upload_order(nzb, random.Random(seed))
        assert sorted((i, s.number) for i, s in order) == [
            (i, k) for i in range(8) for k in (1, 2, 3, 4, 5, 9)
        ]
        positions: dict[int, list[int]] = defaultdict(list)
        for position, (index, segment) in enumerate(order):
            positions[index].append(position)
            assert [s.number for i, s in order[: position + 1] if i == index][-1] == segment.number
        for index in range(8):
            numbers = [s.number for i, s in order if i == index]
            assert numbers == sorted(numbers)
        in_flight = [
            sum(1 for p in positions.values() if p[0] <= position <= p[-1])
            for position in range(len(order))
        ]
        assert 2 <= max(in_flight) <= 4
        assert upload_order(nzb, random.Random(seed)) == order


def test_upload_order_posts_older_files_first_and_skips_empty_files() -> None:
    files = (
        make_file("late (1/2)", [1, 2], date=200),
        make_file("empty (1/1)", [], date=50),
        make_file("early (1/2)", [2, 1], date=100),
    )
    order = upload_order(Nzb(meta=(), files=files), random.Random(1))
    assert [(i, s.number) for i, s in order] == [(2, 1), (0, 1), (2, 2), (0, 2)]


def test_interleave_uploads_one_at_a_time_concatenates() -> None:
    uploads = [list(range(5)), [], list(range(100, 103))]
    merged = interleave_uploads(uploads, rng=random.Random(3), in_flight=1)
    assert merged == [(0, k) for k in range(5)] + [(2, k) for k in range(100, 103)]


def test_interleave_uploads_mixes_and_keeps_each_upload_in_order() -> None:
    uploads = [list(range(300)) for _ in range(5)]
    merged = interleave_uploads(uploads, rng=random.Random(4), in_flight=3, max_burst=10)
    assert len(merged) == 1500
    for upload in range(5):
        assert [item for u, item in merged if u == upload] == list(range(300))
    switches = sum(1 for a, b in itertools.pairwise(merged) if a[0] != b[0])
    assert switches > 20
    # Upload 3 cannot start before one of the first three has finished.
    first_of_3 = next(i for i, (u, _) in enumerate(merged) if u == 3)
    assert first_of_3 >= 300


def test_interleave_uploads_refuses_nonsense_settings() -> None:
    with pytest.raises(ValueError, match="in_flight"):
        interleave_uploads([[1]], rng=random.Random(0), in_flight=0)
    with pytest.raises(ValueError, match="max_burst"):
        interleave_uploads([[1]], rng=random.Random(0), max_burst=0)


# --- the corpus as overview lines --------------------------------------------


def test_every_corpus_segment_appears_exactly_once(
    corpus: list[tuple[str, Nzb]], replayed: CorpusLines
) -> None:
    expected = {
        segment.message_id: (n, f, segment.number)
        for n, (_, nzb) in enumerate(corpus)
        for f, file in enumerate(nzb.files)
        for segment in file.segments
    }
    assert len(expected) == 35737
    assert len(replayed.lines) == 35737
    assert replayed.duplicates == 0
    assert {mid: (t.nzb, t.file, t.number) for mid, t in replayed.truth.items()} == expected
    ids = [line.split("\t")[4] for line in replayed.lines]
    assert sorted(ids) == sorted(f"<{mid}>" for mid in expected)


def test_article_numbers_ascend_from_the_first(replayed: CorpusLines) -> None:
    numbers = [int(line.split("\t", 1)[0]) for line in replayed.lines]
    assert numbers == list(range(FIRST_ARTICLE, FIRST_ARTICLE + len(numbers)))
    assert replayed.next_article == FIRST_ARTICLE + 35737
    for mid, truth in replayed.truth.items():
        assert f"\t<{mid}>\t" in replayed.lines[truth.article - FIRST_ARTICLE]


def test_lines_have_the_overview_fields(
    corpus: list[tuple[str, Nzb]], replayed: CorpusLines
) -> None:
    assert replayed.group == "alt.binaries.multimedia"  # first group of the first NZB
    sizes = {s.message_id: s.bytes for _, nzb in corpus for f in nzb.files for s in f.segments}
    for line in replayed.lines:
        fields = line.split("\t")
        assert len(fields) >= 9
        assert len(fields) == 9  # no tab leaks from a subject or a poster
        assert "\r" not in line
        assert "\n" not in line
        number, _subject, poster, date, message_id, references, size, lines, xref = fields
        truth = replayed.truth[message_id[1:-1]]
        file = corpus[truth.nzb][1].files[truth.file]
        assert poster == file.poster
        assert parsedate_to_datetime(date).timestamp() == file.date
        assert references == ""
        assert int(size) == sizes[message_id[1:-1]]
        assert int(lines) >= 1
        assert xref.startswith("Xref: news.example.com ")
        entries = [entry.rsplit(":", 1) for entry in xref.split(" ")[2:]]
        assert [replayed.group, number] in entries
        assert {g for g, _ in entries} == {replayed.group, *file.groups}


def test_counters_are_rewritten_for_every_segment(
    corpus: list[tuple[str, Nzb]], replayed: CorpusLines
) -> None:
    for line in replayed.lines:
        subject, message_id = line.split("\t")[1], line.split("\t")[4][1:-1]
        truth = replayed.truth[message_id]
        original = corpus[truth.nzb][1].files[truth.file].subject
        before, after = last_counter(original), last_counter(subject)
        assert before is not None  # every corpus subject carries a (k/N) counter
        assert after is not None
        assert int(after[1]) == truth.number
        assert len(after[1]) == max(len(before[1]), len(str(truth.number)))
        assert after[2] == before[2]
        assert subject[: after.start()] == original[: before.start()]
        assert subject[after.end() :] == original[before.end() :]


def test_zero_padded_counter_keeps_its_width(
    corpus: list[tuple[str, Nzb]], replayed: CorpusLines
) -> None:
    index, nzb = nzb_named(corpus, "ChrisPortman__")
    (par2,) = [
        i for i, f in enumerate(nzb.files) if f.subject.endswith('vol15+16.par2" yEnc (01/17)')
    ]
    subjects = [
        line.split("\t")[1]
        for line in replayed.lines
        if (t := replayed.truth[line.split("\t")[4][1:-1]]).nzb == index and t.file == par2
    ]
    assert [s[-7:] for s in subjects] == [f"({k:02d}/17)" for k in range(1, 18)]


def test_segments_of_each_file_go_out_in_number_order(replayed: CorpusLines) -> None:
    seen: dict[tuple[int, int], list[int]] = defaultdict(list)
    for line in replayed.lines:
        truth = replayed.truth[line.split("\t")[4][1:-1]]
        seen[truth.nzb, truth.file].append(truth.number)
    assert len(seen) == 480
    for numbers in seen.values():
        assert numbers == sorted(numbers)


def test_out_of_order_and_missing_segments_keep_what_is_there(
    corpus: list[tuple[str, Nzb]],
) -> None:
    nzbs = [nzb_named(corpus, "Esteth__")[1], nzb_named(corpus, "nzbgetcom__")[1]]
    replay = nzb_to_overview(nzbs, first_article=1, rng=random.Random(0))
    subjects = [line.split("\t")[1] for line in replay.lines]
    mp3 = [s for s in subjects if "test.mp3" in s]
    assert [counter_value(s) for s in mp3] == list(range(1, 11))
    r00 = [s for s in subjects if ".r00" in s]
    assert r00 == ['"ubuntu-12.04-desktop-i386.r00" yEnc (1/59)']
    assert len(replay.lines) == 10 + 3


def test_one_upload_at_a_time_keeps_nzbs_contiguous(corpus: list[tuple[str, Nzb]]) -> None:
    nzbs = [nzb for _, nzb in corpus[:10]]
    replay = nzb_to_overview(nzbs, first_article=1, rng=random.Random(SEED))
    order = [replay.truth[line.split("\t")[4][1:-1]].nzb for line in replay.lines]
    assert order == sorted(order)


def test_uploads_in_flight_interleave_nzbs(replayed: CorpusLines) -> None:
    order = [replayed.truth[line.split("\t")[4][1:-1]].nzb for line in replayed.lines]
    switches = sum(1 for a, b in itertools.pairwise(order) if a != b)
    assert switches > 27  # more than the 27 a plain concatenation has
    assert order != sorted(order)


def test_same_seed_same_lines_other_seed_other_order(corpus: list[tuple[str, Nzb]]) -> None:
    nzbs = [nzb for _, nzb in corpus[:8]]

    def replay(seed: int) -> list[str]:
        return nzb_to_overview(
            nzbs, first_article=1, rng=random.Random(seed), uploads_in_flight=2
        ).lines

    assert replay(1) == replay(1)
    assert replay(1) != replay(2)


def test_crossposts_number_each_group_on_its_own(corpus: list[tuple[str, Nzb]]) -> None:
    _, crossposted = nzb_named(corpus, "sanderjo__sj-nzb-getter__mynzb-30MB")
    replay = nzb_to_overview(
        [crossposted], first_article=100, rng=random.Random(0), group="alt.binaries.mp3"
    )
    per_group: dict[str, list[int]] = defaultdict(list)
    for line in replay.lines:
        fields = line.split("\t")
        entries = [entry.rsplit(":", 1) for entry in fields[8].split(" ")[2:]]
        assert [g for g, _ in entries] == list(crossposted.files[0].groups)
        assert ["alt.binaries.mp3", fields[0]] in entries
        for group, number in entries:
            per_group[group].append(int(number))
    assert len(per_group) == 4
    for numbers in per_group.values():
        assert numbers == list(range(100, 100 + len(replay.lines)))


def test_group_the_nzb_does_not_list_is_put_first() -> None:
    nzb = Nzb(meta=(), files=(make_file("a (1/2)", [1, 2]),))
    replay = nzb_to_overview([nzb], first_article=7, rng=random.Random(0), group="alt.other")
    assert [line.split("\t")[8] for line in replay.lines] == [
        "Xref: news.example.com alt.other:7 alt.binaries.test:7",
        "Xref: news.example.com alt.other:8 alt.binaries.test:8",
    ]


def test_hostile_subject_and_poster_cannot_break_the_line() -> None:
    segment = NzbSegment(1, 10, "a\tb@x")
    file = NzbFile("po\tster\r\n", 0, "sub\tject\r\nnext\x00 (1/1)", ("g",), (segment,))
    replay = nzb_to_overview([Nzb(meta=(), files=(file,))], first_article=1, rng=random.Random(0))
    (line,) = replay.lines
    assert line.split("\t") == [
        "1",
        "sub ject  next  (1/1)",
        "po ster  ",
        "Thu, 01 Jan 1970 00:00:00 +0000",
        "<a b@x>",
        "",
        "10",
        "1",
        "Xref: news.example.com g:1",
    ]


def test_repeated_message_ids_are_posted_once() -> None:
    file = make_file("dup (1/3)", [1, 2, 3])
    nzbs = [Nzb(meta=(), files=(file,)), Nzb(meta=(), files=(file,))]
    replay = nzb_to_overview(nzbs, first_article=1, rng=random.Random(0))
    assert len(replay.lines) == 3
    assert replay.duplicates == 3
    assert {t.nzb for t in replay.truth.values()} == {0}


def test_load_corpus_and_find_corpus(corpus: list[tuple[str, Nzb]], tmp_path: Path) -> None:
    names = [name for name, _ in corpus]
    assert names == sorted(names)
    assert len(names) == 28
    assert all(name.endswith(".nzb") for name in names)
    (tmp_path / "nzb").mkdir()
    assert load_corpus(tmp_path / "nzb") == []


def test_find_corpus_looks_in_the_folder_and_its_parents_first_inside_then_shared(
    tmp_path: Path,
) -> None:
    def make_corpus(folder: Path) -> Path:
        (folder / "nzb").mkdir(parents=True)
        (folder / "SOURCES.md").write_text("sources\n")
        return folder

    start = tmp_path / "repo" / "tests"
    start.mkdir(parents=True)
    shared = make_corpus(tmp_path / "shared" / "corpus")
    assert find_corpus(start) == shared
    # A folder without SOURCES.md is not a corpus.
    (tmp_path / "repo" / "corpus" / "nzb").mkdir(parents=True)
    assert find_corpus(start) == shared
    inside = make_corpus(tmp_path / "repo" / "tests" / "corpus")
    assert find_corpus(start) == inside


# --- the corpus graded like generated data -------------------------------------


def test_corpus_truth_is_the_replay_with_one_release_per_nzb(
    corpus: list[tuple[str, Nzb]], replayed: CorpusLines
) -> None:
    nzbs = [nzb for _, nzb in corpus]
    truth = corpus_truth(nzbs, replayed, [name for name, _ in corpus])
    assert len(truth.releases) == 28
    assert {release.kind for release in truth.releases} == {"legit"}
    assert sum(len(release.files) for release in truth.releases) == 480
    index = truth.segment_index()
    assert index.keys() == replayed.truth.keys()
    for mid, (release, file, k) in index.items():
        where = replayed.truth[mid]
        assert (release.id, file.index, k) == (where.nzb, where.file, where.number)
    for release in truth.releases:
        for file in release.files:
            articles = [segment[3] for segment in file.segments]
            assert articles == sorted(articles)
    assert truth.lines == len(replayed.lines) == 35737
    assert truth.releases[0].pattern == corpus[0][0]
    result = grouping_score(perfect_releases(truth), truth)
    assert result.one_to_one == result.files_right_release == 1.0
    assert files_in_their_upload_release(perfect_releases(truth), truth) == 1.0


def test_files_in_their_upload_release_on_a_hand_made_index() -> None:
    first = Nzb(meta=(), files=(make_file("a (1/2)", [1, 2], tag="x"), make_file("b (1/1)", [1])))
    second = Nzb(meta=(), files=(make_file("c (1/3)", [1, 2, 3]),))
    replay = nzb_to_overview([first, second], first_article=1, rng=random.Random(0))
    truth = corpus_truth([first, second], replay)
    assert [len(release.files) for release in truth.releases] == [2, 1]

    def release(*files: NzbFile) -> dict[str, object]:
        return {
            "name": "x",
            "dropped": None,
            "probe_candidate": False,
            "files": [
                {"segments": [[s.number, s.message_id, s.bytes] for s in file.segments]}
                for file in files
            ],
        }

    a, b, c = (*first.files, *second.files)
    assert files_in_their_upload_release([release(a, b), release(c)], truth) == 1.0
    # b apart from its upload: a's and c's files stay right.
    assert files_in_their_upload_release([release(a), release(b), release(c)], truth) == 2 / 3
    # Both uploads in one release: no file is right.
    assert files_in_their_upload_release([release(a, b, c)], truth) == 0.0
