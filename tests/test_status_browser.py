"""The status page in a real browser: headless Chromium loads a running coordinator's page.

The test checks what a person would see in the DOM the browser built (the
group's name, a progress bar, a release row) and keeps a screenshot as a
test artifact: test-artifacts/status-page.png in the checkout. Chromium is
Debian's (scripts/ensure-chromium installs it); without it the test is
skipped outside CI and fails in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import pytest
import trio
from test_newznab import store_generated
from test_status_page import read

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI (scripts/ensure-chromium installs it)")
        pytest.skip("chromium is not installed (scripts/ensure-chromium)")
    return found


@pytest.fixture
async def page_url(settings: Settings, stores: Stores) -> AsyncIterator[str]:
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        yield f"http://{host}:{port}/"
        nursery.cancel_scope.cancel()


async def headless(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", f"--user-data-dir={profile}", "--window-size=1280,1600", *args,
    ]  # fmt: skip
    return await trio.run_process(command, capture_stdout=True, capture_stderr=True, check=False)


@pytest.mark.trio
async def test_chromium_shows_groups_progress_and_releases(page_url: str, tmp_path: Path) -> None:
    browser = chromium()
    dom = await headless(browser, tmp_path / "profile", "--dump-dom", page_url)
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    page = read(dom.stdout.decode("utf-8", "replace"))
    assert "alt.binaries.test" in " ".join(page.text)
    assert page.bars
    assert page.release_rows > 0
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "status-page.png"
    shot.unlink(missing_ok=True)
    done = await headless(browser, tmp_path / "profile", f"--screenshot={shot}", page_url)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
