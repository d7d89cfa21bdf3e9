"""One error tree: every exception class uidx defines is under UidxError, and drawn in errors.py."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import usenet_indexer
from usenet_indexer import errors
from usenet_indexer.errors import UidxError


def defined_exceptions() -> list[type[BaseException]]:
    """The exception classes defined by uidx's modules (each once, where it is defined)."""
    found: list[type[BaseException]] = []
    for info in pkgutil.walk_packages(usenet_indexer.__path__, "usenet_indexer."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    return found


def test_the_walk_finds_exceptions_deep_in_the_package() -> None:
    names = {cls.__name__ for cls in defined_exceptions()}
    assert {"UidxError", "LeaseLost", "NoSuchGroup", "BadFragment"} <= names


def test_every_exception_class_is_under_uidx_error() -> None:
    outside = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in defined_exceptions()
        if not issubclass(cls, UidxError)
    ]
    assert outside == []


def test_the_tree_in_errors_py_names_every_class() -> None:
    tree = errors.__doc__ or ""
    missing = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in defined_exceptions()
        if f" {cls.__name__.lstrip('_')} " not in tree
        and f" {cls.__name__.lstrip('_')}\n" not in tree
    ]
    assert missing == []


def drawn_parents() -> dict[str, str]:
    """Each class the tree in errors.py draws -> the class it is drawn under."""
    parents: dict[str, str] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        drawn = line.removeprefix("    ")
        if not drawn.startswith(("UidxError", "│", "├", "└", " ")) or not drawn.strip():
            continue
        name_at = len(drawn) - len(drawn.lstrip(" │├└─"))
        del stack[name_at // 4 :]
        name = drawn[name_at:].split()[0]
        if stack:
            parents[name] = stack[-1]
        stack.append(name)
    return parents


def test_the_tree_draws_each_class_under_its_base() -> None:
    parents = drawn_parents()
    assert parents["CorruptBody"] == "MalformedBatch"
    wrong = {
        cls.__name__: (parents.get(cls.__name__.lstrip("_")), cls.__bases__[0].__name__)
        for cls in defined_exceptions()
        if cls is not UidxError
        and parents.get(cls.__name__.lstrip("_")) != cls.__bases__[0].__name__.lstrip("_")
    }
    assert wrong == {}
