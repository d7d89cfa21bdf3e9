"""The log check that every clean run applies: ERROR lines, tracebacks and 5xx answers found."""

from __future__ import annotations

import logging
from pathlib import Path

from usenet_indexer import cli
from usenet_indexer.testing.logcheck import file_problems, problems

CLEAN = """\
2026-12-01 19:40:01,101 INFO [4242] usenet_indexer.coordinator.http.node: node 1 leased range 1 epoch 1: g 1..9 from 1
2026-12-01 19:40:02,202 INFO [4242] usenet_indexer.coordinator.http.node: node 2 POST '/api/v1/node/ranges/1/batches': 409 {"error":"not held"}
2026-12-01 19:40:03,303 WARNING [4243] usenet_indexer.prefetch.daemon: news: 502, one connection less
"""
FAILED = """\
2026-12-01 19:40:04,404 ERROR [4242] usenet_indexer.coordinator.http.node: node 1 POST '/api/v1/node/ranges/2/batches': answered 500: DuplicateTable('relation "fragments_g1" already exists')
Traceback (most recent call last):
  File "x.py", line 1, in <module>
psycopg.errors.DuplicateTable: relation "fragments_g1" already exists
2026-12-01 19:40:05,505 WARNING [4242] usenet_indexer.coordinator.http.node: node 1 POST '/api/v1/node/lease': answered 503: database unavailable: the pool timed out
"""


def test_a_clean_log_has_no_problems() -> None:
    found = problems(CLEAN.splitlines())
    assert not found
    assert found.describe() == ""


def test_error_lines_tracebacks_and_5xx_answers_are_found() -> None:
    found = problems((CLEAN + FAILED).splitlines(keepends=True))
    assert found
    assert len(found.errors) == 2
    assert " ERROR [4242] " in found.errors[0]
    # The traceback, by the line that logged it and the exception it ends with.
    assert found.errors[1].startswith("Traceback")
    assert "answered 500" in found.errors[1]
    assert found.errors[1].endswith('DuplicateTable: relation "fragments_g1" already exists')
    assert [status for status, _ in found.answered_5xx] == [500, 503]
    # A run that stops the database on purpose may allow its 503s, never the 500.
    assert [status for status, _ in found.without(503).answered_5xx] == [500]
    assert "fragments_g1" in found.describe()


def test_the_lines_uidx_writes_are_the_lines_the_check_reads(tmp_path: Path) -> None:
    """The check reads the format `uidx` logs in, not a format of its own."""
    log = tmp_path / "coordinator.log"
    handler = logging.FileHandler(log)
    handler.setFormatter(logging.Formatter(cli.LOG_FORMAT))
    logger = logging.getLogger("usenet_indexer.coordinator.http.node.test")
    logger.addHandler(handler)
    try:
        logger.info("node 1 leased range 1 epoch 1")
        assert not file_problems(log)
        logger.error("node 1 POST '/x': answered 500: boom")
    finally:
        logger.removeHandler(handler)
        handler.close()
    found = file_problems(log, tmp_path / "missing.log")
    assert len(found.errors) == 1
    assert [status for status, _ in found.answered_5xx] == [500]
