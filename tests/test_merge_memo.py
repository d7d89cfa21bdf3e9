"""What builds before made, kept (core/catalog.Memo, merge.Memo): a pending build merges
again the keys around those a batch touched, most of them unchanged. With a memo the
releases, rows and probes must be exactly those made without one, build after build,
while a release whose chunks are the same objects again is not made again."""

from __future__ import annotations

import random
import weakref
from datetime import UTC, datetime

import attrs
import pytest

from usenet_indexer.core import catalog, merge
from usenet_indexer.core.batch import ReleaseChunk
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.renames import Shown
from usenet_indexer.synth.generator import GeneratorConfig, generate

FIRST = 7_000_000
CHANGED = datetime(2024, 1, 1, tzinfo=UTC)


def batches(profile: str) -> list[list[ReleaseChunk]]:
    """The release chunks of generated lines, a batch every 700 lines (an upload's
    chunks in several batches; reposts, re-sends and parts of uploads among them)."""
    generated = generate(GeneratorConfig(articles=12_000, seed=5, profile=profile))
    lines = [line for line in generated.lines if line.split(b"\t", 1)[0].isdigit()]
    indexer = RangeIndexer(group=generated.truth.group, first=FIRST)
    out = []
    for at in range(0, len(lines), 700):
        indexer.add_data(b"\n".join(lines[at : at + 700]) + b"\n", FIRST + at + 700)
        out.append([c for c in indexer.take().releases if c.dropped is None])
    return out


def made(
    chunks: list[ReleaseChunk], memo: catalog.Memo | None
) -> tuple[list[Shown], list[catalog.CatalogEntry], list[tuple[bytes, str, str]]]:
    shown = catalog.merged(chunks, [], {}, memo)
    kept = catalog.kept(shown)
    changed = {key: CHANGED for s in kept for key in s.release.sources}
    entries = [catalog.entry(s, changed, {}, None, memo) for s in kept]
    return shown, entries, catalog.more_probes(kept, {}, {}, None, memo)


@pytest.mark.parametrize(
    "memo",
    [
        catalog.Memo(),
        # Small enough to be dropped whole every few builds.
        catalog.Memo(limit=300, merge=merge.Memo(segments=20_000, uploads=300)),
    ],
    ids=["default", "dropped"],
)
def test_builds_with_a_memo_make_what_builds_without_one_make(memo: catalog.Memo) -> None:
    rng = random.Random(3)
    stored: dict[bytes, list[ReleaseChunk]] = {}
    before: dict[bytes, object] = {}
    again = 0
    for batch in [*batches("posting-tools"), *batches("default")]:
        for chunk in batch:
            stored.setdefault(chunk.key, []).append(chunk)
        # A build: the touched keys and some others (its closure), their chunks read
        # again as the catalog's reader gives them: fields copied, files the same object.
        keys = {c.key for c in batch} | set(rng.sample(sorted(stored), min(40, len(stored))))
        read = [
            attrs.evolve(chunk, groups=tuple(chunk.groups))
            for key in sorted(keys)
            for chunk in stored[key]
        ]
        shown, entries, probes = made(read, memo)
        plain_shown, plain_entries, plain_probes = made(read, None)
        assert [s.release.to_json() for s in shown] == [s.release.to_json() for s in plain_shown]
        assert [(s.release.sources, s.aliases) for s in shown] == [
            (s.release.sources, s.aliases) for s in plain_shown
        ]
        assert entries == plain_entries
        assert probes == plain_probes
        again += sum(before.get(s.release.key) is s.release for s in shown)
        before = {s.release.key: s.release for s in shown}
    assert again > 100  # releases taken from the memo, not made again
    if memo.merge.segments < 100_000:
        assert memo.merge.cleared > 3


def test_a_chunk_read_again_as_a_new_object_is_merged_again() -> None:
    memo = catalog.Memo()
    chunks = batches("default")[0]
    first, _, _ = made(chunks, memo)
    # The same files in a new tuple, as a fragment unpacked again gives them.
    unpacked_again = [attrs.evolve(c, files=(*c.files,)) for c in chunks]
    second, _, _ = made(unpacked_again, memo)
    assert [s.release.to_json() for s in second] == [s.release.to_json() for s in first]
    assert all(a.release is not b.release for a, b in zip(first, second, strict=True))
    same, _, _ = made(chunks, memo)
    assert all(a.release is b.release for a, b in zip(first, same, strict=True))


def test_without_a_memo_a_release_handed_out_is_not_kept() -> None:
    """`uidx index` merges a whole dump and writes its releases one at a time: each
    must be freed once written, not held until the last (a memo's `built` list kept
    every one alive: peak RSS of bench-index's 1M lines 228 -> 321 MB)."""
    merger = merge.ReleaseMerger()
    for chunks in batches("default"):
        merger.add_all(chunks)
    handed: list[weakref.ref[merge.CatalogRelease]] = []
    for release in merger.releases():
        handed.append(weakref.ref(release))
        del release
        # While the merger goes on, the releases written before are gone (freed by
        # their count: a release makes no reference cycle).
        assert [ref for ref in handed if ref() is not None] == []
    assert len(handed) > 10
