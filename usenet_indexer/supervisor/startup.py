"""A supervisor's own start-up under stop signals, before its arbiter runs.

Theory of operation
-------------------
`uidx standalone` and `uidx coordinator --processes N` start the embedded
cluster in the supervisor process (standalone migrates it too) before the
arbiter runs. A stop signal then (systemd's SIGTERM, a closed terminal's
SIGHUP, Ctrl-C) must end the start-up through the `finally:` that stops the
cluster, not kill the process by the signal's default action and leave the
cluster running with nobody to stop it.

`stop_signals()` sets handlers for the arbiter's STOP_SIGNALS before the
cluster starts. As in the arbiter, a handler only records the signal, in the
queue that becomes the arbiter's (`supervised(..., signals=...)`): a signal
after the command's last look is the arbiter's first stop, taken before it
starts any worker. The command looks at safe points: `check()` raises
StartupStopped, which unwinds through its cleanup. The cluster's start is
never cut short (pg_ctl killed half-way could leave a server running that
this process does not know it started); a signal meanwhile waits for the
next `check()`. The step that may take minutes (the migrations) runs in
`interruptible()`: there a handler also raises KeyboardInterrupt, as
Python's own SIGINT handler does, so that the libraries clean up as they do
after a Ctrl-C (psycopg cancels the statement in the server: the migration
is rolled back now, not once it has run for minutes); it leaves the block as
StartupStopped. When the arbiter returns it puts these handlers back, and
they only record: a second signal cannot cut the cluster's stop short.
"""

from __future__ import annotations

import collections
import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

import attrs

from usenet_indexer.errors import UidxError
from usenet_indexer.supervisor.arbiter import STOP_SIGNALS


class StartupStopped(UidxError):
    """A stop signal came during a supervisor's start-up (a stop, not a failure)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"{signal.Signals(signum).name} during start-up")
        self.signum = signum


@attrs.define(eq=False)
class StartupSignals:
    """The stop signals received so far; see the module's docstring."""

    received: collections.deque[int] = attrs.Factory(collections.deque)
    _armed: bool = False

    def check(self) -> None:
        """A safe point: raise StartupStopped if a stop signal came.

        Raises:
            StartupStopped: one did (the first is named).
        """
        if self.received:
            raise StartupStopped(self.received[0])

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """A long step that a stop signal cuts short (as KeyboardInterrupt inside).

        Raises:
            StartupStopped: a stop signal came before or during the step.
        """
        self.check()
        self._armed = True
        try:
            yield
        except KeyboardInterrupt:
            if not self.received:
                raise
            raise StartupStopped(self.received[0]) from None
        finally:
            self._armed = False
        self.check()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self._armed:
            self._armed = False
            raise KeyboardInterrupt


@contextlib.contextmanager
def stop_signals() -> Iterator[StartupSignals]:
    """The stop signals recorded from now on, until the block ends (the handlers
    there before are put back then).

    Call it in the main thread, before anything the supervisor must stop starts.
    """
    signals = StartupSignals()
    previous = {signum: signal.signal(signum, signals._handle) for signum in STOP_SIGNALS}
    try:
        yield signals
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
