"""What probes found, applied to merged releases (core/renames.py, pure).

Releases are built as the merge builds them, from chunks of posting-tool
style uploads: an obfuscated upload whose par2 lists the real names, the
same upload's volumes split off by their subjects, a rar-wrapped flood.
"""

from __future__ import annotations

import attrs

from usenet_indexer.core.merge import CatalogFile, CatalogRelease
from usenet_indexer.core.renames import (
    EXECUTABLE_INSIDE,
    Finding,
    apply,
    archive_probe,
    more_probe,
)

POSTER = "kLm3QzR8@ngPost.com"
REAL = "Fallout.S02E06.1080p.WEB.H264-Kitsune"


def file(name: str, segments: int, size: int = 700_000, index: int | None = None) -> CatalogFile:
    per = size // segments
    return CatalogFile(
        name=name,
        subject=f'[{index or 1}/8] - "{name}" yEnc ({1}/{segments})',
        index=index,
        total_segments=segments,
        posted=1_700_000_000,
        segments=[(k, f"{name}.{k}@ngPost", per) for k in range(1, segments + 1)],
    )


def release(key: bytes, name: str, *files: CatalogFile, poster: str = POSTER) -> CatalogRelease:
    return CatalogRelease(
        key=key,
        name=name,
        poster=poster,
        groups=("alt.binaries.test",),
        posted=1_700_000_000,
        files_announced=8,
        complete=1.0,
        bytes=sum(s for f in files for _, _, s in f.segments),
        probe_candidate=True,
        dropped=None,
        chunks=1,
        files=files,
        sources=(key,),
    )


def test_a_renamed_release_takes_the_real_name_and_its_files_theirs_by_size() -> None:
    mkv = file("L3iMP7Tg4XaObh32FqTzvP6durgw7wZi.mkv", 20, size=10_300_000, index=1)
    # An article of a 2,000-byte nfo: its text, a few hundred bytes of headers.
    nfo = file("a8Hs2kQ0pLmZ7xYt.nfo", 1, size=2_600, index=2)
    par2 = file("L3iMP7Tg4XaObh32FqTzvP6durgw7wZi.par2", 1, size=40_000, index=3)
    obfuscated = release(b"k" * 16, "L3iMP7Tg4XaObh32FqTzvP6durgw7wZi", mkv, nfo, par2)
    found = Finding(
        name=REAL,
        files=(f"{REAL}.mkv", f"{REAL}.nfo"),
        sizes=(10_000_000, 2_000),
    )
    (shown,) = apply([obfuscated], {b"k" * 16: [found]})
    assert shown.release.name == REAL
    names = [f.name for f in shown.release.files]
    assert names == [f"{REAL}.mkv", f"{REAL}.nfo", "L3iMP7Tg4XaObh32FqTzvP6durgw7wZi.par2"]
    # The obfuscated names stay findable.
    assert "L3iMP7Tg4XaObh32FqTzvP6durgw7wZi" in shown.aliases
    assert "L3iMP7Tg4XaObh32FqTzvP6durgw7wZi.mkv" in shown.aliases


def test_a_file_whose_size_fits_no_par2_length_keeps_its_name() -> None:
    odd = file("qWeRtYuIoP1234567890.bin", 3, size=50_000)
    (shown,) = apply(
        [release(b"k" * 16, "qWeRtYuIoP1234567890", odd)],
        {b"k" * 16: [Finding(REAL, (f"{REAL}.mkv",), (10_000_000,))]},
    )
    assert [f.name for f in shown.release.files] == ["qWeRtYuIoP1234567890.bin"]
    assert shown.release.name == REAL


def test_releases_the_par2_proves_one_upload_are_merged_into_it() -> None:
    par2 = release(b"p" * 16, "rename.with.this", file("rename.with.this.par2", 1, 30_000))
    volumes = release(
        b"v" * 16, f"{REAL}.part01", file(f"{REAL}.part01.rar", 10), file(f"{REAL}.part02.rar", 10)
    )
    other = release(b"o" * 16, "Some.Other.Show.S01E01", file("Some.Other.Show.S01E01.mkv", 10))
    elsewhere = attrs.evolve(volumes, key=b"e" * 16, poster="someone@else", sources=(b"e" * 16,))
    found = Finding(REAL, (f"{REAL}.part01.rar", f"{REAL}.part02.rar"), (1, 1))
    shown = {
        s.release.key: s for s in apply([par2, volumes, other, elsewhere], {b"p" * 16: [found]})
    }
    assert set(shown) == {b"p" * 16, b"o" * 16, b"e" * 16}
    joined = shown[b"p" * 16].release
    assert joined.name == REAL
    assert len(joined.files) == 3
    assert joined.sources == (b"p" * 16, b"v" * 16)
    assert joined.bytes == par2.bytes + volumes.bytes
    # Another poster's upload of the same names is another upload.
    assert shown[b"e" * 16].release.name == volumes.name


def test_an_archive_of_executables_only_is_dropped() -> None:
    flood = release(b"f" * 16, "Movie.2024.1080p.BluRay.x264", file("Movie.2024.1080p.rar", 5))
    (shown,) = apply([flood], {b"f" * 16: [Finding(None, ("setup.exe",), executable=True)]})
    assert shown.release.dropped == EXECUTABLE_INSIDE


def test_no_findings_change_nothing() -> None:
    plain = release(b"x" * 16, REAL, file(f"{REAL}.mkv", 5))
    assert [s.release for s in apply([plain], {})] == [plain]


def test_a_small_archive_upload_without_par2_gets_its_first_volume_probed() -> None:
    flood = attrs.evolve(
        release(b"f" * 16, "Movie.2024.1080p.BluRay.x264", file("Movie.2024.1080p.part1.rar", 4)),
        probe_candidate=False,
    )
    assert archive_probe(flood) == (
        "Movie.2024.1080p.part1.rar.1@ngPost",
        "Movie.2024.1080p.part1.rar",
    )
    # Many named volumes: a real upload, not a flood; a candidate already: asked for.
    big = attrs.evolve(
        release(b"b" * 16, REAL, *(file(f"{REAL}.r{n:02}", 4) for n in range(10))),
        probe_candidate=False,
    )
    assert archive_probe(big) is None
    assert archive_probe(attrs.evolve(flood, probe_candidate=True)) is None


def test_an_obfuscated_upload_of_many_volumes_gets_its_first_volume_probed() -> None:
    # Many volumes say "a real upload" only under a real name: a random name's are
    # looked through whatever their number (the build stops early only for the former).
    name = "L3iMP7Tg4XaObh32FqTzvP6durgw7wZi"
    volumes = [file(f"{name}.part{n:02}.rar", 4) for n in range(1, 11)]
    upload = attrs.evolve(release(b"o" * 16, name, *volumes), probe_candidate=False)
    assert archive_probe(upload) == (f"{name}.part01.rar.1@ngPost", f"{name}.part01.rar")


def test_a_par2_finding_wins_over_an_nfo_finding_of_the_same_upload() -> None:
    mkv = file("L3iMP7Tg4XaObh32FqTzvP6durgw7wZi.mkv", 20, size=10_300_000, index=1)
    nfo_key, par2_key = b"n" * 16, b"p" * 16
    upload = attrs.evolve(
        release(nfo_key, "L3iMP7Tg4XaObh32FqTzvP6durgw7wZi", mkv), sources=(nfo_key, par2_key)
    )
    found = {
        nfo_key: [Finding(REAL)],
        par2_key: [Finding(REAL, (f"{REAL}.mkv",), (10_000_000,))],
    }
    (shown,) = apply([upload], found)
    assert [f.name for f in shown.release.files] == [f"{REAL}.mkv"]


def test_a_release_whose_par2_index_was_not_seen_gets_its_smallest_volume_probed() -> None:
    data = file("lTS1AiQsM3AV", 3, size=180_000, index=1)
    big = file("rename.with.this.vol000+128.par2", 6, size=360_000, index=4)
    small = file("rename.with.this.vol128+072.par2", 5, size=300_000, index=5)
    upload = attrs.evolve(
        release(b"u" * 16, "GPcWm0O0xcjm", data, big, small), probe_candidate=False
    )
    # A par2 volume lists the files too (par2cmdline writes them among its first packets).
    assert more_probe(upload, set(), {}) == (
        b"u" * 16,
        "rename.with.this.vol128+072.par2.1@ngPost",
        "rename.with.this.vol128+072.par2",
    )
    # The index, when it was seen, comes first.
    index = file("rename.with.this.par2", 1, size=40_000, index=3)
    with_index = attrs.evolve(upload, files=(data, index, big, small))
    assert more_probe(with_index, set(), {}) == (
        b"u" * 16,
        "rename.with.this.par2.1@ngPost",
        "rename.with.this.par2",
    )
