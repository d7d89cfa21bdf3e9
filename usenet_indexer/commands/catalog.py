"""`uidx catalog export|build`: the catalog as JSON lines (the schema of `uidx index`);
the searchable catalog the newznab API serves, built now."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import attrs

from usenet_indexer.commands import output, seconds
from usenet_indexer.commands.index import PROGRESS_SECONDS, write_releases
from usenet_indexer.config import TEN_YEARS_SECONDS, from_process
from usenet_indexer.coordinator.catalog_whole import WholeCatalog
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.store.catalog import CatalogTable
from usenet_indexer.store.database import opened

# Said before the stored releases are read in posting order (a page of posting time
# at a time, store/posting_order.py).
_ORDERING = "uidx catalog: putting the stored releases in the order they were posted"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "catalog",
        help="export or build the catalog",
        description="Export the coordinator's catalog, or build its searchable form.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    export_help = (
        "every release as one JSON object per line, oldest first, in the schema of `uidx index`"
    )
    export = actions.add_parser("export", help=export_help, description=__doc__)
    export.add_argument("--out", required=True, type=Path, help="the file ('-' for stdout)")
    build = actions.add_parser(
        "build",
        help="build the whole searchable catalog again now (the coordinator follows the batches)",
        description="Merge every stored fragment and write the searchable catalog the newznab "
        "API serves (the coordinator does so by itself, release by release, as batches are "
        "stored), a slice of releases at a time in the order they were posted, beside a "
        "running coordinator's builders; a progress line on stderr every few seconds. A "
        "release is shown once complete, or once quiet for --quiet-seconds.",
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
            print(_ORDERING, file=sys.stderr, flush=True)
            WholeCatalog(pool).build(quiet, Progress())
            states = CatalogTable(pool).states()
        print(
            f"uidx catalog: {states.shown:,} releases in the searchable catalog"
            f" ({states.whole:,} whole, {states.repairable:,} repairable,"
            f" {states.broken:,} broken; {states.waiting:,} incomplete ones shown once quiet"
            f" for {quiet:g} s)",
            file=sys.stderr,
        )
        return 0
    written = Counted()
    with output(args.out) as out, opened(settings) as pool:
        print(_ORDERING, file=sys.stderr, flush=True)
        releases = WholeCatalog(pool).export(Progress())
        write_releases(map(written, releases), out)
    print(f"uidx catalog: {written.count:,} releases written to {out.shown}", file=sys.stderr)
    return 0


@attrs.define(eq=False)
class Progress:
    """Progress lines on `out` (stderr) for each phase of a whole build or export
    (coordinator/catalog_whole.py): the first at once, then one every
    PROGRESS_SECONDS, and the last when the phase ends (unless that line was just
    shown); how many are done, of how many, at what rate since the phase began."""

    out: TextIO = attrs.field(factory=lambda: sys.stderr)
    clock: Callable[[], float] = time.monotonic
    doing: str | None = None
    started: float = 0.0
    shown: float | None = None
    said: tuple[int, int] | None = None

    def __call__(self, doing: str, done: int, total: int, *, last: bool = False) -> None:
        now = self.clock()
        if doing != self.doing:
            self.doing, self.started, self.shown, self.said = doing, now, None, None
        if self.said == (done, total):
            return
        if not last and self.shown is not None and now - self.shown < PROGRESS_SECONDS:
            return
        self.shown, self.said = now, (done, total)
        elapsed = now - self.started
        rate = f", {done / elapsed:,.0f}/s" if elapsed > 0 else ""
        part = f" of {total:,} ({100 * done / total:.0f}%)" if total else ""
        print(f"uidx catalog: {done:,}{part} {doing}{rate}", file=self.out, flush=True)


@attrs.define(eq=False)
class Counted:
    """Counts what passes through it."""

    count: int = 0

    def __call__(self, release: CatalogRelease) -> CatalogRelease:
        self.count += 1
        return release
