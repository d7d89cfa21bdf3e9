"""The real tools the tests make their data with (par2, 7z, zip) or download with (nzbget).

scripts/ensure-probe-tools and scripts/ensure-nzbget install them
(scripts/test runs both). Without one a test is skipped here, and fails
in CI, where they must be.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def require_tool(name: str, package: str, installer: str = "scripts/ensure-probe-tools") -> str:
    """The tool's path; skipped without it, except in CI (a failure there)."""
    found = shutil.which(name)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{name} is missing in CI ({installer} installs {package})")
    pytest.skip(f"{name} is not installed: apt-get install {package} ({installer})")


def run_tool(argv: list[str], cwd: Path) -> None:
    """Run a tool to make test data; its output is shown only when it fails."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
