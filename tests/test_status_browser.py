"""The status page in a real browser: headless Chromium logs in and loads the page.

Chromium is driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: JSON messages ended by a NUL, commands on its
fd 3, answers and events on its fd 4): it opens the page and gets the login
form (401), types an operator's key into it and submits it, as a person
would, and follows the redirect to the page with its session cookie. The
test checks what a person would see in the DOM the browser built (the
group's name, a progress bar, a release row) and keeps a screenshot as a
test artifact: test-artifacts/status-page.png in the checkout. Chromium is
Debian's (scripts/ensure-chromium installs it); without it the test is
skipped outside CI and fails in CI.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from test_newznab import store_generated
from test_status_page import read

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.server import serve
from usenet_indexer.coordinator.stores import Stores

DEADLINE_SECONDS = 120  # a cold Chromium start on a busy machine
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI (scripts/ensure-chromium installs it)")
        pytest.skip("chromium is not installed (scripts/ensure-chromium)")
    return found


@attrs.frozen
class Served:
    url: str
    key: str  # an operator's API key


@pytest.fixture
async def served(settings: Settings, stores: Stores) -> AsyncIterator[Served]:
    await trio.to_thread.run_sync(store_generated, stores, 20_000, 5)
    key = stores.users.create("operator", operator=True)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(partial(serve, settings, stores))
        yield Served(f"http://{host}:{port}/", key)
        nursery.cancel_scope.cancel()


@attrs.define(eq=False)
class DevTools:
    """One headless Chromium driven over the DevTools protocol on a pipe."""

    to_browser: trio.lowlevel.FdStream
    from_browser: trio.lowlevel.FdStream
    session: str = ""
    _next_id: int = 0
    _buffer: bytes = b""
    events: list[dict[str, Any]] = attrs.field(factory=list)

    async def _message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            data = await self.from_browser.receive_some(1 << 16)
            if not data:
                raise AssertionError("chromium closed its DevTools pipe")
            self._buffer += data
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            command["sessionId"] = self.session
        await self.to_browser.send_all(json.dumps(command).encode() + b"\0")
        while True:
            message = await self._message()
            if message.get("id") == self._next_id:
                assert "error" not in message, (method, message["error"])
                result: dict[str, Any] = message["result"]
                return result
            self.events.append(message)

    async def loaded(self) -> None:
        """Waits for the next page load (Page.loadEventFired)."""
        while True:
            found = [e for e in self.events if e.get("method") == "Page.loadEventFired"]
            if found:
                self.events.clear()
                return
            self.events.append(await self._message())

    async def html(self) -> str:
        result = await self.call(
            "Runtime.evaluate", expression="document.documentElement.outerHTML"
        )
        html: str = result["result"]["value"]
        return html


@asynccontextmanager
async def devtools(browser: str, profile: Path) -> AsyncIterator[DevTools]:
    commands_read, commands_write = os.pipe()
    answers_read, answers_write = os.pipe()
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", f"--user-data-dir={profile}", "--window-size=1280,1600",
        "--remote-debugging-pipe",
    ]  # fmt: skip
    # Chromium reads fd 3 and writes fd 4: the pipes' ends are put there by bash
    # (dash takes no fd number over 9).
    wrapper = ["bash", "-c", f'exec "$@" 3<&{commands_read} 4>&{answers_write}', "bash", *command]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            partial(
                trio.run_process,
                wrapper,
                pass_fds=(commands_read, answers_write),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        )
        os.close(commands_read)
        os.close(answers_write)
        tools = DevTools(
            trio.lowlevel.FdStream(commands_write), trio.lowlevel.FdStream(answers_read)
        )
        try:
            target = await tools.call("Target.createTarget", url="about:blank")
            attached = await tools.call(
                "Target.attachToTarget", targetId=target["targetId"], flatten=True
            )
            tools.session = attached["sessionId"]
            await tools.call("Page.enable")
            yield tools
        finally:
            process.terminate()
            await tools.to_browser.aclose()
            await tools.from_browser.aclose()


@pytest.mark.trio
async def test_chromium_logs_in_and_shows_groups_progress_and_releases(
    served: Served, tmp_path: Path
) -> None:
    browser = chromium()
    with trio.fail_after(DEADLINE_SECONDS):
        async with devtools(browser, tmp_path / "profile") as tools:
            await tools.call("Page.navigate", url=served.url)
            await tools.loaded()
            form = read(await tools.html())
            assert "Log in" in " ".join(form.text)
            assert form.release_rows == 0  # nothing of the catalog before the login
            await tools.call(
                "Runtime.evaluate",
                expression=f"document.getElementById('apikey').value = {json.dumps(served.key)};"
                "document.getElementById('log-in').click();",
            )
            await tools.loaded()  # the 303 followed to the page, with the cookie
            page = read(await tools.html())
            assert "alt.binaries.test" in " ".join(page.text)
            assert page.bars
            assert page.release_rows > 0
            shot = await tools.call("Page.captureScreenshot", format="png")
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "status-page.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
