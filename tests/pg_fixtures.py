"""Pytest fixtures for PostgreSQL: one server per session, a fresh database per test.

Loaded by tests/conftest.py (`pytest_plugins`); the work is done in
`usenet_indexer.testing.postgres`.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import TupleRow

from usenet_indexer.testing.postgres import PgServer, running_server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server ($UIDX_TEST_DATABASE_URL, else a private cluster)."""
    with running_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The conninfo of a fresh database with uidx's migrations applied, dropped after the test."""
    with pg_server.fresh_database() as url:
        yield url


@pytest.fixture
def pg_empty_url(pg_server: PgServer) -> Iterator[str]:
    """The conninfo of a fresh database without any table, dropped after the test."""
    with pg_server.fresh_database(migrated=False) as url:
        yield url


@pytest.fixture
def pg_conn(pg_url: str) -> Iterator[psycopg.Connection[TupleRow]]:
    """An autocommit connection to the test's fresh migrated database."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn
