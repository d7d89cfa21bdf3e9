"""What the catalog build makes of stored release chunks, and what it must merge again.

Pure: the coordinator's driver (coordinator/catalog_build.py) reads rows
through store/catalog.py, hands them here, and writes back what comes out.

Theory of operation
-------------------
The catalog's rows are the releases `merge.ReleaseMerger` makes of every
stored chunk, with what probes found applied (`renames.apply`). A stored
batch changes the chunks of a few keys; the rows it can change are those
that merging those keys again, with every key they can be merged with,
makes. What can merge with a key (and nothing else, so the build's cost
is bounded by the batch, never by what the catalog already holds):

- its repost chain: the key's `repost_key`, that key's, and so on, while
  stored (the merge takes a chain's chunks together and cuts them into
  generations). A batch that sends a chunk under a repost key sends the
  chunk of its first key too (the indexer's piece 0), so walking forward
  from every touched key finds every chain whole;
- the keys the catalog made one row with before (`catalog_keys`): what
  was joined may fall apart, and then both halves need rows again (a
  pending build reads a posting tool's From's rows only near its batch,
  and writes what it made as `Scope` says);
- the releases of the same poster whose span (earliest file to latest)
  meets the chain's, widened by `uploads.TOGETHER_SECONDS`: `uploads.link`
  joins parts of one upload only within that. Parts further apart than
  that from every part of a set are never joined to it, so the posters'
  uploads of other hours or days are neither read nor written again.
  The chain's span is cut into runs of its chunks (chunks within
  `merge.APART_SECONDS` of each other; see `_runs`): under a tool's
  default From the merge starts a new generation there, and under any
  From link reaches only as far as a part's first run
  (`merge._first_run_end`), so a key posted again a day later (the same
  file name uploaded again, or a poster filling his upload in) does not
  read the day between. A release is found by its whole span and its
  row's poster and M (its earliest file's), and by each chunk of another
  poster or M (`Span.others`: a key without the poster in it holds one
  name's uploads by several, which the merge keeps apart by each chunk's
  own poster and M), around whose runs its posters are looked for too.
  Under a shared From (`uploads.SHARED_FROMS`) link joins only an album's
  tracks and extras, of one M: there the window asks only for releases
  of the chain's M that no build marked `no_album` (`no_albums`: files
  not all an album's, which more files never change). A busy default
  From has thousands of uploads an hour; its rar uploads bring none of
  them back, and an album's track brings only the album parts near it.
  A key's mark is its files' across its generations: a repost
  generation of only tracks under a key whose other files are not an
  album's is not looked for (no posting tool names a track and a volume
  alike).
  A touched key (or chain) is looked around the runs that reach from
  APART_SECONDS before its fresh chunks on (`_since`, `_looked`: what
  batches stored under it since its last build, whose dates are kept with
  its pending mark), whole, and under an uploader's own From its first run
  too (the generation a fill joins begins there), unless the fresh chunks
  hold its earliest file (or, under a tool's From, come before a stored
  one): a key filled in or reposted again and again is looked around its
  new post and its first, and its runs between, and what was joined to
  them, come back through the rows. A run is looked around whole, not from
  the fresh chunks on: a generation that gains indexes, files or a name
  may leave its upload for one posted near its first file, anywhere in
  its run (tests/test_catalog_windows.py holds both cases), so a common
  file name reposted under a tool's From every hour or so (one run of
  chunks over days) is still looked around over its whole run: bounding
  that needs each generation's dates, which the closure does not read.

Each key found brings its own chain and rows, walked to their fixpoint;
windows are looked in around the touched keys and their chains only, not
around what their rows or the windows found (WINDOW_ROUNDS, 1): a poster
who posts around the clock would otherwise chain every release of his, each
within 30 minutes of the next, into every build. What was joined before
comes back whole through the rows, so a second round would only find an
upload whose parts a new part joins through two windows in a row where they
were not joined before; it is joined when one of those parts is touched
again, or by `uidx catalog build`. A second round merged 11-13% more keys at 10M
generated articles (91k against 82k), and changed no row: the catalog
followed there and in 190 generated groups cut into random batches
(tests/test_catalog_build.py, which fails with no windows at all) is the
one a whole rebuild makes.
`Closure` asks its driver for one kind of look-up at a time
(`Closure.wanted`) and is done when a round finds no new key.
"""

from __future__ import annotations

import operator
import re
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Set
from datetime import datetime
from typing import Any

import attrs

from usenet_indexer.core import merge
from usenet_indexer.core.batch import ReleaseChunk
from usenet_indexer.core.categories import categorise, season_episode
from usenet_indexer.core.completion import judge
from usenet_indexer.core.merge import (
    APART_SECONDS,
    CatalogRelease,
    Pins,
    ReleaseMerger,
    holds,
)
from usenet_indexer.core.renames import Finding, Shown, apply, ids_probe, more_probe
from usenet_indexer.core.reposts import repost_key
from usenet_indexer.core.uploads import TOGETHER_SECONDS, TOOL_FROMS, album_files, shared_from
from usenet_indexer.decode.ids import NO_IDS, MediaIds

_SPLIT = re.compile(r"[\W_]+")
# Windows are looked in around the touched keys and their chains, not around what
# rows or windows found (chains and rows are followed to the end): a
# poster who posts around the clock, an upload every few minutes, would
# otherwise bring every release of his back at every build, each within 30
# minutes of the next. (See the module's docstring for why one round.)
WINDOW_ROUNDS = 1
# The most characters of a release's names kept searchable (`searched`): at most
# 4 bytes each in UTF-8, and a tsvector of them stays under its 1 MB.
SEARCHED_CHARS = 1 << 16
# PostgreSQL's bigint, where the windows' times go.
_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1


def searched(name: str, aliases: Iterable[str]) -> str:
    """A release's name and the names it had before a probe renamed it (they stay
    searchable), as many of those as fit in SEARCHED_CHARS in order: the catalog
    indexes the text as a tsvector, which holds at most 1 MB (an obfuscated upload
    of thousands of renamed files has as many old names: its row could not be
    written, and the build with it). The name itself always."""
    kept = [name]
    size = len(name)
    for alias in aliases:
        size += 1 + len(alias)
        if size > SEARCHED_CHARS:
            break
        kept.append(alias)
    return " ".join(kept)


def search_name(name: str) -> str:
    """A release name as q matches it: lower case, anything but letters and digits
    (dots, underscores, dashes, brackets) a word break."""
    return " ".join(_SPLIT.split(name.lower())).strip()


def query_words(q: str) -> tuple[str, ...]:
    """q's words as the catalog's names are split (`search_name`), each once, in order.

    Args:
        q: the q of a request, as given.

    Returns:
        The words, lower case; none for a q without letters or digits.
    """
    return tuple(dict.fromkeys(search_name(q).split()))


def merged(
    chunks: Iterable[ReleaseChunk],
    probed: Iterable[bytes],
    found: Mapping[bytes, Sequence[Finding]],
    memo: Memo | None = None,
    *,
    pure: bool = False,
    pins: Mapping[bytes, Pins] | None = None,
) -> list[Shown]:
    """The releases the chunks make (oldest first), with what probes found applied.

    Args:
        chunks: the stored release chunks of the keys merged.
        probed: the release keys a batch reported a probe candidate for.
        found: what probes found, by release key.
        memo: what builds before made (see Memo), taken from and added to.
        pure: the merge's pure code even where its compiled twin is built.
        pins: the stored rows' anchors and guids, by a release key of their
            sources (merge.Pins): the keys their generations keep.
    """
    return apply(releases_of(chunks, probed, memo, pure=pure, pins=pins), found)


def releases_of(
    chunks: Iterable[ReleaseChunk],
    probed: Iterable[bytes],
    memo: Memo | None = None,
    *,
    pure: bool = False,
    pins: Mapping[bytes, Pins] | None = None,
) -> list[CatalogRelease]:
    """The releases the chunks make (oldest first), before what probes found is applied
    (`merged`, less `renames.apply`): the keys whose findings apply to them are then
    `found_keys` of them."""
    merger = ReleaseMerger(memo=None if memo is None else memo.merge, pure=pure, pins=pins or {})
    merger.add_all(chunks)
    for key in probed:
        merger.mark_probe(key)
    return list(merger.releases())


def segments_of(chunks: Iterable[ReleaseChunk]) -> int:
    """The segments the chunks hold (what merging them costs)."""
    return sum(len(f.numbers) for chunk in chunks for f in chunk.files)


def found_keys(releases: Iterable[CatalogRelease]) -> list[bytes]:
    """The keys whose probes' findings apply to the releases (renames.apply): each
    release's own key (a repost generation's is no stored key) and its sources, once."""
    return sorted({k for r in releases for k in (r.key, *r.sources)})


@attrs.frozen
class Made:
    """What one build of some keys makes: the catalog rows of the releases kept, the
    pending keys to mark as no album's (`no_albums`), and more probe candidates
    (`more_probes`: release key, message-id, file name)."""

    entries: tuple[CatalogEntry, ...]
    no_album: tuple[bytes, ...]
    probes: tuple[tuple[bytes, str, str], ...]


def made(
    chunks: Sequence[ReleaseChunk],
    pending: Collection[bytes],
    probed: Iterable[bytes],
    found: Mapping[bytes, Sequence[Finding]],
    changed: Mapping[bytes, datetime],
    asked: Mapping[bytes, Set[str]],
    *,
    categories: Categories | None = None,
    memo: Memo | None = None,
    pure: bool = False,
    pins: Mapping[bytes, Pins] | None = None,
) -> Made:
    """A build of the keys whose chunks are `chunks` (the coordinator's own, or an
    edge's job: the same code).

    Args:
        chunks: the stored release chunks of the keys merged again.
        pending: the keys taken as pending (their chunks changed).
        probed: the release keys a batch reported a probe candidate for.
        found: what probes found, by release key.
        changed: when each key's chunks last changed.
        asked: the probe candidates' message-ids asked before, by release key.
        categories: a memo of categories (kept from build to build).
        memo: what builds before made (see Memo).
        pure: the merge's pure code even where its compiled twin is built.
        pins: the stored rows' anchors and guids by a release key of their sources
            (merge.Pins), whose keys the merge keeps.
    """
    releases = releases_of(chunks, probed, memo, pure=pure, pins=pins)
    return made_of(
        chunks, releases, pending, found, changed, asked, categories=categories, memo=memo
    )


def made_of(
    chunks: Sequence[ReleaseChunk],
    releases: Sequence[CatalogRelease],
    pending: Collection[bytes],
    found: Mapping[bytes, Sequence[Finding]],
    changed: Mapping[bytes, datetime],
    asked: Mapping[bytes, Set[str]],
    *,
    categories: Categories | None = None,
    memo: Memo | None = None,
) -> Made:
    """`made` of the releases the chunks make (`releases_of`): a driver that reads what
    probes found of the releases' own keys once it knows them (`found_keys`) merges
    first, then makes the rows."""
    no_album = tuple(sorted(no_albums(c for c in chunks if c.key in pending)))
    shown = kept(apply(releases, found))
    probes = tuple(more_probes(shown, asked, found, categories, memo))
    entries = tuple(entry(s, changed, found, categories, memo) for s in shown)
    return Made(entries, no_album, probes)


@attrs.frozen
class CatalogEntry:
    """One searchable catalog row, as the build writes it."""

    guid: str
    name: str
    search_name: str
    category: int
    size: int
    files: int
    poster: str
    groups: tuple[str, ...]
    posted: int
    completion: float
    season: int | None
    episode: int | None
    probe_candidate: bool
    sources: tuple[bytes, ...]
    changed_at: datetime
    state: str  # completion.State's value: whole, repairable or broken
    ids: MediaIds = NO_IDS  # what its NFO named (a show's TMDB id is not kept)
    anchor: str = ""  # the message-id its guid was made of (merge.Pins)
    # Its file chunks' earliest and latest date where its poster is a posting tool's
    # From and every chunk is dated, else None: what a pending build's `Scope` holds it by
    # (None: read and written by every build of its keys).
    span: tuple[int, int] | None = None


# A row's span's two columns (and wire fields) where it has none.
NO_SPAN = (None, None)


def row_span(release: CatalogRelease) -> tuple[int, int] | None:
    """A release's row's `CatalogEntry.span`: its file chunks' earliest and latest date
    (`CatalogRelease.dates`: a file posted over hours spans them all) under a posting
    tool's From, every chunk dated; else None."""
    if release.poster.strip().lower() not in TOOL_FROMS:
        return None
    low, high = release.dates
    return None if low <= 0 else (low, high)


@attrs.define(eq=False)
class Categories:
    """Releases' categories (categories.categorise), each worked out once: a pending
    build merges again the releases around the keys a batch touched, most of which
    an earlier build categorised, and a release is asked twice (its row, its NFO's
    probe). A build's memo, dropped whole when it holds `limit` releases.
    """

    limit: int = 20_000
    _known: dict[tuple[str, tuple[str, ...], tuple[str, ...]], int] = attrs.field(
        init=False, factory=dict
    )

    def of(self, name: str, groups: tuple[str, ...], files: tuple[str, ...]) -> int:
        """categorise(name, groups, files), remembered."""
        known = (name, groups, files)
        category = self._known.get(known)
        if category is None:
            if len(self._known) >= self.limit:
                self._known.clear()
            category = self._known[known] = categorise(name, groups, files)
        return category


@attrs.define(eq=False)
class Memo:
    """What a build made, kept for the builds after it (the coordinator's, from build to
    build): merged releases (merge.Memo), and each release's row and probe, by the
    release (the very object: a Memo's release is the same object again only when its
    chunks are) and everything else they are made of. Rows and probes are dropped
    whole with the merged releases (merge.Memo.cleared), or past `limit` of them.
    """

    limit: int = 100_000
    merge: merge.Memo = attrs.field(factory=merge.Memo)
    _entries: dict[tuple[object, ...], tuple[CatalogRelease, CatalogEntry]] = attrs.field(
        init=False, factory=dict
    )
    _probes: dict[tuple[object, ...], tuple[CatalogRelease, tuple[bytes, str, str] | None]] = (
        attrs.field(init=False, factory=dict)
    )
    _cleared: int = attrs.field(init=False, default=0)  # merge.cleared when last dropped

    def _kept(self, probes: bool) -> dict[tuple[object, ...], Any]:
        """The rows (or probes) kept, dropped first when the merged releases were."""
        if self._cleared != self.merge.cleared:
            self._entries.clear()
            self._probes.clear()
            self._cleared = self.merge.cleared
        kept: dict[tuple[object, ...], Any] = self._probes if probes else self._entries
        if len(kept) >= self.limit:
            kept.clear()
        return kept


def _found_of(
    release: CatalogRelease, found: Mapping[bytes, Sequence[Finding]] | None
) -> tuple[tuple[Finding, ...], ...]:
    """What probes found of a release's keys, as a memo's key."""
    if not found:
        return ()
    return tuple(tuple(found.get(key, ())) for key in (release.key, *release.sources))


def entry(
    shown: Shown,
    changed: Mapping[bytes, datetime],
    found: Mapping[bytes, Sequence[Finding]] | None = None,
    categories: Categories | None = None,
    memo: Memo | None = None,
) -> CatalogEntry:
    """The row of a kept release; `changed`: when each source key's chunks last changed;
    `found`: what probes found of its keys (a par2 index's slice size, for its state;
    the ids its NFO named); `categories`: the build's memo of categories; `memo`: rows
    made before (see Memo)."""
    if memo is None:
        return _entry(shown, changed, found, categories)
    release = shown.release
    changed_at = max(changed[key] for key in release.sources)
    key = (id(release), shown.aliases, changed_at, _found_of(release, found))
    entries = memo._kept(probes=False)
    kept: tuple[CatalogRelease, CatalogEntry] | None = entries.get(key)
    if kept is None:
        kept = entries[key] = (release, _entry(shown, changed, found, categories))
    return kept[1]


def seen_by(posted: int, changed_at: datetime) -> int:
    """A release's date as the catalog keeps it (the feeds' order, pubDate, maxage): its
    earliest file's date, but no later than when its articles were last stored. A
    poster whose clock runs years ahead dates his headers so, and newest first his
    release would top every feed until then; the server had the articles when they
    were stored, so that moment is a date the release was surely posted by. (The
    NZB keeps every file's own date.)"""
    return min(posted, int(changed_at.timestamp()))


def dated_as_seen(made: Made) -> Made:
    """`made` with each row dated no later than when its articles were last stored
    (`seen_by`, by the row's changed_at): an edge's rows, which an edge from before
    `seen_by` sends dated as their posters' clocks gave them."""
    entries = tuple(_dated_as_seen(entry) for entry in made.entries)
    if all(new is old for new, old in zip(entries, made.entries, strict=True)):
        return made
    return attrs.evolve(made, entries=entries)


def _dated_as_seen(entry: CatalogEntry) -> CatalogEntry:
    posted = seen_by(entry.posted, entry.changed_at)
    return entry if posted == entry.posted else attrs.evolve(entry, posted=posted)


def _entry(
    shown: Shown,
    changed: Mapping[bytes, datetime],
    found: Mapping[bytes, Sequence[Finding]] | None,
    categories: Categories | None,
) -> CatalogEntry:
    release = shown.release
    season, episode = season_episode(release.name)
    changed_at = max(changed[key] for key in release.sources)
    return CatalogEntry(
        guid=release.key.hex(),
        name=release.name,
        search_name=search_name(searched(release.name, shown.aliases)),
        category=(categorise if categories is None else categories.of)(
            release.name, release.groups, tuple(f.name for f in release.files)
        ),
        size=release.bytes,
        files=len(release.files),
        poster=release.poster,
        groups=release.groups,
        posted=seen_by(release.posted, changed_at),
        completion=release.complete,
        season=season,
        episode=episode,
        probe_candidate=release.probe_candidate,
        sources=release.sources,
        changed_at=changed_at,
        state=judge(
            release.files, release.files_announced, _slice_bytes(release, found)
        ).state.value,
        ids=_ids(release, found),
        anchor=release.anchor,
        span=row_span(release),
    )


def _slice_bytes(
    release: CatalogRelease, found: Mapping[bytes, Sequence[Finding]] | None
) -> int | None:
    """The slice size a probe read in the release's own par2 index (one of its segments
    probed), or None."""
    if not found:
        return None
    for key in (release.key, *release.sources):
        for finding in found.get(key, ()):
            probed = finding.message_id
            if (
                finding.slice_bytes
                and probed
                and any(holds(f.segments, probed) for f in release.files)
            ):
                return finding.slice_bytes
    return None


def _ids(release: CatalogRelease, found: Mapping[bytes, Sequence[Finding]] | None) -> MediaIds:
    """The ids the NFOs probed among the release's own segments named: of each kind
    the first found (a show's TMDB id left out: the catalog offers a movie's)."""
    if not found:
        return NO_IDS
    named: dict[str, int] = {}
    for key in dict.fromkeys((release.key, *release.sources)):
        for finding in found.get(key, ()):
            probed = finding.message_id
            if not finding.ids or not (
                probed and any(holds(f.segments, probed) for f in release.files)
            ):
                continue
            for kind, value in attrs.asdict(finding.ids).items():
                if value is not None and kind != "tmdb_tv":
                    named.setdefault(kind, value)
    return MediaIds(**named)


def kept(releases: Iterable[Shown]) -> list[Shown]:
    """The releases the catalog lists: those no rule dropped."""
    return [shown for shown in releases if shown.release.dropped is None]


def probe_keys(releases: Iterable[Shown]) -> list[bytes]:
    """The keys whose probe candidates `more_probes` needs to know (each once)."""
    return list({k: None for s in releases for k in (s.release.key, *s.release.sources)})


def more_probes(
    releases: Iterable[Shown],
    asked: Mapping[bytes, Set[str]],
    found: Mapping[bytes, Sequence[Finding]],
    categories: Categories | None = None,
    memo: Memo | None = None,
) -> list[tuple[bytes, str, str]]:
    """More candidates the releases call for (renames.more_probe): an archive's first
    volume, a par2 an nfo's probe did not read; else, for a film or a show, its NFO,
    for the ids it names (renames.ids_probe). `asked`: the candidates' message-ids
    by release key; a release's are those of its key and its sources; `categories`:
    the build's memo of categories; `memo`: probes chosen before (see Memo)."""
    categorised = categorise if categories is None else categories.of
    more = []
    for shown in releases:
        release = shown.release
        keys = (release.key, *release.sources)
        mine: frozenset[str] = frozenset().union(*(asked.get(k, ()) for k in keys))
        if memo is None:
            probe = _more_probe(release, mine, found, categorised)
        else:
            key = (id(release), mine, _found_of(release, found))
            probes = memo._kept(probes=True)
            kept = probes.get(key)
            if kept is None:
                kept = probes[key] = (release, _more_probe(release, mine, found, categorised))
            probe = kept[1]
        if probe is not None:
            more.append(probe)
    return more


def _more_probe(
    release: CatalogRelease,
    mine: Set[str],
    found: Mapping[bytes, Sequence[Finding]],
    categorised: Callable[[str, tuple[str, ...], tuple[str, ...]], int],
) -> tuple[bytes, str, str] | None:
    probe = more_probe(release, mine, found)
    if probe is None:
        probe = ids_probe(release, mine, categorised=categorised)
    return probe


def no_albums(chunks: Iterable[ReleaseChunk]) -> set[bytes]:
    """The keys under a shared From whose files are not all an album's
    (`uploads.album_files`): the windows that look for an album's parts skip
    them (`Window.album`), as `uploads.link` never joins them. A key's files
    only grow, so a key once found so stays so."""
    albums: dict[bytes, bool] = {}
    for chunk in chunks:
        if shared_from(chunk.poster) and albums.get(chunk.key, True):
            albums[chunk.key] = album_files((f.index, f.name) for f in chunk.files)
    return {key for key, album in albums.items() if not album}


def latest_dates(chunks: Iterable[ReleaseChunk]) -> dict[bytes, int]:
    """The latest date of each key's files (0: none dated): `releases.latest`."""
    latest: dict[bytes, int] = {}
    for chunk in chunks:
        dated = max((f.posted for f in chunk.files), default=0)
        latest[chunk.key] = max(latest.get(chunk.key, 0), dated)
    return latest


# ---------------------------------------------------------------------------
# What a build must merge again


@attrs.frozen
class Span:
    """What a stored release row says of when and by whom it was posted.

    Attributes:
        poster: the From of its earliest file.
        posted: its earliest file's date (0: no file dated).
        latest: its latest file's date (None: stored before that was kept, unknown).
        files_announced: M of its file counter, or None.
        no_album: a build found that its files are not all an album's
            (`uploads.album_files`; only marked under a shared From).
        times: each stored chunk's earliest and latest file date (dated
            chunks only; latest None: unknown), in order; empty: `posted`
            to `latest` stands for them.
        others: the dated chunks of another poster or M than `poster` and
            `files_announced` (a key without the poster and M in it: one name's
            uploads by several posters, a track posted alone and then in its
            album), each its poster, M, earliest and latest file date: the merge
            keeps them apart by their own (migration 0047), and the closure
            looks around them for their posters' other parts too
            (`Closure._others_windows`).
    """

    poster: str
    posted: int
    latest: int | None
    files_announced: int | None = None
    no_album: bool = False
    times: tuple[tuple[int, int | None], ...] = ()
    others: tuple[tuple[str, int | None, int, int | None], ...] = ()

    def runs(self) -> list[tuple[int, int | None]]:
        """Its chunks' dates as runs: chunks posted within `merge.APART_SECONDS` of
        each other joined (a key posted again a day later is two runs)."""
        times = self.times or ((self.posted, self.latest),)
        return _runs(times)


# How far around what batches stored under its touched keys a pending build reads the
# rows of a posting tool's From (`Scope`): the generation a fresh file joins there
# ends within APART_SECONDS of it, and link joins a part within TOGETHER_SECONDS of
# its first run.
SCOPE_MARGIN_SECONDS = APART_SECONDS + TOGETHER_SECONDS


@attrs.frozen
class Scope:
    """The dates a pending build reads, writes and deletes the rows of a posting tool's
    From in (rows with a `CatalogEntry.span`; any other row is read and written
    whatever the scope): disjoint closed spans, in order.

    A key such a From's uploads share (random names keyed by poster and M) has a
    row per upload of that From and M ever stored, each naming the keys its upload
    was made with: read whole, the rows made a build of a busy From's newest upload
    cost as much as that From's history (issue 25). A pending build reads them only
    within SCOPE_MARGIN_SECONDS of what batches stored under its touched keys (their
    whole span where `_since` looks around them whole), and writes what its merge
    makes so (store/catalog.py's `CatalogTable.write`):

    - a row whose span the scope holds, as always: every stored row sharing a
      file with it lies in the scope at that file's date, so was read, and the
      keys it was made with were merged;
    - any other row of a tool's From is compared with the row stored under its
      guid: the same, nothing to do; else (it gained files from far away, a fill
      of an old upload) its keys are marked pending again without fresh dates,
      so that their next build reads all their rows, as for a row held for keys
      beside the build's;
    - a stored row no longer made is deleted only where the scope meets its span.
    """

    spans: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, spans: Iterable[tuple[int, int]]) -> Scope:
        """The scope of `spans` (closed, in any order): those that overlap or touch joined."""
        joined: list[tuple[int, int]] = []
        for low, high in sorted(spans):
            if joined and low <= joined[-1][1] + 1:
                if high > joined[-1][1]:
                    joined[-1] = (joined[-1][0], high)
                continue
            joined.append((low, high))
        return cls(tuple(joined))

    def holds(self, span: tuple[int, int]) -> bool:
        """Whether `span` lies within the scope."""
        low, high = span
        at = bisect_right(self.spans, (low, _BIGINT_MAX)) - 1
        return at >= 0 and self.spans[at][1] >= high

    def meets(self, span: tuple[int, int]) -> bool:
        """Whether `span` shares a date with the scope."""
        low, high = span
        at = bisect_right(self.spans, (high, _BIGINT_MAX)) - 1
        return at >= 0 and self.spans[at][1] >= low

    @property
    def lows(self) -> list[int]:
        return [low for low, _ in self.spans]

    @property
    def highs(self) -> list[int]:
        return [high for _, high in self.spans]


def _margined(low: int, high: int | None) -> tuple[int, int]:
    """A key's dates widened by SCOPE_MARGIN_SECONDS (`_widened`; open-ended: to the end
    of PostgreSQL's bigint)."""
    low, wide = _widened(low, high, SCOPE_MARGIN_SECONDS)
    return low, _BIGINT_MAX if wide is None else wide


@attrs.frozen
class Window:
    """A poster's releases whose span meets [low, high] (None: open-ended); with
    `album`, only those of that M not marked `no_album` (an album's parts
    under a shared From: see `Closure`); with `near_runs`, only those with a
    stored chunk within `merge.APART_SECONDS` of it.

    `near_runs` is for a posting tool's default From. `uploads.link` joins a
    part by its first run only (its files from the earliest on, each within
    APART_SECONDS of the one before: `merge._first_run_end`), and every dated
    file lies in a stored chunk, so a part a window's parts can be joined with
    has a chunk near the window. A key all of whose uploads with one M share it
    (random file names under the tool's From) spans every day the tool's users
    posted one; by its whole span every window of that From found it, and with
    it every chunk it holds. (Under a poster's own From, where one generation may
    hold files days apart, the whole span still counts: not settled there.)
    """

    poster: str
    low: int
    high: int | None
    album: int | None = None
    near_runs: bool = False


def coalesced(windows: Iterable[Window]) -> list[Window]:
    """The same releases' windows, fewer: each poster's windows that overlap (or
    touch) made one, their union.

    A build's closure asks a window per repost chain, and one poster's chains
    in one batch lie close together: their windows overlap, and each would
    read the same releases again (a batch at 1M lines asked 31 windows that
    read 812k rows for 25k keys). A release meets the union of overlapping
    windows iff it meets one of them, so the keys read are the same.
    """
    windows = list(windows)
    near_runs = {w.poster: w.near_runs for w in windows}  # of the poster's From
    return [
        Window(*joined, near_runs=near_runs[joined[0]])
        for joined in _coalesced((w.poster, w.low, w.high, w.album) for w in windows)
    ]


# A window as the closure makes it (plain tuples: tens of thousands a build, each
# hashed and sorted): poster, low, high (None: open-ended), album (None: any M).
_RawWindow = tuple[str, int, int | None, int | None]


def _coalesced(windows: Iterable[_RawWindow]) -> list[_RawWindow]:
    """`coalesced` of raw windows, in order of poster, album and time."""
    # One sort by poster, album and start (stable: windows of one start stay in the
    # order given), then each poster's and album's run of them joined.
    ordered = sorted(((p, a or 0, low, high) for p, low, high, a in windows), key=_BY_START)
    joined: list[_RawWindow] = []
    if not ordered:
        return joined
    poster, album, low, high = ordered[0]
    for next_poster, next_album, next_low, next_high in ordered[1:]:
        if (
            next_poster != poster
            or next_album != album
            or (high is not None and next_low > high + 1)
        ):
            joined.append((poster, low, high, album or None))
            poster, album, low, high = next_poster, next_album, next_low, next_high
        elif high is not None:
            high = None if next_high is None else max(high, next_high)
    joined.append((poster, low, high, album or None))
    return joined


_BY_START = operator.itemgetter(0, 1, 2)
_BY_TIME = operator.itemgetter(0)


@attrs.frozen
class Wanted:
    """The look-ups a closure's next round needs (each empty when not needed).

    Attributes:
        spans: keys whose rows to read (those not stored are left out of the answer).
        rows: keys whose catalog rows' source keys to read.
        windows: posters' time windows whose release keys to read.
        reach: keys whose rows of a tool's From in the closure's `scope` (as drawn so
            far) to read the spans of (a pending build's, once: `Closure._scope`).
    """

    spans: tuple[bytes, ...] = ()
    rows: tuple[bytes, ...] = ()
    windows: tuple[Window, ...] = ()
    reach: tuple[bytes, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.spans or self.rows or self.windows or self.reach)


@attrs.frozen
class Again:
    """What a closure merges again beyond the keys it is of, by what found each key
    first (a key two ways found counts once): the repost chains walked forward, the
    catalog rows the keys went into, the posters' windows. What makes a build merge
    more than what batches touched, in the build's log line."""

    chains: int = 0
    rows: int = 0
    windows: int = 0

    @property
    def total(self) -> int:
        return self.chains + self.rows + self.windows

    def __str__(self) -> str:
        return f"chains {self.chains}, rows {self.rows}, windows {self.windows}"


@attrs.define(eq=False)
class Closure:
    """The keys to merge again for the keys a batch touched (see the module docstring).

    The driver loops: `wanted()`, then answers every look-up it names with
    `answer(...)`, until `wanted()` is empty; `keys` is then the closure.
    Each key's span is read once, each key's rows once, each window once.

    A build's closure holds tens of thousands of keys, nearly each a chain of
    its own with a window or two: the per-key work is set operations, and
    windows are plain tuples until the few asked (coalesced) are made
    `Window`s (that per-key Python was most of a coordinator's closure CPU).

    Attributes:
        keys: every key found so far (stored releases only, once answered).
        spans: the span of each stored key read.
    """

    keys: set[bytes] = attrs.field(factory=set)
    spans: dict[bytes, Span] = attrs.field(factory=dict)
    _unread: set[bytes] = attrs.field(factory=set)  # keys whose span to read
    _walk: set[bytes] = attrs.field(factory=set)  # stored keys whose repost key to look for
    _rows_unread: set[bytes] = attrs.field(factory=set)  # stored keys whose rows to read
    _windows_read: set[_RawWindow] = attrs.field(factory=set)
    _absent: set[bytes] = attrs.field(factory=set)
    _asked: Wanted = attrs.field(factory=Wanted)
    _asked_windows: set[_RawWindow] = attrs.field(factory=set)  # the last Wanted's, raw
    _windowed: set[bytes] = attrs.field(factory=set)  # keys whose chain's windows were made
    _unwindowed: set[bytes] = attrs.field(factory=set)  # stored keys not in _windowed
    _next: dict[bytes, bytes] = attrs.field(factory=dict)  # each stored key's repost key
    _before: dict[bytes, list[bytes]] = attrs.field(factory=dict)  # stored keys by repost key
    # Of each poster: whether it is a posting tool's From, and a shared one.
    _kinds: dict[str, tuple[bool, bool]] = attrs.field(factory=dict)
    # Of touched keys: the earliest and latest date of the chunks added since their
    # last build (see `_since`).
    _fresh: Mapping[bytes, tuple[int, int]] = attrs.field(factory=dict)
    # The keys the closure is of: one without fresh dates is looked around whole.
    _touched: frozenset[bytes] = frozenset()
    _window_rounds: int = 0
    # Keys found by each way before their spans were read (see `again`).
    _via_chains: set[bytes] = attrs.field(factory=set)
    _via_rows: set[bytes] = attrs.field(factory=set)
    _via_windows: set[bytes] = attrs.field(factory=set)
    rounds: int = 0
    # A pending build's: the rows of a tool's From are read within it (`Scope`), drawn
    # once the touched keys' spans are read. None: every row of the keys found.
    scope: Scope | None = None
    _scoped: bool = False

    @classmethod
    def of(
        cls,
        touched: Iterable[bytes],
        fresh: Mapping[bytes, tuple[int, int]] | None = None,
        *,
        scoped: bool = False,
    ) -> Closure:
        """The closure of `touched`; `fresh`: of those keys, the earliest and latest
        date of the chunks stored under each since its last build, where known (the
        windows are looked in around those, `_since`); `scoped`: a pending build's,
        whose rows of a tool's From are read within its `scope` only."""
        touched = frozenset(touched)
        closure = cls(fresh=fresh or {}, touched=touched, scoped=scoped)
        closure._found(touched)
        return closure

    def _found(self, keys: Iterable[bytes], via: set[bytes] | None = None) -> None:
        found = set(keys)
        found -= self.keys
        found -= self._absent
        if via is not None:
            via |= found - self._unread
        self._unread |= found

    def again(self) -> Again:
        """The stored keys beyond those the closure is of, by what found them first."""
        keys = self.keys - self._touched
        return Again(
            chains=len(keys & self._via_chains),
            rows=len(keys & self._via_rows),
            windows=len(keys & self._via_windows),
        )

    def wanted(self) -> Wanted:
        """What the next round must look up (nothing: the closure is complete).

        Its windows are coalesced (`coalesced`: the same releases, fewer windows)."""
        # Spans first: a key is known to be stored (and so walked, its rows and
        # windows read) only once its span is read.
        if self._walk:
            nexts = {self._repost(key) for key in self._walk}
            self._walk.clear()
            self._found(nexts, self._via_chains)
        self._asked_windows = set()
        if self._unread:
            self._asked = Wanted(spans=tuple(sorted(self._unread)))
        else:
            if self._scoped and self.scope is None:
                self.scope = self._scope()
                reach = tuple(sorted(self._touched & self.keys))
                if reach:
                    self._asked = Wanted(reach=reach)
                    return self._asked
            rows = tuple(sorted(self._rows_unread))
            windows: tuple[Window, ...] = ()
            if self._window_rounds < WINDOW_ROUNDS:
                raw = self._windows()
                raw -= self._windows_read
                kind = self._kind
                windows = tuple(Window(*w, near_runs=kind(w[0])[0]) for w in _coalesced(raw))
                self._asked_windows = raw
                self._window_rounds += bool(windows)
            self._asked = Wanted(rows=rows, windows=windows)
        return self._asked

    def answer(
        self,
        *,
        spans: Mapping[bytes, Span] | None = None,
        rows: Iterable[bytes] | None = None,
        windows: Iterable[bytes] | None = None,
        reach: Iterable[tuple[int, int]] | None = None,
    ) -> None:
        """The answers to the last `wanted()`: the stored spans of the keys asked, the
        source keys of their catalog rows, the keys of the releases in the windows, the
        spans of the rows of a tool's From the keys asked have in the scope."""
        wanted = self._asked
        self.rounds += 1
        if reach is not None and self.scope is not None:
            # The scope reaches over the generations the fresh chunks may join: a
            # file posted over hours, a long upload, is written, not built again.
            self.scope = Scope.of((*self.scope.spans, *reach))
        if spans is not None:
            asked = wanted.spans
            stored = [key for key in asked if key in spans]
            if len(stored) < len(asked):
                self._absent.update(key for key in asked if key not in spans)
            self.keys.update(stored)
            self.spans.update((key, spans[key]) for key in stored)
            self._walk.update(stored)
            self._rows_unread.update(stored)
            self._unwindowed.update(stored)
            before = self._before
            for key in stored:
                nxt = self._repost(key)
                earlier = before.get(nxt)
                if earlier is None:
                    before[nxt] = [key]
                else:
                    earlier.append(key)
            self._unread.difference_update(asked)
        if rows is not None:
            self._rows_unread.difference_update(wanted.rows)
            self._found(rows, self._via_rows)
        if windows is not None:
            self._windows_read |= self._asked_windows
            self._found(windows, self._via_windows)

    def unwindowed(self, keys: Iterable[bytes]) -> set[bytes]:
        """The stored keys among `keys` that no window was looked in around (a row or a
        window found them, past WINDOW_ROUNDS): a part link would join to theirs may be
        beyond the closure."""
        return {key for key in keys if key in self.keys and key not in self._windowed}

    def _scope(self) -> Scope:
        """The dates the build reads the rows of a tool's From in: SCOPE_MARGIN_SECONDS
        around what batches stored under each touched key since its last build, or
        around its whole span where that is not known (a key marked pending again:
        its next build reads all its rows).

        Not its whole span where `_since` looks around it whole: edges index ranges
        in any order, and a busy From's key gets chunks before its stored ones at
        nearly every build. Its generations hours away stay as they were (under a
        tool's From none reaches past APART_SECONDS from its files); one made
        otherwise is built again whole (`Scope`)."""
        spans = []
        for key in self._touched:
            fresh = self._fresh.get(key)
            if fresh is not None:
                spans.append(_margined(*fresh))
                continue
            span = self.spans.get(key)
            if span is not None and span.posted:
                spans.append(_margined(span.posted, span.latest))
            # Else not stored (a probe's generation key) or undated: no row of it has a
            # span (every build reads those).
        return Scope.of(spans)

    def _repost(self, key: bytes) -> bytes:
        nxt = self._next.get(key)
        if nxt is None:
            nxt = self._next[key] = repost_key(key)
        return nxt

    def _kind(self, poster: str) -> tuple[bool, bool]:
        """Whether `poster` is a posting tool's From, and a shared one (remembered)."""
        kind = self._kinds.get(poster)
        if kind is None:
            kind = self._kinds[poster] = (poster.strip().lower() in TOOL_FROMS, shared_from(poster))
        return kind

    def _windows(self) -> set[_RawWindow]:
        """Windows per chain and poster: each run of the chain's chunks, TOGETHER_SECONDS
        either side (of the chains that gained a key since the last round: the
        others' are read)."""
        windowed, spans = self._windowed, self.spans
        found: set[_RawWindow] = set()
        for chain in self._chains():
            if len(chain) == 1:
                # Most chains: one key (what the general way below makes of it).
                key = chain[0]
                if key in windowed:
                    continue
                windowed.add(key)
                self._unwindowed.discard(key)
                self._key_windows(key, spans[key], found)
                continue
            if windowed.issuperset(chain):
                continue
            windowed.update(chain)
            self._unwindowed.difference_update(chain)
            found.update(self._chain_windows([spans[key] for key in chain], self._fresh_of(chain)))
        return found

    def _fresh_of(self, keys: Sequence[bytes]) -> tuple[int, int] | None:
        fresh, touched = self._fresh, self._touched
        if any(key in touched and key not in fresh for key in keys):
            return None  # its whole span (a mark of no dates, an undated chunk)
        dates = [fresh[key] for key in keys if key in fresh]
        if not dates:
            return None
        return min(low for low, _ in dates), max(high for _, high in dates)

    def _key_windows(self, key: bytes, span: Span, found: set[_RawWindow]) -> None:
        """`_chain_windows` of a chain of one key, into `found`: a span's runs are its
        chunks' runs (`Span.runs`), and runs of runs are the runs (`_runs` joins what
        it joined); from `_since` on, where the key's fresh chunks say."""
        if not span.posted:
            return
        fresh = self._fresh.get(key)
        if span.others:
            # Looked around for each poster of its chunks, whatever the row's is.
            found.update(self._others_windows([span], fresh))
        tool, shared = self._kind(span.poster)
        album = None
        if shared:
            if span.no_album or (span.files_announced or 0) < 2:
                return
            album = span.files_announced
        times = span.times or ((span.posted, span.latest),)
        runs = times if len(times) == 1 else _runs(times)
        since = None if fresh is None else _since(fresh, times, tool)
        poster = span.poster
        for start, end in _looked(runs, since, tool):
            low, high = _widened(start, end)
            found.add((poster, low, high, album))

    def _chain_windows(
        self, spans: Sequence[Span], fresh: tuple[int, int] | None = None
    ) -> Iterator[_RawWindow]:
        """The windows of one chain's spans."""
        dated = [s for s in spans if s.posted]
        if not dated:
            return  # undated parts are never joined (uploads.link)
        # Under a tool's From (as merge._split has it: the chain's first key's
        # poster) no generation reaches past a run; under any From link reaches
        # no further than a part's first run (`_runs`).
        tool = self._kind(spans[0].poster)[0]
        times = [run for s in dated for run in s.runs()]
        runs = _runs(times)
        since = None if fresh is None else _since(fresh, times, tool)
        runs = _looked(runs, since, tool)
        posters = sorted({s.poster for s in dated if not self._kind(s.poster)[1]})
        # Under a shared From only an album's parts are joined: of one M,
        # and none of them marked no album's.
        albums = sorted(
            {
                (s.poster, s.files_announced or 0)
                for s in dated
                if self._kind(s.poster)[1] and not s.no_album and (s.files_announced or 0) >= 2
            }
        )
        for start, end in runs:
            low, high = _widened(start, end)
            for poster in posters:
                yield (poster, low, high, None)
            for poster, announced in albums:
                yield (poster, low, high, announced)
        yield from self._others_windows(dated, fresh)

    def _others_windows(
        self, spans: Sequence[Span], fresh: tuple[int, int] | None
    ) -> Iterator[_RawWindow]:
        """The windows around the chunks of another poster or M than their rows'
        (`Span.others`): each poster's runs of them, as a row of that poster's would
        be looked around (`_since`, `_looked`), with the M of each under a shared
        From (an album's parts are of one M). Such a generation lies in its own
        chunks (the merge keeps posters and M apart), so a posting tool's From among
        them is looked around those only, never its other uploads' history.

        With `fresh` dates known, only the posters (and M) one of whose chunks lies
        in them (the fresh chunks may be theirs): the others' generations gained
        nothing, and what they were joined to comes back through their rows. A
        name a thousand posters each posted once (a random From per upload) is
        so looked around its fresh chunks' posters, not a window per poster at
        every build."""
        by_poster: dict[tuple[str, int | None], list[tuple[int, int | None]]] = {}
        for span in spans:
            for poster, announced, start, end in span.others:
                shared = self._kind(poster)[1]
                if shared and (announced or 0) < 2:
                    continue  # under a shared From only an album's parts are joined
                if poster == span.poster and not shared:
                    continue  # its row's windows, of any M, are asked around every chunk
                by_poster.setdefault((poster, announced if shared else None), []).append(
                    (start, end)
                )
        for (poster, album), times in by_poster.items():
            if fresh is not None and not any(
                start <= fresh[1] and (end is None or end >= fresh[0]) for start, end in times
            ):
                continue
            tool = self._kind(poster)[0]
            times.sort(key=_BY_TIME)
            since = None if fresh is None else _since(fresh, times, tool)
            for start, end in _looked(_runs(times), since, tool):
                low, high = _widened(start, end)
                yield (poster, low, high, album)

    def _chains(self) -> list[list[bytes]]:
        """The repost chains (each from its first stored key on) that hold a key whose
        chain's windows were not made yet: the others' windows are read. Found from
        those keys backwards, not from every key each round."""
        before = self._before
        # A key no stored key has as its repost key heads its chain.
        heads = self._unwindowed.difference(before)
        seen: set[bytes] = set()
        stack = [key for key in self._unwindowed if key in before]
        while stack:
            key = stack.pop()
            if key in seen:
                continue
            seen.add(key)
            earlier = before.get(key)
            if earlier:
                stack.extend(earlier)
            else:
                heads.add(key)
        chains = []
        keys, nexts = self.keys, self._next
        for key in sorted(heads):
            chain = [key]
            step = nexts.get(key) or self._repost(key)
            while step in keys and step not in chain:
                chain.append(step)
                step = nexts.get(step) or self._repost(step)
            chains.append(chain)
        return chains


def _since(
    fresh: tuple[int, int], times: Sequence[tuple[int, int | None]], tool: bool
) -> int | None:
    """Where the windows of a key (or chain) may begin: `merge.APART_SECONDS` before
    its fresh chunks (`fresh`: the earliest and latest date of what batches stored
    under it since its last build); None, its whole span.

    `uploads.link` joins parts posted together with a part's first run, and
    under a tool's From the merge puts a file only into a generation whose
    latest file is within APART_SECONDS of it. So fresh chunks change only the
    generation they join, which lies in a run reaching APART_SECONDS before
    them (`_looked` looks around such runs whole: the generation may begin
    anywhere in it, and gaining indexes, files or a name it may leave its
    upload for one posted near its first file) or, under an uploader's own
    From, is his key's first; what was joined to the others comes back
    through the rows. A key filled in or reposted again and again is looked
    around its new post (and its first), not around all its old ones at
    every build.

    The whole span where the fresh chunks hold the key's earliest file (its
    first run, under any From, and its place among its poster's parts may
    change), and under a tool's From where a stored chunk reaches into them or
    comes after them (the merge cuts generations by date, in order).
    """
    low, high = fresh
    if not any(start < low for start, _ in times):
        return None
    if tool and any(
        (start < low and (end is None or end >= low)) or start > high for start, end in times
    ):
        return None
    return low - APART_SECONDS


def _looked(
    runs: Sequence[tuple[int, int | None]], since: int | None, tool: bool
) -> list[tuple[int, int | None]]:
    """The runs to look around given `_since`: those reaching it, whole (a generation
    the fresh chunks join may begin anywhere in its run: under a tool's From it lies
    within one, and gaining indexes, files or a name it may leave its upload for one
    posted near its first file), and elsewhere the first run too (the key's first
    generation begins there, and is the one a fill joins)."""
    if since is None:
        return list(runs)
    return [
        run
        for at, run in enumerate(runs)
        if (at == 0 and not tool) or run[1] is None or run[1] >= since
    ]


def _widened(
    start: int, end: int | None, seconds: int = TOGETHER_SECONDS
) -> tuple[int, int | None]:
    """A run's window: `seconds` (TOGETHER_SECONDS) either side, within PostgreSQL's
    bigint whatever dates a node sent (a window past its end is open, one before its
    start begins there; int8range adds one to an inclusive upper bound)."""
    low = max(start - seconds, _BIGINT_MIN)
    high = None if end is None or end >= _BIGINT_MAX - seconds else end + seconds
    return low, high


def _runs(times: Iterable[tuple[int, int | None]]) -> list[tuple[int, int | None]]:
    """Date spans (start, end; None: open-ended) joined where they overlap or lie
    within APART_SECONDS of each other, in order.

    `uploads.link` joins parts posted together with a part's first run (its
    files from the earliest on, each within APART_SECONDS of the one before:
    `merge._first_run_end`), and under a posting tool's From the merge never
    puts a file more than APART_SECONDS from the latest file of its generation
    before it: so the windows around a key's runs (TOGETHER_SECONDS either side,
    half of APART_SECONDS: the windows of one run meet) find every part link
    could join to its generations, under any From. A key filled in days later
    (one generation under an uploader's own From) is looked around at each
    post, not through the days between.
    """
    joined: list[tuple[int, int | None]] = []
    for start, end in sorted(times, key=lambda t: t[0]):
        if joined:
            last_start, last_end = joined[-1]
            if last_end is None:
                continue
            if start <= last_end + APART_SECONDS:
                joined[-1] = (last_start, None if end is None else max(last_end, end))
                continue
        joined.append((start, end))
    return joined
