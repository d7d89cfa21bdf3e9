"""`uidx status`: groups, ranges by state (the parked ones with why), nodes, throughput,
the catalog's lag and builds, NNTP servers and the spool.

`--json` prints the same as one JSON object whose fields are documented in
docs/status-json.md (its "schema" field is the version of that layout).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from usenet_indexer.config import from_process
from usenet_indexer.core.health import Health, healthy
from usenet_indexer.core.sweep import SweepState
from usenet_indexer.store.builds import BuildRecord, CatalogLag
from usenet_indexer.store.catalog import ReleaseStates
from usenet_indexer.store.database import opened
from usenet_indexer.store.groups import GroupRow
from usenet_indexer.store.nodes import NodeRow
from usenet_indexer.store.ranges import ParkedRange, RangeStateRow
from usenet_indexer.store.servers import ServerReport
from usenet_indexer.store.status import Status, StatusStore, Throughput

# The version of the --json layout (docs/status-json.md): raised when a field
# is removed, renamed or changes its meaning, not when one is added.
SCHEMA = 1
# The least width of a column of names (groups, health subjects): most group names
# fit; a longer one (alt.binaries.multimedia.anime.highspeed is 39) widens it.
NAME_WIDTH = 36

_SUMMARY = "show groups, ranges, nodes, throughput, NNTP servers and the spool"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("status", help=_SUMMARY, description=f"{_SUMMARY}.")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (the fields: docs/status-json.md)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with opened(from_process(args.config)) as pool:
        status = StatusStore(pool).snapshot()
    if args.json:
        print(json.dumps(as_json(status), indent=2))
    else:
        print("\n".join(as_text(status)))
    return 0


# -- text ---------------------------------------------------------------------------


def as_text(status: Status) -> list[str]:
    """The lines `uidx status` prints."""
    # One width for the groups' and the ranges' tables: the longest name in them.
    width = _width([g.name for g in status.groups] + [s.group for s in status.ranges])
    lines = [
        *health_lines(status.health),
        "groups",
        f"  {'group':{width}} {'state':9} {'server high':>14} {'head indexed to':>15}"
        f" {'backfill reached':>16} {'lag':>12} {'lag s':>7}",
    ]
    for g in status.groups:
        lines.append(_group_line(g, width))
        if g.quirk is not None:
            when = f" ({_clock(g.quirk_at)})" if g.quirk_at is not None else ""
            lines.append(f"    server quirk{when}: {g.quirk}")
    lines.append("ranges")
    lines.append(
        f"  {'group':{width}} {'state':8} {'ranges':>7} {'indexed':>14} {'of':>14} {'expired':>8}"
    )
    lines += [
        f"  {s.group:{width}} {s.state:8} {s.ranges:>7,} {s.articles_indexed:>14,}"
        f" {s.articles:>14,} {s.expired:>8,}"
        for s in status.ranges
    ]
    lines += _parked_lines(status.parked)
    lines.append("nodes")
    for n in status.nodes:
        state = "revoked" if n.revoked_at else _plural(n.leases, "lease")
        seen = _moment(n.last_seen) if isinstance(n.last_seen, datetime) else "never"
        lines.append(f"  {n.name:24} {state:12} last seen {seen}")
    lines += _throughput_lines(status.throughput)
    lines += _catalog_lines(status.catalog)
    lines += _sweep_lines(status.sweep)
    lines += _release_lines(status.releases)
    lines.append("nntp servers (as the prefetcher last reported them)")
    if not status.servers:
        lines.append("  none yet (uidx prefetch reports every few seconds)")
    for v in status.servers:
        lines += _server_lines(v)
    spool = status.spool
    lines.append(
        f"spool: {_plural(spool.chunks, 'chunk')}, {spool.bytes / 1e6:,.1f} MB,"
        f" {_plural(spool.lines, 'line')}"
    )
    lines.append("probes (obfuscated releases: one body read for their real names)")
    if not status.probes:
        lines.append("  no candidates yet")
    for p in status.probes:
        lines.append(f"  {p.state:8} {p.outcome or '-':16} {p.candidates:>10,}")
    return lines


def _parked_lines(parked: tuple[ParkedRange, ...]) -> list[str]:
    if not parked:
        return []
    lines = ["parked ranges (refused again and again; `uidx ranges retry ID` plans one again)"]
    for p in parked:
        lines.append(
            f"  range {p.range_id} {p.group} {p.first:,}..{p.last:,} at {p.resume:,}:"
            f" {_plural(p.refusals, 'refusal')}, parked {_clock(p.failed_at)}: {p.reason}"
        )
    return lines


def _width(names: list[str]) -> int:
    return max([NAME_WIDTH, *map(len, names)])


def _group_line(g: GroupRow, width: int) -> str:
    lag = "-" if g.lag is None else f"{g.lag:,}"
    high = "-" if g.high is None else f"{g.high:,}"
    head = g.head_indexed_to if g.head_indexed_to is not None else g.indexed_to
    indexed = "-" if head is None else f"{head:,}"
    seconds = "-" if g.lag_seconds is None else f"{g.lag_seconds:,.0f}"
    return (
        f"  {g.name:{width}} {g.state:9} {high:>14} {indexed:>15} {backfill_reached(g):>16}"
        f" {lag:>12} {seconds:>7}"
    )


def backfill_reached(g: GroupRow) -> str:
    """How far a group's backfill has come, as `uidx status` and `uidx groups list` say
    it: "-" without one, "0/Nd" before its first range is done, else the lowest
    article reached ("(all)" once that is the floor)."""
    if g.backfill_days is None:
        return "-"
    if g.backfill_reached is None:
        return f"0/{g.backfill_days}d"
    reached = f"{g.backfill_reached:,}"
    if g.backfill_floor is not None and g.backfill_reached <= g.backfill_floor:
        reached += " (all)"
    return reached


def _throughput_lines(t: Throughput) -> list[str]:
    minutes = f"{t.lookback_seconds / 60:g} minutes"
    head = f"throughput: the batches stored in the last {minutes}"
    if t.batches == 0 or t.first_stored_at is None or t.last_stored_at is None:
        return [head, "  none"]
    batches = _plural(t.batches, "batch", "batches")
    stored = (
        f"  {batches}, {_plural(t.headers, 'header')}, {_plural(t.release_chunks, 'release chunk')}"
    )
    ago = f"; the last one {t.idle_seconds or 0:,.0f} s ago"
    if t.batches == 1:
        return [
            head,
            f"{stored}, stored at {_clock(t.last_stored_at)}{ago}",
            "  no rate: one batch",
        ]
    window = t.window_seconds or 0.0
    span = f"stored from {_clock(t.first_stored_at)} to {_clock(t.last_stored_at)}"
    rates = "  no rate: all stored at one instant"
    if t.headers_per_second is not None and t.release_chunks_per_second is not None:
        rates = (
            f"  {t.headers_per_second:,.0f} headers/s, {t.release_chunks_per_second:,.0f}"
            f" release chunks/s over those {window:,.1f} s (the batches after the first)"
        )
    return [head, f"{stored}, {span}{ago}", rates]


def _catalog_lines(c: CatalogLag) -> list[str]:
    minutes = f"{c.lookback_seconds / 60:g} minutes"
    lines = [f"catalog: the keys waiting for a build, and the builds of the last {minutes}"]
    if c.oldest_pending_since is None:
        lines.append("  no keys pending")
    else:
        lines.append(
            f"  {_plural(c.pending_keys, 'key')} pending, the oldest for"
            f" {c.oldest_pending_seconds or 0:,.0f} s (since {_clock(c.oldest_pending_since)})"
        )
    merged = ""
    if c.merged_per_pending is not None:
        merged = (
            f", {_plural(c.builds_merged, 'key')} merged"
            f" ({c.merged_per_pending:,.2f} per pending key)"
        )
    lines.append(
        f"  {_plural(c.builds, 'build')}: {_plural(c.builds_pending, 'pending key')} taken"
        f"{merged}, {c.builds_cpu_s:,.2f} CPU s"
    )
    if c.edge_jobs:
        lines.append(f"  {_plural(c.edge_jobs, 'build')} running on edges now")
    if c.last is None or c.last.at is None:
        lines.append("  no build recorded in the last day")
    else:
        lines.append(f"  the last at {_clock(c.last.at)}, {c.last_build_seconds or 0:,.0f} s ago:")
        lines.append(f"    {_build_text(c.last)}")
    return lines


def _sweep_lines(w: SweepState | None) -> list[str]:
    if w is None:
        return []
    if w.cycle_started is None:
        return ["catalog sweep: not begun (catalog_sweep_hours 0, or no coordinator ran since)"]
    cycle = "its first cycle" if not w.cycles else f"cycle {w.cycles + 1:,}"
    ended = "" if not w.cycles else f"; {_plural(w.cycles, 'cycle')} ended"
    lines = [
        f"catalog sweep: {w.position:.0%} through {cycle} (begun {_moment(w.cycle_started)}"
        f"{ended}): every stored release is built again once a cycle"
    ]
    if w.giving_way_since is not None:
        lines.append(
            f"  giving way since {_moment(w.giving_way_since)}: the build is behind the"
            " batches (catalog_max_lag_seconds), the sweep marks nothing until it caught up"
        )
    return lines


def _release_lines(r: ReleaseStates) -> list[str]:
    return [
        "releases: what a downloader makes of them (broken ones are not offered by the"
        " newznab API unless offer_broken_releases)",
        f"  {r.whole:,} whole, {r.repairable:,} repairable (from their par2),"
        f" {r.broken:,} broken; {r.waiting:,} incomplete not shown yet",
    ]


def _build_text(b: BuildRecord) -> str:
    return (
        f"{_plural(b.pending, 'pending key')} taken, {_plural(b.keys, 'key')} merged,"
        f" {_plural(b.written, 'row')} written, {_plural(b.shown, 'row')} shown once quiet,"
        f" {b.cpu_s:,.2f} CPU s, {b.wall_s:,.2f} s (pid {b.pid} on {b.host})"
    )


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _server_lines(v: ServerReport) -> list[str]:
    when = _moment(v.updated_at) if v.updated_at else "-"
    lines = [
        f"  {v.server:32} {v.connections:>3}/{v.connection_limit:<3} connections"
        f" {v.lines_per_second:>10,.0f} lines/s {v.lines:>14,} lines"
        f"  compression {v.compression or 'none':8} {v.errors:>6} errors  at {when}"
    ]
    if v.last_error:
        lines.append(f"    last error: {v.last_error}")
    return lines


def _clock(when: datetime) -> str:
    return f"{when.astimezone(UTC):%H:%M:%S} UTC"


def _moment(when: datetime) -> str:
    return f"{when.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


# -- JSON ---------------------------------------------------------------------------


def as_json(status: Status) -> dict[str, Any]:
    """The --json object (docs/status-json.md, schema 1)."""
    return {
        "schema": SCHEMA,
        "taken_at": _when(status.taken_at),
        "groups": [_group_json(g) for g in status.groups],
        "ranges": [_range_json(s) for s in status.ranges],
        "parked_ranges": [_parked_json(p) for p in status.parked],
        "nodes": [_node_json(n) for n in status.nodes],
        "throughput": _throughput_json(status.throughput),
        "catalog": _catalog_json(status.catalog),
        "catalog_sweep": _sweep_json(status.sweep),
        "releases": {
            "whole": status.releases.whole,
            "repairable": status.releases.repairable,
            "broken": status.releases.broken,
            "waiting": status.releases.waiting,
        },
        "nntp_servers": [_server_json(v) for v in status.servers],
        "health": [_health_json(h) for h in status.health],
        "probes": [
            {"state": p.state, "outcome": p.outcome or None, "candidates": p.candidates}
            for p in status.probes
        ],
        "spool": {
            "chunks": status.spool.chunks,
            "bytes": status.spool.bytes,
            "lines": status.spool.lines,
        },
    }


def health_lines(health: tuple[Health, ...]) -> list[str]:
    """The health section: a line per component not ok (with since when and why), then
    how many are ok."""
    lines = ["health"]
    if not health:
        lines.append(
            "  nothing reported yet (coordinators and prefetchers report every few seconds)"
        )
    problems = [h for h in health if not h.healthy]
    width = _width([h.subject for h in problems])
    for h in problems:
        lines.append(
            f"  {h.component:11} {h.subject:{width}} {h.state.value:20} since {_moment(h.since)}"
            f" ({h.reporter}): {h.detail}"
        )
    ok = healthy(health)
    if ok:
        parts = ", ".join(_plural(n, kind) for kind, n in ok)
        lines.append(f"  ok: {parts}")
    return lines


def _health_json(h: Health) -> dict[str, Any]:
    return {
        "component": h.component,
        "subject": h.subject,
        "state": h.state.value,
        "since": _when(h.since),
        "detail": h.detail,
        "reporter": h.reporter,
        "last_report": _when(h.seen_at),
    }


def _group_json(g: GroupRow) -> dict[str, Any]:
    return {
        "name": g.name,
        "state": g.state,
        "checked_at": _when(g.checked_at),
        "low": g.low,
        "high": g.high,
        "indexed_to": g.indexed_to,
        "lag": g.lag,
        "lag_seconds": g.lag_seconds,
        "enabled": g.enabled,
        "head_indexed_to": g.head_indexed_to,
        "followed_to": g.followed_to,
        "backfill_days": g.backfill_days,
        "backfill_floor": g.backfill_floor,
        "backfill_reached": g.backfill_reached,
        "quirk": g.quirk,
        "quirk_at": _when(g.quirk_at),
        "ranges": g.ranges,
        "ranges_done": g.ranges_done,
        "articles_planned": g.articles_planned,
        "articles_indexed": g.articles_indexed,
    }


def _range_json(s: RangeStateRow) -> dict[str, Any]:
    return {
        "group": s.group,
        "state": s.state,
        "ranges": s.ranges,
        "articles": s.articles,
        "articles_indexed": s.articles_indexed,
        "expired_leases": s.expired,
    }


def _parked_json(p: ParkedRange) -> dict[str, Any]:
    return {
        "id": p.range_id,
        "group": p.group,
        "first": p.first,
        "last": p.last,
        "resume": p.resume,
        "refusals": p.refusals,
        "reason": p.reason,
        "failed_at": _when(p.failed_at),
    }


def _node_json(n: NodeRow) -> dict[str, Any]:
    return {
        "name": n.name,
        "state": "revoked" if n.revoked_at else "active",
        "leases": n.leases,
        "created_at": _when(n.created_at),
        "last_seen": _when(n.last_seen),
        "revoked_at": _when(n.revoked_at),
    }


def _throughput_json(t: Throughput) -> dict[str, Any]:
    return {
        "lookback_seconds": t.lookback_seconds,
        "batches": t.batches,
        "headers": t.headers,
        "release_chunks": t.release_chunks,
        "first_stored_at": _when(t.first_stored_at),
        "last_stored_at": _when(t.last_stored_at),
        "window_seconds": t.window_seconds,
        "headers_per_second": t.headers_per_second,
        "release_chunks_per_second": t.release_chunks_per_second,
        "idle_seconds": t.idle_seconds,
    }


def _catalog_json(c: CatalogLag) -> dict[str, Any]:
    last = c.last
    return {
        "pending_keys": c.pending_keys,
        "oldest_pending_since": _when(c.oldest_pending_since),
        "oldest_pending_seconds": c.oldest_pending_seconds,
        "lookback_seconds": c.lookback_seconds,
        "builds": c.builds,
        "builds_pending_keys": c.builds_pending,
        "builds_keys_merged": c.builds_merged,
        "builds_merged_per_pending_key": c.merged_per_pending,
        "builds_cpu_seconds": c.builds_cpu_s,
        "edge_build_jobs": c.edge_jobs,
        "last_build": None
        if last is None
        else {
            "at": _when(last.at),
            "seconds_ago": c.last_build_seconds,
            "pending_keys": last.pending,
            "keys_merged": last.keys,
            "rows_written": last.written,
            "rows_shown": last.shown,
            "cpu_seconds": last.cpu_s,
            "wall_seconds": last.wall_s,
            "host": last.host,
            "pid": last.pid,
        },
    }


def _server_json(v: ServerReport) -> dict[str, Any]:
    return {
        "server": v.server,
        "connections": v.connections,
        "connection_limit": v.connection_limit,
        "lines": v.lines,
        "lines_per_second": v.lines_per_second,
        "compression": v.compression,
        "errors": v.errors,
        "last_error": v.last_error,
        "updated_at": _when(v.updated_at),
    }


def _sweep_json(w: SweepState | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return {
        "cycles": w.cycles,
        "cycle_started": _when(w.cycle_started),
        "position": w.position,
        "swept_at": _when(w.swept_at),
        "giving_way_since": _when(w.giving_way_since),
    }


def _when(value: object) -> str | None:
    # ISO 8601 in UTC; the stores give aware datetimes (timestamptz) or None.
    if not isinstance(value, datetime):
        return None
    return value.astimezone(UTC).isoformat()
