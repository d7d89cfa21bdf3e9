"""Newznab categories from release names and groups (core/categories.py).

Checked on real subjects (../shared/corpus/subjects.tsv, from public test
suites) against an independent label: the group each was posted to
(alt.binaries.teevee is TV, .erotica XXX, .ebook books, .mp3 audio).
"""

from __future__ import annotations

import csv
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from usenet_indexer.core.catalog import Categories, entry
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
from usenet_indexer.core.indexer import find_segment_counter
from usenet_indexer.core.merge import CatalogFile, CatalogRelease
from usenet_indexer.core.naming import release_name
from usenet_indexer.core.renames import Finding, apply
from usenet_indexer.core.subject import parse_file_subject
from usenet_indexer.testing.corpus import load_corpus

# Group name words and the parent category their posts belong to. (Not
# a.b.hdtv: HDTV is a source, and films are posted there as much as shows.)
GROUP_PARENTS = {
    "teevee": 5000,
    "tv": 5000,
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
        # issue 26: software was Audio/MP3 (v2 read as LAME's V2)
        ("Corel.Workstation.2012.v2.8.x64-EDITH", 4010),
        ("Autodesk.IDE.2015.v2.9.x64-ENSLAVE", 4010),
        ("Artist - Album (2011) [MP3 V2]", 3010),
        # a PC game group's name at the end of an episode or a film says TV or film
        ("Show.Name.S02E03.720p.HDTV.x264-CODEX", 5040),
        ("Some.Movie.2019.1080p.BluRay.x264-CODEX", 2040),
        ("Game.Name.Update.v1.2.3-CODEX", 4050),
        ("Game.Name.PS4-DUPLEX", 1180),
        ("Game.Name.NSW-VENOM", 1090),
        ("Some.App.v3.1.MacOSX.Incl.Keygen-GRP", 4030),
        ("Author - Title (Retail) (epub)", 7020),
        ("Artist-Album-WEB-FLAC-2012-GRP", 3040),
    ],
)
def test_release_names(name: str, category: int) -> None:
    assert categorise(name) == category


@pytest.mark.parametrize(
    "name",
    [
        "3a915027faa3d30c13ebc47d89a27798",  # md5
        "da39a3ee5e6b4b0d3255bfef95601890afd80709",  # sha1
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",  # sha256
        "0734e8c0-4814-5e7a-212c-a737491bbd6a",  # UUID
        "{0734E8C0-4814-5E7A-212C-A737491BBD6A}",
        "Qs3iFUCUG3fp1mCFnBruWbbva",  # a posting tool's random name
    ],
)
def test_a_hash_name_is_hashed_whatever_its_files_and_groups_say(name: str) -> None:
    """Never a film or a show: the *arr programs would grab it by a title it does not have."""
    files = (f"{name}.mkv", f"{name}.par2")
    assert categorise(name, ("alt.binaries.teevee", "alt.binaries.movies"), files) == HASHED


def test_the_name_speaks_before_a_crosspost_group() -> None:
    """An e-book crossposted to a.b.teevee is an e-book; an unnamed kind goes by its group."""
    files = ("Ursula K. Le Guin - River (1996).epub",)
    groups = ("alt.binaries.e-book", "alt.binaries.teevee")
    assert categorise("Ursula K. Le Guin - River (1996)", groups, files) == 7020
    assert categorise("Kleine Rode Tractor", ("alt.binaries.teevee",)) == 5000
    # 1080p without a year is a film, unless its group says anime
    assert categorise("FullMetal alchemist Dual Audio 1080p") == 2040
    assert categorise("FullMetal alchemist Dual Audio 1080p", ("alt.binaries.anime",)) == 5070


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
    parent for >= 92% (name alone, where the subject carries the signal, >= 50%).
    The group is a rough label: a name that says a film in a.b.teevee is a film."""
    with (corpus_dir / "subjects.tsv").open(encoding="utf-8") as stream:
        rows = [r for r in csv.DictReader(stream, delimiter="\t") if group_parent(r["group"])]
    assert len(rows) > 1000
    both = sum(
        parent(categorise(r["subject"], (r["group"],))) == group_parent(r["group"]) for r in rows
    )
    alone = sum(parent(categorise(r["subject"])) == group_parent(r["group"]) for r in rows)
    assert both / len(rows) >= 0.92
    assert alone / len(rows) >= 0.50


def test_corpus_nzb_names_get_a_category(corpus_dir: Path) -> None:
    """Every corpus NZB's file names give a category of the table (the test downloads
    are Other; none is given a category the table lacks)."""
    for _name, nzb in load_corpus(corpus_dir / "nzb"):
        for file in nzb.files:
            assert categorise(file.subject, tuple(file.groups)) in CATEGORIES


def _before_counter(subject: str) -> str:
    """The subject before its segment counter `(k/N)`. The corpus's collection subjects
    (nZEDb's, the search sites') come without one: such a subject is all before it."""
    encoded = subject.encode()
    found = find_segment_counter(encoded)
    if found is None or encoded[found[1] + 1 :].strip(b" 0123456789"):
        return subject
    return encoded[: found[0]].decode()


def _read(subject: str) -> tuple[str, str]:
    """(release name, file name) of a one-file release of this subject, as the indexer reads it."""
    info = parse_file_subject(_before_counter(subject))
    return release_name(info.head_name, [(info.file_name, 1)]), info.file_name


def _corpus_rows(corpus_dir: Path) -> list[tuple[str, tuple[str, ...]]]:
    """Every real subject of the corpus with its groups: subjects.tsv and the NZBs' files."""
    with (corpus_dir / "subjects.tsv").open(encoding="utf-8", newline="") as stream:
        rows = csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE)
        found = [(r["subject"], tuple(g for g in r["group"].split(",") if g)) for r in rows]
    for _name, nzb in load_corpus(corpus_dir / "nzb"):
        found.extend((file.subject, tuple(file.groups)) for file in nzb.files)
    return found


# The table: real subjects (../shared/corpus), each with the category a person
# gives the release after reading its name (a parent, like 5000, where the
# name does not say more), written by reading, not by running the rules.
TABLE = Path(__file__).parent / "corpus" / "categories.tsv"


def test_real_names_land_where_a_person_files_them(corpus_dir: Path) -> None:
    """The release names of 240 real subjects, by the name and its one file alone (no
    group): >= 90% where a person files them, every hash under Other/Hashed."""
    known = {subject for subject, _groups in _corpus_rows(corpus_dir)}
    with TABLE.open(encoding="utf-8", newline="") as stream:
        table = list(csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(table) >= 200
    assert [row["subject"] for row in table if row["subject"] not in known] == []
    misses = []
    for row in table:
        name, file = _read(row["subject"])
        expected, got = int(row["category"]), categorise(name, (), (file,))
        if (parent(got) if expected == parent(expected) else got) != expected:
            misses.append((name, expected, got))
    assert [m for m in misses if m[1] == HASHED] == []
    assert len(misses) / len(table) <= 0.10, misses


# A hash by this test's own reading: hex of 32/40/64 digits, a UUID, or 16-32
# letters and digits that mix both cases with digits.
_HEX = re.compile(r"^(?:[0-9a-f]{32}|[0-9a-f]{40}|[0-9a-f]{64})$", re.IGNORECASE)
_UUID = re.compile(r"^[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}$", re.IGNORECASE)
_RANDOM = re.compile(r"^(?=.*[a-z])(?=.*[A-Z])(?=.*[0-9])[A-Za-z0-9]{16,32}$")


def test_no_corpus_hash_name_is_offered_as_a_film_or_a_show(corpus_dir: Path) -> None:
    """Every real subject read as a release, with its groups (a.b.teevee, a.b.movies,
    a.b.hdtv...) and file: no hash or UUID name lands under Movies or TV."""
    hashes = []
    for subject, groups in _corpus_rows(corpus_dir):
        name, file = _read(subject)
        if _HEX.match(name) or _UUID.match(name) or _RANDOM.match(name):
            hashes.append((name, groups, categorise(name, groups, (file,))))
    assert len(hashes) >= 40
    assert [h for h in hashes if parent(h[2]) in (2000, 5000)] == []
    assert {category for _name, _groups, category in hashes} == {HASHED}


def _catalog_file(name: str, size: int, index: int) -> CatalogFile:
    return CatalogFile(
        name=name,
        subject=f'[{index}/2] - "{name}" yEnc (1/10)',
        index=index,
        total_segments=10,
        posted=1_700_000_000,
        segments=[(k, f"{name}.{k}@ngPost", size // 10) for k in range(1, 11)],
    )


def test_a_probe_renamed_release_is_filed_by_its_new_name() -> None:
    """An obfuscated upload in a.b.teevee is Other/Hashed until a probe renames it; then
    its category is its real name's."""
    random = "0734e8c0-4814-5e7a-212c-a737491bbd6a"
    release = CatalogRelease(
        key=b"k" * 16,
        name=random,
        poster="a1b2c3@ngPost.com",
        groups=("alt.binaries.teevee",),
        posted=1_700_000_000,
        files_announced=2,
        complete=1.0,
        bytes=10_040_000,
        probe_candidate=True,
        dropped=None,
        chunks=1,
        files=(
            _catalog_file(f"{random}.mkv", 10_000_000, 1),
            _catalog_file(f"{random}.par2", 40_000, 2),
        ),
        sources=(b"k" * 16,),
    )
    changed = {b"k" * 16: datetime(2024, 1, 1, tzinfo=UTC)}
    (unnamed,) = apply([release], {})
    assert entry(unnamed, changed).category == HASHED
    real = "Show.Name.S02E03.720p.HDTV.x264-GRP"
    (renamed,) = apply([release], {b"k" * 16: [Finding(real, (f"{real}.mkv",), (10_000_000,))]})
    assert (entry(renamed, changed).name, entry(renamed, changed).category) == (real, 5040)


def test_a_builds_memo_of_categories_answers_as_categorise_does() -> None:
    # A build keeps each release's category (Categories) from build to build: the
    # same releases, groups and files, the same answer, also after the memo is full.
    asked = [
        (name, groups, files)
        for name in ("Show.Name.S01E02.720p.HDTV.x264-KILLERS", "holiday pictures", "a1b2c3")
        for groups in ((), ("alt.binaries.teevee",), ("alt.binaries.ebook",))
        for files in ((), ("a.epub", "b.epub", "c.nfo"), ("x.mkv",))
    ]
    memo = Categories(limit=5)
    for _ in range(2):
        assert [memo.of(*a) for a in asked] == [categorise(*a) for a in asked]
    assert len({categorise(*a) for a in asked}) >= 4  # the groups and files told
