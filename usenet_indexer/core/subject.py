"""What a binary post's subject says about its file and its release.

Theory of operation
-------------------
A binary article's subject carries, in the styles of the posting tools
(Nyuu, ngPost, PowerPost, JBinUp, GoPostStuff, newsposts of the
#a.b.teevee@EFNet kind, WtFnZb obfuscation):

    [head] [file counter [i/M]] - "file name" yEnc [size] (k/N) [size]

The segment counter `(k/N)` is split off by the indexer's fast path (it is the
only part that changes from article to article); everything here works on the
text *before* it, once per file, and is cached by the caller.

From that text this module finds:

- the file name: the quoted name, else a bracketed name with an extension
  (WtFnZb), else what follows the file counter;
- the file counter `[i/M]` or `(i/M)`: the last one before the file name, else
  the first one after it (but before `yEnc`);
- the head: the text before the file name and the file counter, which is the
  same for every file of an upload;
- the release basis: what the release key is built from: the head and M
  (with the poster); without a head, the file name's stem (without the
  poster: obfuscating tools give every file a poster of its own), or, when
  the stem is random, only M (with the poster). It never contains anything
  that differs between the files of one upload, so every file, batch and
  edge agrees on the key.

No I/O, no clock: pure functions over strings. `parse_file_subject` (with
what it calls) is the oracle and fallback of its compiled twin,
core/_fastsubject.pyx, which the indexer runs on the common subject.
"""

from __future__ import annotations

import re
from typing import AnyStr, NamedTuple

from usenet_indexer.core.heads import head_release_name
from usenet_indexer.core.rules import EXECUTABLE_EXTENSIONS

# A file counter: [i/M] or (i/M). Five digits: no real upload has 100k files,
# and longer numbers are sizes or dates.
_FILE_COUNTER = re.compile(r"[\[(](\d{1,5})/(\d{1,5})[\])]")

# The rightmost file counter of a text (.* backtracks from its end).
_LAST_FILE_COUNTER = re.compile(r".*[\[(](\d{1,5})/(\d{1,5})[\])]", re.DOTALL)

# A subject with a quoted name, in one match: the head before the last file
# counter ahead of the name and that counter, or all the text before the name
# when no counter is there; the text between the first and the last quote;
# the first file counter after the last quote, only looked for when there
# was none before the name (?(2)...). The same counters as
# _find_file_counter_around_quotes finds (none holds a quote).
_QUOTED_NAME = re.compile(
    r"""(?:
        ([^"]*) [\[(] (\d{1,5}) / (\d{1,5}) [\])] [^"]*
      | ([^"]*)
    )
    "(.*)"
    (?(2) | (?: [^"]*? [\[(] (\d{1,5}) / (\d{1,5}) [\])] )? )
    """,
    re.DOTALL | re.VERBOSE,
)

# What `text[:4].lower() == "re: "` accepts: no other character lowers to
# one of these four.
_REPLY_PREFIXES = ("re: ", "Re: ", "rE: ", "RE: ")

# A letter or a digit: a head without one is a placeholder.
_ALNUM = re.compile(r"[^\W_]")

# A bracketed file name, as WtFnZb posts carry it: [name.ext]
_BRACKET_NAME = re.compile(r"\[([^\[\]]*\.[A-Za-z0-9]{2,5})\]")

# Suffixes stripped from a file name to get the release stem, repeatedly:
# multi-part archives, par2 volumes, index files.
_STEM_SUFFIX = re.compile(
    r"""\.(?:
        part\d{1,4}\.rar | vol\d{1,5}[+-]\d{1,5}\.par2 | vol-?\d{1,5}\.par2 | par2
      | r\d{2,3} | s\d{2,3}
      | 7z\.\d{3} | zip\.\d{3} | rar\.\d{3} | z\d{2} | \d{3}
      | rar | zip | 7z | nfo | sfv | nzb | md5 | srr | srs | nzb
      | mkv | mp4 | avi | m4v | wmv | mpg | ts | iso | img | bin | cue
      | mp3 | flac | m4a | m4b | ogg | epub | mobi | azw3 | pdf | cbz | cbr
      | exe | scr | com | bat | msi | cmd | jpg | png | txt
    )$""",
    re.IGNORECASE | re.VERBOSE,
)

# The longest text _STEM_SUFFIX matches: ".vol" + 5 digits + "+" + 5 digits + ".par2".
_STEM_SUFFIX_MAX = 20

# _STEM_SUFFIX's forms, for names that need no regular expression.
_STEM_WORDS = frozenset(
    [
        "par2",
        "rar",
        "zip",
        "7z",
        "nfo",
        "sfv",
        "nzb",
        "md5",
        "srr",
        "srs",
        "mkv",
        "mp4",
        "avi",
        "m4v",
        "wmv",
        "mpg",
        "ts",
        "iso",
        "img",
        "bin",
        "cue",
        "mp3",
        "flac",
        "m4a",
        "m4b",
        "ogg",
        "epub",
        "mobi",
        "azw3",
        "pdf",
        "cbz",
        "cbr",
        "exe",
        "scr",
        "com",
        "bat",
        "msi",
        "cmd",
        "jpg",
        "png",
        "txt",
    ]
)

# What may follow a name's last dot in a suffix (_STEM_SUFFIX), lower case:
# "one" for a suffix of its own (mkv, r01, z01), "two" for one a two-dot form
# may end in too (part01.rar, vol0+1.par2, 7z.001), "short" for one or two
# digits (a suffix of random names only). A table: one look-up answers most.
_LAST_SUFFIXES: dict[str, str] = {
    **dict.fromkeys(_STEM_WORDS, "one"),
    **{
        f"{letter}{n:0{width}}": "one"
        for letter in "rs"
        for width in (2, 3)
        for n in range(10**width)
    },
    **{f"z{n:02}": "one" for n in range(100)},
    **{f"{n:0{width}}": "short" for width in (1, 2) for n in range(10**width)},
    **{f"{n:03}": "two" for n in range(1000)},
    "rar": "two",
    "par2": "two",
}
_STEM_NUMBERED = frozenset({"7z", "zip", "rar"})  # 7z.001, zip.001, rar.001

_HEAD_EDGES = " \t-_.:|\\/[](){}<>\"'"

# WtFnZb bracket groups that are not the file name: tags, numbers, counters.
_WTF_SKIP = re.compile(r"^(?:\d+|\d+[/_]\d+|PRiVATE|WtFnZb|EnCrYpTnZb|N3wZ|)$", re.IGNORECASE)
_HAS_EXTENSION = re.compile(r"\.[A-Za-z0-9]{2,5}$")

_OBFUSCATED_HEX = re.compile(r"^[0-9a-fA-F]{16,}$")
_OBFUSCATED_UUID = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
_OBFUSCATED_TOKEN = re.compile(r"^[A-Za-z0-9]{12,}$")

# Names a posting tool gives one file of every upload (NewsUP renames the
# files at random and the par2 to this): as shared as a random name is
# unique, so only the poster and M link such a file to its upload.
FIXED_STEMS = frozenset({"rename.with.this"})

# File kinds the rules and probes care about.
PAR2_SUFFIX = re.compile(r"\.par2$", re.IGNORECASE)
PAR2_VOLUME = re.compile(r"\.vol(?:\d+[+-]\d+|-?\d+)\.par2$", re.IGNORECASE)
NFO_SUFFIX = re.compile(r"\.nfo$", re.IGNORECASE)

# Largest file counter M and segment counter N taken as real; above that the
# counter is forged (a 50 GB file in 100 kB segments has 500k segments).
# Caps, not settings (MAX_SEGMENTS is batch_articles' default number by chance).
MAX_FILES = 99_999
MAX_SEGMENTS = 500_000


class FileSubject(NamedTuple):
    """What the subject of one file says, without its segment counter.

    A named tuple: one is made for every new file (most of them executable
    floods, dropped on their names), so it must be cheap to make.

    Attributes:
        file_name: the file's name, as best the subject tells it.
        head: the text before the file name and file counter (release part).
        file_index: i of the file counter [i/M], or None.
        files_announced: M of the file counter, or None.
        release_basis: the text the release key is built from (with the poster).
        keyed_by_poster: whether the poster is part of the release key (not
            when there is no head: then the file stem links the files).
    """

    file_name: str
    head: str
    file_index: int | None
    files_announced: int | None
    release_basis: str
    keyed_by_poster: bool

    @property
    def head_name(self) -> str | None:
        """The release name the head gives, or None when the head is empty or
        only tags (then the release is named after its files).

        Worked out when asked (for kept releases), not for every file.
        """
        return head_release_name(self.head)


# FileSubject's own __new__ is a Python function taking its fields one by
# one; tuple.__new__ makes the same object from a tuple, without that call.
_new_file_subject = tuple.__new__


def parse_file_subject(before_counter: str) -> FileSubject:
    """Parse the subject text before the segment counter.

    Args:
        before_counter: the subject up to (not including) the segment counter
            `(k/N)`, e.g. `[1/9] - "name.part01.rar" yEnc `.

    Returns:
        The file's name, counter, head and release basis.
    """
    # The common case, a quoted name, in one match and without
    # _strip_yenc_tail: what that strips (spaces, "yEnc", dots, digits) holds
    # no quote and no bracket, so the quotes, the name and every file counter
    # are where they were, and the text keeps its first four characters (no
    # quote among "re: ").
    text = before_counter[4:] if before_counter.startswith(_REPLY_PREFIXES) else before_counter
    # Two quotes at least, or no match: the pattern would try every file
    # counter of the text before failing (16 ms for 4 kB of "(1/2)").
    found = _QUOTED_NAME.match(text) if text.count('"') >= 2 else None
    if found is None:
        return _parse_without_quoted_name(before_counter)
    head, index, total, before, quoted, index_after, total_after = found.groups()
    name = quoted.strip('" ')
    if not name:
        return _parse_without_quoted_name(before_counter)
    if head is None:
        # No counter before the name: the head is all before it, and the
        # counter the first one after it.
        head, index, total = before, index_after, total_after
    file_index: int | None = None
    files_announced: int | None = None
    if index is not None:
        file_index, files_announced = int(index), int(total)
        if not file_index <= files_announced <= MAX_FILES:
            file_index = files_announced = None
    head_key = _head_key(head) if head else ""
    if head_key:
        basis, keyed_by_poster = f"{head_key}\x1f{files_announced}", True
    else:
        basis, keyed_by_poster = _headless_basis(name, files_announced)
    return _new_file_subject(
        FileSubject, (name, head, file_index, files_announced, basis, keyed_by_poster)
    )


def _parse_without_quoted_name(before_counter: str) -> FileSubject:
    """parse_file_subject for a subject without a quoted name: a bracketed name,
    empty quotes, or the text after the file counter."""
    text = _strip_yenc_tail(before_counter)
    if text[:4].lower() == "re: ":
        text = text[4:]
    name, name_start, name_end = _find_file_name(text)
    if name_start >= 0 and text[name_start] == '"' and text[name_end - 1] == '"':
        counter = _find_file_counter_around_quotes(text, name_start, name_end)
    else:
        counter = _find_file_counter(text, name_start, name_end)
    file_index: int | None = None
    files_announced: int | None = None
    cut = name_start
    if counter is not None:
        index, total, start, end = counter
        if index <= total <= MAX_FILES:
            file_index, files_announced = index, total
        cut = min(cut, start) if name_start >= 0 else start
        if name_start < 0:
            # No quoted or bracketed name: the name is what follows the counter.
            name = text[end:].strip(" -") or text.strip()
    if cut < 0:
        cut = 0 if name else len(text)
    head = text[:cut]
    head_key = _head_key(head)
    if head_key:
        basis, keyed_by_poster = f"{head_key}\x1f{files_announced}", True
    else:
        basis, keyed_by_poster = _headless_basis(name, files_announced)
    return FileSubject(name, head, file_index, files_announced, basis, keyed_by_poster)


def _head_key(head: str) -> str:
    """The head as the release basis has it (_squash), or "" for no head."""
    if not head:
        return ""
    head_key = _squash(head)
    # str.isalnum is _ALNUM's class (checked for every character), and
    # most heads begin with a letter or a digit: no search for them.
    if head_key and not head_key[0].isalnum() and _ALNUM.search(head_key) is None:
        # `(????)`, `[]`, `---`: a posting tool's template placeholder (PowerPost
        # writes "(????)" where the poster left the name out), not a name.
        return ""
    return head_key


def _headless_basis(name: str, files_announced: int | None) -> tuple[str, bool]:
    """The release basis and keyed_by_poster of a file whose subject has no head.

    Without a head, the file names link the files of an upload, whoever
    posts them (some tools give each file a poster of its own; a separate
    [1/1] post of the .nfo belongs with them) -- unless the names are
    random: then each file has its own, and only the poster and M link them.
    """
    stem = file_stem(name)
    lower = stem.lower()
    # A dot (in most stems) is the quick "no" of looks_obfuscated.
    if ("." not in stem and looks_obfuscated(stem)) or lower in FIXED_STEMS:
        return f"\x1e\x1f{files_announced}", True
    # A bare executable of a flood is named after a film like the other
    # bots' are: its own poster keeps it apart from theirs (and from a
    # rar-wrapped flood of the same name, which its rule would no longer see
    # as executables only).
    return "\x1e" + lower, (files_announced or 1) <= 2 and _is_executable(name)


def _is_executable(name: str) -> bool:
    return extension(name) in EXECUTABLE_EXTENSIONS


def _strip_yenc_tail(text: str) -> str:
    """The text without what tools put before the counter: "yEnc", "yEnc.", a size."""
    text = text.rstrip()
    at = text.rfind("yEnc")
    if at < 0:
        at = text.lower().rfind("yenc")
    if at < 0 or (at > 0 and not text[at - 1].isspace()):
        return text
    rest = text[at + 4 :].lstrip(".").strip()
    return text[:at].rstrip() if not rest or rest.isdigit() else text


def _find_file_name(text: str) -> tuple[str, int, int]:
    """The file name and its span in `text`; span (-1, -1) when none is marked."""
    first = text.find('"')
    last = text.rfind('"')
    if first >= 0 and last > first:
        name = text[first + 1 : last].strip('" ')
        if name:
            return name, first, last + 1
    if "]-[" in text:
        found = _wtfnzb_name(text)
        if found is not None:
            return found
    bracketed = last_match(_BRACKET_NAME, text)
    if bracketed is not None:
        return bracketed.group(1).strip(), bracketed.start(), bracketed.end()
    if first >= 0 and last > first:
        # Empty quotes ("" in WtFnZb posts) mark where the name would be.
        return "", first, last + 1
    return text.strip(), -1, -1


def _wtfnzb_name(text: str) -> tuple[str, int, int] | None:
    """The name in a `[PRiVATE]-[WtFnZb]-[name.ext]-[1/23] - ""` subject, with its span.

    The name may hold brackets of its own (`[TAoE].mkv`), a counter
    (`[1/series.mkv]`) or a path (`[/a.mkv-WtF[nZb]/b.mkv]`).
    """
    parts = text.split("]-[")
    best = None
    offset = len(parts[0]) + 3
    for part in parts[1:]:
        start = offset
        offset += len(part) + 3
        candidate = part.split("] ", 1)[0].rstrip("]") if part is parts[-1] else part
        if _WTF_SKIP.match(candidate):
            continue
        best = (candidate, start, start + len(candidate))
    if best is None:
        return None
    name, start, end = best
    if "/" in name:
        pieces = [p for p in name.split("/") if p]
        with_ext = [p for p in pieces if _HAS_EXTENSION.search(p.replace("-WtF[nZb]", ""))]
        name = (with_ext or pieces or [name])[0].replace("-WtF[nZb]", "")
    return name, start, end


def last_match(pattern: re.Pattern[AnyStr], text: AnyStr) -> re.Match[AnyStr] | None:
    """The last non-overlapping match of `pattern` in `text`, or None."""
    found = None
    for found in pattern.finditer(text):  # noqa: B007 - the loop keeps the last one
        pass
    return found


def _find_file_counter(
    text: str, name_start: int, name_end: int
) -> tuple[int, int, int, int] | None:
    """The file counter (i, M, start, end): the last one before the name, else after it."""
    before = None
    after = None
    for match in _FILE_COUNTER.finditer(text):
        if name_start >= 0 and match.start() >= name_start and match.end() <= name_end:
            continue
        if name_start < 0 or match.end() <= name_start:
            before = match
        elif after is None:
            after = match
    found = before or after
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2)), found.start(), found.end()


def _find_file_counter_around_quotes(
    text: str, name_start: int, name_end: int
) -> tuple[int, int, int, int] | None:
    """`_find_file_counter` for a name between quotes, without iterating over every counter.

    A counter holds no quote, so none straddles the name's quotes, and
    counters never overlap (one starts with a bracket, holds none inside,
    and ends with one): the last one before the name is the rightmost match
    in the text before it, the first one after is a search after it.
    """
    found = _LAST_FILE_COUNTER.match(text, 0, name_start)
    if found is not None:
        return int(found.group(1)), int(found.group(2)), found.start(1) - 1, found.end()
    after = _FILE_COUNTER.search(text, name_end)
    if after is None:
        return None
    return int(after.group(1)), int(after.group(2)), after.start(), after.end()


def _squash(text: str) -> str:
    """Text reduced to what identifies it: trimmed, inner space collapsed, lower case."""
    return " ".join(text.strip(_HEAD_EDGES).split()).lower()


def file_stem(name: str) -> str:
    """A file name without its archive, par2, index and media suffixes.

    `Ubuntu 8.10 desktop i386.part02.rar` -> `Ubuntu 8.10 desktop i386`;
    `x.rar.vol0+1.PAR2` -> `x`.
    """
    stem = name.strip()
    if stem.isascii() and "\n" not in stem:
        return _ascii_file_stem(stem, 3)  # nearly every name: no regular expression
    for strips in range(3, 0, -1):
        if stem.isascii() and "\n" not in stem:
            return _ascii_file_stem(stem, strips)
        # A suffix is at most _STEM_SUFFIX_MAX characters long and ends the
        # name (or comes just before a final newline): search only there.
        found = _STEM_SUFFIX.search(stem, max(0, len(stem) - _STEM_SUFFIX_MAX - 1))
        if found is None or (found.start() == 0 and found.end() == len(stem)):
            break
        stem = stem[: found.start()] + stem[found.end() :]
    return stem


def _ascii_file_stem(stem: str, strips: int) -> str:
    """`stem` without up to `strips` suffixes, as _STEM_SUFFIX finds them, for
    an ASCII name without newlines (its stems stay so).

    The same answer as the regular expression, without it: a suffix holds at
    most two dots, and the leftmost match wins, so the two-dot forms (which
    end in rar, par2 or three digits) are tried at the second last dot
    before the one-dot forms at the last. A name that is all suffix keeps it.
    """
    for _ in range(strips):
        rest, _, ext = stem.rpartition(".")
        ext = ext.lower()
        kind = _LAST_SUFFIXES.get(ext)
        if kind is None or not rest:
            break  # x264, 1080p, S01E01, no dot, or a name that is all suffix
        if kind == "two":
            second = rest.rfind(".")
            if second >= 0 and _is_two_dot_suffix(rest[second + 1 :].lower(), ext):
                if second == 0:
                    break
                rest = rest[:second]
            # else rar, par2 and three digits are suffixes of their own
        elif kind == "short" and not looks_obfuscated(rest):
            # hash.10: a hash-named upload numbers its files by extension; a
            # date or a volume (Show.2020.01.15, Book.Vol.2) keeps its number.
            break
        stem = rest
    return stem


def _is_two_dot_suffix(mid: str, ext: str) -> bool:
    """Whether `mid.ext` (lower case) is a two-dot suffix: part01.rar,
    vol0+1.par2, vol01.par2, vol-01.par2, 7z.001, zip.001, rar.001."""
    if ext == "rar":
        return mid[:4] == "part" and 5 <= len(mid) <= 8 and mid[4:].isdigit()
    if ext != "par2":
        return mid in _STEM_NUMBERED  # ext is three digits
    if mid[:3] != "vol":
        return False
    plus = max(mid.find("+"), mid.find("-"))
    if (
        plus > 3
        and plus - 3 <= 5
        and 1 <= len(mid) - plus - 1 <= 5
        and mid[3:plus].isdigit()
        and mid[plus + 1 :].isdigit()
    ):
        return True
    # vol01.par2, vol-01.par2 (Nyuu's and ngPost's volume names)
    number = mid[4:] if mid[3:4] == "-" else mid[3:]
    return 1 <= len(number) <= 5 and number.isdigit()


def extension(name: str) -> str:
    """The last suffix of a file name, lower case, without the dot ('' if none)."""
    dot = name.rfind(".")
    if dot < 0 or dot == len(name) - 1 or len(name) - dot > 6:
        return ""
    return name[dot + 1 :].lower()


def looks_obfuscated(name: str) -> bool:
    """True for names that are random strings rather than words.

    Hex strings of 16+ digits, UUIDs, 12+ letters and digits with no
    separator that mix digits with letters of both cases, and 16+ letters of
    which 30-70% are upper case (ngPost's and Nyuu's obfuscated names) are
    random; real names have separators or words.
    """
    name = name.strip()
    if "." in name or " " in name:
        return False  # the quick answer for most names: no pattern below allows these
    if _OBFUSCATED_HEX.match(name) or _OBFUSCATED_UUID.match(name):
        return True
    if not _OBFUSCATED_TOKEN.match(name):
        return False
    # ASCII letters and digits only from here: digits and letters of both
    # cases without counting them (most random names have all three).
    if not name.isalpha() and name != name.lower() and name != name.upper():
        return True
    if len(name) < 16:
        return False  # every test below wants 16 characters
    digits = sum(c.isdigit() for c in name)
    upper = sum(c.isupper() for c in name)
    lower = sum(c.islower() for c in name)
    if digits and upper and lower:
        return True
    if digits >= 3 and (upper == 0 or lower == 0) and len(name) >= 16:
        return True  # long single-case strings with many digits (base36-style ids)
    # Random letters are about half upper case; CamelCase words far fewer.
    return len(name) >= 16 and 0.3 <= upper / len(name) <= 0.7
