"""Newznab categories: the standard table, and a release's category from its name and group.

The numbers are those the *arr programs (Sonarr, Radarr, Prowlarr) and
NZBHydra2 use: parents 1000 Console, 2000 Movies, 3000 Audio, 4000 PC,
5000 TV, 6000 XXX, 7000 Books, 8000 Other, and their subcategories.

A release's category comes from rules, as data (`RULES`): each rule names a
category and the patterns that give it, tried in order on the release name
(and, where a rule says so, the group); the first that matches wins, and a
release that no rule takes is 8010 Other/Misc (8020 Hashed when its name
looks random). The rules are checked on ../shared/corpus/subjects.tsv and
the corpus NZB names (tests/test_categories.py). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

import attrs

# The standard table: id -> name. Parents are the multiples of 1000.
CATEGORIES: Mapping[int, str] = {
    1000: "Console",
    1010: "Console/NDS",
    1020: "Console/PSP",
    1030: "Console/Wii",
    1040: "Console/Xbox",
    1050: "Console/Xbox 360",
    1080: "Console/PS3",
    1090: "Console/Other",
    1110: "Console/3DS",
    1120: "Console/PS Vita",
    1130: "Console/WiiU",
    1140: "Console/Xbox One",
    1180: "Console/PS4",
    2000: "Movies",
    2010: "Movies/Foreign",
    2020: "Movies/Other",
    2030: "Movies/SD",
    2040: "Movies/HD",
    2045: "Movies/UHD",
    2050: "Movies/BluRay",
    2060: "Movies/3D",
    2070: "Movies/DVD",
    2080: "Movies/WEB-DL",
    3000: "Audio",
    3010: "Audio/MP3",
    3020: "Audio/Video",
    3030: "Audio/Audiobook",
    3040: "Audio/Lossless",
    3050: "Audio/Other",
    4000: "PC",
    4010: "PC/0day",
    4020: "PC/ISO",
    4030: "PC/Mac",
    4040: "PC/Mobile-Other",
    4050: "PC/Games",
    5000: "TV",
    5010: "TV/WEB-DL",
    5020: "TV/Foreign",
    5030: "TV/SD",
    5040: "TV/HD",
    5045: "TV/UHD",
    5050: "TV/Other",
    5060: "TV/Sport",
    5070: "TV/Anime",
    5080: "TV/Documentary",
    6000: "XXX",
    6010: "XXX/DVD",
    6040: "XXX/x264",
    6045: "XXX/UHD",
    6070: "XXX/Other",
    7000: "Books",
    7010: "Books/Mags",
    7020: "Books/EBook",
    7030: "Books/Comics",
    7050: "Books/Other",
    8000: "Other",
    8010: "Other/Misc",
    8020: "Other/Hashed",
}

OTHER = 8010
HASHED = 8020


def parent(category: int) -> int:
    """The parent of a category (itself for a parent)."""
    return category - category % 1000


def subcategories(parent_id: int) -> list[int]:
    """The subcategories of a parent, in order."""
    return [c for c in CATEGORIES if parent(c) == parent_id and c != parent_id]


@attrs.frozen
class Rule:
    """A category and the patterns that give it.

    Attributes:
        category: the newznab id given.
        name: regular expressions (case-insensitive), any of which matching
            the release name gives the category.
        group: regular expressions, any of which matching one of the
            release's groups gives it too (empty: the group is not asked).
    """

    category: int
    name: tuple[str, ...]
    group: tuple[str, ...] = ()


# Word edges in release names: dots, underscores, dashes, spaces, brackets.
_B = r"(?:^|[._\-\s\[\(\"'])"
_E = r"(?=$|[._\-\s\]\)\"'])"
_TV = r"(?:s\d{1,3}[._\-\s]?e\d{1,4}|s\d{1,3}(?=[._\-\s])|\d{1,2}x\d{2,3}|(?:19|20)\d\d[._\-](?:0[1-9]|1[0-2])[._\-](?:0[1-9]|[12]\d|3[01])|season[._\-\s]?\d+|complete[._\-]series)"
_YEAR = r"(?:19[2-9]\d|20[0-4]\d)"
_XXX = r"(?:xxx|porn|brazzers|bangbros|realitykings|naughtyamerica|onlyfans)"


def _word(pattern: str) -> str:
    """`pattern` as a whole word of a release name."""
    return _B + pattern + _E


def _then(first: str, later: str) -> str:
    """A word of `first` and, later in the name, one of `later` (a year, then a tag)."""
    return _word(first) + r".*" + _word(later)


# In order: the first rule that matches wins.
RULES: tuple[Rule, ...] = (
    Rule(6045, (_then(_XXX, r"(?:2160p|uhd|4k)"),)),
    Rule(6040, (_then(_XXX, r"(?:x264|h\.?264|1080p|720p)"),)),
    Rule(6000, (_word(_XXX),), (r"\.erotica|\.xxx|\.porn",)),
    Rule(5070, (_word(r"(?:anime|horriblesubs|subsplease|erai-raws)"),), (r"\.anime",)),
    Rule(
        5060,
        (
            _word(r"(?:nfl|nba|nhl|mlb|ufc|wwe|f1|formula[._\-]?1|epl|uefa)")
            + r".*"
            + _B
            + r"(?:19|20)\d\d",
        ),
    ),
    Rule(5045, (_then(_TV, r"(?:2160p|uhd|4k)"),)),
    Rule(5040, (_then(_TV, r"(?:1080[pi]|720p)"),)),
    Rule(5030, (_then(_TV, r"(?:480p|576p|sdtv|pdtv|dvdrip|xvid)"),)),
    Rule(5000, (_word(_TV),), (r"\.tv(?:$|\.)|\.multimedia\.tv|\.teevee|\.hdtv",)),
    Rule(3030, (_word(r"(?:audiobook|audiobooks|abook|unabridged)"),), (r"\.audiobooks?",)),
    Rule(3040, (_word(r"(?:flac|alac|lossless|24bit|16bit|hi-?res)"),), (r"\.lossless|\.flac",)),
    Rule(
        3010,
        (_word(r"(?:mp3|320kbps|v0|v2|cbr|vbr|aac)"), r"-\(cat\d+\)-|\(cat\d+\)"),
        (r"\.mp3|\.sounds?|\.music",),
    ),
    Rule(7030, (_word(r"(?:cbr|cbz|comics?|graphic[._\-]novel)"),), (r"\.comics?",)),
    Rule(7010, (_word(r"(?:magazine|mag)"),), (r"\.magazines?",)),
    Rule(7020, (_word(r"(?:epub|mobi|azw3?|ebook|e-book|pdf)"),), (r"\.e-?books?",)),
    Rule(1180, (_word(r"ps4"),)),
    Rule(1080, (_word(r"ps3"),)),
    Rule(1120, (_word(r"(?:psv|vita)"),)),
    Rule(1020, (_word(r"psp"),)),
    Rule(1140, (_word(r"(?:xboxone|xbox[._\-]one)"),)),
    Rule(1050, (_word(r"(?:xbox360|x360)"),)),
    Rule(1130, (_word(r"wiiu"),)),
    Rule(1030, (_word(r"(?:wii|ngc)"),)),
    Rule(1110, (_word(r"3ds"),)),
    Rule(1010, (_word(r"nds"),)),
    Rule(
        1090,
        (_then(r"(?:nsw|switch)", r"(?:nsp|xci|venom|bigblue)"),),
        (r"\.games?\.(?:nintendo|xbox|sony)|\.console",),
    ),
    Rule(4030, (_word(r"(?:macos|mac[._\-]?osx?|osx)"),), (r"\.mac(?:$|\.)",)),
    Rule(4040, (_word(r"(?:android|ios|iphone|ipad|apk)"),)),
    Rule(
        4050,
        (
            _word(
                r"(?:codex|skidrow|reloaded|plaza|fitgirl|dodi|gog|razor1911|flt|tinyiso|empress|rune)"
            ),
        ),
        (r"\.games?(?:$|\.)",),
    ),
    Rule(
        4020,
        (
            _word(
                r"(?:iso|x64|x86|win(?:dows)?(?:10|11|7|xp)?|multilingual|incl[._\-]keygen|keygen|crack|portable)"
            ),
        ),
        (r"\.warez|\.apps?(?:$|\.)|\.iso",),
    ),
    Rule(2060, (_then(_YEAR, r"(?:3d|hsbs|h-sbs|half-ou)"),)),
    Rule(2045, (_then(_YEAR, r"(?:2160p|uhd|4k)"),)),
    Rule(
        2050,
        (_then(_YEAR, r"(?:complete[._\-]bluray|bd25|bd50|avc[._\-]remux|remux|bdmv)"),),
    ),
    Rule(2070, (_then(_YEAR, r"(?:dvdr|dvd5|dvd9|dvd|ntsc|pal)"),)),
    Rule(2080, (_then(_YEAR, r"(?:web-?dl|webrip|web)"),)),
    Rule(
        2040,
        (_then(_YEAR, r"(?:1080[pi]|720p|bluray|blu-ray|bdrip|brrip|x264|x265|h\.?26[45]|hevc)"),),
    ),
    Rule(
        2030,
        (_then(_YEAR, r"(?:480p|576p|xvid|divx|dvdrip|dvdscr|hdtv|cam|ts|tc)"),),
    ),
    Rule(2000, (), (r"\.movies?(?:$|\.)|\.hdtv\.x264|\.dvd",)),
)

_COMPILED: tuple[tuple[int, tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]], ...] = tuple(
    (
        rule.category,
        tuple(re.compile(p, re.IGNORECASE) for p in rule.name),
        tuple(re.compile(p, re.IGNORECASE) for p in rule.group),
    )
    for rule in RULES
)
_HASHED = re.compile(r"^[A-Za-z0-9]{10,}$|^[0-9a-f]{16,}$")


# File extensions that tell a release's kind when its name and groups do not:
# the category of the extension most of its files have.
EXTENSIONS: Mapping[str, int] = {
    "epub": 7020, "mobi": 7020, "azw3": 7020, "pdf": 7020, "cbr": 7030, "cbz": 7030,
    "mp3": 3010, "m4a": 3010, "aac": 3010, "flac": 3040, "m4b": 3030,
    "iso": 4020, "exe": 4020, "dmg": 4030, "apk": 4040,
    "mkv": 2000, "avi": 2000, "mp4": 2000, "m2ts": 2000,
}  # fmt: skip


def categorise(name: str, groups: tuple[str, ...] = (), files: tuple[str, ...] = ()) -> int:
    """The newznab category of a release: the first rule of `RULES` whose name pattern
    matches its name, or whose group pattern matches one of its groups; else Hashed
    for a random name; else the category of the extension (`EXTENSIONS`) most of its
    file names have; else Other."""
    for category, names, group_patterns in _COMPILED:
        if any(p.search(name) for p in names):
            return category
        if group_patterns and any(p.search(g) for p in group_patterns for g in groups):
            return category
    if _HASHED.match(name) and not name.isalpha() and not name.isdigit():
        return HASHED  # random names say nothing until a probe renames them
    kinds = [EXTENSIONS.get(f.rpartition(".")[2].lower()) for f in files if "." in f]
    counted = Counter(kind for kind in kinds if kind is not None)
    if counted:
        return counted.most_common(1)[0][0]
    return OTHER


_SEASON_EPISODE = re.compile(
    r"(?:^|[._\-\s])s(\d{1,3})[._\-\s]?e(\d{1,4})(?=$|[._\-\s]|e\d)", re.IGNORECASE
)
_SEASON_ONLY = re.compile(r"(?:^|[._\-\s])s(\d{1,3})(?=[._\-\s]|$)", re.IGNORECASE)
_CROSS = re.compile(r"(?:^|[._\-\s])(\d{1,2})x(\d{2,3})(?=$|[._\-\s])")


def season_episode(name: str) -> tuple[int | None, int | None]:
    """Season and episode numbers a release name carries (S01E02, 1x02, a season pack's
    S01), each None when absent."""
    found = _SEASON_EPISODE.search(name) or _CROSS.search(name)
    if found:
        return int(found.group(1)), int(found.group(2))
    season = _SEASON_ONLY.search(name)
    if season:
        return int(season.group(1)), None
    return None, None
