"""The catalog build's collector policy (gcpolicy.BuildGc): off while a build runs, what
is alive frozen after it (later collections do not walk what a build keeps), and
everything thawed and collected whole every `every` builds, so a cycle made meanwhile
is freed then and not lost for good."""

from __future__ import annotations

import gc
import weakref

from usenet_indexer.gcpolicy import BuildGc


class Node:
    """An object that can be in a cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    """A cycle no one refers to (garbage only the collector frees), seen through a weakref."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_build_runs_without_the_collector_and_freezes_what_is_alive_after() -> None:
    builds = BuildGc(every=3)
    gc.unfreeze()
    assert gc.isenabled()
    kept = [Node() for _ in range(100)]
    with builds.off():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)
    gc.unfreeze()


def test_a_cycle_made_while_builds_freeze_is_freed_by_the_build_that_thaws() -> None:
    builds = BuildGc(every=3)
    gc.unfreeze()
    gc.collect()
    with builds.off():
        dead = cycle()
    gc.collect()  # frozen: a collection does not see it
    assert dead() is not None
    with builds.off():
        pass
    assert dead() is not None
    with builds.off():  # the third: everything thawed and collected
        pass
    assert dead() is None
    assert gc.get_freeze_count() == 0
