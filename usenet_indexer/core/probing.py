"""What a probe's body says of its release: pure, bytes in, a verdict out.

Theory of operation
-------------------
A probe fetched the body of one segment (decode/ reads it): the first
segment of the release's par2 index file, else of its nfo, else of its
first archive volume. `examine` decodes the yEnc (CRC checked; its
`name=` is the file's name as the poster's tool saw it), then reads the
data as what the file is:

- a PAR2 file: its file description packets list every real file name
  with its length; the release is named after the largest (its stem),
  and all the names are kept (the catalog renames the files by them);
- an NFO: the first scene-style release name in the text, and the IMDb,
  TheTVDB, TVmaze and TMDB ids it names (decode/ids.py), what the *arr
  programs search by;
- an archive (RAR 4/5, 7z, zip, by signature, whatever the file is
  called): the names of the files inside, as far as the first segment
  holds them; an archive of executables only is an executable flood
  (rar-wrapped floods cannot be seen in headers);
- otherwise only the yEnc name, when the subject's file name is obfuscated
  and the yEnc name is a plain file name (with an extension).

The verdict (`Examined`) is one of the outcomes of store/probes.py's
`Outcome`: renamed (a name other than the release's), already named,
no names found, bad data (no yEnc, a CRC mismatch, nothing readable
where a par2 or an archive should be), executable inside. A missing
article is the adapter's to say: it has no body.
"""

from __future__ import annotations

import enum
import re

import attrs

from usenet_indexer.core.naming import release_name
from usenet_indexer.core.rules import EXECUTABLE_EXTENSIONS
from usenet_indexer.core.subject import NFO_SUFFIX, extension, file_stem, looks_obfuscated
from usenet_indexer.decode.archives import list_archive
from usenet_indexer.decode.errors import DecodeError
from usenet_indexer.decode.ids import NO_IDS, MediaIds, media_ids
from usenet_indexer.decode.nfo import nfo_text, release_names
from usenet_indexer.decode.par2 import parse_par2
from usenet_indexer.decode.yenc import decode_body

_PAR2_MAGIC = b"PAR2\x00PKT"
_ARCHIVE_MAGIC = (b"Rar!\x1a\x07", b"7z\xbc\xaf\x27\x1c", b"PK\x03\x04")
_SEPARATORS = re.compile(r"[\W_]+")


class Verdict(enum.Enum):
    """The outcomes a body can give (store/probes.py's Outcome by value)."""

    RENAMED = "renamed"
    ALREADY_NAMED = "already_named"
    NO_NAMES = "no_names"
    BAD_DATA = "bad_data"
    EXECUTABLE = "executable"


@attrs.frozen
class Examined:
    """What a body said.

    Attributes:
        verdict: the outcome.
        name: the release name found (None: none).
        files: the real file names found (a par2's list, an archive's contents).
        sizes: each file's length where known (a par2's), else 0.
        detail: one line for the operator (what was read, or what was wrong).
        slice_bytes: a par2 set's block size (its main packet's), else None.
        ids: the media ids an NFO names (none: not an NFO, or it names none).
    """

    verdict: Verdict
    name: str | None = None
    files: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    detail: str = ""
    slice_bytes: int | None = None
    ids: MediaIds = NO_IDS


def examine(body: bytes, file_name: str, release: str, *, max_bytes: int = 4 << 20) -> Examined:
    """The verdict on a probe's body.

    Args:
        body: the article body (lines joined with CRLF, dot-unstuffed).
        file_name: the file whose segment it is, as the subject names it.
        release: the release's name now (to tell renamed from already named).
        max_bytes: the most decoded data read (a cap, not a setting: the same
            number as probe_max_body_bytes' default, which caps the encoded body).
    """
    try:
        part = decode_body(body, max_bytes=max_bytes)
    except DecodeError as error:
        return Examined(Verdict.BAD_DATA, detail=f"yEnc: {error}")
    if part.crc_ok is False:
        return Examined(Verdict.BAD_DATA, detail="yEnc: CRC mismatch")
    data = part.data
    yenc_name = part.name if part.name and not looks_obfuscated(file_stem(part.name)) else None
    try:
        if data.startswith(_PAR2_MAGIC):
            return _par2(data, release)
        if data.startswith(_ARCHIVE_MAGIC):
            return _archive(data, release, yenc_name)
    except DecodeError as error:
        return Examined(Verdict.BAD_DATA, detail=str(error))
    ids = NO_IDS
    if NFO_SUFFIX.search(file_name) or (yenc_name is not None and NFO_SUFFIX.search(yenc_name)):
        text = nfo_text(data)
        ids = media_ids(text)
        names = release_names(text)
        if names:
            return attrs.evolve(_named(names[0], (), release, "nfo"), ids=ids)
    if yenc_name is not None and _tells(yenc_name, file_name):
        found = _named(release_name(None, [(yenc_name, 1)]), (yenc_name,), release, "yEnc name")
        return attrs.evolve(found, ids=ids)
    if ids:
        return Examined(Verdict.NO_NAMES, detail="nfo: ids, no release name", ids=ids)
    return Examined(Verdict.NO_NAMES, detail="no par2, nfo name, archive or plain yEnc name")


def _tells(yenc_name: str, file_name: str) -> bool:
    """Whether a yEnc name says more than the subject: the subject's file name is
    obfuscated, and the yEnc name is a file's (it has an extension) that is not."""
    return (
        looks_obfuscated(file_stem(file_name))
        and bool(extension(yenc_name))
        and yenc_name != file_name
    )


def _par2(data: bytes, release: str) -> Examined:
    index = parse_par2(data)
    files = [f for f in index.files if f.name]
    if not files:
        return Examined(Verdict.NO_NAMES, detail=f"par2: {index.packets} packets, no file names")
    lengths = {f.name: f.length for f in files}
    names = tuple(sorted(lengths))
    real = [f for f in files if extension(f.name) not in ("par2", "sfv", "nfo")] or files
    largest = max(real, key=lambda f: (f.length, f.name))
    name = release_name(None, [(largest.name, 1)])
    sizes = tuple(lengths[n] for n in names)
    found = _named(name, names, release, f"par2: {len(names)} files", sizes)
    return attrs.evolve(found, slice_bytes=index.slice_bytes)


def _archive(data: bytes, release: str, yenc_name: str | None) -> Examined:
    listing = list_archive(data)
    names = tuple(n for n in listing.names if n)
    if not names:
        state = "encrypted headers" if listing.encrypted else "no file header in the segment"
        return Examined(Verdict.NO_NAMES, detail=f"{listing.kind}: {state}")
    executables = [n for n in names if extension(n).lower() in EXECUTABLE_EXTENSIONS]
    if len(executables) == len(names):
        return Examined(
            Verdict.EXECUTABLE, files=names, detail=f"{listing.kind}: only executables inside"
        )
    content = [n for n in names if n not in executables]
    base = content[0].replace("\\", "/").rsplit("/", 1)[-1]
    name = release_name(None, [(base, 1)])
    if looks_obfuscated(file_stem(base)):
        if yenc_name is None:
            return Examined(
                Verdict.NO_NAMES, files=names, detail=f"{listing.kind}: obfuscated inside"
            )
        name = release_name(None, [(yenc_name, 1)])
    return _named(name, names, release, f"{listing.kind}: {len(names)} files inside")


def _named(
    name: str, files: tuple[str, ...], release: str, how: str, sizes: tuple[int, ...] = ()
) -> Examined:
    if _words(name) == _words(release):
        return Examined(Verdict.ALREADY_NAMED, name, files, sizes, f"{how}: the release's own name")
    return Examined(Verdict.RENAMED, name, files, sizes, how)


def _words(name: str) -> str:
    return " ".join(_SEPARATORS.split(name.lower())).strip()
