"""Real NZBs replayed as the overview lines a news server would send for OVER.

Theory of operation
-------------------
An NZB keeps one subject per file, the one of its first segment, so every
segment's subject is rebuilt by rewriting the last `(k/N)` counter of that
subject, keeping the zero padding of the original (`(01/17)` gives `(02/17)`;
`(1/201)` gives `(10/201)`). Subjects without a counter are used as they are.

The order is the one a poster produces. Within one upload, files go out
oldest first (NZB order between equal dates) and 2 to 4 of them are in flight
at once, served round robin, each in segment-number order. NZBs that list
segments out of order or miss some are replayed with what they hold. Several
uploads then share the group: `interleave_uploads` takes bursts from up to
`in_flight` uploads at a time, which is how a busy group looks.

The lines are those of one group (`CorpusLines.group`), numbered from
`first_article` up. The Xref lists the article's groups in NZB order: that
group with the line's number, every other group with a number from a counter
of its own. An article the NZB does not list in that group gets it put first,
as if it had been crossposted there too: replaying uploads of many groups
into one stream needs that. Each segment's date is its file's NZB date. Nothing here reads a clock or a file,
except `load_corpus` and `find_corpus`, which are test support.

Graded like generated data: `corpus_truth` turns the replay into a
`usenet_indexer.synth.truth.Truth` in which every NZB is one upload (a legit
release of its own) with the files and segments the lines hold, so that
`grouping_score` grades an index of the lines, and
`files_in_their_upload_release` gives the figure of issue 15 for real posts:
the share of files that land in their upload's release, with no other
upload's files in it.
"""

from __future__ import annotations

import random
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any, TypeVar

import attrs

from usenet_indexer.core.nzb import Nzb, NzbFile, NzbSegment, parse_nzb
from usenet_indexer.synth.truth import (
    Truth,
    TruthFile,
    TruthRelease,
    TruthSegment,
    grouping_score,
)

__all__ = [
    "CorpusLines",
    "SegmentTruth",
    "corpus_truth",
    "files_in_their_upload_release",
    "find_corpus",
    "interleave_uploads",
    "load_corpus",
    "nzb_to_overview",
    "segment_subject",
    "upload_order",
]

_T = TypeVar("_T")

XREF_SERVER = "news.example.com"
# Posters keep a few files in flight (one per connection group); 2-4 is what
# ngPost/Nyuu/PowerPost posts look like in overview data.
_FILES_IN_FLIGHT = (2, 4)
# Articles one upload lands in a row before another upload's articles cut in:
# a few tens, since each poster pushes over several connections at once.
_MAX_BURST = 64
# yEnc posters write 128-character lines; with CRLF and escapes about 130
# bytes of article per body line. Only an estimate: the NZB gives no count.
_BYTES_PER_LINE = 130

_COUNTER = re.compile(r"\((\d+)/(\d+)\)")
_QUOTED = re.compile(r'"([^"]+)"')
# RFC 3977 8.3: in overview data, TAB, CR and LF in a header become spaces (NUL cannot appear).
_OVERVIEW_UNSAFE = str.maketrans({"\t": " ", "\r": " ", "\n": " ", "\x00": " "})


@attrs.frozen
class SegmentTruth:
    """Where a line came from: NZB index, file index within that NZB, segment number, article."""

    nzb: int
    file: int
    number: int
    article: int


@attrs.frozen
class CorpusLines:
    """Overview lines of one group and, per message-id (without `<>`), where each came from.

    `duplicates` counts segments left out because their message-id had already
    been posted: a news server refuses a second article with the same id.
    """

    group: str
    first_article: int
    lines: list[str]
    truth: dict[str, SegmentTruth]
    duplicates: int = 0

    @property
    def next_article(self) -> int:
        """The article number after the last line."""
        return self.first_article + len(self.lines)


def segment_subject(subject: str, number: int) -> str:
    """The subject of segment `number`, given the subject of the file's first segment.

    Args:
        subject: the file's subject as the NZB holds it, e.g. `... yEnc (01/17)`.
        number: the segment number k.

    Returns:
        The subject with its last `(k/N)` counter set to `number`, zero padded
        to the width of the original counter; unchanged if there is no counter.
    """
    return _SubjectTemplate.of(subject).render(number)


@attrs.frozen
class _SubjectTemplate:
    # The subject cut around the k of its last counter, so each segment costs one join.
    head: str
    width: int
    tail: str

    @classmethod
    def of(cls, subject: str) -> _SubjectTemplate:
        last = max(_COUNTER.finditer(subject), key=lambda m: m.start(), default=None)
        if last is None:
            return cls(head=subject, width=-1, tail="")
        return cls(
            head=subject[: last.start(1)], width=len(last.group(1)), tail=subject[last.end(1) :]
        )

    def render(self, number: int) -> str:
        if self.width < 0:
            return self.head
        return f"{self.head}{number:0{self.width}d}{self.tail}"


def upload_order(nzb: Nzb, rng: random.Random) -> list[tuple[int, NzbSegment]]:
    """The order in which a poster sends the segments of one NZB.

    Args:
        nzb: the upload.
        rng: chooses how many files are in flight (2 to 4).

    Returns:
        (file index, segment) pairs: files oldest first, a few in flight
        round robin, each file's segments by number.
    """
    # Files without segments are left out so they cannot take a place in the rotation.
    posted = [i for i, file in enumerate(nzb.files) if file.segments]
    queue = deque(sorted(posted, key=lambda i: nzb.files[i].date))
    width = rng.randint(*_FILES_IN_FLIGHT)
    active: list[tuple[int, Iterator[NzbSegment]]] = []
    while queue and len(active) < width:
        active.append(_file_stream(nzb, queue.popleft()))
    order: list[tuple[int, NzbSegment]] = []
    slot = 0
    while active:
        slot %= len(active)
        index, segments = active[slot]
        segment = next(segments, None)
        if segment is not None:
            order.append((index, segment))
            slot += 1
        elif queue:  # the next file takes the finished file's place in the rotation
            active[slot] = _file_stream(nzb, queue.popleft())
        else:
            del active[slot]
    return order


def _file_stream(nzb: Nzb, index: int) -> tuple[int, Iterator[NzbSegment]]:
    return index, iter(sorted(nzb.files[index].segments, key=lambda s: s.number))


def interleave_uploads(
    uploads: Sequence[Sequence[_T]],
    *,
    rng: random.Random,
    in_flight: int = 2,
    max_burst: int = _MAX_BURST,
) -> list[tuple[int, _T]]:
    """Merge several uploads into one group's stream, as concurrent posters do.

    Up to `in_flight` uploads are open at a time, in the given order; each
    step lands a burst of 1 to `max_burst` items of one of them, chosen at
    random. Each upload keeps its own order. `in_flight=1` concatenates.

    Args:
        uploads: the items of each upload, in posting order.
        rng: chooses the upload and the burst length.
        in_flight: how many uploads overlap at most.
        max_burst: the longest run of one upload's items.

    Returns:
        (upload index, item) pairs.

    Raises:
        ValueError: `in_flight` or `max_burst` is below 1.
    """
    if in_flight < 1 or max_burst < 1:
        raise ValueError(f"in_flight and max_burst must be >= 1, not {in_flight}, {max_burst}")
    pending = deque(range(len(uploads)))
    active: list[tuple[int, int]] = []  # (upload index, next position)
    merged: list[tuple[int, _T]] = []
    while active or pending:
        while pending and len(active) < in_flight:
            active.append((pending.popleft(), 0))
        slot = rng.randrange(len(active))
        upload, start = active[slot]
        items = uploads[upload]
        end = min(len(items), start + rng.randint(1, max_burst))
        merged.extend((upload, item) for item in items[start:end])
        if end >= len(items):
            del active[slot]
        else:
            active[slot] = (upload, end)
    return merged


@attrs.frozen
class _FileFields:
    # What every line of one file shares, computed once per file.
    subject: _SubjectTemplate
    poster: str
    date: str
    groups: tuple[str, ...]  # as the Xref lists them

    @classmethod
    def of(cls, file: NzbFile, group: str) -> _FileFields:
        groups = tuple(dict.fromkeys(file.groups))
        return cls(
            subject=_SubjectTemplate.of(_overview_safe(file.subject)),
            poster=_overview_safe(file.poster),
            date=format_datetime(datetime.fromtimestamp(file.date, tz=UTC)),
            groups=groups if group in groups else (group, *groups),
        )


def nzb_to_overview(
    nzbs: Sequence[Nzb],
    *,
    first_article: int,
    rng: random.Random,
    uploads_in_flight: int = 1,
    group: str | None = None,
) -> CorpusLines:
    """Replay NZBs as the OVER lines of one group.

    Each line is `number, subject, poster, date, <message-id>, references
    (empty), bytes, lines, Xref: news.example.com group:number ...`.

    Args:
        nzbs: the uploads, in the order they start.
        first_article: the article number of the first line.
        rng: drives the interleaving; the same seed gives the same lines.
        uploads_in_flight: how many uploads overlap (1: one after the other).
        group: the group being read; by default the first group of the first
            file of the first NZB. Every line's Xref names it, with the line's
            number; an article the NZB lists in other groups only gets it
            prepended.

    Returns:
        The lines (without line ends) and, per message-id, where each came from.

    Raises:
        ValueError: `uploads_in_flight` is below 1.
    """
    stream_group = group or _first_group(nzbs)
    uploads = [upload_order(nzb, rng) for nzb in nzbs]
    fields: dict[tuple[int, int], _FileFields] = {}
    counters: dict[str, int] = {}  # next article number in each crossposted group
    lines: list[str] = []
    truth: dict[str, SegmentTruth] = {}
    duplicates = 0
    article = first_article
    for nzb_index, (file_index, segment) in interleave_uploads(
        uploads, rng=rng, in_flight=uploads_in_flight
    ):
        if segment.message_id in truth:
            duplicates += 1
            continue
        key = (nzb_index, file_index)
        if key not in fields:
            fields[key] = _FileFields.of(nzbs[nzb_index].files[file_index], stream_group)
        file = fields[key]
        xref = [f"Xref: {XREF_SERVER}"]
        for name in file.groups:
            if name == stream_group:
                xref.append(f"{name}:{article}")
            else:
                number = counters.get(name, first_article)
                counters[name] = number + 1
                xref.append(f"{name}:{number}")
        lines.append(
            f"{article}\t{file.subject.render(segment.number)}\t{file.poster}\t{file.date}\t"
            f"<{_overview_safe(segment.message_id)}>\t\t{segment.bytes}\t"
            f"{max(1, segment.bytes // _BYTES_PER_LINE)}\t{' '.join(xref)}"
        )
        truth[segment.message_id] = SegmentTruth(nzb_index, file_index, segment.number, article)
        article += 1
    return CorpusLines(stream_group, first_article, lines, truth, duplicates)


def corpus_truth(
    nzbs: Sequence[Nzb], replay: CorpusLines, names: Sequence[str] | None = None
) -> Truth:
    """The truth of replayed NZBs: each NZB one upload, as the replay posted it.

    Args:
        nzbs: the NZBs given to `nzb_to_overview`, in the same order.
        replay: what `nzb_to_overview` made of them.
        names: a name per NZB (its file name, say): the release's name and
            pattern, so that `GroupingScore.by_pattern` shows each NZB.

    Returns:
        A truth with one legit release per NZB that has a line (its files
        that have one, their segments in article order) and no junk.
    """
    placed: dict[tuple[int, int], list[TruthSegment]] = {}
    sizes = {
        segment.message_id: segment.bytes
        for nzb in nzbs
        for file in nzb.files
        for segment in file.segments
    }
    for mid, where in replay.truth.items():
        segment = (where.number, mid, sizes[mid], where.article)
        placed.setdefault((where.nzb, where.file), []).append(segment)
    releases = []
    for index, nzb in enumerate(nzbs):
        files = tuple(
            _truth_file(number, file, sorted(placed[index, number], key=lambda s: s[3]))
            for number, file in enumerate(nzb.files)
            if (index, number) in placed
        )
        if files:
            name = names[index] if names is not None else nzb.files[0].subject
            releases.append(_corpus_release(index, name, nzb, files))
    articles = [where.article for where in replay.truth.values()]
    return Truth(
        group=replay.group,
        seed=0,
        first_article=replay.first_article,
        last_article=max(articles, default=replay.first_article - 1),
        lines=len(replay.lines),
        releases=tuple(releases),
        junk=(),
    )


def files_in_their_upload_release(releases: Iterable[Mapping[str, Any]], truth: Truth) -> float:
    """Issue 15's figure for real NZBs: files in their upload's release.

    Args:
        releases: an index of the replayed lines (`uidx index` JSON objects).
        truth: `corpus_truth` of the replay.

    Returns:
        The files (with a line) whose output release is their upload's home
        and holds no other upload's file, divided by those files; see
        `GroupingScore.files_right_release`.
    """
    return grouping_score(releases, truth).files_right_release


def _truth_file(number: int, file: NzbFile, segments: list[TruthSegment]) -> TruthFile:
    counter = max(_COUNTER.finditer(file.subject), key=lambda m: m.start(), default=None)
    total = int(counter[2]) if counter else max(segment[0] for segment in segments)
    quoted = _QUOTED.search(file.subject)
    name = quoted[1] if quoted else file.subject
    return TruthFile(number, name, file.subject, total, tuple(segments))


def _corpus_release(index: int, name: str, nzb: Nzb, files: tuple[TruthFile, ...]) -> TruthRelease:
    posted = [file for file in nzb.files if file.segments]
    return TruthRelease(
        id=index,
        kind="legit",
        name=name,
        real_name=name,
        poster=posted[0].poster,
        groups=tuple(dict.fromkeys(g for file in posted for g in file.groups)),
        tool="corpus",
        posted=min(file.date for file in posted),
        files_announced=None,
        obfuscated=False,
        probe_candidate=False,
        repost_of=None,
        truncated=False,
        files=files,
        pattern=name,
    )


def _first_group(nzbs: Sequence[Nzb]) -> str:
    groups = (g for nzb in nzbs for file in nzb.files for g in file.groups)
    return next(groups, "alt.binaries.test")


def _overview_safe(text: str) -> str:
    return text.translate(_OVERVIEW_UNSAFE)


# --- test support: the only file I/O of this module -------------------------


def load_corpus(folder: Path) -> list[tuple[str, Nzb]]:
    """Parse every `*.nzb` file of a folder.

    Args:
        folder: the folder holding the NZB files (the corpus's `nzb/`).

    Returns:
        (file name, parsed NZB) pairs, sorted by file name.

    Raises:
        InputError: a file is not a readable NZB.
        OSError: the folder or a file cannot be read.
    """
    paths = sorted(p for p in folder.iterdir() if p.suffix == ".nzb" and p.is_file())
    return [(path.name, parse_nzb(path.read_bytes())) for path in paths]


def find_corpus(start: Path) -> Path | None:
    """Find the real-data corpus (a folder with `SOURCES.md` and `nzb/`).

    Looks in `start` and each of its parents for `corpus/` and `shared/corpus/`,
    so tests find a corpus inside the repository first, then the one shared
    beside it.

    Args:
        start: where to begin, usually the test file's folder.

    Returns:
        The corpus folder, or None if there is none.
    """
    for folder in (start, *start.parents):
        for candidate in (folder / "corpus", folder / "shared" / "corpus"):
            if (candidate / "SOURCES.md").is_file() and (candidate / "nzb").is_dir():
                return candidate
    return None


def replayed_lines(corpus_dir: Path, first: int, group: str, *, seed: int) -> list[bytes]:
    """The corpus's NZBs replayed as overview lines of `group` from article `first`,
    four uploads in flight, interleaved by a random generator seeded with `seed`."""
    nzbs = [nzb for _, nzb in load_corpus(corpus_dir / "nzb")]
    replay = nzb_to_overview(
        nzbs, first_article=first, rng=random.Random(seed), uploads_in_flight=4, group=group
    )
    return [line.encode("utf-8", "surrogateescape") for line in replay.lines]


def corpus_lines(corpus_dir: Path, first: int, group: str) -> list[bytes]:
    """The corpus's NZBs replayed as overview lines from article `first` (four uploads in
    flight), then every real subject of subjects.tsv as the segment of an article: what
    the compiled indexer's oracle tests feed both indexers."""
    lines = replayed_lines(corpus_dir, first, group, seed=3)
    with (corpus_dir / "subjects.tsv").open("rb") as stream:
        subjects = [row.split(b"\t")[1] for row in stream.read().splitlines()[1:]]
    lines += [
        b"%d\t%s\tposter@example.com\tMon, 6 May 2024 10:00:00 +0000\t<s%d@x>\t\t700000\t5400"
        % (first + len(lines) + at, subject, at)
        for at, subject in enumerate(subjects)
    ]
    return lines
