"""The upload builder's damaged uploads: the segments left out, the recovery data asked for.

(What a downloader makes of them, with NZBGet: tests/test_download.py.)
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from probe_tools import require_tool

from usenet_indexer.testing.obfuscated import build

NOW = 1_796_000_000


def _segment(subject: str) -> tuple[str, int]:
    found = re.search(r'"([^"]+)".*\((\d+)/\d+\)$', subject)
    assert found, subject
    return found.group(1), int(found.group(2))


def test_the_chosen_video_segments_are_made_but_not_posted(tmp_path: Path) -> None:
    require_tool("par2", "par2")
    whole = build(tmp_path / "a", "plain", 0, 3, posted=NOW, part_bytes=20_000)
    damaged = build(tmp_path / "b", "plain", 0, 3, posted=NOW, part_bytes=20_000, leave_out=(2, 5))
    video = next(p for p in damaged.originals if p.suffix == ".mkv")
    assert {_segment(a.subject) for a in damaged.left_out} == {(video.name, 2), (video.name, 5)}
    assert len(damaged.articles) == len(whole.articles) - 2
    posted = {_segment(a.subject) for a in damaged.articles}
    assert posted == {_segment(a.subject) for a in whole.articles} - {
        (video.name, 2),
        (video.name, 5),
    }
    # The same files either way: only the posting lost articles.
    assert [p.read_bytes() for p in damaged.originals] == [p.read_bytes() for p in whole.originals]


def test_redundancy_is_the_recovery_data_par2_makes(tmp_path: Path) -> None:
    par2 = require_tool("par2", "par2")
    for percent in (5, 30):
        upload = build(tmp_path / str(percent), "plain", 0, 3, posted=NOW, redundancy=percent)
        (index,) = [p for p in upload.originals if p.suffix == ".par2" and ".vol" not in p.name]
        verified = subprocess.run(
            [par2, "verify", index.name], cwd=index.parent, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
        assert verified.returncode == 0, verified.stdout[-2000:]
        found = re.search(r"There are a total of (\d+) data blocks", verified.stdout)
        assert found, verified.stdout[-2000:]
        recovery = sum(_recovery_blocks(p.name) for p in upload.originals if ".vol" in p.name)
        assert round(100 * recovery / int(found.group(1))) == percent


def _recovery_blocks(volume: str) -> int:
    """A volume's name says how many recovery blocks it holds (name.vol000+128.par2)."""
    found = re.search(r"\.vol\d+\+(\d+)\.par2$", volume)
    assert found, volume
    return int(found.group(1))


def test_leave_out_names_segments_the_video_has(tmp_path: Path) -> None:
    require_tool("par2", "par2")
    with pytest.raises(ValueError, match="segments 1-"):
        build(tmp_path, "plain", 0, 3, posted=NOW, leave_out=(99,))
