"""Exponential backoff, capped: the pauses between tries of whatever may fail for a while.

Pure values. The edge's node API client gives up after `tries`; the
prefetcher never gives up on a server (`delay`). A library (tenacity,
backoff) would wrap the call itself, where both callers decide per error
whether to try again, and what to log, inside trio; what they share is this
arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs


def _at_least(minimum: float) -> Callable[[object, attrs.Attribute[Any], float], None]:
    def check(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
        if not value >= minimum:
            raise ValueError(f"{attribute.name} must be at least {minimum}, not {value}")

    return check


@attrs.frozen
class RetryPolicy:
    """Exponential backoff, capped: base, 2 x base, 4 x base, ... up to cap.

    Attributes:
        tries: tries in all, the first one included (for `next_delay`).
        base_seconds: the pause after the first failed try.
        cap_seconds: the longest pause.
    """

    tries: int = attrs.field(default=8, validator=_at_least(1))
    base_seconds: float = attrs.field(default=1.0, validator=_at_least(0.0))
    cap_seconds: float = attrs.field(default=60.0, validator=_at_least(0.0))

    def delay(self, failures: int) -> float:
        """The pause after `failures` failures in a row (from 1), however many."""
        # min() before the power would overflow: 2**1000 floats do not exist.
        return min(self.cap_seconds, self.base_seconds * 2.0 ** min(max(failures, 1) - 1, 64))

    def next_delay(self, attempt: int) -> float | None:
        """The pause after failed try number `attempt` (from 1), or None when none is left.

        Args:
            attempt: how many tries have failed so far.

        Returns:
            Seconds to wait before the next try, or None to give up.
        """
        if attempt >= self.tries:
            return None
        return self.delay(attempt)
