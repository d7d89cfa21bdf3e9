"""`uidx catalog export|build`: the catalog as JSON lines (the schema of `uidx index`);
the searchable catalog the newznab API serves, built now."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from usenet_indexer.commands import output, seconds
from usenet_indexer.commands.index import write_releases
from usenet_indexer.config import TEN_YEARS_SECONDS, from_process
from usenet_indexer.coordinator.catalog_build import CatalogBuild
from usenet_indexer.store.catalog import CatalogTable
from usenet_indexer.store.database import opened


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "catalog",
        help="export or build the catalog",
        description="Export the coordinator's catalog, or build its searchable form.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    export_help = "every release as one JSON object per line, in the schema of `uidx index`"
    export = actions.add_parser("export", help=export_help, description=__doc__)
    export.add_argument("--out", required=True, type=Path, help="the file ('-' for stdout)")
    build = actions.add_parser(
        "build",
        help="build the whole searchable catalog again now (the coordinator follows the batches)",
        description="Merge every stored fragment and write the searchable catalog the newznab "
        "API serves (the coordinator does so by itself, release by release, as batches are "
        "stored). A release is shown once complete, or once quiet for --quiet-seconds.",
    )
    build.add_argument(
        "--quiet-seconds",
        # At most ten years, as the setting (config's bound): the quiet time is taken
        # from now (a date), and an incomplete release quiet for longer is long
        # complete or gone.
        type=seconds(0, TEN_YEARS_SECONDS),
        help="show incomplete releases that got no chunk for this long "
        "(default: the catalog_quiet_seconds setting; 0 shows every release now)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Export the catalog.

    Raises:
        OutputError: --out cannot be written (found before the database is asked).
        DatabaseError: the database cannot be started, reached or migrated.
    """
    settings = from_process(args.config)
    if args.action == "build":
        # Both bounded where they are read (the option's type, the settings).
        quiet = settings.catalog_quiet_seconds if args.quiet_seconds is None else args.quiet_seconds
        with opened(settings) as pool:
            CatalogBuild(pool).everything(quiet)
            states = CatalogTable(pool).states()
        print(
            f"uidx catalog: {states.shown:,} releases in the searchable catalog"
            f" ({states.whole:,} whole, {states.repairable:,} repairable,"
            f" {states.broken:,} broken; {states.waiting:,} incomplete ones shown once quiet"
            f" for {quiet:g} s)",
            file=sys.stderr,
        )
        return 0
    with output(args.out) as out:
        with opened(settings) as pool:
            releases = CatalogBuild(pool).export()
        write_releases(releases, out)
    print(f"uidx catalog: {len(releases):,} releases written to {out.shown}", file=sys.stderr)
    return 0
