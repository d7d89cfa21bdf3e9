"""`uidx nzb RELEASE --out FILE`: a catalog release's NZB, as the newznab API's t=get serves it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from usenet_indexer.commands import output
from usenet_indexer.config import from_process
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.core.nzb import write_nzb
from usenet_indexer.errors import InputError
from usenet_indexer.store.catalog import CatalogTable
from usenet_indexer.store.database import opened


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "nzb",
        help="write a catalog release's NZB",
        description="Write the NZB of a catalog release (its guid: the id in the newznab "
        "feeds, 32 hex digits), rebuilt from the stored fragments.",
    )
    parser.add_argument("release", help="the release's guid (32 hex digits)")
    parser.add_argument("--out", required=True, type=Path, help="the file ('-' for stdout)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write one release's NZB.

    Raises:
        InputError: no catalog release has that guid.
        OutputError: --out cannot be written.
    """
    guid = args.release.strip().lower()
    settings = from_process(args.config)
    with opened(settings) as pool:
        table = CatalogTable(pool)
        row = table.row(guid)
        release = None if row is None else CatalogBuild(pool).release(row)
    if release is None:
        raise InputError(f"no catalog release {args.release[:64]!r} (see uidx catalog build)")
    with output(args.out) as out:
        out.write(write_nzb(release.to_json()))
    files = len(release.files)
    print(f"uidx nzb: {release.name}: {files} files written to {out.shown}", file=sys.stderr)
    return 0
