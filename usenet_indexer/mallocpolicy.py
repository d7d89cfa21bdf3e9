"""How the C allocator keeps memory in a coordinator process.

A coordinator's worker threads allocate and free large buffers over and over:
a batch's body (4-12 MB), the fragments it decompresses to check them, a
build job's encoded answer (up to ~60 MB at 10M lines). glibc gives threads
arenas of their own (up to 8 per core), serves a block over its mmap threshold
(128 kB, rising to at most 32 MB as such blocks are freed) straight from
mmap, and gives the top of a heap back to the system past its trim threshold:
so such buffers came back as fresh pages, each faulted in and zeroed by the
kernel. A 10M-line `scripts/bench-scale` run's coordinator took 312k page
faults and 1.64 s of system time (of 7.8 CPU-s); with one arena and the two
thresholds raised, 137k and 0.83 s, its user time the same (6.2 s), the
edges' and PostgreSQL's unchanged. (An edge gained nothing measurable in
`scripts/bench-edge`: it is not set there.)

`keep_freed_memory` sets that with mallopt(3) at the process's start,
before its threads exist. The cost: up to TRIM_BYTES of freed memory stays
in the process instead of going back to the system. Where the C library has
no mallopt (not glibc), nothing is set, and a DEBUG line says so.
"""

from __future__ import annotations

import ctypes
import logging

logger = logging.getLogger(__name__)

# mallopt(3)'s parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
# Blocks up to this size come from the heap, not a mapping of their own.
MMAP_BYTES = 64 << 20
# Free memory kept at the top of the heap before any goes back to the system.
TRIM_BYTES = 128 << 20
# One arena: the coordinator's threads take turns at the GIL anyway.
ARENAS = 1


def keep_freed_memory() -> bool:
    """Set this process's allocator as described above; whether mallopt was there.

    A parameter mallopt refuses is logged (WARNING) and the rest still set.
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        logger.debug("no mallopt in this C library: the allocator keeps its defaults")
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    for name, parameter, value in (
        ("M_ARENA_MAX", M_ARENA_MAX, ARENAS),
        ("M_MMAP_THRESHOLD", M_MMAP_THRESHOLD, MMAP_BYTES),
        ("M_TRIM_THRESHOLD", M_TRIM_THRESHOLD, TRIM_BYTES),
    ):
        if mallopt(parameter, value) != 1:
            logger.warning("mallopt(%s, %d) was refused: that one keeps its default", name, value)
    return True
