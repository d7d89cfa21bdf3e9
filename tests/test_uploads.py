"""Releases joined into uploads (core/uploads.py), through the indexer and the merge.

The overview lines are written as the posting tools write them (issue 15's
patterns); what is asserted is what a user sees in the catalog: how many
releases, which files each holds, and its name.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from email.utils import formatdate

import pytest

from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.core.uploads import TOGETHER_SECONDS, Part, link

START = 1_764_000_000  # unix seconds of the first article
SEGMENTS = 3


def lines_of(
    names: Sequence[str],
    poster: str,
    *,
    at: int,
    total: int | None = None,
    first_index: int = 1,
    threaded: bool = False,
) -> Iterator[tuple[int, str]]:
    """(date, overview line without its number) of an upload of `names`, one after another.

    `threaded`: every part after the first refers to the first (References),
    as PowerPost posts with its FileThread option on.
    """
    total = total if total is not None else len(names)
    width = len(str(total))
    for i, name in enumerate(names, first_index):
        first = f"<part1of{SEGMENTS}.{abs(hash((poster, name, at))):x}@powerpost2000AA.local>"
        for k in range(1, SEGMENTS + 1):
            subject = f'[{i:0{width}}/{total}] - "{name}" yEnc ({k}/{SEGMENTS})'
            date = at + (i - first_index) * 20 + k
            message_id = first if k == 1 else f"<{abs(hash((poster, name, k, at))):x}@ngPost>"
            refs = first if threaded and k > 1 else ""
            yield (
                date,
                f"{subject}\t{poster}\t{formatdate(date)}\t{message_id}\t{refs}\t700000\t5000",
            )


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


def test_a_reposts_file_the_first_post_lacks_goes_with_the_repost() -> None:
    """A takedown took file 3 of 4 of the first post; the poster posts all four again a
    minute later. File 3 fits the first post's hole too, but was posted among the
    repost's files: it goes with the upload posted just before it."""
    parts = [
        Part(b"a1", "p", 4, frozenset({1, 2}), START, START + 10, dropped=False),
        Part(b"a4", "p", 4, frozenset({4}), START + 12, START + 14, dropped=False),
        Part(b"b1", "p", 4, frozenset({1, 2}), START + 60, START + 70, dropped=False),
        Part(b"b3", "p", 4, frozenset({3}), START + 72, START + 74, dropped=False),
        Part(b"b4", "p", 4, frozenset({4}), START + 76, START + 78, dropped=False),
    ]
    assert link(parts) == [[b"a1", b"a4"], [b"b1", b"b3", b"b4"]]
    assert link(reversed(parts)) == link(parts)


def test_parts_threaded_under_the_first_with_references_are_segments_not_replies() -> None:
    """PowerPost's FileThread: parts 2..N carry References to part 1."""
    names = [f"Album-(CAT1)-WEB-2020-GRP.part{i}.rar" for i in range(1, 4)]
    (release,) = index(lines_of(names, "p <p@x>", at=START, threaded=True))
    assert [len(f.segments) for f in release.files] == [SEGMENTS] * 3
    # A reply keeps being a reply: "Re:", or References without a yEnc part.
    reply = f"Re: {names[0]}\tq <q@x>\t{formatdate(START)}\t<r1@x>\t<part1@x>\t900\t10"
    text = f"about (1/2) of it\tq <q@x>\t{formatdate(START)}\t<r2@x>\t<part1@x>\t900\t10"
    indexer = RangeIndexer(group="g", first=1)
    indexer.add_text(f"1\t{reply}\n2\t{text}", 3)
    assert dict(indexer.finish().skipped) == {"reply": 2}


def test_floods_of_one_film_name_from_different_bots_stay_apart_and_are_dropped() -> None:
    """Bots name their executables after the same film: each bot's is its own release."""
    name = "Dune.Part.Two.2024.1080p.WEB-DL.exe"
    floods = [lines_of([name], f"bot{n} <bot{n}@spam.example>", at=START + n) for n in range(3)]
    wrapped = lines_of(["Dune.Part.Two.2024.1080p.WEB-DL.rar"], "bot9 <b9@x>", at=START + 9)
    indexer = RangeIndexer(group="g", first=1, keep_dropped=True)
    ordered = sorted(itertools.chain(*floods, wrapped))
    indexer.add_text("\n".join(f"{n}\t{line}" for n, (_, line) in enumerate(ordered, 1)), 99)
    batch = indexer.finish()
    dropped = [r for r in batch.releases if r.dropped == "executable"]
    assert len(dropped) == 3
    assert [r.name for r in batch.releases if r.dropped is None] == [
        "Dune.Part.Two.2024.1080p.WEB-DL"
    ]


def test_newsups_fixed_par2_name_links_only_its_own_upload() -> None:
    """NewsUP renames files at random and the par2 to `rename.with.this.par2`."""
    one = lines_of(["Xq7Lm2Pz9RtA.bin", "rename.with.this.par2"], "a1b2 <u1@newsup>", at=START)
    other = lines_of(
        ["Kd8Wn3Vb5YcE.bin", "rename.with.this.par2"], "c3d4 <u2@newsup>", at=START + 5
    )
    releases = index(one, other)
    assert sorted(len(r.files) for r in releases) == [2, 2]
    assert len({r.poster for r in releases}) == 2


def test_a_random_file_without_a_par2_beside_it_is_still_a_probe_candidate() -> None:
    indexer = RangeIndexer(group="g", first=1)
    lines = lines_of(["L3iMP7Tg4XaObh32FqTzvP6durgw7wZi.mkv"], "r <dZ8k@x>", at=START, total=8)
    indexer.add_text("\n".join(f"{n}\t{line}" for n, (_, line) in enumerate(lines, 1)), 9)
    batch = indexer.finish()
    (candidate,) = batch.probe_candidates
    assert candidate.file_name == "L3iMP7Tg4XaObh32FqTzvP6durgw7wZi.mkv"


def test_nyuu_group_files_collections_of_one_release_are_one() -> None:
    """Nyuu --group-files numbers the extras, the volumes and the sample each on its own."""
    poster = "Lisa <lisa@proton.me>"
    extras = [f"Wolf.Island.Red.2017.2160p.BluRay.x264-FQM.{e}" for e in ("nfo", "sfv", "par2")]
    volumes = [f"fqm-wolf.island.red.2017.2160p.r{n:02}" for n in range(5)]
    sample = ["sample-fqm-wolf.island.red.2017.2160p.mkv"]
    (release,) = index(
        lines_of(extras, poster, at=START),
        lines_of(volumes, poster, at=START + 60),
        lines_of(sample, poster, at=START + 200),
    )
    assert len(release.files) == 9
    assert release.name == "Wolf.Island.Red.2017.2160p.BluRay.x264-FQM"


def test_collections_with_the_same_m_join_but_a_reposts_do_not() -> None:
    """nfo and sfv [1/2] beside a sample and its par2 [1/2]; then the same again (a repost)."""
    poster = "Sofie <sofie@yahoo.com>"
    extras = [f"Summer.S07E02.2160p.DSNP.WEBRip.DDP5.1.x264-FQM.{e}" for e in ("nfo", "sfv")]
    volumes = [f"fqm-summer.s07e02.2160p.r{n:02}" for n in range(4)]
    sample = [f"sample-fqm-summer.s07e02.2160p.{e}" for e in ("mkv", "par2")]
    first = index(
        lines_of(extras, poster, at=START),
        lines_of(volumes, poster, at=START + 60),
        lines_of(sample, poster, at=START + 200),
    )
    assert [len(r.files) for r in first] == [8]
    again = [
        lines_of(extras, poster, at=START + 600),
        lines_of(volumes, poster, at=START + 660),
        lines_of(sample, poster, at=START + 800),
    ]
    both = index(
        lines_of(extras, poster, at=START),
        lines_of(volumes, poster, at=START + 60),
        lines_of(sample, poster, at=START + 200),
        *again,
    )
    assert [len(r.files) for r in both] == [8, 8]


@pytest.mark.parametrize("batch_lines", [10**9, 25])
def test_one_release_name_posted_at_once_by_two_posters_is_two_releases(batch_lines: int) -> None:
    """Two posters' uploads of one scene release, their articles interleaved."""
    names = [*SCENE_EXTRAS, *SCENE_VOLUMES[:6]]
    releases = index(
        lines_of(names, "a <a@x>", at=START),
        lines_of(names, "b <b@x>", at=START + 3),
        batch_lines=batch_lines,
    )
    assert sorted((r.poster, len(r.files)) for r in releases) == [("a <a@x>", 9), ("b <b@x>", 9)]


@pytest.mark.parametrize("batch_lines", [10**9, 7, 40])
def test_two_posters_of_one_release_at_once_each_keep_their_own_par2_set(
    batch_lines: int,
) -> None:
    """Two posters upload one scene release two seconds apart, as the generator's
    same_name pattern has JBinUp and Nyuu do it: one posts its .nfo, its volumes a
    minute apart, then its par2 set; the other its .nfo and its par2 set in one second,
    then its volumes. The second one's files of that second come in no order of their
    own (their file keys decide), and the first upload held only its .nfo then: a
    par2 file of the second sorted before its .nfo went to the first upload, and the
    first upload's file of that name to the second (4M articles, seed 1:
    Queen.North.2015.2160p.WEB-DL.x265-AMIABLE). Each upload is one release of its own
    files, in one pass and cut anywhere."""
    head = "Queen.North.2015.2160p.WEB-DL.x265-AMIABLE"
    par2 = [f"{head}.par2", *(f"{head}.vol{n:02}+{n + 1:02}.par2" for n in (0, 1, 3, 7, 15))]
    volumes = [f"amiable-queen.north.2015.2160p.r{n:02}" for n in range(4)]
    first = [(f"{head}.nfo", START)]
    first += [(name, START + 60 * (n + 1)) for n, name in enumerate(volumes)]
    first += [(name, START + 300 + n) for n, name in enumerate(par2)]
    second = [(name, START + 2) for name in (f"{head}.nfo", *par2)]
    second += [(name, START + 10 + 60 * n) for n, name in enumerate(volumes)]
    posted = {
        poster: [
            posting
            for i, (name, at) in enumerate(files, 1)
            for posting in lines_of([name], poster, at=at, total=len(files), first_index=i)
        ]
        for poster, files in (
            ("Anna <JBinUp@JBinUp.local>", first),
            ("jan2504@hotmail.com (Jan)", second),
        )
    }
    releases = index(*map(iter, posted.values()), batch_lines=batch_lines)
    # Each release's poster, the posters whose articles it holds, and its files.
    poster_of = {text.split("\t")[3]: poster for poster, p in posted.items() for _, text in p}
    made = sorted(
        (r.poster, sorted({poster_of[f"<{mid}>"] for f in r.files for _, mid, _ in f.segments}),
         len(r.files))
        for r in releases
    )  # fmt: skip
    assert made == [
        ("Anna <JBinUp@JBinUp.local>", ["Anna <JBinUp@JBinUp.local>"], 11),
        ("jan2504@hotmail.com (Jan)", ["jan2504@hotmail.com (Jan)"], 11),
    ]


def test_the_next_episode_posted_at_once_by_the_same_poster_stays_apart() -> None:
    poster = "p <p@x>"
    one = lines_of([f"Show.S01E01.1080p.WEB-GRP.r{n:02}" for n in range(3)], poster, at=START)
    two = lines_of(
        [f"Show.S01E02.1080p.WEB-GRP.{e}" for e in ("nfo", "par2")], poster, at=START + 70
    )
    assert len(index(one, two)) == 2


def test_dates_and_volume_numbers_stay_in_the_name() -> None:
    """Only a random stem loses a short numeric extension (hash.10)."""
    from usenet_indexer.core.subject import file_stem

    assert file_stem("Show.2020.01.15.mkv") == "Show.2020.01.15"
    assert file_stem("Book.Vol.1.epub") == "Book.Vol.1"
    assert file_stem("Ubuntu.20.04.iso") == "Ubuntu.20.04"
    assert file_stem("b2d3a0c1e4f5a6b7c8d9e0f1a2b3225e.10") == "b2d3a0c1e4f5a6b7c8d9e0f1a2b3225e"
    one = lines_of(["Show.2020.01.15.mkv"], "a <a@x>", at=START)
    two = lines_of(["Show.2020.02.03.mkv"], "b <b@x>", at=START + 5)
    assert len(index(one, two)) == 2


def test_parts_with_references_are_read_alike_wherever_batches_are_cut() -> None:
    """The fast path takes a line with References as the slow path does: only a yEnc part."""
    for marker in ("yEnc ", ""):
        lines = [
            f'{n}\t"a.rar" {marker}({n}/3)\tp <p@x>\t{formatdate(START)}\t<a{n}@x>\t'
            f"{'<a1@x>' if n > 1 else ''}\t700000\t10"
            for n in (1, 2, 3)
        ]
        counts = []
        for per_batch in (3, 1):
            indexer = RangeIndexer(group="g", first=1)
            merger = ReleaseMerger()
            for at in range(0, 3, per_batch):
                indexer.add_text("\n".join(lines[at : at + per_batch]), at + per_batch + 1)
                merger.add_all(indexer.take().releases)
            counts.append([len(f.segments) for r in merger.releases() for f in r.files])
        assert counts[0] == counts[1] == ([3] if marker else [1])


def test_joined_collections_count_each_counters_missing_files() -> None:
    """The volumes' [i/22] with 15 seen beside the complete [i/3] extras: not complete."""
    poster = "Lisa <lisa@proton.me>"
    extras = [f"Wolf.Island.Red.2017.2160p.BluRay.x264-FQM.{e}" for e in ("nfo", "sfv", "par2")]
    volumes = [f"fqm-wolf.island.red.2017.2160p.r{n:02}" for n in range(15)]
    (release,) = index(
        lines_of(extras, poster, at=START), lines_of(volumes, poster, at=START + 60, total=22)
    )
    assert 0.6 < release.complete < 0.8


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The.Office.S01E01.720p.WEB", "The.Office.US.S01E01.720p.WEB"),
        ("Show 2020 01 01 1080p", "Show 2020 01 10 1080p"),
        ("Movie.2019.1080p", "Movie.2.2019.1080p"),
    ],
)
def test_collections_of_other_releases_stay_apart(first: str, second: str) -> None:
    poster = "p <p@x>"
    one = lines_of([f"{first}.mkv", f"{first}.nfo"], poster, at=START)
    two = lines_of([f"{second}.{e}" for e in ("mkv", "nfo", "par2")], poster, at=START + 60)
    assert len(index(one, two)) == 2


# -- albums posted track by track under a posting tool's default From (issue 28)

POWERPOST_FROM = "Yenc@power-post.org (Yenc-PP-A&A)"


def album_lines(
    names: Sequence[str],
    *,
    at: int,
    template: str = '(????) [{i}/{m}] - "{name}" yEnc ({k}/{n})',
    poster: str = POWERPOST_FROM,
) -> Iterator[tuple[int, str]]:
    """An album as PowerPost posts it: one file per name, its default template, one after another.

    `(????) [05/13] - "05-artist-title.flac" yEnc (01/20)`: the file number padded to
    the digits of M, the segment counter to those of N (PowerPost's Common.cpp).
    """
    total, width = len(names), len(str(len(names)))
    for i, name in enumerate(names, 1):
        for k in range(1, SEGMENTS + 1):
            subject = template.format(i=f"{i:0{width}}", m=total, name=name, k=k, n=SEGMENTS)
            date = at + i * 40 + k
            message_id = f"<{date}.{abs(hash((name, k, at))) % 10**8:08}.{k}@eu.news.astraweb.com>"
            yield (
                date,
                f"{subject}\t{poster}\t{formatdate(date)}\t{message_id}\t\t250000\t1950",
            )


def scene_album(artist: str, album: str, tracks: Sequence[str], ext: str = "flac") -> list[str]:
    """File names as the scene's music rules give them: `00-` extras, `NN-artist-title` tracks."""
    extras = [f"00-{artist}-{album}.{e}" for e in ("jpg", "m3u", "nfo")]
    numbered = [f"{n:02}-{artist}-{title}.{ext}" for n, title in enumerate(tracks, 1)]
    return sorted([*extras, *numbered])


TITLES = [
    "intro", "the_long_road", "nightfall", "paper_moon", "glass_houses", "river",
    "iron_sky", "slow_burn", "echoes", "last_light", "the_harbour", "outro",
    "winter_song", "coda", "undertow", "ghosts", "aftermath", "home",
]  # fmt: skip


@pytest.mark.parametrize(
    ("names", "template"),
    [
        # The form: PowerPost's default template and From, 10 tracks, playlist, cover, nfo.
        (scene_album("artist_name", "album_title-web-2015-grp", TITLES[:10]), None),
        # The template with its placeholder deleted: no "(????)".
        (
            scene_album("sigur_ros", "takk-web-2005-esc", TITLES[:13], "mp3"),
            '[{i}/{m}] - "{name}" yEnc ({k}/{n})',
        ),
        # 18 tracks, with an sfv and a par2 set named after the album ("Sort PAR" order).
        (
            [
                "00-boards_of_canada-geogaddi-web-2002-fwyh.nfo",
                "00-boards_of_canada-geogaddi-web-2002-fwyh.sfv",
                "00-boards_of_canada-geogaddi-web-2002-fwyh.par2",
                *scene_album("boards_of_canada", "geogaddi-web-2002-fwyh", TITLES, "mp3")[:2],
                *scene_album("boards_of_canada", "geogaddi-web-2002-fwyh", TITLES, "mp3")[3:],
                "00-boards_of_canada-geogaddi-web-2002-fwyh.vol00+01.par2",
                "00-boards_of_canada-geogaddi-web-2002-fwyh.vol01+02.par2",
            ],
            None,
        ),
        # Tracks named `NN - Artist - Title` (the corpus's `01 - Sido - Bilder Im Kopf.mp3`).
        (
            [
                *(
                    f"{n:02} - Sido - {t.replace('_', ' ').title()}.mp3"
                    for n, t in enumerate(TITLES[:9], 1)
                ),
                "Sido - Ich.m3u",
                "Sido - Ich.nfo",
            ],
            None,
        ),
        # Tracks that name no artist (`01. September '79.flac`): numbered alike.
        (
            [f"{n:02}. {t.replace('_', ' ').title()}.flac" for n, t in enumerate(TITLES[:11], 1)],
            None,
        ),
    ],
    ids=["powerpost-default", "no-placeholder", "sfv-par2-18-tracks", "spaced-fields", "no-artist"],
)
def test_an_album_posted_track_by_track_under_the_default_from_is_one_release(
    names: list[str], template: str | None
) -> None:
    lines = (
        album_lines(names, at=START)
        if template is None
        else album_lines(names, at=START, template=template)
    )
    releases = index(lines)
    assert [sorted(f.name for f in r.files) for r in releases] == [sorted(names)]


def test_two_albums_posted_back_to_back_under_one_from_stay_two() -> None:
    first = scene_album("enya", "shepherd_moons-web-1991-grp", TITLES[:10])
    second = scene_album("portishead", "dummy-web-1994-grp", TITLES[5:15])
    assert len(first) == len(second)  # the same [i/13]: only the names tell them apart
    end = START + 40 * (len(first) + 1)
    releases = index(album_lines(first, at=START), album_lines(second, at=end + 60))
    assert sorted(sorted(f.name for f in r.files) for r in releases) == sorted([first, second])


def test_two_albums_of_one_artist_posted_one_after_the_other_stay_two() -> None:
    # A discography: the same artist, the same M, each album in turn.
    first = scene_album("enya", "shepherd_moons-web-1991-grp", TITLES[:10])
    second = scene_album("enya", "the_memory_of_trees-web-1995-grp", TITLES[8:18])
    end = START + 40 * (len(first) + 1)
    releases = index(album_lines(first, at=START), album_lines(second, at=end + 60))
    assert sorted(sorted(f.name for f in r.files) for r in releases) == sorted([first, second])


def test_an_album_and_the_next_upload_under_the_same_from_stay_apart() -> None:
    album = scene_album("massive_attack", "mezzanine-web-1998-grp", TITLES[:10])
    # Another uploader's next PowerPost upload with the defaults: the same From and [i/13].
    volumes = [f"Other.Upload.2024.1080p.part{n:02}.rar" for n in range(1, 14)]
    end = START + 40 * (len(album) + 1)
    releases = index(album_lines(album, at=START), album_lines(volumes, at=end + 30))
    assert sorted(sorted(f.name for f in r.files) for r in releases) == sorted([album, volumes])


def test_albums_of_two_artists_posted_at_once_under_the_default_from_stay_apart() -> None:
    one = scene_album("daft_punk", "discovery-web-2001-grp", TITLES[:10])
    two = scene_album("royksopp", "melody_am-web-2001-grp", TITLES[2:12])
    releases = index(album_lines(one, at=START), album_lines(two, at=START + 7))
    assert sorted(sorted(f.name for f in r.files) for r in releases) == sorted([one, two])


@pytest.mark.parametrize("batch_lines", [10**9, 13])
@pytest.mark.parametrize("apart", [7, 20, 33])
def test_albums_of_two_artists_an_uploader_posts_at_once_stay_apart(
    apart: int, batch_lines: int
) -> None:
    # One uploader (his own From, where uploads are joined by M and time alone), two
    # albums of one M posted at once over several connections: their tracks
    # interleave, each [i/M] free in both; the artist in the names tells them apart
    # (bench-grouping at 4M: yuki318's Secret_Black and Tiger_Red, 28 s apart).
    poster = "yuki318@hotmail.com"
    one = scene_album("secret_black", "ghost_star_empire-web-2000-sparks", TITLES[:10], "mp3")
    two = scene_album("tiger_red", "king_edge-web-1996-edith", TITLES[4:14], "mp3")
    releases = index(
        album_lines(one, at=START, poster=poster),
        album_lines(two, at=START + apart, poster=poster),
        batch_lines=batch_lines,
    )
    assert sorted(sorted(f.name for f in r.files) for r in releases) == sorted([one, two])


@pytest.mark.parametrize("batch_lines", [1, 7, 20, 41])
def test_an_album_cut_across_batches_is_one_release(batch_lines: int) -> None:
    names = scene_album("motorhead", "ace_of_spades-web-1980-grp", TITLES[:12])
    (release,) = index(album_lines(names, at=START), batch_lines=batch_lines)
    assert sorted(f.name for f in release.files) == sorted(names)


def test_a_later_album_of_the_same_artist_does_not_fill_the_gaps_of_an_earlier_one() -> None:
    # The first album lost its first tracks (a takedown); ten minutes later the
    # same From posts another album of that artist with the same [i/13].
    first = scene_album("enya", "shepherd_moons-web-1991-grp", TITLES[:10])
    second = scene_album("enya", "the_memory_of_trees-web-1995-grp", TITLES[8:18])
    kept = [
        line for line in album_lines(first, at=START) if not any(n in line[1] for n in first[:8])
    ]
    releases = index(iter(kept), album_lines(second, at=START + 40 * 14 + 600))
    assert sorted(sorted(f.name for f in r.files) for r in releases) == sorted([first[8:], second])
