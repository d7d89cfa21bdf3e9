"""Ground truth of generated overview data, and the scorer that grades an index against it.

Theory of operation
-------------------
The generator (`usenet_indexer.synth.generator`) knows, for every article it
writes, which upload ("truth release"), which file of it and which segment
`k` the article is, or which kind of junk it is. `Truth` holds that
knowledge; `score()` compares it with what an indexer made of the same lines
(the releases `uidx index --include-dropped` writes, one JSON object each).

Everything is matched by message-id, the one thing an indexer cannot get
wrong without losing the segment. An output file is said to *be* the truth
file that holds most of its segments (its majority file); an output release
is where most of a truth file's or a truth release's segments landed. A
repost is a separate truth release whose `repost_of` names the original: an
indexer that merges the two has found the same release twice, which is
counted apart (`reposts_merged`) and is not a wrong merge. For that reason
files are compared by their *root* release (the original of a repost).

`perfect_releases(truth)` builds the output a flawless indexer would write;
it scores 1.0 or 0 on every figure (and keeps every repost apart), which is
the scorer's own control.

`grouping_score()` is the stricter grading of issue 15 ("one upload, one
release"): every upload is a target of its own, reposts included, nothing is
compared by root, and a release is found one-to-one only when one output
release holds all its posted segments and nothing else. Its figures carry
their goals (`GROUPING_GOALS`), and `by_pattern` says, per recipe of the
generator's posting-tools profile (or per corpus NZB), which uploads are
split, merged or lost. `score()` keeps its figures and their values.

The scorer holds the truth as tables of plain ints (`_Tables`) and counts
where segments landed in one pass (`_votes`), so that a run of millions of
articles scores in seconds.

This module does no I/O of its own: `Truth.dump` and `Truth.load` take file
objects opened by the caller.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, NamedTuple, Protocol, cast

import attrs
import orjson

from usenet_indexer.errors import InputError

__all__ = [
    "ALL_KINDS",
    "GROUPING_GOALS",
    "JUNK_KINDS",
    "KINDS",
    "MALFORMED_KINDS",
    "TARGET_KINDS",
    "UNATTRIBUTABLE",
    "BinaryWriter",
    "Counts",
    "GroupingScore",
    "Kind",
    "Score",
    "Truth",
    "TruthFile",
    "TruthJunk",
    "TruthRelease",
    "TruthSegment",
    "grouping_score",
    "perfect_releases",
    "score",
]

Kind = Literal["legit", "obfuscated", "exe_flood", "repost", "wrapped_flood"]
# The kinds of the default profile (always listed in Counts.truth_releases).
KINDS: tuple[Kind, ...] = ("legit", "obfuscated", "exe_flood", "repost")
# Every kind: the posting-tools profile adds spam that wraps its executable
# in an archive (`wrapped_flood`): no rule can see inside it, so neither
# exe_dropped nor legit_dropped counts it, but merging it is a wrong merge.
ALL_KINDS: tuple[Kind, ...] = (*KINDS, "wrapped_flood")
# The uploads a catalog should hold, each as one release (the grouping figures).
TARGET_KINDS = frozenset({"legit", "obfuscated", "repost"})

# Junk lines whose overview fields are broken (an indexer must skip them).
MALFORMED_KINDS = ("too_few_fields", "bad_number", "bad_bytes", "nul_subject", "bad_utf8")
# Junk the indexer is right to index: a subject that is not UTF-8 is read as
# Latin-1 (issue 2: "decode UTF-8 with a Latin-1 fallback, as real headers
# need"), so a bad_utf8 line with a segment counter lands in a release. It
# still shows in counts.junk_in_releases.
INDEXABLE_JUNK = frozenset({"bad_utf8"})
# Articles of an upload whose subject and From are random for every article
# (ngPost --obfuscate, NewsUP --obfuscate): nothing in the headers ties them to
# an upload, so the truth counts them as junk of their own kind.
UNATTRIBUTABLE = "unattributable"
# Every junk kind: well-formed lines that are no binary segment, then the malformed ones.
JUNK_KINDS = ("text", "reply", "spam", "forged_counter", *MALFORMED_KINDS, UNATTRIBUTABLE)

# Version of the JSON lines format written by Truth.dump; load refuses others.
TRUTH_FORMAT = 1

# The rule name perfect_releases gives dropped executable floods.
EXECUTABLE_RULE = "executable"


class BinaryWriter(Protocol):
    """Anything with `write(bytes)`: an open file, a gzip stream, a BytesIO."""

    def write(self, data: bytes, /) -> object: ...


# One posted article of a release file: (k, message_id, bytes, article).
#
# A plain tuple, not a NamedTuple or attrs class: a run holds one per
# article (millions), and CPython's collector stops tracking exact tuples of
# atomic values, but never tuple subclasses, which it then rescans on every
# full collection (that tripled the generator's run time).
TruthSegment = tuple[int, str, int, int]


@attrs.frozen
class TruthFile:
    """One file of a truth release, with the segments actually posted.

    Attributes:
        index: position in posting order, the `i` of the `[i/M]` file counter
            (0 for an .nzb file, which posting tools number 0).
        name: the file name as quoted in the subject.
        subject: the subject of its segment 1 (`(1/N)`), posted or not.
        total_segments: the `N` of the `(k/N)` counter.
        segments: the posted articles, in article order; may lack some `k`
            (never posted) or hold one `k` twice (a duplicate post).
    """

    index: int
    name: str
    subject: str
    total_segments: int
    segments: tuple[TruthSegment, ...]


@attrs.frozen
class TruthRelease:
    """One upload, as its poster meant it.

    Attributes:
        id: unique within a Truth (not contiguous: uploads of which no
            article was written are left out).
        kind: legit, obfuscated, exe_flood or repost.
        name: the release name an indexer should find in the overview data
            (for an obfuscated upload: its random base name).
        real_name: the name behind an obfuscated upload (what a probe of its
            par2 or nfo would recover); the same as `name` otherwise.
        poster: the From field.
        groups: every group it was posted to (the Xref field lists them).
        tool: the posting tool whose subject and message-id style it uses.
        posted: unix time of its first written article.
        files_announced: the `M` of `[i/M]`, None when subjects carry none.
        obfuscated: its names are random.
        probe_candidate: obfuscated and carries a par2 or nfo, so that a
            probe of that file's body would tell the real names.
        repost_of: for a repost, the id of the original release.
        truncated: the written articles start or stop inside it (the run
            began or ended while it was being posted).
        files: the files of which at least one article was written.
        pattern: the posting-tools profile's recipe that made it ("" in the
            default profile): what kind of real-world upload it imitates.
        headerless: its subjects carry no file name nor counter (a random
            subject per article): only a probe of the bodies can tell its
            files and segment numbers, so the file and segment figures leave
            it out.
    """

    id: int
    kind: Kind
    name: str
    real_name: str
    poster: str
    groups: tuple[str, ...]
    tool: str
    posted: int
    files_announced: int | None
    obfuscated: bool
    probe_candidate: bool
    repost_of: int | None
    truncated: bool
    files: tuple[TruthFile, ...]
    pattern: str = ""
    headerless: bool = False

    @property
    def root(self) -> int:
        """The original release: `repost_of` for a repost, its own id otherwise."""
        return self.id if self.repost_of is None else self.repost_of

    @property
    def segment_count(self) -> int:
        """Articles written for it (duplicates included)."""
        return sum(len(file.segments) for file in self.files)

    @property
    def first_article(self) -> int:
        """The lowest article number of its articles."""
        return min(file.segments[0][3] for file in self.files)

    @property
    def last_article(self) -> int:
        """The highest article number of its articles."""
        return max(file.segments[-1][3] for file in self.files)

    @property
    def complete(self) -> float:
        """Distinct segments written / segments announced, over the files written."""
        seen = sum(len({k for k, _mid, _size, _article in file.segments}) for file in self.files)
        announced = sum(file.total_segments for file in self.files)
        return seen / announced if announced else 0.0


@attrs.frozen
class TruthJunk:
    """An article that belongs to no release (text, reply, spam, forged or malformed)."""

    message_id: str
    kind: str
    article: int


@attrs.frozen
class Truth:
    """What a generated run of overview lines really contains.

    Attributes:
        group: the group the lines were generated for.
        seed: the generator's seed.
        first_article: the lowest article number written (a malformed line
            may show another number, or none).
        last_article: the highest article number written.
        lines: how many lines were written.
        releases: every upload of which at least one article was written.
        junk: every article that belongs to no release.
    """

    group: str
    seed: int
    first_article: int
    last_article: int
    lines: int
    releases: tuple[TruthRelease, ...]
    junk: tuple[TruthJunk, ...]

    def segment_index(self) -> dict[str, tuple[TruthRelease, TruthFile, int]]:
        """Every release article by message-id.

        Returns:
            message-id (without <>) -> (release, file, k).
        """
        index: dict[str, tuple[TruthRelease, TruthFile, int]] = {}
        for release in self.releases:
            for file in release.files:
                for k, mid, _size, _article in file.segments:
                    index[mid] = (release, file, k)
        return index

    def junk_index(self) -> dict[str, str]:
        """Every junk article by message-id.

        Returns:
            message-id (without <>) -> junk kind.
        """
        return {junk.message_id: junk.kind for junk in self.junk}

    def dump(self, fp: BinaryWriter) -> None:
        """Write the truth as JSON lines (see `load` for the format).

        Args:
            fp: a binary file object open for writing (gzip or plain).
        """
        header = {
            "type": "truth",
            "format": TRUTH_FORMAT,
            "group": self.group,
            "seed": self.seed,
            "first_article": self.first_article,
            "last_article": self.last_article,
            "lines": self.lines,
        }
        fp.write(orjson.dumps(header) + b"\n")
        for release in self.releases:
            fp.write(orjson.dumps(_release_to_json(release)) + b"\n")
        for junk in self.junk:
            record = {
                "type": "junk",
                "message_id": junk.message_id,
                "kind": junk.kind,
                "article": junk.article,
            }
            fp.write(orjson.dumps(record) + b"\n")

    @classmethod
    def load(cls, fp: Iterable[bytes]) -> Truth:
        """Read a truth written by `dump`.

        The format is JSON lines: first `{"type": "truth", "format": 1, group,
        seed, first_article, last_article, lines}`, then one `{"type":
        "release", ...}` per release with its files and their segments as
        `[k, message_id, bytes, article]` arrays, then one `{"type": "junk",
        message_id, kind, article}` per junk article.

        Args:
            fp: a binary file object open for reading (gzip or plain), or any
                iterable of its lines.

        Returns:
            The truth.

        Raises:
            InputError: the data is not a truth of this format.
        """
        lines = iter(fp)
        try:
            header = orjson.loads(next(lines))
            if header.get("type") != "truth" or header.get("format") != TRUTH_FORMAT:
                raise InputError(f"not a truth file of format {TRUTH_FORMAT}")
            releases, junk = _load_records(lines)
            return cls(
                group=header["group"],
                seed=header["seed"],
                first_article=header["first_article"],
                last_article=header["last_article"],
                lines=header["lines"],
                releases=tuple(releases),
                junk=tuple(junk),
            )
        except StopIteration:
            raise InputError("empty truth file") from None
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as error:
            raise InputError(f"malformed truth file: {error!r}") from error


# Fields left out of a release record when they hold their default, so that
# the default profile's truth files stay as they were.
_OPTIONAL_FIELDS = {"pattern": "", "headerless": False}


def _release_to_json(release: TruthRelease) -> dict[str, Any]:
    record = attrs.asdict(release, recurse=False)
    for field, default in _OPTIONAL_FIELDS.items():
        if record[field] == default:
            del record[field]
    record["type"] = "release"
    record["groups"] = list(release.groups)
    record["files"] = [
        {
            "index": file.index,
            "name": file.name,
            "subject": file.subject,
            "total_segments": file.total_segments,
            "segments": file.segments,  # tuples of tuples: orjson writes them as arrays
        }
        for file in release.files
    ]
    return record


def _load_records(lines: Iterator[bytes]) -> tuple[list[TruthRelease], list[TruthJunk]]:
    releases: list[TruthRelease] = []
    junk: list[TruthJunk] = []
    for line in lines:
        record = orjson.loads(line)
        if record["type"] == "release":
            releases.append(_release_from_json(record))
        elif record["type"] == "junk":
            junk.append(
                TruthJunk(
                    message_id=record["message_id"], kind=record["kind"], article=record["article"]
                )
            )
        else:
            raise InputError(f"unknown truth record type {record['type']!r}")
    return releases, junk


def _release_from_json(record: dict[str, Any]) -> TruthRelease:
    if record["kind"] not in ALL_KINDS:
        raise InputError(f"unknown release kind {record['kind']!r}")
    files = tuple(
        TruthFile(
            index=file["index"],
            name=file["name"],
            subject=file["subject"],
            total_segments=file["total_segments"],
            segments=tuple(
                (int(k), str(mid), int(size), int(article))
                for k, mid, size, article in file["segments"]
            ),
        )
        for file in record["files"]
    )
    return TruthRelease(
        id=record["id"],
        kind=cast(Kind, record["kind"]),
        name=record["name"],
        real_name=record["real_name"],
        poster=record["poster"],
        groups=tuple(record["groups"]),
        tool=record["tool"],
        posted=record["posted"],
        files_announced=record["files_announced"],
        obfuscated=record["obfuscated"],
        probe_candidate=record["probe_candidate"],
        repost_of=record["repost_of"],
        truncated=record["truncated"],
        files=files,
        pattern=record.get("pattern", ""),
        headerless=record.get("headerless", False),
    )


def perfect_releases(truth: Truth) -> list[dict[str, Any]]:
    """The output a flawless indexer would write for the truth's lines.

    Every truth release becomes one output release (reposts stay apart),
    executable floods are marked dropped by the "executable" rule, and
    obfuscated releases with a par2 or nfo are probe candidates. Duplicate
    articles of a segment are all listed.

    Args:
        truth: the generated truth.

    Returns:
        Releases in the schema of `uidx index --include-dropped`.
    """
    return [_perfect_release(release) for release in truth.releases]


def _perfect_release(release: TruthRelease) -> dict[str, Any]:
    files = [
        {
            "name": file.name,
            "subject": file.subject,
            "total_segments": file.total_segments,
            "segments": [[k, mid, size] for k, mid, size, _article in file.segments],
        }
        for file in release.files
    ]
    return {
        "name": release.name,
        "poster": release.poster,
        "groups": list(release.groups),
        "posted": release.posted,
        "files_announced": release.files_announced,
        "complete": release.complete,
        "bytes": sum(segment[2] for file in release.files for segment in file.segments),
        "probe_candidate": release.probe_candidate,
        "dropped": EXECUTABLE_RULE if release.kind == "exe_flood" else None,
        "files": files,
    }


@attrs.frozen
class Counts:
    """Sizes of both sides, for context.

    Attributes:
        truth_releases: truth releases by kind.
        truth_segments: articles of truth releases (duplicates included).
        junk_articles: junk articles in the truth.
        junk_in_releases: junk articles found in output releases, by junk kind.
        output_releases: releases in the output.
        output_dropped: output releases that a rule dropped.
        dropped_by_rule: output releases dropped, by rule name.
        output_segments: segment entries in the output.
        unknown_segments: output segments whose message-id the truth does not
            know (an indexer that invents or mangles message-ids).
        duplicated_segments: output segment entries whose message-id was
            already listed elsewhere in the output (only the first counts).
    """

    truth_releases: Mapping[str, int]
    truth_segments: int
    junk_articles: int
    junk_in_releases: Mapping[str, int]
    output_releases: int
    output_dropped: int
    dropped_by_rule: Mapping[str, int]
    output_segments: int
    unknown_segments: int
    duplicated_segments: int


@attrs.frozen
class Score:
    """How close an index comes to the truth; the targets are 1.0 or 0.

    A fraction over an empty set takes its target value (nothing to get wrong).
    "Present" means at least one of the item's articles is in the output.

    Attributes:
        segments_right_file: truth segments present in the output that sit in
            an output file whose majority truth file (by root release) is
            their own, under their own `k`; divided by truth segments present.
            Target 1.0.
        segments_missing: segments `(release, file, k)` of legit and
            obfuscated releases none of whose articles is in the output
            (reposts are left out: an indexer may keep one copy of a merged
            repost). Target 0.
        files_split: truth files whose present segments are spread over two
            or more output files. Target 0.
        files_right_release: truth files present whose output release (the
            one holding most of their segments) is the output release holding
            most of their truth release's segments and holds no file (by
            majority) of another root release; divided by truth files present.
            Target 1.0.
        wrongly_merged: output releases holding files (by majority) of two or
            more root releases, divided by output releases. Target 0.
        reposts_merged: reposts whose output release is their original's, or
            that are absent while their original is present (an indexer that
            keeps one article per segment drops a repost's articles as
            repeats). Informational: not a wrong merge.
        reposts_apart: reposts in an output release of their own. Informational.
        exe_dropped: executable-flood releases that are absent from the output
            or whose output release (holding most of their segments) is
            dropped, divided by executable-flood releases. Target 1.0.
        legit_dropped: legit and obfuscated releases absent or dropped,
            divided by legit and obfuscated releases. Target 0.
        obfuscated_flagged: probe-candidate obfuscated releases whose output
            release is a probe candidate, divided by those releases. Target 1.0.
        legit_flagged: legit releases whose output release is a probe
            candidate (needless probes), divided by legit releases. Target 0.
        names_right: present legit releases whose output release name contains
            the truth name once both are case-folded and stripped to letters
            and digits, divided by present legit releases. Target 1.0.
        junk_as_release: junk articles (text, replies, spam, forged counters,
            malformed lines; not INDEXABLE_JUNK) found in an output release.
            Target 0.
        counts: sizes of both sides.
    """

    segments_right_file: float
    segments_missing: int
    files_split: int
    files_right_release: float
    wrongly_merged: float
    reposts_merged: int
    reposts_apart: int
    exe_dropped: float
    legit_dropped: float
    obfuscated_flagged: float
    legit_flagged: float
    names_right: float
    junk_as_release: int
    counts: Counts

    def as_dict(self) -> dict[str, Any]:
        """The score as plain JSON-ready values (nested dicts, ints, floats)."""
        return attrs.asdict(self, value_serializer=_plain)


def _plain(_instance: object, _field: object, value: object) -> object:
    # Mappings held as read-only views become plain dicts for JSON.
    if isinstance(value, Mapping):
        return dict(value)
    return value


# What the scorer keeps of an output release: name, dropped rule (or None), probe candidate.
_OutRelease = tuple[str, str | None, bool]
# Truth segments are coded as one int, `file number << 32 | k`: a table of a
# million plain ints costs the collector nothing, a million tuples do.
_K_BITS = 32
_K_MASK = (1 << _K_BITS) - 1


class _Tables(NamedTuple):
    """The truth as numbered tables. Releases are numbered by their place in
    `truth.releases`, files by their place in the walk of all releases' files."""

    releases: tuple[TruthRelease, ...]
    release_root: list[int]  # release number -> number of its root release
    file_release: list[int]  # file number -> release number
    file_root: list[int]  # file number -> the same file of the root release (itself if none)
    segments: dict[str, int]  # message-id -> file number << 32 | k
    junk: dict[str, str]  # message-id -> junk kind


def _tables(truth: Truth) -> _Tables:
    number_of = {release.id: number for number, release in enumerate(truth.releases)}
    release_root: list[int] = []
    file_release: list[int] = []
    file_root: list[int] = []
    root_files: dict[tuple[int, int], int] = {}
    segments: dict[str, int] = {}
    for number, release in enumerate(truth.releases):
        root = number_of.get(release.root, number)
        release_root.append(root)
        for file in release.files:
            file_number = len(file_release)
            file_release.append(number)
            # Originals come before their reposts, so the original's file is registered first.
            file_root.append(root_files.setdefault((root, file.index), file_number))
            for k, mid, _size, _article in file.segments:
                segments[mid] = file_number << _K_BITS | k
    return _Tables(
        truth.releases, release_root, file_release, file_root, segments, truth.junk_index()
    )


class _Output(NamedTuple):
    """What the scorer keeps of the output. Output releases and files are
    numbered in the order they come, files across all releases."""

    releases: list[_OutRelease]
    file_release: list[int]  # output file number -> output release number
    placed: dict[str, int]  # message-id of a truth segment -> output file number
    wrong_k: set[str]  # truth segments listed under another k than theirs
    junk: Counter[str]  # junk articles found in releases, by kind
    segments: int
    unknown: int
    duplicated: int
    junk_releases: set[int]  # output releases holding junk (not INDEXABLE_JUNK)


class _Votes(NamedTuple):
    """Where truth files landed, as majority votes of their segments."""

    majority: dict[int, int]  # output file -> root truth file holding most of its segments
    file_homes: dict[int, dict[int, int]]  # truth file -> output release -> segments
    file_out_files: Counter[int]  # truth file -> output files holding its segments
    release_home: dict[int, int]  # truth release -> output release holding most of its segments
    out_roots: dict[int, set[int]]  # output release -> root releases of its files (by majority)
    right: int  # truth segments in an output file whose majority is their own file


def score(releases: Iterable[Mapping[str, Any]], truth: Truth) -> Score:
    """Grade an indexer's releases against the truth of the lines it indexed.

    Args:
        releases: the indexer's output, in the schema of `uidx index
            --include-dropped` (name, poster, groups, posted, files_announced,
            complete, bytes, probe_candidate, dropped, files with name,
            subject, total_segments and segments `[k, message_id, bytes]`).
        truth: the truth of the lines indexed.

    Returns:
        The score; see `Score` for what each figure means.

    Raises:
        InputError: a release does not have the expected shape.
    """
    tables = _tables(truth)
    output = _read_output(releases, tables)
    votes = _votes(tables, output)
    home = votes.release_home
    reposts = _reposts(tables, home)
    return Score(
        segments_right_file=_ratio(votes.right, len(output.placed), 1.0),
        segments_missing=_segments_missing(truth, output),
        files_split=sum(1 for count in votes.file_out_files.values() if count > 1),
        files_right_release=_files_right_release(tables, votes),
        wrongly_merged=_ratio(
            sum(len(roots) > 1 for roots in votes.out_roots.values()), len(output.releases), 0.0
        ),
        reposts_merged=reposts[0],
        reposts_apart=reposts[1],
        exe_dropped=_share(tables, home, output, ("exe_flood",), _is_dropped, 1.0),
        legit_dropped=_share(tables, home, output, ("legit", "obfuscated"), _is_dropped, 0.0),
        obfuscated_flagged=_share(
            tables, home, output, ("obfuscated",), _is_flagged, 1.0, probe_only=True
        ),
        legit_flagged=_share(tables, home, output, ("legit",), _is_flagged, 0.0),
        names_right=_names_right(tables, home, output),
        junk_as_release=sum(n for kind, n in output.junk.items() if kind not in INDEXABLE_JUNK),
        counts=_counts(truth, output),
    )


def _read_output(releases: Iterable[Mapping[str, Any]], tables: _Tables) -> _Output:
    out = _Output([], [], {}, set(), Counter(), 0, 0, 0, set())
    listed: set[str] = set()
    unknown = duplicated = 0
    segments, junk, placed = tables.segments, tables.junk, out.placed
    for number, release in enumerate(releases):
        try:
            out.releases.append(
                (str(release["name"]), release["dropped"], bool(release["probe_candidate"]))
            )
            for file in release["files"]:
                file_number = len(out.file_release)
                out.file_release.append(number)
                for k, mid, _size in file["segments"]:
                    if mid in listed:
                        duplicated += 1
                        continue
                    listed.add(mid)
                    code = segments.get(mid)
                    if code is not None:
                        placed[mid] = file_number
                        if k != code & _K_MASK:
                            out.wrong_k.add(mid)
                    elif mid in junk:
                        out.junk[junk[mid]] += 1
                        if junk[mid] not in INDEXABLE_JUNK:
                            out.junk_releases.add(number)
                    else:
                        unknown += 1
        except (KeyError, TypeError, ValueError) as error:
            raise InputError(f"output release {number}: unexpected shape ({error!r})") from error
    return out._replace(segments=len(listed) + duplicated, unknown=unknown, duplicated=duplicated)


def _votes(tables: _Tables, output: _Output) -> _Votes:
    segments, out_files = tables.segments, len(output.file_release) or 1
    # One count per (truth file, output file) pair, counted in C.
    pairs = Counter(
        (segments[mid] >> _K_BITS) * out_files + out_file for mid, out_file in output.placed.items()
    )
    # Plain dicts of counts: there is one per file, and a Counter costs ~10x a dict to make.
    by_out_file: dict[int, dict[int, int]] = defaultdict(dict)
    file_homes: dict[int, dict[int, int]] = defaultdict(dict)
    release_votes: dict[int, dict[int, int]] = defaultdict(dict)
    for pair, count in pairs.items():
        file_number, out_file = divmod(pair, out_files)
        out_release, release = output.file_release[out_file], tables.file_release[file_number]
        _add(by_out_file[out_file], tables.file_root[file_number], count)
        _add(file_homes[file_number], out_release, count)
        _add(release_votes[release], out_release, count)
    majority = {out_file: _most(votes) for out_file, votes in by_out_file.items()}
    out_roots: dict[int, set[int]] = defaultdict(set)
    for out_file, root_file in majority.items():
        out_roots[output.file_release[out_file]].add(
            tables.release_root[tables.file_release[root_file]]
        )
    right = sum(votes[majority[out_file]] for out_file, votes in by_out_file.items())
    # Segments in the right file but under a wrong k are not right.
    right -= sum(
        1
        for mid in output.wrong_k
        if majority[output.placed[mid]] == tables.file_root[segments[mid] >> _K_BITS]
    )
    file_out_files = Counter(pair // out_files for pair in pairs)
    home = {number: _most(votes) for number, votes in release_votes.items()}
    return _Votes(majority, file_homes, file_out_files, home, out_roots, right)


def _add(counts: dict[int, int], key: int, count: int) -> None:
    counts[key] = counts.get(key, 0) + count


def _most(counts: dict[int, int]) -> int:
    # The key with the highest count; on a tie the first counted (output order).
    return max(counts, key=counts.__getitem__)


def _ratio(part: int, whole: int, empty: float) -> float:
    return part / whole if whole else empty


def _segments_missing(truth: Truth, output: _Output) -> int:
    missing = 0
    for release in truth.releases:
        if release.kind not in ("legit", "obfuscated"):
            continue
        for file in release.files:
            # A segment posted twice is found when either of its articles is.
            found = {k for k, mid, _size, _article in file.segments if mid in output.placed}
            missing += len({segment[0] for segment in file.segments} - found)
    return missing


def _files_right_release(tables: _Tables, votes: _Votes) -> float:
    right = 0
    for file_number, homes in votes.file_homes.items():
        out_release = _most(homes)
        release = tables.file_release[file_number]
        clean = votes.out_roots[out_release] <= {tables.release_root[release]}
        right += out_release == votes.release_home[release] and clean
    return _ratio(right, len(votes.file_homes), 1.0)


def _reposts(tables: _Tables, home: Mapping[int, int]) -> tuple[int, int]:
    # (merged with their original, apart) over the reposts of the truth.
    merged = apart = 0
    for number, release in enumerate(tables.releases):
        if release.kind != "repost":
            continue
        mine, original = home.get(number), home.get(tables.release_root[number])
        if mine is None:
            merged += original is not None
        elif mine == original:
            merged += 1
        else:
            apart += 1
    return merged, apart


def _is_dropped(out: _OutRelease | None) -> bool:
    return out is None or out[1] is not None


def _is_flagged(out: _OutRelease | None) -> bool:
    return out is not None and out[2]


def _share(
    tables: _Tables,
    home: Mapping[int, int],
    output: _Output,
    kinds: tuple[str, ...],
    test: Callable[[_OutRelease | None], bool],
    empty: float,
    *,
    probe_only: bool = False,
) -> float:
    # Fraction of truth releases of these kinds whose output release (None when absent) passes test.
    chosen = [
        number
        for number, release in enumerate(tables.releases)
        if release.kind in kinds and (release.probe_candidate or not probe_only)
    ]
    hits = sum(test(_out_release(number, home, output)) for number in chosen)
    return _ratio(hits, len(chosen), empty)


def _out_release(number: int, home: Mapping[int, int], output: _Output) -> _OutRelease | None:
    out_number = home.get(number)
    return None if out_number is None else output.releases[out_number]


_NOT_ALNUM = re.compile(r"[\W_]+")


def _normal_name(name: str) -> str:
    return _NOT_ALNUM.sub("", name.casefold())


def _names_right(tables: _Tables, home: Mapping[int, int], output: _Output) -> float:
    right = present = 0
    for number, release in enumerate(tables.releases):
        out = _out_release(number, home, output)
        if release.kind != "legit" or out is None:
            continue
        present += 1
        right += _normal_name(release.name) in _normal_name(out[0])
    return _ratio(right, present, 1.0)


def _counts(truth: Truth, output: _Output) -> Counts:
    kinds = Counter(release.kind for release in truth.releases)
    dropped = Counter(rule for _name, rule, _flag in output.releases if rule is not None)
    return Counts(
        # The default kinds always, the profile's extra kinds where present.
        truth_releases={
            kind: kinds.get(kind, 0) for kind in ALL_KINDS if kind in KINDS or kinds[kind]
        },
        truth_segments=sum(release.segment_count for release in truth.releases),
        junk_articles=len(truth.junk),
        junk_in_releases={kind: output.junk[kind] for kind in JUNK_KINDS if output.junk[kind]},
        output_releases=len(output.releases),
        output_dropped=sum(dropped.values()),
        dropped_by_rule=dict(sorted(dropped.items())),
        output_segments=output.segments,
        unknown_segments=output.unknown,
        duplicated_segments=output.duplicated,
    )


# --------------------------------------------------------------------------
# The grouping figures (issue 15): one upload, one release.

# Each figure of `GroupingScore` and its goal: (">=" or "<=", bound).
GROUPING_GOALS: Mapping[str, tuple[str, float]] = {
    "one_to_one": (">=", 0.98),
    "split": ("<=", 0.02),
    "wrongly_merged": ("<=", 0.005),
    "segments_right": (">=", 0.995),
    "files_right_release": (">=", 0.98),
    "exe_dropped": (">=", 0.999),
    "legit_dropped": ("<=", 0.001),
    "probe_flagged": (">=", 0.95),
}


@attrs.frozen
class GroupingScore:
    """How far an index keeps every upload as one release of its own.

    Stricter than `Score`: every upload is its own target, a repost included
    (merging it with its original is a wrong merge here), and nothing is
    compared by root release. A truth release is *present* when one of its
    articles is in the output; its *home* is the output release holding most
    of its articles. Targets are the releases of TARGET_KINDS (legit,
    obfuscated, repost).

    Attributes:
        target_releases: target releases in the truth.
        one_to_one: targets with one output release that holds at least one
            article of each of their posted segments `(file, k)` and no
            article of another truth release nor junk; divided by targets.
            Segments the uploader never posted are not asked for; a segment
            posted twice (a post check's re-post) is found by either copy.
        split: present targets whose articles are in two or more output
            releases, divided by present targets.
        wrongly_merged: present targets with an article in an output release
            that also holds articles of another truth release (of any kind),
            divided by present targets.
        segments_right: articles of truth releases with headers
            (not `headerless`) present in the output, in an output file whose
            majority truth file is their own, under their own `k`; divided by
            those articles present.
        files_right_release: present files of targets with headers whose
            output release (holding most of the file's articles) is their
            release's home, and that home holds no file (by majority) of
            another truth release; divided by those files present.
        exe_dropped: executable floods absent or with a dropped home, divided
            by executable floods.
        legit_dropped: targets absent or with a dropped home, divided by targets.
        probe_flagged: obfuscated probe candidates whose home is a probe
            candidate, divided by obfuscated probe candidates.
        unattributable_in_releases: UNATTRIBUTABLE junk articles found in
            output releases (target 0: they carry nothing to group by).
        repost_segments_lost: posted segments of reposts none of whose
            articles is in the output (a repost dropped as repeats of its
            original loses them all).
        by_pattern: per truth pattern (the kind where there is none): its
            releases, and of them how many are one-to-one, split, wrongly
            merged, absent or dropped, and (obfuscated probe candidates) flagged.
    """

    target_releases: int
    one_to_one: float
    split: float
    wrongly_merged: float
    segments_right: float
    files_right_release: float
    exe_dropped: float
    legit_dropped: float
    probe_flagged: float
    unattributable_in_releases: int
    repost_segments_lost: int
    by_pattern: Mapping[str, Mapping[str, int]]

    def as_dict(self) -> dict[str, Any]:
        """The score as plain JSON-ready values."""
        return attrs.asdict(self, value_serializer=_plain)

    def goals(self) -> dict[str, dict[str, Any]]:
        """Each figure with a goal: its value, its goal ("<= 0.02") and whether it is met."""
        result = {}
        for figure, (sense, bound) in GROUPING_GOALS.items():
            value = getattr(self, figure)
            met = value >= bound if sense == ">=" else value <= bound
            result[figure] = {"value": round(value, 4), "goal": f"{sense} {bound}", "met": met}
        return result


class _Landing(NamedTuple):
    """Where truth releases landed in the output."""

    homes: list[dict[int, int]]  # truth release -> output release -> its articles there
    members: dict[int, set[int]]  # output release -> truth releases with an article in it
    found: list[set[int]]  # truth release -> its segment codes present (file << 32 | k)
    file_outs: dict[int, dict[int, int]]  # truth file -> output release -> its articles there
    out_file_votes: dict[int, dict[int, int]]  # output file -> truth file -> articles


def grouping_score(releases: Iterable[Mapping[str, Any]], truth: Truth) -> GroupingScore:
    """Grade an index on the figures of issue 15: is every upload one release of its own?

    Args:
        releases: the indexer's output, as for `score` (`uidx index
            --include-dropped`).
        truth: the truth of the lines indexed.

    Returns:
        The figures; see `GroupingScore`.

    Raises:
        InputError: a release does not have the expected shape.
    """
    tables = _tables(truth)
    output = _read_output(releases, tables)
    landing = _landing(tables, output)
    rels = tables.releases
    targets = [n for n, release in enumerate(rels) if release.kind in TARGET_KINDS]
    present = [n for n in targets if landing.homes[n]]
    distinct = [len(_codes(release, tables)) for release in rels]
    # Over every release (by_pattern shows floods too); the figures take the targets'.
    every = range(len(rels))
    one = {n for n in every if _one_to_one(n, landing, output, distinct[n])}
    split = {n for n in every if len(landing.homes[n]) > 1}
    merged = {n for n in every if any(len(landing.members[o]) > 1 for o in landing.homes[n])}
    dropped = {n for n in every if _is_dropped(_home_release(n, landing, output))}
    candidates = [n for n in targets if rels[n].kind == "obfuscated" and rels[n].probe_candidate]
    flagged = {n for n in candidates if _is_flagged(_home_release(n, landing, output))}
    floods = [n for n, release in enumerate(rels) if release.kind == "exe_flood"]
    return GroupingScore(
        target_releases=len(targets),
        one_to_one=_ratio(sum(n in one for n in targets), len(targets), 1.0),
        split=_ratio(sum(n in split for n in present), len(present), 0.0),
        wrongly_merged=_ratio(sum(n in merged for n in present), len(present), 0.0),
        segments_right=_segments_right(tables, output, landing),
        files_right_release=_grouped_files_right(tables, output, landing),
        exe_dropped=_ratio(sum(n in dropped for n in floods), len(floods), 1.0),
        legit_dropped=_ratio(sum(n in dropped for n in targets), len(targets), 0.0),
        probe_flagged=_ratio(len(flagged), len(candidates), 1.0),
        unattributable_in_releases=output.junk[UNATTRIBUTABLE],
        repost_segments_lost=sum(
            distinct[n] - len(landing.found[n]) for n in targets if rels[n].kind == "repost"
        ),
        by_pattern=_by_pattern(rels, one, split, merged, dropped, flagged),
    )


def wrong_merges(releases: Iterable[Mapping[str, Any]], truth: Truth) -> list[dict[str, Any]]:
    """The output releases that hold articles of two or more truth releases, each with
    those truth releases (kind, pattern, poster, name, posted, articles there), the
    largest first: what `GroupingScore.wrongly_merged` counts, to be looked at.

    Raises:
        InputError: a release does not have the expected shape.
    """
    tables = _tables(truth)
    output = _read_output(releases, tables)
    landing = _landing(tables, output)
    found: list[dict[str, Any]] = []
    for out_release, members in landing.members.items():
        if len(members) < 2:
            continue
        name, dropped, _probe = output.releases[out_release]
        found.append(
            {
                "output": name,
                "dropped": dropped,
                "truth": [
                    {
                        "id": tables.releases[n].id,
                        "repost_of": tables.releases[n].repost_of,
                        "kind": tables.releases[n].kind,
                        "pattern": tables.releases[n].pattern,
                        "poster": tables.releases[n].poster,
                        "name": tables.releases[n].name,
                        "posted": tables.releases[n].posted,
                        "articles_here": landing.homes[n][out_release],
                        "articles_elsewhere": sum(landing.homes[n].values())
                        - landing.homes[n][out_release],
                    }
                    for n in sorted(members, key=lambda n: tables.releases[n].posted)
                ],
            }
        )
    found.sort(key=lambda merge: -len(merge["truth"]))
    return found


def _landing(tables: _Tables, output: _Output) -> _Landing:
    homes: list[dict[int, int]] = [{} for _ in tables.releases]
    members: dict[int, set[int]] = defaultdict(set)
    found: list[set[int]] = [set() for _ in tables.releases]
    file_outs: dict[int, dict[int, int]] = defaultdict(dict)
    out_file_votes: dict[int, dict[int, int]] = defaultdict(dict)
    segments, file_release, out_release_of = (
        tables.segments,
        tables.file_release,
        output.file_release,
    )
    for mid, out_file in output.placed.items():
        code = segments[mid]
        file_number = code >> _K_BITS
        release, out_release = file_release[file_number], out_release_of[out_file]
        _add(homes[release], out_release, 1)
        members[out_release].add(release)
        found[release].add(code)
        _add(file_outs[file_number], out_release, 1)
        _add(out_file_votes[out_file], file_number, 1)
    return _Landing(homes, members, found, file_outs, out_file_votes)


def _codes(release: TruthRelease, tables: _Tables) -> set[int]:
    # The segment codes (file << 32 | k) a truth release posted.
    return {
        tables.segments[mid] for file in release.files for _k, mid, _size, _article in file.segments
    }


def _one_to_one(number: int, landing: _Landing, output: _Output, distinct: int) -> bool:
    homes = landing.homes[number]
    if len(homes) != 1:
        return False
    (home,) = homes
    return (
        landing.members[home] == {number}
        and home not in output.junk_releases
        and len(landing.found[number]) == distinct
    )


def _home_release(number: int, landing: _Landing, output: _Output) -> _OutRelease | None:
    homes = landing.homes[number]
    return output.releases[_most(homes)] if homes else None


def _segments_right(tables: _Tables, output: _Output, landing: _Landing) -> float:
    majority = {out_file: _most(votes) for out_file, votes in landing.out_file_votes.items()}
    right = counted = 0
    for mid, out_file in output.placed.items():
        code = tables.segments[mid]
        file_number = code >> _K_BITS
        if tables.releases[tables.file_release[file_number]].headerless:
            continue
        counted += 1
        right += majority[out_file] == file_number and mid not in output.wrong_k
    return _ratio(right, counted, 1.0)


def _grouped_files_right(tables: _Tables, output: _Output, landing: _Landing) -> float:
    # Output release -> truth releases of its files, each file by its majority.
    majority_releases: dict[int, set[int]] = defaultdict(set)
    for out_file, votes in landing.out_file_votes.items():
        majority_releases[output.file_release[out_file]].add(tables.file_release[_most(votes)])
    right = counted = 0
    for file_number, outs in landing.file_outs.items():
        number = tables.file_release[file_number]
        release = tables.releases[number]
        if release.kind not in TARGET_KINDS or release.headerless:
            continue
        counted += 1
        home = _most(landing.homes[number])
        right += _most(outs) == home and majority_releases[home] <= {number}
    return _ratio(right, counted, 1.0)


def _by_pattern(
    releases: tuple[TruthRelease, ...],
    one: set[int],
    split: set[int],
    merged: set[int],
    dropped: set[int],
    flagged: set[int],
) -> dict[str, dict[str, int]]:
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for number, release in enumerate(releases):
        row = table[release.pattern or release.kind]
        row["releases"] += 1
        row["one_to_one"] += number in one
        row["split"] += number in split
        row["wrongly_merged"] += number in merged
        row["absent_or_dropped"] += number in dropped
        if release.kind == "obfuscated" and release.probe_candidate:
            row["probe_candidates"] += 1
            row["flagged"] += number in flagged
    return {pattern: dict(row) for pattern, row in sorted(table.items())}
