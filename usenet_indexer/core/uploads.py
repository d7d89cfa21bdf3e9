"""Releases joined into uploads: the parts of one upload that its subjects split.

Theory of operation
-------------------
The indexer keys a release by what every file's subject says alike (its
head, else its file stem), so that every batch and edge agrees on the key.
Some uploads do not say it alike: a scene upload's volumes are named
`grp-show.s08e08.2160p.r00` and its extras `Show.S08E08.2160p.NF.WEB-DL-GRP.nfo`;
an obfuscated upload's `[1/8] "L3iMP7Tg4X....mkv"` comes with par2 volumes
named after the real release. Each name gives a release of its own, and the
catalog shows one upload as several.

What the parts of one upload do share is what the posting tool gives every
file of a run: the poster (From), the file counter's total M, and the time
they were posted; and each [i/M] is in one part only. `link` joins parts
that agree on all of that, after the chunks of every batch are merged (so
the answer depends on the set of releases, never on batch cuts or order):

- the same poster, and not a posting tool's default From (`SHARED_FROMS`):
  many unrelated uploaders post under PowerPost's, so it says nothing;
- the same M, at least 2, and no file index in two parts;
- posted together: a part's first file at most `TOGETHER_SECONDS` after the
  upload's last file so far (parts in order of their first file), where a
  part's files count as far as its first run (`Part.last`): a release its
  poster filled in days later is not joined, for that, to what he posted
  in between (and a catalog build need not read it: core/catalog.py);
- kept: a part a rule dropped (an executable flood) is never joined, so a
  flood cannot hide among a real upload's files, nor one escape its rule.

Of the uploads a part fits, it goes on the one posted last, but an album's
track (its names as `_Album` reads them, below) first to an upload of its
artist: an uploader posting two albums of one M at once interleaves their
tracks.

Nyuu's `--group-files` numbers each collection of an upload on its own
(`[1/7]` nfo, sfv and par2, `[1/22]` the volumes, `[1/2]` the sample), so
its parts mostly differ in M. Such parts are joined when, beside the poster and the
time, their names say they are one release: the words of one name (less
"sample", and a group leading it) begin the other's, in order, and hold a
scene mark (an episode, a year, a resolution), so `show.s01e01` and
`show.s01e02`, or `The.Office` and `The.Office.US`, stay apart however
close in time; and no file name is in both (a repost's collections, posted
soon after, go with the repost). Their M may be the same (an nfo and sfv
`[1/2]` beside a sample and its par2 `[1/2]`).

Under a posting tool's default From nothing of that says one upload: its
users post at once, often the same M. There an album posted track by track
(PowerPost's `(????) [05/13] - "05-artist_name-track_title.flac"`: no head,
and a file stem of its own for every track) is joined by what its names
say (`_Album`): parts without a head whose every file is an audio track
numbered at the start of its name or an album's extra (playlist, cover,
nfo, sfv, par2, cue, log), of one M, disjoint file indexes, posted
together, and either of one artist (the field after the track number, as
the scene's `NN-artist-title` and `NN - Artist - Title` names put it) or,
for names that give none, numbered alike (a track's file index less its
number the same as the album's tracks'), and in the order PowerPost posts
(a part posted after all of an album's files is numbered after them). A
part goes to the album it continues (numbered right after its highest
index), so an album stays apart from the uploader's next one and from the
next upload under that From (rar volumes, another artist's album).

No I/O, no clock: the dates are the articles'.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import attrs

# Posting tools' default From headers: used by many unrelated uploaders, so
# two parts posted under one are not one upload for that (PowerPost's
# default, as its posts carry it).
SHARED_FROMS = frozenset({"yenc@power-post.org (yenc-pp-a&a)", "yenc@power-post.org"})
# Every posting tool's default From (lower case): many uploaders' uploads come
# under one, so a release key it is part of may hold several uploads (the
# merge keeps files posted far apart under one apart; merge.APART_SECONDS).
# NewsUP's (lib/NewsUP/Utils.pm UPLOADER) is joined by M like a poster's: its
# users rarely post at once.
TOOL_FROMS = SHARED_FROMS | {"newsup <newsup@somewhere.cbr>"}

# How far apart two parts' files may be posted and still be one upload: a
# run posts its files one after another over many connections, seconds to
# minutes apart; a poster's next upload with the same M is hours away, or
# has the same file indexes.
TOGETHER_SECONDS = 30 * 60


@attrs.frozen
class Part:
    """What `link` needs of a merged release.

    Attributes:
        key: the release key.
        poster: the From header of its earliest file.
        files_announced: M of its file counter, or None.
        indexes: the file indexes i it holds.
        first: unix seconds of its earliest file (0: no date).
        last: unix seconds of the last file of its first run: its files from the
            earliest on, each posted within `merge.APART_SECONDS` of the one before
            (`merge._first_run_end`; its latest file, but for files posted again later).
        dropped: a rule dropped it.
        name: its name (naming.release_name).
        files: its files' names.
        headless: its subjects have no head (only then can it be an album's part).
        numbered: (file index, file name) of its files with an index.
    """

    key: bytes
    poster: str
    files_announced: int | None
    indexes: frozenset[int]
    first: int
    last: int
    dropped: bool
    name: str = ""
    files: frozenset[str] = frozenset()
    headless: bool = False
    numbered: frozenset[tuple[int, str]] = frozenset()


# Words of a name, and the marks that make a name a release's.
_WORD = re.compile(r"[^\W_]+")
_MARK = re.compile(r"^(?:s\d{1,2}e\d{1,3}|(?:19|20)\d\d|\d{3,4}p)$")


def joinable(part: Part) -> bool:
    """Whether a part can be joined to others of its M."""
    return _collection_joinable(part) and _has_counter(part)


def _has_counter(part: Part) -> bool:
    """Whether a part's M can join it to others: at least 2."""
    return part.files_announced is not None and part.files_announced >= 2


def _collection_joinable(part: Part) -> bool:
    """Whether a part can be joined at all: kept, dated, and not under a shared From."""
    return not part.dropped and bool(part.first) and not shared_from(part.poster)


@attrs.define(eq=False)
class _Upload:
    keys: list[bytes]
    # Frozen, as its first part's are (so not copied): a join makes new ones.
    indexes: frozenset[int]
    last: int
    poster: str
    first: int
    files_announced: int | None
    words: tuple[str, ...]
    joined: bool  # _collection_joinable: kept, dated, not under a shared From
    files: frozenset[str]  # its files' names
    # The artists its album parts' names give (`_Album.artists`; none: no album's).
    artists: frozenset[str] = frozenset()


# An album's files: audio tracks, and the extras posted beside them.
_AUDIO = frozenset({"mp3", "flac", "m4a", "ogg", "opus", "wav", "ape", "wv", "aac", "wma"})
_EXTRAS = frozenset(
    {"m3u", "m3u8", "nfo", "jpg", "jpeg", "png", "sfv", "par2", "cue", "log", "txt", "md5"}
)
# A track's number at the start of its name (`05-`, `05 - `, `05. `, `105_`
# for disc 1 track 05), then the rest.
_TRACK = re.compile(r"(\d{1,3})(?:[ ._]*-[ ._]*|\.[ _]*|[ _]+)(.*)", re.DOTALL)
# The fields of a name: scene names join them by "-", others by " - ".
_FIELD = re.compile(r"\s*-\s*")


@attrs.frozen
class _Album:
    """What a part's names say of the album it is part of.

    Attributes:
        artists: the artist fields of its names (lower case, "_" as " ").
        offsets: file index less track number of its tracks.
        tracks: whether it holds a track.
    """

    artists: frozenset[str]
    offsets: frozenset[int]
    tracks: bool


def _album(part: Part) -> _Album | None:
    """The album a part's names say it belongs to, or None when they say it is none's."""
    if not part.headless or part.dropped or not part.first or not _has_counter(part):
        return None
    artists: set[str] = set()
    offsets: set[int] = set()
    tracks = False
    for index, name in part.numbered:
        kind = _album_file(name)
        if kind is None:
            return None
        track, stem, found = kind
        if track:
            assert found is not None
            tracks = True
            offsets.add(index - int(found.group(1)))
        rest = found.group(2) if found is not None else stem
        fields = _FIELD.split(rest.replace("_", " ").strip(), maxsplit=1)
        if len(fields) == 2 and fields[0].strip():
            artists.add(fields[0].strip().lower())
    if not part.numbered or len(part.numbered) != len(part.files):
        return None
    return _Album(frozenset(artists), frozenset(offsets), tracks)


def _album_file(name: str) -> tuple[bool, str, re.Match[str] | None] | None:
    """What a file name says as an album's file: (a track, its stem, the stem's
    track number match), or None when no album's file is named so (a sound file
    not numbered as a track, or neither a track nor an album's extra)."""
    stem, _, extension = name.rpartition(".")
    extension = extension.lower()
    found = _TRACK.fullmatch(stem)
    if extension in _AUDIO:
        return None if found is None else (True, stem, found)
    if extension in _EXTRAS:
        return False, stem, found
    return None


def album_files(files: Iterable[tuple[int | None, str]]) -> bool:
    """Whether files (file index, name) could all be an album's: each numbered, and
    a track or an album's extra, as `_album` needs of every file of a part. A
    release of which this is false is never an album's part, whatever files it
    gains (the catalog build's closure looks for album parts only among the
    others; core/catalog.py)."""
    return all(index is not None and _album_file(name) is not None for index, name in files)


def shared_from(poster: str) -> bool:
    """Whether a From is a posting tool's default that unrelated uploaders share
    (`SHARED_FROMS`): under it only an album's parts are joined."""
    return poster.strip().lower() in SHARED_FROMS


@attrs.define(eq=False)
class _OpenAlbum:
    upload: _Upload  # its artists are the upload's (`_Upload.artists`)
    offsets: set[int]


def _joined_album(
    part: Part, album: _Album, open_albums: dict[tuple[str, int], list[_OpenAlbum]]
) -> _Upload | None:
    """The album upload `part` joins (and now belongs to), or None.

    Of the albums it fits (its indexes free, posted within TOGETHER_SECONDS
    of the album's last file, its names agreeing, in posting order), the one
    it continues best: numbered right after the album's highest index, then
    after it, then posted to last.
    """
    best: tuple[tuple[bool, bool, int], _OpenAlbum] | None = None
    low = min(part.indexes)
    albums = open_albums.get((part.poster, part.files_announced or 0))
    if not albums:
        return None
    # Parts come in order of date: an album left behind joins nothing more
    # (under a shared From there are many, all day long).
    albums[:] = [a for a in albums if part.first <= a.upload.last + TOGETHER_SECONDS]
    for candidate in albums:
        upload = candidate.upload
        if not (
            upload.indexes.isdisjoint(part.indexes)
            and upload.files.isdisjoint(part.files)
            and _agrees(album, candidate)
            and _in_order(part, upload)
        ):
            continue
        high = max(upload.indexes)
        rank = (low == high + 1, low > high, upload.last)
        if best is None or rank > best[0]:
            best = rank, candidate
    if best is None:
        return None
    chosen = best[1]
    upload = chosen.upload
    upload.keys.append(part.key)
    upload.indexes |= part.indexes
    upload.files |= part.files
    upload.last = max(upload.last, part.last)
    upload.artists |= album.artists
    chosen.offsets |= album.offsets
    return upload


def _in_order(part: Part, upload: _Upload) -> bool:
    """Whether a part can be of an album in the order PowerPost posts: the file
    list's order, the order of the file numbers. So a part posted after all
    of the album's files so far is numbered after them (a part posted while
    the album's files were, an extra posted in its own order, may not be).
    """
    return part.first <= upload.last or min(part.indexes) > max(upload.indexes)


def _agrees(album: _Album, candidate: _OpenAlbum) -> bool:
    """A part's names agree with an album's: one artist, else tracks numbered alike."""
    if album.artists:
        return not album.artists.isdisjoint(candidate.upload.artists)
    return album.tracks and len(candidate.offsets) == 1 and album.offsets == candidate.offsets


def link(parts: Iterable[Part]) -> list[list[bytes]]:
    """The uploads the parts make up: lists of release keys, each upload's in part order.

    Every key is in exactly one list; a part that joins nothing is a list of
    its own. The result depends only on the set of parts.
    """
    ordered = sorted(parts, key=lambda p: (p.poster, p.files_announced or 0, p.first, p.key))
    uploads: list[_Upload] = []
    open_uploads: dict[tuple[str, int], list[_Upload]] = {}
    open_albums: dict[tuple[str, int], list[_OpenAlbum]] = {}
    for part in ordered:
        collection = _collection_joinable(part)
        by_m = collection and _has_counter(part)
        album = _album(part)
        if by_m:
            upload = _joined(part, album, open_uploads)
        elif album is not None:
            upload = _joined_album(part, album, open_albums)
        else:
            upload = None
        if upload is None:
            upload = _Upload(
                [part.key],
                frozenset(part.indexes),  # the part's own when frozen already
                part.last,
                part.poster,
                part.first,
                part.files_announced,
                # Only _join_collections reads them, of joinable uploads.
                _words(part.name) if collection else (),
                collection,
                frozenset(part.files),
                album.artists if album is not None else frozenset(),
            )
            uploads.append(upload)
            if by_m:
                open_uploads.setdefault((part.poster, part.files_announced or 0), []).append(upload)
            elif album is not None:
                opened = _OpenAlbum(upload, set(album.offsets))
                open_albums.setdefault((part.poster, part.files_announced or 0), []).append(opened)
    return [upload.keys for upload in _join_collections(uploads)]


def _words(name: str) -> tuple[str, ...]:
    words: list[str] = _WORD.findall(name.lower())
    if "sample" in words:
        words = [w for w in words if w != "sample"]
    return tuple(words)


def _one_release(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The shorter name's words begin the longer's, scene marks among them.

    A volume name may lead with the group the release name ends with
    (`fqm-wolf.island.red.2017.2160p` beside `Wolf.Island.Red.2017.2160p.BluRay.x264-FQM`).
    In order, so `Show 2020 01 01` and `Show 2020 01 10`, or `The.Office` and
    `The.Office.US`, stay apart.
    """
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    if small and big and small[0] == big[-1] and small[0] != big[0]:
        small = small[1:]
    return len(small) >= 3 and big[: len(small)] == small and any(_MARK.match(w) for w in small)


def _join_collections(uploads: list[_Upload]) -> list[_Upload]:
    """Uploads of one poster posted together whose names are one release's, joined."""
    by_poster: dict[str, list[_Upload]] = {}
    for upload in uploads:
        if upload.joined:
            by_poster.setdefault(upload.poster, []).append(upload)
    absorbed: set[int] = set()
    for group in by_poster.values():
        group.sort(key=lambda u: (u.first, u.keys[0]))
        for at, upload in enumerate(group):
            if id(upload) in absorbed:
                continue
            for other in group[at + 1 :]:
                if other.first > upload.last + TOGETHER_SECONDS:
                    break
                if (
                    id(other) not in absorbed
                    and upload.files.isdisjoint(other.files)
                    and _one_release(upload.words, other.words)
                ):
                    upload.keys += other.keys
                    upload.last = max(upload.last, other.last)
                    upload.files |= other.files
                    absorbed.add(id(other))
    return [upload for upload in uploads if id(upload) not in absorbed]


def _joined(
    part: Part, album: _Album | None, open_uploads: dict[tuple[str, int], list[_Upload]]
) -> _Upload | None:
    """The upload `part` joins (and now belongs to), or None.

    Of the uploads it fits (its indexes free, posted within TOGETHER_SECONDS of
    the upload's last file), the one posted last: a tool posts an upload's
    files one after another, so a part goes on the upload posted just before
    it. A poster's repost after a takedown posts every file again, the ones the
    takedown took too: such a file fits the first post's hole as well, but
    comes among the repost's files (then the earliest opened, for a tie).
    An album's track (`album`: what its names say) goes first to an upload of
    its artist: an uploader posting two albums of one M at once interleaves
    their tracks (PowerPost over several connections), and the album posted
    last is then as often the other one. Only first: a various-artists
    album's tracks each name another artist.
    """
    best: _Upload | None = None
    best_rank = (False, 0)
    artists = album.artists if album is not None else frozenset()
    for upload in open_uploads.get((part.poster, part.files_announced or 0), ()):
        if (
            not upload.indexes.isdisjoint(part.indexes)
            or part.first > upload.last + TOGETHER_SECONDS
        ):
            continue
        rank = (not artists.isdisjoint(upload.artists), upload.last)
        if best is None or rank > best_rank:
            best, best_rank = upload, rank
    if best is not None:
        best.keys.append(part.key)
        best.indexes |= part.indexes
        best.files |= part.files
        best.last = max(best.last, part.last)
        best.artists |= artists
    return best


def representative(keys: Sequence[bytes]) -> bytes:
    """The key an upload goes by: its first part's (the earliest posted)."""
    return keys[0]
