"""When Python's cyclic garbage collector runs in uidx's CPU-bound processes.

Indexing makes no reference cycles, but it keeps hundreds of thousands of
objects alive (the open files of a batch), and each full collection walks
them all: the collector's generations grow with the batch and full
collections come geometrically, about a sixth of an indexing run's time for
nothing. A command that indexes turns automatic collection off
(`no_cyclic_gc`) and collects at points of its own choosing
(`collect_all` when a batch or range has been let go, and when idle),
which still frees the few cycles trio and httpx make (tracebacks, frames).
The coordinator's catalog build (coordinator/catalog_build.py) turns it off
while a build runs; the cycles made meanwhile elsewhere in the process are
collected once it is back on. What a build keeps for the builds after it
(its memo: releases, rows, probes) is frozen when it ends (`BuildCollection`),
so the collections between builds never walk it. The node API's heavy hops
(a batch decoded and stored, a build job offered, an edge's rows written) run
without it too (`BuildCollection.off`, counted across threads): each makes tens
of thousands of objects and no cycles, and the collections they set off were 5%
of a coordinator's CPU at 10M lines.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import attrs


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Automatic cyclic collection off for a while (back on after, if it was on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def collect_all() -> int:
    """A full collection: when a batch or range has been let go."""
    return gc.collect()


@attrs.define
class BuildCollection:
    """Cyclic collection around one builder's catalog builds: off while a build
    runs, and what is alive when it ends frozen (`gc.freeze`).

    A build's survivors (the memo's releases, rows and probes) were left in the
    youngest generation when collection came back on: the first collections
    after each build walked them all, then again in the middle generation and
    in full collections (4.3 of a 10M-line bench-scale run's 32 coordinator
    CPU seconds, growing with each build's size). Frozen, they are never
    walked; they are still freed by their counts when a later build lets them
    go (a build makes no cycles). A garbage cycle frozen with them (one the
    event loop made while the build ran) is freed once everything is thawed:
    every `every` builds, all is unfrozen, collected in full and frozen again.
    A build that raises freezes nothing.
    """

    every: int = 50
    builds: int = 0
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)
    _holders: int = attrs.field(default=0, init=False)
    _was_enabled: bool = attrs.field(default=False, init=False)

    @contextmanager
    def off(self) -> Iterator[None]:
        """Automatic cyclic collection off while any holder runs (a build, a node API
        hop; in any thread), and back as it was once the last one ends: counted,
        so that one ending never turns it back on under another."""
        with self._lock:
            if not self._holders:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if not self._holders and self._was_enabled:
                    gc.enable()

    @contextmanager
    def build(self) -> Iterator[None]:
        with self.off():
            yield
            self.builds += 1
            if self.builds % self.every == 0:
                gc.unfreeze()
                gc.collect()
            gc.freeze()
