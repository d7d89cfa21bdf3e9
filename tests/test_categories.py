"""Newznab categories from release names and groups (core/categories.py).

Checked on real subjects (../shared/corpus/subjects.tsv, from public test
suites) against an independent label: the group each was posted to
(alt.binaries.teevee is TV, .erotica XXX, .ebook books, .mp3 audio).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from usenet_indexer.core.categories import (
    CATEGORIES,
    HASHED,
    OTHER,
    RULES,
    categorise,
    parent,
    season_episode,
    subcategories,
)
from usenet_indexer.testing.corpus import load_corpus

# Group name words and the parent category their posts belong to.
GROUP_PARENTS = {
    "teevee": 5000,
    "tv": 5000,
    "hdtv": 5000,
    "anime": 5000,
    "erotica": 6000,
    "ebook": 7000,
    "e-book": 7000,
    "comics": 7000,
    "music": 3000,
    "mp3": 3000,
    "sounds": 3000,
    "sound": 3000,
    "movies": 2000,
}


def group_parent(group: str) -> int | None:
    words = set(group.lower().split(".")[2:])
    if "games" in words:
        return 1000 if words & {"xbox360", "wii", "xbox", "ps3", "nintendo"} else 4000
    return next((p for word, p in GROUP_PARENTS.items() if word in words), None)


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("Show.Name.S08E08.2160p.NF.WEB-DL.DDP5.1.x265-GRP", 5045),
        ("Show.Name.S01E02.720p.HDTV.x264-KILLERS", 5040),
        ("Show.Name.S03.1080p.BluRay.x264-ROVERS", 5040),
        ("The.Daily.Show.2024.03.05.Guest.Name.1080p.WEB.h264-EDITH", 5040),
        ("Some.Movie.2019.2160p.UHD.BluRay.x265-TERMiNAL", 2045),
        ("Some.Movie.1999.1080p.BluRay.x264-SPARKS", 2040),
        ("Some.Movie.2003.DVDRip.XviD-DiAMOND", 2030),
        ("Some.Movie.2003.PAL.DVDR-DiAMOND", 2070),
        ("Artist-Album-(CAT649)-WEB-1995-KILLERS", 3010),
        ("Artist - Album (2012) [FLAC]", 3040),
        ("Haruki Murakami - Heart Black Blue (1958).epub", 7020),
        ("Game.Name-CODEX", 4050),
        ("Mass.Effect.3.DLC.XBOX360-XPG", 1050),
        ("L3iMP7Tg4XaObh32FqTzvP6durgw7wZi", HASHED),
        ("holiday pictures", OTHER),
    ],
)
def test_release_names(name: str, category: int) -> None:
    assert categorise(name) == category


def test_every_category_given_is_in_the_table() -> None:
    assert all(rule.category in CATEGORIES for rule in RULES)
    assert {parent(c) for c in CATEGORIES} == {1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000}
    assert 5040 in subcategories(5000)
    assert 5000 not in subcategories(5000)


def test_file_extensions_tell_what_names_do_not() -> None:
    files = ("Heart Black Blue.epub", "Heart Black Blue.nfo", "Heart Black Blue.par2")
    assert categorise("Haruki Murakami - Heart Black Blue (1958)", (), files) == 7020
    assert categorise("Some Album", (), ("01 - a.flac", "02 - b.flac", "cover.jpg")) == 3040
    # The name speaks first.
    assert categorise("Show.S01E02.720p.HDTV.x264-GRP", (), ("show.mkv",)) == 5040


def test_season_and_episode() -> None:
    assert season_episode("Show.S13E05.720p") == (13, 5)
    assert season_episode("Show.1x02.HDTV") == (1, 2)
    assert season_episode("Show.S02.COMPLETE.1080p") == (2, None)
    assert season_episode("Movie.2019.1080p") == (None, None)


def test_real_subjects_land_in_their_groups_parent(corpus_dir: Path) -> None:
    """On the corpus's subjects with a telling group: name and group give the group's
    parent for >= 88% (name alone, where the subject carries the signal, >= 40%)."""
    with (corpus_dir / "subjects.tsv").open(encoding="utf-8") as stream:
        rows = [r for r in csv.DictReader(stream, delimiter="\t") if group_parent(r["group"])]
    assert len(rows) > 1000
    both = sum(
        parent(categorise(r["subject"], (r["group"],))) == group_parent(r["group"]) for r in rows
    )
    alone = sum(parent(categorise(r["subject"])) == group_parent(r["group"]) for r in rows)
    assert both / len(rows) >= 0.88
    assert alone / len(rows) >= 0.40


def test_corpus_nzb_names_get_a_category(corpus_dir: Path) -> None:
    """Every corpus NZB's file names give a category of the table (the test downloads
    are Other; none is given a category the table lacks)."""
    for _name, nzb in load_corpus(corpus_dir / "nzb"):
        for file in nzb.files:
            assert categorise(file.subject, tuple(file.groups)) in CATEGORIES
