"""Health an operator can see: each component's state, and since when. Pure.

Theory of operation
-------------------
Processes report what they see, every few seconds, as `Observed` values
under their own name (the reporter: "host:pid"): a prefetcher its NNTP
servers (a login refused, connections refused or unreachable), the groups
no server of its carries (411 from each) and those one of them carries
(ok), and its spool store (writes failing); a coordinator that it is alive,
and its catalog builder (component "catalog") while its builds fail. Each
report is also the reporter's heartbeat (component "prefetcher" or
"coordinator", state ok).
store/health.py keeps one row per (component, subject, reporter) and the
time its state began: a state reported again keeps its `since`.

A reporter that stopped cleanly takes its rows away. One that was killed,
or hangs, stops reporting: `judged` turns its heartbeat row into "silent"
(since its last report) once it is `silent_seconds` old, and leaves out the
rows it reported (what it saw then is no longer known). A group one
prefetcher's servers do not carry is no alarm while another live prefetcher
carries it (each may have providers of its own: the one that carries it
fetches it), so `judged` leaves its "not carried" rows out then. No one
else would take a killed process's rows away (its replacement reports under
a new pid), so each report also drops the rows of every reporter silent for
`SILENT_SHOWN_SECONDS` (store/health.py). `uidx status`, the
status page and /metrics (`uidx_health{component,state}`: how many
subjects are in each state, never a release's name) read the judged rows.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

import attrs


class State(enum.Enum):
    """A component's state; only `OK` is healthy."""

    OK = "ok"
    NOT_CARRIED = "not carried"  # a group: 411 from every server
    LOGIN_REFUSED = "login refused"  # a server: 480/481/502 to AUTHINFO
    REFUSING_CONNECTIONS = "refusing connections"  # a server: 400/502 on connect
    UNREACHABLE = "unreachable"  # a server: no TCP/TLS connection, or no greeting in time
    WRITES_FAILING = "writes failing"  # a spool store: a chunk could not be written
    SILENT = "silent"  # a prefetcher or coordinator that stopped reporting
    BUILDS_FAILING = "builds failing"  # a coordinator's catalog builder: its builds raise


# The components whose rows are heartbeats: one per process, named after it.
HEARTBEATS = frozenset({"prefetcher", "coordinator"})
# A heartbeat older than this is silent (processes report every 5 to 15 s).
SILENT_SECONDS = 60.0
# How long a silent reporter shows as silent before the next report of any process
# drops its rows. Without a bound a process killed by kill -9, the OOM killer or a
# reboot is silent for ever, and an alert on uidx_health{state="silent"} never
# clears after its replacement (a new pid) runs. A day, not a multiple of the report
# interval: a death at night is still there, and alerted on, when an operator next
# looks, while a silent process after a restart is not an alert for ever.
SILENT_SHOWN_SECONDS = 86_400.0


@attrs.frozen
class Observed:
    """What a reporter sees of one subject now.

    Attributes:
        component: what kind of thing: "server", "group", "spool", "prefetcher",
            "coordinator", "catalog" (a coordinator's builder).
        subject: which one: "host:port", a group's name, the spool's URL, a
            process's "host:pid".
        state: its state.
        detail: the error or reason, for a person (empty when ok).
    """

    component: str
    subject: str
    state: State
    detail: str = ""


@attrs.frozen
class Health:
    """A stored health row, as judged for showing.

    Attributes:
        reporter: the process that reported it ("host:pid").
        since: when its state began (the database's clock).
        seen_at: its last report.
    """

    component: str
    subject: str
    state: State
    detail: str
    reporter: str
    since: datetime
    seen_at: datetime

    @property
    def healthy(self) -> bool:
        return self.state is State.OK


def judged(
    rows: Iterable[Health], now: datetime, silent_seconds: float = SILENT_SECONDS
) -> list[Health]:
    """The rows to show: a heartbeat older than `silent_seconds` silent since its last
    report, and the other rows of its reporter left out; a group "not carried" left
    out while a live reporter says it carries it; ordered unhealthy first, then by
    component and subject."""
    rows = list(rows)
    cutoff = now - timedelta(seconds=silent_seconds)
    silent = {r.reporter for r in rows if r.component in HEARTBEATS and r.seen_at < cutoff}
    shown = []
    for row in rows:
        if row.reporter not in silent:
            shown.append(row)
        elif row.component in HEARTBEATS:
            # In UTC, as every time shown (the session's time zone is the server's).
            detail = f"no report since {row.seen_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
            shown.append(attrs.evolve(row, state=State.SILENT, detail=detail, since=row.seen_at))
    carried = {r.subject for r in shown if r.component == "group" and r.healthy}
    shown = [r for r in shown if not (r.state is State.NOT_CARRIED and r.subject in carried)]
    return sorted(shown, key=lambda r: (r.healthy, r.component, r.subject, r.reporter))


def healthy(rows: Iterable[Health]) -> list[tuple[str, int]]:
    """How many subjects of each component are ok, by component: the "ok: ..." summary of
    `uidx status` and the page. A subject two reporters see ok counts once, as in
    `counts` (/metrics): two prefetchers on one NNTP server are one server."""
    ok = {(r.component, r.subject) for r in rows if r.healthy}
    return sorted(Counter(component for component, _ in ok).items())


def counts(rows: Sequence[Health]) -> dict[tuple[str, str], int]:
    """How many subjects are in each (component, state): /metrics' `uidx_health`. A
    subject two reporters see counts once per state it is in."""
    seen = {(r.component, r.subject, r.state.value) for r in rows}
    return dict(Counter((component, state) for component, _, state in seen))
