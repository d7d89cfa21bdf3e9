"""Shared test helpers: where the real-data corpus is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from usenet_indexer.testing.corpus import find_corpus

# A private PostgreSQL for the session, a fresh database per test (tests/pg_fixtures.py);
# a private INN2 for the NNTP tests (tests/nntp_fixtures.py, scripts/newsd);
# the coordinator's settings, pool and stores (tests/coordinator_fixtures.py).
# a private S3 server (SeaweedFS) for the S3 spool's tests (tests/s3_fixtures.py).
pytest_plugins = ["pg_fixtures", "nntp_fixtures", "coordinator_fixtures", "s3_fixtures"]


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The shared corpus folder (../shared/corpus); skipped without it, except in CI."""
    found = find_corpus(Path(__file__).resolve().parent)
    if found is None:
        # CI always has shared/ beside the clone: a missing corpus there is a failure.
        if os.environ.get("CI"):
            pytest.fail("the shared corpus (../shared/corpus) is missing in CI")
        pytest.skip("the shared corpus (../shared/corpus) is not here")
    return found
