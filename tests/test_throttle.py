"""core/throttle.py: failed key attempts per address, fed times by hand."""

from __future__ import annotations

from usenet_indexer.core.throttle import Throttle, Verdict


def test_free_failures_then_slowed_then_refused_until_the_window_ends() -> None:
    throttle = Throttle(window_seconds=60, free_failures=2, block_after=4, delay_seconds=1.5)
    assert throttle.failed("a", 0.0) == (0.0, False)
    assert throttle.failed("a", 1.0) == (0.0, False)
    assert throttle.check("a", 1.0) == Verdict()
    assert throttle.failed("a", 2.0) == (1.5, True)  # past the free ones: warned once
    assert throttle.failed("a", 3.0) == (1.5, False)
    assert throttle.check("a", 3.0) == Verdict(retry_after=57)
    assert throttle.check("b", 3.0) == Verdict()  # another address is not touched
    assert throttle.check("a", 59.6) == Verdict(retry_after=1)  # never 0
    assert throttle.check("a", 60.0) == Verdict()  # a new window
    assert throttle.failures("a", 60.0) == 0
    assert throttle.failed("a", 60.0) == (0.0, False)


def test_the_table_is_bounded_expired_windows_first_then_the_oldest() -> None:
    throttle = Throttle(window_seconds=10, max_addresses=3)
    throttle.failed("old", 0.0)
    throttle.failed("b", 5.0)
    throttle.failed("c", 6.0)
    throttle.failed("d", 11.0)  # "old" has expired: it goes
    assert [throttle.failures(a, 11.0) for a in ("old", "b", "c", "d")] == [0, 1, 1, 1]
    throttle.failed("e", 12.0)  # full of live windows: the oldest ("b") goes
    assert [throttle.failures(a, 12.0) for a in ("b", "c", "d", "e")] == [0, 1, 1, 1]
