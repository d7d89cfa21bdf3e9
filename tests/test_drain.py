"""What a one-shot run waits for after its ranges (core/drain.py, pure): the probe queue
drained and the catalog built, while the queue moves; its progress lines."""

from __future__ import annotations

import pytest

from usenet_indexer.core.drain import Drained, DrainWatch, Queue, Waiting

STALL = 600.0


def looks(watch: DrainWatch, *seen: tuple[float, Queue]) -> list[Waiting | Drained]:
    return [watch.observe(queue, now) for now, queue in seen]


def test_a_drained_queue_ends_the_wait_at_once() -> None:
    (decision,) = looks(DrainWatch(STALL), (0.0, Queue(0, 0, 0)))
    assert isinstance(decision, Drained)
    assert not decision.stalled
    assert "drained" in decision.line


@pytest.mark.parametrize(
    "queue",
    [Queue(1, 0, 0), Queue(0, 0, 1), Queue(3, 3, 0)],
    ids=["a candidate left", "a key to build", "waiting for retries"],
)
def test_an_open_candidate_or_a_key_to_build_is_waited_for(queue: Queue) -> None:
    (decision,) = looks(DrainWatch(STALL), (0.0, queue))
    assert isinstance(decision, Waiting)


def test_the_first_look_says_what_it_waits_for_and_then_every_few_seconds() -> None:
    watch = DrainWatch(STALL, report_seconds=15.0)
    first, quiet, later = looks(
        watch, (100.0, Queue(420, 3, 12)), (105.0, Queue(300, 3, 5)), (115.0, Queue(120, 0, 2))
    )
    assert first == Waiting(
        "the ranges are done; waiting for the probe queue: 420 candidates left (3 waiting to"
        " be tried again), 12 catalog keys to build (given up after 600 s without progress)"
    )
    assert quiet == Waiting(None)
    assert later == Waiting(
        "waiting for the probe queue: 120 candidates left, 2 catalog keys to build"
    )


def test_a_queue_that_moves_is_waited_for_however_long() -> None:
    watch = DrainWatch(STALL)
    # An hour of probing, a candidate every 500 s: never a stall.
    for step in range(8):
        decision = watch.observe(Queue(100 - step, 0, 0), step * 500.0)
        assert isinstance(decision, Waiting), step
    assert isinstance(watch.observe(Queue(0, 0, 0), 4_000.0), Drained)


def test_a_queue_that_stands_still_is_left_after_the_stall() -> None:
    watch = DrainWatch(STALL)
    stuck = Queue(12, 0, 0)
    waiting = looks(watch, (0.0, stuck), (300.0, stuck), (599.0, stuck))
    assert all(isinstance(d, Waiting) for d in waiting)
    decision = watch.observe(stuck, 600.0)
    assert decision == Drained(
        stuck,
        True,
        "stopped waiting for the probe queue: nothing moved for 600 s; 12 candidates left,"
        " 0 catalog keys to build (the next run probes them)",
    )


def test_a_retry_coming_due_counts_as_progress() -> None:
    watch = DrainWatch(STALL)
    # One candidate waits 240 s for its last try, twice over: the count of those
    # waiting changes when its pause is over, so the stall starts again.
    seen = [(0.0, Queue(1, 1, 0)), (240.0, Queue(1, 0, 0)), (241.0, Queue(1, 1, 0))]
    assert all(isinstance(d, Waiting) for d in looks(watch, *seen))
    assert isinstance(watch.observe(Queue(1, 1, 0), 800.0), Waiting)
    assert isinstance(watch.observe(Queue(1, 1, 0), 841.0), Drained)


def test_one_candidate_and_one_key_are_counted_in_the_singular() -> None:
    assert Queue(1, 1, 1).describe() == (
        "1 candidate left (1 waiting to be tried again), 1 catalog key to build"
    )
