"""`uidx catalog export`: the catalog as JSON lines, in the schema of `uidx index`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from usenet_indexer.commands.index import write_releases
from usenet_indexer.config import from_process
from usenet_indexer.store.catalog import CatalogStore
from usenet_indexer.store.database import opened


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("catalog", help="export the catalog")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    export = actions.add_parser("export", help="every release as one JSON object per line")
    export.add_argument("--out", required=True, type=Path, help="the file ('-' for stdout)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with opened(from_process(args.config)) as pool:
        releases = CatalogStore(pool).export()
    write_releases(releases, args.out)
    print(f"uidx catalog: {len(releases):,} releases written to {args.out}", file=sys.stderr)
    return 0
