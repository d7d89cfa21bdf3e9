"""The catalog build, driven: rows read through store/, merged by core/, written back.

`CatalogBuild.pending` takes in what batches touched since the last build
(the coordinator's builder calls it a moment after batches are stored; see
catalog_builder.py), `around` merges given keys as if batches had touched
them (`uidx catalog build`, a slice of the stored releases at a time:
catalog_whole.py), `everything` merges every stored chunk at once (what
the tests hold a whole build to).

Builds are shared out by poster (store/catalog.py's SHARDS): a pending build
locks some of the shards that have pending keys (at most MAX_SHARDS, ones
no other builder holds: it never waits), takes their pending keys, finds
their closure, and locks the shards the closure reaches beyond (a key
joined with another poster's before); when one of those is held elsewhere
it gives up and tries again later. So builders in several coordinator
processes (or machines) build disjoint posters at once, never write over
each other's rows, and take each pending key once. `around` try-locks the
shards its keys reach too; `everything` waits for every shard. The locks
are session locks of one connection: a coordinator killed mid-build loses
them with its connection, and its pending keys stay pending (they are
deleted in the write's transaction).

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

What probes found is read for the keys merged and, once merged, for the
releases' own keys beyond them: a repost generation's release key is no
stored key, and its candidates and findings are under it. An edge's job
holds what was found of its keys only; a row it makes under such a key that
probes found something for is merged again here when its rows come back.

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

import logging
import operator
import random
import time
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

import attrs
from psycopg_pool import ConnectionPool

from usenet_indexer.core import catalog as core
from usenet_indexer.core.batch import ReleaseChunk
from usenet_indexer.core.completion import State
from usenet_indexer.core.merge import CatalogRelease, Pins
from usenet_indexer.core.renames import Finding, Shown, apply
from usenet_indexer.decode.ids import NO_IDS, MediaIds
from usenet_indexer.gcpolicy import BuildCollection
from usenet_indexer.store.build_jobs import Job
from usenet_indexer.store.catalog import (
    SHARDS,
    UNPACKED_SEGMENTS,
    CatalogRow,
    CatalogStore,
    CatalogTable,
    ShardLocks,
    Written,
)
from usenet_indexer.store.probes import ProbeStore
from usenet_indexer.wire.batchwire import MAX_BIGINT, MAX_INT, MIN_BIGINT, MIN_INT
from usenet_indexer.wire.buildjob import BuildJob, BuildWireError, ReleaseRows

logger = logging.getLogger(__name__)

# The most shards one pending build takes: with a few builders, each takes
# some of the posters with pending keys, and the rest are left to the others.
MAX_SHARDS = SHARDS // 4
# While an edge asked for a build within ASKING_SECONDS, a coordinator's own
# builder leaves keys pending under EDGE_GRACE_SECONDS to the edges (and
# builds those left longer: edges gone, or too busy).
EDGE_GRACE_SECONDS = 30.0
ASKING_SECONDS = 15.0
_INT4 = (MIN_INT, MAX_INT)
_INT8 = (MIN_BIGINT, MAX_BIGINT)
# A row's guid: its release key (16 bytes) in lower-case hex.
GUID_CHARS = 32
_HEX = "0123456789abcdef"
_STATES = tuple(state.value for state in State)
# A row's search name goes into a tsvector (catalog.words), which holds at most
# this many bytes: a longer one fails the row's write. A build's own search names
# are bounded well below it (core.catalog.SEARCHED_CHARS); an edge's are checked.
TSVECTOR_BYTES = (1 << 20) - 1
# A row's ids, each field (MediaIds) in order.
_IDS = operator.attrgetter(*attrs.fields_dict(MediaIds))


class NotTheJobs(BuildWireError):
    """An edge's build names keys its job did not merge (422: nothing is written)."""

    http_status = 422


@attrs.frozen
class Taken:
    """What a build took: the pending keys (with their seq), the keys it merges again
    (their closure), the closure's look-ups, whether pending keys were left, and what
    found the keys merged again (`core.Again`)."""

    pending: dict[bytes, int]
    keys: list[bytes]
    rounds: int
    more: bool
    again: core.Again = attrs.field(factory=core.Again)
    scope: core.Scope | None = None


@attrs.frozen
class _Inputs:
    """What a build of some keys reads beside their chunks (`CatalogBuild._inputs`)."""

    probed: list[bytes]
    found: dict[bytes, list[Finding]]
    changed: dict[bytes, datetime]
    asked: dict[bytes, set[str]]
    pins: dict[bytes, Pins]


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
        segments: the segments of the chunks merged.
        again: of the keys merged, those beyond the pending ones, by what found them
            (repost chains, catalog rows, posters' windows).
        beyond: keys pending again for rows of a tool's From made otherwise beyond
            the build's scope (core/catalog.Scope; `more` then too).
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
    segments: int = 0
    again: core.Again = attrs.field(factory=core.Again)
    beyond: int = 0


@attrs.define(eq=False)
class CatalogBuild:
    """The catalog build over one database (sync: call it from a worker thread).

    `pure`: fragments are unpacked, and merged files counted, by the pure code even
    where the compiled ones (wire/_fastfragments, core/_fastmerge) are built
    (settings.pure_indexer). `edge_builds`: edges are offered builds (`offer`,
    `finish`; settings.edge_builds), and fresh pending keys are left to them.
    `unpacked_segments` and `memo`: what is kept from build to build (see
    CatalogStore and core/catalog.Memo), smaller for a whole build taken a slice
    at a time (coordinator/catalog_whole.py) than for a coordinator's builder.
    """

    pool: ConnectionPool
    pure: bool = False
    edge_builds: bool = False
    unpacked_segments: int = UNPACKED_SEGMENTS
    # Kept from build to build: what the chunks a build merges again made before.
    memo: core.Memo = attrs.field(factory=core.Memo)
    table: CatalogTable = attrs.field(init=False)
    store: CatalogStore = attrs.field(init=False)
    probes: ProbeStore = attrs.field(init=False)
    # Kept from build to build: the releases a build merges again, it categorised before.
    categories: core.Categories = attrs.field(init=False, factory=core.Categories)
    # Collection off while a build runs, and what it keeps frozen after.
    collection: BuildCollection = attrs.field(init=False, factory=BuildCollection)

    def __attrs_post_init__(self) -> None:
        self.table = CatalogTable(self.pool)
        self.store = CatalogStore(
            self.pool, pure=self.pure, unpacked_segments=self.unpacked_segments
        )
        self.probes = ProbeStore(self.pool)

    def pending(self, quiet_seconds: float) -> Built:
        """Merge again what batches touched since the last build in some shards no other
        builder holds (their closure), and show the rows gone quiet. While edges ask
        for builds (`edge_builds`), keys pending under EDGE_GRACE_SECONDS are left to them."""
        started = time.thread_time()
        with self.table.shards() as locks, self.collection.build():
            left_to_edges = self.edge_builds and locks.jobs.edges_asking(ASKING_SECONDS)
            taken = self._take(locks, EDGE_GRACE_SECONDS if left_to_edges else 0.0)
            if taken is None:
                return Built(0, 0, 0, shown=self.table.show_quiet(quiet_seconds))
            if isinstance(taken, Built):
                return taken
            written, segments = self._merged(taken.keys, taken.pending, quiet_seconds, taken.scope)
        built = _built(
            len(taken.pending), len(taken.keys), written, taken.rounds, started, taken.more
        )
        return attrs.evolve(built, segments=segments, again=taken.again)

    def around(self, touched: Sequence[bytes], quiet_seconds: float) -> Built:
        """Merge again `touched` with their closure, as if batches had touched them (a
        whole build's slice, coordinator/catalog_whole.py), under the locks of the shards
        they reach for this build only; the pending keys among them are taken as built.
        A busy Built: another builder holds one of those shards (nothing done)."""
        started = time.thread_time()
        with self.table.shards() as locks, self.collection.build():
            if not self._reach(locks, touched):
                return Built(0, 0, 0, more=True, busy=True)
            # As `_take`: the touched keys with the seq read before their closure, and
            # those it reached but did not look around stay pending where batches
            # stored chunks under them (their fresh chunks' neighbours).
            pending = locks.pending_of(touched)
            closure = self.closure(touched, locks)
            keys = sorted(closure.keys)
            if not self._reach(locks, keys):
                return Built(0, 0, 0, more=True, busy=True)
            _take_reached(locks, pending, keys)
            written, segments = self._merged(keys, pending, quiet_seconds)
        built = _built(len(pending), len(keys), written, closure.rounds, started, False)
        return attrs.evolve(built, segments=segments, again=closure.again())

    def _merged(
        self,
        keys: list[bytes],
        pending: dict[bytes, int],
        quiet_seconds: float,
        scope: core.Scope | None = None,
    ) -> tuple[Written, int]:
        """Merge `keys` again and write what they make (and `pending` as built; in
        `scope`, a pending build's: core/catalog.Scope); what was written, and the
        segments merged."""
        made = core.Made((), (), ())
        segments = 0
        if keys:
            chunks = list(self.store.chunks(keys))
            segments = core.segments_of(chunks)
            made = self._made(chunks, keys, pending, self._inputs(keys))
            del chunks
        return self._write(made, keys, quiet_seconds, pending, scope), segments

    def _made(
        self,
        chunks: Sequence[ReleaseChunk],
        keys: Sequence[bytes],
        pending: Collection[bytes],
        read: _Inputs,
    ) -> core.Made:
        """core.made of a build of `keys`, with what probes found of the merged releases'
        own keys beyond `keys` too: a repost generation's release key is no stored key,
        and its probe candidates and findings are under it (an edge's job has only those
        of `keys`)."""
        releases = core.releases_of(chunks, read.probed, self.memo, pure=self.pure, pins=read.pins)
        found, asked = read.found, read.asked
        beyond = sorted(set(core.found_keys(releases)).difference(keys))
        if beyond:
            found = {**found, **self.probes.found(beyond)}
            asked = {**asked, **self.probes.candidates_by_key(beyond)}
        return core.made_of(
            chunks,
            releases,
            pending,
            found,
            read.changed,
            asked,
            categories=self.categories,
            memo=self.memo,
        )

    def offer(self, node_id: int, lease_seconds: float) -> BuildJob | Built | None:
        """A build for edge `node_id` to do: some shards' pending keys and their closure,
        reserved for it for `lease_seconds`, with what it needs to merge them
        (wire/buildjob.py). None: nothing pending; a busy Built: what is pending is
        held by other builders (or the closure reached their shards)."""
        started = time.monotonic()
        with self.table.shards() as locks:
            jobs = locks.jobs
            jobs.asked(node_id)
            jobs.forget_expired()
            # Every free shard with pending keys: a build merges again the keys
            # around those pending (their closure), so fewer, larger builds merge
            # less (halves made more builds and more look-ups at 10M); each edge
            # takes one job at a time, and the next takes what came since.
            taken = self._take(locks, 0.0, most=SHARDS)
            if not isinstance(taken, Taken):
                return taken
            if not taken.keys:
                return None
            keys = taken.keys
            job_id = jobs.reserve(
                node_id, locks.held, taken.pending, keys, lease_seconds, taken.scope
            )
            releases, stored = self.store.packed(keys)
            read = self._inputs(keys)
            logger.info(
                "node %d: build job %d offered: %d pending keys, %d merged again (%s),"
                " %d fragments; %d look-ups, %.2f s",
                *(node_id, job_id, len(taken.pending), taken.again.total, taken.again),
                *(len(stored), taken.rounds, time.monotonic() - started),
            )
            return BuildJob(
                job_id=job_id,
                releases=ReleaseRows(releases),
                fragments=tuple(stored),
                pending=tuple(taken.pending),
                probed=tuple(read.probed),
                found={k: tuple(v) for k, v in read.found.items()},
                changed=read.changed,
                asked={k: frozenset(v) for k, v in read.asked.items()},
                pins=read.pins,
            )

    def finish(
        self, node_id: int, job_id: int, made: core.Made, quiet_seconds: float
    ) -> Built | None:
        """Write what edge `node_id` made of job `job_id` (None: the job is not the
        node's, or expired: nothing written; its keys stay pending).

        Raises:
            NotTheJobs: rows or marks of keys the job did not merge (nothing written).
        """
        started = time.thread_time()
        with self.table.shards() as locks:
            job = locks.jobs.job(job_id, node_id)
            if job is None:
                return None
            _check(job, made)
            # Waited for: a builder that took a shard just before its reservation
            # was seen gives it up at once.
            locks.lock_in_order(job.shards)
            keys = sorted(job.keys)
            if not locks.jobs.claim(job_id, node_id):
                return None  # expired meanwhile
            # Dated as this coordinator's own rows are: an older edge does not.
            made = core.dated_as_seen(made)
            written = self._write(made, keys, quiet_seconds, dict(job.pending), job.scope)
            if self._found_beyond(made, keys):
                # The job held what probes found of its keys only: a row under a repost
                # generation's key they found something for is made again here.
                written, _ = self._merged(keys, {}, quiet_seconds, job.scope)
        return _built(len(job.pending), len(keys), written, 0, started, False)

    def _found_beyond(self, made: core.Made, keys: Sequence[bytes]) -> bool:
        """Whether probes found something for a row's release key beyond `keys` (a repost
        generation's: no stored key)."""
        beyond = {bytes.fromhex(e.guid) for e in made.entries}.difference(keys)
        return bool(beyond) and bool(self.probes.found(sorted(beyond)))

    def _inputs(self, keys: Sequence[bytes]) -> _Inputs:
        """What a build of `keys` reads beside their chunks, for `core.made` here or on
        an edge (one list: the two builds read the same)."""
        return _Inputs(
            probed=self.store.probed(keys),
            found=self.probes.found(keys),
            changed=self.table.changed(keys),
            asked=self.probes.candidates_by_key(keys),
            pins=self.table.pins(keys),
        )

    def give_back(self, node_id: int, job_id: int) -> bool:
        """End job `job_id` of `node_id` unwritten (its edge stops, or went away as it was
        offered): its keys, still pending, go to the next builder at once, not after the
        job expires. False when it was not the node's, or had ended."""
        with self.table.shards() as locks:
            return locks.jobs.drop(job_id, node_id)

    def abandon_jobs(self) -> int:
        """End every edge's build job (their edges are known to be gone: their keys,
        still pending, go to the next builder at once, not after the jobs expire);
        how many."""
        with self.table.shards() as locks:
            return locks.jobs.drop_all()

    def _take(
        self, locks: ShardLocks, waited_seconds: float, *, most: int = MAX_SHARDS
    ) -> Taken | Built | None:
        """Lock up to `most` shards with keys pending at least `waited_seconds` that no
        other builder holds, and take their pending keys and closure (None: nothing
        pending; a Built: nothing done, build again soon)."""
        shards = locks.pending_shards(waited_seconds)
        orphans = locks.orphans()
        if not shards and not orphans:
            return None
        # A random order: builders starting together take different shards.
        order = random.sample(shards, len(shards))
        got = locks.try_lock(order)
        mine = [s for s in order if s in got][:most]
        locks.unlock(got.difference(mine))
        more = len(mine) < len(shards)
        if shards and not mine:
            return Built(0, 0, 0, more=True, busy=True)
        pending = locks.pending(mine) if mine else {}
        # A generation's key marked by a probe stands for its row's source keys
        # (and is merged itself where a release has it after all).
        touched = [*pending, *orphans, *(locks.guid_sources(list(orphans)) if orphans else ())]
        pending.update(orphans)
        # What batches stored under them, by date: looked around, not their whole spans.
        fresh = locks.fresh(mine) if mine else {}
        closure = self.closure(touched, locks, fresh, scoped=True)
        keys = sorted(closure.keys)
        if not self._reach(locks, keys):
            return Built(0, 0, 0, more=True, busy=True)
        # The closure's keys pending in the shards it reached are built here too, but
        # for those it did not look around (a row or a window found them) whose
        # batches said where they gained files: taken now, their fresh chunks'
        # neighbours would never be looked around (a key's next build looks around
        # from its chunks before its next fresh ones on). They stay pending.
        # Those taken above keep the seq read then: a batch that marked one again
        # since stored chunks the closure may not have looked around (it stays pending).
        unlooked = _take_reached(locks, pending, keys)
        return Taken(
            pending, keys, closure.rounds, more or unlooked, closure.again(), closure.scope
        )

    def drain(self, quiet_seconds: float) -> Built:
        """Build pending keys until none are left that another builder does not hold
        (`pending` over and over); what the builds did, summed."""
        builds = [self.pending(quiet_seconds)]
        while builds[-1].more and not builds[-1].busy:
            builds.append(self.pending(quiet_seconds))
        return summed(builds)

    def everything(self, quiet_seconds: float) -> Built:
        """Merge every stored chunk and replace the catalog's rows with the releases
        kept (one transaction; a release's grabs stay); fill in the releases' latest
        dates where they are not known (stored before they were kept)."""
        started = time.thread_time()
        with self.table.shards() as locks, self.collection.build():
            locks.lock_all()
            # What edges are merging now would be written over this: refused.
            locks.jobs.drop_all()
            pending = self.table.pending()
            chunks = list(self.store.chunks())
            latest = core.latest_dates(chunks)  # one entry per stored key
            self.table.fill_latest(latest)
            found = self.probes.found()
            made = core.made(
                chunks,
                latest,
                self.store.probed(),
                found,
                self.table.changed(),
                self.probes.candidates_by_key(list(latest)),
                categories=self.categories,
                pure=self.pure,
                pins=self.table.pins(),
            )
            del chunks
            written = self._write(made, None, quiet_seconds, pending)
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

    def closure(
        self,
        touched: Sequence[bytes],
        locks: ShardLocks | None = None,
        fresh: Mapping[bytes, tuple[int, int]] | None = None,
        *,
        scoped: bool = False,
    ) -> core.Closure:
        """The keys to merge again for `touched` (core/catalog.py), read to its fixpoint
        (on the connection of the build's `locks` when given: a closure asks a look-up
        per step of its keys' repost chains, a dozen or more). `fresh`: of the touched
        keys, the dates of the chunks batches added since their last build (the
        closure looks around those, `core.Closure`), where known; `scoped`: a pending
        build's, which reads the rows of a tool's From in its scope only (`core.Scope`)."""
        table = self.table
        closure = core.Closure.of(touched, fresh, scoped=scoped)
        while wanted := closure.wanted():
            if wanted.spans:
                closure.answer(spans=table.spans(wanted.spans, locks))
                continue
            if wanted.reach:
                closure.answer(reach=table.row_spans(wanted.reach, closure.scope, locks))
                continue
            closure.answer(
                rows=table.row_keys(wanted.rows, locks, closure.scope) if wanted.rows else set(),
                windows=table.window_keys(wanted.windows, locks) if wanted.windows else set(),
            )
        return closure

    def shown(
        self,
        keys: Sequence[bytes] | None = None,
        found: Mapping[bytes, Sequence[Finding]] | None = None,
        *,
        pinned: bool = True,
    ) -> list[Shown]:
        """The releases the chunks of `keys` (every key: None) make, with what probes
        found applied (`found`; when not given, read for the keys of the releases made,
        a repost generation's among them), and the names they had before. `pinned`:
        each keeps the key its catalog row has (`merge._keyed`); else the key a merge
        of the chunks alone gives it, as `uidx index` does."""
        chunks = self.store.chunks(keys)
        if found is None and keys is None:
            found = self.probes.found()
        pins = self.table.pins(keys) if pinned else None
        releases = core.releases_of(chunks, self.store.probed(keys), pure=self.pure, pins=pins)
        if found is None:
            found = self.probes.found(core.found_keys(releases))
        return apply(releases, found)

    def export(
        self, keys: Sequence[bytes] | None = None, *, pinned: bool = True
    ) -> list[CatalogRelease]:
        """The catalog as merged releases, oldest first, with what probes found applied
        (of the chunks of `keys` only, when given; `pinned`: as `shown`)."""
        return [shown.release for shown in self.shown(keys, pinned=pinned)]

    def release(self, row: CatalogRow) -> CatalogRelease | None:
        """The release of a catalog row, merged again from its source keys' fragments
        (None if they no longer make it: the catalog is older than the fragments)."""
        return next((r for r in self.export(row.sources) if r.key.hex() == row.guid), None)

    def _write(
        self,
        made: core.Made,
        keys: list[bytes] | None,
        quiet_seconds: float,
        pending: dict[bytes, int],
        scope: core.Scope | None = None,
    ) -> Written:
        """Write what a build made: no_album marks, more probe candidates, then the rows
        (and the pending keys taken as built) in one transaction; in `scope`, a pending
        build's (core/catalog.Scope)."""
        self.table.mark_no_album(made.no_album)
        self.probes.add_more(made.probes)
        written = self.table.write(made.entries, quiet_seconds, pending, keys, scope)
        if written.held:
            # An edge's row under another release's guid, or a closure that did not
            # reach every key of a row it made again: that row is not written over.
            logger.warning(
                "catalog build: %d rows kept as they were, made of keys beside the %d merged"
                " (e.g. %s); their keys are built again",
                len(written.held),
                len(keys or ()),
                written.held[0],
            )
        return written


def _take_reached(locks: ShardLocks, pending: dict[bytes, int], keys: Sequence[bytes]) -> bool:
    """Add to `pending` (the keys taken, with the seq read before their closure) the
    pending keys among the closure's `keys`, with their seq, but for those a batch
    stored chunks under (`ShardLocks.stored_of`): the closure reached them through a
    row or a window without looking around them, so they stay pending for their own
    build. Whether any stayed."""
    reached = locks.pending_of(keys)
    others = [key for key in reached if key not in pending]
    unlooked = locks.stored_of(others) if others else set()
    pending.update((key, reached[key]) for key in others if key not in unlooked)
    return bool(unlooked)


def _check(job: Job, made: core.Made) -> None:
    """An edge's rows are of its job's keys only, each guid once (a probe is of a row's
    source key, or of its release's key: a repost generation's may be no stored one)."""
    strays = {k for e in made.entries for k in e.sources if k not in job.keys}
    strays.update(k for k in made.no_album if k not in job.pending)
    guids = [e.guid for e in made.entries]
    rows = {k.hex() for k in job.keys}.union(guids)
    strays.update(k for k, _, _ in made.probes if k.hex() not in rows)
    if strays:
        raise NotTheJobs(f"{len(strays)} keys the job did not merge, e.g. {min(strays).hex()}")
    if len(set(guids)) != len(guids):
        raise NotTheJobs("a catalog row twice")
    for e in made.entries:
        if len(e.guid) != GUID_CHARS or e.guid.strip(_HEX):
            raise NotTheJobs(f"row {e.guid[:40]!r}: a guid is a release key in hex")
        if e.state not in _STATES:
            raise NotTheJobs(f"row {e.guid}: {e.state[:40]!r} is no state ({', '.join(_STATES)})")
        if "\x00" in "".join((e.name, e.search_name, e.poster, *e.groups)):
            raise NotTheJobs(f"row {e.guid}: a NUL in its text")
        # UTF-8 takes at most 4 bytes a character: encoded only when it may be over.
        search = e.search_name
        if 4 * len(search) >= TSVECTOR_BYTES and len(search.encode()) >= TSVECTOR_BYTES:
            raise NotTheJobs(f"row {e.guid}: a search name over {TSVECTOR_BYTES:,} bytes")
        if not (
            _int4(e.category) and _int4(e.files) and _int4(e.season) and _int4(e.episode)
            and (e.ids is NO_IDS or all(map(_int4, _IDS(e.ids))))
            and _INT8[0] <= e.size <= _INT8[1] and _INT8[0] <= e.posted <= _INT8[1]
            and (e.span is None or _INT8[0] <= e.span[0] <= e.span[1] <= _INT8[1])
        ):  # fmt: skip
            raise NotTheJobs(f"row {e.guid[:40]!r}: a number out of its column's range")
        if not 0.0 <= e.completion <= 1.0:  # a fraction (merge.CatalogRelease.complete); NaN too
            raise NotTheJobs(f"row {e.guid[:40]!r}: a completion of {e.completion} is not in 0..1")


def _int4(number: int | None) -> bool:
    """Whether a row's number fits its int4 column (None: a NULL, which fits)."""
    return number is None or _INT4[0] <= number <= _INT4[1]


def summed(builds: Sequence[Built]) -> Built:
    """What builds did, summed (more and busy: the last one's; none: nothing)."""
    return Built(
        pending=sum(b.pending for b in builds),
        keys=sum(b.keys for b in builds),
        releases=sum(b.releases for b in builds),
        written=sum(b.written for b in builds),
        pruned=sum(b.pruned for b in builds),
        shown=sum(b.shown for b in builds),
        rounds=sum(b.rounds for b in builds),
        cpu_s=sum(b.cpu_s for b in builds),
        more=bool(builds) and builds[-1].more,
        busy=bool(builds) and builds[-1].busy,
        segments=sum(b.segments for b in builds),
        beyond=sum(b.beyond for b in builds),
        again=core.Again(
            chains=sum(b.again.chains for b in builds),
            rows=sum(b.again.rows for b in builds),
            windows=sum(b.again.windows for b in builds),
        ),
    )


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
        more=more or bool(written.beyond),
        beyond=written.beyond,
    )
