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
collected once it is back on.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


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
