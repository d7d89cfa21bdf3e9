"""The whole pipeline on several machines (issue 27), every part a real process.

A private INN2 with a generated group; `uidx coordinator --processes 2`; two `uidx
prefetch` processes with two NNTP connections each, sharing the group through their
claims; two edges that have only COORDINATOR_URL and NODE_TOKEN. Run once with the
spool in a folder the coordinator and the prefetchers share, once with it in a bucket
of SeaweedFS (the edges then read the chunks from the bucket through presigned links):
the catalog a user sees (names, sizes, files, categories, posters, groups, dates,
completion) is the same, and every segment INN2 holds is stored once. The harness is
scripts/chaos's (chaos/several.py), which runs it with faults too.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import trio

from chaos.several import (
    NoNewsServer,
    Posted,
    SeveralConfig,
    SeveralOutcome,
    failures,
    posted_group,
    several_machines,
)
from usenet_indexer.testing.objectstore import ObjectStore

ARTICLES = 40_000
CONFIG = SeveralConfig(
    articles=ARTICLES, range_articles=10_000, chunk_articles=1_000, slice_articles=250, seed=5
)


@pytest.fixture(scope="module")
def posted() -> Iterator[Posted]:
    with contextlib.ExitStack() as stack:
        try:
            found = stack.enter_context(posted_group(ARTICLES, CONFIG.seed))
        except NoNewsServer as error:
            if os.environ.get("CI"):
                raise
            pytest.skip(f"INN2 is not available here: {error}")
        assert len(found.lines) == ARTICLES
        yield found


def _assert_clean(outcome: SeveralOutcome) -> None:
    assert failures(outcome, faults=False, s3=False) == [], outcome
    assert outcome.catalog.expected == outcome.catalog.stored > 0
    assert not outcome.other_errors, outcome.other_errors
    # Both prefetchers fetched part of the group.
    assert len(outcome.landed) == 2
    assert min(outcome.landed) > 0, outcome.landed


def test_on_several_machines_an_s3_spool_makes_the_folder_spools_catalog(
    posted: Posted,
    pg_url: str,
    pg_empty_url: str,
    object_store: ObjectStore,
    s3_prefix: str,
    tmp_path: Path,
) -> None:
    on_folder = trio.run(partial(several_machines, tmp_path / "folder", pg_url, posted, CONFIG))
    _assert_clean(on_folder)
    assert (tmp_path / "folder" / "spool").is_dir()

    on_s3 = trio.run(
        partial(
            several_machines, tmp_path / "s3", pg_empty_url, posted, CONFIG,
            store=object_store, prefix=s3_prefix,
        )
    )  # fmt: skip
    _assert_clean(on_s3)
    assert len(on_s3.rows) > 100
    assert on_s3.rows == on_folder.rows
    # Nothing went into a folder; what is in the bucket is what the index names.
    assert not (tmp_path / "s3" / "spool").exists()
    assert on_s3.stray_objects == 0
    assert (
        f"into s3://{object_store.bucket}/{s3_prefix}"
        in (tmp_path / "s3" / "logs" / "prefetcher-0.log").read_text()
    )
