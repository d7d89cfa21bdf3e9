"""What probes found, applied to merged catalog releases: pure, no I/O.

Theory of operation
-------------------
The merge (merge.py) makes releases from headers alone; a probe read one
body of some of them (core/probing.py) and found, per release key, a real
release name and the real file names (with sizes, from a par2). `apply`
takes the merged releases of a set of keys (all of some posters: see
store/catalog.py) and the findings of their keys, and returns them as the
catalog shows them:

- **renamed**: a release whose key (or a key it was merged from) has a
  name found is called by it; its files get the real names where the
  par2's list (each file's length) maps them without doubt
  (core/filematch.py), in their subjects too (an NZB's file names are
  its subjects'), and keep theirs elsewhere; the obfuscated names stay as
  aliases (searchable);
- **one upload**: a release of the same poster whose files are all
  among a renamed release's real names (headers split it, the par2 says
  it is one upload) is merged into it;
- **executable inside**: a release whose archive holds only executables
  is dropped (`EXECUTABLE_INSIDE`), like a bare executable flood;
- **well named**: an NFO's name (a finding without files) renames only a
  release that looks obfuscated or that the indexer marked for a probe; a
  well-named release's NFO is read for the ids it names (`ids_probe`), and
  the name in the headers stands.

`archive_probe` says which segment to probe for a release that has no
candidate of the indexer's (no par2, no nfo): the first segment of its
first archive volume (or, obfuscated, of its first data file), for a
release that is obfuscated or that looks like a flood (a few archives).
`ids_probe` says which NFO to read for a film's or a show's ids (IMDb,
TheTVDB, TVmaze, TMDB: what the *arr programs search by): one per release,
its first NFO's first segment, once the release has no other probe to make.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence, Set

import attrs

from usenet_indexer.core.categories import categorise, parent
from usenet_indexer.core.filematch import Posted, real_names
from usenet_indexer.core.merge import (
    CatalogFile,
    CatalogRelease,
    holds,
    lowest,
    segment_numbers,
)
from usenet_indexer.core.naming import COMPANIONS
from usenet_indexer.core.subject import (
    NFO_SUFFIX,
    PAR2_SUFFIX,
    PAR2_VOLUME,
    extension,
    looks_obfuscated,
)
from usenet_indexer.decode.ids import NO_IDS, MediaIds

# categories.categorise, or a memo of it: (name, groups, file names) -> category.
Categorise = Callable[[str, tuple[str, ...], tuple[str, ...]], int]

# The rule name of a release dropped for what its archive holds.
EXECUTABLE_INSIDE = "executable_inside"
# A release of at most this many data files, all archives, may be a
# rar-wrapped flood: its first volume is probed.
FLOOD_FILES = 3

_ARCHIVE = re.compile(r"(?i)\.(?:rar|r\d\d|7z(?:\.\d{3})?|zip|z\d\d|part0*1\.rar|\d{3})$")
_FIRST_VOLUME = re.compile(r"(?i)(?:\.part0*1\.rar|\.rar|\.7z(?:\.001)?|\.zip|\.001)$")


@attrs.frozen
class Finding:
    """What a probe found for one release key.

    Attributes:
        name: the real release name (None: none found).
        files: the real file names (a par2's list, an archive's contents).
        sizes: each file's length where known (a par2's), else 0.
        executable: the release's archive holds executables only.
        message_id: the segment probed: the finding is of the release that
            holds it (a key's chain may hold several uploads of one name).
        slice_bytes: the block size of the par2 set probed (None: not a par2's).
        ids: the media ids an NFO probed named.
    """

    name: str | None
    files: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    executable: bool = False
    message_id: str | None = None
    slice_bytes: int | None = None
    ids: MediaIds = NO_IDS


@attrs.frozen
class Shown:
    """A release as the catalog shows it, with the names it had before (aliases)."""

    release: CatalogRelease
    aliases: tuple[str, ...] = ()


def apply(
    releases: Sequence[CatalogRelease], found: Mapping[bytes, Sequence[Finding]]
) -> list[Shown]:
    """The releases with the findings of their keys applied (see the module docstring)."""
    if not found:
        return [Shown(r) for r in releases]
    shown: list[Shown] = []
    renamed: list[tuple[CatalogRelease, Finding, list[str]]] = []
    rest: list[CatalogRelease] = []
    for release in releases:
        finding = _combined(_of(release, found))
        if finding is None:
            rest.append(release)
        elif finding.executable:
            shown.append(Shown(attrs.evolve(release, dropped=EXECUTABLE_INSIDE)))
        elif finding.name and (finding.files or _renameable(release)):
            renamed.append((release, finding, [release.name]))
        else:
            rest.append(release)
    absorbed: set[bytes] = set()
    for index, (release, finding, aliases) in enumerate(renamed):
        real = set(finding.files)
        for other in rest:
            if (
                other.key not in absorbed
                and other.poster == release.poster
                and other.dropped is None
                and other.files
                and all(f.name in real for f in other.files)
            ):
                absorbed.add(other.key)
                release = _joined(release, other)
                aliases.append(other.name)
        renamed[index] = (release, finding, aliases)
    for release, finding, aliases in renamed:
        whole = release.files_announced is not None and len(release.files) >= (
            release.files_announced
        )
        files, old_names = _renamed_files(release.files, finding, whole=whole)
        assert finding.name is not None
        named = attrs.evolve(release, name=finding.name, files=files)
        kept = tuple(dict.fromkeys(a for a in [*aliases, *old_names] if a != finding.name))
        shown.append(Shown(named, kept))
    shown += [Shown(r) for r in rest if r.key not in absorbed]
    return shown


def _renameable(release: CatalogRelease) -> bool:
    """Whether an NFO's name may rename the release: its own looks obfuscated, or the
    indexer marked it for a probe (a well-named release's NFO is read for its ids)."""
    return release.probe_candidate or looks_obfuscated(release.name)


def _of(release: CatalogRelease, found: Mapping[bytes, Sequence[Finding]]) -> list[Finding]:
    """The findings of a release's keys whose probed segment is one of its own."""
    findings = [f for k in dict.fromkeys((release.key, *release.sources)) for f in found.get(k, ())]
    if any(f.message_id is not None for f in findings):
        ids = {m for f in release.files for _, m, _ in f.segments}
        findings = [f for f in findings if f.message_id is None or f.message_id in ids]
    return findings


def _combined(findings: list[Finding]) -> Finding | None:
    """The findings of a release's keys as one: a par2's (names with sizes) first, then
    an nfo's name; executable only when every archive probed says so."""
    if not findings:
        return None
    if all(f.executable for f in findings):
        return findings[0]
    named = [f for f in findings if f.name and not f.executable]
    if not named:
        return Finding(None)
    named.sort(key=lambda f: (not any(f.sizes), not f.files))
    best = named[0]
    files = dict(zip(best.files, best.sizes or (0,) * len(best.files), strict=False))
    for other in named[1:]:
        for name, size in zip(other.files, other.sizes or (0,) * len(other.files), strict=False):
            files.setdefault(name, size)
    return Finding(best.name, tuple(files), tuple(files.values()))


def _joined(release: CatalogRelease, other: CatalogRelease) -> CatalogRelease:
    seen = _segments(release) + _segments(other)
    announced = _announced(release) + _announced(other)
    dated = [d for d in (release.posted, other.posted) if d]
    return attrs.evolve(
        release,
        groups=tuple(sorted({*release.groups, *other.groups})),
        posted=min(dated) if dated else 0,
        complete=min(1.0, seen / announced) if announced else release.complete,
        bytes=release.bytes + other.bytes,
        chunks=release.chunks + other.chunks,
        files=release.files + other.files,
        sources=tuple(sorted({*release.sources, *other.sources})),
        probe_candidate=release.probe_candidate or other.probe_candidate,
    )


def _segments(release: CatalogRelease) -> int:
    return sum(len(f.segments) for f in release.files)


def _announced(release: CatalogRelease) -> float:
    seen = _segments(release)
    return seen / release.complete if release.complete > 0 else seen


def _renamed_files(
    files: tuple[CatalogFile, ...], finding: Finding, *, whole: bool
) -> tuple[tuple[CatalogFile, ...], list[str]]:
    """Files with their real names where the par2's list maps them without doubt, and
    the names they had; `whole`: every file the upload announced was seen."""
    listed = dict(zip(finding.files, finding.sizes or (0,) * len(finding.files), strict=False))
    if not any(listed.values()):
        return files, []
    posted = [Posted.of(f.name, f.total_segments, f.segments) for f in files]
    named = real_names(posted, listed, whole=whole)
    renamed = tuple(
        attrs.evolve(f, name=named[i], subject=renamed_subject(f.subject, f.name, named[i]))
        if i in named
        else f
        for i, f in enumerate(files)
    )
    return renamed, [files[i].name for i in sorted(named)]


def renamed_subject(subject: str, old: str, new: str) -> str:
    """A file's subject with its name in it replaced (the last time it is there, quoted
    first): what a downloader names the file after (SABnzbd and NZBGet read the name in
    an NZB's subject). A subject without the name is left as it is."""
    for was, now in ((f'"{old}"', f'"{new}"'), (old, new)):
        before, found, after = subject.rpartition(was)
        if found:
            return before + now + after
    return subject


def more_probe(
    release: CatalogRelease, asked: Set[str], found: Mapping[bytes, Sequence[Finding]]
) -> tuple[bytes, str, str] | None:
    """(release key, message-id, file name) of one more segment to probe, or None.

    `asked`: the message-ids of the candidates of the release's keys. A
    release probed only for a name (an nfo's) whose par2 index was not read
    gets its par2 probed for the file names; a release without a candidate
    of its own segments gets its par2 index probed, else its first archive
    volume when it is obfuscated or looks like a flood (see the module
    docstring). A release whose par2 index was not seen (lost, or taken for
    a repeat of another upload's file of the same subject: NewsUP names
    every index `rename.with.this.par2`) gets its smallest par2 volume
    probed: a volume repeats the file list at its start (par2cmdline writes
    the critical packets among the first).
    """
    if release.dropped is not None:
        return None
    # The asked ids among its segments' (a few asked; its segment lists not made),
    # but a well-named release's NFO read for its ids (that asks for no more).
    own = {m for m in asked if any(holds(f.segments, m) for f in release.files)}
    if own and not _renameable(release):  # (its NFOs looked for only when it has some asked)
        own -= {f.segments[0][1] for f in _nfos(release)}
    findings = _of(release, found)
    if any(f.sizes or f.executable for f in findings):
        return None
    first = _par2_to_probe(release)
    wanted = bool(own) or release.probe_candidate or looks_obfuscated(release.name)
    if first is not None and first.segments[0][1] not in asked and wanted:
        return probe_key(release), first.segments[0][1], first.name
    if own:
        return None
    archive = archive_probe(release)
    return None if archive is None else (probe_key(release), *archive)


def probe_key(release: CatalogRelease) -> bytes:
    """The key a build queues a probe of the release under: a key its chunks are
    stored under, its own where it is one (the earliest generation's), else the first
    of its sources. A later generation's own key is of its earliest file chunk
    (merge._keyed), which a batch stored late may change; its sources stay, and what
    a probe found is read through them (`_of`: the finding's segment among its own)."""
    if release.key in release.sources or not release.sources:
        return release.key
    return release.sources[0]


def _par2_to_probe(release: CatalogRelease) -> CatalogFile | None:
    """The par2 index whose first segment was seen, else the smallest such volume."""
    # Its numbers, not its segments: a build asks this of every release (and of the
    # volumes only when no index was seen).
    volumes: list[CatalogFile] = []
    for f in release.files:
        if not PAR2_SUFFIX.search(f.name):
            continue
        if PAR2_VOLUME.search(f.name):
            volumes.append(f)
        elif _first_number(f) == 1:
            return f  # the first index seen
    seen = [f for f in volumes if _first_number(f) == 1]
    return min(seen, key=lambda f: (len(f.segments), f.name), default=None)


def _first_number(file: CatalogFile) -> int | None:
    numbers = segment_numbers(file.segments)
    return numbers[0] if numbers else None


def archive_probe(release: CatalogRelease) -> tuple[str, str] | None:
    """(message-id, file name) of the segment to probe for a release without a par2 or
    nfo candidate, or None (see the module docstring)."""
    if release.dropped is not None or release.probe_candidate:
        return None
    obfuscated = looks_obfuscated(release.name)
    data: list[CatalogFile] = []
    for f in release.files:
        if extension(f.name).lower() not in COMPANIONS and f.segments:
            data.append(f)
            if not obfuscated and len(data) > FLOOD_FILES:
                return None  # a well-named release of many files: no need to look further
    if not data:
        return None
    archives = [f for f in data if _ARCHIVE.search(f.name)]
    if not obfuscated and len(archives) != len(data):
        return None
    first = next((f for f in archives if _FIRST_VOLUME.search(f.name)), None)
    chosen = first or (archives[0] if archives else data[0])
    segment = lowest(chosen.segments)  # by number: the first
    if segment[0] != 1:
        return None  # its first segment was not seen
    return segment[1], chosen.name


# The newznab parents whose releases the *arr programs search by id: Movies
# (Radarr: imdbid, tmdbid) and TV (Sonarr: tvdbid, tvmazeid, imdbid).
ID_PARENTS = frozenset({2000, 5000})


def ids_probe(
    release: CatalogRelease,
    asked: Set[str],
    category: int | None = None,
    categorised: Categorise = categorise,
) -> tuple[bytes, str, str] | None:
    """(release key, message-id, file name) of the NFO to read for the release's ids, or
    None.

    A film or a show (its newznab category under ID_PARENTS: `category`, else
    categorised here, only for a release with an NFO to read) with an NFO
    whose first segment was seen, none of its NFOs asked for yet (`asked`:
    the message-ids of the candidates of its keys): its first NFO's first
    segment. One body per release, only where an id can be: what the probes
    add stays bounded by the films and shows posted with an NFO. `categorised`:
    what categorises it (a build's memo, core/catalog.Categories).
    """
    if release.dropped is not None:
        return None
    nfos = _nfos(release)
    if not nfos or any(f.segments[0][1] in asked for f in nfos):
        return None
    if category is None:
        files = tuple(f.name for f in release.files)
        category = categorised(release.name, release.groups, files)
    if parent(category) not in ID_PARENTS:
        return None
    first = nfos[0]
    return probe_key(release), first.segments[0][1], first.name


def _nfos(release: CatalogRelease) -> list[CatalogFile]:
    """The release's NFOs whose first segment was seen, by name."""
    return sorted(
        (
            f
            for f in release.files
            if NFO_SUFFIX.search(f.name) and f.segments and f.segments[0][0] == 1
        ),
        key=lambda f: f.name,
    )
