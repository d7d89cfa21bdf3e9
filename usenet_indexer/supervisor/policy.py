"""The supervisor's restart policy: pure code, time comes in as an argument.

Theory of operation
-------------------
The arbiter reaps a worker and asks `decide(exit, history, now)` what to do
with its slot. `history` is that slot's earlier exits, oldest first. The
answer is one of:

- `Restart(after_seconds)`: start a new worker in the slot after a pause.
  The pause doubles with every crash in a row (1, 2, 4 ... 60 s by default)
  and falls back to the first pause once a worker has run for
  `healthy_after_seconds`: a worker that crashes once a day restarts at
  once, one that crashes on every start backs off.
- `Retire()`: the worker exited 0 on its own, so it finished its work (for
  example `uidx edge --ranges N`); the slot stays empty. Starting it again
  would only repeat work that is done.
- `Halt(reason, exit_status)`: stop every worker and exit non-zero. A worker
  that exits with `EXIT_STARTUP_ERROR` says that it cannot start (bad
  settings, a rejected token): no restart can fix that. Neither can anything
  fix a worker that dies within `early_exit_seconds` of its start
  `early_exits_to_halt` times in a row, whatever its status: restarting it
  for ever would be a crash loop that hides the error in the logs.

No imports of os, time, signal or trio: the tests drive it with plain numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

# "A start-up error: do not restart me." 78 is EX_CONFIG of sysexits.h,
# the status daemons use for a configuration error; systemd units name it
# in RestartPreventExitStatus so systemd does not restart the supervisor
# either.
EXIT_STARTUP_ERROR = 78

# The supervisor's own status when it halts on a crash loop (a generic
# failure: systemd's Restart=on-failure may try again later, slowly).
EXIT_CRASH_LOOP = 1


@attrs.frozen
class WorkerExit:
    """One worker process that ended.

    Attributes:
        slot: the worker's slot (0 .. processes-1).
        pid: its process id.
        status: its exit status, or minus the signal number that killed it
            (the convention of `subprocess.Popen.returncode`).
        started_at: when it was started (seconds on the arbiter's clock).
        ended_at: when it was reaped (same clock).
    """

    slot: int
    pid: int
    status: int
    started_at: float
    ended_at: float

    @property
    def ran_seconds(self) -> float:
        """How long the worker ran."""
        return max(0.0, self.ended_at - self.started_at)


@attrs.frozen
class Restart:
    """Start a new worker in the slot after `after_seconds`."""

    after_seconds: float


@attrs.frozen
class Retire:
    """The worker finished its work (exit status 0): leave the slot empty."""


@attrs.frozen
class Halt:
    """Stop all workers and exit with `exit_status`; `reason` goes to the log."""

    reason: str
    exit_status: int


Decision = Restart | Retire | Halt


@attrs.frozen
class RestartPolicy:
    """How the supervisor answers a worker's exit.

    Attributes:
        first_delay_seconds: the pause before the first restart of a slot
            (1 s: long enough not to spin, short enough not to be noticed).
        max_delay_seconds: the longest pause (60 s: a coordinator that is
            down for a while is asked about once a minute per slot).
        healthy_after_seconds: a worker that ran this long was fine; its
            crash starts the doubling again from the first pause.
        early_exit_seconds: a worker that dies sooner than this after its
            start died starting up.
        early_exits_to_halt: this many early deaths in a row halt the
            supervisor (5 with the default pauses is about 15 s of trying).
    """

    first_delay_seconds: float = 1.0
    max_delay_seconds: float = 60.0
    healthy_after_seconds: float = 60.0
    early_exit_seconds: float = 10.0
    early_exits_to_halt: int = 5

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.first_delay_seconds <= self.max_delay_seconds:
            raise ValueError("need 0 <= first_delay_seconds <= max_delay_seconds")
        if self.early_exits_to_halt < 1:
            raise ValueError("early_exits_to_halt must be at least 1")


DEFAULT_POLICY = RestartPolicy()


def decide(
    exit: WorkerExit,
    history: Sequence[WorkerExit],
    now: float,
    policy: RestartPolicy = DEFAULT_POLICY,
) -> Decision:
    """What to do with a slot whose worker ended.

    Args:
        exit: the worker that ended (not stopped by the supervisor).
        history: the slot's earlier exits, oldest first (may be trimmed to
            the last few dozen; only the tail counts).
        now: the arbiter's clock now; the pause counts from `exit.ended_at`,
            so a decision taken late waits only for what is left of it.
        policy: the pauses and limits.

    Returns:
        Restart, Retire or Halt (see the module's docstring).
    """
    if exit.status == EXIT_STARTUP_ERROR:
        return Halt(
            f"worker {exit.slot} (pid {exit.pid}) reported a start-up error "
            f"(exit status {EXIT_STARTUP_ERROR})",
            EXIT_STARTUP_ERROR,
        )
    if exit.status == 0:
        return Retire()
    early = _streak(exit, history, policy.early_exit_seconds)
    if early >= policy.early_exits_to_halt:
        return Halt(
            f"worker {exit.slot} died within {policy.early_exit_seconds:g} s of its start "
            f"{early} times in a row (last exit status {exit.status})",
            EXIT_CRASH_LOOP,
        )
    crashes = _streak(exit, history, policy.healthy_after_seconds)
    delay = _delay(crashes, policy)
    return Restart(max(0.0, exit.ended_at + delay - now))


def _streak(exit: WorkerExit, history: Sequence[WorkerExit], shorter_than: float) -> int:
    # How many runs in a row, ending with `exit`, lasted less than `shorter_than`.
    count = 0
    for run in (exit, *reversed(history)):
        if run.ran_seconds >= shorter_than:
            break
        count += 1
    return count


def _delay(crashes: int, policy: RestartPolicy) -> float:
    # 0 or 1 crash in a row: the first pause; then doubling, capped. The
    # exponent is capped too, so a long history cannot overflow a float.
    exponent = min(max(crashes - 1, 0), 64)
    return min(policy.first_delay_seconds * 2.0**exponent, policy.max_delay_seconds)
