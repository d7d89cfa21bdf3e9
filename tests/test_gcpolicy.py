"""When cyclic collection runs around the coordinator's catalog builds (gcpolicy.BuildCollection)."""

from __future__ import annotations

import gc
import threading
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


def test_collection_stays_off_until_the_last_of_overlapping_holders_ends() -> None:
    # A batch's intake ends while a build (in another thread) still runs: the
    # build keeps collection off; it is back on once both are done.
    collection = BuildCollection()
    build_running, build_may_end = threading.Event(), threading.Event()
    seen: list[bool] = []

    def build() -> None:
        with collection.build():
            build_running.set()
            build_may_end.wait(10)
            seen.append(gc.isenabled())

    with collection.off():  # the intake
        builder = threading.Thread(target=build)
        builder.start()
        assert build_running.wait(10)
    assert not gc.isenabled()  # the build still holds it off
    build_may_end.set()
    builder.join(10)
    assert seen == [False]
    assert gc.isenabled()


def test_collection_off_before_any_holder_stays_off() -> None:
    collection = BuildCollection()
    gc.disable()
    try:
        with collection.off():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
