"""Round trip on real data: real NZBs replayed as overview lines, indexed, compared.

Every segment must land in the right file with the right number, and the
files of one upload in one release. Two corpus uploads give every file a
poster of its own (a deliberate obfuscation) and one of them names its par2
files differently from its video: from headers alone those files cannot be
put together, and the 98% bound on files allows for them (3 of 480).
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.core.nzb import Nzb, parse_nzb, write_nzb
from usenet_indexer.testing.corpus import CorpusLines, load_corpus, nzb_to_overview

GROUP = "alt.binaries.corpus"
FIRST = 7_000_000_000


@pytest.fixture(scope="module")
def replay(corpus_dir: Path) -> tuple[list[Nzb], CorpusLines]:
    nzbs = [nzb for _, nzb in load_corpus(corpus_dir / "nzb")]
    lines = nzb_to_overview(
        nzbs, first_article=FIRST, rng=random.Random(11), uploads_in_flight=4, group=GROUP
    )
    return nzbs, lines


def index_replay(lines: CorpusLines, batch_articles: int) -> list[CatalogRelease]:
    indexer = RangeIndexer(group=GROUP, first=lines.first_article)
    merger = ReleaseMerger()
    chunk = 1000
    for start in range(0, len(lines.lines), chunk):
        part = lines.lines[start : start + chunk]
        next_article = int(part[-1].split("\t", 1)[0]) + 1
        indexer.add_text("\n".join(part), next_article)
        if indexer.pending_articles >= batch_articles:
            merger.add_all(indexer.take().releases)
    merger.add_all(indexer.finish().releases)
    return list(merger.releases())


@pytest.mark.parametrize("batch_articles", [500_000, 5_000])
def test_every_segment_lands_in_the_right_file(
    replay: tuple[list[Nzb], CorpusLines], batch_articles: int
) -> None:
    _, lines = replay
    releases = index_replay(lines, batch_articles)
    placed: dict[str, tuple[tuple[int, int], int]] = {}
    for release in releases:
        assert release.dropped is None
        for file in release.files:
            truth_files = Counter(
                (lines.truth[m].nzb, lines.truth[m].file) for _, m, _ in file.segments
            )
            [(owner, _)] = truth_files.most_common(1)
            for k, message_id, _ in file.segments:
                placed[message_id] = (owner, k)
    right = sum(
        1
        for message_id, truth in lines.truth.items()
        if placed.get(message_id) == ((truth.nzb, truth.file), truth.number)
    )
    assert len(lines.truth) > 35_000
    assert right / len(lines.truth) >= 0.995, f"{len(lines.truth) - right} segments misplaced"


@pytest.mark.parametrize("batch_articles", [500_000, 5_000])
def test_files_of_one_upload_land_in_one_release(
    replay: tuple[list[Nzb], CorpusLines], batch_articles: int
) -> None:
    _, lines = replay
    releases = index_replay(lines, batch_articles)
    release_of_file: dict[tuple[int, int], int] = {}
    for number, release in enumerate(releases):
        for file in release.files:
            truth = lines.truth[file.segments[0][1]]
            release_of_file[truth.nzb, truth.file] = number
    by_upload: defaultdict[int, Counter[int]] = defaultdict(Counter)
    for (upload, _), number in release_of_file.items():
        by_upload[upload][number] += 1
    files = sum(sum(c.values()) for c in by_upload.values())
    right = sum(c.most_common(1)[0][1] for c in by_upload.values())
    uploads_per_release = Counter(n for c in by_upload.values() for n in c)
    merged_wrongly = [n for n, uploads in uploads_per_release.items() if uploads > 1]
    assert files >= 470
    assert right / files >= 0.98, f"{files - right} of {files} files outside their upload's release"
    assert merged_wrongly == []


def test_nzb_of_an_indexed_release_lists_what_was_posted(
    replay: tuple[list[Nzb], CorpusLines],
) -> None:
    nzbs, lines = replay
    releases = index_replay(lines, 500_000)
    ubuntu = next(r for r in releases if r.name == "Ubuntu 8.10 Desktop i386")
    written = parse_nzb(write_nzb(ubuntu.to_json()))
    original = next(n for n in nzbs if any("am9295" in f.subject for f in n.files))
    assert sorted(f.subject for f in written.files) == sorted(f.subject for f in original.files)
    assert {s.message_id for f in written.files for s in f.segments} == {
        s.message_id for f in original.files for s in f.segments
    }
    assert set(written.files[0].groups) == {GROUP, *original.files[0].groups}
