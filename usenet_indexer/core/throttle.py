"""Failed key attempts per client address: when to slow a client, when to refuse it (429).

Theory of operation
-------------------
A client that sends a key, token or session that is nobody's is guessing,
or misconfigured; either way it should not hammer the database and the
log. Each failure is counted against its address in a fixed window of
`window_seconds` that starts with the first failure. The first
`free_failures` in a window cost nothing (a typo, a rotated key). Past
them each refusal is answered `delay_seconds` late, and from
`block_after` failures on, every request of that address to a route with
credentials is 429 with Retry-After until the window ends. A WARNING is
due at most once per address per window (the caller logs it).

Pure: time comes in as `now` (seconds, any monotonic origin). The table is
bounded (`max_addresses`): when full, expired windows go first, then the
oldest. It lives in one process's memory, which is enough for a rate
limit (see the README): a restart forgets counts, and with N coordinator
processes a client gets at most N times the limit; a 128-bit key is out of
reach of guessing either way, so this guards the database and the log.
"""

from __future__ import annotations

from collections import OrderedDict

import attrs


@attrs.frozen
class Verdict:
    """What to do with a request of an address: `retry_after` set means refuse (429)."""

    retry_after: int | None = None


@attrs.define(eq=False)
class _Window:
    started: float
    failures: int = 0
    warned: bool = False


@attrs.define(eq=False)
class Throttle:
    """Counts failed attempts per address (see the module docstring)."""

    window_seconds: float = 60.0
    free_failures: int = 5  # a few typos cost nothing
    block_after: int = 20  # then 429 until the window ends
    delay_seconds: float = 1.0  # each refusal past the free ones is this late
    max_addresses: int = 10_000  # ~1 MB at most
    _windows: OrderedDict[str, _Window] = attrs.field(init=False, factory=OrderedDict)

    def check(self, address: str, now: float) -> Verdict:
        """Whether a request of `address` may go on (before its credentials are looked at)."""
        window = self._live(address, now)
        if window is None or window.failures < self.block_after:
            return Verdict()
        return Verdict(retry_after=max(1, round(window.started + self.window_seconds - now)))

    def failed(self, address: str, now: float) -> tuple[float, bool]:
        """Count a failed attempt of `address`.

        Returns:
            The seconds to hold the refusal back (0: at once), and whether a
            WARNING about this address is due (the first time past the free
            failures in its window).
        """
        window = self._live(address, now)
        if window is None:
            self._make_room(now)
            window = self._windows[address] = _Window(now)
        window.failures += 1
        if window.failures <= self.free_failures:
            return 0.0, False
        warn = not window.warned
        window.warned = True
        return self.delay_seconds, warn

    def failures(self, address: str, now: float) -> int:
        """The failures of `address` in its current window."""
        window = self._live(address, now)
        return 0 if window is None else window.failures

    def _live(self, address: str, now: float) -> _Window | None:
        window = self._windows.get(address)
        if window is not None and now - window.started >= self.window_seconds:
            del self._windows[address]
            return None
        return window

    def _make_room(self, now: float) -> None:
        if len(self._windows) < self.max_addresses:
            return
        for address in [
            a for a, w in self._windows.items() if now - w.started >= self.window_seconds
        ]:
            del self._windows[address]
        while len(self._windows) >= self.max_addresses:
            self._windows.popitem(last=False)  # the oldest window
