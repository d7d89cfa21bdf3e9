"""The environment of a uidx process that a test, a benchmark or the chaos harness starts."""

from __future__ import annotations

import os

# Variables of this process that must not reach uidx's children: their own
# settings are set explicitly, and config.py refuses unknown UIDX_ variables.
CHILD_DROPS = ("DATABASE_URL", "COORDINATOR_URL", "NODE_TOKEN", "NOTIFY_SOCKET")


def child_env(**settings: str) -> dict[str, str]:
    """This process's environment without uidx's settings, plus `settings`."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("UIDX_") and name not in CHILD_DROPS
    }
    env.update(settings)
    return env
