"""The catalog build, driven: rows read through store/, merged by core/, written back.

`CatalogBuild.pending` takes in what batches touched since the last build
(the coordinator's builder calls it a moment after batches are stored; see
catalog_builder.py), `everything` merges every stored chunk (`uidx catalog
build`). Both hold the build lock (`CatalogTable.locked`) while they read
and write, so two builders (two coordinator processes, or one and the
command) never write over each other's rows.

What a pending build merges again is the closure of the touched keys
(core/catalog.py's `Closure`): their repost chains, the keys their catalog
rows were made with, and their posters' releases posted within
`uploads.TOGETHER_SECONDS` of them, each read through an index. So its
cost follows the batch, whatever the catalog already holds.

Sync code, for a worker thread: psycopg stays inside store/.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core import catalog as core
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.core.renames import Finding, Shown
from usenet_indexer.store.catalog import CatalogRow, CatalogStore, CatalogTable, Written
from usenet_indexer.store.probes import ProbeStore


@attrs.frozen
class Built:
    """What one catalog build did.

    Attributes:
        pending: pending keys taken in.
        keys: release keys merged (all of them for a whole build).
        releases: catalog rows the merge made (releases kept, not dropped).
        written: of those, rows inserted or changed.
        pruned: rows deleted that the merge no longer makes.
        shown: rows shown for having been quiet long enough (and not complete).
        rounds: look-ups the closure took.
        cpu_s: this thread's CPU seconds for the build.
    """

    pending: int
    keys: int
    releases: int
    written: int = 0
    pruned: int = 0
    shown: int = 0
    rounds: int = 0
    cpu_s: float = 0.0


@attrs.define(eq=False)
class CatalogBuild:
    """The catalog build over one database (sync: call it from a worker thread)."""

    pool: ConnectionPool
    table: CatalogTable = attrs.field(init=False)
    store: CatalogStore = attrs.field(init=False)
    probes: ProbeStore = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.table = CatalogTable(self.pool)
        self.store = CatalogStore(self.pool)
        self.probes = ProbeStore(self.pool)

    def pending(self, quiet_seconds: float) -> Built:
        """Merge again what batches stored since the last build touched (their
        closure), and show the rows gone quiet."""
        started = time.thread_time()
        with self.table.locked():
            pending = self.table.pending()
            if not pending:
                return Built(0, 0, 0, shown=self.table.show_quiet(quiet_seconds))
            closure = self.closure(list(pending))
            keys = sorted(closure.keys)
            found = self.probes.found(keys) if keys else {}
            releases = self.shown(keys, found) if keys else []
            written = self._write(releases, found, keys, quiet_seconds, pending)
        return _built(len(pending), len(keys), written, closure.rounds, started)

    def everything(self, quiet_seconds: float) -> Built:
        """Merge every stored chunk and replace the catalog's rows with the releases
        kept (one transaction; a release's grabs stay); fill in the releases' latest
        dates where they are not known (stored before they were kept)."""
        started = time.thread_time()
        with self.table.locked():
            pending = self.table.pending()
            chunks = list(self.store.chunks())
            self.table.fill_latest(core.latest_dates(chunks))
            found = self.probes.found()
            releases = core.merged(chunks, self.store.probed(), found)
            del chunks
            written = self._write(releases, found, None, quiet_seconds, pending)
        return _built(len(pending), len(self.table.changed()), written, 0, started)

    def closure(self, touched: Sequence[bytes]) -> core.Closure:
        """The keys to merge again for `touched` (core/catalog.py), read to its fixpoint."""
        closure = core.Closure.of(touched)
        while wanted := closure.wanted():
            if wanted.spans:
                closure.answer(spans=self.table.spans(wanted.spans))
                continue
            closure.answer(
                rows=self.table.row_keys(wanted.rows) if wanted.rows else set(),
                windows=self.table.window_keys(wanted.windows) if wanted.windows else set(),
            )
        return closure

    def shown(
        self,
        keys: Sequence[bytes] | None = None,
        found: Mapping[bytes, Sequence[Finding]] | None = None,
    ) -> list[Shown]:
        """The releases the chunks of `keys` (every key: None) make, with what probes
        found applied (`found`, read here when not given), and the names they had before."""
        if found is None:
            found = self.probes.found(keys)
        return core.merged(self.store.chunks(keys), self.store.probed(keys), found)

    def export(self, keys: Sequence[bytes] | None = None) -> list[CatalogRelease]:
        """The catalog as merged releases, oldest first, with what probes found applied
        (of the chunks of `keys` only, when given)."""
        return [shown.release for shown in self.shown(keys)]

    def release(self, row: CatalogRow) -> CatalogRelease | None:
        """The release of a catalog row, merged again from its source keys' fragments
        (None if they no longer make it: the catalog is older than the fragments)."""
        return next((r for r in self.export(row.sources) if r.key.hex() == row.guid), None)

    def _write(
        self,
        releases: list[Shown],
        found: Mapping[bytes, Sequence[Finding]],
        keys: list[bytes] | None,
        quiet_seconds: float,
        pending: dict[bytes, int],
    ) -> Written:
        kept = core.kept(releases)
        self._queue_probes(kept, found)
        changed = self.table.changed(keys)
        entries = (core.entry(shown, changed) for shown in kept)
        return self.table.write(entries, quiet_seconds, pending, keys)

    def _queue_probes(self, kept: list[Shown], found: Mapping[bytes, Sequence[Finding]]) -> None:
        """More candidates the merged releases call for (core/renames.py's more_probe);
        `found`: what the probes found for their keys (read once per build)."""
        keys = core.probe_keys(kept)
        if not keys:
            return
        self.probes.add_more(core.more_probes(kept, self.probes.candidates_of(keys), found))


def _built(pending: int, keys: int, written: Written, rounds: int, started: float) -> Built:
    return Built(
        pending=pending,
        keys=keys,
        releases=written.rows,
        written=written.written,
        pruned=written.pruned,
        shown=written.shown,
        rounds=rounds,
        cpu_s=time.thread_time() - started,
    )
