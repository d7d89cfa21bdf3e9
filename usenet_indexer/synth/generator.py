"""Realistic synthetic overview data of a binary group, with its ground truth.

Theory of operation
-------------------
A busy binary group is many uploads in flight at once. The generator keeps
`concurrent_uploads` slots; for every article it picks a slot at random and
writes that upload's next article, so uploads interleave the way posters
pushing over many connections do. When an upload is done its slot takes a
new one, whose kind is drawn by the configured weights: executable floods
(most uploads, few articles each), legit uploads, obfuscated uploads and
reposts of an earlier legit upload. Between those, a fraction of articles is
junk: text posts, replies, spam, forged segment counters and malformed lines.

Each upload is planned whole first (`_Upload`: release name, file names,
segment counts, subjects, posting tool), then posted by a Python generator
(`_post`) that yields one article at a time. Subjects and message-ids follow
the posting tools seen in real groups (Nyuu, ngPost, PowerPost, the
#a.b.teevee@EFNet style, GoPostStuff and bare "file" yEnc posts).

Realism on top: article numbers beyond 32 bits with small gaps, slowly
rising dates, uploads already under way when the run starts or still going
when it ends (`truncated`), some uploads missing a few segments, rare
duplicate articles of one segment, crossposts listed in Xref, and, for runs
of at least `spanning_min_articles` articles, big uploads posted slowly
across the whole run, so that they span many 500k-article batches.

Lines are bytes, UTF-8 encoded, one per article without a line end, because
a few lines are deliberately not valid UTF-8. The truth
(`usenet_indexer.synth.truth.Truth`) tells, for every article, the release,
file and segment it is, or the kind of junk.

This module is pure: no I/O and no clock; all randomness comes from one
`random.Random(seed)`, so a seed always gives the same lines.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

import attrs

from usenet_indexer.errors import ConfigError
from usenet_indexer.synth.truth import (
    MALFORMED_KINDS,
    Kind,
    Truth,
    TruthFile,
    TruthJunk,
    TruthRelease,
    TruthSegment,
)

__all__ = [
    "DEFAULT_FIRST_ARTICLE",
    "DEFAULT_GROUP",
    "Generated",
    "GeneratorConfig",
    "OverviewGenerator",
    "generate",
]

DEFAULT_GROUP = "alt.binaries.test"
# Beyond 32 bits, as in alt.binaries.boneless: indexers that store numbers in
# 32 bits break at once.
DEFAULT_FIRST_ARTICLE = 2**32 + 1000
XREF_SERVER = "news.example.com"
_T = TypeVar("_T")

# Groups that crossposts also go to (the generated group is left out of a pick).
_OTHER_GROUPS = (
    "alt.binaries.misc",
    "alt.binaries.multimedia",
    "alt.binaries.boneless",
    "alt.binaries.teevee",
    "alt.binaries.movies",
    "alt.binaries.e-book",
    "alt.binaries.cd.image",
    "alt.binaries.sounds.flac",
    "alt.binaries.warez",
    "alt.binaries.mom",
)


def _check_fraction(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfigError(attribute.name, f"must be between 0 and 1, not {value}")


def _check_non_negative(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ConfigError(attribute.name, f"must not be negative, not {value}")


def _check_positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ConfigError(attribute.name, f"must be positive, not {value}")


@attrs.frozen(kw_only=True)
class GeneratorConfig:
    """What to generate. Defaults look like a real binary group by release count.

    Attributes:
        articles: lines to write (junk included).
        seed: seed of the one random generator.
        group: the group generated (first Xref entry of most lines).
        first_article: the first article number.
        start_time: unix time of the first article.
        seconds_per_article: how fast dates rise; 0.02 s is ~4.3M articles a
            day, a busy binary group.
        concurrent_uploads: uploads in flight at once (their articles interleave).
        legit_weight, obfuscated_weight, exe_flood_weight, repost_weight:
            relative odds of each kind for every new upload. By default
            executable floods are ~93% of releases by count and ~20% of
            release articles (the original system measured 92% and 21%);
            obfuscated uploads ~10% of legit ones, reposts ~6%.
        junk_fraction: share of articles that are well-formed junk (text
            posts, replies, spam, forged segment counters).
        malformed_fraction: share of articles that are malformed lines.
        crosspost_probability: share of uploads also posted to 1-2 other groups.
        incomplete_probability: share of legit/obfuscated uploads that miss
            about `missing_segment_fraction` of their segments (at least one).
        missing_segment_fraction: see incomplete_probability.
        duplicate_probability: chance that a segment is posted twice (same k,
            new message-id).
        gap_probability: chance of a small gap (1-5 missing numbers) after an article.
        spanning_min_articles: runs of at least this many articles get
            `articles // spanning_min_articles` big uploads spread over the whole run.
        spanning_fraction: share of the run's articles each spanning upload has.
    """

    articles: int = attrs.field(validator=_check_non_negative)
    seed: int = 1
    group: str = DEFAULT_GROUP
    first_article: int = attrs.field(default=DEFAULT_FIRST_ARTICLE, validator=_check_positive)
    start_time: int = 1_700_000_000
    seconds_per_article: float = attrs.field(default=0.02, validator=_check_non_negative)
    concurrent_uploads: int = attrs.field(default=24, validator=_check_positive)
    legit_weight: float = attrs.field(default=0.056, validator=_check_non_negative)
    obfuscated_weight: float = attrs.field(default=0.0056, validator=_check_non_negative)
    exe_flood_weight: float = attrs.field(default=0.935, validator=_check_non_negative)
    repost_weight: float = attrs.field(default=0.0034, validator=_check_non_negative)
    junk_fraction: float = attrs.field(default=0.01, validator=_check_fraction)
    malformed_fraction: float = attrs.field(default=0.001, validator=_check_fraction)
    crosspost_probability: float = attrs.field(default=0.06, validator=_check_fraction)
    incomplete_probability: float = attrs.field(default=0.1, validator=_check_fraction)
    missing_segment_fraction: float = attrs.field(default=0.005, validator=_check_fraction)
    duplicate_probability: float = attrs.field(default=0.0005, validator=_check_fraction)
    gap_probability: float = attrs.field(default=0.002, validator=_check_fraction)
    spanning_min_articles: int = attrs.field(default=1_000_000, validator=_check_positive)
    spanning_fraction: float = attrs.field(default=0.01, validator=_check_fraction)

    def __attrs_post_init__(self) -> None:
        weights = (
            self.legit_weight,
            self.obfuscated_weight,
            self.exe_flood_weight,
            self.repost_weight,
        )
        if sum(weights) <= 0:
            raise ConfigError("legit_weight", "the upload kind weights must not all be 0")
        if self.junk_fraction + self.malformed_fraction > 0.9:
            raise ConfigError(
                "junk_fraction", "junk and malformed lines leave too few articles for uploads"
            )


@attrs.frozen
class Generated:
    """Generated overview lines (bytes, no line end) and their truth."""

    lines: tuple[bytes, ...]
    truth: Truth


def generate(config: GeneratorConfig) -> Generated:
    """Generate a run of overview lines in memory.

    Args:
        config: what to generate.

    Returns:
        The lines and their truth.
    """
    generator = OverviewGenerator(config)
    lines = tuple(generator.lines())
    return Generated(lines=lines, truth=generator.truth())


# --------------------------------------------------------------------------
# Words and names


_WORDS = (
    "Silent", "River", "Dark", "Empire", "Last", "Night", "Shadow", "Golden", "Broken", "Wild",
    "Lost", "City", "Blue", "Storm", "Iron", "Secret", "Garden", "Winter", "Fire", "Ghost",
    "House", "Road", "King", "Queen", "Dragon", "Star", "Ocean", "Black", "White", "Red",
    "Edge", "Time", "Heart", "Stone", "Dead", "Hidden", "Kingdom", "Mountain", "Island", "Legacy",
    "Frontier", "Rising", "Fallen", "Crimson", "Echo", "Harbor", "Signal", "North", "Sky", "Moon",
    "Glass", "Paper", "Tiger", "Wolf", "Raven", "Orchid", "Summer", "Velvet", "Thunder", "Atlas",
)  # fmt: skip
_SCENE_GROUPS = (
    "FQM", "KILLERS", "EVOLVE", "DIMENSION", "LOL", "NTb", "FLUX", "SPARKS", "AMIABLE", "GECKOS",
    "CMRG", "SKIDROW", "CODEX", "FLT", "RUNE", "ENSLAVE", "OMA", "DYNAMiCS", "TVP", "BS", "CCAT",
    "ION10", "SiGMA", "playWEB", "EDITH", "NOGRP",
)  # fmt: skip
_ARTISTS = (
    "Björk", "Motörhead", "Sigur Rós", "Céline Dion", "The Black Keys", "Daft Punk", "Enya",
    "Massive Attack", "Röyksopp", "Mötley Crüe", "Portishead", "Boards of Canada",
)  # fmt: skip
_AUTHORS = (
    "Jay Lake", "Ursula K. Le Guin", "Terry Pratchett", "Iain M. Banks", "Jo Nesbø", "Stieg Larsson",
    "Neal Stephenson", "Octavia E. Butler", "Haruki Murakami", "Gabriel García Márquez",
)  # fmt: skip
_VENDORS = (
    "Adobe",
    "Autodesk",
    "Microsoft",
    "Corel",
    "Nero",
    "VMware",
    "JetBrains",
    "Ableton",
    "Avid",
)
_PRODUCTS = (
    "Photoshop",
    "Premiere",
    "Office",
    "Studio",
    "Suite",
    "Workstation",
    "IDE",
    "Live",
    "Toolkit",
)
_FIRST_NAMES = (
    "john", "mary", "peter", "anna", "tom", "lisa", "mark", "eva", "frank", "sofie", "jan", "piet",
    "klaus", "marie", "luca", "sven", "nina", "omar", "yuki", "raj",
)  # fmt: skip
_DOMAINS = (
    "gmail.com", "example.com", "web.de", "hotmail.com", "yahoo.com", "ftd.nu", "home.nl", "gmx.net",
    "outlook.com", "proton.me", "mail.ru", "free.fr",
)  # fmt: skip
_PROVIDERS = ("Eweka", "Newshosting", "UsenetServer", "Giganews", "Frugal", "Astraweb", "Easynews")
_RESOLUTIONS = ("720p", "1080p", "2160p")
_SOURCES = ("HDTV", "WEB-DL", "WEB", "BluRay")
_CODECS = ("x264", "x265", "H.264")
_EXE_EXTENSIONS = (".exe", ".scr", ".com", ".bat", ".msi")
# Tags that tell two uploads of one title apart.
_NAME_TAGS = ("REPACK", "PROPER", "iNTERNAL", "DUBBED")

_LETTERS = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ALNUM = _LETTERS + b"0123456789"
# byte -> character tables for bytes.translate: random bytes become random
# text in one C call (the slight bias of 256 % 52 does not matter here).
_LETTER_TABLE = bytes(_LETTERS[i % len(_LETTERS)] for i in range(256))
_ALNUM_TABLE = bytes(_ALNUM[i % len(_ALNUM)] for i in range(256))
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _pick(rng: random.Random, items: Sequence[_T]) -> _T:
    # rng.choice and rng.randint go through three Python-level calls each;
    # these are one, and planning ~60k uploads per million articles adds up.
    return items[int(rng.random() * len(items))]


def _between(rng: random.Random, low: int, high: int) -> int:
    return low + int(rng.random() * (high - low + 1))


def _letters(rng: random.Random, length: int) -> str:
    return _texts(rng, _LETTER_TABLE, length, 1)[0]


def _alnum(rng: random.Random, length: int) -> str:
    return _texts(rng, _ALNUM_TABLE, length, 1)[0]


def _hex(rng: random.Random, digits: int) -> str:
    return _hexes(rng, digits, 1)[0]


def _texts(rng: random.Random, table: bytes, length: int, count: int) -> list[str]:
    # `count` random strings drawn in one go: one big number is much cheaper
    # than `count` small ones.
    size = length * count
    text = rng.getrandbits(size * 8).to_bytes(size, "little").translate(table).decode("ascii")
    return [text[start : start + length] for start in range(0, size, length)]


def _hexes(rng: random.Random, digits: int, count: int) -> list[str]:
    size = digits * count
    text = rng.getrandbits(size * 4).to_bytes(size // 2 + 1, "little").hex()
    return [text[start : start + digits] for start in range(0, size, digits)]


def _rfc5322_date(unix_time: int) -> str:
    # Written out by hand: strftime's %a and %b follow the locale.
    moment = datetime.fromtimestamp(unix_time, UTC)
    return (
        f"{_DAYS[moment.weekday()]}, {moment.day:02} {_MONTHS[moment.month - 1]} {moment.year} "
        f"{moment.hour:02}:{moment.minute:02}:{moment.second:02} +0000"
    )


def _title(rng: random.Random, low: int, high: int, joiner: str = ".") -> str:
    return joiner.join(rng.sample(_WORDS, _between(rng, low, high)))


def _tv_name(rng: random.Random) -> str:
    return (
        f"{_title(rng, 1, 3)}.S{_between(rng, 1, 12):02}E{_between(rng, 1, 24):02}."
        f"{_pick(rng, _RESOLUTIONS)}.{_pick(rng, _SOURCES)}.{_pick(rng, _CODECS)}-{_pick(rng, _SCENE_GROUPS)}"
    )


def _movie_name(rng: random.Random) -> str:
    return (
        f"{_title(rng, 1, 4)}.{_between(rng, 1970, 2026)}.{_pick(rng, _RESOLUTIONS)}."
        f"{_pick(rng, _SOURCES)}.{_pick(rng, _CODECS)}-{_pick(rng, _SCENE_GROUPS)}"
    )


def _software_name(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return f"ubuntu-{_between(rng, 8, 26)}.{_pick(rng, ('04', '10'))}-desktop-{_pick(rng, ('i386', 'amd64'))}"
    return (
        f"{_pick(rng, _VENDORS)}.{_pick(rng, _PRODUCTS)}.{_between(rng, 2010, 2026)}.v{_between(rng, 1, 30)}."
        f"{_between(rng, 0, 9)}.{_pick(rng, ('x64', 'x86', 'Multilingual'))}-{_pick(rng, _SCENE_GROUPS)}"
    )


def _ebook_name(rng: random.Random) -> str:
    return f"{_pick(rng, _AUTHORS)} - {_title(rng, 1, 4, ' ')} ({_between(rng, 1950, 2026)})"


def _music_name(rng: random.Random) -> str:
    artist = _pick(rng, _ARTISTS).replace(" ", "_")
    return (
        f"{artist}-{_title(rng, 1, 3, '_')}-(CAT{_between(rng, 1, 999):03})-WEB-"
        f"{_between(rng, 1990, 2026)}-{_pick(rng, _SCENE_GROUPS)}"
    )


def _exe_name(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.5:
        return (
            f"{_title(rng, 1, 3)}.{_between(rng, 2015, 2026)}.{_pick(rng, _RESOLUTIONS)}."
            f"{_pick(rng, _SOURCES)}.{_pick(rng, _CODECS)}"
        )
    if roll < 0.8:
        return f"{_pick(rng, _VENDORS)}.{_pick(rng, _PRODUCTS)}.{_between(rng, 2018, 2026)}.v{_between(rng, 1, 30)}.x64"
    return f"{_title(rng, 1, 2)}-{_pick(rng, _SCENE_GROUPS)}"


def _obfuscated_base(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return _hex(rng, 32)
    if roll < 0.8:
        return _alnum(rng, _between(rng, 20, 30))
    value = _hex(rng, 32)
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"


def _human_poster(rng: random.Random) -> str:
    name = _pick(rng, _FIRST_NAMES)
    user = f"{name}{_between(rng, 1, 9999)}"
    domain = _pick(rng, _DOMAINS)
    roll = rng.random()
    if roll < 0.4:
        return f"{name.title()} <{user}@{domain}>"
    if roll < 0.7:
        return f"{user}@{domain} ({name.title()})"
    return f"{user}@{domain}"


def _ngpost_poster(rng: random.Random) -> str:
    return f"{_alnum(rng, 13)}@ngPost.com"


def _random_poster(rng: random.Random) -> str:
    # The throwaway posters of obfuscated uploads and floods.
    return f"{_alnum(rng, _between(rng, 10, 25))}@{_alnum(rng, 8)}.{_letters(rng, 3).upper()}"


# --------------------------------------------------------------------------
# Planning uploads

_KINDS: tuple[Kind, ...] = ("legit", "obfuscated", "exe_flood", "repost")

# One article of an upload: subject, poster, message-id, bytes, lines, groups
# (None: only the generated one), the truth list of its file, segment number.
_Item = tuple[str, str, str, int, int, tuple[str, ...] | None, list[TruthSegment], int]
# Message-ids for segment numbers ks of a file of N segments: (ks, N) -> one id per k.
_MessageIds = Callable[[Sequence[int], int], list[str]]


@attrs.define(eq=False)
class _File:
    """A planned file; `segments` collects the truth as its articles are written."""

    index: int
    name: str
    before: str  # subject up to k: "... yEnc ("
    after: str  # subject after k: "/N) 12345"
    total: int  # N of (k/N)
    width: int  # zero padding of k (1: none)
    full_bytes: int  # article bytes of a full segment
    last_bytes: int  # article bytes of segment N
    segments: list[TruthSegment] = attrs.Factory(list)

    def subject(self, k: int) -> str:
        return f"{self.before}{str(k).zfill(self.width)}{self.after}"


@attrs.define(eq=False)
class _Upload:
    """A planned upload and, once posted, what of it was written."""

    id: int
    kind: Kind
    name: str
    real_name: str
    poster: str
    groups: tuple[str, ...]
    tool: str
    files_announced: int | None
    obfuscated: bool
    files: list[_File]
    message_ids: _MessageIds
    repost_of: int | None = None
    missing: frozenset[tuple[int, int]] = frozenset()
    shuffled: bool = False
    truncated: bool = False

    @property
    def segment_total(self) -> int:
        return sum(file.total for file in self.files)


class _FileSpec(NamedTuple):
    """A file before its subject is known: name, segments, raw bytes of the last segment."""

    name: str
    segments: int
    last_raw: int
    role: str  # "data", "par2", "nfo", "sfv", "nzb"


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high + 1))))


def _parts(base: str, count: int, style: str) -> list[str]:
    width = max(2, len(str(count)))
    if count == 1:
        return [f"{base}.{'7z' if style == '7z' else 'rar'}"]
    if style == "rar5":
        return [f"{base}.part{i:0{width}}.rar" for i in range(1, count + 1)]
    if style == "rar4":
        return [f"{base}.rar"] + [f"{base}.r{i:0{width}}" for i in range(count - 1)]
    return [f"{base}.7z.{i:03}" for i in range(1, count + 1)]


def _split(
    rng: random.Random, base: str, segments: int, style: str, article: int
) -> list[_FileSpec]:
    part = _pick(rng, (15, 20, 50, 71, 100, 143, 200, 286, 400))
    # At most 45 data files, so that with par2, nfo and sfv a release stays
    # within the 60 files of real posts.
    part = max(part, math.ceil(segments / 45))
    count = math.ceil(segments / part)
    names = _parts(base, count, style)
    specs = [_FileSpec(name, part, article, "data") for name in names[:-1]]
    last = segments - part * (count - 1)
    specs.append(_FileSpec(names[-1], last, _between(rng, article // 10, article), "data"))
    return specs


def _data_files(
    rng: random.Random, content: str, base: str, segments: int, article: int, tracks: bool
) -> list[_FileSpec]:
    if content == "ebook":
        extension = _pick(rng, (".epub", ".pdf", ".mobi"))
        return [
            _FileSpec(f"{base}{extension}", segments, _between(rng, article // 10, article), "data")
        ]
    if content == "music" and tracks:
        count = _between(rng, 6, 16)
        per_track = max(1, segments // count)
        artist = base.split("-", 1)[0].lower()
        return [
            _FileSpec(
                f"{i:02}-{artist}-{_title(rng, 1, 3, '_').lower()}.flac",
                per_track,
                _between(rng, 1, article),
                "data",
            )
            for i in range(1, count + 1)
        ]
    if content in ("tv", "movie") and segments <= 1500 and rng.random() < 0.35:
        extension = _pick(rng, (".mkv", ".mp4"))
        return [
            _FileSpec(f"{base}{extension}", segments, _between(rng, article // 10, article), "data")
        ]
    if segments <= 60 and rng.random() < 0.4:
        return [_FileSpec(f"{base}.zip", segments, _between(rng, article // 10, article), "data")]
    style = rng.choices(("rar5", "rar4", "7z"), (0.6, 0.25, 0.15))[0]
    return _split(rng, base, segments, style, article)


def _par2_files(rng: random.Random, base: str, data_segments: int, article: int) -> list[_FileSpec]:
    # The usual ladder: vol00+01, vol01+02, vol03+04, vol07+08, ... up to the
    # recovery size, each recovery block about one article.
    specs = [_FileSpec(f"{base}.par2", 1, _between(rng, 2_000, 60_000), "par2")]
    recovery = max(1, round(data_segments * rng.uniform(0.03, 0.15)))
    width = max(2, len(str(recovery)))
    start, count = 0, 1
    while start < recovery:
        blocks = min(count, recovery - start)
        specs.append(
            _FileSpec(f"{base}.vol{start:0{width}}+{blocks:0{width}}.par2", blocks, article, "par2")
        )
        start += blocks
        count *= 2
    return specs


def _small_file(rng: random.Random, name: str, role: str, low: int, high: int) -> _FileSpec:
    return _FileSpec(name, 1, _between(rng, low, high), role)


def _with_extras(
    rng: random.Random,
    base: str,
    data: list[_FileSpec],
    article: int,
    par2: float,
    nfo: float,
    sfv: float,
    nzb: float,
) -> list[_FileSpec]:
    # Posting order: the .nzb (file 0), nfo, sfv, the data, then the par2 set.
    specs: list[_FileSpec] = []
    if rng.random() < nzb:
        specs.append(_small_file(rng, f"{base}.nzb", "nzb", 2_000, 200_000))
    if rng.random() < nfo:
        specs.append(_small_file(rng, f"{base}.nfo", "nfo", 500, 20_000))
    if rng.random() < sfv:
        specs.append(_small_file(rng, f"{base}.sfv", "sfv", 100, 3_000))
    specs.extend(data)
    if rng.random() < par2:
        specs.extend(_par2_files(rng, base, sum(spec.segments for spec in data), article))
    return specs


# Legit content: (kind, weight, data segments low, high). Sized so that a
# legit upload has ~200 articles on average: with executable floods at ~93%
# of uploads, floods then carry ~20% of the articles, as in real groups.
_CONTENT = (
    ("tv", 0.3, 30, 800),
    ("movie", 0.03, 300, 4000),
    ("software", 0.2, 2, 1500),
    ("ebook", 0.33, 1, 8),
    ("music", 0.14, 30, 400),
)
_CONTENT_NAMES = {
    "tv": _tv_name,
    "movie": _movie_name,
    "software": _software_name,
    "ebook": _ebook_name,
    "music": _music_name,
}
_CHANNELS = {
    "tv": "#a.b.teevee@EFNet",
    "movie": "#a.b.moovee@EFNet",
    "software": "#a.b.cd.image@EFNet",
    "ebook": "#a.b.e-book@EFNet",
    "music": "#a.b.inner-sanctum@EFNET",
}
# Posting tools of legit uploads and their odds; obfuscated uploads use the
# modern ones only.
_LEGIT_TOOLS = (
    ("nyuu", 0.35),
    ("ngpost", 0.2),
    ("powerpost", 0.1),
    ("teevee", 0.15),
    ("gopoststuff", 0.1),
    ("plain", 0.1),
)
# Tools whose subjects carry the release name (so a set of differently named
# tracks still reads as one release).
_NAMED_TOOLS = frozenset({"powerpost", "teevee", "gopoststuff"})
# Raw bytes per article by tool (Nyuu and ngPost default to 700 KiB).
_ARTICLE_BYTES = {
    "nyuu": (716_800, 768_000),
    "ngpost": (716_800,),
    "powerpost": (256_000, 384_000),
    "teevee": (396_000, 768_000),
    "gopoststuff": (768_000,),
    "plain": (512_000,),
    "exe": (716_800, 512_000),
}


def _article_bytes(raw: int) -> int:
    # yEnc adds ~2% (line ends) plus ~1.5% (escapes); headers ~600 bytes.
    return raw + raw // 30 + 600


# --------------------------------------------------------------------------
# Subjects and message-ids by posting tool


@attrs.frozen
class _Style:
    """How a tool writes subjects: `head(i, name, size)` gives the text before `(k/N)`."""

    head: Callable[[int, str, int], str]
    size_after: bool  # append the file size after the counter
    width_k: bool  # zero-pad k to the width of N
    announced: bool  # subjects carry [i/M]


def _counter(i: int, total: int, pad: int) -> str:
    return f"{i:0{pad}}/{total:0{pad}}"


def _style(rng: random.Random, tool: str, name: str, total: int, content: str) -> _Style:
    pad = _pick(rng, (1, max(2, len(str(total)))))
    if tool == "nyuu":
        prefix = f"{name} " if rng.random() < 0.2 else ""
        before = rng.random() < 0.25
        return _Style(
            lambda i, file, size: (
                f'{prefix}[{_counter(i, total, pad)}] - "{file}" yEnc '
                + (f" {size} " if before else "")
            ),
            size_after=not before and rng.random() < 0.7,
            width_k=False,
            announced=True,
        )
    if tool == "ngpost":
        return _Style(
            lambda i, file, _size: f'[{_counter(i, total, pad)}] - "{file}" yEnc ',
            True,
            False,
            True,
        )
    if tool == "powerpost":
        if rng.random() < 0.5:
            who, post_id = (
                _pick(rng, _FIRST_NAMES) + str(_between(rng, 10, 9999)),
                _between(rng, 100_000, 999_999),
            )
            return _Style(
                lambda i, file, _size: (
                    f'{who} post {name} [FTD#{post_id}].[{_counter(i, total, 2)}] - "{file}" yEnc '
                ),
                False,
                False,
                True,
            )
        return _Style(
            lambda i, file, _size: f'{name} - "{file}" - [{_counter(i, total, 2)}] yEnc ',
            False,
            False,
            True,
        )
    if tool == "teevee":
        post_id, channel = _between(rng, 10_000, 999_999), _CHANNELS[content]
        return _Style(
            lambda i, file, _size: (
                f'[{post_id}]-[FULL]-[{channel}]-[ {name} ]-[{_counter(i, total, 2)}] - "{file}" yEnc '
            ),
            False,
            True,
            True,
        )
    if tool == "gopoststuff":
        return _Style(
            lambda i, file, _size: f'{name} [{i:02}/{total}] - "{file}" yEnc ', False, False, True
        )
    return _Style(lambda _i, file, _size: f'"{file}" yEnc ', False, False, False)


def _exe_style(rng: random.Random, name: str, total: int) -> _Style:
    roll = rng.random()
    if roll < 0.4:
        return _Style(lambda _i, file, _size: f'{name} - "{file}" yEnc ', False, False, False)
    if roll < 0.7:
        return _Style(lambda i, file, _size: f'[{i}/{total}] - "{file}" yEnc ', False, False, True)
    return _Style(
        lambda i, file, _size: f'{name} [{i}/{total}] - "{file}" yEnc ', True, False, True
    )


def _file_bytes(spec: _FileSpec, article: int) -> int:
    # The file's size, as tools that announce it write it.
    return (spec.segments - 1) * article + spec.last_raw


def _message_ids(rng: random.Random, tool: str, serial: Iterator[int], base_ms: int) -> _MessageIds:
    """A maker of message-ids in the tool's style, for a list of segment numbers at once.

    `serial` keeps the ids unique where the style has a counter; the others
    carry 96 random bits or more.
    """
    if tool == "nyuu":
        return lambda ks, _n: [
            f"{text}-{base_ms + next(serial)}@nyuu"
            for text in _texts(rng, _LETTER_TABLE, 24, len(ks))
        ]
    if tool == "ngpost":
        return lambda ks, _n: [f"{text}@ngPost" for text in _hexes(rng, 32, len(ks))]
    if tool == "powerpost":
        return lambda ks, n: [
            f"part{k}of{n}.{text}@powerpost2000AA.local"
            for k, text in zip(ks, _texts(rng, _ALNUM_TABLE, 20, len(ks)), strict=True)
        ]
    if tool == "teevee":
        if rng.random() < 0.5:
            return lambda ks, _n: [
                f"{base_ms // 1000}.{next(serial):05}.{k}@eu.news.astraweb.com" for k in ks
            ]
        return lambda ks, _n: [
            f"{text}@jojoods.local" for text in _texts(rng, _ALNUM_TABLE, 21, len(ks))
        ]
    if tool == "gopoststuff":
        return lambda ks, _n: [f"{base_ms * 1_000_000 + next(serial)}$gps@gopoststuff" for _k in ks]
    if tool == "plain":
        return lambda ks, _n: [
            f"{text[:8]}$0${next(serial)}$c3e8da3${text[8:]}@news.astraweb.com"
            for text in _hexes(rng, 16, len(ks))
        ]
    host = f"fx{_between(rng, 1, 99):02}.{_pick(rng, ('am4', 'iad', 'ams1'))}"
    return lambda ks, _n: [
        f"{text}.{next(serial)}@{host}" for text in _texts(rng, _ALNUM_TABLE, 16, len(ks))
    ]


# --------------------------------------------------------------------------
# The generator


@attrs.define(eq=False)
class OverviewGenerator:
    """Generates overview lines lazily; `truth()` once `lines()` is exhausted.

    Use `generate()` for a run in memory; this class lets a caller write a
    long run out as it is made.
    """

    _config: GeneratorConfig
    _rng: random.Random = attrs.field(init=False)
    _serial: Iterator[int] = attrs.field(init=False, factory=itertools.count)
    _uploads: list[_Upload] = attrs.field(init=False, factory=list)
    _junk: list[TruthJunk] = attrs.field(init=False, factory=list)
    _names: set[str] = attrs.field(init=False, factory=set)
    _posters: tuple[str, ...] = attrs.field(init=False)
    _kind_odds: tuple[float, ...] = attrs.field(init=False)
    _repostable: deque[_Upload] = attrs.field(init=False, factory=lambda: deque(maxlen=64))
    _text_posts: deque[tuple[str, str]] = attrs.field(init=False, factory=lambda: deque(maxlen=32))
    _other_numbers: dict[str, int] = attrs.field(init=False, factory=dict)
    _last_article: int | None = attrs.field(init=False, default=None)
    _written: int = attrs.field(init=False, default=0)
    _started: bool = attrs.field(init=False, default=False)
    _done: bool = attrs.field(init=False, default=False)

    def __attrs_post_init__(self) -> None:
        self._rng = random.Random(self._config.seed)
        config = self._config
        weights = (
            config.legit_weight,
            config.obfuscated_weight,
            config.exe_flood_weight,
            config.repost_weight,
        )
        self._kind_odds = tuple(itertools.accumulate(weights))
        # Regular posters: the same people post many uploads over time.
        self._posters = tuple(_human_poster(self._rng) for _ in range(300))

    def truth(self) -> Truth:
        """The truth of the lines written.

        Returns:
            The truth.

        Raises:
            RuntimeError: `lines()` has not been run to its end.
        """
        if not self._done:
            raise RuntimeError("truth() needs lines() to have been run to its end")
        releases = tuple(
            release for upload in self._uploads if (release := self._release(upload)) is not None
        )
        config = self._config
        last = self._last_article
        return Truth(
            group=config.group,
            seed=config.seed,
            first_article=config.first_article,
            last_article=config.first_article - 1 if last is None else last,
            lines=self._written,
            releases=releases,
            junk=tuple(self._junk),
        )

    def lines(self) -> Iterator[bytes]:
        """Generate the lines, one overview line (bytes, no line end) per article.

        Returns:
            An iterator over `config.articles` lines; run it once.
        """
        if self._started:
            raise RuntimeError("lines() runs once per OverviewGenerator")
        self._started = True
        config, rng = self._config, self._rng
        slots = [self._start_slot(initial=True) for _ in range(config.concurrent_uploads)]
        posts = [post for _upload, post in slots]
        spanning = self._spanning_uploads()
        next_span = min((position for position, _stride, _post in spanning), default=-1)
        # Locals, not attribute look-ups: this loop runs once per line.
        random, count = rng.random, len(posts)
        junk_threshold = config.junk_fraction + config.malformed_fraction
        malformed_threshold, gap_probability = config.malformed_fraction, config.gap_probability
        first = config.first_article
        xref_main = f"Xref: {XREF_SERVER} {config.group}:"
        number, date, last_article = first, "", None
        next_second_at: float = first
        for written in range(config.articles):
            if number >= next_second_at:
                date, next_second_at = self._date(number)
            roll, item = random(), None
            if 0 <= next_span <= written:
                item = self._next_spanning(spanning, written)
                next_span = min((position for position, _stride, _post in spanning), default=-1)
            if item is not None:
                pass
            elif roll < junk_threshold:
                yield self._junk_line(number, date, malformed=roll < malformed_threshold)
            else:
                slot = int(random() * count)
                item = next(posts[slot], None)
                if item is None:
                    item = self._refill(slots, posts, slot)
            if item is not None:
                subject, poster, mid, size, body_lines, groups, truth, k = item
                xref = xref_main + str(number) if groups is None else self._xref(groups, number)
                truth.append((k, mid, size, number))
                yield f"{number}\t{subject}\t{poster}\t{date}\t<{mid}>\t\t{size}\t{body_lines}\t{xref}".encode()
            last_article = number
            number += 1
            if random() < gap_probability:
                number += _between(rng, 1, 5)
        self._written, self._last_article = config.articles, last_article
        for upload, _post in slots:
            upload.truncated = True
        for _position, _stride, (upload, _post) in spanning:
            upload.truncated = True
        self._done = True

    def _date(self, number: int) -> tuple[str, float]:
        # The Date of article `number`, and the first number with a later second.
        config = self._config
        elapsed = int((number - config.first_article) * config.seconds_per_article)
        pace = config.seconds_per_article
        next_at = config.first_article + (elapsed + 1) / pace if pace > 0 else math.inf
        return _rfc5322_date(config.start_time + elapsed), next_at

    def _release(self, upload: _Upload) -> TruthRelease | None:
        files = tuple(
            TruthFile(file.index, file.name, file.subject(1), file.total, tuple(file.segments))
            for file in upload.files
            if file.segments
        )
        if not files:
            return None
        config = self._config
        first = min(file.segments[0][3] for file in files)
        # A probe needs a par2 or nfo among the files actually written.
        probe = upload.obfuscated and any(file.name.endswith((".par2", ".nfo")) for file in files)
        return TruthRelease(
            id=upload.id,
            kind=upload.kind,
            name=upload.name,
            real_name=upload.real_name,
            poster=upload.poster,
            groups=upload.groups,
            tool=upload.tool,
            posted=config.start_time
            + int((first - config.first_article) * config.seconds_per_article),
            files_announced=upload.files_announced,
            obfuscated=upload.obfuscated,
            probe_candidate=probe,
            repost_of=upload.repost_of,
            truncated=upload.truncated,
            files=files,
        )

    # -- slots

    def _refill(
        self, slots: list[tuple[_Upload, Iterator[_Item]]], posts: list[Iterator[_Item]], slot: int
    ) -> _Item:
        # The slot's upload is done: it may be reposted later; a new one takes the slot.
        upload, _post = slots[slot]
        item = None
        while item is None:
            if upload.kind == "legit" and not upload.truncated:
                self._repostable.append(upload)
            slots[slot] = upload, post = self._start_slot(initial=False)
            posts[slot] = post
            item = next(post, None)
        return item

    def _start_slot(self, *, initial: bool) -> tuple[_Upload, Iterator[_Item]]:
        upload = self._new_upload()
        post = _post(upload, self._rng, self._config.duplicate_probability)
        if initial and self._rng.random() < 0.6:
            # The run starts while this upload is under way: its first
            # articles went out before the first article number.
            upload.truncated = True
            for _ in itertools.islice(post, self._rng.randrange(upload.segment_total)):
                pass
        return upload, post

    def _spanning_uploads(self) -> list[tuple[int, int, tuple[_Upload, Iterator[_Item]]]]:
        # Big uploads posted slowly, one article every `stride`, over the whole run.
        config = self._config
        count = config.articles // config.spanning_min_articles
        target = int(config.articles * config.spanning_fraction)
        if count == 0 or target < 10:
            return []
        stride = max(1, config.articles // target)
        spanning = []
        for offset in range(count):
            upload = self._legit_upload(
                content="movie", tool="nyuu", data_segments=int(target / 1.1)
            )
            post = _post(upload, self._rng, 0.0)
            spanning.append((offset * (stride // count + 1), stride, (upload, post)))
        return spanning

    def _next_spanning(
        self, spanning: list[tuple[int, int, tuple[_Upload, Iterator[_Item]]]], written: int
    ) -> _Item | None:
        # The first one due; one that fell behind (two due at once) catches up next time.
        for place, (position, stride, entry) in enumerate(spanning):
            if position <= written:
                item = next(entry[1], None)
                if item is None:
                    del spanning[place]
                    return None
                spanning[place] = (position + stride, stride, entry)
                return item
        return None

    def _xref(self, groups: tuple[str, ...], number: int) -> str:
        parts = []
        for group in groups:
            if group == self._config.group:
                parts.append(f"{group}:{number}")
            else:
                other = self._other_numbers.get(group) or _between(
                    self._rng, 1_000_000, 900_000_000
                )
                self._other_numbers[group] = other + 1
                parts.append(f"{group}:{other}")
        return f"Xref: {XREF_SERVER} {' '.join(parts)}"

    # -- planning

    def _new_upload(self) -> _Upload:
        kind = self._rng.choices(_KINDS, cum_weights=self._kind_odds)[0]
        if kind == "exe_flood":
            return self._exe_upload()
        if kind == "obfuscated":
            return self._obfuscated_upload()
        if kind == "repost" and self._repostable:
            return self._repost(_pick(self._rng, self._repostable))
        return self._legit_upload()

    def _register(self, upload: _Upload) -> _Upload:
        self._uploads.append(upload)
        return upload

    def _groups(self) -> tuple[str, ...]:
        rng = self._rng
        if rng.random() >= self._config.crosspost_probability:
            return (self._config.group,)
        others = [group for group in _OTHER_GROUPS if group != self._config.group]
        groups = [self._config.group, *rng.sample(others, _between(rng, 1, 2))]
        rng.shuffle(groups)
        return tuple(groups)

    def _unique_name(self, make: Callable[[random.Random], str]) -> str:
        # Two legit uploads with one name by one poster would be one release
        # to any indexer; names are kept unique so the truth is unambiguous.
        name = make(self._rng)
        while name in self._names:
            name = f"{make(self._rng)}.{_pick(self._rng, _NAME_TAGS)}"
        self._names.add(name)
        return name

    def _legit_upload(
        self, content: str | None = None, tool: str | None = None, data_segments: int | None = None
    ) -> _Upload:
        rng = self._rng
        if content is None:
            content = rng.choices([c[0] for c in _CONTENT], [c[1] for c in _CONTENT])[0]
        low, high = next((c[2], c[3]) for c in _CONTENT if c[0] == content)
        if tool is None:
            tool = rng.choices([t[0] for t in _LEGIT_TOOLS], [t[1] for t in _LEGIT_TOOLS])[0]
        name = self._unique_name(_CONTENT_NAMES[content])
        if tool == "powerpost" and content in ("tv", "movie"):
            name = name.replace(".", " ")  # PowerPost posters wrote names with spaces
        base = name.lower() if tool == "teevee" else name
        article = _pick(rng, _ARTICLE_BYTES[tool])
        segments = data_segments or _log_uniform(rng, low, high)
        tracks = content == "music" and tool in _NAMED_TOOLS and rng.random() < 0.6
        data = _data_files(rng, content, base, segments, article, tracks)
        specs = _with_extras(rng, base, data, article, par2=0.85, nfo=0.6, sfv=0.2, nzb=0.08)
        # ngPost makes up a poster for every post unless told otherwise.
        poster = _ngpost_poster(rng) if tool == "ngpost" else _pick(rng, self._posters)
        upload = self._plan(
            kind="legit",
            name=name,
            real_name=name,
            poster=poster,
            tool=tool,
            specs=specs,
            article=article,
            style=_style(rng, tool, name, _announced(specs), content),
            obfuscated=False,
        )
        return self._register(upload)

    def _obfuscated_upload(self) -> _Upload:
        rng = self._rng
        # Video and software, in the proportions of legit uploads.
        content, _weight, low, high = rng.choices(_CONTENT[:3], [c[1] for c in _CONTENT[:3]])[0]
        real_name = self._unique_name(_CONTENT_NAMES[content])
        tool = _pick(rng, ("nyuu", "ngpost"))
        article = _pick(rng, _ARTICLE_BYTES[tool])
        base = _obfuscated_base(rng)
        data = _data_files(rng, content, base, _log_uniform(rng, low, high), article, tracks=False)
        specs = _with_extras(rng, base, data, article, par2=1.0, nfo=0.4, sfv=0.0, nzb=0.0)
        name = base
        if rng.random() < 0.25:
            # Every file gets its own random name; only par2 files keep their extension.
            specs = [
                _FileSpec(
                    _obfuscated_base(rng) + (".par2" if s.role == "par2" else ""),
                    s.segments,
                    s.last_raw,
                    s.role,
                )
                for s in specs
            ]
            name = next(s.name for s in specs if s.role == "par2").removesuffix(".par2")
        if tool == "ngpost":
            poster = _ngpost_poster(rng)
        else:
            poster = _random_poster(rng) if rng.random() < 0.5 else _pick(rng, self._posters)
        upload = self._plan(
            kind="obfuscated",
            name=name,
            real_name=real_name,
            poster=poster,
            tool=tool,
            specs=specs,
            article=article,
            style=_style(rng, tool, name, _announced(specs), content),
            obfuscated=True,
        )
        return self._register(upload)

    def _exe_upload(self) -> _Upload:
        rng = self._rng
        name = _exe_name(rng)
        article = _pick(rng, _ARTICLE_BYTES["exe"])
        extensions = [_pick(rng, _EXE_EXTENSIONS)]
        if rng.random() < 0.2:
            extensions.append(_pick(rng, [e for e in _EXE_EXTENSIONS if e != extensions[0]]))
        specs = [
            _FileSpec(
                f"{name}{extension}",
                _between(rng, 1, 5),
                _between(rng, article // 10, article),
                "data",
            )
            for extension in extensions
        ]
        poster = _random_poster(rng) if rng.random() < 0.5 else _human_poster(rng)
        upload = self._plan(
            kind="exe_flood",
            name=name,
            real_name=name,
            poster=poster,
            tool="exe",
            specs=specs,
            article=article,
            style=_exe_style(rng, name, len(specs)),
            obfuscated=False,
        )
        return self._register(upload)

    def _repost(self, original: _Upload) -> _Upload:
        # Same files, subjects, poster and groups; new message-ids, later.
        files = [attrs.evolve(file, segments=[]) for file in original.files]
        upload = attrs.evolve(
            original,
            id=len(self._uploads),
            kind="repost",
            files=files,
            message_ids=_message_ids(
                self._rng, original.tool, self._serial, self._config.start_time * 1000
            ),
            repost_of=original.id,
            missing=frozenset(),
            truncated=False,
        )
        return self._register(upload)

    def _plan(
        self,
        *,
        kind: Kind,
        name: str,
        real_name: str,
        poster: str,
        tool: str,
        specs: Sequence[_FileSpec],
        article: int,
        style: _Style,
        obfuscated: bool,
    ) -> _Upload:
        rng = self._rng
        files = []
        counter = 0
        for spec in specs:
            counter += spec.role != "nzb"
            index = 0 if spec.role == "nzb" else counter
            size = _file_bytes(spec, article)
            head = style.head(index, spec.name, size)
            tail = f" {size}" if style.size_after else ""
            width = len(str(spec.segments)) if style.width_k else 1
            full = _article_bytes(article) + len(head)
            last = _article_bytes(spec.last_raw) + len(head)
            before, after = f"{head}(", f"/{spec.segments}){tail}"
            files.append(_File(index, spec.name, before, after, spec.segments, width, full, last))
        upload = _Upload(
            id=len(self._uploads),
            kind=kind,
            name=name,
            real_name=real_name,
            poster=poster,
            groups=self._groups(),
            tool=tool,
            files_announced=counter if style.announced else None,
            obfuscated=obfuscated,
            files=files,
            message_ids=_message_ids(rng, tool, self._serial, self._config.start_time * 1000),
            shuffled=tool in ("nyuu", "ngpost") and rng.random() < 0.3,
        )
        if kind in ("legit", "obfuscated") and rng.random() < self._config.incomplete_probability:
            upload.missing = _missing_segments(rng, files, self._config.missing_segment_fraction)
        return upload

    # -- junk

    def _junk_line(self, number: int, date: str, *, malformed: bool) -> bytes:
        rng = self._rng
        mid = f"{_alnum(rng, 16)}.{next(self._serial)}@news.example.net"
        kinds, odds = (MALFORMED_KINDS, None) if malformed else _JUNK_ODDS
        kind = rng.choices(kinds, cum_weights=odds)[0]
        self._junk.append(TruthJunk(mid, kind, number))
        xref = f"Xref: {XREF_SERVER} {self._config.group}:{number}"
        if kind in MALFORMED_KINDS:
            return _malformed_line(rng, kind, number, date, mid, xref)
        references, size = "", _between(rng, 800, 6_000)
        if kind == "text" or (kind == "reply" and not self._text_posts):
            subject = _text_subject(rng, self._config.group)
            self._text_posts.append((subject, mid))
        elif kind == "reply":
            subject, parent = _pick(rng, self._text_posts)
            subject, references = f"Re: {subject.removeprefix('Re: ')}", f"<{parent}>"
            self._text_posts.append((subject, mid))
        elif kind == "spam":
            subject = _spam_subject(rng)
        else:
            subject, size = _forged_subject(rng), _between(rng, 100_000, 800_000)
        line = f"{number}\t{subject}\t{_human_poster(rng)}\t{date}\t<{mid}>\t{references}\t{size}\t{size >> 7}\t{xref}"
        return line.encode()


# Well-formed junk kinds and their cumulative odds (text posts and replies
# are most of the non-binary traffic in a binary group).
_JUNK_ODDS = (("text", "reply", "spam", "forged_counter"), (0.35, 0.65, 0.85, 1.0))


def _announced(specs: Sequence[_FileSpec]) -> int:
    return sum(1 for spec in specs if spec.role != "nzb")


def _missing_segments(
    rng: random.Random, files: Sequence[_File], fraction: float
) -> frozenset[tuple[int, int]]:
    # At least one segment is never posted, so that the upload is really incomplete.
    total = sum(file.total for file in files)
    count = max(1, round(total * fraction * rng.uniform(0.5, 1.5)))
    weights = [file.total for file in files]
    missing = set()
    for file in rng.choices(files, weights, k=count):
        missing.add((file.index, _between(rng, 1, file.total)))
    return frozenset(missing)


def _locally_shuffled(rng: random.Random, total: int) -> list[int]:
    # Several connections at once: segments go out a few places out of order.
    order = list(range(1, total + 1))
    for start in range(0, total, 4):
        window = order[start : start + 4]
        rng.shuffle(window)
        order[start : start + 4] = window
    return order


def _post(upload: _Upload, rng: random.Random, duplicate_probability: float) -> Iterator[_Item]:
    """Post an upload: one item per article, in posting order."""
    poster, mids, missing = upload.poster, upload.message_ids, upload.missing
    groups = upload.groups if len(upload.groups) > 1 else None
    random = rng.random
    for file in upload.files:
        total, before, after, width, truth = (
            file.total,
            file.before,
            file.after,
            file.width,
            file.segments,
        )
        ks: Sequence[int] = (
            _locally_shuffled(rng, total) if upload.shuffled else range(1, total + 1)
        )
        if missing:
            ks = [k for k in ks if (file.index, k) not in missing]
        for k, mid in zip(ks, mids(ks, total), strict=True):
            # Sizes vary a little with yEnc escapes; a hash of k is varied enough and
            # cheaper than another random number per article.
            size = (file.full_bytes if k < total else file.last_bytes) + (
                (k * 2_654_435_761) >> 7 & 511
            )
            subject = before + (str(k) if width == 1 else str(k).zfill(width)) + after
            yield subject, poster, mid, size, size >> 7, groups, truth, k
            if random() < duplicate_probability:
                yield subject, poster, mids((k,), total)[0], size, size >> 7, groups, truth, k


def _text_subject(rng: random.Random, group: str) -> str:
    templates = (
        f"Looking for {_title(rng, 1, 3, ' ')} - anyone?",
        f"REQ: {_title(rng, 1, 3, ' ')} ({_between(rng, 1980, 2026)})",
        f"{group} FAQ and posting rules",
        f"Is anyone else having trouble with {_pick(rng, _PROVIDERS)} today?",
        "test post, please ignore",
        f"Thanks for the {_title(rng, 1, 2, ' ')} post!",
        "Café au lait - über alles? ça va",
    )
    return _pick(rng, templates)


def _spam_subject(rng: random.Random) -> str:
    site = f"www.{_letters(rng, 8).lower()}.{_pick(rng, ('info', 'biz', 'ru', 'top'))}"
    templates = (
        f"$$$ MAKE MONEY FAST $$$ {site}",
        f"Free premium {_pick(rng, _PROVIDERS)} account!!! {site}",
        f"Cheap meds, no prescription - {site}",
        f"★ Download {_title(rng, 1, 3, ' ')} full version free ★ {site}",
    )
    return _pick(rng, templates)


def _forged_subject(rng: random.Random) -> str:
    name = f"{_title(rng, 1, 3)}.{_between(rng, 2000, 2026)}"
    if rng.random() < 0.5:
        return f'[1/1] - "{name}.rar" yEnc (1000000/1)'
    return f'"{name}.zip" yEnc ({_between(rng, 4, 9)}/3)'


def _malformed_line(
    rng: random.Random, kind: str, number: int, date: str, mid: str, xref: str
) -> bytes:
    # Each looks like a binary segment, so only the broken field keeps it out of a release.
    subject = f'[1/1] - "{_title(rng, 1, 3)}.{_between(rng, 2000, 2026)}.part1.rar" yEnc (1/2)'
    poster, size = _human_poster(rng), _between(rng, 100_000, 800_000)
    fields = [str(number), subject, poster, date, f"<{mid}>", "", str(size), str(size >> 7), xref]
    if kind == "too_few_fields":
        return "\t".join(fields[: _pick(rng, (5, 6, 7))]).encode()
    if kind == "bad_number":
        fields[0] = _pick(rng, (f"{number}x", "abc", "", f"{number}.0"))
    elif kind == "bad_bytes":
        fields[6] = _pick(rng, ("abc", "12,345", "7.5e5", "0x1f00"))
    elif kind == "nul_subject":
        fields[1] = subject.replace(" yEnc", "\x00 yEnc")
    else:
        # A Latin-1 subject: 0xE9 followed by ASCII is not UTF-8.
        fields[1] = subject.replace('"', '"Caf\xe9 ', 1)
        return "\t".join(fields).encode("latin-1")
    return "\t".join(fields).encode()
