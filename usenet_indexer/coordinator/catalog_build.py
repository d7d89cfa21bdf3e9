"""The catalog build, driven: rows read through store/, merged by core/, written back.

`CatalogBuild.pending` takes in what batches touched since the last build
(the coordinator's builder calls it a moment after batches are stored; see
catalog_builder.py), `everything` merges every stored chunk (`uidx catalog
build`).

Builds are shared out by poster (store/catalog.py's SHARDS): a pending build
locks some of the shards that have pending keys (at most MAX_SHARDS, ones
no other builder holds: it never waits), takes their pending keys, finds
their closure, and locks the shards the closure reaches beyond (a key
joined with another poster's before); when one of those is held elsewhere
it gives up and tries again later. So builders in several coordinator
processes (or machines) build disjoint posters at once, never write over
each other's rows, and take each pending key once. `everything` waits
for every shard. The locks are session locks of one connection: a
coordinator killed mid-build loses them with its connection, and its
pending keys stay pending (they are deleted in the write's transaction).

What a pending build merges again is the closure of the touched keys
(core/catalog.py's `Closure`): their repost chains, the keys their catalog
rows were made with, and their posters' releases posted within
`uploads.TOGETHER_SECONDS` of them (of each run of their chunks under a
tool's From, `release_times`; under a shared From, only the album parts of
their M), each read through
an index. So its cost follows the
batch, whatever the catalog already holds. A build marks the pending keys
under a shared From whose files are not all an album's (`no_album`), so
later builds' windows pass them by.

A build makes no reference cycles but many objects (files, their figures,
rows): automatic cyclic collection is off while it runs, else its full
collections walk the coordinator's whole heap again and again (about a
sixth of a build's CPU), and what it keeps for the next builds is frozen
when it ends, so the collections between builds do not walk it either
(gcpolicy.BuildCollection).

What a build made is kept for the builds after it (`memo`, core/catalog.py's
Memo): the keys around a batch are mostly those the builds before merged, and
store/catalog.py gives their unchanged fragments back as the same objects, so
a repost chain, upload, row or probe of the very same objects is taken from the
memo instead of made again (identity is its key: nothing else is assumed).

Sync code, for a worker thread: psycopg stays inside store/.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core import catalog as core
from usenet_indexer.core.merge import CatalogRelease
from usenet_indexer.core.renames import Finding, Shown
from usenet_indexer.gcpolicy import BuildCollection
from usenet_indexer.store.catalog import (
    SHARDS,
    CatalogRow,
    CatalogStore,
    CatalogTable,
    ShardLocks,
    Written,
)
from usenet_indexer.store.probes import ProbeStore

# The most shards one pending build takes: with a few builders, each takes
# some of the posters with pending keys, and the rest are left to the others.
MAX_SHARDS = SHARDS // 4


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
        more: pending keys are left that this build did not take (build again).
        busy: the closure reached a shard another builder holds: nothing was done.
    """

    pending: int
    keys: int
    releases: int
    written: int = 0
    pruned: int = 0
    shown: int = 0
    rounds: int = 0
    cpu_s: float = 0.0
    more: bool = False
    busy: bool = False


@attrs.define(eq=False)
class CatalogBuild:
    """The catalog build over one database (sync: call it from a worker thread).

    `pure`: fragments are unpacked, and merged files counted, by the pure code even
    where the compiled ones (wire/_fastfragments, core/_fastmerge) are built
    (settings.pure_indexer).
    """

    pool: ConnectionPool
    pure: bool = False
    table: CatalogTable = attrs.field(init=False)
    store: CatalogStore = attrs.field(init=False)
    probes: ProbeStore = attrs.field(init=False)
    # Kept from build to build: the releases a build merges again, it categorised before.
    categories: core.Categories = attrs.field(init=False, factory=core.Categories)
    # Kept from build to build: what the chunks a build merges again made before.
    memo: core.Memo = attrs.field(init=False, factory=core.Memo)
    # Collection off while a build runs, and what it keeps frozen after.
    collection: BuildCollection = attrs.field(init=False, factory=BuildCollection)

    def __attrs_post_init__(self) -> None:
        self.table = CatalogTable(self.pool)
        self.store = CatalogStore(self.pool, pure=self.pure)
        self.probes = ProbeStore(self.pool)

    def pending(self, quiet_seconds: float) -> Built:
        """Merge again what batches touched since the last build in some shards no other
        builder holds (their closure), and show the rows gone quiet."""
        started = time.thread_time()
        with self.table.shards() as locks, self.collection.build():
            shards = locks.pending_shards()
            orphans = locks.orphans()
            if not shards and not orphans:
                return Built(0, 0, 0, shown=self.table.show_quiet(quiet_seconds))
            # A random order: builders starting together take different shards.
            order = random.sample(shards, len(shards))
            got = locks.try_lock(order)
            mine = [s for s in order if s in got][:MAX_SHARDS]
            locks.unlock(got.difference(mine))
            more = len(mine) < len(shards)
            if shards and not mine:
                return Built(0, 0, 0, more=True, busy=True)
            pending = locks.pending(mine) if mine else {}
            # A generation's key marked by a probe stands for its row's source keys.
            touched = [*pending, *(locks.guid_sources(list(orphans)) if orphans else ())]
            pending.update(orphans)
            closure = self.closure(touched)
            keys = sorted(closure.keys)
            if not self._reach(locks, keys):
                return Built(0, 0, 0, more=True, busy=True)
            # The closure's keys pending in the shards it reached are built here too.
            pending.update(locks.pending_of(keys))
            found = self.probes.found(keys) if keys else {}
            chunks = list(self.store.chunks(keys)) if keys else []
            # The keys whose chunks changed: marked when no longer an album's.
            self.table.mark_no_album(sorted(core.no_albums(c for c in chunks if c.key in pending)))
            releases = (
                core.merged(chunks, self.store.probed(keys), found, self.memo, pure=self.pure)
                if keys
                else []
            )
            del chunks
            written = self._write(releases, found, keys, quiet_seconds, pending)
        return _built(len(pending), len(keys), written, closure.rounds, started, more)

    def drain(self, quiet_seconds: float) -> Built:
        """Build pending keys until none are left that another builder does not hold
        (`pending` over and over); what the builds did, summed."""
        builds = [self.pending(quiet_seconds)]
        while builds[-1].more and not builds[-1].busy:
            builds.append(self.pending(quiet_seconds))
        return Built(
            pending=sum(b.pending for b in builds),
            keys=sum(b.keys for b in builds),
            releases=sum(b.releases for b in builds),
            written=sum(b.written for b in builds),
            pruned=sum(b.pruned for b in builds),
            shown=sum(b.shown for b in builds),
            rounds=sum(b.rounds for b in builds),
            cpu_s=sum(b.cpu_s for b in builds),
            more=builds[-1].more,
            busy=builds[-1].busy,
        )

    def everything(self, quiet_seconds: float) -> Built:
        """Merge every stored chunk and replace the catalog's rows with the releases
        kept (one transaction; a release's grabs stay); fill in the releases' latest
        dates where they are not known (stored before they were kept)."""
        started = time.thread_time()
        with self.table.shards() as locks, self.collection.build():
            locks.lock_all()
            pending = self.table.pending()
            chunks = list(self.store.chunks())
            latest = core.latest_dates(chunks)  # one entry per stored key
            self.table.fill_latest(latest)
            self.table.mark_no_album(sorted(core.no_albums(chunks)))
            found = self.probes.found()
            releases = core.merged(chunks, self.store.probed(), found, pure=self.pure)
            del chunks
            written = self._write(releases, found, None, quiet_seconds, pending)
        return _built(len(pending), len(latest), written, 0, started, False)

    def _reach(self, locks: ShardLocks, keys: Sequence[bytes]) -> bool:
        """Lock the shards of `keys` beyond those held; False (and those given up)
        when another builder holds one."""
        beyond = locks.shards_of(keys) - locks.held
        if not beyond:
            return True
        got = locks.try_lock(beyond)
        if got == beyond:
            return True
        locks.unlock(got)
        return False

    def closure(self, touched: Sequence[bytes]) -> core.Closure:
        """The keys to merge again for `touched` (core/catalog.py), read to its fixpoint."""
        closure = core.Closure.of(touched)
        while wanted := closure.wanted():
            if wanted.spans:
                closure.answer(spans=self.table.spans(wanted.spans))
                continue
            closure.answer(
                rows=self.table.row_keys(wanted.rows) if wanted.rows else set(),
                windows=self.table.window_keys(core.coalesced(wanted.windows))
                if wanted.windows
                else set(),
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
        return core.merged(self.store.chunks(keys), self.store.probed(keys), found, pure=self.pure)

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
        entries = (core.entry(shown, changed, found, self.categories, self.memo) for shown in kept)
        return self.table.write(entries, quiet_seconds, pending, keys)

    def _queue_probes(self, kept: list[Shown], found: Mapping[bytes, Sequence[Finding]]) -> None:
        """More candidates the merged releases call for (core/renames.py's more_probe);
        `found`: what the probes found for their keys (read once per build)."""
        keys = core.probe_keys(kept)
        if not keys:
            return
        asked = self.probes.candidates_by_key(keys)
        self.probes.add_more(core.more_probes(kept, asked, found, self.categories, self.memo))


def _built(
    pending: int, keys: int, written: Written, rounds: int, started: float, more: bool
) -> Built:
    return Built(
        pending=pending,
        keys=keys,
        releases=written.rows,
        written=written.written,
        pruned=written.pruned,
        shown=written.shown,
        rounds=rounds,
        cpu_s=time.thread_time() - started,
        more=more,
    )
