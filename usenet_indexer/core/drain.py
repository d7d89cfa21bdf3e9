"""What a one-shot run waits for after its ranges: the probe queue drained, the catalog built.

Theory of operation
-------------------
`uidx standalone --exit-when-done` stops once every planned range is done,
but the probes come after the headers: the prober reads the candidates when
no header work is left (store/probes.py, prefetch/prober.py), each outcome
marks its release key pending, and the catalog build that applies it may ask
for more candidates (renames.more_probe: the par2 of a release an nfo named,
an archive's first volume). So the run also waits until one look (one
snapshot of the database, `ProbeStore.queue`) finds no open candidate (each
probed, or given up at its attempt cap) and no catalog key pending: nothing
left can change what the catalog shows.

The wait is bounded by progress, not by a fixed time: a queue that moves is
waited for however long it is (every candidate ends within its attempt cap),
and one that has not moved for `stall_seconds` (its server away, its prober
gone) is left as it is, with a line that says how many candidates are left
(the next run probes them). A retry's longest pause (240 s: three doublings
of the prober's first 60 s) must be shorter than the stall, or a run would
give up on candidates that were about to be tried again.

Pure: the observations and the clock come in, a decision goes out.
"""

from __future__ import annotations

import math

import attrs

# How often a progress line is shown while the wait goes on.
REPORT_SECONDS = 15.0
_DRAINED = (
    "the probe queue is drained: every candidate probed or given up, and the catalog built"
    " from what they found"
)


@attrs.frozen
class Queue:
    """One look at the probe queue.

    Attributes:
        candidates: candidates neither probed nor given up (new, or being probed).
        retrying: of those, the ones waiting for a later try (a missing article,
            a server's error).
        pending: catalog keys waiting for a build (probes' outcomes among them).
    """

    candidates: int
    retrying: int
    pending: int

    @property
    def drained(self) -> bool:
        """Every candidate probed or given up, and the catalog built from them."""
        return self.candidates == 0 and self.pending == 0

    def describe(self) -> str:
        """`N candidates left (K waiting to be tried again), P catalog keys to build`."""
        retrying = f" ({self.retrying} waiting to be tried again)" if self.retrying else ""
        return (
            f"{_count(self.candidates, 'candidate')} left{retrying},"
            f" {_count(self.pending, 'catalog key')} to build"
        )


@attrs.frozen
class Waiting:
    """Not drained yet: ask again later; `line`, when set, is a progress line to show."""

    line: str | None = None


@attrs.frozen
class Drained:
    """The wait is over: drained, or `stalled` (nothing moved for the stall time)."""

    left: Queue
    stalled: bool
    line: str


@attrs.define(eq=False)
class DrainWatch:
    """Watches the probe queue after the ranges are done (see the module docstring).

    Attributes:
        stall_seconds: how long the queue may stay as it is before the wait ends.
        report_seconds: how often a progress line is shown.
    """

    stall_seconds: float
    report_seconds: float = REPORT_SECONDS
    _seen: Queue | None = None
    _moved_at: float = 0.0
    _reported_at: float = -math.inf

    def observe(self, queue: Queue, now: float) -> Waiting | Drained:
        """The decision on one look at the queue, taken at `now` (seconds, any clock that
        only goes forward)."""
        if queue.drained:
            return Drained(queue, False, _DRAINED)
        first = self._seen is None
        if queue != self._seen:
            self._seen, self._moved_at = queue, now
        elif now - self._moved_at >= self.stall_seconds:
            return Drained(
                queue,
                True,
                f"stopped waiting for the probe queue: nothing moved for"
                f" {self.stall_seconds:g} s; {queue.describe()} (the next run probes them)",
            )
        if now - self._reported_at < self.report_seconds:
            return Waiting()
        self._reported_at = now
        if first:
            return Waiting(
                f"the ranges are done; waiting for the probe queue: {queue.describe()}"
                f" (given up after {self.stall_seconds:g} s without progress)"
            )
        return Waiting(f"waiting for the probe queue: {queue.describe()}")


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"
