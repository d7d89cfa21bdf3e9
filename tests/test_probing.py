"""What a probe's body says (core/probing.py, pure), on real bodies.

The bodies are those uploads post (usenet_indexer/testing/obfuscated.py):
a real par2 set made by par2cmdline, an NFO, a zip flood, yEnc-encoded.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from usenet_indexer.core.completion import volume
from usenet_indexer.core.probing import Verdict, examine
from usenet_indexer.testing.newsd import PostedArticle
from usenet_indexer.testing.obfuscated import Built, ToolMissing, build
from usenet_indexer.testing.yenc import yenc_article

NOW = 1_796_000_000


def built(tmp_path: Path, kind: str) -> Built:
    try:
        return build(tmp_path, kind, 0, seed=1, posted=NOW)
    except ToolMissing as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))


def first_of(upload: Built, part: str) -> tuple[bytes, str]:
    article: PostedArticle = next(
        a for a in upload.articles if part in a.subject and "(1/" in a.subject
    )
    return article.body, article.subject.split('"')[1]


def test_a_par2_index_names_the_release_and_every_file_with_its_size(tmp_path: Path) -> None:
    upload = built(tmp_path, "newsup")
    body, name = first_of(upload, '"rename.with.this.par2"')
    found = examine(body, name, "w6SiMWURFfLg")
    assert found.verdict is Verdict.RENAMED
    assert found.name == upload.real_name
    assert set(found.files) == set(upload.data_files)
    sizes = dict(zip(found.files, found.sizes, strict=True))
    assert (
        sizes[f"{upload.real_name}.nfo"]
        == (tmp_path / "newsup-0" / f"{upload.real_name}.nfo").stat().st_size
    )


def test_a_release_already_so_named_is_said_so(tmp_path: Path) -> None:
    upload = built(tmp_path, "nyuu")
    body, name = first_of(upload, f'"{upload.real_name}.par2"')
    assert examine(body, name, upload.real_name).verdict is Verdict.ALREADY_NAMED


def test_a_par2_index_tells_its_slice_size(tmp_path: Path) -> None:
    """par2cmdline picks the size (-r10 -n2). A volume of c blocks holds c recovery
    packets (a 68-byte head and a slice each) and as many copies of the critical packets
    as c has binary digits, each about the index file's size (which holds one copy and
    the creator's packet): what core/completion.py's estimate of the size takes off."""
    upload = built(tmp_path, "nyuu")
    body, name = first_of(upload, f'"{upload.real_name}.par2"')
    slice_bytes = examine(body, name, upload.real_name).slice_bytes
    assert slice_bytes is not None
    assert slice_bytes % 4 == 0
    index = (tmp_path / "nyuu-0" / f"{upload.real_name}.par2").stat().st_size
    volumes = list((tmp_path / "nyuu-0").glob("*.vol*.par2"))
    assert volumes
    for path in volumes:
        found = volume(path.name)
        assert found is not None
        copies = found.blocks.bit_length()
        rest = path.stat().st_size - found.blocks * (slice_bytes + 68) - copies * index
        # Each copy but one less a creator's packet (~100 bytes) than the index.
        assert -copies * 256 <= rest <= 0, (path.name, rest)


def test_an_nfo_names_the_release(tmp_path: Path) -> None:
    upload = built(tmp_path, "ngpost")
    body, name = first_of(upload, '.nfo"')
    found = examine(body, name, "THNcP9UG1xGGRLTzL")
    assert (found.verdict, found.name) == (Verdict.RENAMED, upload.real_name)


def test_a_zip_of_an_executable_only_is_a_flood(tmp_path: Path) -> None:
    upload = built(tmp_path, "zip_flood")
    body, name = first_of(upload, '.zip"')
    found = examine(body, name, upload.real_name)
    assert found.verdict is Verdict.EXECUTABLE
    assert found.files == ("setup.exe",)


def test_a_plain_yenc_name_renames_only_an_obfuscated_subject() -> None:
    body = yenc_article(b"x" * 5000, b"Real.Movie.2020.1080p.BluRay.x264-GRP.mkv")
    found = examine(body, "a8Hs2kQ0pLmZ7xYtR4.bin", "a8Hs2kQ0pLmZ7xYtR4")
    assert (found.verdict, found.name) == (Verdict.RENAMED, "Real.Movie.2020.1080p.BluRay.x264-GRP")
    # A subject that names its file already, or a yEnc name with no extension: nothing.
    named = examine(body, "Some.Book.epub", "Some.Book")
    assert named.verdict is Verdict.NO_NAMES
    bare = yenc_article(b"x" * 500, b"demo")
    assert examine(bare, "a8Hs2kQ0pLmZ7xYtR4.bin", "x").verdict is Verdict.NO_NAMES


def test_bad_bodies_are_bad_data_never_an_error() -> None:
    good = yenc_article(b"y" * 3000, b"file.bin")
    wrong_crc = yenc_article(b"y" * 3000, b"file.bin", crc=0)
    for body in (b"", b"just text\r\n", good[: len(good) // 2], wrong_crc, b"\x00" * 100):
        assert examine(body, "file.bin", "x").verdict is Verdict.BAD_DATA
