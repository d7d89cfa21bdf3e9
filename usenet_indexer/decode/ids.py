"""The IMDb, TheTVDB, TVmaze and TMDB ids an NFO names (links or bare ids).

What the *arr programs search by (newznab `imdbid`, `tvdbid`, `tvmazeid`,
`tmdbid`), as scene and P2P NFOs write them:

- IMDb: `https://www.imdb.com/title/tt0133093/`, `imdb.com/title/tt0133093`,
  `m.imdb.com/...`, `IMDb: tt0133093`, or a bare `tt0133093` (an IMDb id is
  `tt` and 7 or 8 digits; nothing else in an NFO looks so).
- TheTVDB: `thetvdb.com/?tab=series&id=81189`, `thetvdb.com/index.php?...&id=81189`,
  `thetvdb.com/dereferrer/series/81189`, `thetvdb.com/series/81189` (a slug
  such as `/series/breaking-bad` carries no id and is passed over), or
  `TVDB: 81189` / `TVDB ID: 81189` / `tvdbid=81189`.
- TVmaze: `tvmaze.com/shows/169/breaking-bad` (also api.tvmaze.com), or
  `TVmaze: 169`.
- TMDB: `themoviedb.org/movie/603-the-matrix` (a movie) and
  `themoviedb.org/tv/1396` (a show: kept apart, Radarr's `tmdbid` is a
  movie's), or `TMDB: 603`.

When an NFO names two ids of one kind (a season pack linking each episode,
or an NFO template pointing at an example), the one named most often is
kept, the first of them on a tie: the release's own link is the one
repeated in headers and footers.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

import attrs

__all__ = ["NO_IDS", "MediaIds", "media_ids"]

# Ids above these are not ids (a phone number, a date run together).
_MAX_ID = 99_999_999

_IMDB = re.compile(r"(?<![A-Za-z0-9])tt(\d{7,8})(?!\d)")
_TVDB = re.compile(
    r"thetvdb\.com/(?:"
    r"(?:index\.php)?\?[^\s\"'<>]*?\bid=(\d{1,8})"
    r"|(?:dereferrer/)?series/(\d{1,8})(?![\w-])"
    r")"
    r"|\btvdb(?:[ _-]?id)?\s*[:=#]?\s*(\d{1,8})(?!\d)",
    re.IGNORECASE,
)
_TVMAZE = re.compile(
    r"tvmaze\.com/shows/(\d{1,8})(?!\d)|\btvmaze(?:[ _-]?id)?\s*[:=#]?\s*(\d{1,8})(?!\d)",
    re.IGNORECASE,
)
_TMDB = re.compile(
    r"themoviedb\.org/(movie|tv)/(\d{1,8})(?!\d)"
    r"|\btmdb(?:[ _-]?id)?\s*[:=#]?\s*(\d{1,8})(?!\d)",
    re.IGNORECASE,
)


@attrs.frozen
class MediaIds:
    """The ids an NFO names; None where it names none of that kind."""

    imdb: int | None = None  # the digits of tt0133093: 133093
    tvdb: int | None = None
    tvmaze: int | None = None
    tmdb: int | None = None  # a movie's
    tmdb_tv: int | None = None  # a show's (TMDB numbers movies and shows apart)

    def __bool__(self) -> bool:
        return any(v is not None for v in attrs.astuple(self))

    @property
    def imdb_text(self) -> str | None:
        """As newznab's `imdb` attr writes it: 7 digits at least, no `tt`."""
        return None if self.imdb is None else f"{self.imdb:07d}"


# None named (frozen: one value serves every default).
NO_IDS = MediaIds()


def media_ids(text: str) -> MediaIds:
    """The ids `text` (an NFO's, see decode/nfo.py) names."""
    tmdb: list[int] = []
    tmdb_tv: list[int] = []
    for match in _TMDB.finditer(text):
        kind, number, bare = match.groups()
        (tmdb_tv if kind is not None and kind.lower() == "tv" else tmdb).append(int(number or bare))
    return MediaIds(
        imdb=_most_named(int(m.group(1)) for m in _IMDB.finditer(text)),
        tvdb=_most_named(_first_group(m) for m in _TVDB.finditer(text)),
        tvmaze=_most_named(_first_group(m) for m in _TVMAZE.finditer(text)),
        tmdb=_most_named(tmdb),
        tmdb_tv=_most_named(tmdb_tv),
    )


def _first_group(match: re.Match[str]) -> int:
    return int(next(g for g in match.groups() if g is not None))


def _most_named(ids: Iterable[int]) -> int | None:
    counts = Counter(i for i in ids if 0 < i <= _MAX_ID)
    if not counts:
        return None
    # Counter keeps first-seen order: max() returns the first of the most named.
    return max(counts, key=counts.__getitem__)
