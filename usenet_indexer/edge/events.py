"""What an edge worker reports as it goes (for a supervisor's status and for tests)."""

from __future__ import annotations

import enum
from collections.abc import Callable

import attrs


class EventKind(enum.Enum):
    """What happened."""

    LEASED = "leased"  # article: the resume point the range starts from
    KEEPALIVE = "keepalive"  # article: the resume point (waiting for the spool)
    STORED = "stored"  # article: the new resume point
    RANGE_DONE = "range done"  # article: the resume point at the end
    BUILT = "built"  # a catalog build job's rows taken (range_id: the job's id; article: 0)


@attrs.frozen
class EdgeEvent:
    """One step of the worker.

    Attributes:
        kind: what happened.
        range_id: the range it happened to (BUILT: the build job's id).
        article: the article it is at (see EventKind).
    """

    kind: EventKind
    range_id: int
    article: int


Observer = Callable[[EdgeEvent], None]


def ignore(event: EdgeEvent) -> None:
    """The default observer: nobody is listening."""
