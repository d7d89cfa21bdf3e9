"""The spool in an S3 bucket (boto3, called from worker threads like every blocking call).

Theory of operation
-------------------
A chunk is the object `PREFIX/GROUP/FIRST-LAST.zlib`. It is compressed into
memory as its lines come (~2.5 MB for 50k lines) and stored with one PUT when
its landing commits it: S3 makes an object visible only once its PUT is
complete, so a writer killed mid-upload leaves nothing that is read, and no
temporary key needs sweeping. The PUT is conditional, `If-None-Match: *`
(SeaweedFS, AWS S3 and MinIO answer 412 when the key exists): a chunk is
never overwritten in place while an edge may be reading it. A 412 means a
writer stored that chunk already (a prefetcher killed between its PUT and
its index row, or another prefetcher): the same articles of the same
server, so the object is taken as it is. A temporary key then a copy was
the other way; it costs a second request and leaves temporary keys of dead
writers to sweep, for nothing the conditional PUT does not give.

Edges read chunks through presigned GET URLs (`presign`, SigV4, valid for
`spool_presign_seconds`) that the coordinator's stream hands them, so the
chunks' bytes never pass through the coordinator. The URL's host is the
endpoint as the coordinator reaches it: edges must reach it too.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import attrs
import boto3
import botocore.exceptions
from botocore.config import Config
from isal import isal_zlib

from usenet_indexer.config import Settings
from usenet_indexer.errors import HOST_LIMITS, ConfigError, SpoolStoreError
from usenet_indexer.spool.files import LEVEL, chunk_path
from usenet_indexer.wire.frames import Codec

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

# Parallel requests of one process: a prefetcher lands chunks from all its
# connections at once (botocore's default is 10).
MAX_CONNECTIONS = 32
# A DeleteObjects call takes at most 1000 keys.
DELETE_BATCH = 1000
# HEADs in flight at once when a batch of chunks is looked up (`missing`): a range's
# 100 chunks in a few round trips, well within MAX_CONNECTIONS.
LOOKUP_THREADS = 16

_ERRORS = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)


def _error_code(error: Exception) -> str:
    if isinstance(error, botocore.exceptions.ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def _status(error: Exception) -> int | None:
    if isinstance(error, botocore.exceptions.ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if status is not None else None
    return None


def _host_shortage(error: BaseException) -> OSError | None:
    """The OSError beneath a botocore error when the request never left this process
    for want of a descriptor or memory (HOST_LIMITS: urllib3 could not open its
    socket; botocore's EndpointConnectionError holds it two causes down), else None."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError) and cause.errno in HOST_LIMITS:
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _store_time(headers: Mapping[str, str]) -> datetime:
    """The store's clock, from an answer's Date header (this machine's if it has none)."""
    with contextlib.suppress(KeyError, TypeError, ValueError):
        when = parsedate_to_datetime(headers["date"])
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return datetime.now(UTC)


def split_url(url: str) -> tuple[str, str]:
    """`s3://bucket/prefix` as (bucket, prefix without slashes at its ends).

    Raises:
        ConfigError: no bucket (names spool_url).
    """
    rest = url.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ConfigError("spool_url", f"{url!r}: must be s3://BUCKET or s3://BUCKET/PREFIX")
    return bucket, prefix.strip("/")


@attrs.frozen
class S3Spool:
    """Chunks as objects of one bucket under a prefix (see the module docstring).

    Attributes:
        client: a boto3 S3 client (thread-safe; shared by the worker threads).
        bucket: the bucket.
        prefix: the keys' prefix ("" for none).
        presign_seconds: how long a presigned GET URL is valid.
    """

    client: S3Client = attrs.field(repr=False)
    bucket: str
    prefix: str = ""
    presign_seconds: int = 3600

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Spool:
        """The S3 spool of `spool_url`, `spool_endpoint_url`, `spool_region` and the keys.

        Raises:
            ConfigError: no bucket in spool_url, a bad endpoint.
        """
        bucket, prefix = split_url(settings.spool_url)
        config = Config(
            signature_version="s3v4",
            s3={"addressing_style": "path" if settings.spool_endpoint_url else "auto"},
            max_pool_connections=MAX_CONNECTIONS,
            connect_timeout=10,
            read_timeout=60,
            retries={"max_attempts": 3, "mode": "standard"},
        )
        try:
            client = boto3.session.Session().client(
                "s3",
                endpoint_url=settings.spool_endpoint_url or None,
                region_name=settings.spool_region or None,
                aws_access_key_id=settings.spool_access_key_id or None,
                aws_secret_access_key=settings.spool_secret_access_key or None,
                config=config,
            )
        except ValueError as error:
            raise ConfigError("spool_endpoint_url", str(error)) from error
        return cls(client, bucket, prefix, settings.spool_presign_seconds)

    def key_of(self, key: str) -> str:
        """The object key of a chunk's index key."""
        return f"{self.prefix}/{key}" if self.prefix else key

    def open_chunk(self, group: str, first: int, last: int) -> S3ChunkWriter:
        return S3ChunkWriter(self, str(chunk_path(group, first, last)))

    def write_chunk(self, group: str, first: int, last: int, text: bytes) -> tuple[str, int, Codec]:
        writer = self.open_chunk(group, first, last)
        writer.write((text,), text.count(b"\n"))
        return writer.commit()

    def put_new(self, key: str, data: bytes) -> int:
        """Store `data` at `key` unless an object is there; returns the stored size.

        Raises:
            SpoolStoreError: refused or unreachable.
        """
        name = self.key_of(key)
        try:
            self.client.put_object(Bucket=self.bucket, Key=name, Body=data, IfNoneMatch="*")
        except _ERRORS as error:
            if _error_code(error) != "PreconditionFailed":
                raise SpoolStoreError(
                    f"spool chunk {key}", f"not stored in s3://{self.bucket}: {error}"
                ) from error
            return self._size(key)
        return len(data)

    def _size(self, key: str) -> int:
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self.key_of(key))
        except _ERRORS as error:
            raise SpoolStoreError(
                f"spool chunk {key}", f"cannot be read in s3://{self.bucket}: {error}"
            ) from error
        return int(head["ContentLength"])

    def read(self, key: str) -> bytes:
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key_of(key))
            return answer["Body"].read()
        except _ERRORS as error:
            raise SpoolStoreError(
                f"spool chunk {key}", f"cannot be read in s3://{self.bucket}: {error}"
            ) from error

    def exists(self, key: str) -> bool:
        """Whether the chunk's object is there (HEAD; 404 is False).

        Raises:
            OSError: this process has no descriptor or memory for the request
                (HOST_LIMITS; as a folder spool's would be): its own shortage, not
                the store's answer.
            SpoolStoreError: any other answer (403: keys that may not read it), or
                the store cannot be reached.
        """
        try:
            self.client.head_object(Bucket=self.bucket, Key=self.key_of(key))
        except _ERRORS as error:
            if _status(error) == 404:
                return False
            shortage = _host_shortage(error)
            if shortage is not None:
                where = f"s3://{self.bucket}/{self.key_of(key)}"
                raise OSError(shortage.errno, shortage.strerror, where) from error
            raise SpoolStoreError(
                f"spool chunk {key}", f"cannot be looked up in s3://{self.bucket}: {error}"
            ) from error
        return True

    def missing(self, keys: Sequence[str]) -> list[str]:
        """Those of `keys` whose object is not there: a HEAD each, LOOKUP_THREADS at once.

        Raises:
            OSError, SpoolStoreError: the store cannot tell of one (see `exists`).
        """
        if not keys:
            return []
        with ThreadPoolExecutor(min(LOOKUP_THREADS, len(keys))) as pool:
            there = list(pool.map(self.exists, keys))
        return [key for key, found in zip(keys, there, strict=True) if not found]

    def presign(self, key: str) -> str:
        try:
            return self.client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.bucket, "Key": self.key_of(key)},
                ExpiresIn=self.presign_seconds,
            )
        except _ERRORS as error:
            raise SpoolStoreError(f"spool chunk {key}", f"cannot be presigned: {error}") from error

    def delete(self, keys: Sequence[str]) -> None:
        """Delete chunks, 1000 a request.

        Raises:
            SpoolStoreError: a request or a key refused (the sweep keeps their
                index rows and tries again).
        """
        for start in range(0, len(keys), DELETE_BATCH):
            part = keys[start : start + DELETE_BATCH]
            objects: Any = [{"Key": self.key_of(key)} for key in part]
            try:
                answer = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
                )
            except _ERRORS as error:
                raise SpoolStoreError(f"spool chunk {part[0]}", f"not deleted: {error}") from error
            if errors := answer.get("Errors"):
                first = errors[0]
                raise SpoolStoreError(
                    f"spool object {first.get('Key')}",
                    f"not deleted: {first.get('Message')} ({len(errors)})",
                )

    def remove_leftovers(self) -> int:
        return 0  # an upload that did not complete left no object

    def stored(self, older_than_seconds: float) -> list[str]:
        """The keys under the prefix, those stored at least `older_than_seconds` before
        the store's clock (each listing's Date): the prefetcher's may be another.

        Raises:
            SpoolStoreError: the store refused or cannot be reached.
        """
        start = f"{self.prefix}/" if self.prefix else ""
        keys: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2")
            for page in pages.paginate(Bucket=self.bucket, Prefix=start):
                now = _store_time(page.get("ResponseMetadata", {}).get("HTTPHeaders", {}))
                for item in page.get("Contents", []):
                    age = (now - item["LastModified"]).total_seconds()
                    if age >= older_than_seconds:
                        keys.append(item["Key"].removeprefix(start))
        except _ERRORS as error:
            raise SpoolStoreError(
                f"spool {self.describe()}", f"cannot be listed: {error}"
            ) from error
        return keys

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def check(self) -> None:
        """The bucket is there and the keys may use it (HEAD bucket).

        Raises:
            ConfigError: no such bucket (names spool_url), no keys or the keys
                refused (names spool_access_key_id).
            SpoolStoreError: the endpoint cannot be reached or answers 5xx.
        """
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except botocore.exceptions.NoCredentialsError as error:
            # Nothing in the settings, the AWS variables, ~/.aws or the instance's
            # metadata: a mistake of the settings, not the store's trouble.
            raise ConfigError(
                "spool_access_key_id",
                "no keys for the S3 spool (set it and spool_secret_access_key,"
                " or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
            ) from error
        except _ERRORS as error:
            status = _status(error)
            if status == 404:
                raise ConfigError("spool_url", f"no bucket {self.bucket!r} there") from error
            if status in (401, 403):
                raise ConfigError(
                    "spool_access_key_id",
                    f"refused by s3://{self.bucket} ({status}); or spool_secret_access_key",
                ) from error
            raise SpoolStoreError(f"spool {self.describe()}", str(error)) from error


@attrs.define(eq=False)
class S3ChunkWriter:
    """A chunk compressed into memory as it comes, stored by `commit` with one conditional PUT."""

    spool: S3Spool
    key: str
    lines: int = 0
    _buffer: io.BytesIO = attrs.field(factory=io.BytesIO)
    _compressor: Any = attrs.field(factory=lambda: isal_zlib.compressobj(LEVEL))

    def write(self, blocks: Sequence[bytes], lines: int) -> None:
        """Add overview lines: `lines` of them in `blocks` of text, each line ended by LF."""
        for block in blocks:
            self._buffer.write(self._compressor.compress(block))
        self.lines += lines

    def commit(self) -> tuple[str, int, Codec]:
        """Store the chunk whole; returns (key, stored bytes, codec).

        Raises:
            SpoolStoreError: the store refused it or cannot be reached.
        """
        self._buffer.write(self._compressor.flush())
        data = self._buffer.getvalue()
        self.abort()
        return self.key, self.spool.put_new(self.key, data), Codec.ZLIB

    def abort(self) -> None:
        """Drop the bytes held (nothing was stored)."""
        self._buffer = io.BytesIO()
