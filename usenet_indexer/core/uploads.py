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

No I/O, no clock: the dates are the articles'.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

# Posting tools' default From headers: used by many unrelated uploaders, so
# two parts posted under one are not one upload for that (PowerPost's
# default, as its posts carry it).
SHARED_FROMS = frozenset({"yenc@power-post.org (yenc-pp-a&a)", "yenc@power-post.org"})

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
    """

    key: bytes
    poster: str
    files_announced: int | None
    indexes: frozenset[int]
    first: int
    last: int
    dropped: bool


def joinable(part: Part) -> bool:
    """Whether a part can be joined to others at all."""
    return (
        not part.dropped
        and part.files_announced is not None
        and part.files_announced >= 2
        and bool(part.first)
        and part.poster.strip().lower() not in SHARED_FROMS
    )


@attrs.define(eq=False)
class _Upload:
    keys: list[bytes]
    indexes: set[int]
    last: int


def link(parts: Iterable[Part]) -> list[list[bytes]]:
    """The uploads the parts make up: lists of release keys, each upload's in part order.

    Every key is in exactly one list; a part that joins nothing is a list of
    its own. The result depends only on the set of parts.
    """
    ordered = sorted(parts, key=lambda p: (p.poster, p.files_announced or 0, p.first, p.key))
    uploads: list[_Upload] = []
    open_uploads: dict[tuple[str, int], list[_Upload]] = {}
    for part in ordered:
        upload = _joined(part, open_uploads) if joinable(part) else None
        if upload is None:
            upload = _Upload([part.key], set(part.indexes), part.last)
            uploads.append(upload)
            if joinable(part):
                open_uploads.setdefault((part.poster, part.files_announced or 0), []).append(upload)
    return [upload.keys for upload in uploads]


def _joined(part: Part, open_uploads: dict[tuple[str, int], list[_Upload]]) -> _Upload | None:
    """The upload `part` joins (and now belongs to), or None."""
    for upload in open_uploads.get((part.poster, part.files_announced or 0), ()):
        fits = upload.indexes.isdisjoint(part.indexes)
        if fits and part.first <= upload.last + TOGETHER_SECONDS:
            upload.keys.append(part.key)
            upload.indexes |= part.indexes
            upload.last = max(upload.last, part.last)
            return upload
    return None


def representative(keys: Sequence[bytes]) -> bytes:
    """The key an upload goes by: its first part's (the earliest posted)."""
    return keys[0]
