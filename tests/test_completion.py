"""Whole, repairable or broken: real uploads from the corpus, with articles taken away.

Each case replays a real NZB of ../shared/corpus as the overview lines a
server would send (testing/corpus.py), less the articles a takedown or a
lossy server would lose, indexes and merges them as the catalog does, and
judges the merged release. The PAR2 sets are the posters' own: the
EVOLVE post's par2cmdline ladder (`vol000+01` ... `vol059+54`, then
`vol113+69` ... `vol527+69`, upper-case `.PAR2`), SABnzbd's test post with
a four-digit ladder up to `vol1023+976`, a Spotnet post's `vol0+1.PAR2`
without a file counter.
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import attrs
import pytest
from probe_tools import require_tool, run_tool

from usenet_indexer.core.catalog import entry
from usenet_indexer.core.completion import REPAIR_MARGIN, State, Volume, judge, volume
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import CatalogFile, CatalogRelease, ReleaseMerger
from usenet_indexer.core.nzb import Nzb, NzbFile, NzbSegment, parse_nzb
from usenet_indexer.core.renames import Finding, Shown
from usenet_indexer.testing.corpus import nzb_to_overview
from usenet_indexer.testing.newsd import PostedArticle
from usenet_indexer.testing.yenc import yenc_articles

GROUP = "alt.binaries.corpus"
EVOLVE = "mozvip__sabnzbd-client__test.nzb"  # Game.of.Thrones.S03E10.720p.HDTV.x264-EVOLVE
WIN_UNICODE = "sabnzbd__sabnzbd.github.io__test_win_unicode.nzb"
SPOTNET = "mvdwater__spotweb__test.nzb"
NGPOST = "mbruel__ngPost__ngPost_v4.16_libssl3-x86_64.nzb"  # one AppImage, no par2
SONARR = "Sonarr__Sonarr__ValidNzb.nzb"  # 4 of 46 files kept by Sonarr's authors

# (what is lost) -> which articles are gone: file subject part and segment numbers
Lose = Callable[[NzbFile, NzbSegment], bool]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # par2cmdline's ladder, padded to the widest first and count of the set
        ("game.of.thrones.s03e10.720p.hdtv.x264-evolve.vol527+69.PAR2", Volume("game.of.thrones.s03e10.720p.hdtv.x264-evolve", 527, 69)),
        ("x.vol000+01.PAR2", Volume("x", 0, 1)),
        ("Colombiana - dutch cover.rar.vol0+1.PAR2", Volume("colombiana - dutch cover.rar", 0, 1)),
        ("test_win_unicode.vol1023+976.par2", Volume("test_win_unicode", 1023, 976)),
        ("dyn.vol0000+001.PAR2", Volume("dyn", 0, 1)),
        ("Zombie.Tycoon.2.Brainhovs.Revenge-SKIDROW.vol00+1.par2", Volume("zombie.tycoon.2.brainhovs.revenge-skidrow", 0, 1)),
        ("fhdbg34rgjdsfd008c.vol062+64.par2", Volume("fhdbg34rgjdsfd008c", 62, 64)),
        ("ECG190215XUTFQI4JB.vol03+04.par2", Volume("ecg190215xutfqi4jb", 3, 4)),
        # par2cmdline -u: uniform volumes
        ("ArcSoft.TotalMedia.Theatre.v5.0.1.87-Lz0.vol43+09.par2", Volume("arcsoft.totalmedia.theatre.v5.0.1.87-lz0", 43, 9)),
        # ParPar -n: first-end, end exclusive
        ("910a284f98ebf57f6a531cd96da48838.vol01-03.par2", Volume("910a284f98ebf57f6a531cd96da48838", 1, 2)),
        ("x.vol00-01.par2", Volume("x", 0, 1)),
        # not recovery volumes
        ("game.of.thrones.s03e10.720p.hdtv.x264-evolve.par2", None),
        ("x.part01.rar", None),
        ("x.vol07.par2", None),
        ("x.vol03-03.par2", None),
    ],
)  # fmt: skip
def test_a_volume_s_blocks_are_in_its_name(name: str, expected: Volume | None) -> None:
    assert volume(name) == expected


def load(corpus_dir: Path, name: str) -> Nzb:
    return parse_nzb((corpus_dir / "nzb" / name).read_bytes())


def without(nzb: Nzb, lose: Lose) -> Nzb:
    """The NZB less the articles `lose` picks (a file with none left is gone whole)."""
    files = []
    for file in nzb.files:
        kept = tuple(s for s in file.segments if not lose(file, s))
        if kept:
            files.append(attrs.evolve(file, segments=kept))
    return attrs.evolve(nzb, files=tuple(files))


def indexed(nzb: Nzb) -> CatalogRelease:
    """The one release the catalog makes of the NZB's articles."""
    lines = nzb_to_overview([nzb], first_article=1_000, rng=random.Random(7), group=GROUP)
    indexer = RangeIndexer(group=GROUP, first=lines.first_article)
    indexer.add_text("\n".join(lines.lines), lines.next_article)
    merger = ReleaseMerger()
    merger.add_all(indexer.finish().releases)
    [release] = merger.releases()
    return release


def named(*parts: str) -> Callable[[NzbFile], bool]:
    return lambda file: any(f'{part}"' in file.subject for part in parts)


def segments(part: str, numbers: set[int]) -> Lose:
    return lambda file, segment: f'{part}"' in file.subject and segment.number in numbers


def files(*parts: str) -> Lose:
    return lambda file, _: named(*parts)(file)


def nothing(file: NzbFile, segment: NzbSegment) -> bool:
    return False


RARS = [f"evolve.r{n:02}" for n in range(24)]
VOLUMES = [f"evolve.vol{v}.PAR2" for v in ("000+01", "001+02", "003+04", "007+08", "015+16",
                                           "031+28", "059+54", "113+69", "182+69", "251+69",
                                           "320+69", "389+69", "458+69", "527+69")]  # fmt: skip


@pytest.mark.parametrize(
    ("nzb", "lose", "state"),
    [
        pytest.param(EVOLVE, nothing, State.WHOLE, id="evolve-as-posted"),
        # A lossy server: five articles of one rar volume, apart. Each damages two
        # 800 kB blocks at most (articles are 400 kB); 596 recovery blocks.
        pytest.param(EVOLVE, segments("evolve.r05", {3, 40, 41, 90, 137}), State.REPAIRABLE,
                     id="evolve-five-articles-lost"),
        # A takedown of whole rar volumes: 69 blocks each (137 articles of 400 kB in
        # 800 kB blocks, and one more); 7 volumes x 69 x 1.2 = 580 <= 596.
        pytest.param(EVOLVE, files(*RARS[3:10]), State.REPAIRABLE, id="evolve-seven-rars-gone"),
        # 8 x 69 x 1.2 = 662 > 596: more than the recovery rebuilds, with the margin.
        pytest.param(EVOLVE, files(*RARS[3:11]), State.BROKEN, id="evolve-eight-rars-gone"),
        # Recovery volumes lost, every data article there: nothing to repair. The
        # counter's numbers 35 and 36 are missing between vol059+54 and vol251+69,
        # whose blocks leave a gap: volumes, not data.
        pytest.param(EVOLVE, files(VOLUMES[7], VOLUMES[8]), State.WHOLE,
                     id="evolve-two-volumes-gone"),
        # The same lost articles with the volumes gone too: fewer blocks to rebuild with.
        pytest.param(EVOLVE, lambda f, s: files(*RARS[3:9])(f, s) or files(*VOLUMES[9:])(f, s),
                     State.BROKEN, id="evolve-six-rars-and-the-big-volumes-gone"),
        # The last file of the counter gone (it happens to be the biggest volume, but
        # nothing after it says so): counted as data, repairable from the rest.
        pytest.param(EVOLVE, files(VOLUMES[13]), State.REPAIRABLE, id="evolve-last-file-gone"),
        # Without its par2 set, one lost article is one too many.
        pytest.param(EVOLVE, lambda f, s: files(*VOLUMES)(f, s) or segments("evolve.r05", {3})(f, s),
                     State.BROKEN, id="evolve-no-par2-one-article-lost"),
        # A ladder of tiny blocks (3 kB): the 655 kB article lost is 212 blocks, of 1,999.
        pytest.param(WIN_UNICODE, segments("test_win_unicode.rar", {4}), State.REPAIRABLE,
                     id="four-digit-ladder-one-article-lost"),
        pytest.param(WIN_UNICODE, files("test_win_unicode.vol0063+064.par2"), State.WHOLE,
                     id="four-digit-ladder-a-volume-gone"),
        # No file counter, upper-case .PAR2, blocks of one 384 kB article: one article
        # of the rar lost damages at most 2 blocks (2 x 1.2 <= 3); two in a row 3.
        pytest.param(SPOTNET, segments("Colombiana - dutch cover.rar", {2}), State.REPAIRABLE,
                     id="spotnet-one-article-lost"),
        pytest.param(SPOTNET, segments("Colombiana - dutch cover.rar", {1, 2}), State.BROKEN,
                     id="spotnet-two-articles-lost"),
        pytest.param(NGPOST, nothing, State.WHOLE, id="no-par2-as-posted"),
        pytest.param(NGPOST, segments("x86_64.AppImage", {20}), State.BROKEN,
                     id="no-par2-one-article-lost"),
        # 4 of the counter's 46 files: what a takedown leaves of a TV episode.
        pytest.param(SONARR, nothing, State.BROKEN, id="four-of-46-files"),
    ],
)  # fmt: skip
def test_real_uploads_less_what_was_lost(
    corpus_dir: Path, nzb: str, lose: Lose, state: State
) -> None:
    posted = load(corpus_dir, nzb)
    release = indexed(without(posted, lose))
    judged = judge(release.files, release.files_announced)
    assert judged.state is state, judged
    assert judged.segments_announced >= judged.segments
    if judged.state is State.WHOLE:  # whole: only recovery data was lost, if anything
        lost = [f.subject for f in posted.files for s in f.segments if lose(f, s)]
        assert all('.par2"' in subject.lower() for subject in lost)


def test_what_was_seen_against_what_was_announced(corpus_dir: Path) -> None:
    # The Queen.Road.Hidden of issue 26: 1 of 5 files seen... here, Sonarr's trimmed
    # KILLERS post: 4 of 46 files, their 71 articles of 785 announced (the unseen
    # files as big as the seen ones on average).
    release = indexed(load(corpus_dir, SONARR))
    judged = judge(release.files, release.files_announced)
    assert (judged.files, judged.files_announced) == (4, 46)
    assert judged.segments == 71
    assert judged.segments_announced == 71 + 42 * (71 // 4)


def _file(name: str, index: int, total: int, seen: list[int], size: int) -> CatalogFile:
    return CatalogFile(
        name, f'"{name}" yEnc (1/{total})', index, total, 0,
        [(k, f"{name}.{k}@x", size) for k in seen],
    )  # fmt: skip


def test_the_margin_is_where_repairable_ends() -> None:
    # par2cmdline's ladder for 12 blocks of 1 MB, each volume's articles 500 kB: 1 + 2 + 4
    # + 5 blocks. One article lost damages ceil(0.5) + 1 = 2 blocks; n apart, 2n.
    def release(lost: int) -> list[CatalogFile]:
        rar = _file("a.rar", 1, 40, [k for k in range(1, 41) if k % 4 or k // 4 > lost], 500_000)
        ladder = [("a.vol00+01.par2", 1), ("a.vol01+02.par2", 2), ("a.vol03+04.par2", 4),
                  ("a.vol07+05.par2", 5)]  # fmt: skip
        return [rar, *(
            _file(name, i, 2 * blocks, list(range(1, 2 * blocks + 1)), 500_000)
            for i, (name, blocks) in enumerate(ladder, 2)
        )]  # fmt: skip

    recovery = 12
    fits = int(recovery / REPAIR_MARGIN) // 2  # articles lost, apart, that still fit
    assert judge(release(fits), 5).state is State.REPAIRABLE
    assert judge(release(fits), 5).damaged_blocks == 2 * fits
    assert judge(release(fits + 1), 5).state is State.BROKEN
    assert judge(release(0), 5).state is State.WHOLE


def test_a_run_of_lost_articles_is_one_stretch() -> None:
    # 10 articles in a row of 500 kB in 1 MB blocks: 5 blocks, and one where the run
    # straddles a boundary; apart they would be 20.
    rar = _file("a.rar", 1, 40, [k for k in range(1, 41) if not 11 <= k <= 20], 500_000)
    volume_file = _file("a.vol00+20.par2", 2, 40, list(range(1, 41)), 500_000)
    judged = judge([rar, volume_file], 2)
    assert (judged.damaged_blocks, judged.recovery_blocks) == (6, 20)
    # The block from the volume's articles: less their headers and yEnc's overhead.
    assert 0.95 * 1_000_000 < judged.block_bytes < 1_000_000
    assert judged.state is State.REPAIRABLE


def test_a_volume_s_own_lost_articles_are_blocks_it_no_longer_has() -> None:
    rar = _file("a.rar", 1, 40, [k for k in range(1, 41) if k != 7], 500_000)
    # 4 blocks in 8 articles, 6 of them lost in a row: 3 blocks + 1 gone, 0 left... of 4.
    volume_file = _file("a.vol00+04.par2", 2, 8, [1, 8], 500_000)
    judged = judge([rar, volume_file], 2)
    assert judged.recovery_blocks == 0
    assert judged.state is State.BROKEN
    # A probe read the index: the slice size is known, not guessed from the volume.
    assert judge([rar, volume_file], 2, slice_bytes=250_000).block_bytes == 250_000


@pytest.mark.parametrize(
    ("options", "blocks"),
    [
        (["-c15", "-n4"], 15),  # the ladder: vol00+1 ... vol07+8
        (["-c31", "-n5"], 31),  # vol00+01 ... vol15+16
        (["-c200", "-n3"], 200),  # vol000+...: three digits
        (["-c40", "-n4", "-u"], 40),  # uniform: vol00+10, vol10+10, ...
    ],
)
def test_par2cmdline_names_its_volumes_as_read_here(
    tmp_path: Path, options: list[str], blocks: int
) -> None:
    """The volumes par2cmdline writes: their names' blocks are the set's recovery blocks,
    each volume's bytes over its blocks its block size (and the headers of its packets)."""
    par2 = require_tool("par2", "par2")
    (tmp_path / "a.bin").write_bytes(random.Random(5).randbytes(400_000))
    run_tool([par2, "create", "-q", "-q", "-s4096", *options, "set.par2", "a.bin"], tmp_path)
    volumes = {p.name: volume(p.name) for p in tmp_path.glob("set.vol*.par2")}
    assert None not in volumes.values(), volumes
    found = sorted((v for v in volumes.values() if v is not None), key=lambda v: v.first)
    assert sum(v.blocks for v in found) == blocks
    assert [v.first for v in found] == [0, *(v.end for v in found[:-1])]  # no gap, no overlap
    assert {v.base for v in found} == {"set"}
    for name, v in volumes.items():
        assert v is not None
        size = (tmp_path / name).stat().st_size
        assert 4096 <= size / v.blocks <= 4096 + 68 + 4096  # a slice, its head, critical copies


# -- par2cmdline as the judge of the judge --------------------------------------------

PART = 102_400  # raw bytes per article (yEnc part), as posters set it
RARS_POSTED = 4  # show.part1.rar ... part4.rar, 5 articles each
FILE_BYTES = 5 * PART


@attrs.frozen
class Posted:
    """A real upload: its files on disk, its par2 set by par2cmdline, its overview lines
    by (file, article number)."""

    folder: Path
    names: tuple[str, ...]
    lines: dict[tuple[str, int], str]


def post(folder: Path, par2_options: list[str]) -> Posted:
    """Four rar volumes and a par2cmdline set over them, yEnc-encoded in PART-byte parts
    (Nyuu's subjects), as the overview lines a server would give for them."""
    par2 = require_tool("par2", "par2")
    rng = random.Random(11)
    rars = [f"show.part{n}.rar" for n in range(1, RARS_POSTED + 1)]
    for name in rars:
        (folder / name).write_bytes(rng.randbytes(FILE_BYTES))
    run_tool([par2, "create", "-q", "-q", *par2_options, "show.par2", *rars], folder)
    names = (*rars, *sorted(p.name for p in folder.glob("*.par2")))
    lines: dict[tuple[str, int], str] = {}
    article = 5_000
    for i, name in enumerate(names, 1):
        bodies = yenc_articles((folder / name).read_bytes(), name.encode(), PART)
        for k, body in enumerate(bodies, 1):
            subject = f'[{i:02}/{len(names):02}] - "{name}" yEnc ({k}/{len(bodies)})'
            posted = PostedArticle(f"<{i}.{k}@nyuu>", subject, "poster <p@x>", DATE, body)
            size, body_lines = len(posted.wire(GROUP)), body.count(b"\n")
            lines[(name, k)] = (
                f"{article}\t{subject}\t{posted.poster}\t{DATE}\t{posted.message_id}\t\t"
                f"{size}\t{body_lines}\tXref: news.example.com {GROUP}:{article}"
            )
            article += 1
    return Posted(folder, names, lines)


DATE = "Tue, 01 Jul 2025 10:00:00 +0000"


def judged_without(posted: Posted, lost: set[tuple[str, int]]) -> State:
    kept = [line for at, line in posted.lines.items() if at not in lost]
    first = int(kept[0].split("\t", 1)[0])
    indexer = RangeIndexer(group=GROUP, first=first)
    indexer.add_text("\n".join(kept), int(kept[-1].split("\t", 1)[0]) + 1)
    merger = ReleaseMerger()
    merger.add_all(indexer.finish().releases)
    [release] = merger.releases()
    return judge(release.files, release.files_announced).state


def repairs(posted: Posted, lost: set[tuple[str, int]], folder: Path) -> bool:
    """Whether par2cmdline repairs the files a downloader writes without the lost
    articles (zeros where they were, as SABnzbd and NZBGet write them)."""
    for name in posted.names:
        data = bytearray((posted.folder / name).read_bytes())
        for gone, k in lost:
            if gone == name:
                data[(k - 1) * PART : k * PART] = bytes(len(data[(k - 1) * PART : k * PART]))
        (folder / name).write_bytes(bytes(data))
    done = subprocess.run(
        ["par2", "repair", "-q", "-q", "show.par2"], cwd=folder, capture_output=True, check=False
    )
    return done.returncode == 0


def rar(n: int, *articles: int) -> set[tuple[str, int]]:
    return {(f"show.part{n}.rar", k) for k in articles}


@pytest.mark.parametrize(
    ("par2_options", "lost", "expected"),
    [
        # A block an article (-s = PART), 25% recovery: 20 source blocks, 5 recovery.
        (["-s102400", "-r25", "-n3"], set(), State.WHOLE),
        (["-s102400", "-r25", "-n3"], rar(2, 3), State.REPAIRABLE),
        (["-s102400", "-r25", "-n3"], rar(1, 2) | rar(4, 4), State.REPAIRABLE),
        (["-s102400", "-r25", "-n3"], rar(1, 1, 3) | rar(3, 2) | rar(4, 5), State.BROKEN),
        (["-s102400", "-r25", "-n3"], rar(3, 1, 2, 3, 4, 5) | rar(1, 1), State.BROKEN),
        # par2cmdline's own choice: 2,000 blocks of ~1 kB, 10% recovery. Its volumes are
        # mostly copies of the critical packets (40 kB each): a block size taken as a
        # volume's bytes over its blocks would be 3x too big, and 3 lost articles (300
        # blocks of 200) would look repairable.
        (["-r10", "-n2"], rar(2, 3), State.REPAIRABLE),
        (["-r10", "-n2"], rar(1, 2) | rar(2, 4) | rar(4, 1), State.BROKEN),
        (["-r10", "-n2"], rar(1, 1, 2, 3, 4, 5), State.BROKEN),
        # Recovery lost with the data: a volume's lost articles are blocks it lacks.
        (["-s102400", "-r25", "-n3"], rar(2, 3) | {("show.vol3+2.par2", 1)}, State.REPAIRABLE),
        (["-s102400", "-r25", "-n3"], rar(2, 3, 5) | {("show.vol3+2.par2", 1)}, State.BROKEN),
    ],
)  # fmt: skip
def test_judged_repairable_is_what_par2cmdline_repairs(
    tmp_path: Path, par2_options: list[str], lost: set[tuple[str, int]], expected: State
) -> None:
    """A real par2cmdline set, real yEnc articles; what is lost is zeroed in the files and
    par2 repair is asked: repairable must mean it repairs, and what it cannot repair must
    be broken (the margin may call broken what it could just repair)."""
    folder = tmp_path / "posted"
    folder.mkdir()
    posted = post(folder, par2_options)
    assert set(lost) <= set(posted.lines), sorted(posted.lines)
    state = judged_without(posted, lost)
    assert state is expected
    downloaded = tmp_path / "downloaded"
    downloaded.mkdir()
    repaired = repairs(posted, lost, downloaded)
    if state is not State.BROKEN:
        assert repaired
    if not repaired:
        assert state is State.BROKEN


def test_a_probe_s_slice_size_is_the_release_s_block_size(corpus_dir: Path) -> None:
    """The catalog's row takes the slice size a probe read in the release's own par2
    index (core/catalog.entry), over the volumes' estimate; a finding of a segment that
    is not the release's is another upload's. The slice here is made up, 10x EVOLVE's
    (~800 kB), so that it changes the verdict on eight lost rar volumes."""
    release = indexed(without(load(corpus_dir, EVOLVE), files(*RARS[3:11])))
    changed = dict.fromkeys(release.sources, datetime.now(UTC))
    [index] = [f for f in release.files if f.name.lower().endswith("evolve.par2")]
    probed = index.segments[0][1]
    assert entry(Shown(release), changed).state == "broken"
    read = Finding(release.name, slice_bytes=8_000_000, message_id=probed)
    assert entry(Shown(release), changed, {release.key: [read]}).state == "repairable"
    other = attrs.evolve(read, message_id="not-this-release@x")
    assert entry(Shown(release), changed, {release.key: [other]}).state == "broken"
