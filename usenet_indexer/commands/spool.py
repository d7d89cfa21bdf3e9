"""`uidx spool import`: put an overview dump into the spool, as the prefetcher would.

Until the spool-prefetcher fills the spool from NNTP, this lets an operator
(or a demo) feed the coordinator's stream from a dump: the lines are cut into
chunks of --chunk-articles articles, each compressed, written atomically and
indexed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from usenet_indexer.commands import positive_int
from usenet_indexer.config import from_process
from usenet_indexer.errors import OutputError
from usenet_indexer.spool.dumps import check_readable, dump_chunks
from usenet_indexer.spool.store import open_spool
from usenet_indexer.store.database import opened
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.spool import SpoolChunk, SpoolIndex


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "spool",
        help="fill the spool from an overview dump",
        description="Fill the coordinator's spool from overview dumps, as the prefetcher does.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    imp = actions.add_parser(
        "import",
        help="cut a dump (plain, gzip, zlib) into spool chunks of a group",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("file", type=Path, metavar="FILE", help="overview lines: plain, gzip or zlib")
    imp.add_argument("--group", required=True, help="the group (added with `uidx groups add`)")
    imp.add_argument(
        "--chunk-articles",
        type=positive_int,
        default=100_000,
        help="articles per chunk (default 100000)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Import the dump.

    Raises:
        InputError: the dump cannot be read.
        OutputError: the spool folder cannot be written.
        DatabaseError: the database cannot be started, reached or migrated.
    """
    settings = from_process(args.config)
    check_readable(args.file)
    spool = open_spool(settings)
    with opened(settings) as pool:
        group_id = GroupStore(pool).id_of(args.group)
        index = SpoolIndex(pool)
        chunks = lines = 0
        for first, last, text, count in dump_chunks(args.file, args.chunk_articles):
            try:
                path, size, codec = spool.write_chunk(args.group, first, last, text)
            except OSError as error:
                raise OutputError.of(error.filename or spool.describe(), error) from error
            index.add(group_id, SpoolChunk(first, last, int(codec), str(path), count), size)
            chunks += 1
            lines += count
    print(f"spooled {lines:,} lines of {args.group} in {chunks} chunks under {spool.describe()}")
    return 0
