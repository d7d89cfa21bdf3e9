"""The batch wire format: what an edge POSTs to `ranges/{id}/batches`.

Theory of operation
-------------------
A batch travels as one msgpack document. The edge calls `encode_batch` and
sends it as it is: its bulk, the fragments, is deflated already, and gzip
over the whole document saved 3% of its bytes for 0.1 coordinator CPU-s per
1M lines. A body with `Content-Encoding: gzip` (`compress_body`; older
edges) is still read. The coordinator calls `decode_body` (size caps,
inflate) then `decode_batch` (parse and check everything), and maps the
errors below to HTTP statuses through their `http_status`.

The format is explicit and versioned (version 2), with fixed key sets
everywhere (a missing, unknown or repeated key is refused, so a version 3
needs a new "v"). A release chunk travels as its catalog fragment, packed by
the edge (packed.py, fragments.py): the coordinator checks it and stores it
as it came, and never builds one object per file or segment:

    {"v": 2, "range": uint, "epoch": uint, "group": str,
     "first": uint, "next": uint, "lines": uint,       # articles [first, next)
     "skipped": [[reason: str, count: uint], ...],
     "rule_counts": [{"rule": str, "key": str, "releases": uint,
                      "segments": uint}, ...],
     "probe_candidates": [{"release_key": bin16, "message_id": str,
                           "file_name": str}, ...],
     "releases": [{"key": bin16, "head_name": str|nil, "poster": str,
                   "groups": [str, ...], "files_announced": uint|nil,
                   "name": str (naming.release_name of the head and files),
                   "fragment": bin (fragments.pack of the chunk's files)},
                  ...]}

Only kept release chunks travel (rule counts say what was dropped). The
figures of a release's catalog row (earliest date, files, segments, bytes)
are not sent: the coordinator takes them from the fragment while it checks
it (`packed.checked_release`), so they cannot disagree with it.

What `decode_batch` refuses (a node may be broken or hostile): anything not
of the layout above, a version other than 2, bools where ints belong, ints
out of range (article numbers, counts and ids in 0..2**63-1), `next < first`,
keys that are not 16 bytes, NUL in any text (PostgreSQL text cannot hold it),
text over `BatchLimits.max_text_chars`, invalid UTF-8 (so lone surrogates:
msgpack str must be UTF-8 and PostgreSQL could not store them either; they
are refused, not repaired), a fragment that `fragments.inspect` refuses (it
does not inflate or inflates past its cap; no file or a file without
segments; repeated file keys; segment numbers not strictly ascending in
1..total_segments; message-ids that are empty, not UTF-8 or hold "<", ">",
NUL, CR, LF or TAB, as they are sent to NNTP servers and written into NZB
files; names or subjects with NUL, over the cap or not UTF-8), repeated
release, reason or (rule, key) entries, probe candidates for releases not in
the batch, more segments than overview lines, and more of anything than
`BatchLimits` allows.

Bodies: identity or a single gzip member. Concatenated gzip members (legal
in RFC 1952, never sent by our edge) and anything after the member are
refused as malformed: one member means one checksum covers the whole batch.
Inflating is incremental with an output cap, so a gzip bomb costs at most
`max_inflated_bytes` of memory and stops as soon as it passes the cap.

Errors::

    RemoteProtocolError
    └── BatchWireError            http_status
        ├── BodyTooLarge            413  body or inflated body over its cap
        ├── UnsupportedEncoding     415  Content-Encoding not identity/gzip
        └── MalformedBatch          422  the document breaks the format
            └── CorruptBody         400  truncated or corrupt gzip
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product
from operator import itemgetter
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs
import msgpack
from isal import isal_zlib

from usenet_indexer.core.batch import UNDATED, ProbeCandidate, RuleCount
from usenet_indexer.core.subject import MAX_FILES
from usenet_indexer.core.subject import MAX_FILES as MAX_FILE_INDEX
from usenet_indexer.core.subject import MAX_SEGMENTS as MAX_TOTAL_SEGMENTS
from usenet_indexer.errors import LocalProtocolError, RemoteProtocolError
from usenet_indexer.wire import fragments
from usenet_indexer.wire.fragments import ID_FORBIDDEN, BadFragment
from usenet_indexer.wire.fragments import MAX_SEGMENTS as FRAGMENT_SEGMENTS
from usenet_indexer.wire.inflate import InflateFailed, Problem, capped_inflate
from usenet_indexer.wire.packed import PackedBatch, PackedRelease, checked_release

if TYPE_CHECKING:
    from usenet_indexer.wire._fastfragments import ReleaseChecks

WIRE_VERSION: Final = 2

# The compiled twin of `_release` (wire/_fastfragments.pyx), None where it was not built.
COMPILED_CHECKS: type[ReleaseChecks] | None = fragments.compiled("_fastfragments", "ReleaseChecks")

# Article numbers, counts and ids go into PostgreSQL bigint columns.
MAX_BIGINT: Final = 2**63 - 1
MIN_BIGINT: Final = -(2**63)
# PostgreSQL's int: a batch's lines and a rule count's releases are stored as one.
MAX_INT: Final = 2**31 - 1
MIN_INT: Final = -(2**31)

# Release and file keys are 16-byte blake2b digests (see indexer._digest).
KEY_BYTES: Final = 16

# isal level 1: about as fast as inflating (~450 MB/s here) and still small;
# the bulk of a batch is message-ids, which compress well at any level.
COMPRESS_LEVEL: Final = 1

# zlib's wbits for a gzip container (16 + a 32 KiB window), nothing else:
# wbits 47 would also accept a zlib stream, which is not what the header says.
_GZIP_WBITS: Final = 31

# Characters a probe's message-id may not hold: those no message-id of a
# fragment may hold (fragments.ID_FORBIDDEN), and a line break (a probe names
# one segment). One `in` test per character is a C-level scan.
MESSAGE_ID_FORBIDDEN: Final = (*(c.decode() for c in ID_FORBIDDEN), "\n")


class BatchWireError(RemoteProtocolError):
    """A batch body the coordinator refuses; `http_status` is the answer to send."""

    http_status: ClassVar[int] = 400


class BodyTooLarge(BatchWireError):
    """The body, or what it inflates to, is over its cap."""

    http_status: ClassVar[int] = 413


class UnsupportedEncoding(BatchWireError):
    """The Content-Encoding is neither identity nor a single gzip."""

    http_status: ClassVar[int] = 415


class MalformedBatch(BatchWireError):
    """The batch breaks the wire format; the message says what and where."""

    http_status: ClassVar[int] = 422


class CorruptBody(MalformedBatch):
    """The gzip stream is truncated or corrupt (the bytes, not the batch, are bad)."""

    http_status: ClassVar[int] = 400


def _not_negative(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be 0 or more, not {value}")


@attrs.frozen
class BatchLimits:
    """How much one batch may carry; beyond it `decode_batch` refuses the batch.

    The defaults leave room for batches of 8x the default 500k articles;
    a batch is also bounded by the coordinator's `max_inflated_bytes`.
    These are caps of the codec, not settings: max_fragment_bytes and
    max_inflated_fragments are the same numbers as the max_body_bytes and
    max_inflated_bytes settings' defaults, and follow neither.

    Attributes:
        max_releases: release chunks per batch.
        max_files: file chunks per batch, over all releases.
        max_segments: segments per batch, over all files.
        max_text_chars: characters of one name, subject, poster, group, rule
            key or message-id (the longest real subject we have seen is 655).
        max_groups: groups one release is posted to (Xref).
        max_rule_counts: (rule, key) entries per batch.
        max_probe_candidates: probe candidates per batch.
        max_skipped: skip reasons per batch.
        max_fragment_bytes: bytes one release chunk's fragment may inflate to.
        max_inflated_fragments: bytes all fragments of a batch may inflate to
            (what checking a batch may cost, whatever the body's size).
    """

    max_releases: int = attrs.field(default=1_000_000, validator=_not_negative)
    max_files: int = attrs.field(default=2_000_000, validator=_not_negative)
    max_segments: int = attrs.field(default=FRAGMENT_SEGMENTS, validator=_not_negative)
    max_text_chars: int = attrs.field(default=4096, validator=_not_negative)
    max_groups: int = attrs.field(default=1024, validator=_not_negative)
    max_rule_counts: int = attrs.field(default=65_536, validator=_not_negative)
    max_probe_candidates: int = attrs.field(default=1_000_000, validator=_not_negative)
    max_skipped: int = attrs.field(default=256, validator=_not_negative)
    max_fragment_bytes: int = attrs.field(default=256 << 20, validator=_not_negative)
    max_inflated_fragments: int = attrs.field(default=2 << 30, validator=_not_negative)


DEFAULT_LIMITS: Final = BatchLimits()


@attrs.frozen
class WireBatch:
    """A decoded batch body: which lease it is for, and the batch.

    Attributes:
        range_id: the range the batch belongs to.
        epoch: the lease epoch the edge holds (the fencing token).
        batch: the batch, its kept release chunks packed.
    """

    range_id: int
    epoch: int
    batch: PackedBatch


# --- encoding ------------------------------------------------------------------


def encode_batch(batch: PackedBatch, *, range_id: int, epoch: int) -> bytes:
    """The msgpack body (uncompressed) for one batch.

    Values are not checked here beyond what msgpack needs (the batch is our
    own RangeIndexer's); the coordinator checks everything on arrival.

    Args:
        batch: the batch to send (packed.pack_batch).
        range_id: the leased range it belongs to.
        epoch: the lease's epoch.

    Returns:
        The msgpack document (version 2, see the module docstring).

    Raises:
        LocalProtocolError: a value cannot be encoded (a lone surrogate in a
            text, an int beyond 64 bits).
    """
    try:
        return msgpack.packb(_batch_to_wire(batch, range_id, epoch), use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        # UnicodeEncodeError is a ValueError: msgpack text must be UTF-8.
        raise LocalProtocolError(
            f"batch [{batch.first}, {batch.next}) of {batch.group} for range {range_id} "
            f"cannot be encoded: {exc}"
        ) from exc


def compress_body(body: bytes) -> bytes:
    """Gzip a body with isal (fast; plain zlib and gzip read the result).

    Args:
        body: the bytes to send, e.g. from `encode_batch`.

    Returns:
        One gzip member (mtime 0, so equal bodies compress to equal bytes).
    """
    return isal_zlib.compress(body, COMPRESS_LEVEL, wbits=_GZIP_WBITS)


def _batch_to_wire(batch: PackedBatch, range_id: int, epoch: int) -> dict[str, Any]:
    return {
        "v": WIRE_VERSION,
        "range": range_id,
        "epoch": epoch,
        "group": batch.group,
        "first": batch.first,
        "next": batch.next,
        "lines": batch.lines,
        "skipped": [[reason, count] for reason, count in batch.skipped],
        "rule_counts": [
            {"rule": c.rule, "key": c.key, "releases": c.releases, "segments": c.segments}
            for c in batch.rule_counts
        ],
        "probe_candidates": [
            {"release_key": p.release_key, "message_id": p.message_id, "file_name": p.file_name}
            for p in batch.probe_candidates
        ],
        "releases": [
            {
                "key": r.key,
                "head_name": r.head_name,
                "poster": r.poster,
                "groups": list(r.groups),
                "files_announced": r.files_announced,
                "name": r.name,
                "fragment": r.fragment,
            }
            for r in batch.releases
        ],
    }


# --- the body --------------------------------------------------------------------


def decode_body(
    data: bytes, *, content_encoding: str | None, max_body_bytes: int, max_inflated_bytes: int
) -> bytes:
    """The msgpack document of a request body, inflated with caps.

    Args:
        data: the request body as received.
        content_encoding: the Content-Encoding header, or None. "gzip" (any
            case, surrounding whitespace) or "x-gzip" inflates; None, "" and
            "identity" leave the body as it is.
        max_body_bytes: the largest body accepted as received.
        max_inflated_bytes: the largest body accepted after inflating (also
            applies to an identity body).

    Returns:
        The body, inflated.

    Raises:
        UnsupportedEncoding: any other encoding, or a list of encodings
            ("gzip, gzip"): one layer of gzip is all an edge sends.
        BodyTooLarge: the body or its inflated form is over its cap; a gzip
            bomb stops at `max_inflated_bytes` + 1 bytes of output.
        CorruptBody: the gzip stream is truncated, corrupt, or followed by
            anything (a second member included).
    """
    encoding = (content_encoding or "").strip().lower()
    if encoding not in {"", "identity", "gzip", "x-gzip"}:
        raise UnsupportedEncoding(
            f"Content-Encoding {content_encoding!r} is not supported (identity or gzip only)"
        )
    if len(data) > max_body_bytes:
        raise BodyTooLarge(f"the body has {len(data)} bytes, over the cap of {max_body_bytes}")
    if encoding in {"", "identity"}:
        if len(data) > max_inflated_bytes:
            raise BodyTooLarge(
                f"the body has {len(data)} bytes, over the cap of {max_inflated_bytes}"
            )
        return data
    return _gunzip(data, max_inflated_bytes)


def _gunzip(data: bytes, max_inflated_bytes: int) -> bytes:
    """Inflate one gzip member to at most max_inflated_bytes (see inflate.py)."""
    try:
        return capped_inflate(data, wbits=_GZIP_WBITS, max_bytes=max_inflated_bytes)
    except InflateFailed as failed:
        if failed.problem is Problem.TOO_LARGE:
            raise BodyTooLarge(f"the gzip body {failed.detail}") from failed
        if failed.problem is Problem.TRAILING:
            raise CorruptBody(
                f"{failed.detail} (concatenated gzip members are not accepted)"
            ) from failed
        if failed.problem is Problem.TRUNCATED:
            raise CorruptBody(f"the gzip body is truncated ({failed.detail})") from failed
        raise CorruptBody(f"the gzip body is corrupt: {failed.detail}") from failed


# --- decoding --------------------------------------------------------------------

_NONE: Final = type(None)


@attrs.frozen
class _Shape:
    """One map of the format: its keys in order and the types each value may have.

    `allowed` holds every tuple of value types a good record can have (a few,
    from the optional fields), so one set lookup checks a whole record, and
    `get` (an itemgetter) takes its values in one call: a file is decoded
    without a Python loop over its fields.
    """

    names: tuple[str, ...]
    types: tuple[tuple[type[object], ...], ...]
    allowed: frozenset[tuple[type[object], ...]]
    get: Callable[[dict[Any, Any]], tuple[Any, ...]]

    @classmethod
    def of(cls, **fields: type[object] | tuple[type[object], ...]) -> _Shape:
        types = tuple(t if isinstance(t, tuple) else (t,) for t in fields.values())
        return cls(tuple(fields), types, frozenset(product(*types)), itemgetter(*fields))

    def values(self, wire: object, where: str) -> tuple[Any, ...]:
        """The record's values in key order, after checking its keys and their types."""
        if type(wire) is not dict:
            raise MalformedBatch(f"{where}: expected a map, got {_kind(wire)}")
        try:
            values: tuple[Any, ...] | None = self.get(wire)
        except KeyError:
            values = None
        if values is None or len(values) != len(wire):
            # A key missing, or one more than the format has.
            missing = ", ".join(name for name in self.names if name not in wire)
            unknown = ", ".join(sorted(repr(key) for key in wire if key not in self.names))
            problems = [f"missing {missing}"] if missing else []
            problems += [f"unknown {unknown}"] if unknown else []
            raise MalformedBatch(f"{where}: {'; '.join(problems)}")
        if tuple(map(type, values)) not in self.allowed:
            for name, value, types in zip(self.names, values, self.types, strict=True):
                if type(value) not in types:
                    expected = " or ".join(_TYPE_NAMES[t] for t in types)
                    raise MalformedBatch(f"{where}.{name}: expected {expected}, got {_kind(value)}")
        return values


_TOP: Final = _Shape.of(
    v=int,
    range=int,
    epoch=int,
    group=str,
    first=int,
    next=int,
    lines=int,
    skipped=list,
    rule_counts=list,
    probe_candidates=list,
    releases=list,
)
_RULE_COUNT: Final = _Shape.of(rule=str, key=str, releases=int, segments=int)
_PROBE_CANDIDATE: Final = _Shape.of(release_key=bytes, message_id=str, file_name=str)
_RELEASE: Final = _Shape.of(
    key=bytes,
    head_name=(str, _NONE),
    poster=str,
    groups=list,
    files_announced=(int, _NONE),
    name=str,
    fragment=bytes,
)
# No map of the format is half as large: msgpack refuses a bigger map header
# before building anything; a few unknown keys still get a message naming them.
_MAX_MAP_LEN: Final = 2 * max(len(s.names) for s in (_TOP, _RULE_COUNT, _PROBE_CANDIDATE, _RELEASE))

# Exact types only: msgpack's true and false are bools, and bool is an int.
_TYPE_NAMES: Final = {
    dict: "a map",
    list: "an array",
    str: "a string",
    bytes: "binary",
    int: "an integer",
    bool: "a boolean",
    float: "a float",
    _NONE: "nil",
}


def decode_batch(
    body: bytes, *, limits: BatchLimits = DEFAULT_LIMITS, pure: bool = False
) -> WireBatch:
    """Parse and check a batch document from an edge.

    Args:
        body: the msgpack document (from `decode_body`).
        limits: how much a batch may carry.
        pure: check its releases with the pure code even where the compiled
            twin (`_fastfragments.ReleaseChecks`) is built: the same answer, slower.

    Returns:
        The range, epoch and batch, the batch equal to the one encoded.

    Raises:
        MalformedBatch: anything in the document breaks the format (see the
            module docstring); the message names the value, e.g.
            "releases[3].files[0].numbers: not strictly ascending at [7] (12 after 12)".
    """
    try:
        wire = msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            object_pairs_hook=_map_without_repeats,
            # The largest legal object of each kind (UTF-8 takes up to 4
            # bytes a character): a header beyond it is refused before
            # msgpack allocates for it.
            max_str_len=4 * limits.max_text_chars,
            # A fragment inflates to at most max_fragment_bytes; deflate adds
            # a few bytes per 16 KiB to data it cannot compress.
            max_bin_len=limits.max_fragment_bytes + (limits.max_fragment_bytes >> 10) + 1024,
            max_array_len=max(
                limits.max_releases,
                limits.max_files,
                limits.max_probe_candidates,
                limits.max_rule_counts,
                limits.max_groups,
                limits.max_skipped,
            ),
            max_map_len=_MAX_MAP_LEN,
            max_ext_len=0,
        )
    except MalformedBatch:
        raise
    except (ValueError, msgpack.UnpackException) as exc:
        # FormatError, StackError, ExtraData, UnicodeDecodeError (invalid
        # UTF-8, lone surrogates included), incomplete input and the limits
        # are all ValueErrors or UnpackExceptions.
        raise MalformedBatch(f"not a msgpack batch document: {exc}") from exc
    return _wire_batch(wire, limits, pure=pure)


def _map_without_repeats(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    # msgpack would keep the last of two equal keys; a repeated key is refused
    # instead, so no two readers of a body can see different values.
    found = dict(pairs)
    if len(found) != len(pairs):
        keys = [key for key, _ in pairs]
        repeated = next(key for key in keys if keys.count(key) > 1)
        raise MalformedBatch(f"a map repeats the key {repeated!r}")
    return found


def _wire_batch(wire: object, limits: BatchLimits, *, pure: bool) -> WireBatch:
    if type(wire) is dict and wire.get("v") != WIRE_VERSION:
        raise MalformedBatch(
            f"v: version {wire.get('v')!r} is not supported (only version {WIRE_VERSION})"
        )
    _, range_id, epoch, group, first, next_, lines, skipped, counts, candidates, releases = (
        _TOP.values(wire, "batch")
    )
    for name, value in (("range", range_id), ("epoch", epoch), ("first", first)):
        _check_uint(value, "", name)
    if not first <= next_ <= MAX_BIGINT:
        raise MalformedBatch(f"next: {next_} is out of range {first} (first)..{MAX_BIGINT}")
    # The batches table counts them in an int (a server that repeats a line may
    # make more lines than articles: not refused for that).
    _check_uint(lines, "", "lines", MAX_INT)
    _check_text(group, "", "group", limits)
    kept = _releases(releases, lines, next_ - first, limits, pure=pure)
    batch = PackedBatch(
        group=group,
        first=first,
        next=next_,
        releases=kept,
        rule_counts=_rule_counts(counts, limits),
        probe_candidates=_probe_candidates(candidates, {r.key for r in kept}, limits),
        lines=lines,
        skipped=_skipped(skipped, limits),
    )
    return WireBatch(range_id=range_id, epoch=epoch, batch=batch)


def _skipped(wire: list[Any], limits: BatchLimits) -> tuple[tuple[str, int], ...]:
    items = _list(wire, "skipped", limits.max_skipped)
    for i, item in enumerate(items):
        where = f"skipped[{i}]"
        if not (
            type(item) is list and len(item) == 2 and type(item[0]) is str and type(item[1]) is int
        ):
            raise MalformedBatch(f"{where}: expected [reason: string, count: integer]")
        _check_text(item[0], where, "", limits)
        _check_uint(item[1], where, "")
    pairs = tuple((reason, count) for reason, count in items)
    _check_unique([reason for reason, _ in pairs], "skipped", "reason")
    return pairs


def _rule_counts(wire: list[Any], limits: BatchLimits) -> tuple[RuleCount, ...]:
    items = _list(wire, "rule_counts", limits.max_rule_counts)
    counts = []
    for i, item in enumerate(items):
        where = f"rule_counts[{i}]"
        rule, key, releases, segments = _RULE_COUNT.values(item, where)
        _check_text(rule, where, "rule", limits)
        _check_text(key, where, "key", limits)  # '' is a key like any other
        _check_uint(releases, where, "releases", MAX_INT)
        _check_uint(segments, where, "segments")
        counts.append(RuleCount(rule=rule, key=key, releases=releases, segments=segments))
    _check_unique([(c.rule, c.key) for c in counts], "rule_counts", "(rule, key)")
    return tuple(counts)


def _probe_candidates(
    wire: list[Any], release_keys: set[bytes], limits: BatchLimits
) -> tuple[ProbeCandidate, ...]:
    items = _list(wire, "probe_candidates", limits.max_probe_candidates)
    candidates = []
    for i, item in enumerate(items):
        where = f"probe_candidates[{i}]"
        release_key, message_id, file_name = _PROBE_CANDIDATE.values(item, where)
        if release_key not in release_keys:
            # Probes make the prefetcher fetch bodies: only for releases sent here.
            raise MalformedBatch(f"{where}.release_key: not a release of this batch")
        _check_message_id(message_id, where, "message_id", limits)
        _check_text(file_name, where, "file_name", limits)
        candidates.append(ProbeCandidate(release_key, message_id, file_name))
    return tuple(candidates)


def _releases(
    wire: list[Any], lines: int, articles: int, limits: BatchLimits, *, pure: bool
) -> tuple[PackedRelease, ...]:
    items = _list(wire, "releases", limits.max_releases)
    compiled = None if pure else _compiled_checks(limits)
    releases = []
    files = segments = inflated = 0
    for i, item in enumerate(items):
        budget = min(limits.max_fragment_bytes, limits.max_inflated_fragments - inflated)
        found = None if compiled is None else compiled.check(item, budget)
        if found is None:
            # The pure checks: the oracle, and what words a refusal.
            found = _release(item, f"releases[{i}]", limits, budget)
        release, size = found
        inflated += size
        files += release.files
        if files > limits.max_files:
            raise MalformedBatch(
                f"releases[{i}]: over the cap of {limits.max_files} files per batch"
            )
        segments += release.segments
        if segments > limits.max_segments:
            raise MalformedBatch(
                f"releases[{i}]: over the cap of {limits.max_segments} segments per batch"
            )
        releases.append(release)
    if segments > lines:
        # Every segment is one overview line of the batch.
        raise MalformedBatch(f"releases: {segments} segments from only {lines} lines")
    if segments > articles:
        # And one article of its span: a line a server repeats is a segment the
        # indexer keeps once. (Batches of one article each claiming millions of
        # segments summed a release's bytes past a bigint, and made builds of
        # hundreds of CPU seconds.)
        raise MalformedBatch(
            f"releases: {segments} segments from only {articles} articles (first..next)"
        )
    _check_unique([r.key for r in releases], "releases", "key")
    return tuple(releases)


def _compiled_checks(limits: BatchLimits) -> ReleaseChecks | None:
    """The compiled twin of `_release` for one batch, or None where it was not built."""
    if COMPILED_CHECKS is None:
        return None
    return COMPILED_CHECKS(
        PackedRelease,
        fragments.decompressor(),
        limits.max_text_chars,
        limits.max_groups,
        MAX_FILES,
        fragments.MAX_FILES,
        fragments.MAX_SEGMENTS,
        MAX_TOTAL_SEGMENTS,
        MAX_FILE_INDEX,
        UNDATED,
        fragments.MAX_WINDOW,
    )


def _release(
    wire: object, where: str, limits: BatchLimits, budget: int
) -> tuple[PackedRelease, int]:
    """A release's map checked, as a PackedRelease, and the bytes its fragment inflated
    to, in pure Python: the oracle of `_fastfragments.ReleaseChecks` (which gives the
    same for any release it answers for) and the judge of every release it leaves."""
    key, head_name, poster, groups, files_announced, name, fragment = _RELEASE.values(wire, where)
    _check_key(key, where, "key")
    if head_name is not None:
        _check_text(head_name, where, "head_name", limits)
    _check_text(poster, where, "poster", limits)
    _check_text(name, where, "name", limits)
    if files_announced is not None:
        _check_uint(files_announced, where, "files_announced", MAX_FILES)
    groups = _list(groups, f"{where}.groups", limits.max_groups)
    for k, group in enumerate(groups):
        if type(group) is not str:
            raise MalformedBatch(f"{where}.groups[{k}]: expected a string, got {_kind(group)}")
        _check_text(group, where, f"groups[{k}]", limits)
        if not group or "\n" in group:
            # Newsgroup names have no line breaks (the store joins them with one).
            raise MalformedBatch(f"{where}.groups[{k}]: not a newsgroup name: {group!r}")
    _check_unique(groups, f"{where}.groups", "name")
    try:
        checked = checked_release(
            key=key,
            head_name=head_name,
            poster=poster,
            groups=tuple(groups),
            files_announced=files_announced,
            name=name,
            fragment=fragment,
            max_fragment_bytes=budget,
            max_text_chars=limits.max_text_chars,
        )
    except BadFragment as error:
        raise MalformedBatch(f"{where}.fragment: {error}") from error
    if checked[0].latest >= MAX_BIGINT:
        # The store spans a release's dates as int8range(posted, latest, '[]'),
        # which has no room past it (a 500 at every try of the range).
        raise MalformedBatch(
            f"{where}.fragment: a file dated {checked[0].latest}, the largest bigint:"
            " no date a release may have"
        )
    return checked


def _list(wire: object, where: str, cap: int) -> list[Any]:
    if type(wire) is not list:
        raise MalformedBatch(f"{where}: expected an array, got {_kind(wire)}")
    if len(wire) > cap:
        raise MalformedBatch(f"{where}: {len(wire)} items, over the cap of {cap}")
    return wire


def _kind(wire: object) -> str:
    return _TYPE_NAMES.get(type(wire), type(wire).__name__)


def _at(where: str, field: str) -> str:
    # Paths are only formatted when a check fails: the good path stays cheap.
    return f"{where}.{field}" if where and field else where or field


def _check_message_id(message_id: str, where: str, field: str, limits: BatchLimits) -> None:
    """One message-id: non-empty, at most `max_text_chars`, free of forbidden characters."""
    if not message_id:
        raise MalformedBatch(f"{_at(where, field)}: an empty message-id")
    if len(message_id) > limits.max_text_chars:
        raise MalformedBatch(
            f"{_at(where, field)}: {len(message_id)} characters, "
            f"over the cap of {limits.max_text_chars}"
        )
    for char in MESSAGE_ID_FORBIDDEN:
        if char in message_id:
            raise MalformedBatch(f"{_at(where, field)}: a message-id holds {char!r}")


def _check_uint(value: int, where: str, field: str, maximum: int = MAX_BIGINT) -> None:
    if not 0 <= value <= maximum:
        raise MalformedBatch(f"{_at(where, field)}: {value} is out of range 0..{maximum}")


def _check_key(key: bytes, where: str, field: str) -> None:
    if len(key) != KEY_BYTES:
        raise MalformedBatch(f"{_at(where, field)}: {len(key)} bytes, not {KEY_BYTES}")


def _check_text(text: str, where: str, field: str, limits: BatchLimits) -> None:
    if len(text) > limits.max_text_chars:
        raise MalformedBatch(
            f"{_at(where, field)}: {len(text)} characters, over the cap of {limits.max_text_chars}"
        )
    if "\x00" in text:
        # PostgreSQL text cannot hold NUL.
        raise MalformedBatch(f"{_at(where, field)}: holds a NUL character")


def _check_unique(items: list[Any], where: str, what: str) -> None:
    if len(set(items)) != len(items):
        seen: set[Any] = set()
        for item in items:
            if item in seen:
                raise MalformedBatch(f"{where}: two entries have the {what} {item!r}")
            seen.add(item)
