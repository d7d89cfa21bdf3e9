"""What scripts/chaos prepares before its processes run: data, expectations, databases.

- The data: `uidx generate` writes generated overview lines; they are cut
  into one part file per range, at numbered lines. Each part becomes one
  range planned exactly from its first to its last article number, and is
  put into the spool by `uidx spool import`, which cuts chunks that run
  contiguously from the part's first article to its last: so no chunk
  crosses a range's end and no stream waits for an article between two
  imports (a number the generator skipped belongs to no range).
- The expectation: each part indexed in this process the way an edge
  indexes its range, cut where the spool's chunks end (see
  `expected_message_ids`), gives the message-ids the catalog must hold;
  the generator's truth gives those it should hold at best.
- A database per run: created on the private cluster, migrated by `uidx
  groups add`, then the ranges and the nodes (their tokens) made through
  the stores.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import psycopg
from psycopg import sql

from chaos.check import chunk_message_ids
from usenet_indexer.config import Settings
from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.rules import DEFAULT_RULES
from usenet_indexer.spool.dumps import dump_chunks as spool_chunks
from usenet_indexer.store.groups import GroupStore
from usenet_indexer.store.nodes import NodeStore
from usenet_indexer.store.pool import open_pool
from usenet_indexer.store.ranges import RangeStore
from usenet_indexer.synth.truth import Truth

# The chunking of `uidx spool import` itself: the expectation must cut the
# lines exactly where the spool does.
from usenet_indexer.testing.processes import child_env

UIDX = (sys.executable, "-m", "usenet_indexer")
GROUP = "alt.binaries.chaos"


def uidx(args: Sequence[str], env: Mapping[str, str], *, quiet: bool = True) -> str:
    """Run one `uidx` command to its end; its stdout, or SystemExit with its stderr.

    Args:
        args: the arguments after `uidx`.
        env: its environment.
        quiet: keep its stderr (else it goes to ours).

    Returns:
        What it printed on stdout.
    """
    done = subprocess.run(
        [*UIDX, *args],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if quiet else None,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"chaos: uidx {' '.join(args[:2])} failed:\n{done.stderr or ''}")
    return done.stdout


@attrs.frozen
class Part:
    """The lines of one range, in a file of their own."""

    path: Path
    first: int
    last: int
    lines: int


def generate(folder: Path, articles: int, seed: int) -> Path:
    """Generated overview lines (`uidx generate`), as a gzip dump in `folder`, and
    their truth in `folder / "truth.jsonl.gz"`."""
    dump = folder / "overview.gz"
    uidx(
        ["generate", "--articles", str(articles), "--out", str(dump), "--seed", str(seed),
         "--group", GROUP, "--truth", str(folder / "truth.jsonl.gz")],
        child_env(UIDX_HOME=str(folder)),
    )  # fmt: skip
    return dump


def split(dump: Path, folder: Path, count: int) -> list[Part]:
    """Cut the dump into `count` part files of about equal size, each ending with a numbered line.

    The spool import ends a part's last chunk at the number of its last line,
    so that line must have one: a cut goes right after a numbered line. Lines
    without a number (malformed ones) after the last numbered line are left
    out (the import would not keep them either); those at the start of a part
    are kept, and both the import and the offline index skip them.

    Returns:
        The parts in article order.
    """
    with gzip.open(dump, "rb") as stream:
        lines = stream.read().splitlines()
    numbered = [i for i, line in enumerate(lines) if _number(line)]
    if not numbered:
        raise SystemExit("chaos: the generated dump has no numbered line")
    step = -(-len(numbered) // count)
    ends = [numbered[min(k + step, len(numbered)) - 1] + 1 for k in range(0, len(numbered), step)]
    parts: list[Part] = []
    start = 0
    for end in ends:
        chunk = lines[start:end]
        numbers = [n for n in (_number(line) for line in chunk) if n]
        path = folder / f"part-{len(parts):03}.txt"
        path.write_bytes(b"\n".join(chunk) + b"\n")
        parts.append(Part(path, numbers[0], numbers[-1], len(chunk)))
        start = end
    return parts


def _number(line: bytes) -> int:
    head = line.split(b"\t", 1)[0]
    return int(head) if head.isdigit() else 0


def expected_message_ids(parts: Sequence[Part], chunk_articles: int) -> set[str]:
    """The message-ids the edges must store: each part indexed the way an edge does it.

    An edge's batches end where the spool's chunks end (it takes a batch
    after a chunk once `batch_articles` are pending, and the scripts run
    with batch_articles == chunk_articles, so every chunk is one batch; a
    takeover, a stop or a lost stream resume at a batch's end, which is a
    chunk's end too). The executable rule judges each batch's releases on
    the files seen in that batch, so the cuts decide what is kept: the
    expectation is made with the same cuts, from the chunks `uidx spool
    import` writes (its own chunking function), one RangeIndexer per range.

    Returns:
        The message-ids of every kept release chunk of every batch.
    """
    wanted: set[str] = set()
    for part in parts:
        indexer = RangeIndexer(group=GROUP, first=part.first, rules=DEFAULT_RULES)
        for _first, last, text, _lines in spool_chunks(part.path, chunk_articles):
            indexer.add_data(text, last + 1)
            wanted.update(_kept_message_ids(indexer.take()))
        wanted.update(_kept_message_ids(indexer.finish()))
    return wanted


def _kept_message_ids(batch: Batch) -> Iterator[str]:
    return chunk_message_ids(r for r in batch.releases if r.dropped is None)


def truth_message_ids(truth_file: Path) -> set[str]:
    """The message-ids of the generator's releases that no rule drops (not exe floods)."""
    with gzip.open(truth_file, "rb") as stream:
        truth = Truth.load(stream)
    return {
        segment[1]
        for release in truth.releases
        if release.kind != "exe_flood"
        for file in release.files
        for segment in file.segments
    }


@attrs.frozen
class Prepared:
    """A database made ready for a run."""

    url: str
    tokens: tuple[str, ...]
    node_ids: tuple[int, ...]
    range_ids: tuple[int, ...]


def create_database(admin_url: str, name: str) -> None:
    """A new, empty database on the cluster (dropped first if it is there)."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def prepare_database(
    url: str, home: Path, parts: Sequence[Part], nodes: int, *, without_keys: bool = False
) -> Prepared:
    """The group (`uidx groups add`, which migrates), one range per part, `nodes` nodes.

    Args:
        url: the database (created, empty).
        home: the run's UIDX_HOME.
        parts: one range each.
        nodes: how many nodes (tokens) to make.
        without_keys: drop the primary keys of `batches`, `fragments` and
            `rule_counts` (the negative control: they alone refuse an exact
            replay, as a 500).

    Returns:
        The tokens and ids.
    """
    uidx(["groups", "add", GROUP, "--unchecked"], child_env(DATABASE_URL=url, UIDX_HOME=str(home)))
    with open_pool(url, Settings(home=home), max_size=2) as pool:
        group_id = GroupStore(pool).id_of(GROUP)
        ranges = RangeStore(pool)
        range_ids = [
            ranges.plan(group_id, part.first, part.last, part.last - part.first + 1)[0]
            for part in parts
        ]
        store = NodeStore(pool)
        tokens = [store.create(f"chaos-{i}") for i in range(nodes)]
        node_ids = [store.authenticate(token) for token in tokens]
        if without_keys:
            with pool.connection() as conn:
                conn.execute("ALTER TABLE batches DROP CONSTRAINT batches_pkey")
                conn.execute("ALTER TABLE fragments DROP CONSTRAINT fragments_pkey")
                conn.execute("ALTER TABLE rule_counts DROP CONSTRAINT rule_counts_pkey")
    return Prepared(
        url,
        tuple(tokens),
        tuple(node_id for node_id in node_ids if node_id is not None),
        tuple(range_ids),
    )


def spool_import_args(part: Part, chunk_articles: int) -> list[str]:
    """The `uidx` arguments that put one part into the spool."""
    return [
        "spool", "import", str(part.path), "--group", GROUP,
        "--chunk-articles", str(chunk_articles),
    ]  # fmt: skip
