"""When cyclic collection runs around the coordinator's catalog builds (gcpolicy.BuildCollection)."""

from __future__ import annotations

import gc
import weakref

import pytest

from usenet_indexer.gcpolicy import BuildCollection


class Node:
    other: object = None


def cycle() -> weakref.ref[Node]:
    """A reference cycle already garbage: only the collector frees it."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    return weakref.ref(first)


@pytest.fixture(autouse=True)
def thawed() -> object:
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.collect()


def test_what_a_build_keeps_is_frozen_and_collection_is_back_on_after() -> None:
    collection = BuildCollection(every=3)
    with collection.build():
        assert not gc.isenabled()
        kept = [Node() for _ in range(1000)]
    assert gc.isenabled()
    # Frozen: the collections between builds do not walk the build's objects.
    assert gc.get_freeze_count() >= len(kept)
    frozen = gc.get_freeze_count()
    gc.collect()
    assert gc.get_freeze_count() == frozen


def test_a_cycle_frozen_with_a_build_is_freed_within_every_builds() -> None:
    collection = BuildCollection(every=3)
    with collection.build():
        gone = cycle()  # made (and let go) while the build ran: frozen with it
    gc.collect()
    assert gone() is not None
    with collection.build():
        pass
    assert gone() is not None
    with collection.build():  # the third: all thawed and collected
        pass
    assert gone() is None
    assert collection.builds == 3


def test_a_build_that_raises_freezes_nothing() -> None:
    collection = BuildCollection()
    with pytest.raises(RuntimeError), collection.build():
        raise RuntimeError("the database went away")
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
    assert collection.builds == 0
