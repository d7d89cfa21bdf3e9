"""The pure core imports no I/O: no files, clock, network, processes or event loop.

One list of the project's sans-IO modules (STYLE.md: a pure core with thin
adapters around it), checked by what their source imports.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

# What a pure module must not import (by top-level package).
IO = {
    "os",
    "time",
    "socket",
    "ssl",
    "select",
    "subprocess",
    "asyncio",
    "trio",
    "httpx",
    "psycopg",
    "psycopg_pool",
    "pathlib",
    "hypercorn",
}

PURE = [
    "usenet_indexer.subject",
    "usenet_indexer.indexer",
    "usenet_indexer.batch",
    "usenet_indexer.rules",
    "usenet_indexer.naming",
    "usenet_indexer.merge",
    "usenet_indexer.batchwire",
    "usenet_indexer.frames",
    "usenet_indexer.fragments",
    "usenet_indexer.article_dates",
    "usenet_indexer.nntp.protocol",
    "usenet_indexer.nntp.compressed",
    "usenet_indexer.nntp.replies",
    "usenet_indexer.edge.chunks",
    "usenet_indexer.prefetch.plan",
    "usenet_indexer.supervisor.policy",
    "usenet_indexer.testing.generator",
    "usenet_indexer.testing.truth",
]


def imports(module_name: str) -> set[str]:
    """The top-level packages a module's source imports."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(str(module.__file__)).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("module_name", PURE)
def test_the_pure_core_does_no_io(module_name: str) -> None:
    assert not imports(module_name) & IO


def test_the_check_sees_io() -> None:
    # A test that cannot fail proves nothing: the adapters do import I/O.
    assert "trio" in imports("usenet_indexer.nntp.client")
    assert "psycopg" in imports("usenet_indexer.store.pool")


def test_the_policy_needs_only_attrs() -> None:
    assert imports("usenet_indexer.supervisor.policy") <= {"__future__", "collections", "attrs"}


def test_the_arbiter_runs_before_trio() -> None:
    # It runs before any trio.run; the workers are the ones with a trio loop.
    assert "trio" not in imports("usenet_indexer.supervisor.arbiter")
    assert "trio" not in imports("usenet_indexer.supervisor.entry")
