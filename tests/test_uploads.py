"""Releases joined into uploads (core/uploads.py), through the indexer and the merge.

The overview lines are written as the posting tools write them (issue 15's
patterns); what is asserted is what a user sees in the catalog: how many
releases, which files each holds, and its name.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from email.utils import formatdate

from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.core.uploads import TOGETHER_SECONDS, Part, link

START = 1_764_000_000  # unix seconds of the first article
SEGMENTS = 3


def lines_of(
    names: Sequence[str], poster: str, *, at: int, total: int | None = None, first_index: int = 1
) -> Iterator[tuple[int, str]]:
    """(date, overview line without its number) of an upload of `names`, one after another."""
    total = total if total is not None else len(names)
    width = len(str(total))
    for i, name in enumerate(names, first_index):
        for k in range(1, SEGMENTS + 1):
            subject = f'[{i:0{width}}/{total}] - "{name}" yEnc ({k}/{SEGMENTS})'
            date = at + (i - first_index) * 20 + k
            message_id = f"<{abs(hash((poster, name, k, at))):x}@ngPost>"
            yield date, f"{subject}\t{poster}\t{formatdate(date)}\t{message_id}\t\t700000\t5000"


def index(*uploads: Iterator[tuple[int, str]], batch_lines: int = 10**9) -> list[CatalogRelease]:
    """The catalog `uidx index` makes of the uploads' lines, interleaved by date."""
    ordered = sorted(itertools.chain(*uploads))
    numbered = [f"{n}\t{line}" for n, (_, line) in enumerate(ordered, 1)]
    indexer = RangeIndexer(group="alt.binaries.test", first=1)
    merger = ReleaseMerger()
    for at in range(0, len(numbered), batch_lines):
        part = numbered[at : at + batch_lines]
        indexer.add_text("\n".join(part), at + len(part) + 1)
        merger.add_all(indexer.take().releases)
    merger.add_all(indexer.finish().releases)
    return list(merger.releases())


SCENE_VOLUMES = [f"grp-show.s08e08.2160p.r{n:02}" for n in range(35)]
SCENE_EXTRAS = [f"Show.S08E08.2160p.NF.WEB-DL-GRP.{ext}" for ext in ("nfo", "sfv", "par2")]


def test_a_scene_upload_whose_volumes_and_extras_are_named_apart_is_one_release() -> None:
    names = [*SCENE_VOLUMES, *SCENE_EXTRAS]
    (release,) = index(lines_of(names, "poster <grp@scene.example>", at=START))
    assert len(release.files) == len(names)
    assert release.name == "Show.S08E08.2160p.NF.WEB-DL-GRP"
    assert release.files_announced == len(names)


def test_the_answer_does_not_depend_on_where_batches_are_cut() -> None:
    names = [*SCENE_VOLUMES, *SCENE_EXTRAS]
    whole = index(lines_of(names, "p <p@x>", at=START))
    cut = index(lines_of(names, "p <p@x>", at=START), batch_lines=17)
    assert [(r.key, r.name, len(r.files)) for r in cut] == [
        (r.key, r.name, len(r.files)) for r in whole
    ]


def test_an_obfuscated_file_and_its_par2_volumes_named_after_the_release_are_one() -> None:
    names = [
        "L3iMP7Tg4XaObh32FqTzvP6durgw7wZi.mkv",
        *(f"Fallout.S02E06.1080p.WEB.h264-Kitsune.vol-{n:02}.par2" for n in range(1, 8)),
    ]
    (release,) = index(lines_of(names, "dZ8kq2Lr@P3xk.example", at=START))
    assert len(release.files) == 8
    assert release.name == "Fallout.S02E06.1080p.WEB.h264-Kitsune"


def test_two_uploads_under_powerposts_default_from_stay_apart() -> None:
    """Many uploaders post as PowerPost's default From: it links nothing."""
    poster = "Yenc@power-post.org (Yenc-PP-A&A)"
    one = lines_of([f"alpha.part{i:02}.rar" for i in range(1, 7)], poster, at=START, total=13)
    other = lines_of(
        [f"beta.part{i:02}.rar" for i in range(7, 14)],
        poster,
        at=START + 5,
        total=13,
        first_index=7,
    )
    assert len(index(one, other)) == 2


def test_uploads_of_one_poster_with_the_same_file_indexes_stay_apart() -> None:
    poster = "p <p@x>"
    one = lines_of([f"Show.S01E01.part{i}.rar" for i in range(1, 4)], poster, at=START)
    two = lines_of([f"Show.S01E02.part{i}.rar" for i in range(1, 4)], poster, at=START + 30)
    assert len(index(one, two)) == 2


def test_parts_posted_apart_are_two_uploads() -> None:
    poster = "p <p@x>"
    volumes = lines_of(SCENE_VOLUMES, poster, at=START, total=38)
    later = START + TOGETHER_SECONDS + 3600
    extras = lines_of(SCENE_EXTRAS, poster, at=later, total=38, first_index=36)
    assert len(index(volumes, extras)) == 2


def test_a_dropped_part_is_never_joined() -> None:
    parts = [
        Part(b"a", "p", 3, frozenset({1, 2}), START, START + 9, dropped=False),
        Part(b"b", "p", 3, frozenset({3}), START + 5, START + 6, dropped=True),
    ]
    assert link(parts) == [[b"a"], [b"b"]]


def test_link_depends_only_on_the_set_of_parts() -> None:
    parts = [
        Part(b"c", "p", 4, frozenset({3, 4}), START + 60, START + 90, dropped=False),
        Part(b"a", "p", 4, frozenset({1}), START, START + 10, dropped=False),
        Part(b"b", "p", 4, frozenset({2}), START + 20, START + 40, dropped=False),
        Part(b"d", "q", 4, frozenset({1}), START, START + 10, dropped=False),
    ]
    assert link(parts) == [[b"a", b"b", b"c"], [b"d"]]
    assert link(reversed(parts)) == link(parts)
