"""NFO files: their text, and the scene-style release names in it.

Which encoding: an NFO is UTF-8 when it has a BOM (UTF-8 or UTF-16) or
decodes as UTF-8 (pure ASCII does). Otherwise it is CP437 (the DOS code page
the ASCII art of scene NFOs is drawn in) or Latin-1 (really Windows-1252,
what Windows editors write). They are told apart by the art: in CP437 the
bytes 0xB0-0xDF are box drawing and block characters (░▒▓│┤╗╝┌─█▄▌▐▀), and
art draws lines and blocks with one of them repeated (═══, ───, ▄▄▄▄, ████);
in Latin-1 the same bytes are capital accented letters (À-ß), which no
word repeats. A run of `ART_RUN` equal bytes of that range makes it CP437;
an 8-bit NFO without one is Latin-1 (its art-less text is the same in both
for ASCII, and accented letters are far likelier than stray box pieces).

Release names: scene names are words joined by dots (or underscores, or
hyphens for music) ending in "-GROUP". Every such run in the text is a
candidate; it is kept when it looks like a release (a year, an episode
SxxEyy, a date, a version, known tags like 1080p, WEB, x264, FLAC), and
ranked by how much it does. URLs, e-mail addresses and boilerplate ("Release-Date",
"Greetings-To") have none of that and are dropped.
"""

from __future__ import annotations

import re

from usenet_indexer.decode.names import clean_text

__all__ = ["ART_RUN", "nfo_text", "release_names"]

# Equal box-drawing bytes in a row that make an NFO CP437: a frame line has dozens.
ART_RUN = 4
_ART = re.compile(rb"([\xb0-\xdf])\1{%d}" % (ART_RUN - 1))
# Controls but tab and line feed (CR is folded into line ends first).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f]")

_CANDIDATE = re.compile(
    r"(?<![\w.\-/@:])"
    r"([A-Za-z0-9][A-Za-z0-9._()\-]{6,220}-[A-Za-z0-9]{2,20})"
    r"(?:\.(?:mkv|mp4|avi|m4v|ts|nfo|sfv|nzb|rar|zip|7z|par2|flac|mp3|r\d\d))?"
    r"(?![\w.\-/@])"
)
_SPLIT = re.compile(r"[._\-()]+")
_YEAR = re.compile(r"^(19[2-9]\d|20\d\d)$")
_EPISODE = re.compile(r"^(S\d{1,3}(E\d{1,4})*|\d{1,2}x\d{2,3}|E\d{2,4})$", re.IGNORECASE)
# Tags that say "release" by themselves (resolution, source, codec, format)...
_STRONG_WORDS = """
480p 576p 720p 1080p 1080i 2160p 4320p UHD HDR HDR10 WEB WEBDL WEBRip BluRay BDRip BRRip
Remux HDTV PDTV DVDRip DVDR DVD9 DVD5 x264 x265 H264 H265 HEVC AVC XviD DivX AAC AC3 DTS
TrueHD Atmos DDP DDP5 FLAC MP3 24bit 16bit Vinyl CDDA AMZN DSNP HMAX ATVP Keygen Crack
Cracked Retail EPUB
"""
# ...and the short or common ones that only add to them ("TC", "CD", "Incl").
_WEAK_WORDS = """
DV SDR 320 V0 CBR VBR CD CDM CDS 2CD 3CD EP LP Single OST VA PROPER REPACK RERIP INTERNAL
LIMITED UNRATED EXTENDED DC REMASTERED COMPLETE MULTI DUAL GERMAN FRENCH SPANISH ITALIAN
DUTCH NORDIC SUBBED DUBBED READNFO NFOFIX NF HULU iP TS TC CAM SCREENER ISO Linux MacOSX
Win32 Win64 x64 x86 Incl Update eBook PDF DL
"""
_STRONG = frozenset(_STRONG_WORDS.lower().split())
_WEAK = frozenset(_WEAK_WORDS.lower().split())
_VERSION = re.compile(r"^v\d+$", re.IGNORECASE)
_DOMAINS = re.compile(r"\.(com|net|org|info|biz|to|cc|nu|se|de|nl|uk|io|ws|me|tv)\b", re.I)


def nfo_text(data: bytes) -> str:
    """An NFO's text: UTF-8 (BOM or not), UTF-16 with a BOM, else CP437 or Latin-1 (see above).

    Line ends come back as "\\n"; NULs and other controls (but tabs) are dropped.
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", "replace")
    else:
        text = _eight_bit(data)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", text)


def _eight_bit(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    if _ART.search(data):
        return data.decode("cp437")
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:  # the five bytes cp1252 leaves undefined
        return data.decode("latin-1")


def release_names(text: str) -> tuple[str, ...]:
    """The scene-style release names in `text`, most likely first, each once."""
    scored: dict[str, tuple[int, int, str]] = {}
    for order, match in enumerate(_CANDIDATE.finditer(text)):
        name = match.group(1)
        score = _score(name)
        key = name.lower()
        if score > 0 and key not in scored:
            scored[key] = (-score, order, clean_text(name))
    return tuple(name for _, _, name in sorted(scored.values()))


def _score(name: str) -> int:
    """How much `name` looks like a release name; 0: not one."""
    if _DOMAINS.search(name) or name.count("-") + name.count(".") + name.count("_") < 2:
        return 0
    words = [w for w in _SPLIT.split(name) if w]
    if len(words) < 3:
        return 0
    lowered = [w.lower() for w in words[1:]]
    tags = 2 * sum(w in _STRONG for w in lowered) + sum(w in _WEAK for w in lowered)
    year = any(_YEAR.match(w) for w in words[1:])
    episode = any(_EPISODE.match(w) for w in words[1:])
    version = any(_VERSION.match(w) for w in words[1:])
    date = re.search(r"(19|20)\d\d[.\-]\d\d[.\-]\d\d", name) is not None
    score = 3 * year + 4 * episode + 3 * date + 2 * version + min(tags, 10)
    # One strong tag alone ("Greetings-To-All-WEB") or weak ones ("To-TC-And-CD") are not enough.
    return score if score >= 4 else 0
