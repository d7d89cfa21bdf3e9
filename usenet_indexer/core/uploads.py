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
  upload's last file so far (parts in order of their first file);
- kept: a part a rule dropped (an executable flood) is never joined, so a
  flood cannot hide among a real upload's files, nor one escape its rule.

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
        last: unix seconds of its latest file.
        dropped: a rule dropped it.
        name: its name (naming.release_name).
        files: its files' names.
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
    return not part.dropped and bool(part.first) and part.poster.strip().lower() not in SHARED_FROMS


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


def link(parts: Iterable[Part]) -> list[list[bytes]]:
    """The uploads the parts make up: lists of release keys, each upload's in part order.

    Every key is in exactly one list; a part that joins nothing is a list of
    its own. The result depends only on the set of parts.
    """
    ordered = sorted(parts, key=lambda p: (p.poster, p.files_announced or 0, p.first, p.key))
    uploads: list[_Upload] = []
    open_uploads: dict[tuple[str, int], list[_Upload]] = {}
    for part in ordered:
        collection = _collection_joinable(part)
        by_m = collection and _has_counter(part)
        upload = _joined(part, open_uploads) if by_m else None
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
            )
            uploads.append(upload)
            if by_m:
                open_uploads.setdefault((part.poster, part.files_announced or 0), []).append(upload)
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


def _joined(part: Part, open_uploads: dict[tuple[str, int], list[_Upload]]) -> _Upload | None:
    """The upload `part` joins (and now belongs to), or None."""
    for upload in open_uploads.get((part.poster, part.files_announced or 0), ()):
        fits = upload.indexes.isdisjoint(part.indexes)
        if fits and part.first <= upload.last + TOGETHER_SECONDS:
            upload.keys.append(part.key)
            upload.indexes |= part.indexes
            upload.files |= part.files
            upload.last = max(upload.last, part.last)
            return upload
    return None


def representative(keys: Sequence[bytes]) -> bytes:
    """The key an upload goes by: its first part's (the earliest posted)."""
    return keys[0]
