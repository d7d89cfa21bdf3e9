"""A real downloader takes what uidx offers: NZBGet downloads it from the news server, whole.

Real files (a video of random bytes, an NFO) and their real PAR2 set
(par2cmdline) are yEnc-encoded and posted to a private INN2, plain and in
the obfuscation styles of Nyuu, NewsUP and ngPost (testing/obfuscated.py).
`uidx standalone` indexes the group through the whole pipeline
(prefetcher -> spool -> edge -> coordinator's catalog) and its probes give
the obfuscated uploads their real names. Then, as a user's downloader:
each release is found by its real name through `t=search` and in the RSS
feed (`t=search` without q), and Debian's NZBGet (testing/nzbget.py), with
the private INN2 as its news server, downloads it through the item's
enclosure URL, checks it against its par2 set (forced on every download)
and must produce every posted file byte for byte.

Two uploads lost articles on the way (`leave_out`): a repairable one (one
video article of 8-20 missing, 30% of recovery data), which is offered and
which NZBGet repairs from its par2 volumes; and a broken one (five articles
missing, 5% of recovery data), which must not be offered at all.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import attrs
import httpx
import pytest
import trio
from probe_tools import require_tool
from process_logs import log_until
from running import own_news_server, probed_and_built, rows, standalone, uidx
from test_standalone import Posted, assert_clean_log, standalone_env

from usenet_indexer.testing.newsd_private import PrivateNewsServer
from usenet_indexer.testing.nzbget import Download, running_nzbget
from usenet_indexer.testing.obfuscated import Built, ToolMissing, build
from usenet_indexer.testing.postgres import PgServer

GROUP = "alt.binaries.uidx.download"
SEED = 26
HOUR = 3600
# Indexing and probing six small uploads takes ~20 s here; NZBGet downloads
# one in ~2 s (its par-check included).
RUN_SECONDS = 240
DOWNLOAD_SECONDS = 120
# The damaged uploads are cut in smaller articles (20 kB: a video is 8-20 of
# them), so one article is at most an eighth of a video.
DAMAGED_PART_BYTES = 20_000


@attrs.frozen
class Uploads:
    """What was posted: whole ones in each style, a repairable one, a broken one."""

    whole: tuple[Built, ...]
    repairable: Built
    broken: Built


@attrs.frozen
class Indexed:
    """The news server, and the newznab API of the coordinator that indexed it (the
    environment of its uidx commands, its database)."""

    news: PrivateNewsServer
    api: str
    key: str
    env: dict[str, str]
    url: str


@attrs.frozen
class Item:
    """A newznab item as a downloader's front end reads it."""

    title: str
    guid: str
    url: str


@pytest.fixture(scope="module")
def uploads(tmp_path_factory: pytest.TempPathFactory) -> Uploads:
    files = tmp_path_factory.mktemp("uploads")
    # Two hours apart: NewsUP's uploads all come under its default From.
    start = int(time.time()) - 14 * HOUR
    try:
        whole = tuple(
            build(files, kind, n, SEED, posted=start + 2 * HOUR * n)
            for n, kind in enumerate(("plain", "nyuu", "newsup", "ngpost"))
        )
        repairable = build(
            files, "plain", 4, SEED, posted=start + 8 * HOUR,
            part_bytes=DAMAGED_PART_BYTES, redundancy=30, leave_out=(2,),
        )  # fmt: skip
        broken = build(
            files, "plain", 5, SEED, posted=start + 10 * HOUR,
            part_bytes=DAMAGED_PART_BYTES, redundancy=5, leave_out=(2, 3, 4, 5, 6),
        )  # fmt: skip
    except ToolMissing as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))
    return Uploads(whole, repairable, broken)


@pytest.fixture(scope="module")
def indexed(
    uploads: Uploads, pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Indexed]:
    """Every upload posted and indexed by `uidx standalone` (probes done), then served
    by `uidx coordinator` with a user's key, while the module's tests run."""
    with own_news_server(GROUP, "uidx-newsd-download-") as news, pg_server.fresh_database() as url:
        for upload in (*uploads.whole, uploads.repairable, uploads.broken):
            news.post_articles(GROUP, upload.articles)
        env = standalone_env(
            Posted(news.url(), ()), url, tmp_path_factory.mktemp("home"),
            UIDX_CATALOG_BUILD_SECONDS="0.5", UIDX_CATALOG_QUIET_SECONDS="0",
            UIDX_PROBE_SHARE="0.5",
        )  # fmt: skip
        _index(env, url)
        names = {str(r[0]) for r in rows(url, "SELECT name FROM catalog")}
        for upload in (*uploads.whole, uploads.repairable, uploads.broken):
            assert upload.real_name in names, (upload.kind, sorted(names))
        key = uidx(env, "users", "create", "downloader").stdout.splitlines()[0]
        coordinator = subprocess.Popen(
            [sys.executable, "-m", "usenet_indexer", "coordinator"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            log = log_until(coordinator, lambda line: "node API listening" in line, 120)
            yield Indexed(news, f"http://{env['UIDX_LISTEN']}", key, env, url)
        finally:
            coordinator.terminate()
            _, rest = coordinator.communicate(timeout=60)
        assert_clean_log("".join(log) + rest.decode())


def _index(env: dict[str, str], url: str) -> None:
    """The group added and planned, `uidx standalone` run until it has indexed and
    probed it all and built the catalog."""
    assert uidx(env, "groups", "add", GROUP).returncode == 0
    ((low, high),) = rows(url, f"SELECT low, high FROM groups WHERE name = '{GROUP}'")
    planned = uidx(env, "ranges", "plan", GROUP, "--from", str(low), "--to", str(high))
    assert planned.returncode == 0, planned.stderr
    with standalone(env) as process:
        log = log_until(
            process, lambda line: "catalog built" in line and probed_and_built(url), RUN_SECONDS
        )
    assert_clean_log("".join(log))


def _items(indexed: Indexed, **params: str) -> list[Item]:
    """The items of a newznab answer (an error answer fails the test)."""
    response = httpx.get(f"{indexed.api}/api", params={**params, "apikey": indexed.key}, timeout=60)
    assert response.status_code == 200, response.text[:500]
    root = ET.fromstring(response.content)
    assert root.tag == "rss", response.text[:500]
    return [_item(element) for element in root.iterfind("./channel/item")]


def _item(element: ET.Element) -> Item:
    enclosure = element.find("enclosure")
    assert enclosure is not None, ET.tostring(element)[:500]
    return Item(
        element.findtext("title", ""), element.findtext("guid", ""), enclosure.get("url", "")
    )


def _offered(indexed: Indexed, upload: Built) -> Item:
    """The upload's item, found by its real name through t=search and in the RSS feed
    (t=search without q), both with the same enclosure URL."""
    found = _items(indexed, t="search", q=upload.real_name)
    searched = [i for i in found if i.title == upload.real_name]
    assert len(searched) == 1, (upload.kind, upload.real_name, found)
    feed = {i.guid: i for i in _items(indexed, t="search", limit="100")}
    assert feed.get(searched[0].guid) == searched[0], (upload.kind, upload.real_name, feed)
    return searched[0]


def _download(indexed: Indexed, urls: list[str], folder: Path) -> list[Download]:
    """NZBGet, run in `folder` with the private INN2 as its server, given the URLs (it
    fetches the NZBs): the downloads as its history has them once each is over."""
    return _nzbget(indexed, folder, [(url, None) for url in urls])


def _nzbget(
    indexed: Indexed, folder: Path, queued: list[tuple[str, bytes | None]]
) -> list[Download]:
    """NZBGet given (URL, None) or (name, NZB) pairs: the downloads, in that order."""
    require_tool("nzbget", "nzbget", "scripts/ensure-nzbget")

    async def run() -> list[Download]:
        news = indexed.news
        async with running_nzbget(folder, news_host=news.host, news_port=news.port) as nzbget:
            ids = [
                await (nzbget.add_url(what) if nzb is None else nzbget.add_nzb(what, nzb))
                for what, nzb in queued
            ]
            done = await nzbget.wait(ids, seconds=DOWNLOAD_SECONDS)
            return [done[i] for i in ids]

    return trio.run(run)


def _digests(files: dict[str, bytes]) -> Counter[str]:
    return Counter(hashlib.sha256(data).hexdigest() for data in files.values())


def _assert_as_posted(download: Download, upload: Built) -> None:
    """NZBGet's par-check passed; the data files are there under their real names (par2
    renames obfuscated ones) byte for byte, and every file is one that was made."""
    assert download.status.startswith("SUCCESS/"), download
    assert download.par_status == "SUCCESS", download
    got = download.files()
    made = {p.name: p.read_bytes() for p in upload.originals}
    for name in upload.data_files:
        assert got.get(name) == made[name], (upload.kind, name, sorted(got))
    assert _digests(got) == _digests(made), (upload.kind, sorted(got), sorted(made))


def test_nzbget_downloads_plain_and_obfuscated_uploads_byte_for_byte(
    indexed: Indexed, uploads: Uploads, tmp_path: Path
) -> None:
    items = [_offered(indexed, upload) for upload in uploads.whole]
    downloads = _download(indexed, [i.url for i in items], tmp_path / "nzbget")
    for download, upload in zip(downloads, uploads.whole, strict=True):
        assert download.name == upload.real_name, download
        assert download.failed_articles == 0, download
        assert download.success_articles == len(upload.articles), download
        _assert_as_posted(download, upload)


def test_a_repairable_upload_is_offered_and_nzbget_repairs_it(
    indexed: Indexed, uploads: Uploads, tmp_path: Path
) -> None:
    upload = uploads.repairable
    item = _offered(indexed, upload)
    (download,) = _download(indexed, [item.url], tmp_path / "nzbget")
    # The article left out was asked for and missing: the video is whole again only
    # because NZBGet rebuilt it from the recovery volumes.
    assert download.failed_articles == len(upload.left_out) == 1, download
    assert download.success_articles == len(upload.articles), download
    _assert_as_posted(download, upload)


def test_the_broken_upload_is_beyond_repair(
    indexed: Indexed, uploads: Uploads, tmp_path: Path
) -> None:
    """The truth the next test rests on: given the broken release's NZB (`uidx nzb`, as
    an operator writes one), NZBGet fetches what is there and its par-check fails."""
    upload = uploads.broken
    ((guid,),) = rows(indexed.url, f"SELECT guid FROM catalog WHERE name = '{upload.real_name}'")
    nzb = tmp_path / "broken.nzb"
    written = uidx(indexed.env, "nzb", str(guid), "--out", str(nzb))
    assert written.returncode == 0, written.stderr
    (download,) = _nzbget(indexed, tmp_path / "nzbget", [(nzb.name, nzb.read_bytes())])
    assert download.failed_articles == len(upload.left_out) == 5, download
    assert download.par_status == "FAILURE", download
    assert download.status.startswith("FAILURE/"), download


def test_a_broken_upload_is_kept_but_not_offered(indexed: Indexed, uploads: Uploads) -> None:
    name = uploads.broken.real_name
    assert name not in {i.title for i in _items(indexed, t="search", q=name)}
    assert name not in {i.title for i in _items(indexed, t="search", limit="100")}
