"""The RangeIndexer: overview lines in, batches of release chunks out.

Theory of operation
-------------------
An edge feeds the overview data of a range in article order
(`add_data(data, next_article)`: every line of `data` is an article below
`next_article`, and `next_article` becomes the resume point), takes a batch
every so many articles (`take()`), and calls `finish()` at the end of the
range. No I/O and no clock: the indexer is fed and it answers.

Speed comes from doing per line only what changes per line, on bytes (a
line is decoded only when its file is kept). Every segment of a file has the
same subject except for the segment counter `(k/N)`, so the fast path

    split the line on tabs (seven times: the fields after "bytes" stay in
    one) -> rpartition the subject at its last "(" -> look the text before
    it up in a dict of open files -> append k, message-id and bytes,
    unconverted and tab-separated, to that file's one buffer

runs no regular expression, converts nothing and keeps no object per
segment (a batch's segments would be millions of small objects, scattered
over memory by the time take() reads them back). Everything else (a new
file, a reply, a line without a counter, anything malformed) goes to
`_slow_line`, which opens the file, or counts the line by reason and skips
it (the common new file's first line is checked inline).

`take()` parses each file's subject (once per subject text, all files of the
batch in one loop), groups the files into releases and runs the rules on
their names (a dropped release is only counted), then converts and checks
each kept file's segments with whole-list operations: a join and a replace
for the message-ids, one JSON parse for all sizes, and for the segment
numbers a list comparison with 1, 2, 3, ... when they came in order (most
files), else one JSON parse and a sort. A file whose only fault is repeated
segments keeps the first post of each; any other fault (forged counters,
bad message-ids or sizes) sends it to a per-segment check. Where the
extension is built, the loop, the opening of a file and the common case of
take()'s conversion run compiled (core/_fastindex.pyx), and so does the
parse of a common subject (core/_fastsubject.pyx), this code and
core/subject.py their oracles and fallbacks.

The caller guarantees the article range: lines are not checked against it
one by one (a chunk of the spool holds the articles it says it holds).

Keys: a file's key and its release's key are digests of what every batch
and edge sees the same way (poster, release basis, subject, N), so the
chunks of one release merge into one release wherever they were indexed.
"""

from __future__ import annotations

import re

# hashlib's blake2b is this one; importing hashlib also loads OpenSSL (_hashlib),
# ~2% of `uidx index`'s start-up, for hashes uidx does not use here.
try:
    from _blake2 import blake2b
except ImportError:  # _blake2 is CPython's private module: elsewhere hashlib's, the same digests
    from hashlib import blake2b
from array import array
from bisect import bisect_left
from calendar import timegm
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from itertools import islice, pairwise
from operator import itemgetter, lt
from typing import TYPE_CHECKING, NamedTuple

import attrs
import orjson

from usenet_indexer.core.batch import (
    Batch,
    FileChunk,
    ProbeCandidate,
    ReleaseChunk,
    RuleCount,
    other_m,
    representative_order,
)
from usenet_indexer.core.merge import APART_SECONDS
from usenet_indexer.core.naming import probe_file_rank, release_name
from usenet_indexer.core.reposts import (
    RUN,
    SMALL_PASS,
    WIDE,
    gap_cuts,
    pass_starts,
    pauses,
    repost_key,
    restart_cuts,
    restarts,
    resumed,
    starts_over,
    wide_gap,
)
from usenet_indexer.core.rules import DEFAULT_RULES, ExecutableRule, ReleaseView, Rule
from usenet_indexer.core.subject import (
    MAX_SEGMENTS,
    FileSubject,
    last_match,
    looks_obfuscated,
    parse_file_subject,
)

# Overview fields (RFC 3977 8.3.2): number, subject, from, date, message-id,
# references, bytes, lines, then optional fields such as Xref.
_MIN_FIELDS = 8
# A line is split this many times: fields 0-6 apart, the rest (lines, Xref,
# ...) in the last one, which is only read when a file opens.
_SPLITS = _MIN_FIELDS - 1

# Sizes are kept as uint32: no segment comes near 4 GB (they are ~0.7 MB).
_MAX_SIZE = (1 << 32) - 1
# Article numbers are kept as int64 (RFC 3977 allows 63 bits).
_MAX_ARTICLE = (1 << 63) - 1

# The longest subject or poster indexed, in bytes: the batch wire format
# takes names of up to 4096 characters (batchwire.BatchLimits.max_text_chars),
# and a character is at least a byte. Real subjects stay under 700.
MAX_HEADER_BYTES = 4096

# The longest message-id indexed, in bytes with its brackets (RFC 5536 allows
# 250): decoded as Latin-1 at worst it doubles in UTF-8 and stays well under
# the 4096 bytes the coordinator takes (fragments.inspect).
MAX_MESSAGE_ID_BYTES = 1000

# An article without a segment counter this large is a binary's (text posts
# are a few kB; yEnc articles 250-800 kB), and a poster with this many of them
# in a batch is one upload whose subjects say nothing.
HEADERLESS_MIN_BYTES = 100_000
HEADERLESS_MIN_ARTICLES = 3

# Reasons a line (or a segment) is skipped as malformed data; the other
# reasons ("reply", "text_post", "repeated_segment", "unattributable": a
# binary's article without counter whose poster posted nothing else like it)
# are articles that are not binary segments, or repeats of a segment.
MALFORMED = frozenset(
    {
        "too_few_fields",
        "bad_number",
        "bad_bytes",
        "nul_byte",
        "forged_counter",
        "bad_message_id",
        "too_long",
    }
)

_COUNTER = re.compile(rb"\((\d{1,7})/(\d{1,7})\)")

if TYPE_CHECKING:
    from usenet_indexer.core._fastindex import FileArrays, Piece

# The compiled twin of RangeIndexer._scan (core/_fastindex.pyx): data, the
# indexer's _fast dict, its _slow_line, its _open dict, the _OpenFile class and
# _LIMITS in; (lines, lines with a NUL) out.
Scan = Callable[
    [
        bytes,
        "dict[bytes, _OpenFile]",
        Callable[[list[bytes]], None],
        "dict[tuple[bytes, bytes, int], _OpenFile]",
        "type[_OpenFile]",
        tuple[int, int, int, int],
    ],
    tuple[int, int],
]
# What the compiled loop checks a new file's first segment against, as _slow_line does.
_LIMITS = (MAX_HEADER_BYTES, MAX_MESSAGE_ID_BYTES, MAX_SEGMENTS, _MAX_SIZE)


class CompiledFiles(NamedTuple):
    """take()'s compiled conversion of a release's files (core/_fastindex), the twin of
    `_OpenFile.lists`, `_file_chunks`, `reposts.pauses`, `reposts.restarts`,
    `release_pass_starts` and `_pieces` (`RangeIndexer._compiled_release` runs it)."""

    file_arrays: Callable[[bytearray, int, int], FileArrays | None]
    pass_starts: Callable[[list[FileArrays], bool, Sequence[int]], list[int]]
    sorted_articles: Callable[[list[FileArrays]], array[int]]
    file_pieces: Callable[[FileArrays, list[int]], tuple[list[Piece | None], int]]
    file_chunks: Callable[
        [
            FileArrays,
            list[int],
            type[FileChunk],
            tuple[bytes, str, str, int | None, int],
            dict[bytes, int],
            Callable[[dict[bytes, int], bytes], int],
        ],
        tuple[list[FileChunk | None], int],
    ]
    chunk_head: Callable[[_OpenFile], tuple[bytes, str, str, int | None, int]]
    released: Callable[
        [
            bytes,
            list[_OpenFile],
            list[tuple[list[FileChunk | None], _OpenFile]],
            tuple[str, ...],
            type[ReleaseChunk],
            Callable[[bytes], bytes],
        ],
        list[ReleaseChunk],
    ]


def _compiled() -> tuple[Scan | None, CompiledFiles | None]:
    """The compiled loop and file conversion, or None where the extension was not built
    (no C compiler)."""
    try:
        from usenet_indexer.core import _fastindex
    except ImportError:
        return None, None
    return _fastindex.scan, CompiledFiles(
        _fastindex.file_arrays,
        _fastindex.pass_starts,
        _fastindex.sorted_articles,
        _fastindex.file_pieces,
        _fastindex.file_chunks,
        _fastindex.chunk_head,
        _fastindex.released,
    )


COMPILED_SCAN, COMPILED_FILES = _compiled()


def _compiled_subject() -> Callable[[bytes], FileSubject | None] | None:
    """take()'s compiled parse of a new file's subject (core/_fastsubject), the twin of
    `parse_file_subject` (None where the extension was not built)."""
    try:
        from usenet_indexer.core import _fastsubject
    except ImportError:
        return None
    return _fastsubject.file_subject


COMPILED_SUBJECT = _compiled_subject()


class CompiledGrouping(NamedTuple):
    """take()'s compiled grouping and judging of a batch's files (core/_fastsubject),
    the twins of `_releases`, `rules.ExecutableRule.verdict` and `_OpenFile.count`
    summed over a release's files."""

    releases: Callable[
        [list[_OpenFile], Callable[[bytes], FileSubject]], dict[tuple[bytes, str], list[_OpenFile]]
    ]
    executable_verdict: Callable[[list[_OpenFile], frozenset[str], frozenset[str]], str | None]
    segment_count: Callable[[list[_OpenFile]], int]
    executable_judged: Callable[
        [
            dict[tuple[bytes, str], list[_OpenFile]],
            frozenset[str],
            frozenset[str],
            str,
            bool,
            dict[str, list[int]],
        ],
        list[tuple[tuple[bytes, str], list[_OpenFile], str | None]],
    ]


def _compiled_grouping() -> CompiledGrouping | None:
    """take()'s compiled grouping and executable rule, or None where the extension was
    not built."""
    try:
        from usenet_indexer.core import _fastsubject
    except ImportError:
        return None
    return CompiledGrouping(
        _fastsubject.releases,
        _fastsubject.executable_verdict,
        _fastsubject.segment_count,
        _fastsubject.executable_judged,
    )


COMPILED_GROUPING = _compiled_grouping()


def indexer_kind(pure: bool) -> str:
    """Which per-line loop a RangeIndexer built with `pure` runs, for the one status line."""
    if COMPILED_SCAN is None:
        return "pure Python (the compiled loop, core/_fastindex, is not built)"
    if pure:
        return "pure Python (pure_indexer is set)"
    return "compiled (core/_fastindex)"


@attrs.define(eq=False, slots=True)
class _OpenFile:
    """A file being gathered in the current batch; fields stay bytes until take().

    Its subject is parsed in take(), all files of the batch in one loop (a
    parse costs less there than between lines, where each would find the
    caches full of overview data); keys and the subject text are made there
    too, for kept releases only: most new files belong to executable floods
    that are dropped.
    """

    poster: bytes
    prefix: bytes  # the subject before "(k/N)"
    after: bytes  # what follows "(" + k + "/" in the subject: "N) tail"
    total: int
    # Of the first line seen:
    counter: bytes  # "k/N" of the first segment seen
    tail: bytes  # the subject after "(k/N)"
    date: bytes
    # The fields after "bytes" (lines, Xref, ...) as the line has them: read
    # (`_xref_field`) only for the files of kept releases.
    after_bytes: bytes
    # k, article number, date, message-id and bytes of each segment as the
    # lines have them, each followed by a tab (none of them holds one): one
    # growing buffer rather than five objects a segment, which a batch would
    # hold by the million and take() would read back from all over memory.
    # (Article numbers and dates tell a repost's pieces apart; reposts.py.)
    segments: bytearray
    # The subject says yEnc: a line of it with References is a segment, as
    # _segment_counter_or_reason decides (the fast path must agree).
    yenc: bool = False
    info: FileSubject = attrs.field(init=False)  # set by take()

    @property
    def first_article(self) -> int:
        """The article number of the first segment gathered."""
        start = self.segments.find(b"\t") + 1
        return int(self.segments[start : self.segments.find(b"\t", start)])

    @property
    def count(self) -> int:
        """Segments gathered."""
        return self.segments.count(b"\t") // 5

    def lists(self) -> _Texts:
        """The segments' k, article number, date, message-id and bytes texts, as five lists."""
        parts = bytes(self.segments).split(b"\t")
        return _Texts(parts[0:-1:5], parts[1::5], parts[2::5], parts[3::5], parts[4::5])

    def subject(self) -> str:
        """The subject as the file's first segment has it: (1/N), zero padded as the poster pads."""
        width = self.counter.find(b"/") if self.counter.startswith(b"0") else 1
        return f"{decode(self.prefix)}({'1'.zfill(width)}/{self.total}){decode(self.tail)}"


@attrs.define(eq=False)
class RangeIndexer:
    """Indexes the overview lines of one range of one group.

    Args:
        group: the group the range belongs to (used when a line has no Xref).
        first: the first article to index (the range's resume point).
        rules: the rules applied to each release chunk, in order.
        keep_dropped: keep dropped release chunks in batches, marked with the
            rule's name (for `uidx index --include-dropped`); else they only
            count.
        pure: run the pure-Python per-line loop (`_scan`), file conversion
            (`_file_chunks`) and subject parse (`parse_file_subject`) even
            where the compiled ones (core/_fastindex, core/_fastsubject) are
            built; the output is the same.
    """

    group: str
    first: int
    rules: Sequence[Rule] = DEFAULT_RULES
    keep_dropped: bool = False
    pure: bool = False
    finished: bool = attrs.field(init=False, default=False)
    _next: int = attrs.field(init=False)
    _batch_first: int = attrs.field(init=False)
    _lines: int = attrs.field(init=False, default=0)
    # Every open file by (prefix, poster, N); _fast holds, per prefix, the one
    # the fast path tries first (the last one that got a segment).
    _open: dict[tuple[bytes, bytes, int], _OpenFile] = attrs.field(init=False, factory=dict)
    _fast: dict[bytes, _OpenFile] = attrs.field(init=False, factory=dict)
    _skipped: Counter[str] = attrs.field(init=False, factory=Counter)
    # Parsed dates: many articles share a second, and parsing is slow.
    _dates: dict[bytes, int] = attrs.field(init=False, factory=dict)
    # Binary-sized articles without a segment counter, by poster: article,
    # subject, date, message-id and bytes of each, tab-separated.
    _headerless: dict[bytes, bytearray] = attrs.field(init=False, factory=dict)
    # Across a batch cut (`_headerless_chunks`): the posters of the batch before's
    # headerless releases, and those whose few articles it handed on to this one.
    _headerless_known: set[bytes] = attrs.field(init=False, factory=set)
    _headerless_handed: set[bytes] = attrs.field(init=False, factory=set)

    def __attrs_post_init__(self) -> None:
        self._next = self.first
        self._batch_first = self.first

    @property
    def resume_point(self) -> int:
        """The first article not fed yet."""
        return self._next

    @property
    def pending_lines(self) -> int:
        """Overview lines fed since the last batch was taken."""
        return self._lines

    @property
    def pending_articles(self) -> int:
        """Articles fed since the last batch was taken."""
        return self._next - self._batch_first

    def add_text(self, text: str, next_article: int) -> None:
        """Feed overview lines as text; see `add_data`."""
        self.add_data(text.encode("utf-8", "surrogateescape"), next_article)

    def add_data(self, data: bytes, next_article: int) -> None:
        """Feed overview lines ("\\n"-separated) of the articles below `next_article`.

        Args:
            data: overview lines, each `number\\tsubject\\tfrom\\t...`, as the
                server sent them (any encoding: names are decoded as UTF-8
                with a Latin-1 fallback when a file is opened). A "\\r"
                before "\\n" and an empty last line are fine.
            next_article: the article after the last one this data covers;
                it becomes the resume point.

        Raises:
            ValueError: `next_article` goes backwards, or the range is finished.
        """
        if self.finished:
            raise ValueError("add_data after finish()")
        if next_article < self._next:
            raise ValueError(f"next_article {next_article} is below the resume point {self._next}")
        if b"\r" in data:
            data = data.replace(b"\r", b"")
        if COMPILED_SCAN is not None and not self.pure:
            lines, nul = COMPILED_SCAN(
                data, self._fast, self._slow_line, self._open, _OpenFile, _LIMITS
            )
        else:
            lines, nul = self._scan(data)
        if nul:
            self._skipped["nul_byte"] += nul
        self._lines += lines
        self._next = next_article

    def _scan(self, data: bytes) -> tuple[int, int]:
        """The lines of `data` to their files: the pure-Python loop, the oracle of
        `_fastindex.scan` (its compiled twin, which must do exactly this).

        Returns:
            (lines, nul): the lines read (not the empty ones), and of those the
            lines with a NUL byte (skipped).
        """
        lines = data.split(b"\n")
        # Lines with a NUL are blanked before the loop (they are rare, and the
        # loop would split each; blanking copies no data): counted as read and
        # as malformed, not as the empty lines the loop skips.
        nul = _blank_nul_lines(data, lines) if b"\x00" in data else 0
        fast = self._fast
        slow = self._slow_line
        empty = 0
        for line in lines:
            # Seven splits: the fields up to bytes, and the rest (lines, Xref) in one.
            fields = line.split(b"\t", _SPLITS)
            try:
                prefix, _, rest = fields[1].rpartition(b"(")
                k, _, after = rest.partition(b"/")
                open_file = fast.get(prefix)
                if (
                    open_file is not None
                    and open_file.poster == fields[2]
                    and open_file.after == after
                    and (not fields[5] or open_file.yenc)
                    and fields[0].isdigit()
                ):
                    open_file.segments += b"\t".join(
                        (k, fields[0], fields[3], fields[4], fields[6], b"")
                    )
                    continue
            except IndexError:
                pass
            if line:
                slow(fields)
            else:
                empty += 1
        return len(lines) - empty + nul, nul

    def _slow_line(self, fields: list[bytes]) -> None:
        """A line the fast path did not take: a new file, or one to count and skip.

        It sets in `_fast` at most the line's own prefix (the subject before
        its last "("): the compiled loop's file cache lets that one slot go.
        """
        # The common case first, checked inline: the first segment of a new
        # file, with a plain "(k/N)" as the subject's last "(" (the same
        # checks as _segment_counter_or_reason, which sorts out the rest).
        if len(fields) > 2 and (
            len(fields[1]) > MAX_HEADER_BYTES or len(fields[2]) > MAX_HEADER_BYTES
        ):
            # The coordinator refuses names over 4096 characters (batchwire):
            # one such file would get every batch of the range refused.
            self._skipped["too_long"] += 1
            return
        if len(fields) >= _MIN_FIELDS and not fields[5]:
            subject = fields[1]
            p = subject.rfind(b"(")
            q = subject.find(b")", p)
            message_id = fields[4]
            size = fields[6]
            if (
                p >= 0
                and q > p
                and fields[0].isdigit()
                and size.isdigit()
                and 2 < len(message_id) <= MAX_MESSAGE_ID_BYTES
                and message_id[:1] == b"<"
                and message_id[-1:] == b">"
                and message_id.count(b"<") == 1
                and message_id.count(b">") == 1
                and subject[:3].lower() != b"re:"
            ):
                k_text, slash, n_text = subject[p + 1 : q].partition(b"/")
                if slash and k_text.isdigit() and n_text.isdigit():
                    total = int(n_text)
                    if 0 < int(k_text) <= total <= MAX_SEGMENTS and int(size) <= _MAX_SIZE:
                        # "N) tail" starts after "(", k and "/".
                        after = subject[p + len(k_text) + 2 :]
                        self._add_segment(fields, p, q, total, k_text, after, True)
                        return
        found = _segment_counter_or_reason(fields)
        if isinstance(found, str):
            if found == "text_post" and _headerless(
                fields, fields[2] in self._headerless or fields[2] in self._headerless_known
            ):
                # No counter, but a binary's size (or the poster of such, for a
                # file's short last article): a random subject per article
                # (Nyuu --subject '${rand(N)}'); grouped by poster in take().
                xref = _xref_field(fields[7]) if len(fields) > 7 else b""
                self._headerless.setdefault(fields[2], bytearray()).extend(
                    b"\t".join((fields[0], fields[1], fields[3], fields[4], fields[6], xref, b""))
                )
                return
            self._skipped[found] += 1
            return
        p, q, total = found
        subject = fields[1]
        # The counter is "(" digits "/" digits ")": the first "/" after p is its own.
        k_text, _, after = subject[p + 1 :].partition(b"/")
        self._add_segment(fields, p, q, total, k_text, after, subject.rfind(b"(") == p)

    def _add_segment(
        self,
        fields: list[bytes],
        p: int,
        q: int,
        total: int,
        k_text: bytes,
        after: bytes,
        last: bool,
    ) -> None:
        """A checked segment to its file (opened now if new).

        Args:
            fields: the line's fields.
            p: where the segment counter's "(" is in the subject.
            q: where its ")" is.
            total: N of the counter.
            k_text: k of the counter, as the line has it.
            after: the subject after "(k/": "N) tail".
            last: the counter's "(" is the subject's last one: then the fast
                path finds the file by its prefix.
        """
        prefix = fields[1][:p]
        poster = fields[2]
        key = (prefix, poster, total)
        open_file = self._open.get(key)
        if open_file is None:
            open_file = self._open[key] = _OpenFile(
                poster,
                prefix,
                after,
                total,
                fields[1][p + 1 : q],
                fields[1][q + 1 :],
                fields[3],
                fields[7],
                bytearray(b"\t".join((k_text, fields[0], fields[3], fields[4], fields[6], b""))),
                # (Most subjects say "yEnc": no lowered copy for them.)
                b"yEnc" in fields[1] or b"yenc" in fields[1].lower(),
            )
        else:
            open_file.segments += b"\t".join(
                (k_text, fields[0], fields[3], fields[4], fields[6], b"")
            )
        if last:
            self._fast[prefix] = open_file

    def take(self) -> Batch:
        """Hand over everything indexed since the last batch and start a new one."""
        return self._take(last=False)

    def _take(self, *, last: bool) -> Batch:
        """`take`; `last`: the range's last batch (nothing is handed on)."""
        # Releases by (poster or b"", release basis): what the release key digests.
        grouping = None if self.pure else COMPILED_GROUPING
        by_release = (
            _releases(list(self._open.values()), None if self.pure else COMPILED_SUBJECT)
            if grouping is None
            else grouping.releases(list(self._open.values()), _parse_prefix)
        )
        drops: Counter[tuple[str, str]] = Counter()
        drop_segments: Counter[tuple[str, str]] = Counter()
        releases: list[ReleaseChunk] = []
        candidates: list[ProbeCandidate] = []
        rule = self.rules[0] if len(self.rules) == 1 else None
        if grouping is not None and rule is not None and type(rule) is ExecutableRule:
            # The default rules: every release judged in one compiled call.
            counts: dict[str, list[int]] = {}
            judged = grouping.executable_judged(
                by_release, rule.extensions, rule.companions, rule.name, self.keep_dropped, counts
            )
            for key, (n, segments) in counts.items():
                drops[rule.name, key] += n
                drop_segments[rule.name, key] += segments
        else:
            judged = self._judged(by_release, grouping, drops, drop_segments)
        passes = _upload_passes(
            (members for _, members, dropped_by in judged if dropped_by is None),
            None if self.pure else COMPILED_FILES,
        )
        for release, members, dropped_by in judged:
            upload = _upload_of(members) if passes else None
            upload_starts = passes.get(upload, ()) if upload is not None else ()
            for chunk in self._poster_chunks(_release_key(*release), members, upload_starts):
                if dropped_by is not None:
                    releases.append(attrs.evolve(chunk, dropped=dropped_by))
                    continue
                releases.append(chunk)
                candidate = _probe_candidate(chunk)
                if candidate is not None:
                    candidates.append(candidate)
        handed = self._headerless_chunks(releases, candidates, last=last)
        batch = Batch(
            group=self.group,
            first=self._batch_first,
            next=self._next,
            releases=tuple(releases),
            rule_counts=tuple(
                RuleCount(rule=rule, key=key, releases=n, segments=drop_segments[rule, key])
                for (rule, key), n in sorted(drops.items())
            ),
            probe_candidates=tuple(candidates),
            lines=self._lines,
            skipped=tuple(sorted(self._skipped.items())),
        )
        self._open = {}
        self._fast = {}
        self._skipped = Counter()
        self._dates = {}
        self._headerless = handed
        self._lines = 0
        self._batch_first = self._next
        return batch

    def _judged(
        self,
        by_release: dict[tuple[bytes, str], list[_OpenFile]],
        grouping: CompiledGrouping | None,
        drops: Counter[tuple[str, str]],
        drop_segments: Counter[tuple[str, str]],
    ) -> list[tuple[tuple[bytes, str], list[_OpenFile], str | None]]:
        """Each release under the rules (the oracle of `_fastsubject.executable_judged`): the
        ones to convert, with the rule that dropped it or None; the dropped counted in
        `drops` and `drop_segments` by (rule, key)."""
        judged: list[tuple[tuple[bytes, str], list[_OpenFile], str | None]] = []
        for release, members in by_release.items():
            # The view is made for a rule that needs one: the executable rule
            # (most drops) reads the file names off the members when compiled.
            view = None
            dropped_by = None
            for rule in self.rules:
                if grouping is not None and type(rule) is ExecutableRule:
                    key = grouping.executable_verdict(members, rule.extensions, rule.companions)
                else:
                    if view is None:
                        view = ReleaseView(
                            [m.info.file_name for m in members], partial(_members_name, members)
                        )
                    key = rule.verdict(view)
                if key is not None:
                    drops[rule.name, key] += 1
                    drop_segments[rule.name, key] += (
                        sum([m.count for m in members])
                        if grouping is None
                        else grouping.segment_count(members)
                    )
                    dropped_by = rule.name
                    break
            if dropped_by is not None and not self.keep_dropped:
                continue  # counted; never converted
            judged.append((release, members, dropped_by))
        return judged

    def _headerless_chunks(
        self, releases: list[ReleaseChunk], candidates: list[ProbeCandidate], *, last: bool
    ) -> dict[bytes, bytearray]:
        """The batch's headerless releases (`_headerless_chunk`) added to `releases`, each a
        probe candidate; the articles handed on to the next batch returned.

        A batch cut leaves one or two articles of such an upload on one side: its first
        ones, which this batch cannot tell from stray articles (they are handed on, once,
        unless `last`), or its last ones, which the next batch takes as the upload's
        (its poster is known there, as in one pass, where the articles before them are).
        """
        known: set[bytes] = set()
        handed: dict[bytes, bytearray] = {}
        for poster, posted in self._headerless.items():
            if (
                not last
                and poster not in self._headerless_known
                and poster not in self._headerless_handed
                and posted.count(b"\t") // 5 < HEADERLESS_MIN_ARTICLES
            ):
                handed[poster] = posted
                continue
            headerless = self._headerless_chunk(poster, posted, poster in self._headerless_known)
            if headerless is not None:
                known.add(poster)
                releases.append(headerless)
                first = headerless.files[0]
                candidates.append(
                    ProbeCandidate(headerless.key, first.first_message_id, first.name)
                )
        self._headerless_known = known
        self._headerless_handed = set(handed)
        return handed

    def _headerless_chunk(
        self, poster: bytes, posted: bytearray, known: bool
    ) -> ReleaseChunk | None:
        """One poster's articles without a counter, as one release (a file per article).

        Such an upload is told apart only by its poster (a random one per
        upload); a poster with fewer than `HEADERLESS_MIN_ARTICLES` of them
        in the batch (ngPost --obfuscate gives every article its own) ties
        nothing together: those are counted as "unattributable", unless the
        poster's upload went on from the batch before (`known`).
        """
        fields = bytes(posted).split(b"\t")
        articles = list(zip(*(fields[at:-1:6] for at in range(6)), strict=True))
        if len(articles) < HEADERLESS_MIN_ARTICLES and not known:
            self._skipped["unattributable"] += len(articles)
            return None
        files = []
        groups: set[str] = set()
        for _article, subject, date, message_id, size, xref in articles:
            groups.update(_xref_groups(xref))
            name = decode(subject)
            files.append(
                FileChunk(
                    key=_digest(b"h", poster, message_id),
                    name=name,
                    subject=name,
                    index=None,
                    total_segments=1,
                    posted=_parsed(self._dates, date),
                    numbers=array("I", (1,)),
                    message_ids=decode(message_id[1:-1]),
                    sizes=array("I", (int(size),)),
                )
            )
        files.sort(key=representative_order)
        return ReleaseChunk(
            key=_digest(b"headerless", poster),
            head_name=None,
            poster=decode(poster),
            # The groups the articles' Xref fields name, as a release's (_release_groups).
            groups=tuple(sorted(groups)) or ((self.group,) if self.group else ()),
            files_announced=None,
            files=tuple(files),
        )

    def finish(self) -> Batch:
        """The last batch of the range; the indexer takes no more data after it."""
        batch = self._take(last=True)
        self.finished = True
        return batch

    def _poster_chunks(
        self, release_key: bytes, members: list[_OpenFile], upload_starts: Sequence[int] = ()
    ) -> list[ReleaseChunk]:
        """The release's chunks; one poster's after another's where two posters' files share
        a name (two uploads of one release name at once) or say another M of 2 or more in
        their [i/M] (another uploader's album with a track of one name: `batch.other_m`),
        each under its own key of the chain. `upload_starts`: where its upload starts later passes (`_upload_passes`).
        """
        by_poster: dict[bytes, list[_OpenFile]] = {}
        for member in members:
            by_poster.setdefault(member.poster, []).append(member)
        if len(by_poster) > 1:
            names = [{m.info.file_name for m in group} for group in by_poster.values()]
            counted = [{m.info.files_announced for m in group} for group in by_poster.values()]
            if (
                sum(map(len, names)) > len(set().union(*names))
                or other_m(counted)
                or self._posters_apart(by_poster.values())
            ):
                chunks: list[ReleaseChunk] = []
                key = release_key
                # In order of each poster's earliest article: the same wherever batches are cut.
                for group in sorted(
                    by_poster.values(), key=lambda g: min(m.first_article for m in g)
                ):
                    made = self._release_chunks(key, group)
                    chunks += made
                    key = repost_key(made[-1].key) if made else key
                return chunks
        return self._release_chunks(release_key, members, upload_starts)

    def _posters_apart(self, groups: Iterable[list[_OpenFile]]) -> bool:
        """Whether two posters' files under one release key are posted more than
        `merge.APART_SECONDS` apart (by each file's first date here, a file with an M of 2
        or more in its [i/M]): two uploads, which the merge keeps apart (its `_split`)."""
        spans = []
        for group in groups:
            dated = [
                posted
                for m in group
                if (m.info.files_announced or 0) > 1 and (posted := _parsed(self._dates, m.date))
            ]
            if dated:
                spans.append((min(dated), max(dated)))
        spans.sort()
        return any(b[0] - a[1] > APART_SECONDS for a, b in pairwise(spans))

    def _release_chunks(
        self, release_key: bytes, members: list[_OpenFile], upload_starts: Sequence[int] = ()
    ) -> list[ReleaseChunk]:
        """The release's chunk, and one more per later pass (a repost; see reposts.py).

        `upload_starts`: where the upload it is part of starts later passes in
        its other keys; a release whose files repeat numbers is cut there too
        (the compiled conversion takes only releases without a repeat).
        """
        for member in members:
            _pad_counter(member)
        if COMPILED_FILES is not None and not self.pure:
            compiled = self._compiled_release(COMPILED_FILES, members, upload_starts)
            if compiled is not None:
                return self._released(release_key, members, compiled)
        texts = [member.lists() for member in members]
        # Where the posting pauses long, between files or inside one, and where
        # a repost starts each file over: every file of the release is cut
        # there alike (a piece is a chunk).
        restarted = [at for m, t in zip(members, texts, strict=True) for at in _restarts(m, t)]
        cuts = _release_cuts(
            [(int(t.articles[0]), int(t.articles[-1]), len(t.ks)) for t in texts],
            [pauses(_article_ints(text)) for text in texts],
            restarted,
        )
        passes = _Passes(self._dates, cuts=cuts)
        pairs = list(zip(members, texts, strict=True))
        found: list[tuple[list[FileChunk | None], _OpenFile]] = []
        if any(not text.in_order() and len(set(text.ks)) < len(text.ks) for text in texts):
            # A file repeats numbers: every file waits for the release's passes.
            passes.deferred = list(members)
        else:
            found = [(_file_chunks(m, t, self._skipped, passes), m) for m, t in pairs]
        if passes.deferred:
            # Files with repeated numbers: the release's passes, from all its
            # files' segments in article order, then every file split by them.
            own = _own_starts(
                sorted(int(article) for text in texts for article in text.articles)
                if upload_starts
                else [],
                upload_starts,
                lone=_lone(members),
            )
            # Where its upload starts a pass, its pass holds nothing yet (`resets`).
            resets = sorted({*restart_cuts(restarted), *own})
            passes.starts = sorted(
                {
                    *passes.cuts,
                    *release_pass_starts([(t, m.total) for m, t in pairs], resets=resets),
                    *own,
                }
            )
            # Looked at (again): the deferred files (all, or those whose numbers
            # repeat once read, as "1" and "01"), and every file when it is cut.
            deferred = {id(member) for member in passes.deferred}
            found = [] if passes.starts else [p for p in found if id(p[1]) not in deferred]
            for member, text in pairs:
                if passes.starts or id(member) in deferred:
                    # A file looked at once already was counted then.
                    counted = self._skipped if id(member) in deferred else Counter[str]()
                    found.append((_file_chunks(member, text, counted, passes), member))
        return self._released(release_key, members, found)

    def _compiled_release(
        self, compiled: CompiledFiles, members: list[_OpenFile], upload_starts: Sequence[int]
    ) -> list[tuple[list[FileChunk | None], _OpenFile]] | None:
        """The files' chunks, each cut into the release's pieces, from their segments read
        into arrays (`_fastindex`, the compiled twin of the pure path of `_release_chunks`);
        None, having changed nothing, for the pure path to sort out.

        Only a release whose every segment is good takes this way (`file_arrays`:
        no forged k, bad size or message-id, and article numbers that do not
        fall in a file that is cut): then the pure path keeps every segment,
        cuts every file at the release's pieces and keeps the first post of
        each number in each, which is what this does.
        """
        files = []
        for member in members:
            arrays = compiled.file_arrays(member.segments, member.total, MAX_MESSAGE_ID_BYTES)
            if arrays is None:
                return None
            files.append(arrays)
        restarted = [at for f in files for at in f.restarts]
        cuts = _release_cuts(
            [(f.first, f.last, f.count) for f in files], [f.pauses for f in files], restarted
        )
        repeats = any(f.repeats for f in files)
        starts = cuts
        if repeats:
            own = _own_starts(
                compiled.sorted_articles(files) if upload_starts else [],
                upload_starts,
                lone=_lone(members),
            )
            resets = sorted({*restart_cuts(restarted), *own})
            starts = sorted({*cuts, *compiled.pass_starts(files, True, resets), *own})
        if starts and not all(f.ordered for f in files):
            return None  # (lines out of article order: the pure path cuts them as it does)
        dates = self._dates
        found: list[tuple[list[FileChunk | None], _OpenFile]] = []
        repeated = 0
        for member, arrays in zip(members, files, strict=True):
            # Each piece as _make_file_chunk makes it, its date that of its first line.
            chunks, left_out = compiled.file_chunks(
                arrays, starts, FileChunk, compiled.chunk_head(member), dates, _parsed
            )
            repeated += left_out
            found.append((chunks, member))
        if cuts or repeats:
            # Where the pure path cuts a file (`_pieces`), it counts its repeats, if none.
            self._skipped["repeated_segment"] += repeated
        if repeats and not starts and not any(f.repeated_texts for f in files):
            # In the pure path's order: files whose numbers repeat only under other
            # texts ("2" and "02") are deferred by `_file_chunks`, and come after the
            # others when nothing cuts the release (the files' order breaks ties).
            found = [p for p, f in zip(found, files, strict=True) if not f.repeats] + [
                p for p, f in zip(found, files, strict=True) if f.repeats
            ]
        return found

    def _released(
        self,
        release_key: bytes,
        members: list[_OpenFile],
        found: list[tuple[list[FileChunk | None], _OpenFile]],
    ) -> list[ReleaseChunk]:
        """The release's chunks from its files' chunks (each file's chunk of each pass);
        the oracle of the compiled `_fastindex.released`, which makes them unless pure."""
        fallback = (self.group,) if self.group else ()
        if COMPILED_FILES is not None and not self.pure:
            return COMPILED_FILES.released(
                release_key, members, found, fallback, ReleaseChunk, repost_key
            )
        by_pass: list[list[tuple[FileChunk, _OpenFile]]] = []
        for chunks, member in found:
            for number, chunk in enumerate(chunks):
                if chunk is None:
                    continue
                while len(by_pass) <= number:
                    by_pass.append([])
                by_pass[number].append((chunk, member))
        groups = _release_groups(members)
        released = []
        key = release_key
        for kept in by_pass:
            if kept:
                files = tuple(sorted((chunk for chunk, _ in kept), key=_file_order))
                # Poster, head and [i/M] of the earliest file: the same whatever the batch cuts.
                _, first = min(kept, key=lambda pair: representative_order(pair[0]))
                released.append(
                    ReleaseChunk(
                        key=key,
                        head_name=first.info.head_name,
                        poster=decode(first.poster),
                        groups=groups or fallback,
                        files_announced=first.info.files_announced,
                        files=files,
                    )
                )
            key = repost_key(key)
        return released


def _releases(
    files: list[_OpenFile], compiled: Callable[[bytes], FileSubject | None] | None
) -> dict[tuple[bytes, str], list[_OpenFile]]:
    """take()'s grouping of a batch's open files (the oracle of `_fastsubject.releases`):
    each file's subject parsed once per prefix (files of one prefix differ in poster
    or N), by `compiled` where it answers, else in Python, and set as its `info`; the
    files by release, (poster, or b"" when the subject has no head, release basis),
    in the order they come."""
    by_release: dict[tuple[bytes, str], list[_OpenFile]] = {}
    parsed: dict[bytes, FileSubject] = {}
    for open_file in files:
        info = parsed.get(open_file.prefix)
        if info is None:
            if compiled is not None:
                info = compiled(open_file.prefix)
            if info is None:
                info = _parse_prefix(open_file.prefix)
            parsed[open_file.prefix] = info
        open_file.info = info
        release = (open_file.poster if info.keyed_by_poster else b"", info.release_basis)
        members = by_release.get(release)
        if members is None:
            by_release[release] = [open_file]
        else:
            members.append(open_file)
    return by_release


def _parse_prefix(prefix: bytes) -> FileSubject:
    """The pure parse of a file's subject before its counter, as the line has it."""
    return parse_file_subject(decode(prefix))


def _release_key(poster: bytes, basis: str) -> bytes:
    return _digest(b"r", poster, basis.encode("utf-8", "surrogatepass"))


def _members_name(members: list[_OpenFile]) -> str:
    return release_name(members[0].info.head_name, ((m.info.file_name, m.total) for m in members))


def _headerless(fields: list[bytes], poster_seen: bool) -> bool:
    """Whether a line without a segment counter is a binary's article: a binary's size
    (any size when its poster posted such already), a good message-id, no reply."""
    return (
        not fields[5]
        and fields[6].isdigit()
        and (poster_seen or int(fields[6]) >= HEADERLESS_MIN_BYTES)
        and int(fields[6]) <= _MAX_SIZE
        and fields[0].isdigit()
        and _good_message_id(fields[4])
        and fields[1][:3].lower() != b"re:"
    )


def _segment_counter_or_reason(fields: list[bytes]) -> tuple[int, int, int] | str:
    """The segment counter (start, end, N) of a binary's segment, or why the line is skipped."""
    if len(fields) < _MIN_FIELDS:
        return "too_few_fields"
    if not fields[0].isdigit():
        return "bad_number"
    if not fields[6].isdigit() or int(fields[6]) > _MAX_SIZE:
        return "bad_bytes"
    if not _good_message_id(fields[4]):
        return "bad_message_id"
    subject = fields[1]
    if subject[:3].lower() == b"re:" or (fields[5] and b"yenc" not in subject.lower()):
        # PowerPost (FileThread) threads a file's parts under its first with
        # References: a yEnc part with References is a segment, not a reply.
        return "reply"
    counter = find_segment_counter(subject)
    if counter is None:
        return "text_post"
    p, q, k, total = counter
    if not 0 < k <= total <= MAX_SEGMENTS:
        return "forged_counter"
    return p, q, total


def _good_message_id(message_id: bytes) -> bool:
    return (
        2 < len(message_id) <= MAX_MESSAGE_ID_BYTES
        and message_id[:1] == b"<"
        and message_id[-1:] == b">"
        and message_id.count(b"<") == 1
        and message_id.count(b">") == 1
    )


def find_segment_counter(subject: bytes) -> tuple[int, int, int, int] | None:
    """The last segment counter `(k/N)` of a subject: (start, end, k, N), or None.

    `start` is the index of "(", `end` the index of ")".
    """
    p = subject.rfind(b"(")
    q = subject.find(b")", p)
    if p >= 0 and q > p:
        k_text, slash, n_text = subject[p + 1 : q].partition(b"/")
        if slash and k_text.isdigit() and n_text.isdigit():
            return p, q, int(k_text), int(n_text)
    found = last_match(_COUNTER, subject)
    if found is None:
        return None
    return found.start(), found.end() - 1, int(found.group(1)), int(found.group(2))


@attrs.define(eq=False, slots=True)
class _Texts:
    """A file's segments as the lines have them: k, article number, date, message-id, bytes;
    and the k and article numbers as ints, read once when asked for."""

    ks: list[bytes]
    articles: list[bytes]
    dates: list[bytes]
    mids: list[bytes]
    sizes: list[bytes]
    _numbers: list[int] | None = attrs.field(init=False, default=None)
    _article_numbers: list[int] | None = attrs.field(init=False, default=None)
    _in_order: bool | None = attrs.field(init=False, default=None)
    _read: int = attrs.field(init=False, default=0)  # bit 1: numbers, bit 2: articles

    def in_order(self) -> bool:
        """Whether the k texts are 1, 2, ..., count as the poster writes them (unpadded or
        zero padded): how most files arrive; then they are unique and need no conversion.

        Read once: the restarts, the repeats and the conversion all ask.
        """
        if self._in_order is None:
            ks = self.ks
            self._in_order = len(ks) <= _COUNTING_MAX and ks == _counting(ks[0])[: len(ks)]
        return self._in_order

    def numbers(self) -> list[int] | None:
        """The k texts as ints (`_digit_ints`): None if one is not plain digits."""
        if not self._read & 1:
            self._numbers, self._read = _digit_ints(self.ks), self._read | 1
        return self._numbers

    def ks_are_digits(self) -> bool:
        """Whether every k text is ASCII digits (zero padding allowed): what the
        segment-by-segment check reads as a number, as int() does."""
        return b"".join(self.ks).isdigit() and all(self.ks)

    def article_numbers(self) -> list[int] | None:
        """The article number texts as ints (`_digit_ints`): None if one is not plain digits."""
        if not self._read & 2:
            self._article_numbers, self._read = _digit_ints(self.articles), self._read | 2
        return self._article_numbers


@attrs.define(eq=False, slots=True)
class _Passes:
    """What the files of one release tell each other about its passes (reposts.py).

    Attributes:
        dates: the batch's parsed dates.
        cuts: where the release's posting pauses long (first articles after).
        starts: the first article of each later piece of the release (its
            cuts and its passes); None until the release's files were looked
            at once.
        deferred: files with repeated numbers, left for when `starts` is known.
    """

    dates: dict[bytes, int]
    cuts: list[int] = attrs.field(factory=list)
    starts: list[int] | None = None
    deferred: list[_OpenFile] = attrs.field(factory=list)

    @property
    def pieces(self) -> list[int]:
        """Where the release is cut: its passes and cuts once known, else its cuts."""
        return self.cuts if self.starts is None else self.starts


def _release_gaps(
    files: list[tuple[int, int, int]], paused: list[list[tuple[int, int]]]
) -> list[int]:
    """Where a release's posting pauses long (the first articles after each pause).

    Inside a file (`reposts.pauses`), and between its files' runs: a gap
    wider than `reposts.WIDE` times the release's mean gap (and
    `reposts.MIN_GAP`). A batch that holds the end of an upload and its
    repost's start cuts them apart there. Read from each file's first and
    last article and its pauses only.

    Args:
        files: each file's first and last article number and segment count.
        paused: each file's pauses.
    """
    cuts = {after for pauses_of in paused for _, after in pauses_of}
    spans = []
    for (first, last, _), pauses_of in zip(files, paused, strict=True):
        for before, after in pauses_of:
            spans.append((first, before))
            first = after
        spans.append((first, last))
    if len(spans) < 2:
        return sorted(cuts)
    spans.sort()
    count = sum(count for _, _, count in files)
    wide = wide_gap(spans[-1][1] - spans[0][0], count)
    reached = spans[0][1]
    for first, last in spans[1:]:
        if first - reached > wide:
            cuts.add(first)
        reached = max(reached, last)
    return sorted(cuts)


def _release_cuts(
    files: list[tuple[int, int, int]], paused: list[list[tuple[int, int]]], restarted: list[int]
) -> list[int]:
    """Where a release is cut whether or not its files repeat numbers (first articles after):
    its pauses (`_release_gaps`), and where a repost starts its files over, one cut where
    the first file does (the others follow within `reposts.MIN_GAP`).

    Args:
        files: each file's first and last article number and segment count.
        paused: each file's pauses (`reposts.pauses`).
        restarted: the articles where its files start over (`reposts.restarts`).
    """
    return sorted({*_release_gaps(files, paused), *restart_cuts(restarted)})


def _article_ints(texts: _Texts) -> list[int]:
    """A file's article numbers as ints for `reposts.pauses`; [] for a file too short to pause."""
    if len(texts.articles) <= WIDE + 1:
        return []
    articles = texts.article_numbers()
    return list(map(int, texts.articles)) if articles is None else articles


def _restarts(member: _OpenFile, texts: _Texts) -> list[int]:
    """Where a file's numbers start over (reposts.restarts); none for a file posted 1, 2, ..."""
    if len(texts.ks) < RUN or texts.in_order():
        return []
    numbers = texts.numbers()
    if numbers is None or not starts_over(numbers, member.total):
        return []  # (odd texts: the segment-by-segment check sorts them out)
    articles = texts.article_numbers()
    return [] if articles is None else restarts(numbers, articles, member.total)


def release_pass_starts(
    files: Sequence[tuple[_Texts, int]], *, cut: bool = True, resets: Sequence[int] = ()
) -> list[int]:
    """The first article of each later pass of a release, from its files' segments.

    Args:
        files: each file's segment texts and its N.
        cut: and where its posting pauses long (reposts.pass_starts).
        resets: where its files start over (`reposts.restart_cuts`; reposts.pass_starts).
    """
    articles: list[int] = []
    numbers: list[int] = []
    owners: list[int] = []  # each segment's file
    base = 0  # each file's numbers apart from the others'
    for owner, (texts, total) in enumerate(files):
        file_numbers = texts.numbers()
        file_articles = texts.article_numbers()
        if file_numbers is None and texts.ks_are_digits():
            # Zero padded ("001"): every k is digits, so every segment is kept.
            file_numbers = list(map(int, texts.ks))
            if file_articles is None:
                file_articles = list(map(int, texts.articles))
        if file_numbers is None or file_articles is None:
            kept = [
                (k, article)
                for k, article in zip(texts.ks, texts.articles, strict=True)
                if k.isdigit()
            ]
            file_numbers = [int(k) for k, _ in kept]
            file_articles = [int(article) for _, article in kept]
        articles += file_articles
        numbers += map(base.__add__, file_numbers)
        owners += [owner] * len(file_numbers)
        base += total + 1
    distinct = len(set(numbers))
    least = min(RUN, distinct)
    # Too few numbers come again for a pass to start (pass_starts): only pauses cut,
    # and a repost's first file posted again before files new to the release.
    too_few = least < SMALL_PASS or len(numbers) - distinct < least
    if too_few and not cut:
        return []
    # In article order (one sort of positions, not of pairs).
    order = sorted(range(len(articles)), key=articles.__getitem__)
    if len(order) > 1:
        pick = itemgetter(*order)
        articles, numbers = list(pick(articles)), list(pick(numbers))
        owners = list(pick(owners))
    if too_few:
        cuts = sorted({*gap_cuts(articles), *resumed(numbers, articles)})
        return [articles[at] for at in cuts]
    starts = pass_starts(numbers, articles, cut=cut, resets=frozenset(resets), files=owners)
    return [articles[at] for at in starts[1:]]


def _upload_passes(
    releases: Iterable[list[_OpenFile]], compiled: CompiledFiles | None
) -> dict[tuple[bytes, int], list[int]]:
    """Where each upload (a poster and an M of at least 2) of the batch starts a later
    pass in one of its release keys: the first article of each pass.

    A repost goes through the upload's files again: its .nfo and par2 set,
    keyed apart from its tracks or volumes, come again RUN (or all of a small
    pass) in a row and start a pass there (`release_pass_starts`), while a file
    of a few segments, keyed alone, shows too few repeats for one. Its key is
    cut where the upload's pass starts (`_release_chunks`), its pass holding
    nothing there (a pass's `resets`), but at a start inside a pass an earlier
    one began (`_one_start_a_pass`): a post check
    re-sends a segment within seconds of its post, never across the start of
    its poster's next pass of the same upload. Only keys of one poster whose
    upload has another key in the batch, and whose files hold more segments
    than their N (a file posted twice), are read for it (`compiled`: the
    compiled conversion, or None for the pure one).
    """
    by_upload: dict[tuple[bytes, int], list[list[_OpenFile]]] = {}
    for members in releases:
        upload = _upload_of(members)
        if upload is not None:
            by_upload.setdefault(upload, []).append(members)
    found: dict[tuple[bytes, int], list[int]] = {}
    for upload, keys in by_upload.items():
        if len(keys) < 2:
            continue
        starts: set[int] = set()
        for members in keys:
            if any(m.count > m.total for m in members):
                starts.update(_key_pass_starts(members, compiled))
        if starts:
            found[upload] = _one_start_a_pass(keys, sorted(starts))
    return found


def _one_start_a_pass(keys: list[list[_OpenFile]], starts: list[int]) -> list[int]:
    """An upload's pass starts (ascending) but those inside a pass that one before them
    started: going back from one over the segments before it of its file and of files
    numbered before it ([i/M]: a tool posts in that order) reaches the one before.

    Each of an album's tracks is a key of its own, and each key's repeats start its
    pass a little after the upload's (a repost after a takedown posts a track's lost
    segments first, new to it); cut there too, a track's repost lost its first piece
    to the first post as re-sends.
    """
    members = [member for key in keys for member in key]
    posted = sorted(
        (article, member.info.file_index)
        for member in members
        for article in _article_list(member.lists())
    )
    articles = [article for article, _ in posted]
    numbers = [number for _, number in posted]
    kept: list[int] = []
    for start in starts:
        at = bisect_left(articles, start)
        own = numbers[at] if kept and at < len(articles) and articles[at] == start else None
        if own is not None:
            back = at
            while (
                back
                and articles[back - 1] >= kept[-1]
                and (number := numbers[back - 1]) is not None
                and number <= own
            ):
                back -= 1
            if articles[back] <= kept[-1]:
                continue  # the pass the start before began goes on
        kept.append(start)
    return kept


def _article_list(texts: _Texts) -> list[int]:
    """A file's article numbers as ints, those not plain digits left out."""
    articles = texts.article_numbers()
    if articles is None:
        articles = [int(article) for article in texts.articles if article.isdigit()]
    return articles


def _key_pass_starts(members: list[_OpenFile], compiled: CompiledFiles | None) -> list[int]:
    """`release_pass_starts` of one release key's files, without its pauses but from where
    they start over (as `_release_chunks` cuts them): from their arrays where each file
    converts (`_fastindex.pass_starts`), else from their texts."""
    if compiled is not None:
        files = []
        for member in members:
            arrays = compiled.file_arrays(member.segments, member.total, MAX_MESSAGE_ID_BYTES)
            if arrays is None:
                break
            files.append(arrays)
        else:
            resets = restart_cuts([at for f in files for at in f.restarts])
            return compiled.pass_starts(files, False, resets)
    texts = [(m, m.lists()) for m in members]
    resets = restart_cuts([at for m, t in texts for at in _restarts(m, t)])
    return release_pass_starts([(t, m.total) for m, t in texts], cut=False, resets=resets)


def _own_starts(
    articles: Sequence[int], upload_starts: Sequence[int], *, lone: bool = False
) -> list[int]:
    """The upload's pass starts as a release's: each its first article at or after one
    inside its span (a piece of the release starts at an article of its own, so no
    pass of it is empty and its chain of keys has no gap).

    A release of one file of one segment (an album's .sfv, a post's .nfo, keyed apart
    from the tracks or volumes whose repeats start the pass) is posted first in its
    upload's pass, just before that start: its copy nearer to the start than to the
    copy before it is the pass's (a post check re-sends a segment seconds after its
    post), and its pass starts there.

    Args:
        articles: the release's article numbers, ascending (read only when
            `upload_starts` has some).
        upload_starts: where its upload starts later passes (`_upload_passes`).
        lone: the release is one file of one segment.
    """
    found = set()
    for start in upload_starts:
        at = bisect_left(articles, start)
        if lone and at >= 2 and start - articles[at - 1] < articles[at - 1] - articles[at - 2]:
            found.add(articles[at - 1])
        elif 0 < at < len(articles):
            found.add(articles[at])
    return sorted(found)


def _lone(members: list[_OpenFile]) -> bool:
    """Whether a release is one file of one segment (`_own_starts`)."""
    return len(members) == 1 and members[0].total == 1


def _upload_of(members: list[_OpenFile]) -> tuple[bytes, int] | None:
    """The upload (poster, M) a release's files are of, or None: posters apart, or M < 2."""
    poster = members[0].poster
    announced = members[0].info.files_announced or 0
    if announced < 2:
        return None
    for member in members:  # (a loop: this runs for every kept release)
        if member.poster != poster:
            return None
    return poster, announced


def _file_chunks(
    open_file: _OpenFile, texts: _Texts, skipped: Counter[str], passes: _Passes
) -> list[FileChunk | None]:
    """The file's segments of this batch, converted and checked: a chunk per pass, None if none is good.

    The common case (unique numbers within 1..N, good message-ids and sizes)
    is checked and sorted with whole-list operations; a file whose only fault
    is repeated segments keeps the first of each in each pass (a repost goes
    through the file again: reposts.py); anything else is sorted out segment
    by segment.
    """
    dates = passes.dates
    ks, mids, sizes_texts = texts.ks, texts.mids, texts.sizes
    count = len(ks)
    total = open_file.total
    blob = b"\n".join(mids)
    message_ids = blob[1:-1].replace(b">\n<", b"\n")
    # Every message-id is <...> with no other angle bracket: then each of the
    # count - 1 separators was ">\n<" (two characters less each) and none is left.
    if not (
        blob[:1] == b"<"
        and blob[-1:] == b">"
        and len(message_ids) == len(blob) - 2 * count
        and b"<" not in message_ids
        and b">" not in message_ids
        and (len(blob) <= MAX_MESSAGE_ID_BYTES or max(map(len, mids)) <= MAX_MESSAGE_ID_BYTES)
    ):
        return _file_chunks_slow(open_file, texts, skipped, passes)
    digit_sizes = _digit_ints(sizes_texts)
    if digit_sizes is None:
        try:
            size_list = list(map(int, sizes_texts))
        except ValueError:
            return _file_chunks_slow(open_file, texts, skipped, passes)
    else:
        size_list = digit_sizes
    try:
        sizes = array("I", size_list)  # uint32: raises for a negative or too big size
    except OverflowError:
        return _file_chunks_slow(open_file, texts, skipped, passes)
    if count <= total and texts.in_order() and not passes.pieces:
        # Segments 1, 2, ..., count in order (how most files arrive): no conversion.
        return [_make_file_chunk(open_file, dates, _ONE_TO[:count], message_ids, sizes)]
    numbers = texts.numbers()
    if numbers is None:
        try:
            numbers = list(map(int, ks))
        except ValueError:
            return _file_chunks_slow(open_file, texts, skipped, passes)
        # Zero padded ("001") reads as the segment-by-segment check reads it.
        digits = digit_sizes is not None and texts.ks_are_digits()
    else:
        digits = digit_sizes is not None
    if not (min(numbers) >= 1 and max(numbers) <= total):
        return _file_chunks_slow(open_file, texts, skipped, passes)
    unique = len(set(numbers)) == count
    if not unique or passes.pieces:
        articles = texts.article_numbers()
        if not digits or b"<>" in blob or articles is None:
            # A text the segment-by-segment check reads otherwise ("+1", "<>").
            return _file_chunks_slow(open_file, texts, skipped, passes)
        if not unique and passes.starts is None:
            passes.deferred.append(open_file)
            return []  # decided once the release's passes are known
        return _pieces(
            open_file,
            skipped,
            passes.dates,
            passes.pieces,
            _Segments(numbers, articles, texts.dates, mids, size_list),
        )
    if count > 1 and numbers != sorted(numbers):
        # Posters with many connections get segments to the server out of order.
        pick = itemgetter(*sorted(range(count), key=numbers.__getitem__))
        numbers, sizes = list(pick(numbers)), array("I", pick(size_list))
        message_ids = b"\n".join(pick(mids))[1:-1].replace(b">\n<", b"\n")
    return [_make_file_chunk(open_file, dates, array("I", numbers), message_ids, sizes)]


class _Segments(NamedTuple):
    """A file's good segments in article order: k, article number, date text, message-id, bytes."""

    numbers: list[int]
    articles: list[int]
    dates: list[bytes]
    mids: list[bytes]
    sizes: list[int]


def _pieces(
    open_file: _OpenFile,
    skipped: Counter[str],
    dates: dict[bytes, int],
    starts: list[int],
    segments: _Segments,
) -> list[FileChunk | None]:
    """A file cut at `starts` (articles where a pass or a piece begins): a chunk per piece,
    the first post of each number in it (the other posts counted as repeats)."""
    # The articles ascend: each piece is a slice. A slice whose numbers
    # ascend (a whole pass, most pieces) is kept as it is; else the first post
    # of each number, from a dict {k: position} of the slice.
    numbers, articles, mids, sizes = (
        segments.numbers,
        segments.articles,
        segments.mids,
        segments.sizes,
    )
    bounds = [0, *(bisect_left(articles, start) for start in starts), len(numbers)]
    chunks: list[FileChunk | None] = []
    repeats = 0
    for begin, end in pairwise(bounds):
        if begin == end:
            chunks.append(None)
            continue
        part = numbers[begin:end]
        if all(map(lt, part, islice(part, 1, None))):
            kept, kept_mids, kept_sizes, first_at = (
                part,
                mids[begin:end],
                array("I", sizes[begin:end]),
                begin,
            )
        else:
            first = dict(zip(reversed(part), range(end - 1, begin - 1, -1), strict=True))
            repeats += end - begin - len(first)
            kept = sorted(first)
            order = list(map(first.__getitem__, kept))
            kept_mids = list(map(mids.__getitem__, order))
            kept_sizes = array("I", map(sizes.__getitem__, order))
            first_at = min(order)
        blob = b"\n".join(kept_mids)
        chunks.append(
            _make_file_chunk(
                open_file,
                dates,
                array("I", kept),
                blob[1:-1].replace(b">\n<", b"\n"),
                kept_sizes,
                posted=_parsed(dates, segments.dates[first_at]),
            )
        )
    skipped["repeated_segment"] += repeats
    while chunks and chunks[-1] is None:
        chunks.pop()
    return chunks


# Segment numbers 1, 2, ... as posters write them (unpadded or zero padded to
# a width), to recognise files whose segments came in order without
# converting them, and the same numbers as an array to slice.
_COUNTING_MAX = 10_000
_COUNTING_WIDTHS = 7
_COUNTING: dict[int, list[bytes]] = {}
_ONE_TO = array("I", range(1, _COUNTING_MAX + 1))


def _counting(first: bytes) -> list[bytes]:
    """The texts 1, 2, ... in the width of `first` (its zero padding); [] for no width."""
    width = len(first)
    texts = _COUNTING.get(width)
    if texts is None:
        if not 0 < width <= _COUNTING_WIDTHS:
            return []
        texts = _COUNTING[width] = [
            str(k).zfill(width).encode() for k in range(1, _COUNTING_MAX + 1)
        ]
    return texts


def _digit_ints(texts: list[bytes]) -> list[int] | None:
    """The numbers of texts made of ASCII digits only (no sign, space or leading 0),
    as int() reads them; None if any text is not such a number.

    One JSON parse of the whole list instead of an int() per text.
    """
    if not b"".join(texts).isdigit():
        return None
    try:
        numbers = orjson.loads(b"[" + b",".join(texts) + b"]")
    except orjson.JSONDecodeError:
        return None  # leading zeros, or an empty text
    # A number past 2**64 comes back as a float: then the sum is one too.
    if not isinstance(numbers, list) or len(numbers) != len(texts) or type(sum(numbers)) is not int:
        return None
    return numbers


def _file_chunks_slow(
    open_file: _OpenFile, texts: _Texts, skipped: Counter[str], passes: _Passes
) -> list[FileChunk | None]:
    """Segment by segment: forged numbers, bad sizes and message-ids out, then as the quick path."""
    bad: Counter[str] = Counter()
    numbers: list[int] = []
    articles: list[int] = []
    date_texts: list[bytes] = []
    mids: list[bytes] = []
    sizes: list[int] = []
    for k_text, article, date, message_id, size_text in zip(
        texts.ks, texts.articles, texts.dates, texts.mids, texts.sizes, strict=True
    ):
        k = int(k_text) if k_text.isdigit() else 0
        if not 0 < k <= open_file.total:
            bad["forged_counter"] += 1
        elif not size_text.isdigit() or int(size_text) > _MAX_SIZE:
            bad["bad_bytes"] += 1
        elif not _good_message_id(message_id):
            bad["bad_message_id"] += 1
        else:
            numbers.append(k)
            articles.append(min(int(article), _MAX_ARTICLE))
            date_texts.append(date)
            mids.append(message_id)
            sizes.append(int(size_text))
    unique = len(set(numbers)) == len(numbers)
    if unique and not passes.pieces:
        skipped.update(bad)
        if not numbers:
            return [None]
        order = sorted(range(len(numbers)), key=numbers.__getitem__)
        return [
            _make_file_chunk(
                open_file,
                passes.dates,
                array("I", map(numbers.__getitem__, order)),
                b"\n".join(mids[at][1:-1] for at in order),
                array("I", map(sizes.__getitem__, order)),
            )
        ]
    if not unique and passes.starts is None:
        passes.deferred.append(open_file)
        return []  # decided (and counted) once the release's passes are known
    skipped.update(bad)
    return _pieces(
        open_file,
        skipped,
        passes.dates,
        passes.pieces,
        _Segments(numbers, articles, date_texts, mids, sizes),
    )


def _make_file_chunk(
    open_file: _OpenFile,
    dates: dict[bytes, int],
    numbers: array[int],
    message_ids: bytes | str,
    sizes: array[int],
    posted: int | None = None,
) -> FileChunk:
    """The file's chunk; `posted` is the date of its first line unless given.

    `message_ids` as the lines have them (bytes), or already text (the
    compiled conversion's, ASCII).
    """
    if posted is None:
        posted = _parsed(dates, open_file.date)
    return FileChunk(
        *_chunk_head(open_file),
        posted=posted,
        numbers=numbers,
        message_ids=message_ids if isinstance(message_ids, str) else decode(message_ids),
        sizes=sizes,
    )


def _pad_counter(open_file: _OpenFile) -> None:
    """Give a file the counter of a segment that pads it ("01/30") when its first line's
    does not show how the poster pads ("12/30"): its subject (`_OpenFile.subject`, made
    of the counter) pads as the poster does, whichever of its lines a batch saw first (a
    batch cut before it, segments out of order). Looked for only where a field of the
    file's segments starts with a 0 (a k, or a date or size that does)."""
    segments = open_file.segments
    if (
        open_file.total < 10
        or open_file.counter.startswith(b"0")
        # A first line's k narrower than N ("3/30") shows the poster does not pad (one
        # that pads writes "03/30"): only a k as wide as N ("12/30") leaves it open.
        or open_file.counter.find(b"/") < len(str(open_file.total))
        or not (segments.startswith(b"0") or b"\t0" in segments)
    ):
        return
    for k in open_file.lists().ks:
        if k[:1] == b"0" and k.isdigit() and 0 < int(k) <= open_file.total:
            open_file.counter = b"%b/%d" % (k, open_file.total)
            return


def _chunk_head(open_file: _OpenFile) -> tuple[bytes, str, str, int | None, int]:
    """A file's chunk's fields that every piece of it shares: key, name, subject,
    index and total_segments (FileChunk's first five). The oracle of
    `_fastindex.chunk_head`."""
    return (
        _digest(b"f", open_file.poster, open_file.prefix, str(open_file.total).encode()),
        open_file.info.file_name,
        open_file.subject(),
        open_file.info.file_index,
        open_file.total,
    )


def _parsed(dates: dict[bytes, int], date: bytes) -> int:
    """Unix seconds of a Date field, parsed once per batch."""
    posted = dates.get(date)
    if posted is None:
        posted = dates[date] = parse_date(decode(date))
    return posted


def _file_order(chunk: FileChunk) -> tuple[int, str]:
    return (chunk.index if chunk.index is not None else 1 << 30, chunk.name)


def _probe_candidate(chunk: ReleaseChunk) -> ProbeCandidate | None:
    """A probe for a release whose name is random: of its par2, else its nfo, else its first file.

    A modern obfuscated upload's random `.mkv` may come without a par2 in
    the same release (its par2 volumes carry the real name, and a name of
    their own): the first segment of a data file still tells (yEnc's name=,
    an archive's file list).
    """
    if not looks_obfuscated(chunk.name) or not chunk.files:
        return None
    best: tuple[int, int, str, FileChunk] | None = None
    for file in chunk.files:
        rank = probe_file_rank(file.name)
        order = (3 if rank is None else rank, file.index if file.index is not None else 1 << 30)
        if best is None or (*order, file.name) < best[:3]:
            best = (*order, file.name, file)
    assert best is not None
    file = best[3]
    return ProbeCandidate(
        release_key=chunk.key, message_id=file.first_message_id, file_name=file.name
    )


def _blank_nul_lines(data: bytes, lines: list[bytes]) -> int:
    """Blank the lines (of `data`, split on "\\n" into `lines`) that hold a NUL byte;
    how many there were.

    Only the NULs are looked for: a line's place is the count of line ends
    before its NUL, counted from the NUL before (the data is read once and
    not copied). A line blanked is empty: add_data counts it here, not as
    an empty line.
    """
    blanked = 0
    line = 0  # the line that `begin` is in
    begin = 0
    at = data.find(b"\x00")
    while at >= 0:
        line += data.count(b"\n", begin, at)
        lines[line] = b""
        blanked += 1
        end = data.find(b"\n", at)
        if end < 0:
            break
        begin, line = end + 1, line + 1
        at = data.find(b"\x00", begin)
    return blanked


def _release_groups(members: Sequence[_OpenFile]) -> tuple[str, ...]:
    """Every group the files' Xref fields name, sorted (the oracle of the compiled
    `_fastindex.xref_groups`)."""
    groups: set[str] = set()
    for member in members:
        groups.update(_xref_groups(_xref_field(member.after_bytes)))
    return tuple(sorted(groups))


def _xref_field(rest: bytes) -> bytes:
    """The field after "lines" (Xref, when there is one) in the rest of a line split by add_data."""
    tab = rest.find(b"\t")
    return rest[tab + 1 :].partition(b"\t")[0] if tab >= 0 else b""


def _xref_groups(xref: bytes) -> Iterable[str]:
    """Groups of an `Xref: host group:number ...` field (b'' gives none)."""
    if xref[:5].lower() != b"xref:":
        return ()
    # ":123" names no group (and the coordinator refuses an empty group name).
    return [decode(name) for part in xref[5:].split()[1:] if (name := part.rpartition(b":")[0])]


def decode(data: bytes) -> str:
    """Header bytes as text: UTF-8, else Latin-1 (every byte is a character)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# The form nearly every server writes, read without email.utils (the same
# answer; anything else, and "-0000", which means local time there, goes to it).
_PLAIN_DATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{1,2}) ([A-Z][a-z][a-z]) ([1-9][0-9]{3}) "
    r"([0-9][0-9]):([0-9][0-9]):([0-9][0-9]) ([+-])([0-9][0-9])([0-9][0-9])"
)
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}


def parse_date(text: str) -> int:
    """Unix seconds of an RFC 5322 date, 0 when it cannot be read."""
    plain = _PLAIN_DATE.fullmatch(text)
    if plain is not None:
        day, month, year, hour, minute, second, sign, tz_hours, tz_minutes = plain.groups()
        number = _MONTHS.get(month)
        offset = int(tz_hours) * 3600 + int(tz_minutes) * 60
        if number is not None and (offset or sign == "+"):
            try:
                return int(
                    timegm((int(year), number, int(day), int(hour), int(minute), int(second)))
                    - (offset if sign == "+" else -offset)
                )
            except (OverflowError, ValueError):
                return 0
    # Imported here: nearly every date is the plain form above, and email.utils
    # (socket, random, base64, ...) was ~5% of `uidx index`'s start.
    from email.utils import mktime_tz, parsedate_tz

    parsed = parsedate_tz(text)
    if parsed is None:
        return 0
    try:
        return int(mktime_tz(parsed))
    except (OverflowError, ValueError):
        return 0


# Copied for each key (never updated itself): a copy costs less than a new
# hasher's keyword arguments.
_BLAKE2B_16 = blake2b(digest_size=16)


def _digest(kind: bytes, *parts: bytes) -> bytes:
    """16-byte key of what every edge sees alike (never Python's salted hash)."""
    hasher = _BLAKE2B_16.copy()
    hasher.update(b"\x00".join((kind, *parts)))
    return hasher.digest()
