"""The coordinator's allocator policy (mallocpolicy.py): a large buffer freed and made
again is made from memory the process kept, not from fresh pages the kernel
faults in. Each case in a process of its own: mallopt changes the whole process."""

from __future__ import annotations

import subprocess
import sys

import pytest

# A buffer of 40 MB made and freed 5 times after a first one: past glibc's
# largest dynamic mmap threshold (32 MB), so by default each is a new mapping.
_SCRIPT = """
import resource, sys
from usenet_indexer.mallocpolicy import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "on" else None
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = b"x" * (40 << 20)
del block
before = faults()
for _ in range(5):
    block = b"x" * (40 << 20)
    del block
print(applied, faults() - before)
"""
PAGES_OF_ONE_BUFFER = (40 << 20) // 4096


def _faults(policy: str) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, policy], capture_output=True, text=True, check=True
    )
    applied, faults = done.stdout.split()
    return applied, int(faults)


def test_large_buffers_made_again_reuse_the_memory_kept() -> None:
    applied, default_faults = _faults("off")
    if default_faults < PAGES_OF_ONE_BUFFER:
        pytest.skip(f"this C library reuses freed 40 MB blocks by itself ({default_faults} faults)")
    applied, kept_faults = _faults("on")
    assert applied == "True"  # glibc, as on the Debian machines uidx runs on, has mallopt
    # Five buffers faulted in anew by default; none with the policy.
    assert default_faults >= 5 * PAGES_OF_ONE_BUFFER * 0.9
    assert kept_faults < PAGES_OF_ONE_BUFFER // 10
