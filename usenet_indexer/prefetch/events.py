"""What the prefetcher tells an observer (a test, a benchmark): values, nothing else.

Besides these, each chunk the scheduler hands out is observed as the
`ChunkJob` itself.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from usenet_indexer.spool.plan import ChunkJob
from usenet_indexer.store.servers import ServerReport

# Called with every event, on the event loop: it must not block.
Observer = Callable[[object], None]


def ignore(_event: object) -> None:
    """The observer when nobody watches."""


@attrs.frozen
class Landed:
    """A chunk in the spool (path None: a gap), for observers."""

    job: ChunkJob
    server: str
    lines: int
    gap: bool


@attrs.frozen
class NotLanded:
    """A chunk read whole did not land (the database or the spool store refused it);
    it is listed again."""

    job: ChunkJob
    server: str
    reason: str


@attrs.frozen
class Reported:
    """The servers' figures went to the database, and the spool was swept."""

    servers: list[ServerReport]
    swept: int
