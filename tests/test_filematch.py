"""A renamed release's files matched to its par2's list without doubt (core/filematch.py).

First as tables: posted files (their articles' bytes, as overview gives
them) against par2 lengths, built the way yEnc and article headers grow a
file (each article: the data encoded, 2-3% more, and some hundred bytes of
headers). Then on real uploads (usenet_indexer/testing/obfuscated.py:
par2cmdline's sets over real files, yEnc-encoded into articles in the
obfuscation styles of Nyuu, NewsUP and ngPost) indexed by the indexer,
probed by core/probing.py and renamed by core/renames.py: a file takes a
real name only when it is its own, and the NZB's subjects say it.
"""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pytest

from usenet_indexer.core.catalog import more_probes
from usenet_indexer.core.filematch import Posted, real_names
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.core.probing import Verdict, examine
from usenet_indexer.core.renames import Finding, apply, renamed_subject
from usenet_indexer.testing.obfuscated import Built, ToolMissing, build

GROUP = "alt.binaries.uidx.names"
PART = 716_800  # Nyuu's default article size
HEADERS = 620  # an article's headers and yEnc lines here


def posted(name: str, length: int, *, growth: float = 1.031, seen: int | None = None) -> Posted:
    """A file of `length` bytes as overview shows it: articles of PART bytes, each
    encoded (`growth`) with its headers; `seen`: only the first so many articles."""
    parts = [min(PART, length - k * PART) for k in range(max(1, math.ceil(length / PART)))]
    segments = [
        (k, f"{name}.{k}@nyuu", round(size * growth) + HEADERS) for k, size in enumerate(parts, 1)
    ]
    return Posted.of(name, len(parts), segments[:seen] if seen is not None else segments)


def named(files: list[Posted], listed: dict[str, int], *, whole: bool = True) -> dict[int, str]:
    """What `real_names` names; `whole`: every file of the upload was seen (the default)."""
    return real_names(files, listed, whole=whole)


REAL = "Andor.S02E01.1080p.WEB.H264-FLUX"


def test_files_of_sizes_apart_take_their_named() -> None:
    files = [
        posted("fA3kQ9zLm2XwT7bR.mkv", 1_450_000_000),
        posted("pQ7sT2vX9kL3mN8c.nfo", 4_100),
        posted("fA3kQ9zLm2XwT7bR.par2", 40_000),
    ]
    listed = {f"{REAL}.mkv": 1_450_000_000, f"{REAL}.nfo": 4_100}
    assert named(files, listed) == {0: f"{REAL}.mkv", 1: f"{REAL}.nfo"}


def test_volumes_of_one_size_keep_their_names_and_the_shorter_last_one_is_named() -> None:
    volume = 50_000_000
    files = [posted(f"k{n}Zp3Qx8Lm2Tw7Rb9Vc.rar", volume) for n in range(4)]
    files.append(posted("k9Zp3Qx8Lm2Tw7Rb9Vc.rar", 21_000_000))
    listed = {f"{REAL}.part{n + 1}.rar": volume for n in range(4)}
    listed[f"{REAL}.part5.rar"] = 21_000_000
    assert named(files, listed) == {4: f"{REAL}.part5.rar"}


def test_files_of_close_sizes_keep_their_names() -> None:
    # Two episodes 2% apart: each fits the other's length.
    files = [
        posted("x1Qz8Lm2Tw7Rb9Vc.mkv", 1_200_000_000),
        posted("y2Qz8Lm2Tw7Rb9Vc.mkv", 1_224_000_000),
    ]
    listed = {"Show.S01E01.mkv": 1_200_000_000, "Show.S01E02.mkv": 1_224_000_000, "x.nfo": 900}
    assert named(files, listed) == {}


def test_the_uploads_own_encoding_tells_close_sizes_apart() -> None:
    # The same two episodes beside a file whose size no other has: its match says how
    # much this upload's yEnc grew the data, and at that growth each episode fits its own.
    files = [
        posted("x1Qz8Lm2Tw7Rb9Vc.mkv", 1_200_000_000),
        posted("y2Qz8Lm2Tw7Rb9Vc.mkv", 1_224_000_000),
        posted("z3Qz8Lm2Tw7Rb9Vc.mkv", 600_000_000),
    ]
    listed = {
        "Show.S01E01.mkv": 1_200_000_000,
        "Show.S01E02.mkv": 1_224_000_000,
        "Show.S01E03.Extras.mkv": 600_000_000,
    }
    assert named(files, listed) == {
        0: "Show.S01E01.mkv",
        1: "Show.S01E02.mkv",
        2: "Show.S01E03.Extras.mkv",
    }


def test_files_of_another_growth_than_the_uploads_own_keep_their_names() -> None:
    # The episodes were encoded with longer lines (less growth) than the extras, and a
    # sample the par2 does not protect is posted beside them: the episodes fit both
    # lengths, or none at the extras' growth: they keep their names.
    files = [
        posted("x1Qz8Lm2Tw7Rb9Vc.mkv", 1_200_000_000, growth=1.016),
        posted("y2Qz8Lm2Tw7Rb9Vc.mkv", 1_224_000_000, growth=1.016),
        posted("z3Qz8Lm2Tw7Rb9Vc.mkv", 600_000_000, growth=1.047),
        posted("s4Qz8Lm2Tw7Rb9Vc.mkv", 50_000_000),
    ]
    listed = {
        "Show.S01E01.mkv": 1_200_000_000,
        "Show.S01E02.mkv": 1_224_000_000,
        "Show.S01E03.Extras.mkv": 600_000_000,
    }
    assert named(files, listed) == {2: "Show.S01E03.Extras.mkv"}


def test_an_extension_kept_by_the_tool_must_be_the_real_one() -> None:
    # An nfo and an sfv of nearly one size: their extensions tell them apart.
    files = [posted("a1Qz8Lm2Tw7Rb9Vc.nfo", 3_000), posted("b2Qz8Lm2Tw7Rb9Vc.sfv", 3_100)]
    listed = {f"{REAL}.nfo": 3_000, f"{REAL}.sfv": 3_100}
    assert named(files, listed) == {0: f"{REAL}.nfo", 1: f"{REAL}.sfv"}
    # A posted extension no real name has: no match.
    assert named([posted("a1Qz8Lm2Tw7Rb9Vc.bin", 3_000)], {f"{REAL}.nfo": 3_000}) == {}


def test_as_many_files_as_listed_are_paired_one_to_one() -> None:
    # NewsUP drops the extensions: a 3,000-byte nfo and a 1,200-byte sfv both fit the
    # nfo's span, only the sfv fits the sfv's; as many files as the par2 lists, so
    # the sfv is the sfv, and then the nfo the nfo.
    nfo, sfv, video = (
        posted("aQz8Lm2Tw7Rb", 3_000),
        posted("bQz8Lm2Tw7Rb", 1_200),
        posted("cQz8Lm2Tw7Rb", 300_000_000),
    )
    listed = {f"{REAL}.nfo": 3_000, f"{REAL}.sfv": 1_200, f"{REAL}.mkv": 300_000_000}
    assert named([nfo, sfv, video], listed) == {
        0: f"{REAL}.nfo",
        1: f"{REAL}.sfv",
        2: f"{REAL}.mkv",
    }
    # A file the par2 does not protect beside them: the count says nothing, and
    # the small ones keep their names.
    extra = posted("dQz8Lm2Tw7Rb", 2_500)
    assert named([nfo, sfv, video, extra], listed) == {2: f"{REAL}.mkv"}
    # A file of the upload not seen (the srr the par2 lists) and the unprotected one
    # posted: as many left by chance, so nothing is paired by the count.
    listed[f"{REAL}.srr"] = 2_900
    assert named([nfo, sfv, video, extra], listed, whole=False) == {2: f"{REAL}.mkv"}


def test_par2_files_and_real_names_are_left_as_they_are() -> None:
    files = [posted(f"{REAL}.mkv", 300_000_000), posted("qZ8Lm2Tw7Rb9Vc3x.par2", 300_000)]
    # The par2 file's size fits a listed file's: it is never one of them.
    listed = {f"{REAL}.mkv": 300_000_000, f"{REAL}.sample.mkv": 300_000}
    assert named(files, listed) == {}


def test_a_file_with_articles_missing_is_matched_while_the_rest_is_bounded() -> None:
    # 3 of 10 articles missing: at most 3 full articles more; only the 7 GB file fits.
    files = [posted("x1Qz8Lm2Tw7Rb9Vc.mkv", 7_000_000, seen=7)]
    assert named(files, {"A.mkv": 7_000_000, "B.mkv": 3_000_000}) == {0: "A.mkv"}
    # Only its last (short) article seen: nothing bounds the rest, it fits both.
    tail = Posted.of("x1Qz8Lm2Tw7Rb9Vc.mkv", 10, [(10, "x@y", 90_000)])
    assert named([tail], {"A.mkv": 7_000_000, "B.mkv": 3_000_000}) == {}


def test_unknown_lengths_match_nothing() -> None:
    assert named([posted("x1Qz8Lm2Tw7Rb9Vc.mkv", 7_000)], {"A.mkv": 0}) == {}


def test_no_file_of_a_whole_upload_takes_another_files_name() -> None:
    # Uploads as posting tools make them: volumes of one length, episodes within 10%
    # of each other, files of any size; with and without kept extensions, each tool's
    # line length (yEnc's growth) and headers, some articles missing, sometimes a file
    # the par2 does not protect. Many keep their names; none takes another's.
    rng = random.Random(26)
    named_files = 0
    for case in range(400):
        growth = rng.choice([1.0315, 1.0236, 1.047])
        headers = rng.randint(300, 2_500)
        lengths = _lengths(rng, rng.randint(1, 12))
        exts = [rng.choice(["mkv", "rar", "nfo", "sfv", "001"]) for _ in lengths]
        listed = {
            f"Real.{i}.{ext}": length
            for i, (ext, length) in enumerate(zip(exts, lengths, strict=True))
        }
        keeps = rng.random() < 0.5
        truth: dict[int, str | None] = {}
        files: list[Posted] = []
        for real, length in rng.sample(sorted(listed.items()), len(listed)):
            name = f"r{rng.getrandbits(48):x}" + (f".{real.rsplit('.', 1)[1]}" if keeps else "")
            truth[len(files)] = real
            files.append(_posted_as_tools_do(rng, name, length, growth, headers))
        if rng.random() < 0.3:
            truth[len(files)] = None
            files.append(
                _posted_as_tools_do(rng, "x.mkv", rng.randint(1_000, 3 * 10**8), growth, headers)
            )
        got = named(files, listed)
        assert all(truth[i] == name for i, name in got.items()), (case, got, truth)
        named_files += len(got)
    assert named_files > 400  # (not a test that names nothing)


def _lengths(rng: random.Random, count: int) -> list[int]:
    """A release's file lengths: volumes of one length and a shorter last one, episodes
    within 10% of each other, or any sizes."""
    kind = rng.random()
    if kind < 0.3:
        volume = rng.choice([15_000_000, 50_000_000])
        return [volume] * (count - 1) + [rng.randint(1, volume)]
    if kind < 0.6:
        base = rng.randint(10**7, 3 * 10**8)
        return [round(base * rng.uniform(0.9, 1.1)) for _ in range(count)]
    return [rng.randint(200, 3 * 10**8) for _ in range(count)]


def _posted_as_tools_do(
    rng: random.Random, name: str, length: int, growth: float, headers: int
) -> Posted:
    """A file posted in articles of PART bytes: each grown by yEnc (with the escapes' own
    spread) and its headers; now and then an article or two missing (never the last)."""
    parts = [min(PART, length - k * PART) for k in range(max(1, math.ceil(length / PART)))]
    segments = [
        (k, f"{name}.{k}", round(size * growth * rng.uniform(0.9995, 1.0005)) + headers)
        for k, size in enumerate(parts, 1)
    ]
    for _ in range(rng.choice([0, 0, 0, 1, 2]) if len(segments) > 2 else 0):
        segments.pop(rng.randrange(len(segments) - 1))
    return Posted.of(name, len(parts), segments)


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ('[01/05] - "xl5KF1.mkv" yEnc (1/5)', '[01/05] - "Real.mkv" yEnc (1/5)'),
        ('[1/8] "xl5KF1.mkv" (1/5)', '[1/8] "Real.mkv" (1/5)'),
        # A name that is also part of the text before it: the quoted one changes.
        ('xl5KF1.mkv [2/8] - "xl5KF1.mkv" yEnc (1/5)', 'xl5KF1.mkv [2/8] - "Real.mkv" yEnc (1/5)'),
        ("[PRiVATE]-[xl5KF1.mkv]-[4/12] yEnc (1/3)", "[PRiVATE]-[Real.mkv]-[4/12] yEnc (1/3)"),
        ("no name here (1/3)", "no name here (1/3)"),
    ],
)
def test_a_renamed_files_subject_carries_its_real_name(subject: str, expected: str) -> None:
    assert renamed_subject(subject, "xl5KF1.mkv", "Real.mkv") == expected


# --- real uploads -------------------------------------------------------------------------

HOUR = 3600
# Uploads of each tool's style (par2cmdline takes seconds of CPU for each set).
UPLOADS = 2
NEWLINE = b"\n"


def overview(uploads: list[Built]) -> list[str]:
    """The uploads' overview lines as a server gives them (the bytes: the article whole)."""
    articles = [a for upload in uploads for a in upload.articles]
    return [
        f"{n}\t{a.subject}\t{a.poster}\t{a.date}\t{a.message_id}\t\t{len(a.wire(GROUP))}"
        f"\t{a.body.count(NEWLINE)}\tXref: news {GROUP}:{n}"
        for n, a in enumerate(articles, 1)
    ]


def probed(uploads: list[Built]) -> list[CatalogRelease]:
    """The uploads indexed, their candidates probed (the body examined) and the findings
    applied, with the candidates the catalog build adds (renames.more_probe) probed too,
    until it adds none: the catalog's releases."""
    lines = overview(uploads)
    indexer = RangeIndexer(group=GROUP, first=1)
    indexer.add_text("\n".join(lines), len(lines) + 1)
    batch = indexer.finish()
    merger = ReleaseMerger()
    merger.add_all(batch.releases)
    for candidate in batch.probe_candidates:
        merger.mark_probe(candidate.release_key)
    releases = list(merger.releases())
    bodies = {a.message_id.strip("<>"): a.body for u in uploads for a in u.articles}
    names = {r.key: r.name for r in releases}
    wanted = [(c.release_key, c.message_id, c.file_name) for c in batch.probe_candidates]
    asked: dict[bytes, set[str]] = {}
    found: dict[bytes, list[Finding]] = {}
    while wanted:
        for key, message_id, file_name in wanted:
            asked.setdefault(key, set()).add(message_id)
            seen = examine(bodies[message_id], file_name, names.get(key, ""))
            assert seen.verdict is not Verdict.BAD_DATA, seen.detail
            if seen.verdict in (Verdict.RENAMED, Verdict.ALREADY_NAMED):  # as the store keeps
                found.setdefault(key, []).append(
                    Finding(seen.name, seen.files, seen.sizes, message_id=message_id)
                )
        wanted = more_probes(apply(releases, found), asked, found)
    return [shown.release for shown in apply(releases, found)]


def uploads_of(tmp_path: Path, volumes: int) -> list[Built]:
    start = 1_764_000_000
    try:
        return [
            build(tmp_path, kind, n, seed=3, posted=start + (3 * n + i) * 2 * HOUR, volumes=volumes)
            for i, kind in enumerate(("nyuu", "newsup", "ngpost"))
            for n in range(UPLOADS)
        ]
    except ToolMissing as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))


def by_name(releases: list[CatalogRelease], upload: Built) -> CatalogRelease:
    (release,) = [r for r in releases if r.name == upload.real_name]
    return release


def assert_no_wrong_name(release: CatalogRelease, upload: Built) -> dict[str, str]:
    """Every file named after a real name is that file; (name now -> posted) of each."""
    real_of = dict(upload.posted_as)
    # The name each article was posted under (its subject's quoted name).
    posted = {a.message_id.strip("<>"): a.subject.split('"')[1] for a in upload.articles}
    posted_of = {f.name: posted[f.segments[0][1]] for f in release.files}
    for now, was in posted_of.items():
        assert now in (was, real_of[was]), (upload.kind, was, now)
    return posted_of


def test_real_uploads_files_take_their_real_names_in_the_nzb_too(tmp_path: Path) -> None:
    uploads = uploads_of(tmp_path, volumes=1)
    releases = probed(uploads)
    for upload in uploads:
        release = by_name(releases, upload)
        assert_no_wrong_name(release, upload)
        files = {f.name: f for f in release.files}
        # The video and the nfo, whatever they were posted as (the par2 lists them).
        assert set(upload.data_files) <= files.keys(), upload.kind
        for name in upload.data_files:
            assert f'"{name}"' in files[name].subject, upload.kind


def test_real_uploads_volumes_of_one_length_are_named_by_their_kept_number_only(
    tmp_path: Path,
) -> None:
    uploads = uploads_of(tmp_path, volumes=4)
    releases = probed(uploads)
    for upload in uploads:
        release = by_name(releases, upload)
        posted_of = assert_no_wrong_name(release, upload)
        *equal, last, nfo = upload.data_files
        assert {last, nfo} <= posted_of.keys(), upload.kind
        if upload.kind == "newsup":
            # Random names without extensions, three volumes of one length: the par2
            # cannot say which is which.
            assert not set(equal) & posted_of.keys(), upload.kind
        else:
            # Nyuu and ngPost keep the extension: `.002` is the second volume.
            assert set(equal) <= posted_of.keys(), upload.kind
