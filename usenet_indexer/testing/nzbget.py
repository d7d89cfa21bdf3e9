"""NZBGet, a real downloader, run by a test: its own config in a folder, its JSON-RPC, its history.

Theory of operation
-------------------
A user's downloader takes the enclosure URL of an indexer's item, fetches
the NZB from it, fetches every article the NZB names from the news server,
decodes them, checks the files against their PAR2 set (repairing them from
the recovery volumes when articles are missing) and moves them to its
destination. `running_nzbget` runs Debian's nzbget (scripts/ensure-nzbget
installs it) that way, as a server in the foreground (`nzbget -c conf -s`)
with everything in one folder: its config, queue, temporary and
destination folders, its log. It talks to the news server the test names
(the private INN2's loopback host and port, no TLS), and it is controlled
through its JSON-RPC API on a loopback port of its own.

A download is added by URL (`append` with the URL as the content: NZBGet
fetches the NZB itself, as it does for an RSS feed or for Sonarr) and is
over when it is in NZBGet's history; `Nzbget.wait` asks the history until
then, under a deadline, and fails at once when the process has exited.
That poll is the only way to learn it from outside NZBGet (it has no
event to wait on short of a post-processing script); it asks a process,
not a clock. One added paused (`add_url(paused=True)`) is fetched and then
waits in the queue, under the job name NZBGet gave it, without a news server:
`Nzbget.queued` asks the queue the same way until every one is an NZB there.

The settings that matter (the rest are NZBGet's defaults): par-check
forced on every download (`ParCheck=force`: a whole one is verified too,
so its `ParStatus` says SUCCESS), repair on, renaming from the par2 set on
(obfuscated file names get their real ones, as a user's NZBGet does), no
unpacking, no duplicate check, nothing deleted after the download (par2
files are kept), no disk-space floor, article and URL retries cut short (a
missing article is missing: INN2 answers 430 at once).
"""

from __future__ import annotations

import base64
import contextlib
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import httpx
import trio

from usenet_indexer.errors import UidxError
from usenet_indexer.testing.processes import free_port

_T = TypeVar("_T")

__all__ = [
    "Download",
    "Nzbget",
    "NzbgetError",
    "NzbgetMissing",
    "running_nzbget",
    "write_config",
]

# Start: NZBGet answers its API within a second here; a slow CI machine gets more.
START_SECONDS = 30.0
# Stop: `shutdown` ends it within a second or two (it saves its queue first).
STOP_SECONDS = 15.0
# How often the history is asked while a download runs: a small download takes
# a few seconds, its par-check less than one.
POLL_SECONDS = 0.2
# Debian's template of the settings (NZBGet logs an ERROR at start without one).
CONFIG_TEMPLATE = Path("/usr/share/nzbget/webui/nzbget.conf")
CONTROL_USER = "uidx"
CONTROL_PASSWORD = "test only"


class NzbgetError(UidxError):
    """NZBGet exited, refused a request, or did not finish in time (with its log's tail)."""


class NzbgetMissing(NzbgetError):
    """nzbget is not installed (scripts/ensure-nzbget installs it)."""


@attrs.frozen
class Download:
    """One download as NZBGet's history tells it (the `history` method's fields).

    Attributes:
        nzb_id: NZBGet's id of it (what `append` returned).
        name: the NZB's name (from the file name the indexer's answer gave).
        status: the total status, e.g. "SUCCESS/ALL", "SUCCESS/PAR", "FAILURE/PAR".
        par_status: the par-check's: "SUCCESS", "FAILURE", "REPAIR_POSSIBLE", "NONE", "MANUAL".
        success_articles: the articles fetched and decoded.
        failed_articles: the articles the server did not have (or that did not decode).
        folder: where its files are (DestDir).
    """

    nzb_id: int
    name: str
    status: str
    par_status: str
    success_articles: int
    failed_articles: int
    folder: Path

    @classmethod
    def from_history(cls, item: Mapping[str, Any]) -> Download:
        """One item of the `history` answer, typed."""
        return cls(
            nzb_id=int(item["NZBID"]),
            name=str(item["Name"]),
            status=str(item["Status"]),
            par_status=str(item["ParStatus"]),
            success_articles=int(item["SuccessArticles"]),
            failed_articles=int(item["FailedArticles"]),
            folder=Path(str(item["DestDir"])),
        )

    def files(self) -> dict[str, bytes]:
        """The files of the download's folder, by name."""
        return {p.name: p.read_bytes() for p in sorted(self.folder.iterdir()) if p.is_file()}


def write_config(folder: Path, *, news_host: str, news_port: int, control_port: int) -> Path:
    """NZBGet's config for a test in `folder` (made if missing); its path.

    Args:
        folder: everything of this NZBGet goes below it.
        news_host, news_port: the news server (plain NNTP, no login).
        control_port: the loopback port of its JSON-RPC API.
    """
    folder.mkdir(parents=True, exist_ok=True)
    options = {
        "MainDir": str(folder),
        "DestDir": str(folder / "dst"),
        "InterDir": str(folder / "inter"),
        "NzbDir": str(folder / "nzb"),
        "QueueDir": str(folder / "queue"),
        "TempDir": str(folder / "tmp"),
        "ScriptDir": str(folder / "scripts"),
        "LockFile": str(folder / "nzbget.lock"),
        "LogFile": str(folder / "nzbget.log"),
        "WebDir": "",
        "ConfigTemplate": str(CONFIG_TEMPLATE) if CONFIG_TEMPLATE.exists() else "",
        "Server1.Active": "yes",
        "Server1.Name": "private-inn2",
        "Server1.Level": "0",
        "Server1.Host": news_host,
        "Server1.Port": str(news_port),
        "Server1.Username": "",
        "Server1.Password": "",
        "Server1.Encryption": "no",
        "Server1.Connections": "4",
        "ControlIP": "127.0.0.1",
        "ControlPort": str(control_port),
        "ControlUsername": CONTROL_USER,
        "ControlPassword": CONTROL_PASSWORD,
        "UpdateCheck": "none",
        "OutputMode": "loggable",
        "WriteLog": "append",
        "DetailTarget": "log",
        "NzbDirInterval": "0",
        "DupeCheck": "no",
        "DiskSpace": "0",
        "ArticleRetries": "0",
        "UrlRetries": "0",
        "ParCheck": "force",
        "ParRepair": "yes",
        "ParScan": "extended",
        "ParRename": "yes",
        "Unpack": "no",
        "ExtCleanupDisk": "",
        "HealthCheck": "park",
    }
    path = folder / "nzbget.conf"
    path.write_text("".join(f"{key}={value}\n" for key, value in options.items()))
    return path


@attrs.define(eq=False)
class Nzbget:
    """A running NZBGet: its process, its API, its folder."""

    process: trio.Process
    client: httpx.AsyncClient
    folder: Path

    async def rpc(self, method: str, *params: object) -> Any:
        """One JSON-RPC call; its result.

        Raises:
            NzbgetError: the call failed (an error answer, or no answer).
        """
        try:
            response = await self.client.post(
                "/jsonrpc", json={"method": method, "params": list(params), "id": 1}
            )
        except httpx.TransportError as error:
            raise NzbgetError(
                f"NZBGet's API did not answer {method}: {error}\n{self.tail()}"
            ) from error
        answer = response.json() if response.status_code == 200 else None
        if not isinstance(answer, dict) or answer.get("error"):
            raise NzbgetError(f"{method}: HTTP {response.status_code} {response.text[:500]}")
        return answer["result"]

    async def add_url(self, url: str, *, name: str = "", paused: bool = False) -> int:
        """Queues the NZB at `url` (NZBGet fetches it); NZBGet's id of the download.

        Args:
            url: an enclosure URL.
            name: the NZB's file name; "" takes the name the answer's headers give.
            paused: the NZB is fetched but its download stays paused (`queued` tells
                its name without a news server).
        """
        # NZBGet 21's signature: NZBFilename, Content (a URL or base64), Category,
        # Priority, AddToTop, AddPaused, DupeKey, DupeScore, DupeMode, PPParameters.
        nzb_id = await self.rpc("append", name, url, "", 0, False, paused, "", 0, "SCORE", [])
        if not isinstance(nzb_id, int) or nzb_id <= 0:
            raise NzbgetError(f"append {url}: refused ({nzb_id!r})\n{self.tail()}")
        return nzb_id

    async def add_nzb(self, name: str, nzb: bytes) -> int:
        """Queues an NZB given whole; NZBGet's id of the download."""
        content = base64.b64encode(nzb).decode()
        nzb_id = await self.rpc("append", name, content, "", 0, False, False, "", 0, "SCORE", [])
        if not isinstance(nzb_id, int) or nzb_id <= 0:
            raise NzbgetError(f"append {name}: refused ({nzb_id!r})\n{self.tail()}")
        return nzb_id

    async def wait(self, nzb_ids: list[int], *, seconds: float) -> dict[int, Download]:
        """The downloads, once each is in the history (done, failed or parked).

        Raises:
            NzbgetError: NZBGet exited, or `seconds` passed first (with its log's tail).
        """

        async def history() -> dict[int, Download] | None:
            done = {
                d.nzb_id: d
                for d in map(Download.from_history, await self.rpc("history", False))
                if d.nzb_id in nzb_ids
            }
            return done if len(done) == len(set(nzb_ids)) else None

        return await self._polled(history, seconds, f"downloads {nzb_ids} not done")

    async def queued(self, nzb_ids: list[int], *, seconds: float) -> dict[int, str]:
        """The names of queued downloads added by URL, once NZBGet has fetched each NZB
        (its queue's entry is an NZB then, no longer a URL): the job names it gave them.

        Raises:
            NzbgetError: NZBGet exited, a fetch failed (the URL went to the history), or
                `seconds` passed first (with its log's tail).
        """

        async def fetched() -> dict[int, str] | None:
            failed = [i["NZBID"] for i in await self.rpc("history", False)]
            if set(failed) & set(nzb_ids):
                raise NzbgetError(f"fetching {nzb_ids} failed\n{self.tail()}")
            names = {
                int(group["NZBID"]): str(group["NZBName"])
                for group in await self.rpc("listgroups", 0)
                if group["NZBID"] in nzb_ids and group["Kind"] == "NZB"
            }
            return names if len(names) == len(set(nzb_ids)) else None

        return await self._polled(fetched, seconds, f"NZBs {nzb_ids} not fetched")

    async def _polled(
        self, answer: Callable[[], Awaitable[_T | None]], seconds: float, late: str
    ) -> _T:
        """`answer()` every POLL_SECONDS until it is not None.

        Raises:
            NzbgetError: NZBGet exited, or `seconds` passed first (`late`, with its
                log's tail).
        """
        try:
            with trio.fail_after(seconds):
                while True:
                    if self.process.poll() is not None:
                        raise NzbgetError(
                            f"NZBGet exited ({self.process.returncode})\n{self.tail()}"
                        )
                    found = await answer()
                    if found is not None:
                        return found
                    await trio.sleep(POLL_SECONDS)
        except trio.TooSlowError:
            raise NzbgetError(f"{late} within {seconds:.0f} s\n{self.tail()}") from None

    def tail(self) -> str:
        """The end of NZBGet's log and of its console output."""
        logs = (self.folder / "nzbget.log", self.folder / "console.log")
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in logs if p.exists())


@contextlib.asynccontextmanager
async def running_nzbget(folder: Path, *, news_host: str, news_port: int) -> AsyncIterator[Nzbget]:
    """NZBGet running as a server with its config in `folder`, until the block ends.

    Raises:
        NzbgetMissing: nzbget is not installed.
        NzbgetError: it exited or did not answer within START_SECONDS.
    """
    program = shutil.which("nzbget")
    if program is None:
        raise NzbgetMissing("nzbget is not installed (scripts/ensure-nzbget installs it)")
    port = free_port()
    config = write_config(folder, news_host=news_host, news_port=news_port, control_port=port)
    with (folder / "console.log").open("wb") as console:
        process = await trio.lowlevel.open_process(
            [program, "-c", str(config), "-s"],
            stdin=subprocess.DEVNULL, stdout=console, stderr=console,
        )  # fmt: skip
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        auth=(CONTROL_USER, CONTROL_PASSWORD),
        timeout=10.0,
    ) as client:
        nzbget = Nzbget(process, client, folder)
        try:
            await _until_answering(nzbget)
            yield nzbget
        finally:
            # SIGTERM: NZBGet saves its queue and exits, as on its API's `shutdown`.
            process.terminate()
            with trio.move_on_after(STOP_SECONDS, shield=True) as stopping:
                await process.wait()
            if stopping.cancelled_caught:
                process.kill()
                with trio.CancelScope(shield=True):
                    await process.wait()


async def _until_answering(nzbget: Nzbget) -> None:
    with trio.move_on_after(START_SECONDS):
        while nzbget.process.poll() is None:
            try:
                await nzbget.client.post("/jsonrpc", json={"method": "version", "params": []})
                return
            except httpx.TransportError:
                await trio.sleep(POLL_SECONDS)
        raise NzbgetError(f"NZBGet exited ({nzbget.process.returncode})\n{nzbget.tail()}")
    raise NzbgetError(f"NZBGet did not answer within {START_SECONDS:.0f} s\n{nzbget.tail()}")
