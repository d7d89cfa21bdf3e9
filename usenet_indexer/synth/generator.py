"""Realistic synthetic overview data of a binary group, with its ground truth.

Theory of operation
-------------------
A busy binary group is many uploads in flight at once. The generator keeps
`concurrent_uploads` slots; for every article it picks a slot at random and
writes that upload's next article, so uploads interleave the way posters
pushing over many connections do. When an upload is done its slot takes a
new one, whose kind is drawn by the configured weights: executable floods
(most uploads, few articles each), legit uploads, obfuscated uploads and
reposts of an earlier legit upload (one at a time: a poster reposts an
upload again only once its last repost is done). Between those, a fraction of articles is
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
over up to `spanning_max_articles` articles (the whole run, up to 10M), so
that they span many 500k-article batches. A longer run has them in waves,
each as big and as many as a 10M run's: a slow poster's upload is as big
as a film or a season pack (~100k segments), not a share of however long
one reads the group, and the uploads in flight at once do not grow with the
run (before, a 40M run was 40% spanning uploads of 400k segments each).

Lines are bytes, UTF-8 encoded, one per article without a line end, because
a few lines are deliberately not valid UTF-8. The truth
(`usenet_indexer.synth.truth.Truth`) tells, for every article, the release,
file and segment it is, or the kind of junk.

The posting-tools profile
-------------------------
`GeneratorConfig(profile="posting-tools")` (`uidx generate --profile
posting-tools`) keeps the slots, dates, numbers, junk and crossposts, but
plans its uploads from recipes that imitate what the posting tools write,
taken from their own source (formats re-done here, no code copied), not
from any indexer's rules. The default profile is untouched by it: the same
seed gives the same bytes as before. Per tool, the file each format follows:

- Nyuu: animetosho/Nyuu:lib/uploadmgr.js (default subject `[0i/M] - "name"
  yEnc (k/N) size`, no counter for one file, quotes dropped), lib/article.js
  (message-id: 24 letters upper and lower by turns, `-`, a 13-digit ms
  timestamp, `@nyuu`), config.js (default From `USER <USER@host>`, a dotless
  host cut to its last character + `.localdomain`; 700 KiB articles; post
  check re-posts under a new id), help-full.txt (`--subject` placeholders:
  `yEnc  {filesize} ({part}/{parts})` as the SABnzbd reference posts use,
  `"{filename}" yEnc ({part}/{parts})` without a counter, `${rand(N)}` new
  for every post), lib/fileuploader.js (`--group-files`: a counter per
  collection of similar names).
- ngPost: mbruel/ngPost:src/nntp/NntpArticle.cpp and src/nntp/NntpFile.h
  (article subject `[0i/M] "name" (k/N)`; under `--obfuscate` the subject is
  the message-id's UUID and the From a new random one per article),
  src/NgPost.h (`randomStdFrom`: 13 letters/digits `@ngPost.com`; message-id
  signature `ngPost`; LENGTH_NAME 17 for `--gen_name`), src/PostingJob.cpp
  (the file counter's padding, 1 digit for exactly 10 files).
- NewsUP: demanuel/NewsUP:lib/NewsUP/Article.pm (subject `[i/M] - "name"
  (k/N)`; under obfuscation 1-32 random letters and a random From for every
  article), lib/NewsUP/Utils.pm (`_obfuscate_files`: files renamed to 12
  random characters and a `rename.with.this.par2`; message-id
  `$sec$usec.{base36}@{base36}.newsup`; `--obfuscate` ids in random tools'
  styles; default From `NewsUP <NewsUP@somewhere.cbr>`). NewsUP itself
  randomizes the subjects too when it renames the files; the renamed files
  under plain subjects are what real groups show (issue 15), so the profile
  posts them so.
- PowerPost: annatar/YencPowerPost (Yenc-PowerPost A&A, the open source of
  PowerPost 2000): PostMost/ProgramSettings.cpp (default template
  `(????) [$1/$2] - "$F" yEnc`, default From `Yenc@power-post.org
  (Yenc-PP-A&A)`, domain `powerpost2000AA.local`), PostMost/Common.cpp
  (`CM_BuildSubjectFromTemplate`, `CM_BuildArticleName`: `(kk/NN)` padded to
  the digits of N), PostMost/TaskObject.cpp and PosterThread.cpp
  (`<part{k}of{N}.{20-character id}@domain>` with one id per file, a re-post's
  try number appended, References to part 1), PostMost/PropPage_Add_Subject.cpp
  (`OnApply`: a template needs only `$F`, and an unchanged one is posted
  after a yes to "unchanged?": the `(????)` stays, or the user deletes it),
  PostMost/PropPage_Add_FileOrder.cpp (the files in the order added, or
  "Sort PAR" `OnButtonAfoSortpar`: the .nfo, the .sfv and the .par2 index
  first, the par2 volumes last; the files are numbered in that order).
- JBinUp (closed source): its message-ids as nzblnk/nzb-monkey:src/nzbmonkey.py
  reads them (`..._{i}o{M}@JBinUp.local`); its subject with the upload's
  size in MB as the corpus's sanderjo__sj-nzb-getter__mynzb-30MB NZB shows.
- newsmangler: madcowfred/newsmangler:newsmangler/postmangler.py (files
  sorted; `title [0i/M] - "name" yEnc (0k/N)`; message-id
  `<%.5f.%d@server>` of the time and the part), docs/sample.conf (From
  `Bob <bob@home>`, 768000-byte articles).
- GoPostStuff: madcowfred/GoPostStuff:article.go (`subject [i/M] - "name"
  yEnc (k/N)`, message-id `<{UnixNano}$gps@gopoststuff>`), sample.conf (From,
  768000-byte articles).
- par2 volume names: par2cmdline's `vol00+01` and ParPar's `-n` `vol00-01`
  (animetosho/ParPar:lib/par2gen.js `par2Ext`), power-of-2 sizes.
- The EFNet channel form of a.b.teevee posts (`[id]-[FULL]-[#a.b.teevee@EFNet]
  -[ name ]-[00/M]`) as the corpus's ChrisPortman__ and mozvip__ NZBs show it.

The recipes (`RECIPES`; each truth release says its `pattern`): scene
releases whose lower-case, group-prefixed volumes (`grp-show.s08e08.2160p.r00`)
sit beside `Show.S08E08...-GRP.nfo/.sfv/.par2` in one counter by one poster,
sometimes with a sample set and its own par2 in that counter, or the nfo as
`[00/M]`; other legit uploads by every tool; Nyuu uploads of one random-named
video with a par2 set carrying the real name; ngPost `--gen_name` uploads;
NewsUP renamed uploads; hash-named split files without a file counter;
batches of unrelated PowerPost uploads with the default template and From
and the same `[x/13]`; music albums posted with PowerPost's defaults
(`powerpost_album`: `(????) [05/13] - "05-artist_name-track_title.flac"
yEnc`, some with the placeholder deleted, one file per track named as the
scene's music rules and the corpus's music subjects show, an `.m3u`, a
`.jpg` and an `.nfo` named `00-artist-album-...`, sometimes an `.sfv` and a
par2 set; one album, or two or three of one uploader (other artists) at
once, sometimes with another default upload of the same M right after);
flood waves (several bots posting executables of one
film name at once, sometimes one wrapping it in a rar: `wrapped_flood`);
one scene release posted by two posters; reposts by the same poster, later,
with new message-ids (often of an upload a takedown left incomplete; never
of an upload whose last repost is still being posted); uploads
with a random subject for every article but one poster (`headerless`); and
ngPost's and NewsUP's `--obfuscate` uploads, whose articles the truth counts
as `unattributable` junk. A run opens with one upload of each recipe, so
even a short run holds them all.

This module is pure: no I/O and no clock; all randomness comes from one
`random.Random(seed)`, so a seed always gives the same lines.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

import attrs

from usenet_indexer.errors import ConfigError
from usenet_indexer.synth.truth import (
    MALFORMED_KINDS,
    UNATTRIBUTABLE,
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
    "PROFILES",
    "RECIPES",
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
# "default": the project's own mix; "posting-tools": uploads as the posting
# tools write them (see "The posting-tools profile" above).
PROFILES = ("default", "posting-tools")
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


def _check_profile(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in PROFILES:
        raise ConfigError(attribute.name, f"must be one of {', '.join(PROFILES)}, not {value!r}")


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
            `articles // spanning_min_articles` big uploads spread over the whole run
            (over each stretch of `spanning_max_articles` of a longer run).
        spanning_fraction: share of the run's articles each spanning upload has
            (of its stretch's, in a run longer than `spanning_max_articles`).
        spanning_max_articles: the most articles a spanning upload is posted over:
            a longer run has a wave of them in each stretch of this many articles.
        profile: "default", or "posting-tools" for uploads made the way the
            posting tools make them; that profile draws its own upload mix
            (the kind weights above apply to "default" only; the junk, gap,
            crosspost, duplicate and spanning settings apply to both).
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
    spanning_max_articles: int = attrs.field(default=10_000_000, validator=_check_positive)
    profile: str = attrs.field(default="default", validator=_check_profile)

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
# (None: only the generated one), the truth list of its file (or, for an
# article that belongs to no release, its junk kind), segment number, References.
_Item = tuple[str, str, str, int, int, tuple[str, ...] | None, list[TruthSegment] | str, int, str]
# Message-ids for segment numbers ks of a file of N segments: (ks, N) -> one id per k.
_MessageIds = Callable[[Sequence[int], int], list[str]]
# The posting-tools profile's message-ids: per file, (k, attempt) -> (message-id,
# References); attempt 0 is the first post, 1 a post check's re-post.
_FileIds = Callable[["_File"], Callable[[int, int], tuple[str, str]]]


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
    announced: int = 0  # M of its [i/M] (the posting-tools profile's JBinUp ids show it)

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
    # The posting-tools profile only (None and defaults elsewhere): which
    # recipe made it, a message-id maker per file (`_post_tools` posts it
    # then), per-article subject and poster makers, the junk kind of all
    # its articles, the chance that a post check re-sends a segment.
    pattern: str = ""
    headerless: bool = False
    ids: _FileIds | None = None
    article_subject: Callable[[str], str] | None = None
    article_poster: Callable[[], str] | None = None
    junk_kind: str | None = None
    retry: float = 0.0

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
# The posting-tools profile: what each tool's source writes (see the module
# docstring for the file each imitates). Formats only, re-done here.

# A subject maker: (i, M, file name, file bytes, N) -> (text before k, text
# after k, zero padding of k), where [i/M] is the file counter and (k/N) the
# segment counter.
_Subject = Callable[[int, int, str, int, int], tuple[str, str, int]]

_UPPER_TABLE = bytes(_LETTERS[26 + i % 26] for i in range(256))
_LOWER_TABLE = bytes(_LETTERS[i % 26] for i in range(256))
# PowerPost A&A's unique-id alphabet (TaskObject.cpp generateUniqueID).
_POWERPOST_DIGITS = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ$&"
_POWERPOST_TABLE = bytes(_POWERPOST_DIGITS[i % 64] for i in range(256))
_LOWER_LETTERS = b"abcdefghijklmnopqrstuvwxyz"
_LOWER_LETTER_TABLE = bytes(_LOWER_LETTERS[i % 26] for i in range(256))
_B36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

# The tools' default From lines: uploaders who never change them share one
# identity with everybody else who did not.
POWERPOST_FROM = "Yenc@power-post.org (Yenc-PP-A&A)"  # ProgramSettings.cpp szDefault_From/FromNick
NEWSUP_FROM = "NewsUP <NewsUP@somewhere.cbr>"  # Utils.pm read_options UPLOADER
NEWSMANGLER_FROM = "Bob <bob@home>"  # docs/sample.conf [posting] from
GOPOSTSTUFF_FROM = "Test <teSPAMst@examNOSPAMple.com>"  # sample.conf [global] From
_POWERPOST_DOMAIN = "powerpost2000AA.local"  # ProgramSettings.cpp szDefault_DomainID
# NNTP servers a newsmangler user names in its config (the message-id's host).
_SERVER_HOSTS = (
    "news.newshosting.com", "news.eweka.nl", "news.giganews.com", "news.usenetserver.com",
    "reader.easyusenet.nl", "news.frugalusenet.com", "news.tweaknews.eu", "localhost",
)  # fmt: skip
_HOSTNAMES = ("mybox", "DESKTOP-7QK2M1", "seedbox", "nas", "ubuntu", "htpc", "server01")
_USERS = ("root", "user", "poster", "admin", "up", "seed", "media")
# Split volumes per scene release and the segments in each (a 50 MB rar is 71
# articles of 700 KiB).
_VOLUME_SEGMENTS = (15, 20, 50, 71, 100)
_AUDIO = ("DDP5.1", "DD5.1", "AAC2.0", "DTS-HD.MA.5.1", "Atmos")
_SERVICES = ("NF", "AMZN", "DSNP", "HMAX", "ATVP", "")
_CODECS_SCENE = ("H.264", "H.265", "x264", "x265")
# Nyuu --group-files (lib/fileuploader.js): a file's collection is its name
# without up to two short extensions, a par2 volume tag and a part number.
_NYUU_COLLECTION = re.compile(
    r"(\.[a-z0-9]{1,10}){0,2}(\.vol\d+[\-+]\d+\.par2)?(\.\d+|\.part\d+)?$", re.I
)


def _nyuu_letters(rng: random.Random) -> str:
    # Nyuu's default message-id (lib/article.js createMessageId): 24 letters,
    # upper case and lower case by turns.
    upper = _texts(rng, _UPPER_TABLE, 12, 1)[0]
    lower = _texts(rng, _LOWER_TABLE, 12, 1)[0]
    return "".join(u + lo for u, lo in zip(upper, lower, strict=True))


def _newsup_string(rng: random.Random, length: int, *, alnum: bool) -> str:
    # NewsUP's generate_random_string (lib/NewsUP/Utils.pm): letters and
    # digits, or (alnum false) also "-_.$" but never two of those in a row;
    # it always starts and ends with a letter or digit.
    letters = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    symbols = "-_.$"
    text = [_pick(rng, letters)]
    previous = ""
    for _ in range(max(0, length - 2)):
        pool = letters if alnum or (previous != "" and previous in symbols) else letters + symbols
        previous = _pick(rng, pool)
        text.append(previous)
    text.append(_pick(rng, letters))
    return "".join(text)


def _b36(value: int) -> str:
    # NewsUP's _generate_encode_base36: least significant digit first.
    digits = []
    while value:
        digits.append(_B36[value % 36])
        value //= 36
    return "".join(digits) or "0"


def _nyuu_from(rng: random.Random) -> str:
    # Nyuu's default From (config.js postHeaders.From): "USER <USER@host>",
    # where a host name without a dot is replaced by its last character
    # plus ".localdomain" (the `^([^.])+$` replacement keeps one character).
    user, host = _pick(rng, _USERS), _pick(rng, _HOSTNAMES)
    return f"{user} <{user}@{host[-1]}.localdomain>"


def _newsup_uploader(rng: random.Random) -> str:
    # NewsUP's _generate_random_uploader (lib/NewsUP/Article.pm), used for
    # every article under --obfuscate.
    return (
        f"{_newsup_string(rng, 8, alnum=False)} <{_newsup_string(rng, int(rng.random() * 18), alnum=False)}"
        f"@{_newsup_string(rng, 1 + int(rng.random() * 6), alnum=False)}."
        f"{_newsup_string(rng, 1 + int(rng.random() * 3), alnum=False)}>"
    )


def _ngpost_padding(files: int) -> int:
    # ngPost's PostingJob: digits of the file counter, counted by dividing by
    # 10 while the rest is above 1 (so 10 files get 1 digit, 11 get 2).
    digits, rest = 1, files / 10
    while rest > 1:
        digits += 1
        rest /= 10
    return digits


def _digits(value: int) -> int:
    # PowerPost's CM_strcat_FileNumber / CM_BuildArticleName thresholds: the
    # digits of the total, 5 at most.
    return min(5, len(str(value)))


# -- subjects by tool


def _nyuu_subject(comment: str = "", comment2: str = "") -> _Subject:
    # Nyuu's default subject (lib/uploadmgr.js addFile): [comment ]["[0i/M] - "]"name" yEnc (k/N) size[ comment2];
    # no file counter for a single file, quotes removed from the name.
    pre = f"{comment} " if comment else ""
    post = f" {comment2}" if comment2 else ""

    def subject(i: int, m: int, name: str, size: int, n: int) -> tuple[str, str, int]:
        counter = f"[{i:0{len(str(m))}}/{m}] - " if m > 1 else ""
        return f'{pre}{counter}"{name.replace(chr(34), "")}" yEnc (', f"/{n}) {size}{post}", 1

    return subject


def _nyuu_sized_subject(i: int, m: int, name: str, size: int, n: int) -> tuple[str, str, int]:
    # Nyuu --subject '[{0filenum}/{files}] - "{filename}" yEnc  {filesize} ({part}/{parts})'
    # (help-full.txt placeholders), the form of the SABnzbd reference posts.
    return f'[{i:0{len(str(m))}}/{m}] - "{name}" yEnc  {size} (', f"/{n})", 1


def _nyuu_bare_subject(_i: int, _m: int, name: str, _size: int, n: int) -> tuple[str, str, int]:
    # Nyuu --subject '"{filename}" yEnc ({part}/{parts})': no file counter.
    return f'"{name}" yEnc (', f"/{n})", 1


def _ngpost_subject(files: int) -> _Subject:
    # ngPost's article subject (src/nntp/NntpArticle.cpp, NntpFile::nameWithQuotes):
    # [0i/M] "name" (k/N), no "yEnc" and no " - ".
    pad = _ngpost_padding(files)
    return lambda i, m, name, _size, n: (f'[{i:0{pad}}/{m}] "{name}" (', f"/{n})", 1)


def _newsup_subject(i: int, m: int, name: str, _size: int, n: int) -> tuple[str, str, int]:
    # NewsUP's Article::subject (lib/NewsUP/Article.pm): [i/M] - "name" (k/N).
    return f'[{i}/{m}] - "{name}" (', f"/{n})", 1


def _newsmangler_subject(title: str, listed: int) -> _Subject:
    # newsmangler's _gal_files (newsmangler/postmangler.py): title [0i/M] - "name" yEnc (0k/N),
    # i padded to the digits of the files listed, k to the digits of N.
    width = len(str(listed))
    return lambda i, m, name, _size, n: (
        f'{title} [{i:0{width}}/{m}] - "{name}" yEnc (',
        f"/{n})",
        len(str(n)),
    )


def _gopoststuff_subject(subject: str) -> _Subject:
    # GoPostStuff's NewArticle (article.go): "-s" or the folder name, then [i/M] - "name" yEnc (k/N).
    return lambda i, m, name, _size, n: (f'{subject} [{i}/{m}] - "{name}" yEnc (', f"/{n})", 1)


def _powerpost_subject(template: str) -> _Subject:
    # PowerPost A&A (Common.cpp CM_BuildSubjectFromTemplate, CM_BuildArticleName):
    # $1 the file number padded to the digits of $2, $F the name, trailing
    # spaces cut, then " (kk/NN)" both padded to the digits of N. The default
    # template (ProgramSettings.cpp LastTempl_yEnc) is '(????) [$1/$2] - "$F" yEnc'.
    def subject(i: int, m: int, name: str, _size: int, n: int) -> tuple[str, str, int]:
        text = (
            template.replace("$1", f"{i:0{_digits(m)}}").replace("$2", str(m)).replace("$F", name)
        )
        width = _digits(n)
        return f"{text.rstrip(' ')} (", f"/{n:0{width}})", width

    return subject


def _jbinup_subject(total_bytes: int) -> _Subject:
    # The JBin posters' subject, as their posts show it (the corpus's
    # sanderjo__sj-nzb-getter__mynzb-30MB NZB): the upload's size in every subject.
    size = f"{total_bytes / 1_048_576:.2f} MB"
    return lambda i, m, name, _size, n: (f'[{i}/{m}] - "{name}" - {size} yEnc (', f"/{n})", 1)


def _teevee_subject(name: str, channel: str, post_id: int) -> _Subject:
    # The EFNet channel form of a.b.teevee posts (the corpus's ChrisPortman__
    # and mozvip__ NZBs): k padded to the digits of N.
    return lambda i, m, file, _size, n: (
        f'[{post_id}]-[FULL]-[{channel}]-[ {name} ]-[{i:02}/{m}] - "{file}" yEnc (',
        f"/{n})",
        len(str(n)),
    )


# -- message-ids by tool


def _simple_ids(make: Callable[[int], str]) -> _FileIds:
    # The same maker for every file: (k) -> id; no References.
    return lambda _file: lambda k, _attempt: (make(k), "")


def _nyuu_ids(rng: random.Random, clock: Callable[[], float]) -> _FileIds:
    # lib/article.js: ${rand(24)}-{13-digit ms timestamp}@nyuu.
    return _simple_ids(lambda _k: f"{_nyuu_letters(rng)}-{int(clock() * 1000):013}@nyuu")


def _ngpost_ids(rng: random.Random) -> _FileIds:
    # src/nntp/NntpArticle.cpp header(): a QUuid as 32 hex digits, @ngPost (msg_id signature).
    return _simple_ids(lambda _k: f"{_hex(rng, 32)}@ngPost")


def _powerpost_ids(rng: random.Random) -> _FileIds:
    # With "FileThread" set (ProgramSettings.cpp reads it with FALSE for a
    # default; PosterThread.cpp SendHeaders): one 20-character id per file
    # (TaskObject.cpp generateUniqueID), <part{k}of{N}.{id}@powerpost2000AA.local>;
    # a re-post appends its try number to the id; every part after the first
    # references part 1. Without it PowerPost sends no Message-ID: see _server_ids.
    def for_file(file: _File) -> Callable[[int, int], tuple[str, str]]:
        unique = _texts(rng, _POWERPOST_TABLE, 20, 1)[0]
        n = file.total
        first = f"<part1of{n}.{unique}@{_POWERPOST_DOMAIN}>"

        def mid(k: int, attempt: int) -> tuple[str, str]:
            tag = str(attempt) if attempt else ""
            return f"part{k}of{n}.{unique}{tag}@{_POWERPOST_DOMAIN}", first if k > 1 else ""

        return mid

    return for_file


def _newsmangler_ids(rng: random.Random, clock: Callable[[], float]) -> _FileIds:
    # newsmangler/postmangler.py: <%.5f.%d@server hostname> of time.time() and the part number.
    host = _pick(rng, _SERVER_HOSTS)
    return _simple_ids(lambda k: f"{clock() + rng.random() * 0.01:.5f}.{k}@{host}")


def _gopoststuff_ids(serial: Iterator[int], clock: Callable[[], float]) -> _FileIds:
    # article.go: <{UnixNano}$gps@gopoststuff>.
    return _simple_ids(lambda _k: f"{int(clock() * 1e9) + next(serial)}$gps@gopoststuff")


def _newsup_ids(rng: random.Random, clock: Callable[[], float]) -> _FileIds:
    # lib/NewsUP/Utils.pm _generate_random_ids_newsup: "$sec$usec.{base36 of
    # rand}@{base36 of $sec$usec}.newsup".
    def make(_k: int) -> str:
        now = clock()
        stamp = int(f"{int(now)}{_between(rng, 0, 999_999)}")
        return f"{stamp}.{_b36(int(rng.random() * stamp))}@{_b36(stamp)}.newsup"

    return _simple_ids(make)


def _jbinup_ids(rng: random.Random) -> _FileIds:
    # JBinUp is closed source; its ids as nzblnk/nzb-monkey:src/nzbmonkey.py
    # reads them (`files_jbin`: "..._{file}o{files}@JBinUp.local").
    def for_file(file: _File) -> Callable[[int, int], tuple[str, str]]:
        tail = f"_{file.index}o{file.announced}@JBinUp.local"
        return lambda _k, _attempt: (f"{_alnum(rng, 20)}{tail}", "")

    return for_file


def _server_ids(rng: random.Random, serial: Iterator[int], clock: Callable[[], float]) -> _FileIds:
    # A tool that leaves the id to the server: astraweb's {sec}.{serial}.{k}.
    return _simple_ids(lambda k: f"{int(clock())}.{next(serial):05}.{k}@eu.news.astraweb.com")


def _newsup_obfuscated_ids(
    rng: random.Random, serial: Iterator[int], clock: Callable[[], float]
) -> _FileIds:
    # Utils.pm generate_random_ids under --obfuscate: each id in the style of
    # a tool picked at random (newsup, gopoststuff, newsmangler, nyuu, jbinup, powerpost, random).
    def make(k: int) -> str:
        style = _between(rng, 0, 6)
        now = clock()
        if style == 0:
            return f"{int(now)}{_between(rng, 0, 999_999)}.{_b36(next(serial))}@{_b36(int(now))}.newsup"
        if style == 1:
            return f"{int(now)}.{_between(rng, 0, 999_999)}{next(serial)}$gps@gpoststuff"
        if style == 2:
            return (
                f"{int(now)}.{_between(rng, 0, 999_999)}.{next(serial)}@{_pick(rng, _SERVER_HOSTS)}"
            )
        if style == 3:
            return f"{_newsup_string(rng, 12, alnum=False)}-{int(now)}{next(serial)}@nyuu"
        if style == 4:
            return f"{_newsup_string(rng, 32, alnum=False)}@JBinUp.local"
        if style == 5:
            return f"part{_between(rng, 1, 98)}of{_between(rng, 1, 98)}.{_newsup_string(rng, 22, alnum=False)}@{_POWERPOST_DOMAIN}"
        return f"{_newsup_string(rng, 8 + _between(rng, 0, 23), alnum=False)}@{_newsup_string(rng, 1 + _between(rng, 0, 11), alnum=True)}"

    return _simple_ids(make)


# -- names


def _par2_volumes(
    rng: random.Random, base: str, data_segments: int, article: int, scheme: str
) -> list[_FileSpec]:
    # The index file and power-of-2 volumes: par2cmdline's "vol00+01" (start
    # +count) or ParPar -n's "vol00-01" (start-end), padded to the digits of
    # the recovery blocks (ParPar lib/par2gen.js par2Ext).
    specs = [_FileSpec(f"{base}.par2", 1, _between(rng, 2_000, 60_000), "par2")]
    recovery = max(1, round(data_segments * rng.uniform(0.03, 0.12)))
    width = max(2, len(str(recovery)))
    start, count = 0, 1
    while start < recovery:
        blocks = min(count, recovery - start)
        tag = (
            f"{start:0{width}}+{blocks:0{width}}"
            if scheme == "+"
            else f"{start:0{width}}-{start + blocks:0{width}}"
        )
        specs.append(_FileSpec(f"{base}.vol{tag}.par2", blocks, article, "par2"))
        start += blocks
        count *= 2
    return specs


def _volumes(
    rng: random.Random, base: str, segments: int, article: int, style: str
) -> list[_FileSpec]:
    # A split archive: rar4 ".rar, .r00, .r01..." or rar5 ".part01.rar ...".
    part = max(_pick(rng, _VOLUME_SEGMENTS), math.ceil(segments / 60))
    count = max(1, math.ceil(segments / part))
    width = max(2, len(str(count)))
    if style == "rar4":
        names = [f"{base}.rar"] + [f"{base}.r{i:0{width}}" for i in range(count - 1)]
    else:
        names = [f"{base}.part{i:0{width}}.rar" for i in range(1, count + 1)]
    specs = [_FileSpec(name, part, article, "data") for name in names[:-1]]
    last = segments - part * (count - 1)
    specs.append(_FileSpec(names[-1], max(1, last), _between(rng, article // 10, article), "data"))
    return specs


def _scene_names(rng: random.Random) -> tuple[str, str]:
    # A scene release name and its volumes' base: lower case, group first
    # ("grp-show.s08e08.2160p"), as scene rules name the archive volumes.
    group = _pick(rng, _SCENE_GROUPS)
    title = _title(rng, 1, 3)
    res = _pick(rng, _RESOLUTIONS)
    if rng.random() < 0.7:
        episode = f"S{_between(rng, 1, 12):02}E{_between(rng, 1, 24):02}"
        service = _pick(rng, _SERVICES)
        tags = ".".join(
            t
            for t in (
                res,
                service,
                _pick(rng, ("WEB-DL", "WEB", "WEBRip")),
                _pick(rng, _AUDIO),
                _pick(rng, _CODECS_SCENE),
            )
            if t
        )
        name = f"{title}.{episode}.{tags}-{group}"
        base = f"{group.lower()}-{title.lower()}.{episode.lower()}.{res}"
    else:
        year = _between(rng, 1970, 2026)
        name = f"{title}.{year}.{res}.{_pick(rng, _SOURCES)}.{_pick(rng, _CODECS)}-{group}"
        base = f"{group.lower()}-{title.lower()}.{year}.{res}"
    return name, base


# Recipes of the posting-tools profile and their odds by upload count (a
# flood wave, a PowerPost batch and a same-name pair plan several uploads).
_RECIPES = (
    ("flood_wave", 0.20),
    ("exe_flood", 0.22),
    ("scene", 0.16),
    ("legit", 0.12),
    ("nyuu_obfuscated", 0.05),
    ("ngpost_gen_name", 0.04),
    ("newsup_rename", 0.025),
    ("hash_named", 0.025),
    ("powerpost_default", 0.015),
    ("powerpost_album", 0.02),
    ("same_name", 0.025),
    ("repost", 0.04),
    ("random_subjects", 0.02),
    ("ngpost_obfuscate", 0.02),
    ("newsup_obfuscate", 0.01),
)
RECIPES = tuple(name for name, _weight in _RECIPES)
# The tools that post scene releases, and their odds.
_SCENE_TOOLS = (
    ("nyuu", 0.3),
    ("nyuu-F", 0.1),
    ("newsmangler", 0.1),
    ("gopoststuff", 0.1),
    ("jbinup", 0.1),
    ("powerpost", 0.05),
    ("teevee", 0.25),
)
_ARTICLE = {
    "nyuu": 716_800,  # config.js articleSize
    "ngpost": 716_800,  # NgPost.h sDefaultArticleSize
    "newsup": 716_800,  # conf/newsup.conf [upload] size
    "newsmangler": 768_000,  # docs/sample.conf article_size
    "gopoststuff": 768_000,  # sample.conf ArticleSize
    "powerpost": 1950 * 128,  # ProgramSettings.cpp nDefault_MaxLines lines of 128 bytes
    "jbinup": 512_000,
    "teevee": 396_000,
}
# Chance that a post check re-sends a segment a little later (Nyuu
# --check-post-tries, PowerPost's AutoRetry), per segment, in uploads that check.
_RETRY_PER_SEGMENT = 0.004


@attrs.define(eq=False)
class _ToolPlanner:
    """Plans the uploads of the posting-tools profile, one recipe at a time.

    A recipe that makes several uploads (a flood wave, a PowerPost batch, a
    same-name pair) queues the others, so that they start next, while the
    first is being posted: unrelated uploads in flight together.
    """

    _owner: OverviewGenerator
    _rng: random.Random = attrs.field(init=False)
    _pending: deque[_Upload] = attrs.field(init=False, factory=deque)
    # The run opens with one upload of every recipe (a scene release by
    # every scene tool), in a random order, so that even a short run holds
    # every pattern.
    _opening: list[tuple[str, str]] = attrs.field(init=False)
    _odds: tuple[float, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._rng = self._owner._rng
        self._opening = [(recipe, "") for recipe in RECIPES if recipe != "scene"]
        self._opening.extend(("scene", tool) for tool, _weight in _SCENE_TOOLS)
        self._rng.shuffle(self._opening)
        self._odds = tuple(itertools.accumulate(weight for _name, weight in _RECIPES))

    def next_upload(self) -> _Upload:
        """The next upload to post: a queued one, or the first of a new recipe."""
        if not self._pending:
            if self._opening:
                recipe, tool = self._opening.pop()
            else:
                recipe, tool = self._rng.choices(RECIPES, cum_weights=self._odds)[0], ""
            make = getattr(self, f"_{recipe}")
            first, *rest = make(tool=tool) if tool else make()
            self._pending.append(first)
            self._pending.extend(rest)
        return self._pending.popleft()

    # -- helpers

    def _register(self, upload: _Upload) -> _Upload:
        upload.id = len(self._owner._uploads)
        self._owner._uploads.append(upload)
        return upload

    def _unique(self, name: str) -> str:
        names = self._owner._names
        while name in names:
            name = f"{name}.{_pick(self._rng, _NAME_TAGS)}"
        names.add(name)
        return name

    def _ids(self, tool: str) -> _FileIds:
        rng, clock, serial = self._rng, self._owner._clock, self._owner._serial
        if tool.startswith("nyuu"):
            return _nyuu_ids(rng, clock)
        if tool == "ngpost":
            return _ngpost_ids(rng)
        if tool == "powerpost":
            # "FileThread" off (the default) leaves the Message-ID to the server.
            threaded = rng.random() < 0.5
            return _powerpost_ids(rng) if threaded else _server_ids(rng, serial, clock)
        if tool == "newsmangler":
            return _newsmangler_ids(rng, clock)
        if tool == "gopoststuff":
            return _gopoststuff_ids(serial, clock)
        if tool == "newsup":
            return _newsup_ids(rng, clock)
        if tool == "jbinup":
            return _jbinup_ids(rng)
        return _server_ids(rng, serial, clock)

    def _poster(self, tool: str) -> str:
        rng, regular = self._rng, _pick(self._rng, self._owner._posters)
        if tool == "ngpost":
            return _ngpost_poster(rng)
        if rng.random() < 0.35:
            # The tool's default From, never changed.
            if tool.startswith("nyuu"):
                return _nyuu_from(rng)
            defaults = {
                "powerpost": POWERPOST_FROM,
                "newsup": NEWSUP_FROM,
                "newsmangler": NEWSMANGLER_FROM,
                "gopoststuff": GOPOSTSTUFF_FROM,
            }
            if tool in defaults:
                return defaults[tool]
        if tool == "jbinup":
            return f"{regular.split(' ', 1)[0].split('@', 1)[0].title()} <JBinUp@JBinUp.local>"
        return regular

    def _make(
        self,
        *,
        kind: Kind,
        pattern: str,
        name: str,
        real_name: str,
        poster: str,
        tool: str,
        specs: Sequence[_FileSpec],
        article: int,
        subject: _Subject,
        numbering: str = "counter",
        obfuscated: bool = False,
        retry: float = 0.0,
    ) -> _Upload:
        """Plan an upload: its files' subjects from `subject`, numbered by `numbering`.

        numbering: "counter" (1..M in posting order), "nfo_zero" (the nfo is
        [00/M], the rest 1..M), "collections" (Nyuu --group-files: a counter
        per collection of similar names) or "none" (no [i/M] at all).
        """
        counters = self._counters(specs, numbering)
        files = []
        for position, (spec, (number, total)) in enumerate(zip(specs, counters, strict=True), 1):
            size = _file_bytes(spec, article)
            before, after, width = subject(number, total, spec.name, size, spec.segments)
            index = number if numbering in ("counter", "nfo_zero") else position
            full = _article_bytes(article) + len(before) + len(after)
            last = _article_bytes(spec.last_raw) + len(before) + len(after)
            file = _File(index, spec.name, before, after, spec.segments, width, full, last)
            file.announced = total
            files.append(file)
        announced = None if numbering in ("none", "collections") else counters[-1][1]
        upload = _Upload(
            id=0,
            kind=kind,
            name=name,
            real_name=real_name,
            poster=poster,
            groups=self._owner._groups(),
            tool=tool,
            files_announced=announced,
            obfuscated=obfuscated,
            files=files,
            message_ids=_no_message_ids,
            shuffled=tool in ("nyuu", "nyuu-F", "ngpost", "newsup") and self._rng.random() < 0.3,
            pattern=pattern,
            ids=self._ids(tool),
            retry=retry,
        )
        return self._register(upload)

    @staticmethod
    def _counters(specs: Sequence[_FileSpec], numbering: str) -> list[tuple[int, int]]:
        if numbering == "collections":
            collections = [_NYUU_COLLECTION.sub("", spec.name) for spec in specs]
            sizes = Counter(collections)
            seen: Counter[str] = Counter()
            result = []
            for collection in collections:
                seen[collection] += 1
                result.append((seen[collection], sizes[collection]))
            return result
        if numbering == "nfo_zero" and any(spec.role == "nfo" for spec in specs):
            total = len(specs) - 1
            result, number = [], 0
            for spec in specs:
                if spec.role == "nfo":
                    result.append((0, total))
                else:
                    number += 1
                    result.append((number, total))
            return result
        return [(i, len(specs)) for i in range(1, len(specs) + 1)]

    def _takedown(self, upload: _Upload) -> None:
        # A takedown removes whole data files' articles (enough to beat the
        # par2): the upload stays incomplete, and is often posted again.
        rng = self._rng
        data = [file for file in upload.files if not file.name.endswith((".par2", ".nfo", ".sfv"))]
        hit = rng.sample(data, max(1, len(data) // 3)) if data else []
        missing = {
            (file.index, k) for file in hit for k in range(1, file.total + 1) if rng.random() < 0.8
        }
        upload.missing = frozenset(missing)

    def _scene_specs(self, name: str, base: str, article: int, *, sample: bool) -> list[_FileSpec]:
        rng = self._rng
        segments = _log_uniform(rng, 30, 1200)
        data = _volumes(rng, base, segments, article, "rar4" if rng.random() < 0.7 else "rar5")
        specs = [_small_file(rng, f"{name}.nfo", "nfo", 500, 20_000)]
        if rng.random() < 0.7:
            specs.append(_small_file(rng, f"{name}.sfv", "sfv", 100, 3_000))
        specs.extend(data)
        if rng.random() < 0.85:
            specs.extend(_par2_volumes(rng, name, segments, article, "+"))
        if sample:
            sample_segments = _between(rng, 8, 40)
            specs.append(
                _FileSpec(
                    f"sample-{base}.mkv",
                    sample_segments,
                    _between(rng, article // 10, article),
                    "data",
                )
            )
            specs.extend(_par2_volumes(rng, f"sample-{base}", sample_segments, article, "+")[:2])
        return specs

    def _scene_upload(
        self, name: str, tool: str, specs: list[_FileSpec], poster: str, pattern: str
    ) -> _Upload:
        rng = self._rng
        article = _ARTICLE["nyuu" if tool == "nyuu-F" else tool]
        numbering = "counter"
        ordered = list(specs)
        if tool in ("nyuu", "nyuu-F", "newsmangler", "gopoststuff", "powerpost"):
            # Given on the command line as a shell glob, or sorted by the tool
            # (newsmangler's goodfiles.sort(), PowerPost's SortOnAdd): byte order.
            ordered.sort(key=lambda spec: spec.name)
        if tool == "nyuu":
            # --comment: some put the release name before the counter.
            subject = _nyuu_subject(name if rng.random() < 0.2 else "")
        elif tool == "nyuu-F":
            subject, numbering = _nyuu_subject(), "collections"
        elif tool == "newsmangler":
            subject = _newsmangler_subject(name, len(ordered))
        elif tool == "gopoststuff":
            subject = _gopoststuff_subject(name)
        elif tool == "jbinup":
            subject = _jbinup_subject(sum(_file_bytes(spec, article) for spec in ordered))
        elif tool == "powerpost":
            subject = _powerpost_subject(f'{name} [$1/$2] - "$F" yEnc')
        else:
            subject = _teevee_subject(name, _CHANNELS["tv"], _between(rng, 10_000, 999_999))
            numbering = "nfo_zero" if rng.random() < 0.5 else "counter"
        checks = tool.startswith("nyuu") or tool == "powerpost"
        return self._make(
            kind="legit",
            pattern=pattern,
            name=name,
            real_name=name,
            poster=poster,
            tool=tool,
            specs=ordered,
            article=article,
            subject=subject,
            numbering=numbering,
            retry=_RETRY_PER_SEGMENT if checks and rng.random() < 0.5 else 0.0,
        )

    # -- recipes: each returns the uploads it plans, the first to post first

    def _scene(self, tool: str = "") -> list[_Upload]:
        rng = self._rng
        name, base = _scene_names(rng)
        name = self._unique(name)
        if not tool:
            tool = rng.choices([t for t, _w in _SCENE_TOOLS], [w for _t, w in _SCENE_TOOLS])[0]
        specs = self._scene_specs(
            name, base, _ARTICLE["nyuu" if tool == "nyuu-F" else tool], sample=rng.random() < 0.3
        )
        upload = self._scene_upload(name, tool, specs, self._poster(tool), "scene")
        if rng.random() < 0.15:
            self._takedown(upload)
        return [upload]

    def _legit(self) -> list[_Upload]:
        rng = self._rng
        content = rng.choices(("ebook", "music", "software", "tv"), (0.35, 0.25, 0.25, 0.15))[0]
        low, high = next((c[2], c[3]) for c in _CONTENT if c[0] == content)
        name = self._unique(_CONTENT_NAMES[content](rng))
        tools = ("nyuu", "ngpost", "newsup", "newsmangler", "gopoststuff", "jbinup", "powerpost")
        tool = rng.choices(tools, (0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1))[0]
        article = _ARTICLE[tool]
        data = _data_files(
            rng, content, name, _log_uniform(rng, low, high), article, tracks=content == "music"
        )
        specs = _with_extras(rng, name, data, article, par2=0.8, nfo=0.5, sfv=0.2, nzb=0.0)
        subjects: dict[str, _Subject] = {
            "nyuu": _nyuu_subject(),
            "ngpost": _ngpost_subject(len(specs)),
            "newsup": _newsup_subject,
            "newsmangler": _newsmangler_subject(name, len(specs)),
            "gopoststuff": _gopoststuff_subject(name),
            "jbinup": _jbinup_subject(sum(_file_bytes(spec, article) for spec in specs)),
            "powerpost": _powerpost_subject(f'{name} - [$1/$2] - "$F" yEnc'),
        }
        upload = self._make(
            kind="legit",
            pattern="legit",
            name=name,
            real_name=name,
            poster=self._poster(tool),
            tool=tool,
            specs=specs,
            article=article,
            subject=subjects[tool],
            retry=_RETRY_PER_SEGMENT
            if tool in ("nyuu", "powerpost") and rng.random() < 0.5
            else 0.0,
        )
        if rng.random() < 0.1:
            self._takedown(upload)
        return [upload]

    def _nyuu_obfuscated(self) -> list[_Upload]:
        # One random-named video and a ParPar set named for the real release.
        rng = self._rng
        real, _base = _scene_names(rng)
        real = self._unique(real)
        segments = _log_uniform(rng, 100, 2000)
        article = _ARTICLE["nyuu"]
        video = _FileSpec(
            f"{_alnum(rng, 32)}.mkv", segments, _between(rng, article // 10, article), "data"
        )
        specs = [video, *_par2_volumes(rng, real, segments, article, "-")]
        return [
            self._make(
                kind="obfuscated",
                pattern="nyuu_obfuscated",
                name=real,
                real_name=real,
                poster=_random_poster(rng),
                tool="nyuu",
                specs=specs,
                article=article,
                subject=_nyuu_sized_subject,
                obfuscated=True,
                retry=_RETRY_PER_SEGMENT if rng.random() < 0.5 else 0.0,
            )
        ]

    def _gen_name_specs(self, length: int) -> tuple[str, list[_FileSpec]]:
        # ngPost --compress --gen_name --gen_par2: a random archive name
        # (LENGTH_NAME), rar volumes and a par2cmdline set of that name.
        rng = self._rng
        base = _alnum(rng, length)
        segments = _log_uniform(rng, 20, 1500)
        article = _ARTICLE["ngpost"]
        data = _volumes(rng, base, segments, article, "rar5")
        return base, [*data, *_par2_volumes(rng, base, segments, article, "+")]

    def _ngpost_gen_name(self) -> list[_Upload]:
        rng = self._rng
        real = self._unique(_CONTENT_NAMES[_pick(rng, ("tv", "movie", "software"))](rng))
        base, specs = self._gen_name_specs(_pick(rng, (17, 17, 33)))
        return [
            self._make(
                kind="obfuscated",
                pattern="ngpost_gen_name",
                name=base,
                real_name=real,
                poster=_ngpost_poster(rng),
                tool="ngpost",
                specs=specs,
                article=_ARTICLE["ngpost"],
                subject=_ngpost_subject(len(specs)),
                obfuscated=True,
            )
        ]

    def _newsup_rename(self) -> list[_Upload]:
        # NewsUP's _obfuscate_files: every file renamed to 12 random
        # characters (no extension), a "rename.with.this.par2" to undo it and
        # a par2 set of a random 12-character name, posted par2 files first.
        rng = self._rng
        real = self._unique(_CONTENT_NAMES[_pick(rng, ("tv", "movie", "software"))](rng))
        article = _ARTICLE["newsup"]
        segments = _log_uniform(rng, 20, 1200)
        data = [
            spec._replace(name=_newsup_string(rng, 12, alnum=True))
            for spec in _volumes(rng, real, segments, article, "rar5")
        ]
        par_base = _newsup_string(rng, 12, alnum=True)
        specs = [
            *_par2_volumes(rng, par_base, segments, article, "+"),
            _small_file(rng, "rename.with.this.par2", "par2", 2_000, 40_000),
            *data,
        ]
        poster = NEWSUP_FROM if rng.random() < 0.5 else _pick(rng, self._owner._posters)
        return [
            self._make(
                kind="obfuscated",
                pattern="newsup_rename",
                name=par_base,
                real_name=real,
                poster=poster,
                tool="newsup",
                specs=specs,
                article=article,
                subject=_newsup_subject,
                obfuscated=True,
            )
        ]

    def _hash_named(self) -> list[_Upload]:
        # Hash-named split files with no file counter (Nyuu with a bare --subject), one random poster.
        rng = self._rng
        real = self._unique(_CONTENT_NAMES[_pick(rng, ("tv", "movie"))](rng))
        digest = _hex(rng, 40)
        article = _ARTICLE["nyuu"]
        count = _between(rng, 20, 60)
        per_file = _pick(rng, (10, 15, 20))
        specs = [
            _FileSpec(f"{digest}.{i:02}", per_file, article, "data") for i in range(1, count + 1)
        ]
        specs.extend(_par2_volumes(rng, digest, count * per_file, article, "-"))
        return [
            self._make(
                kind="obfuscated",
                pattern="hash_named",
                name=digest,
                real_name=real,
                poster=_random_poster(rng),
                tool="nyuu",
                specs=specs,
                article=article,
                subject=_nyuu_bare_subject,
                numbering="none",
                obfuscated=True,
            )
        ]

    def _powerpost_default(self) -> list[_Upload]:
        # Two or three unrelated uploads with PowerPost's untouched defaults:
        # the '(????)' template, the same From, the same [x/13].
        rng = self._rng
        total = _pick(rng, (13, 13, 13, 25, 7))
        return [self._powerpost_default_upload(total) for _ in range(_between(rng, 2, 3))]

    def _powerpost_default_upload(self, total: int) -> _Upload:
        rng = self._rng
        name = self._unique(_CONTENT_NAMES[_pick(rng, ("tv", "software", "movie"))](rng))
        article = _ARTICLE["powerpost"]
        par2 = [_FileSpec(f"{name}.par2", 1, 20_000, "par2")] + [
            _FileSpec(f"{name}.vol{start:02}+{2**i:02}.par2", 2**i, article, "par2")
            for i, start in enumerate((0, 1, 3))
        ]
        parts = total - len(par2)
        per_part = _pick(rng, (20, 40, 80, 157))
        data = [
            _FileSpec(f"{name}.part{i:02}.rar", per_part, article, "data") for i in range(1, parts)
        ]
        data.append(
            _FileSpec(f"{name}.part{parts:02}.rar", _between(rng, 1, per_part), article, "data")
        )
        return self._make(
            kind="legit",
            pattern="powerpost_default",
            name=name,
            real_name=name,
            poster=POWERPOST_FROM,
            tool="powerpost",
            specs=[*data, *par2],
            article=article,
            subject=_powerpost_subject('(????) [$1/$2] - "$F" yEnc'),
            retry=_RETRY_PER_SEGMENT,  # AutoRetry is on by default
        )

    def _album_specs(self, artist: str, album: str, tracks: int) -> list[_FileSpec]:
        # A music release as the scene's music rules name its files and the
        # corpus's subjects show them (`06-all_shall_perish-deconstruction-eos.mp3`,
        # `00-da_morty_-_boondock_sampler_02-(tbr002)-web-2013-srg.m3u`): lower
        # case, words joined by "_", fields by "-"; the playlist, the cover,
        # the nfo (and sometimes an sfv and a par2 set) named after the album
        # as `00-...`, every track `NN-artist-title` and nothing of the album's
        # name. Each track is a file of its own: nothing is archived.
        rng = self._rng
        article = _ARTICLE["powerpost"]
        extension = ".flac" if rng.random() < 0.4 else ".mp3"
        # A FLAC track is ~30 MB, an MP3 ~9 MB: PowerPost articles of 249,600 bytes.
        low, high = (90, 160) if extension == ".flac" else (25, 50)
        specs = [
            _FileSpec(
                f"{n:02}-{artist}-{_title(rng, 1, 4, '_').lower()}{extension}",
                _between(rng, low, high),
                _between(rng, article // 10, article),
                "data",
            )
            for n in range(1, tracks + 1)
        ]
        specs.append(_small_file(rng, f"00-{album}.m3u", "data", 200, 2_000))
        specs.append(_FileSpec(f"00-{album}.jpg", _between(rng, 1, 3), article // 2, "data"))
        specs.append(_small_file(rng, f"00-{album}.nfo", "nfo", 500, 8_000))
        if rng.random() < 0.4:
            specs.append(_small_file(rng, f"00-{album}.sfv", "sfv", 100, 1_500))
        if rng.random() < 0.3:
            data = sum(spec.segments for spec in specs)
            specs.extend(_par2_volumes(rng, f"00-{album}", data, article, "+")[:4])
        return specs

    def _powerpost_album(self) -> list[_Upload]:
        # Music albums posted with PowerPost's untouched defaults (see the
        # module docstring): one album, or several of one uploader (of
        # different artists) queued so that they start while the first is
        # still being posted, sometimes followed by another uploader's
        # default upload of the same M: all under the default From, with the
        # '(????)' template or that template with the placeholder deleted,
        # so that no head names the album.
        rng = self._rng
        poster = POWERPOST_FROM if rng.random() < 0.85 else _pick(rng, self._owner._posters)
        template = _pick(rng, ('(????) [$1/$2] - "$F" yEnc', '[$1/$2] - "$F" yEnc'))
        # A music group carries thousands of artists: a few known ones, and
        # band names of two words (the twelve known names alone would give
        # most albums another uploader's album of its artist in the same hour).
        artists: list[str] = []
        count = _pick(rng, (1, 1, 1, 2, 3))
        while len(artists) < count:
            artist = _pick(rng, _ARTISTS) if rng.random() < 0.2 else _title(rng, 2, 2, " ")
            if artist not in artists:
                artists.append(artist)
        uploads = []
        for artist in artists:
            name = self._unique(f"{artist.replace(' ', '_')}-{_title(rng, 1, 3, '_')}")
            year, group = _between(rng, 1990, 2026), _pick(rng, _SCENE_GROUPS)
            name = f"{name}-WEB-{year}-{group}"
            scene = name.lower()
            specs = self._album_specs(
                artist.lower().replace(" ", "_"), scene, _pick(rng, (8, 10, 10, 12, 13, 18))
            )
            if rng.random() < 0.5:
                # SortOnAdd: the files in byte order of their names.
                specs.sort(key=lambda spec: spec.name)
            else:
                # "Sort PAR" (PropPage_Add_FileOrder.cpp OnButtonAfoSortpar):
                # the nfo, the sfv and the par2 index first, the par2 volumes last.
                specs.sort(key=lambda spec: (_powerpost_par_order(spec.name), spec.name))
            uploads.append(
                self._make(
                    kind="legit",
                    pattern="powerpost_album",
                    name=name,
                    real_name=name,
                    poster=poster,
                    tool="powerpost",
                    specs=specs,
                    article=_ARTICLE["powerpost"],
                    subject=_powerpost_subject(template),
                    retry=_RETRY_PER_SEGMENT,  # AutoRetry is on by default
                )
            )
        if poster == POWERPOST_FROM and rng.random() < 0.3:
            uploads.append(self._powerpost_default_upload(len(uploads[-1].files)))
        return uploads

    def _same_name(self) -> list[_Upload]:
        # One scene release uploaded by two posters with their own tools.
        rng = self._rng
        name, base = _scene_names(rng)
        name = self._unique(name)
        tools = rng.sample([t for t, _w in _SCENE_TOOLS if t != "nyuu-F"], 2)
        specs = self._scene_specs(name, base, _ARTICLE[tools[0]], sample=False)
        return [
            self._scene_upload(name, tool, specs, self._poster(tool), "same_name") for tool in tools
        ]

    def _repost(self) -> list[_Upload]:
        # The same poster posts the same files again, later, with new
        # message-ids: after a takedown, often the only complete copy.
        rng = self._rng
        done = [u for u in self._owner._repostable if u.ids is not None and u.kind == "legit"]
        if not done:
            return self._scene()
        taken = [u for u in done if u.missing]
        original = _pick(rng, taken) if taken and rng.random() < 0.7 else _pick(rng, done)
        self._owner._reposting_now(original)
        upload = attrs.evolve(
            original,
            kind="repost",
            files=[attrs.evolve(file, segments=[]) for file in original.files],
            ids=self._ids(original.tool),
            repost_of=original.id,
            missing=frozenset(),
            truncated=False,
            pattern="repost",
        )
        return [self._register(upload)]

    def _random_subjects(self) -> list[_Upload]:
        # Nyuu --subject '${rand(N)}' (a new random text for every post, as
        # help-full.txt warns) with one random --from: no counter, no yEnc.
        rng = self._rng
        real = self._unique(_CONTENT_NAMES[_pick(rng, ("tv", "movie", "software"))](rng))
        article = _ARTICLE["nyuu"]
        segments = _log_uniform(rng, 20, 800)
        specs = [
            *_volumes(rng, real, segments, article, "rar5"),
            *_par2_volumes(rng, real, segments, article, "-"),
        ]
        length = _between(rng, 16, 40)
        upload = self._make(
            kind="obfuscated",
            pattern="random_subjects",
            name=real,
            real_name=real,
            poster=_random_poster(rng),
            tool="nyuu",
            specs=specs,
            article=article,
            subject=_nyuu_bare_subject,
            numbering="none",
            obfuscated=True,
        )
        upload.headerless = True
        upload.article_subject = lambda _mid: _alnum(rng, length)
        return [upload]

    def _ngpost_obfuscate(self) -> list[_Upload]:
        # ngPost --obfuscate: every article's subject is its own UUID (the
        # message-id's local part) and its From a new random one.
        rng = self._rng
        real = _CONTENT_NAMES[_pick(rng, ("tv", "movie", "software"))](rng)
        base, specs = self._gen_name_specs(17)
        upload = self._make(
            kind="obfuscated",
            pattern="ngpost_obfuscate",
            name=base,
            real_name=real,
            poster="",
            tool="ngpost",
            specs=specs,
            article=_ARTICLE["ngpost"],
            subject=_ngpost_subject(len(specs)),
        )
        upload.article_subject = lambda mid: mid.split("@", 1)[0]
        upload.article_poster = lambda: _ngpost_poster(rng)
        upload.junk_kind = UNATTRIBUTABLE
        return [upload]

    def _newsup_obfuscate(self) -> list[_Upload]:
        # NewsUP --obfuscate: a subject of 1-32 random letters and a random
        # From for every article, message-ids in a random tool's style.
        rng = self._rng
        real = _CONTENT_NAMES["software"](rng)
        article = _ARTICLE["newsup"]
        specs = _volumes(
            rng, _newsup_string(rng, 12, alnum=True), _log_uniform(rng, 10, 400), article, "rar5"
        )
        upload = self._make(
            kind="obfuscated",
            pattern="newsup_obfuscate",
            name=real,
            real_name=real,
            poster="",
            tool="newsup",
            specs=specs,
            article=article,
            subject=_newsup_subject,
        )
        upload.ids = _newsup_obfuscated_ids(rng, self._owner._serial, self._owner._clock)
        upload.article_subject = lambda _mid: _texts(
            rng, _LOWER_LETTER_TABLE, 1 + int(rng.random() * 32), 1
        )[0]
        upload.article_poster = lambda: _newsup_uploader(rng)
        upload.junk_kind = UNATTRIBUTABLE
        return [upload]

    def _flood(
        self, name: str, kind: Kind, extensions: Sequence[str], segments: tuple[int, int]
    ) -> _Upload:
        rng = self._rng
        article = _pick(rng, _ARTICLE_BYTES["exe"])
        specs = [
            _FileSpec(
                f"{name}{extension}",
                _between(rng, *segments),
                _between(rng, article // 10, article),
                "data",
            )
            for extension in extensions
        ]
        style = _exe_style(rng, name, len(specs))

        def subject(i: int, _m: int, file: str, size: int, n: int) -> tuple[str, str, int]:
            return (
                style.head(i, file, size) + "(",
                f"/{n})" + (f" {size}" if style.size_after else ""),
                1,
            )

        poster = _random_poster(rng) if rng.random() < 0.6 else _human_poster(rng)
        bot = _pick(rng, ("nyuu", "ngpost", "newsup", "server"))
        upload = self._make(
            kind=kind,
            pattern="flood_wave" if kind == "wrapped_flood" else "exe_flood",
            name=name,
            real_name=name,
            poster=poster,
            tool=bot,
            specs=specs,
            article=article,
            subject=subject,
            numbering="counter" if style.announced else "none",
        )
        upload.tool = "exe"
        return upload

    def _exe_flood(self) -> list[_Upload]:
        rng = self._rng
        extensions = [_pick(rng, _EXE_EXTENSIONS)]
        if rng.random() < 0.2:
            extensions.append(_pick(rng, [e for e in _EXE_EXTENSIONS if e != extensions[0]]))
        return [self._flood(_exe_name(rng), "exe_flood", extensions, (1, 5))]

    def _flood_wave(self) -> list[_Upload]:
        # Several bots post the same film name at once, each its own upload;
        # sometimes one wraps its executable in a rar that no rule can open.
        rng = self._rng
        name = _exe_name(rng)
        uploads = [
            self._flood(name, "exe_flood", [_pick(rng, _EXE_EXTENSIONS)], (1, 5))
            for _ in range(_between(rng, 3, 6))
        ]
        for upload in uploads:
            upload.pattern = "flood_wave"
        if rng.random() < 0.35:
            uploads.append(self._flood(name, "wrapped_flood", [".rar"], (3, 15)))
        return uploads


def _powerpost_par_order(name: str) -> int:
    # PowerPost's "Sort PAR" order: .nfo, .sfv, .par2 index, the rest, .volNN+NN.par2.
    lower = name.lower()
    if lower.endswith(".nfo"):
        return 0
    if lower.endswith(".sfv"):
        return 1
    if lower.endswith(".par2"):
        return 4 if ".vol" in lower else 2
    return 3


def _no_message_ids(_ks: Sequence[int], _total: int) -> list[str]:
    # The posting-tools profile makes its ids per file (`_Upload.ids`).
    raise RuntimeError("posting-tools uploads are posted by _post_tools")


def _post_tools(upload: _Upload, rng: random.Random, clock: Callable[[], float]) -> Iterator[_Item]:
    """Post an upload of the posting-tools profile: one item per article, in posting order.

    Message-ids come from the upload's tool (made when the article is, so that
    time-based ones follow the clock); a post check may re-send a segment
    3 to 60 articles later, under a new message-id (the same segment twice in
    the truth); articles of an unattributable upload are junk in the truth.
    """
    assert upload.ids is not None
    groups = upload.groups if len(upload.groups) > 1 else None
    subject_of, poster_of, retry = upload.article_subject, upload.article_poster, upload.retry
    retries: deque[tuple[int, _File, int]] = deque()
    position = 0

    def article(file: _File, k: int, attempt: int) -> _Item:
        mid, refs = mid_of[file.index](k, attempt)
        size = (file.full_bytes if k < file.total else file.last_bytes) + (
            (k * 2_654_435_761) >> 7 & 511
        )
        subject = subject_of(mid) if subject_of is not None else file.subject(k)
        poster = poster_of() if poster_of is not None else upload.poster
        truth: list[TruthSegment] | str = (
            file.segments if upload.junk_kind is None else upload.junk_kind
        )
        return subject, poster, mid, size, size >> 7, groups, truth, k, refs

    mid_of = {file.index: upload.ids(file) for file in upload.files}
    for file in upload.files:
        ks: Sequence[int] = (
            _locally_shuffled(rng, file.total) if upload.shuffled else range(1, file.total + 1)
        )
        for k in ks:
            if (file.index, k) in upload.missing:
                continue
            yield article(file, k, 0)
            position += 1
            if retry and rng.random() < retry:
                retries.append((position + _between(rng, 3, 60), file, k))
            while retries and retries[0][0] <= position:
                _due, again, number = retries.popleft()
                yield article(again, number, 1)
    for _due, again, number in retries:
        yield article(again, number, 1)


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
    # Uploads being reposted, by id (a repost's repost_of): a poster
    # reposts an upload again only once its last repost is done (two copies
    # of one upload by one poster at once is no takedown's answer).
    _reposting: dict[int, _Upload] = attrs.field(init=False, factory=dict)

    _text_posts: deque[tuple[str, str]] = attrs.field(init=False, factory=lambda: deque(maxlen=32))
    _other_numbers: dict[str, int] = attrs.field(init=False, factory=dict)
    _last_article: int | None = attrs.field(init=False, default=None)
    # The article number being written (the posting-tools profile's clock).
    _now: int = attrs.field(init=False, default=0)
    _tools: _ToolPlanner | None = attrs.field(init=False, default=None)
    _written: int = attrs.field(init=False, default=0)
    _started: bool = attrs.field(init=False, default=False)
    _done: bool = attrs.field(init=False, default=False)

    def _reposting_now(self, original: _Upload) -> None:
        self._repostable.remove(original)
        self._reposting[original.id] = original

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
        self._now = config.first_article
        if config.profile == "posting-tools":
            self._tools = _ToolPlanner(self)

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
                self._now = number
                item = next(posts[slot], None)
                if item is None:
                    item = self._refill(slots, posts, slot)
            if item is not None:
                subject, poster, mid, size, body_lines, groups, truth, k, refs = item
                xref = xref_main + str(number) if groups is None else self._xref(groups, number)
                if truth.__class__ is list:
                    truth.append((k, mid, size, number))
                else:
                    self._junk.append(TruthJunk(mid, truth, number))  # type: ignore[arg-type]
                yield f"{number}\t{subject}\t{poster}\t{date}\t<{mid}>\t{refs}\t{size}\t{body_lines}\t{xref}".encode()
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

    def _clock(self) -> float:
        # Unix time of the article being written: what a posting tool puts in
        # its time-based message-ids.
        config = self._config
        return config.start_time + (self._now - config.first_article) * config.seconds_per_article

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
            pattern=upload.pattern,
            headerless=upload.headerless,
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
            elif upload.kind == "repost":
                original = self._reposting.pop(
                    -1 if upload.repost_of is None else upload.repost_of, None
                )
                if original is not None:
                    self._repostable.append(original)
            slots[slot] = upload, post = self._start_slot(initial=False)
            posts[slot] = post
            item = next(post, None)
        return item

    def _start_slot(self, *, initial: bool) -> tuple[_Upload, Iterator[_Item]]:
        if self._tools is None:
            upload = self._new_upload()
            post = _post(upload, self._rng, self._config.duplicate_probability)
        else:
            upload = self._tools.next_upload()
            post = _post_tools(upload, self._rng, self._clock)
        if initial and self._rng.random() < 0.6:
            # The run starts while this upload is under way: its first
            # articles went out before the first article number.
            upload.truncated = True
            for _ in itertools.islice(post, self._rng.randrange(upload.segment_total)):
                pass
        return upload, post

    def _spanning_uploads(self) -> list[tuple[int, int, tuple[_Upload, Iterator[_Item]]]]:
        # Big uploads posted slowly, one article every `stride`, over the whole run,
        # or, in a run longer than spanning_max_articles, a wave of them over each
        # stretch of that many articles (the last wave may go on past the run's end).
        config = self._config
        stretch = min(config.articles, config.spanning_max_articles)
        count = stretch // config.spanning_min_articles
        target = int(stretch * config.spanning_fraction)
        if count == 0 or target < 10:
            return []
        stride = max(1, stretch // target)
        waves = max(1, (config.articles + stretch // 2) // stretch)
        spanning = []
        for wave in range(waves):
            for offset in range(count):
                upload = self._legit_upload(
                    content="movie", tool="nyuu", data_segments=int(target / 1.1)
                )
                post = _post(upload, self._rng, 0.0)
                start = wave * stretch + offset * (stride // count + 1)
                spanning.append((start, stride, (upload, post)))
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
            original = _pick(self._rng, self._repostable)
            self._reposting_now(original)
            return self._repost(original)
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
            yield subject, poster, mid, size, size >> 7, groups, truth, k, ""
            if random() < duplicate_probability:
                yield subject, poster, mids((k,), total)[0], size, size >> 7, groups, truth, k, ""


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
