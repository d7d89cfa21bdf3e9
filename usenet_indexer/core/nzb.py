"""NZB files: write one for a release, read one back.

Theory of operation
-------------------
An NZB (newzbin DTD 1.1) lists, per file of a release, the poster, the date,
the subject, the groups and the message-id of every segment. That is all a
downloader needs. This module is pure: bytes in, bytes out, no file I/O.

Writing. Names come from article headers, so they can hold anything: quotes,
`&`, `<`, non-ASCII, control characters, even lone surrogates from headers
decoded with `surrogateescape`. XML 1.0 cannot carry every code point, so
characters outside its `Char` production are replaced by U+FFFD; everything
else is escaped so that it reads back exactly (CR, LF and TAB go out as
character references, otherwise a parser would normalise them away).
Files are written in a fixed order: data files before par2 files (a
downloader that honours the order repairs last), each part sorted by name
(case-insensitive, then exact); segments by number.

Reading. `parse_nzb` drives expat itself (ElementTree's C parser does not
expose expat's handlers) and builds an `xml.etree.ElementTree` tree with a
`TreeBuilder`. Any entity declaration is refused, which stops the billion
laughs and external entity tricks before a single entity is expanded; no
external DTD is ever fetched. The namespace is ignored, so NZBs written
with or without `xmlns` read the same.
"""

from __future__ import annotations

import operator
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn
from xml.parsers import expat

import attrs

from usenet_indexer.errors import InputError

__all__ = ["Nzb", "NzbFile", "NzbSegment", "nzb_filename", "parse_nzb", "write_nzb"]

NZB_NAMESPACE = "http://www.newzbin.com/DTD/2003/nzb"
NZB_DOCTYPE = (
    '<!DOCTYPE nzb PUBLIC "-//newzBin//DTD NZB 1.1//EN" '
    '"http://www.newzbin.com/DTD/nzb/nzb-1.1.dtd">'
)

# Everything XML 1.0 does not allow in a document (its `Char` production):
# C0 controls other than TAB, LF and CR, the surrogate block, U+FFFE and U+FFFF.
_NOT_XML_CHAR = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

# Characters that make a file name unsafe or misleading: path separators, what
# Windows forbids, C0/C1 controls, surrogates, line and paragraph separators,
# bidi overrides (they can make "exe.mkv" display as "vkm.exe") and BOM/noncharacters.
_UNSAFE_IN_FILENAME = re.compile(
    '[\x00-\x1f\x7f-\x9f/\\\\:*?"<>|\u200e\u200f\u2028-\u202e\u2066-\u2069'
    "\ufeff\ufffe\uffff\ud800-\udfff]"
)
# Names Windows reserves whatever the extension; a file called "CON.nzb" cannot be opened there.
_WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"]
    + [f"COM{n}" for n in range(1, 10)]
    + [f"LPT{n}" for n in range(1, 10)]
)
# Most file systems cap a name at 255 bytes; 200 leaves room for the ".nzb" and
# for a " (2)" the caller adds to tell duplicates apart.
_MAX_FILENAME_STEM_BYTES = 200

# Numbers in an NZB are decimal digits only; 20 digits hold any 64-bit value and
# refuse a megabyte of digits before int() has to chew on it.
_DECIMAL = re.compile(r"[0-9]{1,20}")


@attrs.frozen
class NzbSegment:
    """One article of a file: its part number, its size and its message-id (without `<>`)."""

    number: int
    bytes: int
    message_id: str


@attrs.frozen
class NzbFile:
    """One file of an NZB, with its segments in the order the NZB lists them."""

    poster: str
    date: int
    subject: str
    groups: tuple[str, ...]
    segments: tuple[NzbSegment, ...]


@attrs.frozen
class Nzb:
    """A parsed NZB: the `<head>` meta entries as (type, value) pairs and the files in order.

    Meta entries stay pairs, not a dict: NZB 1.1 allows several of one type (`tag`).
    """

    meta: tuple[tuple[str, str], ...]
    files: tuple[NzbFile, ...]

    def meta_value(self, kind: str) -> str | None:
        """The first meta value of this type, or None.

        Args:
            kind: the meta `type` attribute, e.g. "name", "title" or "password".

        Returns:
            The value of the first such entry, or None when there is none.
        """
        return next((value for key, value in self.meta if key == kind), None)


# --- writing -----------------------------------------------------------------


def write_nzb(release: Mapping[str, Any]) -> bytes:
    """Write one release as an NZB 1.1 document.

    Args:
        release: a release in the batch schema: "name", "poster", "groups",
            "posted" (unix seconds) and "files", each file with "name",
            "subject", "segments" as [number, message-id, bytes] triples and an
            optional "date" (unix seconds; the release's "posted" otherwise).
            Other keys ("complete", "bytes", "dropped", ...) are not needed.

    Returns:
        The UTF-8 encoded document. Files are ordered data files first, then
        par2 files, each by name; segments by number.

    Raises:
        KeyError: a required key is missing.
        TypeError: a date, segment number or size is not an integer.
    """
    poster = _attr(str(release["poster"]))
    groups = "".join(f"      <group>{_text(str(g))}</group>\n" for g in release["groups"])
    posted = operator.index(release["posted"])
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>\n',
        NZB_DOCTYPE,
        f'\n<nzb xmlns="{NZB_NAMESPACE}">\n',
        f'  <head>\n    <meta type="name">{_text(str(release["name"]))}</meta>\n  </head>\n',
    ]
    for file in sorted(release["files"], key=_file_order):
        date = operator.index(file.get("date", posted))
        parts.append(
            f'  <file poster="{poster}" date="{date}" subject="{_attr(str(file["subject"]))}">\n'
            f"    <groups>\n{groups}    </groups>\n    <segments>\n"
        )
        parts.extend(_segment_lines(file["segments"]))
        parts.append("    </segments>\n  </file>\n")
    parts.append("</nzb>\n")
    return "".join(parts).encode("utf-8")


def _file_order(file: Mapping[str, Any]) -> tuple[bool, str, str]:
    name = str(file["name"])
    return (name.lower().endswith(".par2"), name.casefold(), name)


def _segment_lines(segments: Sequence[Sequence[Any]]) -> Iterator[str]:
    # sorted() is stable, so two segments with one number keep their given order.
    for number, message_id, size in sorted(segments, key=lambda s: operator.index(s[0])):
        yield (
            f'      <segment bytes="{operator.index(size)}" number="{operator.index(number)}">'
            f"{_text(str(message_id))}</segment>\n"
        )


def _text(value: str) -> str:
    # CR is the one character text content loses (parsers turn CR and CRLF into LF).
    value = _NOT_XML_CHAR.sub("\ufffd", value)
    return (
        value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    )


def _attr(value: str) -> str:
    # Attribute value normalisation turns a literal TAB or LF into a space; a reference survives.
    return _text(value).replace('"', "&quot;").replace("\t", "&#9;").replace("\n", "&#10;")


def nzb_filename(name: str) -> str:
    """A safe file name for a release's NZB.

    Path separators, control and format characters and what Windows forbids
    become "_"; leading dots and spaces go (no hidden files, no ".."); the
    name is cut to 200 UTF-8 bytes on a character boundary; Windows device
    names get a "_" in front. The caller tells duplicates apart.

    Args:
        name: the release name, any text (lone surrogates included).

    Returns:
        A non-empty name ending in ".nzb", at most 204 UTF-8 bytes long.
    """
    stem = _UNSAFE_IN_FILENAME.sub("_", name).lstrip(". \t")
    if stem.lower().endswith(".nzb"):
        stem = stem[:-4]
    stem = stem.encode("utf-8")[:_MAX_FILENAME_STEM_BYTES].decode("utf-8", "ignore")
    # Windows drops trailing dots and spaces, which would make "a." and "a" collide.
    stem = stem.rstrip(". ")
    if not stem:
        return "release.nzb"
    if stem.split(".", 1)[0].upper() in _WINDOWS_RESERVED:
        stem = "_" + stem
    return stem + ".nzb"


# --- reading -----------------------------------------------------------------


def parse_nzb(data: bytes) -> Nzb:
    """Read an NZB document.

    The encoding comes from the XML declaration (UTF-8, ISO-8859-1, UTF-16,
    and the 8-bit codecs Python knows). Segments keep the order the NZB
    lists them in; message-ids lose surrounding whitespace and one pair of
    `<>`. A missing poster reads as "" and a missing date as 0; elements the
    reader does not know are skipped.

    Args:
        data: the whole document.

    Returns:
        The meta entries of `<head>` and the files.

    Raises:
        InputError: the document is not well-formed XML, declares an entity,
            is not an `<nzb>` document, or a file or segment lacks a
            required attribute or has a number that is not a decimal integer.
    """
    root = _parse_tree(data)
    if _local_name(root.tag) != "nzb":
        raise InputError(f"not an NZB: the root element is <{_local_name(root.tag)}>, not <nzb>")
    meta: list[tuple[str, str]] = []
    files: list[NzbFile] = []
    for child in root:
        tag = _local_name(child.tag)
        if tag == "head":
            meta.extend(
                (m.get("type", ""), m.text or "") for m in child if _local_name(m.tag) == "meta"
            )
        elif tag == "file":
            files.append(_read_file(child, len(files) + 1))
    return Nzb(meta=tuple(meta), files=tuple(files))


def _parse_tree(data: bytes) -> ET.Element:
    builder = ET.TreeBuilder()
    # namespace_separator turns on namespace processing: "{uri}name" arrives as
    # "uri}name" and _local_name keeps what follows the "}".
    parser = expat.ParserCreate(namespace_separator="}")
    parser.buffer_text = True
    parser.StartElementHandler = lambda name, attributes: builder.start(
        _local_name(name), attributes
    )
    parser.EndElementHandler = lambda name: builder.end(_local_name(name))
    parser.CharacterDataHandler = builder.data
    parser.EntityDeclHandler = _refuse_entity
    parser.UnparsedEntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_entity
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    try:
        parser.Parse(data, True)
    except expat.ExpatError as error:
        raise InputError(
            f"not well-formed XML: {expat.ErrorString(error.code)} "
            f"(line {error.lineno}, column {error.offset})"
        ) from error
    return builder.close()


def _refuse_entity(*_args: object) -> NoReturn:
    # An NZB never needs an entity of its own; declared ones are how the
    # billion laughs and external-entity attacks start.
    raise InputError("NZB declares an entity (<!ENTITY>): refused")


def _local_name(tag: str) -> str:
    return tag.rpartition("}")[2]


def _read_file(element: ET.Element, position: int) -> NzbFile:
    where = f"<file> #{position}"
    subject = element.get("subject")
    if subject is None:
        raise InputError(f"{where} has no subject attribute")
    groups: list[str] = []
    segments: list[NzbSegment] = []
    for child in element:
        tag = _local_name(child.tag)
        if tag == "groups":
            groups.extend(_group_names(child))
        elif tag == "segments":
            segments.extend(
                _read_segment(s, where) for s in child if _local_name(s.tag) == "segment"
            )
    date = element.get("date")
    return NzbFile(
        poster=element.get("poster", ""),
        date=0 if date is None else _decimal(date, f"{where} date"),
        subject=subject,
        groups=tuple(groups),
        segments=tuple(segments),
    )


def _group_names(element: ET.Element) -> Iterator[str]:
    for child in element:
        name = (child.text or "").strip()
        if _local_name(child.tag) == "group" and name:
            yield name


def _read_segment(element: ET.Element, where: str) -> NzbSegment:
    number = element.get("number")
    size = element.get("bytes")
    if number is None or size is None:
        raise InputError(f"{where}: a <segment> lacks its number or bytes attribute")
    message_id = (element.text or "").strip()
    # Some generators keep the angle brackets; the schema holds ids without them.
    if message_id.startswith("<") and message_id.endswith(">"):
        message_id = message_id[1:-1].strip()
    if not message_id:
        raise InputError(f"{where}: segment {number} has no message-id")
    return NzbSegment(
        number=_decimal(number, f"{where} segment number"),
        bytes=_decimal(size, f"{where} segment {number} bytes"),
        message_id=message_id,
    )


def _decimal(text: str, what: str) -> int:
    value = text.strip()
    if not _DECIMAL.fullmatch(value):
        raise InputError(f"{what} is not a decimal number: {text[:40]!r}")
    return int(value)
