"""Fixtures of the coordinator's tests: settings on a temp home, a pool, the stores.

Loaded by tests/conftest.py (`pytest_plugins`); a module may override them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg_pool import ConnectionPool

from usenet_indexer.config import Settings
from usenet_indexer.coordinator.stores import Stores
from usenet_indexer.store.pool import open_pool


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with the home in the test's temp folder and a free port."""
    return Settings(home=tmp_path, listen="127.0.0.1:0")


@pytest.fixture
def pool(pg_url: str, settings: Settings) -> Iterator[ConnectionPool]:
    """A pool on the test's fresh database."""
    with open_pool(pg_url, settings) as opened:
        yield opened


@pytest.fixture
def stores(pool: ConnectionPool) -> Stores:
    """The coordinator's stores on that pool."""
    return Stores.from_pool(pool)
