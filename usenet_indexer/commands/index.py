"""`uidx index`: index overview dumps offline, exactly as an edge indexes a range.

For trying rules on a dump, re-indexing, or checking a provider's data: the
RangeIndexer runs over the input in batches of --batch-articles articles,
the release chunks merge with the coordinator's merge code, and every
release is written as one JSON object per line (optionally as NZB files).

A file in which not one line is overview data (empty, or every line
malformed: a binary, a log, the wrong file) is reported on stderr and the
exit status is 1, unless --allow-empty.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

import attrs
import orjson

from usenet_indexer.commands import Output, output, positive_int
from usenet_indexer.config import default, from_process
from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import MALFORMED, RangeIndexer, indexer_kind
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.core.rules import DEFAULT_RULES, Rule
from usenet_indexer.errors import OutputError
from usenet_indexer.gcpolicy import no_cyclic_gc
from usenet_indexer.spool.dumps import check_readable, last_article, read_blocks

logger = logging.getLogger(__name__)

# Seconds between progress lines on stderr.
PROGRESS_SECONDS = 2.0
# Bytes of JSON lines gathered before a write (see write_releases).
WRITE_BYTES = 1 << 20


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "index",
        help="index overview dumps offline into releases (JSONL, NZB)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="overview lines: plain, gzip or zlib"
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help="releases, one JSON object per line ('-' for stdout)",
    )
    parser.add_argument("--group", default="", help="the group, for lines without an Xref field")
    parser.add_argument(
        "--batch-articles",
        type=positive_int,
        default=default("batch_articles"),
        help=f"articles per batch (default {default('batch_articles')}, as an edge posts them)",
    )
    parser.add_argument(
        "--include-dropped", action="store_true", help="also write releases that a rule dropped"
    )
    parser.add_argument("--nzb-dir", type=Path, help="write one NZB file per kept release here")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="exit 0 even when a file holds no overview data (empty, or every line malformed)",
    )
    parser.set_defaults(run=run)


@attrs.frozen
class FileTally:
    """The lines of one input file: read, and of those malformed."""

    path: Path
    lines: int
    malformed: int

    @property
    def overview_lines(self) -> int:
        """Lines that were overview data (binary segments, replies, text posts)."""
        return self.lines - self.malformed

    def describe(self) -> str:
        """What the warning says of a file without overview data."""
        if not self.lines:
            return f"{self.path} holds no overview data: the file is empty"
        return (
            f"{self.path} holds no overview data: all {self.lines:,} lines are malformed"
            " (is it an overview dump?)"
        )


@attrs.define(eq=False)
class IndexStats:
    """What an offline index run did, for its summary."""

    lines: int = 0
    files: list[FileTally] = attrs.field(factory=list)
    batches: int = 0
    release_chunks: int = 0
    probe_candidates: int = 0
    skipped: Counter[str] = attrs.field(factory=Counter)
    drops: Counter[tuple[str, str]] = attrs.field(factory=Counter)
    drop_segments: Counter[tuple[str, str]] = attrs.field(factory=Counter)

    @property
    def malformed(self) -> int:
        """Lines skipped as malformed, every reason together."""
        return sum(n for reason, n in self.skipped.items() if reason in MALFORMED)

    @property
    def without_overview(self) -> list[FileTally]:
        """The files in which not one line was overview data."""
        return [tally for tally in self.files if not tally.overview_lines]

    def add(self, batch: Batch) -> None:
        self.lines += batch.lines
        self.batches += 1
        self.release_chunks += sum(1 for r in batch.releases if r.dropped is None)
        self.probe_candidates += len(batch.probe_candidates)
        self.skipped.update(dict(batch.skipped))
        for count in batch.rule_counts:
            self.drops[count.rule, count.key] += count.releases
            self.drop_segments[count.rule, count.key] += count.segments


def index_files(
    paths: Sequence[Path],
    *,
    group: str = "",
    batch_articles: int = default("batch_articles"),
    rules: Sequence[Rule] = DEFAULT_RULES,
    include_dropped: bool = False,
    progress: TextIO | None = None,
    pure: bool = False,
) -> tuple[ReleaseMerger, IndexStats]:
    """Index overview dumps the way edges index ranges, and merge the chunks.

    Each file is one range: its lines must be in article order, as a server
    sends them. `pure` runs the indexer's pure-Python loop (RangeIndexer.pure) and
    the merge's pure file figures (ReleaseMerger.pure).

    Raises:
        InputError: a file cannot be read.
    """
    merger = ReleaseMerger(pure=pure)
    stats = IndexStats()
    started = last_report = time.monotonic()
    for path in paths:
        lines_before, malformed_before = stats.lines, stats.malformed
        indexer = RangeIndexer(
            group=group, first=0, rules=rules, keep_dropped=include_dropped, pure=pure
        )
        for block in read_blocks(path):
            number = last_article(block)
            next_article = max(indexer.resume_point, number + 1 if number is not None else 0)
            indexer.add_data(block, next_article)
            if indexer.pending_articles >= batch_articles:
                _absorb(indexer.take(), merger, stats)
            now = time.monotonic()
            if progress is not None and now - last_report >= PROGRESS_SECONDS:
                last_report = now
                lines = stats.lines + indexer.pending_lines
                print(
                    f"uidx index: {path.name}: {lines:,} lines, {lines / (now - started):,.0f} lines/s, "
                    f"{stats.batches} batches, {len(merger):,} releases",
                    file=progress,
                    flush=True,
                )
        _absorb(indexer.finish(), merger, stats)
        stats.files.append(
            FileTally(path, stats.lines - lines_before, stats.malformed - malformed_before)
        )
    return merger, stats


def _absorb(batch: Batch, merger: ReleaseMerger, stats: IndexStats) -> None:
    stats.add(batch)
    merger.add_all(batch.releases)
    for candidate in batch.probe_candidates:
        merger.mark_probe(candidate.release_key)


def write_releases(releases: Iterable[CatalogRelease], out: Output, *, pure: bool = False) -> None:
    """Write releases as JSON lines, made one at a time; the files' segments written
    by the compiled writer where it answers, unless `pure` (CatalogRelease.to_json).

    The lines go out `WRITE_BYTES` or so at a time: a release's line is
    bigger than the stream's buffer, and one system call each cost more
    than joining them.

    Raises:
        OutputError: the file cannot be written.
    """
    pending: list[bytes] = []
    size = 0
    for release in releases:
        line = orjson.dumps(release.to_json(fragments=not pure), option=orjson.OPT_APPEND_NEWLINE)
        pending.append(line)
        size += len(line)
        if size >= WRITE_BYTES:
            out.write(b"".join(pending))
            pending.clear()
            size = 0
    if pending:
        out.write(b"".join(pending))


def make_folder(folder: Path) -> None:
    """Make the NZB folder (and its parents) unless it is there.

    Raises:
        OutputError: it is a file, or it cannot be made.
    """
    if folder.exists() and not folder.is_dir():
        raise OutputError(folder, "is not a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError.of(folder, error) from error


def write_nzbs(releases: Sequence[CatalogRelease], folder: Path) -> int:
    """One NZB file per kept release in `folder` (made already); how many were written.

    Raises:
        OutputError: a file cannot be written.
    """
    from usenet_indexer.core.nzb import nzb_filename, write_nzb

    used: set[str] = set()
    written = 0
    for release in releases:
        if release.dropped is not None:
            continue
        name = nzb_filename(release.name or release.key.hex())
        if name in used:
            name = f"{name[:-4]}.{release.key.hex()[:8]}.nzb"
        used.add(name)
        try:
            (folder / name).write_bytes(write_nzb(release.to_json()))
        except OSError as error:
            raise OutputError.of(folder / name, error) from error
        written += 1
    return written


@attrs.define(eq=False)
class KeptTally:
    """The kept releases written, counted as they go by (they are not kept in memory)."""

    releases: int = 0
    files: int = 0
    probe_candidates: int = 0
    reposts: int = 0

    def count(self, releases: Iterable[CatalogRelease]) -> Iterator[CatalogRelease]:
        """The releases, unchanged, counted on the way."""
        for release in releases:
            if release.dropped is None:
                self.releases += 1
                self.files += len(release.files)
                self.probe_candidates += release.probe_candidate
                self.reposts += release.repost_of is not None
            yield release


def summary(stats: IndexStats, kept: KeptTally, seconds: float) -> dict[str, object]:
    """The figures of a run, as printed at its end."""
    malformed = {k: v for k, v in sorted(stats.skipped.items()) if k in MALFORMED}
    other = {k: v for k, v in sorted(stats.skipped.items()) if k not in MALFORMED}
    return {
        "lines": stats.lines,
        "malformed_skipped": sum(malformed.values()),
        "malformed_by_reason": malformed,
        "not_binary_or_repaired": other,
        "files": kept.files,
        "releases": kept.releases,
        "reposts": kept.reposts,
        "release_chunks": stats.release_chunks,
        "chunks_per_release": (
            round(stats.release_chunks / kept.releases, 3) if kept.releases else 0.0
        ),
        "dropped": {f"{rule}:{key}": n for (rule, key), n in sorted(stats.drops.items())},
        "dropped_segments": {
            f"{rule}:{key}": n for (rule, key), n in sorted(stats.drop_segments.items())
        },
        "probe_candidates": kept.probe_candidates,
        "batches": stats.batches,
        "seconds": round(seconds, 3),
        "lines_per_s": round(stats.lines / seconds) if seconds > 0 else 0,
    }


def _index_and_write(
    args: argparse.Namespace, out: Output, progress: TextIO | None, *, pure: bool
) -> tuple[IndexStats, KeptTally, list[CatalogRelease] | None]:
    """Index args.files and write the releases to `out`: the run's figures, and the
    releases themselves when the NZB files need them."""
    merger, stats = index_files(
        args.files,
        group=args.group,
        batch_articles=args.batch_articles,
        include_dropped=args.include_dropped,
        progress=progress,
        pure=pure,
    )
    kept = KeptTally()
    # Built and written one at a time (a release's segment lists are the
    # biggest thing in memory), unless the NZB files need them again.
    counted = kept.count(merger.releases())
    releases = list(counted) if args.nzb_dir is not None else None
    write_releases(counted if releases is None else releases, out, pure=pure)
    return stats, kept, releases


def run(args: argparse.Namespace) -> int:
    """Index the files and write what was found.

    Returns:
        0; 1 when a file held no overview data (unless --allow-empty).

    Raises:
        InputError: a file cannot be read (checked for all before any is indexed).
        OutputError: --out or --nzb-dir cannot be written (likewise).
    """
    started = time.monotonic()
    progress = None if args.quiet else sys.stderr
    # The one setting `uidx index` reads (UIDX_PURE_INDEXER): the tests run both loops.
    pure = from_process(args.config).pure_indexer
    for path in args.files:
        check_readable(path)
    if args.nzb_dir is not None:
        make_folder(args.nzb_dir)
    # Opened first: a mistake in --out shows before the indexing, not after it.
    with output(args.out) as out, no_cyclic_gc():
        # Once the input and output were found good: a mistake is the one line on stderr.
        logger.info("indexer: %s", indexer_kind(pure))
        # The merger is let go inside (by its counts): the first collection after
        # this block walks every object alive then, and that is no longer all of it.
        stats, kept, releases = _index_and_write(args, out, progress, pure=pure)
    if args.nzb_dir is not None and releases is not None:
        written = write_nzbs(releases, args.nzb_dir)
        print(f"uidx index: {written:,} NZB files in {args.nzb_dir}", file=sys.stderr)
    figures = summary(stats, kept, time.monotonic() - started)
    _print_summary(figures)
    return _warn_without_overview(stats.without_overview, allowed=args.allow_empty)


def _warn_without_overview(tallies: Sequence[FileTally], *, allowed: bool) -> int:
    # After the summary, so that it is the last thing on the terminal.
    for tally in tallies:
        print(f"uidx index: warning: {tally.describe()}", file=sys.stderr)
    if tallies and not allowed:
        print(
            "uidx index: exit status 1: a file without overview data is taken for a mistake"
            " (--allow-empty accepts it)",
            file=sys.stderr,
        )
        return 1
    return 0


def _print_summary(figures: dict[str, object]) -> None:
    out = sys.stderr
    print(
        f"uidx index: {figures['lines']:,} lines in {figures['seconds']} s ({figures['lines_per_s']:,} lines/s), "
        f"{figures['batches']} batches",
        file=out,
    )
    print(
        f"  malformed lines skipped: {figures['malformed_skipped']:,} {figures['malformed_by_reason']}",
        file=out,
    )
    print(f"  not binary / repaired:   {figures['not_binary_or_repaired']}", file=out)
    print(
        f"  releases: {figures['releases']:,} with {figures['files']:,} files"
        f" ({figures['reposts']:,} of them reposts); "
        f"{figures['release_chunks']:,} release chunks ({figures['chunks_per_release']} per release)",
        file=out,
    )
    print(f"  dropped by rule:key (releases): {figures['dropped']}", file=out)
    print(f"  dropped by rule:key (segments): {figures['dropped_segments']}", file=out)
    print(f"  probe candidates: {figures['probe_candidates']:,}", file=out)
    print(orjson.dumps({"summary": "index", **figures}).decode(), file=out)
