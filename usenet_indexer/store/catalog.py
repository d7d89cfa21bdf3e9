"""The catalog: stored fragments merged into releases by the merge code, and the
searchable `catalog` table built from them (what the newznab API serves).

The same `merge.ReleaseMerger` that `uidx index` uses puts the stored chunks
together, so a catalog export and an offline index of the same lines agree.
`build` writes one `catalog` row per merged release that is not dropped
(name, category, size, the release keys it came from), updating rows by
guid so that grabs survive; `release` rebuilds one release, for its NZB,
from the fragments of those keys alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import attrs
from psycopg import sql
from psycopg_pool import ConnectionPool

from usenet_indexer.core.batch import ReleaseChunk
from usenet_indexer.core.categories import categorise, season_episode, subcategories
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.core.newznab import Item
from usenet_indexer.core.renames import Shown, apply, more_probe
from usenet_indexer.store.probes import ProbeStore
from usenet_indexer.wire import fragments

_RELEASES = "SELECT key, head_name, poster, groups, files_announced FROM releases"
_FRAGMENTS = "SELECT release_key, packed FROM fragments ORDER BY range_id, batch_first"
_RELEASES_OF = _RELEASES + " WHERE key = ANY(%s)"
_FRAGMENTS_OF = (
    "SELECT release_key, packed FROM fragments WHERE release_key = ANY(%s)"
    " ORDER BY range_id, batch_first"
)
_PROBED_OF = "SELECT release_key FROM probe_candidates WHERE release_key = ANY(%s)"
_CATALOG_TEMP = """
    CREATE TEMPORARY TABLE catalog_new (LIKE catalog INCLUDING DEFAULTS) ON COMMIT DROP
"""
_CATALOG_COPY = """
    COPY catalog_new (guid, name, search_name, category, size, files, poster, groups, posted,
                      completion, season, episode, probe_candidate, sources, changed_at)
    FROM STDIN
"""
# Shown: complete, or quiet for long enough; a row once shown stays shown.
_CATALOG_MERGE = """
    INSERT INTO catalog (guid, name, search_name, category, size, files, poster, groups,
                         posted, completion, season, episode, probe_candidate, sources,
                         changed_at, shown)
    SELECT guid, name, search_name, category, size, files, poster, groups, posted,
           completion, season, episode, probe_candidate, sources, changed_at,
           completion >= 1 OR changed_at <= now() - make_interval(secs => %(quiet)s)
    FROM catalog_new
    ON CONFLICT (guid) DO UPDATE SET
        name = excluded.name, search_name = excluded.search_name,
        category = excluded.category, size = excluded.size, files = excluded.files,
        poster = excluded.poster, groups = excluded.groups, posted = excluded.posted,
        completion = excluded.completion, season = excluded.season,
        episode = excluded.episode, probe_candidate = excluded.probe_candidate,
        sources = excluded.sources, changed_at = excluded.changed_at,
        shown = catalog.shown OR excluded.shown, built_at = now()
"""
_CATALOG_PRUNE_ALL = "DELETE FROM catalog WHERE guid NOT IN (SELECT guid FROM catalog_new)"
# The rows made before from keys merged anew that the merge no longer makes.
_CATALOG_PRUNE_OF = """
    DELETE FROM catalog WHERE sources && %s::bytea[]
      AND guid NOT IN (SELECT guid FROM catalog_new)
"""
_SHOW_QUIET = """
    UPDATE catalog SET shown = true
    WHERE NOT shown AND changed_at <= now() - make_interval(secs => %s)
"""
_PENDING = "SELECT key, seq FROM catalog_pending"
_PENDING_DONE = """
    DELETE FROM catalog_pending p USING unnest(%s::bytea[], %s::bigint[]) AS d(key, seq)
    WHERE p.key = d.key AND p.seq = d.seq
"""
# The keys to merge again for touched keys: every release of their posters
# (uploads are joined per poster), now and as the catalog had them.
_POSTERS_KEYS = """
    WITH posters AS (
        SELECT poster FROM releases WHERE key = ANY(%(keys)s)
        UNION SELECT poster FROM catalog WHERE sources && %(keys)s::bytea[]
    )
    SELECT key FROM releases WHERE poster IN (SELECT poster FROM posters)
"""
_CHANGED = "SELECT key, updated_at FROM releases"
_CHANGED_OF = _CHANGED + " WHERE key = ANY(%s)"
# One builder at a time (the coordinator's, `uidx catalog build`): a build
# that read before another's write must not write over it.
_BUILD_LOCK = "SELECT pg_advisory_lock(3, 0)"
_BUILD_UNLOCK = "SELECT pg_advisory_unlock(3, 0)"
_ROW = """
    SELECT id, guid, name, category, size, files, poster, groups, posted, completion,
           season, episode, grabs, sources
    FROM catalog
"""
_GRAB = "UPDATE catalog SET grabs = grabs + 1 WHERE guid = %s"
_STORED = "SELECT count(*), max(stored_at) FROM batches"
_PROBED = "SELECT release_key FROM probe_candidates"
_SIZES = """
    SELECT coalesce(sum(pg_total_relation_size(c)), 0)::bigint,
           (SELECT coalesce(sum(segments), 0)::bigint FROM fragments)
    FROM (SELECT 'releases'::regclass AS c
          UNION ALL SELECT inhrelid::regclass FROM pg_inherits
          WHERE inhparent = 'fragments'::regclass) AS tables
"""


@attrs.define(eq=False)
class CatalogStore:
    pool: ConnectionPool

    def chunks(self, keys: Sequence[bytes] | None = None) -> Iterator[ReleaseChunk]:
        """Every stored release chunk (of the release `keys` only, when given),
        rebuilt from its fragment."""
        with self.pool.connection() as conn:
            if keys is None:
                release_rows = conn.execute(_RELEASES).fetchall()
                rows = conn.execute(_FRAGMENTS).fetchall()
            else:
                release_rows = conn.execute(_RELEASES_OF, (list(keys),)).fetchall()
                rows = conn.execute(_FRAGMENTS_OF, (list(keys),)).fetchall()
        releases = {bytes(r[0]): r for r in release_rows}
        for release_key, packed in rows:
            key = bytes(release_key)
            _, head_name, poster, groups, announced = releases[key]
            files = tuple(fragments.unpack(bytes(packed)))
            yield ReleaseChunk(key, head_name, poster, tuple(groups), announced, files)

    def export(self, keys: Sequence[bytes] | None = None) -> list[CatalogRelease]:
        """The catalog as merged releases, oldest first, with what probes found applied
        (of the release `keys`' chunks only, when given)."""
        return [shown.release for shown in self.shown(keys)]

    def shown(self, keys: Sequence[bytes] | None = None) -> list[Shown]:
        """The merged releases with what probes found applied (core/renames.py), and the
        names they had before it (of the release `keys`' chunks only, when given)."""
        merger = ReleaseMerger()
        merger.add_all(self.chunks(keys))
        with self.pool.connection() as conn:
            probed = (
                conn.execute(_PROBED) if keys is None else conn.execute(_PROBED_OF, (list(keys),))
            ).fetchall()
        for (key,) in probed:
            merger.mark_probe(bytes(key))
        return apply(list(merger.releases()), ProbeStore(self.pool).found(keys))

    def bytes_per_segment(self) -> tuple[int, int]:
        """(bytes of the catalog tables with their indexes and TOAST, segments stored)."""
        with self.pool.connection() as conn:
            row = conn.execute(_SIZES).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


_SPLIT = re.compile(r"[\W_]+")


def search_name(name: str) -> str:
    """A release name as q matches it: lower case, anything but letters and digits
    (dots, underscores, dashes, brackets) a word break."""
    return " ".join(_SPLIT.split(name.lower())).strip()


@attrs.frozen
class CatalogRow:
    """A catalog release: what the newznab API lists of it (`item`), and what the
    catalog keeps beside (its row id, the release keys its NZB is merged from)."""

    id: int
    item: Item
    sources: tuple[bytes, ...]

    @property
    def guid(self) -> str:
        return self.item.guid


@attrs.frozen
class Search:
    """What a search asks for (the newznab API's parameters, checked).

    Attributes:
        words: q, as words that must all be in the name (empty: any).
        categories: newznab ids; a parent takes its subcategories (empty: any).
        season, episode: tvsearch's numbers (None: any).
        since: only releases posted at or after this unix time (maxage).
        min_size, max_size: bytes (None: no bound).
        group: only releases posted to this group.
        limit, offset: the page.
    """

    words: str = ""
    categories: tuple[int, ...] = ()
    season: int | None = None
    episode: int | None = None
    since: int | None = None
    min_size: int | None = None
    max_size: int | None = None
    group: str | None = None
    limit: int = 100
    offset: int = 0


def _changed(records: Sequence[tuple[Any, ...]]) -> dict[bytes, datetime]:
    return {bytes(key): when for key, when in records}


def _rows(records: Sequence[tuple[Any, ...]]) -> list[CatalogRow]:
    return [
        CatalogRow(
            id=int(r[0]),
            item=Item(
                guid=str(r[1]),
                name=str(r[2]),
                category=int(r[3]),
                size=int(r[4]),
                files=int(r[5]),
                poster=str(r[6]),
                groups=tuple(r[7]),
                posted=int(r[8]),
                completion=float(r[9]),
                season=None if r[10] is None else int(r[10]),
                episode=None if r[11] is None else int(r[11]),
                grabs=int(r[12]),
            ),
            sources=tuple(bytes(k) for k in r[13]),
        )
        for r in records
    ]


def _catalog_record(shown: Shown, changed_at: datetime) -> tuple[object, ...]:
    release = shown.release
    season, episode = season_episode(release.name)
    # The names it had before a probe renamed it stay searchable.
    searched = " ".join((release.name, *shown.aliases))
    return (
        release.key.hex(),
        release.name,
        search_name(searched),
        categorise(release.name, release.groups, tuple(f.name for f in release.files)),
        release.bytes,
        len(release.files),
        release.poster,
        list(release.groups),
        release.posted,
        release.complete,
        season,
        episode,
        release.probe_candidate,
        list(release.sources),
        changed_at,
    )


@attrs.frozen
class Built:
    """What one catalog build did.

    Attributes:
        releases: catalog rows written (merged releases kept, not dropped).
        keys: release keys merged (all of them for a full build).
        shown: rows shown for having been quiet long enough (and not complete).
    """

    releases: int
    keys: int
    shown: int


@attrs.define(eq=False)
class CatalogTable:
    """The searchable catalog (`catalog` rows) and the NZBs behind it.

    Rows follow the stored batches release by release: a stored batch marks
    its release keys pending (store/batches.py); `build_pending` merges
    again every release of the posters of those keys (the merge joins an
    upload's parts per poster, so that is all a key can change) and
    replaces their rows, `build` does every release. A row is shown (listed
    and searched) once its release is complete, or once no chunk of it came
    for `quiet_seconds`, with its completion; once shown it stays shown.

    Attributes:
        pool: the database's connection pool.
    """

    pool: ConnectionPool

    def build(self, quiet_seconds: float) -> Built:
        """Merge every stored chunk and replace the catalog's rows with the releases
        that are kept (one transaction; a release's grabs stay)."""
        with self._locked():
            pending = self._pending()
            releases = CatalogStore(self.pool).shown()
            with self.pool.connection() as conn:
                changed = _changed(conn.execute(_CHANGED).fetchall())
            return self._write(releases, changed, quiet_seconds, pending, None)

    def build_pending(self, quiet_seconds: float) -> Built:
        """Merge again the releases that batches stored since the last build touched
        (with every release of their posters), and show the rows gone quiet."""
        with self._locked():
            pending = self._pending()
            if not pending:
                return Built(0, 0, self._show_quiet(quiet_seconds))
            with self.pool.connection() as conn:
                keys = [
                    bytes(r[0])
                    for r in conn.execute(_POSTERS_KEYS, {"keys": list(pending)}).fetchall()
                ]
                changed = _changed(conn.execute(_CHANGED_OF, (keys,)).fetchall())
            releases = CatalogStore(self.pool).shown(keys) if keys else []
            return self._write(releases, changed, quiet_seconds, pending, keys)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self.pool.connection() as conn:
            conn.execute(_BUILD_LOCK)
            try:
                yield
            finally:
                conn.execute(_BUILD_UNLOCK)

    def _pending(self) -> dict[bytes, int]:
        with self.pool.connection() as conn:
            return {bytes(k): int(seq) for k, seq in conn.execute(_PENDING).fetchall()}

    def _show_quiet(self, quiet_seconds: float) -> int:
        with self.pool.connection() as conn:
            return int(conn.execute(_SHOW_QUIET, (quiet_seconds,)).rowcount)

    def _write(
        self,
        releases: list[Shown],
        changed: dict[bytes, datetime],
        quiet_seconds: float,
        pending: dict[bytes, int],
        keys: list[bytes] | None,
    ) -> Built:
        kept = [r for r in releases if r.release.dropped is None]
        self._queue_probes(kept)
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(_CATALOG_TEMP)
            with conn.cursor().copy(_CATALOG_COPY) as copy:
                for shown in kept:
                    when = max(changed[key] for key in shown.release.sources)
                    copy.write_row(_catalog_record(shown, when))
            conn.execute(_CATALOG_MERGE, {"quiet": quiet_seconds})
            if keys is None:
                conn.execute(_CATALOG_PRUNE_ALL)
            else:
                conn.execute(_CATALOG_PRUNE_OF, (keys,))
            quiet = int(conn.execute(_SHOW_QUIET, (quiet_seconds,)).rowcount)
            conn.execute(_PENDING_DONE, (list(pending), list(pending.values())))
        return Built(len(kept), len(changed) if keys is None else len(keys), quiet)

    def _queue_probes(self, kept: list[Shown]) -> None:
        """More candidates the merged releases call for (core/renames.py's more_probe):
        an archive's first volume, a par2 an nfo's probe did not read."""
        probes = ProbeStore(self.pool)
        keys = list({k for shown in kept for k in (shown.release.key, *shown.release.sources)})
        if not keys:
            return
        asked = probes.candidates_of(keys)
        found = probes.found(keys)
        more = [
            probe
            for shown in kept
            if (probe := more_probe(shown.release, asked, found)) is not None
        ]
        probes.add_archives(more)

    def search(self, search: Search) -> tuple[int, list[CatalogRow]]:
        """(how many releases match, at least: see below; the page of them), newest first."""
        where: list[sql.Composable] = [sql.SQL("shown")]
        params: list[object] = []
        if search.words:
            where.append(sql.SQL("words @@ plainto_tsquery('simple', %s)"))
            params.append(search.words)
        if search.categories:
            # A parent takes its subcategories: one = ANY over ids, which the index serves.
            ids = sorted({c for asked in search.categories for c in (asked, *subcategories(asked))})
            where.append(sql.SQL("category = ANY(%s)"))
            params.append(ids)
        for column, value, op in (
            ("season", search.season, "="),
            ("episode", search.episode, "="),
            ("posted", search.since, ">="),
            ("size", search.min_size, ">="),
            ("size", search.max_size, "<="),
        ):
            if value is not None:
                where.append(sql.SQL("{} " + op + " %s").format(sql.Identifier(column)))
                params.append(value)
        if search.group is not None:
            where.append(sql.SQL("%s = ANY(groups)"))
            params.append(search.group)
        condition = sql.SQL(" AND ").join(where)
        # One row past the page tells whether more follow; the total is then a
        # lower bound (offset + limit + 1: clients page on until a page comes
        # back short), exact once the last page is reached. A count of the
        # matches would cost more than the page (a common word: 40 ms of 1M).
        page = sql.SQL(_ROW + " WHERE {} ORDER BY posted DESC, id DESC LIMIT %s OFFSET %s").format(
            condition
        )
        with self.pool.connection() as conn:
            records = conn.execute(page, [*params, search.limit + 1, search.offset]).fetchall()
        return search.offset + len(records), _rows(records[: search.limit])

    def row(self, guid: str) -> CatalogRow | None:
        """The catalog row of a guid, or None."""
        with self.pool.connection() as conn:
            records = conn.execute(_ROW + " WHERE guid = %s", (guid,)).fetchall()
        rows = _rows(records)
        return rows[0] if rows else None

    def release(self, row: CatalogRow) -> CatalogRelease | None:
        """The release of a catalog row, merged again from its source keys' fragments
        (None if they no longer make it: the catalog is older than the fragments)."""
        releases = CatalogStore(self.pool).export(row.sources)
        return next((r for r in releases if r.key.hex() == row.guid), None)

    def count(self) -> int:
        """Releases in the searchable catalog (shown)."""
        return self.counts()[0]

    def counts(self) -> tuple[int, int]:
        """(releases shown, releases waiting: incomplete and not quiet yet)."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE shown), count(*) FILTER (WHERE NOT shown)"
                " FROM catalog"
            ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def stored_mark(self) -> tuple[int, object]:
        """What changes when a batch is stored: (batches, the latest stored_at)."""
        with self.pool.connection() as conn:
            row = conn.execute(_STORED).fetchone()
        assert row is not None
        return int(row[0]), row[1]

    def grab(self, guid: str) -> None:
        """Count one grab (an NZB fetched) of a release."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SET LOCAL synchronous_commit TO off")  # a grab is no fsync's worth
            conn.execute(_GRAB, (guid,))
