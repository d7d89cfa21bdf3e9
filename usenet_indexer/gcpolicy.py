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
while a build runs (`BuildGc`), and then freezes what is alive (`gc.freeze`):
what a build keeps (its memo, the unpacked fragments) lives on, and walking it
once it is back on (the young generation, then the older ones as they fill)
was about a quarter of a replayed build's CPU. Every `THAW_EVERY`th build
thaws everything and collects it whole, so the cycles made meanwhile
elsewhere in the process (trio's, httpx's) are freed within that many builds.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

# A build in this many thaws the objects frozen after the builds before and collects
# them whole (see `BuildGc`).
THAW_EVERY = 32


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


@attrs.define
class BuildGc:
    """Automatic collection off while a catalog build runs, and what is alive frozen
    after it, collected whole every `every` builds (see the module's docstring)."""

    every: int = THAW_EVERY
    builds: int = 0

    @contextmanager
    def off(self) -> Iterator[None]:
        """`no_cyclic_gc` for a build, and the process's objects frozen or thawed after."""
        with no_cyclic_gc():
            try:
                yield
            finally:
                self.builds += 1
                if self.builds % self.every:
                    gc.freeze()
                else:
                    gc.unfreeze()
                    gc.collect()


def collect_all() -> int:
    """A full collection: when a batch or range has been let go."""
    return gc.collect()
