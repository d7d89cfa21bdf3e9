"""`uidx generate`: write synthetic overview data of a binary group and its ground truth.

The lines are those a news server sends for OVER/XOVER (one per line, gzip
compressed when the file name ends in .gz), made by
`usenet_indexer.synth.generator`; the truth file (JSON lines, see
`usenet_indexer.synth.truth.Truth.load`) says which release, file and
segment every article is, so that an index of the lines can be scored.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from isal import igzip

from usenet_indexer.commands import STDOUT, output, positive_int
from usenet_indexer.errors import ConfigError
from usenet_indexer.gcpolicy import no_cyclic_gc
from usenet_indexer.synth.generator import (
    DEFAULT_FIRST_ARTICLE,
    DEFAULT_GROUP,
    PROFILES,
    GeneratorConfig,
    OverviewGenerator,
)
from usenet_indexer.synth.truth import BinaryWriter, Truth
from usenet_indexer.wire.batchwire import MAX_BIGINT

logger = logging.getLogger(__name__)

# Lines joined per write: large writes keep the compressor busy, and 64k
# lines (~15 MB) is still little memory.
WRITE_LINES = 65_536
# A progress line on stderr every this many lines.
PROGRESS_LINES = 1_000_000
# isal compression level: 1 is ~2x faster than the default 2 and barely larger.
GZIP_LEVEL = 1


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `uidx generate`.

    Args:
        subparsers: the `uidx` subcommand registry.
    """
    parser = subparsers.add_parser(
        "generate",
        help="write synthetic overview lines of a binary group and their ground truth",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--articles", type=positive_int, required=True, help="lines to write")
    parser.add_argument("--out", type=Path, required=True, help="overview file (.gz: gzip)")
    parser.add_argument(
        "--truth",
        type=Path,
        help="truth file, JSON lines (.gz: gzip); default: OUT without .gz plus .truth.jsonl.gz"
        " (required with --out -)",
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--group", default=DEFAULT_GROUP, help=f"group (default {DEFAULT_GROUP})")
    parser.add_argument(
        "--first-article",
        type=positive_int,
        default=DEFAULT_FIRST_ARTICLE,
        help=f"first article number (default {DEFAULT_FIRST_ARTICLE})",
    )
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        default="default",
        help="default: the project's own upload mix; posting-tools: uploads as Nyuu, ngPost, "
        "NewsUP, PowerPost, JBinUp, newsmangler and GoPostStuff write them (default: default)",
    )
    parser.set_defaults(run=run)


def default_truth_path(out: Path) -> Path:
    """Where the truth goes when --truth is not given.

    Args:
        out: the overview file.

    Returns:
        `out` without a .gz suffix, plus `.truth.jsonl.gz`.
    """
    name = out.name.removesuffix(".gz")
    return out.with_name(f"{name}.truth.jsonl.gz")


def run(args: argparse.Namespace) -> int:
    """Generate the lines and the truth and write both.

    Args:
        args: parsed arguments (articles, out, truth, seed, group, first_article, profile).

    Returns:
        0.

    Raises:
        OutputError: an output file cannot be written (both are opened
            before the lines are made).
        ConfigError: the articles would pass the largest article number, or
            --out - without --truth (or with --truth -).
    """
    _check(args)
    config = GeneratorConfig(
        articles=args.articles,
        seed=args.seed,
        group=args.group,
        first_article=args.first_article,
        profile=args.profile,
    )
    truth_path: Path = args.truth or default_truth_path(args.out)
    generator = OverviewGenerator(config)
    started = time.monotonic()
    # The run builds ~100k long-lived objects (uploads, files, their lists)
    # and frees nothing worth a cycle collection until it ends; the collector
    # rescanning them costs 10-25% of the run. This command does nothing else.
    # Both opened before the work and kept only together: no lines without their truth.
    with no_cyclic_gc(), _output(args.out) as stream, _output(truth_path) as truth_stream:
        _write_lines(stream, generator.lines())
        elapsed = time.monotonic() - started
        truth = generator.truth()
        truth.dump(truth_stream)
    # On stderr: with --out -, stdout is the lines.
    print(_summary(truth, args.out, truth_path, elapsed), file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> None:
    last = args.first_article + args.articles - 1
    if last > MAX_BIGINT - 1:
        # Past a bigint, no database takes the lines (one below: a range's resume point).
        raise ConfigError(
            "--first-article",
            f"the last article would be {last}, past the largest article number {MAX_BIGINT - 1}",
        )
    if str(args.out) == STDOUT and args.truth is None:
        # The default truth is named after OUT; a file named '-.truth.jsonl.gz' is no one's.
        raise ConfigError("--truth", "give it with --out - (the lines go to standard output)")
    if str(args.out) == STDOUT and str(args.truth) == STDOUT:
        raise ConfigError("--truth", "the lines go to standard output already (--out -)")


def _write_lines(stream: BinaryWriter, lines: Iterator[bytes]) -> None:
    written = 0
    while chunk := list(itertools.islice(lines, WRITE_LINES)):
        stream.write(b"\n".join(chunk) + b"\n")
        before, written = written, written + len(chunk)
        if written // PROGRESS_LINES > before // PROGRESS_LINES:
            logger.info("generate: %d lines written", written)


@contextlib.contextmanager
def _output(path: Path) -> Iterator[BinaryWriter]:
    # Written whole or not at all (commands.Output); .gz is compressed on the way.
    with output(path) as out:
        if not path.name.endswith(".gz"):
            yield out
            return
        # isal ships no annotations for IGzipFile's constructor.
        compressed = igzip.IGzipFile(fileobj=out, mode="wb", compresslevel=GZIP_LEVEL)  # type: ignore[no-untyped-call]
        with compressed:
            yield compressed


def _summary(truth: Truth, out: Path, truth_path: Path, elapsed: float) -> str:
    kinds = Counter(release.kind for release in truth.releases)
    segments = sum(release.segment_count for release in truth.releases)
    rate = truth.lines / elapsed if elapsed > 0 else 0.0
    by_kind = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
    return (
        f"{truth.lines} lines ({rate:,.0f}/s) to {out}; truth to {truth_path}: "
        f"{len(truth.releases)} releases ({by_kind}), {segments} segments, {len(truth.junk)} junk articles"
    )
