"""Newznab categories: the standard table; a release's category from its name, files, groups.

The numbers are those the *arr programs (Sonarr, Radarr, Prowlarr) and
NZBHydra2 use: parents 1000 Console, 2000 Movies, 3000 Audio, 4000 PC,
5000 TV, 6000 XXX, 7000 Books, 8000 Other, and their subcategories.

A release's category comes from rules, as data (`RULES`): each rule names a
category and the patterns that give it, on the release name and, where a
rule says so, on its groups. A random name (`looks_hashed`) is 8020
Other/Hashed before any rule; then the first rule whose name pattern
matches, the files' extensions, the first rule whose group pattern matches,
the weak name rules, and 8010 Other/Misc for what none takes (`categorise`).
The rules follow how releases are named (scene rules: an episode's SxxExx, a
film's year and source, a game's platform tag or group, music's format and
Artist-Title-SOURCE-YEAR-GROUP) and are checked on a table of real corpus
names filed by reading them, and on ../shared/corpus/subjects.tsv and the
corpus NZB names (tests/test_categories.py). Pure: no I/O.

A catalog build files every release it merges, and most rules match no
given name: a rule's patterns are searched only where its prefilter
(core/prefilter.py: literal strings every match holds) admits the name,
which the rules' index finds from the name's character pairs. The answer
is the one searching every rule gives (tests/test_prefilter.py checks the
prefilters on the corpus, both generator profiles and fuzzed names).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

import attrs

from usenet_indexer.core.prefilter import Index, Prefilter, lowered, prefilter
from usenet_indexer.core.subject import looks_obfuscated

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
            Groups are asked only when no rule's name pattern matched and
            the files' extensions did not tell (a crosspost to a.b.teevee
            does not make an e-book a TV show).
        weak: the name patterns say less than a group does (`1080p` without
            a year is a film, unless it is posted to a.b.anime): asked after
            the groups.
    """

    category: int
    name: tuple[str, ...]
    group: tuple[str, ...] = ()
    weak: bool = False


# Word edges in release names: dots, underscores, dashes, spaces, brackets.
_B = r"(?:^|[._\-\s\[\(\"'])"
_E = r"(?=$|[._\-\s\]\)\"',])"
_TV = r"(?:s\d{1,3}[._\-\s]?e\d{1,4}|s\d{1,3}(?=[._\-\s])|\d{1,2}x\d{2,3}|(?:19|20)\d\d[._\-](?:0[1-9]|1[0-2])[._\-](?:0[1-9]|[12]\d|3[01])|season[._\-\s]?\d+|complete[._\-]series)"
_YEAR = r"(?:19[2-9]\d|20[0-4]\d)"
_XXX = r"(?:xxx|porn|brazzers|bangbros|realitykings|naughtyamerica|onlyfans)"
# Scene PC game groups (the release ends in -GROUP; a TV or film name with the
# same word is taken by its own rules first).
_GAME_GROUPS = (
    r"(?:codex|skidrow|reloaded|plaza|flt|fairlight|razor1911|tinyiso|empress|rune|doge"
    r"|darksiders|hoodlum|prophet|cpy|tenoke|simplex|postmortem|darkzer0|hi2u|goldberg"
    r"|i_know|elamigos|fitgirl|dodi|kaos|walmart|inlaws|faniso|vace|anomaly|deviance|gog)"
)


def _word(pattern: str) -> str:
    """`pattern` as a whole word of a release name."""
    return _B + pattern + _E


def _then(first: str, later: str) -> str:
    """A word of `first` and, later in the name, one of `later` (a year, then a tag)."""
    return _word(first) + r".*" + _word(later)


# In order: the first rule whose name pattern matches wins. What a name says
# most surely comes first: adult, a console's platform tag, anime, sport, an
# episode, then audio and books by their formats, software by its platform,
# architecture and licence words, films by a year with a source or a
# resolution, a PC game by its group; the weak ones last (asked after the
# groups): a version number, Retail, a film's tags without a year, the scene
# music form Artist-Title-SOURCE-YEAR-GROUP.
RULES: tuple[Rule, ...] = (
    Rule(6045, (_then(_XXX, r"(?:2160p|uhd|4k)"),)),
    Rule(6040, (_then(_XXX, r"(?:x264|h\.?264|1080p|720p)"),)),
    Rule(6000, (_word(_XXX),), (r"\.erotica|\.xxx|\.porn",)),
    Rule(1180, (_word(r"ps4"),)),
    Rule(1080, (_word(r"ps3"),)),
    Rule(1120, (_word(r"(?:psv|ps[._\-]?vita)"),)),
    Rule(1020, (_word(r"psp"),)),
    Rule(1140, (_word(r"(?:xboxone|xbox[._\-]one|xboxsx|xbox[._\-]series[._\-]?[xs]?)"),)),
    Rule(1050, (_word(r"(?:xbox360|x360)"),)),
    Rule(1040, (_word(r"xbox"),)),
    Rule(1130, (_word(r"wiiu"),)),
    Rule(1030, (_word(r"(?:wii|ngc)"),)),
    Rule(1110, (_word(r"3ds"),)),
    Rule(1010, (_word(r"nds"),)),
    # PS5 and the Switch have no id of their own in the standard table.
    Rule(
        1090,
        (_word(r"(?:ps5|nsw)"), _then(r"switch", r"(?:nsp|xci)")),
        (r"\.games?\.(?:nintendo|xbox|sony)|\.console",),
    ),
    Rule(
        5070,
        (
            _word(r"(?:anime|horriblesubs|subsplease|erai-raws)"),
            # a fansub's form: [Group] Title - 12 [720p][CRC32]
            r"^\[[^\]]+\].*\[[0-9a-f]{8}\]",
        ),
        (r"\.anime",),
    ),
    Rule(
        5060,
        (
            _word(
                r"(?:nfl|nba|nhl|mlb|ufc|wwe|f1|formula[._\-]?1|epl|uefa|fa[._\-\s]cup|tennis"
                r"|grand[._\-\s]prix|motogp|autogp|indycar|nascar|wrc|superbike|boxing|golf"
                r"|premier[._\-\s]league|bundesliga|la[._\-\s]liga|olympics)"
            )
            + r".*"
            + _B
            + r"(?:19|20)\d\d",
        ),
    ),
    Rule(5045, (_then(_TV, r"(?:2160p|uhd|4k)"),)),
    Rule(5040, (_then(_TV, r"(?:1080[pi]|720p)"),)),
    Rule(5030, (_then(_TV, r"(?:480p|576p|sdtv|pdtv|dvdrip|xvid)"),)),
    Rule(5000, (_word(_TV),), (r"\.tv(?:$|\.)|\.multimedia\.tv|\.teevee|\.hdtv",)),
    Rule(
        3030,
        (_word(r"(?:audiobook|audiobooks|abook|unabridged|h(?:ö|oe)rbuch)"),),
        (r"\.audiobooks?",),
    ),
    Rule(
        3040,
        (_word(r"(?:flac|alac|lossless|24bit|16bit|hi-?res)"),),
        (r"\.lossless|\.flac",),
    ),
    Rule(
        3010,
        (
            _word(
                r"(?:mp3|\d{2,3}[._\-\s]?(?:kbps|kbit)|vbr|discography|discographie|diskographie|discografie)"
            ),
            # LAME's V0/V2, not a version (v2.8)
            _B + r"v[02](?![._]\d)" + _E,
            r"-\(cat\d+\)-|\(cat\d+\)",
        ),
        (r"\.mp3|\.sounds?|\.music",),
    ),
    Rule(7030, (_word(r"(?:cbr|cbz|c2c|comics?|graphic[._\-\s]novel)"),), (r"\.comics?",)),
    Rule(7010, (_word(r"(?:magazine|magazin|mag|issue[._\-\s]?\d+)"),), (r"\.magazines?",)),
    Rule(7020, (_word(r"(?:epub|mobi|azw3?|ebooks?|e-books?|pdf)"),), (r"\.e-?books?",)),
    Rule(4030, (_word(r"(?:macos|mac[._\-]?os[._\-]?x?|osx|os[._\-\s]x)"),), (r"\.mac(?:$|\.)",)),
    Rule(4040, (_word(r"(?:android|ios|iphone|ipad|apk)"),)),
    Rule(4020, (_word(r"(?:iso|dvd-?iso|amd64|i386|i686)"),), (r"\.iso(?:$|\.)|\.cd\.image",)),
    Rule(
        4010,
        (
            _word(
                r"(?:x64|x86|x32|win(?:all|32|64|7|8|10|11|xp|dows)|multilingual|multilanguage"
                r"|keygen|keymaker|keyfilemaker|incl[._\-\s]?(?:crack|patch|serial|reg)|cracked"
                r"|portable)"
            ),
        ),
        (r"\.warez|\.apps?(?:$|\.)|\.0day",),
    ),
    Rule(2060, (_then(_YEAR, r"(?:3d|hsbs|h-sbs|half-ou)"),)),
    Rule(2045, (_then(_YEAR, r"(?:2160p|uhd|4k)"),)),
    Rule(
        2050,
        (_then(_YEAR, r"(?:complete[._\-]bluray|bd25|bd50|avc[._\-]remux|remux|bdmv)"),),
    ),
    Rule(2070, (_then(_YEAR, r"(?:dvdr|dvd5|dvd9|dvd|ntsc|pal)"),)),
    Rule(2080, (_then(_YEAR, r"(?:web-?dl|webrip|web)"),)),
    Rule(2040, (_then(_YEAR, r"(?:1080[pi]|720p|bluray|blu-ray|bdrip|brrip)"),)),
    Rule(
        2030,
        (_then(_YEAR, r"(?:480p|576p|xvid|divx|dvdrip|dvdscr|hdtv|cam|ts|tc)"),),
    ),
    # A codec alone says HD less surely than an SD source says SD.
    Rule(2040, (_then(_YEAR, r"(?:x264|x265|h\.?26[45]|hevc)"),)),
    Rule(
        4050,
        (
            r"[._\-\s(]" + _GAME_GROUPS + r"\)?$",
            _word(r"(?:pc[._\-\s]?games?|pcdvd|gog)"),
            r"[._\-]pc$",
        ),
        (r"\.games?(?:$|\.)",),
    ),
    # Weak: asked after the groups.
    Rule(4010, (_word(r"v\d+(?:\.\d+)+"), _word(r"build[._\-\s]?\d+")), weak=True),
    Rule(7020, (_word(r"retail"),), weak=True),
    # A film's source or resolution without its year (no episode either: the
    # TV rules came first).
    Rule(2040, (_word(r"(?:1080p|720p|bluray|blu-ray|bdrip|brrip)"),), weak=True),
    Rule(2030, (_word(r"(?:xvid|divx|dvdrip|hdrip|dvdscr)"),), weak=True),
    # Scene music: Artist-Title-SOURCE-YEAR-GROUP, words joined by underscores.
    Rule(
        3010,
        (
            r"-(?:web|\d*cd[rms]?|vinyl|vls|sat|fm|dab|cable|line|live|digipak|ep|lp|single)"
            r"-(?:19|20)\d\d-[a-z0-9]+$",
            r"^[^.\s]+-[^.\s]+-(?:19|20)\d\d-[a-z0-9]+$",
        ),
        weak=True,
    ),
    Rule(2000, (), (r"\.movies?(?:$|\.)|\.hdtv\.x264|\.dvd",)),
)


def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """A rule's patterns as one alternation (one search per rule, not per pattern: a
    catalog build files every release it merges; no pattern refers back to a group)."""
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


@attrs.frozen
class _Matcher:
    """A rule's compiled patterns and their prefilter (core/prefilter.py)."""

    category: int
    pattern: re.Pattern[str]
    prefilter: Prefilter

    @classmethod
    def of(cls, category: int, patterns: tuple[str, ...]) -> _Matcher:
        compiled = _compiled(patterns)
        return cls(category, compiled, prefilter(compiled))


@attrs.frozen
class _Matchers:
    """Rules asked in order, a name searched only by those whose prefilter admits it:
    most rules match no given name, and their searches were most of a catalog build's
    filing (the prefilters' strings are looked for by `Index`, a name's pairs once)."""

    matchers: tuple[_Matcher, ...]
    index: Index

    @classmethod
    def of(cls, rules: Iterable[tuple[int, tuple[str, ...]]]) -> _Matchers:
        matchers = tuple(_Matcher.of(category, patterns) for category, patterns in rules)
        return cls(matchers, Index.of([m.prefilter for m in matchers]))

    def first(self, texts: tuple[str, ...]) -> int | None:
        """The category of the first rule whose pattern matches one of `texts`, or None."""
        asked = []
        bits = 0
        for text in texts:
            mine = self.index.candidates(lowered(text))
            asked.append((text, mine))
            bits |= mine
        while bits:
            bit = bits & -bits
            bits ^= bit
            matcher = self.matchers[bit.bit_length() - 1]
            for text, mine in asked:
                if mine & bit and matcher.pattern.search(text):
                    return matcher.category
        return None


@attrs.frozen
class _Rules:
    """The rules compiled, by what they are asked of."""

    by_name: _Matchers
    by_weak_name: _Matchers
    by_group: _Matchers


@functools.cache
def _rules() -> _Rules:
    """The rules compiled and their prefilters made, once, when first asked (a process
    that files no release does not pay for them)."""
    return _Rules(
        by_name=_Matchers.of((r.category, r.name) for r in RULES if r.name and not r.weak),
        by_weak_name=_Matchers.of((r.category, r.name) for r in RULES if r.name and r.weak),
        by_group=_Matchers.of((r.category, r.group) for r in RULES if r.group),
    )


# A random name: hex of 32, 40 or 64 digits (and any other 16 or more), UUIDs,
# the posting tools' random strings (subject.looks_obfuscated), shorter
# letters-and-digits runs with two of each (`MAlXD245333`), and base64-like
# strings with `_` or `-` (`CQVNAj4WLDW_7Bm8Ax6J`: three of each case, two
# digits); never four lower-case letters in a row (`Windows10Pro64bit`: words
# have them).
_UUID = re.compile(
    r"^\{?[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\}?$", re.IGNORECASE
)
_TOKEN = re.compile(
    r"^(?=(?:[^0-9]*[0-9]){2})(?=(?:[^A-Za-z]*[A-Za-z]){2})(?!.*[a-z]{4})[A-Za-z0-9]{10,64}$"
)
_BASE64ISH = re.compile(
    r"^(?=(?:[^A-Z]*[A-Z]){3})(?=(?:[^a-z]*[a-z]){3})(?=(?:[^0-9]*[0-9]){2})(?!.*[a-z]{4})"
    r"[A-Za-z0-9_-]{16,64}$"
)


def looks_hashed(name: str) -> bool:
    """Whether a release name is a random string (a hash, a UUID, a tool's random
    name): such a name says nothing of what the release is until a probe renames it."""
    name = name.strip()
    return bool(
        _UUID.match(name) or _TOKEN.match(name) or _BASE64ISH.match(name)
    ) or looks_obfuscated(name)


# File extensions that tell a release's kind when its name does not: the
# category of the extension most of its files have. Video says less (a film or
# an episode): it is asked after the groups.
EXTENSIONS: Mapping[str, int] = {
    "epub": 7020, "mobi": 7020, "azw3": 7020, "pdf": 7020, "cbr": 7030, "cbz": 7030,
    "mp3": 3010, "m4a": 3010, "aac": 3010, "flac": 3040, "m4b": 3030,
    "iso": 4020, "exe": 4010, "dmg": 4030, "apk": 4040,
}  # fmt: skip
VIDEO_EXTENSIONS: Mapping[str, int] = {"mkv": 2000, "avi": 2000, "mp4": 2000, "m2ts": 2000}


def categorise(name: str, groups: tuple[str, ...] = (), files: tuple[str, ...] = ()) -> int:
    """The newznab category of a release.

    In order: Hashed for a random name (`looks_hashed`: never a film or a
    show, whatever its files); the first rule of `RULES` whose name pattern
    matches (the weak ones left out); the category of the extension
    (`EXTENSIONS`) most of its files have; the first rule whose group pattern
    matches one of its groups; the first weak rule whose name pattern
    matches; a video extension's; else Other.
    """
    if looks_hashed(name):
        return HASHED  # random names say nothing until a probe renames them
    rules = _rules()
    by_name = rules.by_name.first((name,))
    if by_name is not None:
        return by_name
    extensions = [f.rpartition(".")[2].lower() for f in files if "." in f]
    by_extension = _by_extension(extensions, EXTENSIONS)
    if by_extension is not None:
        return by_extension
    by_group = rules.by_group.first(groups)
    if by_group is not None:
        return by_group
    by_weak_name = rules.by_weak_name.first((name,))
    if by_weak_name is not None:
        return by_weak_name
    by_video = _by_extension(extensions, VIDEO_EXTENSIONS)
    return by_video if by_video is not None else OTHER


def _by_extension(extensions: list[str], table: Mapping[str, int]) -> int | None:
    """The category of the extension (lower case) most files have in `table`, or None;
    of a tie, the category met first."""
    counted: dict[int, int] = {}
    for extension in extensions:
        kind = table.get(extension)
        if kind is not None:
            counted[kind] = counted.get(kind, 0) + 1
    # max keeps the first of equals: Counter.most_common(1)'s choice before.
    return max(counted, key=counted.__getitem__) if counted else None


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
