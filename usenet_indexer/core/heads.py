"""A subject's head read as a release name: the poster's and the tools' noise taken off.

Theory of operation
-------------------
What comes before a binary subject's file counter and file name is the
poster's: Nyuu's and PowerPost's comment, GoPostStuff's and JBinUp's
subject, the #a.b.teevee@EFNet bots' `[id]-[FULL]-[#channel]-[ name ]-`.
People and boards fill it with more than the release, in shapes the
corpus (../shared/corpus/subjects.tsv) shows again and again:

- a handle and "post": `am9295 post Ubuntu 8.10 Desktop i386 [FTD#805887].`,
  `Eragon postet Rapunzel S02E12 german Sub`, `Old Dad uppt ...`,
  `Egbert47 post voor u op www.nzbworld.me`, `Uploader.Presents-Name`,
  `[Lords-of-Usenet] <<Partner of SSL-News.info>> presents Name`;
- a board's site and its sponsor as a banner:
  `<TOWN><www.town.ag > <partner of www.ssl-news.info > Name`,
  `.: Name :. - .:www.thunder-news.org:. - .:sponsored by secretusenet.com:.`,
  `<<<Thor>>><<<Name>>>usenet-space-cowboys.info<<<Powered by https://...>`;
- sizes, counters in words and tags: `[27,35 GB]`, `File 01 of 98`,
  `(02|14)`, `[FULL]`, `(PW)`, `REPOST:`, `Re: REQ:`.

The head is cut into parts at brackets and banner marks ([] <> {} | ~ ^,
-= =-, .: :., ::, runs of three parentheses). Each part loses a poster's prefix
(`<handle> post`, `postet`, `uppt`, `presents`), a leading `Re:`/`REQ:`,
sites, sizes and counters, a "sponsored by X" or "partner of X", and a
slogan's rest; a part with fewer than three letters or digits left, or that
is only a tag, is noise.
The longest part left is the name (the bots give the release a bracket of
its own); with none left the head says nothing, and the release is named
after its files (naming.release_name). The release key is not made from
this name (subject.py keys on the raw head), so reading a head better
never splits or joins releases.

Pure: strings in, a string out.
"""

from __future__ import annotations

import re

# Where a head's parts meet: brackets and the marks boards draw banners with. (The
# lookahead, a character every mark starts with, spares the other places the
# eight alternatives: split() tries every place of a head.)
_PART_MARKS = re.compile(
    r"(?=[\[\]<>{}|~^«»=.:()-])(?:[\[\]<>{}|~^«»]+|-=+|=+-|\.:|:\.|::|\({3,}|\){3,})"
)

# A counter as a poster writes it in words or with a bar: `File 01 of 98`,
# `(02|14)`, `[1 of 23]`, ` - 28 of 48` and ` 01/43` at the end (`Disc 1 of 2`
# stays). The file counter `[1/5]` is split off before the head is read.
_COUNTERS = re.compile(
    r"(?i)\bfiles?\s+\d{1,5}\s*(?:of|/)\s*\d{1,5}\b:?"
    r"|[\[(]\s*\d{1,5}\s*(?:of|/|\|)\s*\d{1,5}\s*[\])]"
)
_END_COUNTER = re.compile(
    r"(?i)(?:(?:^|\s-)\s*\d{1,5}\s*of|(?:^|[\s-])\d{1,5}\s*/)\s*\d{1,5}\s*[\])]?\s*$"
)
# The longest text _END_COUNTER matches but for spaces: " - 12345 of 12345]".
_END_COUNTER_MAX = 24

# The tools' own word, where a poster's template put it before the counter.
_YENC = re.compile(r"(?i)\byenc\b")

# A size: `1,31 GB`, `405.6 kBytes`, `552 MB`: a decimal or a space before the
# unit (`100MB` in `reftestnzb 100MB auto` is the post's name).
_SIZE = re.compile(r"(?i)(?<![\w.,])(?:\d+[.,]\d+\s?|\d+\s)(?:[kmgt]i?b|[kmgt]?bytes)(?![\w.])")
# What every size holds, found in far fewer steps: a digit, a space or none, and
# a unit's first letter.
_SIZE_HINT = re.compile(r"(?i)\d\s?[kmgtb]")

# A site: a board's or a sponsor's address (`www.town.ag`, `Art-Of-Use.Net`,
# `http://dream-of-usenet.info`, `brothers-of-usenet.info/.net`): at most two
# labels before the top level, not right after a dot and not before one (scene
# names have many dots). Top levels that are English words too (`me`, `to`,
# `it`) only after `www.` or `http://`.
_TOP_LEVEL = (
    r"(?:com|net|org|info|biz|ag|eu|nl|de|tk|pw|ws|ua|nu|ru|io|xyz|us|uk|ch|cz|pl|dk|se|fr"
    r"|club|online|cx|su|ly|cc)"
)
_ANY_TOP_LEVEL = r"[a-z]{2,6}"
_SITE = re.compile(
    r"(?i)(?<![^\W_]|[.-])(?:(?:https?://|www\.)[\w-]+(?:\.[\w-]+)?\." + _ANY_TOP_LEVEL
    + r"|[\w-]+(?:\.[\w-]+)?\." + _TOP_LEVEL + r")(?![\w.]|-\w)(?:/\S*)?"
)  # fmt: skip
# What every site holds, found in far fewer steps (a scene name has many dots, and
# _SITE tries the labels before each): a last label of two to six letters after a
# dot (every top level of _TOP_LEVEL is one; case-insensitive [a-z] matches every
# character their letters match), else "://" or "www." (_clean_part looks).
_LAST_LABEL = re.compile(r"(?i)\.[a-z]{2,6}(?![\w.]|-\w)")

# What a board writes around the release: "sponsored by", "partner of",
# "postet by" take the word after them (the sponsor, the poster: `Partner of
# SSL-News UK.Single.Charts.Top.40` keeps the release); a slogan takes the
# rest of its part. (_clean_part tries it only on a part with " by", "partner",
# "download", "empfehlen", "thanks" or "thnx".)
_SPONSOR = re.compile(
    r"(?i)\b(?:(?:sponsored|powered|presented|posted|postet|upped|uploaded)\s+by"
    r"|partner\s+(?:of|von))\b[\s:-]*\S*"
    r"|\b(?:download\s+all\s+our\s+files|empfehlen|thanks\s+to|thnx\s+to)\b.*$"
)

# A handle and "post" before the release: `am9295 post `, `Eragon postet `,
# `Old Dad uppt `, `Crionics Post - `, `Egbert47 post voor u op `. The verb in
# lower case (or `Post` before a dash or colon, or Dutch `Post Voor`), so that a title with the word
# Post in it keeps it.
_POSTER_PREFIX = re.compile(
    r"^(?:\S+\s+){1,2}?(?:(?:post|postet|posts|uppt)\b|Post\s*[-:]|(?i:post\s+voor)\b)"
    r"(?:\s+voor\s+u\s+op|\s+voor|\s+for\s+you|\s+for)?[\s:-]*"
)
_PRESENTS = re.compile(
    r"(?i)^(?:\S+[\s._-]+){0,3}?(?:presents|presenteren|pr(?:ä|ae)sentiert)\b[\s:._-]*"
)
_REQUEST = re.compile(
    r"(?i)^(?:(?:re|fwd?|req|attn)\s*:\s*|\**\s*(?:full\s+)?repost\s*(?:\*+|:)\s*)+"
)

# A part that is only a tag: the crew's, the board's, the channel's, the tool's,
# a post id.
_TAG = re.compile(
    r"(?i)^(?:\d+|#+|FULL|PRiVATE|WtFnZb|EnCrYpTnZb|N3wZ|REQ|REPOST|FULL\s+REPOST"
    r"|NEW\s+PAR\s+SET|PW|DRM|AUTO|Description|FTD\s*#?\s*\d+|FTD-NR:?\s*\d+|scnzbefnet"
    r"|TOWN|GOU|USC"
    r"|#.*|a\.b\..*|.*@efnet|part \d+ of \d+)$"
)
# PowerPost's placeholder where the poster left the name out.
_PLACEHOLDER = re.compile(r"\(\?{2,}\)")
# A tag at the end of the part that holds the name.
_TRAILING_TAG = re.compile(r"(?i)[\s._-]+\(?(?:REPOST|NEW\s+PAR\s+SET|PW)\)?$")

# Separators and brackets around a part.
_EDGES = " \t-_.:|\\/[](){}<>\"'=*+,;"
# At least three letters or digits: less is no name.
_THREE_ALNUM = re.compile(r"[^\W_].*?[^\W_].*?[^\W_]", re.DOTALL)


def head_release_name(head: str) -> str | None:
    """The release name a subject's head gives, or None for a head that names none.

    `[108505]-[FULL]-[#a.b.teevee@EFNet]-[ Show.S05E04.x264-FQM ]-` gives
    `Show.S05E04.x264-FQM`; `am9295 post Ubuntu 8.10 Desktop i386 [FTD#805887].`
    gives `Ubuntu 8.10 Desktop i386`; `[PRiVATE]-[WtFnZb]-[` and
    `Egbert47 post voor u op www.nzbworld.me - ` give None.
    """
    if not head:
        return None
    text = _counters_off(head)
    if "b" in text.lower() and _SIZE_HINT.search(text):
        text = _SIZE.sub(" ", text)
    candidates = [name for part in _PART_MARKS.split(text) if (name := _clean_part(part))]
    if not candidates:
        return None
    return max(candidates, key=len)


# Each pattern below is tried only where a word it needs is in the text: most
# heads hold none of them, and a head is read for every release of a batch.


def _clean_part(part: str) -> str | None:
    """One part of a head without its noise, or None when nothing names a release."""
    if len(part) < 3:
        return None
    lower = part.lower()
    name = _PLACEHOLDER.sub(" ", part) if "??" in part else part
    if "enc" in lower:
        name = _YENC.sub(" ", name)
    if (
        " by" in lower
        or "partner" in lower
        or "download" in lower
        or "empfehlen" in lower
        or "thanks" in lower
        or "thnx" in lower
    ):  # (one `in` each: a generator per part cost more than the test)
        name = _SPONSOR.sub("", name)
    if "." in name and (
        _LAST_LABEL.search(name) or "://" in name or "www." in name.lower()
    ):  # (_SITE's hint, above)
        name = _SITE.sub(" ", name)
    name = _strip_edges(name)
    if ":" in name or "*" in name:
        name = _REQUEST.sub("", name)
    if "post" in lower or "uppt" in lower:
        name = _POSTER_PREFIX.sub("", name)
    if "sent" in lower:
        name = _PRESENTS.sub("", name)
    name = _counters_off(name)
    end = name[-8:].lower()
    if "post" in end or "set" in end or "pw" in end:
        name = _TRAILING_TAG.sub("", name)
    name = _strip_edges(name)
    if not _THREE_ALNUM.search(name) or _TAG.match(name):
        return None
    return " ".join(name.split())


def _counters_off(text: str) -> str:
    """`text` without the counters a poster wrote (_COUNTERS, _END_COUNTER)."""
    lower = text.lower()
    if "/" not in text and "|" not in text and "of" not in lower:
        return text
    text = _COUNTERS.sub(" ", text)
    end = _END_COUNTER.search(text, max(0, len(text.rstrip()) - _END_COUNTER_MAX))
    return text[: end.start()] + " " if end else text


def _strip_edges(text: str) -> str:
    """`text` without the separators and brackets around it, but with the closing
    bracket of one it opened: `Title (1978) - ` gives `Title (1978)`."""
    name = text.strip(_EDGES)
    if not name:
        return name
    end = text.find(name) + len(name)
    if text[end : end + 1] not in _CLOSING:
        return name
    for opening, closing in ("()", "[]", "{}"):
        while name.count(opening) > name.count(closing) and text[end : end + 1] == closing:
            name += closing
            end += 1
    return name


_CLOSING = frozenset(")]}")
