"""`uidx status`: groups, ranges by state, nodes and the spool at a glance."""

from __future__ import annotations

import argparse

from usenet_indexer.config import from_process
from usenet_indexer.store.database import opened
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.store.servers import ServerStore
from usenet_indexer.store.spool import SpoolIndex

_THROUGHPUT = """
    SELECT count(*), coalesce(sum(lines), 0), coalesce(sum(release_chunks), 0)
    FROM batches WHERE stored_at > now() - interval '5 minutes'
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("status", help="groups, ranges, nodes, throughput, spool")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with opened(from_process(args.config)) as pool:
        groups = GroupStore(pool).list()
        states = RangeStore(pool).states()
        nodes = NodeStore(pool).list()
        chunks, spool_bytes, spool_lines = SpoolIndex(pool).size()
        servers = ServerStore(pool).list()
        with pool.connection() as conn:
            row = conn.execute(_THROUGHPUT).fetchone()
    assert row is not None
    batches, lines, release_chunks = (int(v) for v in row)
    print("groups")
    print(f"  {'group':36} {'server high':>14} {'indexed to':>14} {'lag':>12}")
    for g in groups:
        lag = "-" if g.lag is None else f"{g.lag:,}"
        high = "-" if g.high is None else str(g.high)
        indexed = "-" if g.indexed_to is None else str(g.indexed_to)
        print(f"  {g.name:36} {high:>14} {indexed:>14} {lag:>12}")
    print("ranges")
    print(f"  {'group':36} {'state':8} {'ranges':>7} {'indexed':>14} {'of':>14} {'expired':>8}")
    for s in states:
        print(
            f"  {s.group:36} {s.state:8} {s.ranges:>7} {s.articles_indexed:>14,} {s.articles:>14,} {s.expired:>8}"
        )
    print("nodes")
    for n in nodes:
        state = "revoked" if n.revoked_at else f"{n.leases} leases"
        print(f"  {n.name:24} {state:12} last seen {n.last_seen or 'never'}")
    print(
        f"last 5 minutes: {batches} batches, {lines:,} headers ({lines / 300:,.0f}/s),"
        f" {release_chunks:,} release chunks"
    )
    print("nntp servers (as the prefetcher last reported them)")
    if not servers:
        print("  none yet (uidx prefetch reports every few seconds)")
    for v in servers:
        when = v.updated_at.strftime("%Y-%m-%d %H:%M:%S") if v.updated_at else "-"
        print(
            f"  {v.server:32} {v.connections:>3}/{v.connection_limit:<3} connections"
            f" {v.lines_per_second:>10,.0f} lines/s {v.lines:>14,} lines"
            f"  compression {v.compression or 'none':8} {v.errors:>6} errors  at {when}"
        )
        if v.last_error:
            print(f"    last error: {v.last_error}")
    print(f"spool: {chunks:,} chunks, {spool_bytes / 1e6:,.1f} MB, {spool_lines:,} lines")
    return 0
