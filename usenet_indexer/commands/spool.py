"""`uidx spool import`: put an overview dump into the spool, as the prefetcher would.

Until the spool-prefetcher fills the spool from NNTP, this lets an operator
(or a demo) feed the coordinator's stream from a dump: the lines are cut into
chunks of --chunk-articles articles, each compressed, written atomically and
indexed. Articles in the spool already (in a chunk, or in a gap: articles
the server did not have) are refused before their chunk is written (the
chunks before them stay imported: the message says which); a file
without overview lines is taken for a mistake, as by `uidx index`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs
import psycopg

from usenet_indexer.commands import positive_int
from usenet_indexer.config import from_process
from usenet_indexer.errors import InputError, OutputError, UidxError
from usenet_indexer.spool.dumps import check_readable, dump_chunks
from usenet_indexer.spool.store import SpoolStore, open_spool
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
    imp.add_argument(
        "--allow-empty",
        action="store_true",
        help="a file without overview lines is no mistake (exit status 0, nothing spooled)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Import the dump.

    Raises:
        InputError: the dump cannot be read, or holds no overview line (unless --allow-empty).
        ConfigError: an S3 spool's bucket is not there, or its keys are refused.
        SpoolStoreError: an S3 spool's store cannot be reached.
        OutputError: the spool folder cannot be written.
        DatabaseError: the database cannot be started, reached or migrated.
        SpooledAlready: part of the dump is spooled already.
    """
    settings = from_process(args.config)
    check_readable(args.file)
    spool = open_spool(settings)
    # An S3 spool's bucket and keys, as the coordinator and the prefetcher ask at
    # their start: a mistyped bucket is named here, not met by the first PUT (which
    # SeaweedFS answers by making the bucket, and AWS S3 with NoSuchBucket).
    spool.check()
    imported = Imported()
    with opened(settings) as pool:
        group_id = GroupStore(pool).id_of(args.group)
        index = SpoolIndex(pool)
        for first, last, text, count in dump_chunks(args.file, args.chunk_articles):
            _refuse_spooled(index, group_id, args.group, first, last, imported)
            if not _import(
                spool, index, group_id, args.group, SpoolChunk(first, last, 0, None, count), text
            ):
                # Indexed by another writer between the check and now.
                _refuse_spooled(index, group_id, args.group, first, last, imported)
            imported.add(first, last, count)
    if not imported.chunks and not args.allow_empty:
        raise InputError(
            f"{args.file} holds no overview lines (is it an overview dump?); nothing spooled"
            " (--allow-empty accepts it)"
        )
    print(
        f"spooled {imported.lines:,} lines of {args.group} in {imported.chunks} chunks"
        f" under {spool.describe()}"
    )
    return 0


class SpooledAlready(UidxError):
    """Articles of the dump are in the group's spool already: in a chunk, or a gap."""


@attrs.define
class Imported:
    """The chunks of this run indexed so far."""

    chunks: int = 0
    lines: int = 0
    first: int | None = None
    last: int | None = None

    def add(self, first: int, last: int, lines: int) -> None:
        self.chunks += 1
        self.lines += lines
        self.first = first if self.first is None else self.first
        self.last = last

    def said(self) -> str:
        if not self.chunks:
            return "nothing spooled"
        return f"spooled before it: {self.chunks} chunks, articles {self.first}..{self.last}"


def _refuse_spooled(
    index: SpoolIndex, group_id: int, group: str, first: int, last: int, imported: Imported
) -> None:
    # Before the chunk is written: a chunk of the same articles would replace
    # (same first and last) or shadow an indexed one, or a gap.
    spooled = index.spooled_in(group_id, first, last)
    if spooled is None:
        return
    # The articles of this chunk that are there, not all of the chunk's.
    both = f"articles {max(first, spooled.first)}..{min(last, spooled.last)} of {group}"
    span = f"{spooled.first}..{spooled.last}"
    if spooled.path is None:
        there = f"are a gap in the spool ({span}: articles the server did not have)"
    else:
        there = f"are spooled already (chunk {span})"
    raise SpooledAlready(f"{both} {there}; {imported.said()}")


def _import(
    spool: SpoolStore, index: SpoolIndex, group_id: int, group: str, chunk: SpoolChunk, text: bytes
) -> bool:
    """Write and index a chunk; False if one starting there was indexed meanwhile (none written)."""
    try:
        path, size, codec = spool.write_chunk(group, chunk.first, chunk.last, text)
    except OSError as error:
        raise OutputError.of(error.filename or spool.describe(), error) from error
    # A chunk file without its index row is never read nor removed: gone unless indexed.
    # Unless a writer that indexed the same articles meanwhile (a second import
    # of the dump) has its row at this very path: the file is then that row's.
    added = False
    try:
        added = index.add_new(group_id, attrs.evolve(chunk, codec=int(codec), path=str(path)), size)
    finally:
        if not added and not _indexed_at(index, group_id, chunk.first, str(path)):
            spool.delete([path])
    return added


def _indexed_at(index: SpoolIndex, group_id: int, first: int, path: str) -> bool:
    """Whether the chunk indexed at `first` is the file at `path` (when the database
    cannot say, it may be: a stray file is kept rather than an indexed one lost)."""
    try:
        return index.path_at(group_id, first) == path
    except psycopg.Error:
        return True
