"""The layout holds: the pure code imports no I/O, and no import points up the stack.

Pure code is found by where it lives, not by a list kept here: every module
of the pure folders (`PURE_FOLDERS`), and in the other packages the modules
a package names in its `__init__.py` as `PURE_MODULES` (the NNTP protocol
core beside its trio client, the supervisor's restart policy beside the
arbiter). Both are read from the source (its AST), so a new module in a pure
folder is checked the day it is added.

The layers, from the bottom: errors and config; the pure folders; the
adapters (nntp, store, spool, supervisor); the roles (coordinator, prefetch,
edge); the commands and the command line. `FORBIDDEN` says, per package,
what it must not import; `testing` (the fakes the tests share) and the chaos
harness outside the package are for tests only, and nothing of the product
imports them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "usenet_indexer"

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

# Every module under these folders is pure.
PURE_FOLDERS = ("core", "wire", "synth", "decode")
# The adapter and role folders: what pure code must not import from uidx.
ADAPTERS = (
    "nntp", "store", "spool", "supervisor", "coordinator", "prefetch", "edge", "commands",
    "testing", "cli",
)  # fmt: skip

# Package (or top-level module) -> uidx packages it must not import.
FORBIDDEN = {
    "errors": (*PURE_FOLDERS, *ADAPTERS, "config"),
    "config": (*PURE_FOLDERS, *ADAPTERS),
    "core": ADAPTERS,
    "wire": ADAPTERS,
    "synth": ADAPTERS,
    "decode": ADAPTERS,
    "nntp": ("store", "spool", "coordinator", "prefetch", "edge", "commands", "testing", "cli"),
    "store": ("nntp", "coordinator", "prefetch", "edge", "commands", "testing", "cli"),
    "spool": ("nntp", "store", "coordinator", "prefetch", "edge", "commands", "testing", "cli"),
    "supervisor": (
        "nntp",
        "store",
        "spool",
        "coordinator",
        "prefetch",
        "edge",
        "commands",
        "testing",
        "cli",
    ),
    "coordinator": ("nntp", "prefetch", "edge", "commands", "testing", "cli"),
    "prefetch": ("coordinator", "edge", "commands", "testing", "cli"),
    # An edge needs only COORDINATOR_URL and NODE_TOKEN: no database, no NNTP.
    "edge": ("nntp", "store", "spool", "coordinator", "prefetch", "commands", "testing", "cli"),
    "commands": ("testing", "cli"),
    "gcpolicy": (*ADAPTERS, "config"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> Iterator[Path]:
    yield from sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def imported(path: Path) -> set[str]:
    """The absolute module names a source file imports (`from a.b import c`: a.b and a.b.c)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def top_levels(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported(path)}


def declared_pure(init: Path) -> tuple[str, ...]:
    """The `PURE_MODULES` a package's `__init__.py` names (none: ())."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "PURE_MODULES" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple), init
            return value
    return ()


def pure_modules() -> list[Path]:
    found = [p for p in modules() if p.relative_to(PACKAGE).parts[0] in PURE_FOLDERS]
    for init in PACKAGE.glob("*/__init__.py"):
        for name in declared_pure(init):
            module = init.parent / f"{name}.py"
            assert module.exists(), f"{init} names {name}, which is not there"
            found.append(module)
    return sorted(found)


def uidx_area(module: str) -> str | None:
    """`usenet_indexer.store.batches` -> "store"; None outside uidx."""
    parts = module.split(".")
    return parts[1] if parts[0] == "usenet_indexer" and len(parts) > 1 else None


@pytest.mark.parametrize("path", pure_modules(), ids=module_name)
def test_the_pure_code_does_no_io(path: Path) -> None:
    assert not top_levels(path) & IO


def test_the_pure_code_is_found_by_folder_and_by_what_packages_declare() -> None:
    names = {module_name(p) for p in pure_modules()}
    # A folder's every module, also one added after this test was written.
    assert {"usenet_indexer.core.indexer", "usenet_indexer.wire.frames"} <= names
    assert "usenet_indexer.synth.generator" in names
    assert "usenet_indexer.decode.yenc" in names
    # Declared beside their adapters.
    assert {"usenet_indexer.nntp.protocol", "usenet_indexer.supervisor.policy"} <= names
    assert "usenet_indexer.nntp.client" not in names


def test_the_check_sees_io() -> None:
    # A test that cannot fail proves nothing: the adapters do import I/O.
    assert "trio" in top_levels(PACKAGE / "nntp" / "client.py")
    assert "psycopg" in top_levels(PACKAGE / "store" / "pool.py")


def test_the_policy_needs_only_attrs() -> None:
    policy = PACKAGE / "supervisor" / "policy.py"
    assert top_levels(policy) <= {"__future__", "collections", "attrs"}


def test_the_arbiter_runs_before_trio() -> None:
    # It runs before any trio.run; the workers are the ones with a trio loop.
    assert "trio" not in top_levels(PACKAGE / "supervisor" / "arbiter.py")
    assert "trio" not in top_levels(PACKAGE / "supervisor" / "entry.py")


def upward(area: str | None, names: set[str]) -> list[str]:
    """The names that a module of `area` must not import."""
    forbidden = FORBIDDEN.get(area or "", ())
    return sorted(
        name for name in names if uidx_area(name) in forbidden or name.split(".")[0] == "chaos"
    )


@pytest.mark.parametrize("path", list(modules()), ids=module_name)
def test_no_import_points_up_the_stack(path: Path) -> None:
    assert upward(uidx_area(module_name(path)), imported(path)) == []


def test_the_layer_check_sees_an_import_that_points_up() -> None:
    assert upward("store", {"usenet_indexer.prefetch.plan.WantedRange"}) != []
    assert upward("edge", {"usenet_indexer.store.pool"}) != []
    assert upward("core", {"usenet_indexer.wire.fragments", "attrs"}) == []
    assert upward("commands", {"chaos.suite"}) != []


def test_the_product_does_not_import_test_tools() -> None:
    product = [p for p in modules() if p.relative_to(PACKAGE).parts[0] != "testing"]
    offenders = [
        module_name(p)
        for p in product
        if any(uidx_area(n) == "testing" or n.split(".")[0] == "chaos" for n in imported(p))
    ]
    assert offenders == []
