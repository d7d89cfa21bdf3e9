"""The catalog build an edge does: the job the coordinator hands out, the rows it sends back.

Both are msgpack (binary keys and fragments as they are; the release rows one
JSON text that PostgreSQL wrote: `ReleaseRows`). A job holds what a
build reads from the database (coordinator/catalog_build.py's `offer`): the
release rows and stored fragments of the keys merged again, the pending
keys among them, and what probes asked and found for them; the edge merges
them with core/catalog.py's `made`, as a coordinator does, and sends back
the rows, the keys no longer an album's and the probes to queue (`Made`).

What comes back is checked as it is decoded: a body of the wrong shape or
types is a `BuildWireError` (400), never a row half-read. Whether the rows
are the job's own (their keys among those it merged) is the coordinator's
check (`CatalogBuild.finish`), which knows the job.

Dates go as microseconds since the epoch (UTC).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TypeVar

import attrs
import msgpack

from usenet_indexer.core.batch import Said
from usenet_indexer.core.catalog import NO_SPAN, CatalogEntry, Made
from usenet_indexer.core.merge import KEYS, Pins
from usenet_indexer.core.renames import Finding
from usenet_indexer.decode.ids import NO_IDS, MediaIds
from usenet_indexer.errors import RemoteProtocolError
from usenet_indexer.wire.batchwire import KEY_BYTES, MESSAGE_ID_FORBIDDEN

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# Release row as a job holds it: key, head name, poster, groups, M.
ReleaseRow = tuple[bytes, str | None, str, tuple[str, ...], int | None]
_T = TypeVar("_T")


class BuildWireError(RemoteProtocolError):
    """A build body that is not what it should be; `http_status` is the answer to send."""

    http_status: ClassVar[int] = 400


class OtherKeys(BuildWireError):
    """A job from a coordinator that keys a release's generations (the rows' guids)
    otherwise than this uidx (merge.KEYS): another version, whose rows would be
    written under other guids."""


@attrs.frozen
class ReleaseRows:
    """A job's release rows as PostgreSQL wrote them: one JSON array of [key (hex),
    head name, poster, groups, M] arrays. The coordinator passes the text on as it
    is, no Python object a row; the edge reads it (`by_key`).

    Attributes:
        json: the text.
    """

    json: str = "[]"

    def by_key(self) -> dict[bytes, ReleaseRow]:
        """The rows by key.

        Raises:
            BuildWireError: the text is not such an array.
        """
        try:
            rows = json.loads(self.json)
            if not isinstance(rows, list):
                raise TypeError(f"a JSON {type(rows).__name__}, not an array")
            found: dict[bytes, ReleaseRow] = {}
            for hexed, head, poster, groups, announced in rows:
                key = bytes.fromhex(hexed)
                found[key] = (key, head, str(poster), tuple(map(str, groups)), announced)
            return found
        except (ValueError, TypeError) as error:
            raise BuildWireError(
                f"a job's release rows are not what they should be: {error!r}"
            ) from error


@attrs.frozen
class BuildJob:
    """A catalog build for an edge to do.

    Attributes:
        job_id: the job's id (the rows go back to it).
        releases: the release rows of the keys merged again (as JSON).
        fragments: their stored fragments (key, packed, what the chunk says of itself:
            core/batch.Said), in order of range and batch.
        pending: the keys taken as pending (their chunks changed).
        probed: the keys a batch reported a probe candidate for.
        found: what probes found, by key.
        changed: when each key's chunks last changed.
        asked: the probe candidates' message-ids asked before, by key.
        keys: how the coordinator keys a release's generations (merge.KEYS; 1: a
            coordinator from before it said, whose job an edge of this version
            gives back: their rows' guids would not be the same).
        pins: the anchors and guids of the catalog rows of the keys merged, by
            source key (merge.Pins): the guids the merge keeps.
    """

    job_id: int
    releases: ReleaseRows
    fragments: tuple[tuple[bytes, bytes, Said], ...]
    pending: tuple[bytes, ...]
    probed: tuple[bytes, ...]
    found: Mapping[bytes, tuple[Finding, ...]]
    changed: Mapping[bytes, datetime]
    asked: Mapping[bytes, frozenset[str]]
    keys: int = KEYS
    pins: Mapping[bytes, Pins] = attrs.field(factory=dict)


@attrs.frozen
class BuildResult:
    """What an edge made of a job, and what it cost it (its build thread's CPU seconds,
    and the seconds from the job's arrival to its rows' departure)."""

    made: Made
    cpu_s: float
    wall_s: float


def micros(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND


def moment(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def encode_job(job: BuildJob) -> bytes:
    """The job as one msgpack body (`job_pieces` joined)."""
    return b"".join(job_pieces(job))


def job_pieces(job: BuildJob) -> tuple[bytes, ...]:
    """The job's msgpack body in pieces, the stored fragments among them as they are.

    Joined, they are `msgpack.packb` of the job's map (a map's encoding is its header
    and its keys and values one after the other), but no piece copies a fragment:
    packing the map whole wrote every fragment into a buffer grown by realloc and
    then copied it into the body's bytes, fresh pages each time (70% of the
    coordinator's page faults over a bench-scale run, and they grew with the jobs).
    The node API sends the pieces as they are (asgi.py's `Response`).
    """
    pack = msgpack.packb
    head = b"".join(
        (
            _MAP10,
            pack("id"),
            pack(job.job_id),
            pack("releases"),
            pack(job.releases.json),
            pack("fragments"),
            _array_header(len(job.fragments)),
        )
    )
    pieces = [head]
    for key, fragment, said in job.fragments:
        said_ = None if said is None else list(said)
        pieces.append(b"".join((_TRIPLE, pack(key), pack(said_), _bin_header(len(fragment)))))
        pieces.append(fragment)
    rest = {
        "pending": list(job.pending),
        "probed": list(job.probed),
        "found": [[k, [_finding(f) for f in fs]] for k, fs in job.found.items()],
        "changed": [[k, micros(v)] for k, v in job.changed.items()],
        "asked": [[k, sorted(v)] for k, v in job.asked.items()],
        "keys": job.keys,
        "pins": [[k, [list(pin) for pin in pins]] for k, pins in job.pins.items()],
    }
    pieces.append(b"".join(pack(k) + pack(v) for k, v in rest.items()))
    return tuple(pieces)


# msgpack's headers (its spec: fixmap, fixarray, array 16/32, bin 8/16/32).
_MAP10 = b"\x8a"  # a map of the job's 10 entries
_TRIPLE = b"\x93"  # a fragment's [key, said (nil or [poster, head, M]), bytes]


def _array_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def _bin_header(n: int) -> bytes:
    if n < 1 << 8:
        return b"\xc4" + n.to_bytes(1, "big")
    if n < 1 << 16:
        return b"\xc5" + n.to_bytes(2, "big")
    return b"\xc6" + n.to_bytes(4, "big")


def decode_job(body: bytes) -> BuildJob:
    """A job as the coordinator sent it (the edge trusts its coordinator: a body of the
    wrong shape is a BuildWireError all the same; the release rows say so when read,
    `ReleaseRows.by_key`)."""
    document = _document(body)
    keys = document.get("keys", 1)
    if keys != KEYS:
        raise OtherKeys(
            f"the coordinator keys a release's generations by scheme {keys!r}, this edge"
            f" by {KEYS}: it runs another uidx version"
        )
    return _checked(
        lambda: BuildJob(
            job_id=int(document["id"]),
            releases=ReleaseRows(_str(document["releases"])),
            fragments=tuple((bytes(k), bytes(f), _unsaid(s)) for k, s, f in document["fragments"]),
            pending=tuple(bytes(k) for k in document["pending"]),
            probed=tuple(bytes(k) for k in document["probed"]),
            found={bytes(k): tuple(_unfinding(f) for f in fs) for k, fs in document["found"]},
            changed={bytes(k): moment(int(v)) for k, v in document["changed"]},
            asked={bytes(k): frozenset(map(str, v)) for k, v in document["asked"]},
            keys=KEYS,
            pins={
                bytes(k): tuple((str(anchor), bytes(guid)) for anchor, guid in pins)
                for k, pins in document["pins"]
            },
        )
    )


def encode_result(result: BuildResult) -> bytes:
    made = result.made
    return msgpack.packb(
        {
            "entries": [_entry(e) for e in made.entries],
            "no_album": list(made.no_album),
            "probes": [list(p) for p in made.probes],
            "cpu_s": float(result.cpu_s),
            "wall_s": float(result.wall_s),
        }
    )


def decode_result(body: bytes) -> BuildResult:
    """An edge's rows, checked field by field (BuildWireError: not what they should be)."""
    document = _document(body)
    # The rows' times, each made once: a build's rows mostly share a few (their
    # keys' batches').
    moments: dict[int, datetime] = {}
    return _checked(
        lambda: BuildResult(
            made=Made(
                entries=tuple(_unentry(e, moments) for e in _list(document["entries"])),
                no_album=tuple(_key(k) for k in _list(document["no_album"])),
                probes=tuple(
                    (_key(k), _message_id(m), _file_name(n))
                    for k, m, n in _list(document["probes"])
                ),
            ),
            cpu_s=_seconds(document["cpu_s"]),
            wall_s=_seconds(document["wall_s"]),
        )
    )


def _document(body: bytes) -> dict[str, Any]:
    try:
        document = msgpack.unpackb(body, strict_map_key=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as error:
        raise BuildWireError(f"not a msgpack build body: {error}") from error
    if not isinstance(document, dict):
        raise BuildWireError("a build body is a map")
    return document


def _checked(make: Callable[[], _T]) -> _T:
    try:
        return make()
    except BuildWireError:
        raise
    except (KeyError, TypeError, ValueError) as error:
        raise BuildWireError(f"a build body of the wrong shape: {error!r}") from error


def _finding(finding: Finding) -> list[object]:
    return [
        finding.name,
        list(finding.files),
        list(finding.sizes),
        finding.executable,
        finding.message_id,
        finding.slice_bytes,
        list(attrs.astuple(finding.ids)),
    ]


def _unfinding(value: list[Any]) -> Finding:
    name, files, sizes, executable, message_id, slice_bytes, ids = value
    return Finding(
        name=name,
        files=tuple(map(str, files)),
        sizes=tuple(map(int, sizes)),
        executable=bool(executable),
        message_id=message_id,
        slice_bytes=slice_bytes,
        ids=MediaIds(*ids),
    )


def _entry(entry: CatalogEntry) -> list[object]:
    return [
        entry.guid, entry.name, entry.search_name, entry.category, entry.size, entry.files,
        entry.poster, list(entry.groups), entry.posted, entry.completion, entry.season,
        entry.episode, entry.probe_candidate, list(entry.sources), micros(entry.changed_at),
        entry.state, list(attrs.astuple(entry.ids)), entry.anchor,
        *(entry.span or NO_SPAN),
    ]  # fmt: skip


# A row's span (CatalogEntry.span) goes as two fields, both nil when it has none.
_ROW_FIELDS = 20


# The types of a well-formed row's fields, as msgpack decodes them (`type`, so a
# bool is no int): completion an int or a float, season and episode nil or ints.
_ROW_SHAPES = frozenset(
    (str, str, str, int, int, int, str, list, int, completion, season, episode, bool, list,
     int, str, list, str, span, span)
    for completion in (float, int)
    for season in (int, type(None))
    for episode in (int, type(None))
    for span in (int, type(None))
)  # fmt: skip


# A row's ids when its NFO named none (most rows): NO_IDS, not a MediaIds a row.
_NO_ID_VALUES = [None] * len(attrs.fields(MediaIds))


def _unentry(value: object, moments: dict[int, datetime]) -> CatalogEntry:
    """A row (`moments`: the times made of the rows before, by microseconds)."""
    fields = _list(value)
    if len(fields) != _ROW_FIELDS:
        raise BuildWireError(f"a catalog row has {_ROW_FIELDS} fields, not {len(fields)}")
    (guid, name, search, category, size, files, poster, groups, posted, completion,
     season, episode, candidate, sources, changed_at, state, ids, anchor,
     span_low, span_high) = fields  # fmt: skip
    # A row of the right types in one look (the coordinator reads every row of
    # every job); any other goes the field-by-field way below, which names what
    # is wrong (and makes the same row of what it accepts).
    if (
        tuple(map(type, fields)) in _ROW_SHAPES
        and all(type(g) is str for g in groups)
        and all(type(k) is bytes for k in sources)
        and _plain_anchor(anchor)
        and (span_low is None) == (span_high is None)
        and (span_low is None or span_low <= span_high)
        and (
            ids == _NO_ID_VALUES
            or (len(ids) == 5 and all(v is None or type(v) is int for v in ids))
        )
    ):
        when = moments.get(changed_at)
        if when is None:
            when = moments[changed_at] = _moment(changed_at)
        return CatalogEntry(
            guid, name, search, category, size, files, poster, tuple(groups), posted,
            float(completion), season, episode, candidate, tuple(sources), when,
            state, NO_IDS if ids == _NO_ID_VALUES else MediaIds(*ids), anchor,
            None if span_low is None else (span_low, span_high),
        )  # fmt: skip
    return _checked_entry(fields)


def _checked_entry(fields: list[Any]) -> CatalogEntry:
    """A row of its fields, checked field by field (BuildWireError naming what is wrong)."""
    (guid, name, search, category, size, files, poster, groups, posted, completion,
     season, episode, candidate, sources, changed_at, state, ids, anchor,
     span_low, span_high) = fields  # fmt: skip
    id_values = _list(ids)
    if len(id_values) != 5:
        raise BuildWireError("a catalog row's ids are 5")
    span = (_optional(span_low, _int), _optional(span_high, _int))
    if (span[0] is None) != (span[1] is None):
        raise BuildWireError("a catalog row's span has both ends or none")
    if span[0] is not None and span[1] is not None and span[0] > span[1]:
        raise BuildWireError("a catalog row's span ends before it begins")
    return CatalogEntry(
        guid=_str(guid),
        name=_str(name),
        search_name=_str(search),
        category=_int(category),
        size=_int(size),
        files=_int(files),
        poster=_str(poster),
        groups=tuple(_str(g) for g in _list(groups)),
        posted=_int(posted),
        completion=_float(completion),
        season=_optional(season, _int),
        episode=_optional(episode, _int),
        probe_candidate=_bool(candidate),
        sources=tuple(_bytes(k) for k in _list(sources)),
        changed_at=_moment(_int(changed_at)),
        state=_str(state),
        ids=MediaIds(*(_optional(v, _int) for v in id_values)),
        anchor=_anchor(anchor),
        span=None if span[0] is None or span[1] is None else (span[0], span[1]),
    )


def _plain_anchor(value: object) -> bool:
    """Whether a row's anchor is a message-id, or none (""), as a merge makes it (any
    other goes the field-by-field way, `_anchor`, which refuses it by name)."""
    return type(value) is str and not any(c in value for c in MESSAGE_ID_FORBIDDEN)


def _anchor(value: object) -> str:
    """A row's anchor (PostgreSQL text, read back by the builds after): a message-id,
    or none ("")."""
    return "" if value == "" else _message_id(value, "a catalog row's anchor message-id")


def _key(value: object) -> bytes:
    key = _bytes(value)
    if len(key) != KEY_BYTES:
        raise BuildWireError(f"a release key is {KEY_BYTES} bytes, not {len(key)}")
    return key


def _seconds(value: object) -> float:
    seconds = _float(value)
    if not 0.0 <= seconds < math.inf:  # NaN too
        raise BuildWireError(f"seconds are a number from 0, not {seconds}")
    return seconds


def _message_id(value: object, what: str = "a probe's message-id") -> str:
    """A probe's message-id, as a batch's probe candidates have it (batchwire): it goes
    into an NNTP server's BODY command and into PostgreSQL text. No cap on its length:
    a stored fragment's message-ids have none, and a build of them refused would be
    asked again and again (the NNTP client refuses a command line over 512 bytes)."""
    text = _str(value)
    if not text or any(c in text for c in MESSAGE_ID_FORBIDDEN):
        raise BuildWireError(f"{what} is not one: {text[:80]!r}")
    return text


def _file_name(value: object) -> str:
    """A probe's file name (PostgreSQL text: no NUL). No cap on its length: a par2 may
    name a file in up to 64 KiB, and a build refused for it would be refused again."""
    text = _str(value)
    if "\x00" in text:
        raise BuildWireError(f"a probe's file name is not one: {text[:80]!r}")
    return text


def _moment(micros: int) -> datetime:
    try:
        return moment(micros)
    except OverflowError as error:
        raise BuildWireError(f"a time out of range: {micros} microseconds") from error


def _optional(value: object, check: Callable[[object], _T]) -> _T | None:
    return None if value is None else check(value)


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise BuildWireError(f"expected a list, got {type(value).__name__}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise BuildWireError(f"expected a string, got {type(value).__name__}")
    return value


def _bytes(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise BuildWireError(f"expected bytes, got {type(value).__name__}")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BuildWireError(f"expected an integer, got {type(value).__name__}")
    return value


def _float(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BuildWireError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise BuildWireError(f"expected true or false, got {type(value).__name__}")
    return value


def _unsaid(said: Any) -> Said:
    """What a job says a stored chunk says of itself (None: its release row's stand)."""
    if said is None:
        return None
    fields = _list(said)
    if len(fields) != 3:
        raise BuildWireError(f"a chunk says its poster, head and M: 3 fields, not {len(fields)}")
    poster, head_name, announced = fields
    return _str(poster), _optional(head_name, _str), _optional(announced, _int)
