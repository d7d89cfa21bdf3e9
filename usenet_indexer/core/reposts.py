"""Reposts apart from repeats: a whole file posted again is a second release.

Theory of operation
-------------------
A segment number can come twice for one file (same poster, subject and N)
for two reasons that a catalog must tell apart:

- a *repeat*: a post check found one segment missing and the tool sent it
  again a few articles later under a new message-id (Nyuu's
  `--check-post-tries`, PowerPost's AutoRetry). The file is one upload; the
  first post of the number is kept and the repeat is counted;
- a *repost*: the poster posted the whole upload again, later, with new
  message-ids (after a takedown, often the only complete copy). That is a
  second release, with every segment of its own.

A repeat comes alone, among the file's new numbers, or a little after it;
a repost goes through the upload's files again, after a pause. The catalog
decides, from every chunk of a release wherever it was indexed (merge.py):
in order of date, a file chunk joins the earliest generation of the release
that does not already hold `min(RUN, N)` of its numbers under other
message-ids, else it begins a new generation. A repeat brings one number
again (a repeat of a one-segment nfo looks like its repost, and is taken
for one); a repost brings the whole file again; a chunk sent twice brings
the same message-ids and changes nothing.

For that, a chunk must not hold two posts of a file. The indexer cuts a
release's segments into pieces where its posting pauses long (`pauses`: a
batch that holds the end of an upload and the start of its repost), where a
file's numbers start over (`restarts`: a repost that follows at once), and,
in a release whose files repeat numbers, where `RUN` segments in a row
repeat, or back where the files are posted again from the first
(`pass_starts`, `_went_back`: a repost soon after a takedown first posts
what the takedown took, new to the first post), and, where too few
numbers come again for a pass, after a pause at a number that comes again
before numbers new to the release (`resumed`: a small upload's .nfo, all a
takedown left of its first post, posted again first in its repost). Piece
n of a release goes in a release chunk of its own, under `repost_key`
applied n times to the release key (the same file keys; a
batch holds one chunk per key). A cut too many costs a chunk: the merge
joins pieces that post nothing again.

No I/O, no clock: article numbers and the articles' dates only.
"""

from __future__ import annotations

# hashlib's blake2b is this one; importing hashlib also loads OpenSSL (_hashlib),
# ~2% of `uidx index`'s start-up, for hashes uidx does not use here.
try:
    from _blake2 import blake2b
except ImportError:  # _blake2 is CPython's private module: elsewhere hashlib's, the same digests
    from hashlib import blake2b
from collections.abc import Collection, Sequence
from itertools import accumulate, pairwise
from operator import sub

# Segments in a row, all already in the pass, that start a new pass: a post
# check re-sends one segment among new ones, and three failed in a row (and
# re-sent in the same order) is far rarer than a repost.
RUN = 3
# A pass of fewer segments than RUN (a release key of a scene upload's .nfo
# and .sfv, one segment each, beside its volumes' key) starts again when all
# of them, at least this many, come again in a row: a post check re-sends
# the one that failed, a repost posts the pass's files again, each of them.
SMALL_PASS = 2
# A pause in a posting, where a piece is cut: a gap this many times the
# posting's usual gap between segments (other uploads in flight space them
# out evenly), and at least this many articles. A post check's re-send comes
# within a few dozen of the upload's own posts, alone or nearly.
WIDE = 50
MIN_GAP = 1000
# How far out of order a tool's connections post a file's segments, at most.
SHUFFLE = 32


# blake2b's state after the prefix of every repost key, copied for each key (never
# updated itself): making a hasher from its keyword arguments took 2 us a key, twice
# what the copy and the hashing take (a catalog closure walks every key's chain).
_REPOST = blake2b(b"repost\x00", digest_size=16)


def repost_key(key: bytes) -> bytes:
    """The release key of the next pass (generation) of the release `key`:
    blake2b-128 of b"repost\\x00" and the key."""
    hasher = _REPOST.copy()
    hasher.update(key)
    return hasher.digest()


_GENERATION = blake2b(b"generation\x00", digest_size=16)


def generation_key(key: bytes, message_id: str) -> bytes:
    """The catalog key (a row's guid) of a later generation of the release `key`
    whose earliest file chunk starts with `message_id`: blake2b-128 of
    b"generation\\x00", the key and the message-id. Its own upload's, never its
    place among the release's generations (merge.py)."""
    hasher = _GENERATION.copy()
    hasher.update(key)
    hasher.update(message_id.encode("utf-8", "surrogateescape"))
    return hasher.digest()


def pass_starts(
    numbers: Sequence[int],
    articles: Sequence[int],
    *,
    cut: bool = True,
    resets: Collection[int] = (),
    files: Sequence[int] = (),
) -> list[int]:
    """Where a release's segments are cut into pieces that may be passes (0 first).

    A pass starts where `RUN` segments in a row are numbers the current pass
    has, or, in a pass of `SMALL_PASS` to `RUN - 1` numbers, where all of
    them come again in a row; a cut also falls after a gap in the posting
    wider than `WIDE` times its median one (and `MIN_GAP` articles), inside
    a pass. A cut too many costs a chunk and nothing else: the merge joins
    pieces that post nothing again (merge.py).

    Where the release's files start over (`resets`: `restarts` cut there, so a
    pass starts) after a number new to the pass, the pass holds nothing yet: a
    batch cut inside a file posted again and again (an album's track, each post
    of it at once after the last) leaves the batch the end of one post and then
    whole posts; their first numbers are new to what the batch holds of the
    first, and their repeats would start each pass inside the next post's copy
    of the file; the pass starts there. (After repeats, the run goes on: a
    repost's .nfo and .par2 come again just before its volumes start over, and
    start its pass.)

    Args:
        numbers: the segment numbers in article order (a release's are made
            apart per file by the caller).
        articles: their article numbers.
        cut: cut after the wide gaps too (else only the passes start).
        resets: articles where a pass starts over (the release's restart cuts).
        files: each segment's file (any id, one per file), where known: a pass
            then starts where its first files were posted again (`_went_back`).
    """
    wide = _median_wide(articles) if cut else None
    starts = [0]
    passed = 0  # where the current pass starts (cuts inside it are no passes)
    seen: set[int] = set()
    run = 0
    for at, number in enumerate(numbers):
        if wide is not None and at and articles[at] - articles[at - 1] > wide and starts[-1] != at:
            # A cut, not a pass: what the pass holds still counts for repeats.
            starts.append(at)
        if not run and resets and articles[at] in resets:
            passed = _started(starts, files, passed, at)
            seen = set(numbers[passed:at])
        if number in seen:
            run += 1
            if run == min(RUN, len(seen)) and len(seen) >= SMALL_PASS:
                passed = _started(starts, files, passed, at - run + 1)
                seen = set(numbers[passed : at + 1])
                run = 0
        else:
            run = 0
            seen.add(number)
    return starts


def _started(starts: list[int], files: Sequence[int], passed: int, start: int) -> int:
    """Start a pass at `start` in `starts`, or where it went back to (`_went_back`, where
    `files` are given; `passed`: where the pass before started); where it starts."""
    if files:
        back = _went_back(files, passed, start)
        if back < start:
            # (Not cut where its first files paused.)
            starts[:] = [at for at in starts if not back < at < start]
            start = back
    if starts[-1] != start:
        starts.append(start)
    return start


def _went_back(files: Sequence[int], passed: int, start: int) -> int:
    """Where a pass that repeats from `start` on began (`passed`: where the one before
    it did): at the segments just before `start` of its file and of files posted
    before it in the pass before, when a file posted after them comes before those.

    A repost goes through the upload's files in their order again: where a
    takedown left the first post without a file's first segments, or without
    whole files, the repost's first segments are new to the pass before,
    and its repeats start `RUN` segments later (a volume's first segments,
    the next volume's). The pass before ended with its later files; what
    comes between them and the repeats is the repost's. A post check's
    re-sends after the last file have nothing of earlier files just before
    them, and an upload's own first post reaches back to `passed`: neither moves.
    """
    order: dict[int, int] = {}
    for file in files[passed:start]:
        if file not in order:
            order[file] = len(order)
    own = order[files[start]] if files[start] in order else len(order)
    back = start
    while back > passed and order[files[back - 1]] <= own:
        back -= 1
    return start if back == passed else back


def gap_cuts(articles: Sequence[int]) -> list[int]:
    """The cuts `pass_starts` makes where no pass starts (fewer than `RUN` numbers come
    again): the positions after each gap wider than `WIDE` times the median (and `MIN_GAP`).

    Args:
        articles: article numbers, ascending.
    """
    gaps = list(map(sub, articles[1:], articles[:-1]))
    wide = _wide_of(gaps)
    if not gaps or max(gaps) <= wide:
        return []  # (most releases: no gap to look for one by one)
    return [at for at, gap in enumerate(gaps, 1) if gap > wide]


def resumed(numbers: Sequence[int], articles: Sequence[int]) -> list[int]:
    """Where a release too few of whose numbers come again for a pass to start is cut
    besides its pauses (`gap_cuts`): after each gap wider than `MIN_GAP` articles at a
    number that comes again, when numbers new to the release come after it (positions).

    A takedown can leave of a small upload its .nfo (or .sfv) alone, and its repost
    posts that again first, then the files the first post lost: one number again,
    too few for a pass; a post check's re-send of the .nfo comes alone, with no new
    number after it.

    Args:
        numbers: the release's segment numbers (its files' apart) in article order.
        articles: their article numbers, ascending.
    """
    first: dict[int, int] = {}
    for at, number in enumerate(numbers):
        first.setdefault(number, at)
    latest_new = max(first.values(), default=0)  # the last number new to the release
    return [
        at
        for at in range(1, latest_new)
        if articles[at] - articles[at - 1] > MIN_GAP and first[numbers[at]] < at
    ]


def _median_wide(articles: Sequence[int]) -> int:
    """A gap wider than this is a pause: `WIDE` times the median gap, at least `MIN_GAP`
    (`MIN_GAP` when no gap is wider: see `_wide_of`)."""
    return _wide_of(list(map(sub, articles[1:], articles[:-1])))


def _wide_of(gaps: list[int]) -> int:
    """`_median_wide` of the gaps between articles, for telling which of them are wider.

    When no gap is wider than `MIN_GAP`, none is wider than the answer
    either, and `MIN_GAP` is given without the sort for the median.
    """
    if not gaps or max(gaps) <= MIN_GAP:
        return MIN_GAP
    ordered = sorted(gaps)
    return max(MIN_GAP, WIDE * ordered[len(ordered) // 2])


def pauses(articles: Sequence[int]) -> list[tuple[int, int]]:
    """Where a file's posting paused long: (last article before, first article after) each.

    A pause is a gap wider than `WIDE` times the file's mean gap (less the
    widest) and `MIN_GAP` articles; a file of at most `WIDE + 1` segments is
    not looked at (reading its numbers costs more than its pauses tell: callers may pass
    such a file's numbers unread, as an empty list). A
    batch that holds the end of one post of a file and the start of its
    repost sends each apart, and the merge tells whether the later piece is
    the same upload (merge.py).

    Args:
        articles: the file's article numbers in order.
    """
    count = len(articles)
    if count <= WIDE + 1:
        return []
    widest = max(map(sub, articles[1:], articles[:-1]))
    # The mean of the other gaps: one long pause would make its own mean wide.
    wide = wide_gap(articles[-1] - articles[0] - widest, count - 1)
    if widest <= wide:
        return []
    return [(a, b) for a, b in pairwise(articles) if b - a > wide]


def wide_gap(span: int, count: int) -> int:
    """The gap that is a pause in a posting of `count` segments over `span` articles."""
    return max(MIN_GAP, WIDE * span // max(count - 1, 1))


def starts_over(numbers: Sequence[int], total: int) -> bool:
    """Whether a file's numbers ever fall well below the highest so far (see `restarts`);
    one pass of C-level operations, for the files that do not (most)."""
    window = min(SHUFFLE, total // 2)
    if not window or sorted(numbers) == numbers:
        # Ascending (a file's part after a batch cut, a file with gaps): never below.
        return False
    return max(map(sub, accumulate(numbers, max), numbers), default=0) > window


def restart_cuts(restarted: Sequence[int]) -> list[int]:
    """Where a release is cut for its files starting over (`restarts` of each file): one
    cut where the first file does, the others following within `MIN_GAP` articles."""
    started = sorted(restarted)
    return [
        b for a, b in zip([None, *started], started, strict=False) if a is None or b - a > MIN_GAP
    ]


def restarts(numbers: Sequence[int], articles: Sequence[int], total: int) -> list[int]:
    """The articles where a file's numbers start over (a repost that follows at once).

    Tools post a file's segments in order, a few places out of order over
    many connections; a post check re-sends one segment alone. So `RUN`
    segments in a row, all more than `SHUFFLE` (at most half of N) below the
    highest number so far, begin a new post of the file.

    Args:
        numbers: the file's segment numbers in article order.
        articles: their article numbers.
        total: N of the file.
    """
    if not starts_over(numbers, total):
        return []
    window = min(SHUFFLE, total // 2)
    found = []
    highest = 0
    low = 0  # segments in a row well below the highest so far
    for at, number in enumerate(numbers):
        if window and number < highest - window:
            low += 1
            if low == RUN:
                found.append(articles[at - RUN + 1])
                highest = max(numbers[at - RUN + 1 : at + 1])
                low = 0
        else:
            low = 0
            if number > highest:  # (not max(): a call per segment)
                highest = number
    return found
