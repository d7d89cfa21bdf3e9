"""Reposts apart from repeats (core/reposts.py, the indexer's pieces and the merge's generations).

A repost (the same poster posting the same files again, later, with new
message-ids) is a release of its own, wherever batches are cut; a post
check's repeat of one segment is not. Lines are written as the posting
tools write them (test_indexer's `upload`), never from the indexer's rules.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from email.utils import formatdate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_indexer import BASE, index, line, merged, skipped, upload

from usenet_indexer.core.batch import Batch
from usenet_indexer.core.merge import CatalogRelease, Pins, ReleaseMerger
from usenet_indexer.core.reposts import (
    MIN_GAP,
    RUN,
    SHUFFLE,
    WIDE,
    gap_cuts,
    pass_starts,
    pauses,
    repost_key,
    restarts,
    starts_over,
)

FILES = [("show.s01e01.part1.rar", 30), ("show.s01e01.part2.rar", 30), ("show.s01e01.par2", 1)]
HEAD = "Show.S01E01.1080p.WEB-DL-GRP"


def posted_twice(gap: int, *, missing: frozenset[tuple[str, int]] = frozenset()) -> list[str]:
    """An upload, then the same files again `gap` articles after its end, new message-ids.

    Dates go on as a server's do: a second every ten articles.
    """
    first = [text for text in upload(BASE, HEAD, FILES) if _name_and_k(text) not in missing]
    again = upload(BASE + len(first) + gap, HEAD, FILES, tag="again.")
    return [dated(text) for text in first + again]


def dated(text: str) -> str:
    fields = text.split("\t")
    fields[3] = formatdate(1_796_000_000 + (int(fields[0]) - BASE) // 10)
    return "\t".join(fields)


def _name_and_k(text: str) -> tuple[str, int]:
    subject = text.split("\t")[1]
    name = subject.split('"')[1]
    k = int(subject.rsplit("(", 1)[1].split("/")[0])
    return name, k


def segments_of(release: CatalogRelease) -> dict[str, list[str]]:
    return {f.name: [message_id for _, message_id, _ in f.segments] for f in release.files}


def assert_two_whole_posts(releases: list[CatalogRelease]) -> None:
    assert len(releases) == 2
    first, again = sorted(
        releases, key=lambda r: segments_of(r)[FILES[0][0]][0].startswith("again")
    )
    for release, tag in ((first, ""), (again, "again.")):
        ids = [m for mids in segments_of(release).values() for m in mids]
        assert all(m.startswith(tag) if tag else not m.startswith("again.") for m in ids)
    assert again.complete == 1.0
    assert first.key != again.key
    assert (first.repost_of, again.repost_of) == (None, first.key)


@pytest.mark.parametrize("gap", [0, 5_000])
def test_a_repost_is_a_release_of_its_own(gap: int) -> None:
    releases = merged(index(posted_twice(gap)))
    assert_two_whole_posts(releases)


@pytest.mark.parametrize("every", [7, 31, 45, 61, 100])
def test_a_repost_is_a_release_of_its_own_wherever_batches_are_cut(every: int) -> None:
    lines = posted_twice(1_000)
    whole = merged(index(lines))
    cut = merged(index(lines, batch_every=every))
    assert_two_whole_posts(cut)
    assert {r.key: segments_of(r) for r in cut} == {r.key: segments_of(r) for r in whole}


def test_a_repost_after_a_takedown_is_whole_and_apart() -> None:
    """The first post lost segments (taken down, never seen); the repost has them all."""
    rng = random.Random(4)
    lost = frozenset(
        (name, k) for name, total in FILES[:2] for k in rng.sample(range(1, total + 1), 20)
    )
    releases = merged(index(posted_twice(3_000, missing=lost)))
    assert_two_whole_posts(releases)
    first = next(r for r in releases if r.complete < 1.0)
    assert sum(len(f.segments) for f in first.files) == 61 - len(lost)


@pytest.mark.parametrize("gap", [0, 40])
@pytest.mark.parametrize(
    "lost",
    [
        pytest.param(range(1, 6), id="its-first-segments"),
        pytest.param(range(1, 30, 3), id="every-third"),
        pytest.param(range(2, 31), id="all-but-its-first"),
    ],
)
def test_a_repost_soon_after_a_takedown_starts_where_it_posts_the_lost_segments(
    gap: int, lost: range
) -> None:
    """The first post lost segments of its first file (taken down), and the repost follows
    within seconds: the repost posts those first, new to the first post, before it posts
    anything again; they are the repost's, and each post is whole as posted."""
    missing = frozenset((FILES[0][0], k) for k in lost)
    kept = [text for text in upload(BASE, HEAD, FILES) if _name_and_k(text) not in missing]
    again = upload(BASE + 61 + gap, HEAD, FILES, tag="again.")
    lines = [dated(text) for text in kept + again]
    # In one batch, and in two cut where the repost begins.
    for cuts in ((), (len(kept),)):
        releases = merged(index(lines, cuts=cuts))
        assert_two_whole_posts(releases)
        original = next(r for r in releases if r.repost_of is None)
        assert sum(len(f.segments) for f in original.files) == len(kept)


@pytest.mark.parametrize("version", range(8))
def test_an_upload_reposted_twice_after_a_takedown_of_its_volumes_is_three_releases(
    version: int,
) -> None:
    """A small upload (an .nfo, a rar set of two segments, a par2 set) lost its rar set
    to a takedown and was posted again whole twice, minutes apart: three releases, each
    post's files in its own, whatever the order of a second's file keys (the repost's
    .nfo and first volume are posted in one second; its counter says which came first;
    names of eight versions give keys in either order)."""
    name = f"tool.v5.{version}"
    files = [(f"{name}.nfo", 1), (f"{name}.rar", 2), (f"{name}.par2", 1),
             (f"{name}.vol00+01.par2", 1)]  # fmt: skip
    head = f"Tool.v5.{version}.Multilingual-GRP"
    first = [text for text in upload(BASE, head, files) if ".rar" not in text.split("\t")[1]]
    again = upload(BASE + 20_000, head, files, tag="again.")
    third = upload(BASE + 30_000, head, files, tag="third.")
    for cuts in ((), (len(first),), (len(first) + len(again),)):
        releases = merged(index([dated(text) for text in first + again + third], cuts=cuts))
        by_date = sorted(releases, key=lambda r: r.posted)
        assert [sorted(segments_of(r)) for r in by_date] == [
            sorted(name for name, _ in files if name != files[1][0]),
            sorted(name for name, _ in files),
            sorted(name for name, _ in files),
        ]
        for release, tag in zip(by_date, ("", "again.", "third."), strict=True):
            ids = [m for mids in segments_of(release).values() for m in mids]
            assert all(
                m.startswith(tag) if tag else not m.startswith(("again.", "third.")) for m in ids
            )


@pytest.mark.parametrize("kept", [".nfo", ".sfv"])
def test_a_small_upload_whose_first_post_kept_only_its_first_file_is_reposted_apart(
    kept: str,
) -> None:
    """An ebook's upload (a one-segment .nfo or .sfv, then the book) lost the book to a
    takedown; minutes later its poster posts both again. Only the first file comes
    again, too few numbers for a pass: the repost is a release of its own all the
    same, the book in it, not in the first post's."""
    name = "Author - Title (1999)"
    files = [(f"{name}{kept}", 1), (f"{name}.epub", 1)]
    first = upload(BASE, name, files)[:1]
    again = upload(BASE + 6_000, name, files, tag="again.")
    releases = merged(index([dated(text) for text in first + again]))
    by_date = sorted(releases, key=lambda r: r.posted)
    assert [sorted(segments_of(r)) for r in by_date] == [
        [files[0][0]],
        sorted(name for name, _ in files),
    ]
    assert all(m.startswith("again.") for mids in segments_of(by_date[1]).values() for m in mids)
    assert by_date[1].repost_of == by_date[0].key


def test_a_post_checks_resend_of_its_first_file_at_its_end_stays_with_it() -> None:
    """A post check re-sends a segment of the first file after the last file, and the
    repost of the upload follows minutes later (a pause): the re-send is the first
    post's repeat, not the start of the repost, whose first file it is in."""
    first = upload(BASE, HEAD, FILES)
    resent = line(BASE + len(first), first[0].split("\t")[1], "resend.1@ex")
    again = upload(BASE + len(first) + 2_000, HEAD, FILES, tag="again.")
    releases = merged(index([dated(text) for text in [*first, resent, *again]]))
    assert_two_whole_posts(releases)
    repost = next(r for r in releases if r.repost_of is not None)
    assert "resend.1@ex" not in segments_of(repost)[FILES[0][0]]


def test_a_post_checks_repeat_is_no_repost() -> None:
    """Segment 12 sent again 20 articles later under a new message-id: one release, one repeat."""
    lines = upload(BASE, HEAD, FILES)
    subject = lines[11].split("\t")[1]
    lines.insert(31, line(BASE + 31, subject, "retry.12@ex"))
    renumbered = [f"{BASE + at}\t{text.split(chr(9), 1)[1]}" for at, text in enumerate(lines)]
    batches = index(renumbered)
    [release] = merged(batches)
    assert release.complete == 1.0
    assert "retry.12@ex" not in {m for _, m, _ in release.files[0].segments}
    assert skipped(batches)["repeated_segment"] == 1


def test_a_chunk_sent_twice_changes_nothing() -> None:
    """A retried batch brings the same chunk again: the same message-ids, no new generation."""
    batches = index(posted_twice(2_000), batch_every=40)
    once = merged(batches)
    twice = merged(batches + batches)
    assert [segments_of(r) for r in twice] == [segments_of(r) for r in once]


def test_a_repost_is_a_probe_candidate_as_its_first_post_is_wherever_a_batch_cuts() -> None:
    """A NewsUP upload of random names (a probe candidate) posted again. In one batch the
    repost's chunk comes under its repost key, which the batch reports; in a batch of its
    own under the release key (reported by both batches), whose generation is the first
    post's. Each post is a candidate either way: a generation is one when a chunk it
    holds came under a key a batch reported."""
    names = [("odJkhbWKWURd.par2", 1), ("odJkhbWKWURd.vol00+01.par2", 2), ("toR4Kk2Da1L9", 40)]
    one = newsup_upload(BASE, names, "a")
    two = newsup_upload(BASE + len(one) + 100, names, "b")
    for cuts in ((), {len(one)}):
        releases = merged(index(one + two, cuts=cuts))
        assert len(releases) == 2
        assert [r.probe_candidate for r in releases] == [True, True], cuts


def test_a_repost_that_lost_its_first_segments_pads_its_counter_as_its_first_post() -> None:
    """A post of a file whose counter the poster pads ("(01/30)"), and its repost, of
    which a takedown left segments 13 to 30. In one batch the repost's chunk has the
    subject of the file's first line there, the first post's; in a batch of its own it
    cannot tell how the poster pads. Each post's file pads as the poster does."""
    head = 'Padded.Release [1/1] - "padded.release.rar" yEnc '
    texts = [line(0, f"{head}({k:02}/30)", f"p{k}@ex") for k in range(1, 31)]
    texts += [line(0, f"{head}({k:02}/30)", f"again.p{k}@ex") for k in range(13, 31)]
    lines = [
        dated(f"{BASE + at * 10}\t{text.split(chr(9), 1)[1]}") for at, text in enumerate(texts)
    ]
    for cuts in ((), {30}):
        batches = index(lines, cuts=cuts)
        for order in (batches, batches[::-1]):
            releases = merged(order)
            assert len(releases) == 2
            assert {r.files[0].subject for r in releases} == {f"{head}(01/30)"}, cuts


def test_pass_starts_at_runs_of_repeats_and_pauses() -> None:
    numbers = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
    articles = list(range(100, 110))
    assert pass_starts(numbers, articles) == [0, 5]
    # One number again among new ones (a post check) starts nothing.
    assert pass_starts([1, 2, 3, 2, 4, 5], list(range(6))) == [0]
    # A pass of two numbers (one .nfo and one .sfv) posted again: both again, in a row.
    assert pass_starts([1, 3, 1, 3], list(range(4))) == [0, 2]
    assert pass_starts([1, 3, 1, 4], list(range(4))) == [0]
    assert pass_starts([1, 1], list(range(2))) == [0]
    # A long pause cuts, whatever follows.
    assert pass_starts([1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 5_000, 5_001]) == [0, 4]


def test_a_pass_starts_where_files_start_over_after_new_numbers() -> None:
    """A batch that holds the end of one post of a file (9 to 23) and then two whole
    posts of it: each post starts over at 1 (`restarts`, the indexer's cuts), new to
    the pass; its repeats (9 on) started each pass inside the next post."""
    numbers = [*range(9, 24), *range(1, 24), *range(1, 24)]
    articles = list(range(len(numbers)))
    assert pass_starts(numbers, articles) == [0, 23, 46]  # at each post's segment 9
    restarted = restarts(numbers, articles, 23)
    assert restarted == [15, 38]
    assert pass_starts(numbers, articles, resets=set(restarted)) == [0, 15, 38]
    # After repeats the run goes on: a repost's .nfo (0) comes again just before its
    # file starts over, and its pass starts at the .nfo.
    numbers = [0, *range(1, 24), 0, *range(1, 24)]
    articles = list(range(len(numbers)))
    assert pass_starts(numbers, articles, resets={25}) == [0, 24]


def test_pauses_and_restarts_in_a_file() -> None:
    articles = [*range(1000, 1030), *range(9000, 9030)]
    assert pauses(articles) == [(1029, 9000)]
    # Too few segments to tell a pause from a slow post.
    assert pauses(articles[:20]) == []
    # Numbers start over: 28, 29, 30, then 1, 2, 3 (not one segment re-sent).
    numbers = [*range(1, 31), *range(1, 11)]
    assert restarts(numbers, list(range(40)), 30) == [30]
    assert restarts([*range(1, 31), 5, *range(31, 40)], list(range(40)), 40) == []


def newsup_upload(
    first: int,
    names: list[tuple[str, int]],
    tag: str,
    poster: str = "NewsUP <NewsUP@somewhere.cbr>",
) -> list[str]:
    """NewsUP's renamed upload (lib/NewsUP/Article.pm subject, default From)."""
    texts: list[str] = []
    for i, (name, total) in enumerate(names, start=1):
        for k in range(1, total + 1):
            subject = f'[{i}/{len(names)}] - "{name}" ({k}/{total})'
            at = first + len(texts)
            texts.append(
                dated(
                    line(
                        at,
                        subject,
                        f"{tag}{i}.{k}@x.newsup",
                        poster=poster,
                    )
                )
            )
    return texts


def test_uploads_under_a_tools_default_from_hours_apart_are_apart() -> None:
    """Random names keyed by poster and M: two NewsUP users' uploads, hours apart, stay two."""
    one = newsup_upload(
        BASE, [("odJkhbWKWURd.par2", 1), ("rename.with.this.par2", 1), ("toR4Kk2Da1L9", 40)], "a"
    )
    two = newsup_upload(
        BASE + 50_000,
        [("5bCp3WoignB4.par2", 1), ("rename.with.this.par2", 1), ("j0OClBx99nHB", 40)],
        "b",
    )
    releases = merged(index(one + two))
    ids = sorted(sorted(m[:1] for mids in segments_of(r).values() for m in mids) for r in releases)
    assert len(releases) == 2
    assert [set(group) for group in ids] == [{"a"}, {"b"}]


def test_uploads_under_a_tools_default_from_hours_apart_in_two_batches_are_apart() -> None:
    """The same, without a file name in common (nothing repeats under the key): each
    upload in a batch of its own is a chunk of its own, and the later one's files,
    hours after the first's, are a generation of their own however the merge takes
    the key (the catalog build's closure counts on it: core/catalog.py's `_runs`)."""
    one = newsup_upload(BASE, [("odJkhbWKWURd.par2", 1), ("toR4Kk2Da1L9", 40)], "a")
    two = newsup_upload(BASE + 50_000, [("5bCp3WoignB4.par2", 1), ("j0OClBx99nHB", 40)], "b")
    releases = merged(index(one + two, batch_every=len(one)))
    ids = sorted(
        sorted({m[:1] for mids in segments_of(r).values() for m in mids}) for r in releases
    )
    assert ids == [["a"], ["b"]]


@pytest.mark.parametrize(
    ("poster", "apart"),
    [
        ("NewsUP <NewsUP@somewhere.cbr>", 5_000),  # minutes apart, under the tool's From
        ("Tom <tom4596@hotmail.com>", 50_000),  # hours apart, under a poster's own
    ],
)
def test_random_named_uploads_in_a_batch_each_are_apart_whatever_their_gap(
    poster: str, apart: int
) -> None:
    """Two uploads of random names under one From and M, each alone in its batch: one
    key's two chunks with nothing in common but [1/2] and [2/2] of other names, each
    another upload's i-th file. The one-pass path of a key (`merge._only_generation`)
    made them one release of four files, where `_split` makes two."""
    one = newsup_upload(BASE, [("odJkhbWKWURd.par2", 1), ("toR4Kk2Da1L9", 40)], "a", poster)
    two = newsup_upload(BASE + apart, [("5bCp3WoignB4.par2", 1), ("j0OClBx99nHB", 40)], "b", poster)
    releases = merged(index(one + two, batch_every=len(one)))
    ids = sorted(
        sorted({m[:1] for mids in segments_of(r).values() for m in mids}) for r in releases
    )
    assert ids == [["a"], ["b"]]
    assert all(len(r.files) == 2 for r in releases)


def test_uploads_under_a_tools_default_from_minutes_apart_are_apart() -> None:
    """Two NewsUP uploads eight minutes apart, each [1/3]..[3/3] with its own random names
    and the tool's fixed `rename.with.this.par2`: a file of another name as the i-th of M
    is another upload's, so they stay two."""
    one = newsup_upload(
        BASE, [("odJkhbWKWURd.par2", 1), ("rename.with.this.par2", 1), ("toR4Kk2Da1L9", 40)], "a"
    )
    two = newsup_upload(
        BASE + 5_000,
        [("5bCp3WoignB4.par2", 1), ("rename.with.this.par2", 1), ("j0OClBx99nHB", 40)],
        "b",
    )
    for every in (None, 17):
        releases = merged(index(one + two, batch_every=every))
        ids = sorted(
            sorted({m[:1] for mids in segments_of(r).values() for m in mids}) for r in releases
        )
        assert ids == [["a"], ["b"]]


def test_a_post_checks_resend_stays_with_its_post_when_a_repost_follows() -> None:
    """Segment 12 re-sent 200 articles after its file, the whole upload posted again an hour
    later: the re-send belongs to the first post (a repeat there), not to the repost."""
    first = upload(BASE, HEAD, FILES)
    resend = line(BASE + len(first) + 200, first[11].split("\t")[1], "retry.12@ex")
    again = upload(BASE + 40_000, HEAD, FILES, tag="again.")
    lines = [dated(text) for text in [*first, resend, *again]]
    for every in (None, 61, 150):
        releases = merged(index(lines, batch_every=every))
        assert_two_whole_posts(releases)
        ids = {m for r in releases for mids in segments_of(r).values() for m in mids}
        assert "retry.12@ex" not in ids


def in_flight(texts: list[str], every: int = 15) -> list[str]:
    """An upload's lines as a busy group has them: other uploads' articles between its
    own (`every` article numbers apart, so a second and a half apart by `dated`)."""
    first = int(texts[0].split("\t", 1)[0])
    return [
        dated(f"{first + at * every}\t{text.split(chr(9), 1)[1]}") for at, text in enumerate(texts)
    ]


def test_newsup_uploads_minutes_apart_keep_their_par2_sets() -> None:
    """Two NewsUP renamed uploads under its default From eight minutes apart, each posting
    its par2 set (a random 12-character name, the index and two volumes) first, then the
    fixed `rename.with.this.par2` and the renamed volume (lib/NewsUP/Utils.pm
    `_obfuscate_files`). Its random names are letters and digits, some without a digit
    (the first's par2 set, the second's volume): those are keyed by their name, the others
    by poster and M, so the second's par2 set comes under the key of the first's
    `rename.with.this.par2` and volume. It goes with its own `rename.with.this.par2`."""
    one = newsup_upload(
        BASE,
        [
            ("VMJkWEfeFmXA.par2", 1),
            ("VMJkWEfeFmXA.vol00+01.par2", 1),
            ("VMJkWEfeFmXA.vol01+01.par2", 1),
            ("rename.with.this.par2", 1),
            ("uV3ZuBPEHDd2", 40),
        ],
        "a",
    )
    two = in_flight(
        newsup_upload(
            BASE + 5_000,
            [
                ("FtDSHd4ZtbE9.par2", 1),
                ("FtDSHd4ZtbE9.vol00+01.par2", 1),
                ("FtDSHd4ZtbE9.vol01+01.par2", 1),
                ("rename.with.this.par2", 1),
                ("AkugKBvxcYBG", 30),
            ],
            "b",
        )
    )
    for every in (None, 17, 60):
        releases = merged(index(one + two, batch_every=every))
        ids = sorted(
            sorted({m[:1] for mids in segments_of(r).values() for m in mids}) for r in releases
        )
        assert ids == [["a"], ["b"]]
        assert sorted(len(r.files) for r in releases) == [5, 5]


def started_while(one: list[str], two: list[str], after: int) -> list[str]:
    """`two` begun `after` lines into `one` (two uploads at once over one server's
    connections), their lines alternating from there; a line a second, ten article
    numbers apart."""
    order = one[:after] + [
        text for pair in itertools.zip_longest(one[after:], two) for text in pair if text
    ]
    return [dated(f"{BASE + 10 * at}\t{text.split(chr(9), 1)[1]}") for at, text in enumerate(order)]


def test_newsup_uploads_of_one_m_posted_at_once_are_two_releases() -> None:
    """Two NewsUP renamed uploads of ten files each under its default From, the second
    begun while the first posts its first renamed volume (lib/NewsUP/Utils.pm
    `_obfuscate_files`; each posts its par2 set, then `rename.with.this.par2`, then the
    volumes, in the order of its counter). The first's par2 set is named with letters
    only (a key of its own), the second's with digits too: it comes under the key of
    the first's renamed volumes (poster and M), numbered [1/10] to [6/10] sixteen
    seconds after the first's [7/10] began. A tool posts in the order of its counter:
    numbers that start over below a generation's and go on to one of its numbers again
    are another upload's, not files it lost, even seconds after it."""
    # (A batch cut inside the first's [7/10], the second's files between its chunks,
    # still splits it: cut every 40 lines, into three releases.)
    for every in (None, 150, 300):
        releases = merged(index(newsup_uploads_at_once(), batch_every=every))
        ids = sorted(
            sorted({m[:1] for mids in segments_of(r).values() for m in mids}) for r in releases
        )
        assert ids == [["a"], ["b"]], every
        assert sorted(len(r.files) for r in releases) == [10, 10]


def newsup_uploads_at_once() -> list[str]:
    """The lines of `test_newsup_uploads_of_one_m_posted_at_once_are_two_releases`."""
    one = newsup_upload(
        BASE,
        [
            ("NzvUcpgSGKGD.par2", 1),
            ("NzvUcpgSGKGD.vol00+01.par2", 1),
            ("NzvUcpgSGKGD.vol01+02.par2", 2),
            ("NzvUcpgSGKGD.vol03+04.par2", 4),
            ("NzvUcpgSGKGD.vol07+02.par2", 2),
            ("rename.with.this.par2", 1),
            ("rc5P2mso2C75", 50),
            ("x66GDPINAfml", 50),
            ("iR654QuH31La", 50),
            ("adCtbdqwHh0J", 14),
        ],
        "a",
    )
    two = newsup_upload(
        BASE,
        [
            ("lr9S8XY5VmkA.par2", 1),
            ("lr9S8XY5VmkA.vol00+01.par2", 1),
            ("lr9S8XY5VmkA.vol01+02.par2", 2),
            ("lr9S8XY5VmkA.vol03+04.par2", 4),
            ("lr9S8XY5VmkA.vol07+08.par2", 8),
            ("lr9S8XY5VmkA.vol15+09.par2", 9),
            ("rename.with.this.par2", 1),
            ("VshbUEMk9uku", 100),
            ("nHxbRsHAhnmC", 100),
            ("1VDhYp9wq0Ok", 70),
        ],
        "b",
    )
    # The second's [1/10] sixteen seconds after the first's [7/10] began.
    return started_while(one, two, after=10 + 1 + 16)


POSTER = "Lisa <lisa@JBinUp.local>"


def scene_upload(first: int, tag: str) -> list[str]:
    """A scene upload as JBinUp posts it (subject `[i/M] - "name" - size yEnc (k/N)`, no
    head): the .nfo and .sfv named after the release, the volumes after the group's
    lower-case name, so the .nfo and .sfv are a release key of their own."""
    files = [
        ("Wolf.Echo.S08E15.1080p.AMZN.WEB.AAC2.0.x264-SPARKS.nfo", 1),
        ("Wolf.Echo.S08E15.1080p.AMZN.WEB.AAC2.0.x264-SPARKS.sfv", 1),
        ("sparks-wolf.echo.s08e15.1080p.rar", 15),
        ("sparks-wolf.echo.s08e15.1080p.r00", 15),
    ]
    texts: list[str] = []
    for i, (name, total) in enumerate(files, start=1):
        for k in range(1, total + 1):
            subject = f'[{i}/{len(files)}] - "{name}" - 25.22 MB yEnc ({k}/{total})'
            message_id = f"{tag}{i}.{k}@JBinUp.local"
            texts.append(line(first + len(texts), subject, message_id, poster=POSTER))
    return [dated(text) for text in texts]


@pytest.mark.parametrize("gap", [0, 400])
def test_a_repost_of_an_nfo_and_sfv_key_is_no_repeat(gap: int) -> None:
    """The upload posted again right after (new message-ids): its .nfo and .sfv come again
    both, in a row. A post check re-sends the one segment that failed, so that is the
    repost's .nfo and .sfv, and each post is whole and apart."""
    first = scene_upload(BASE, "")
    again = scene_upload(BASE + len(first) + gap, "again.")
    for every in (None, 20):
        batches = index(first + again, batch_every=every)
        releases = sorted(merged(batches), key=lambda r: r.posted)
        assert len(releases) == 2
        for release, tag in zip(releases, ("", "again."), strict=True):
            ids = [m for mids in segments_of(release).values() for m in mids]
            assert len(ids) == 32
            assert all(m.startswith("again.") == bool(tag) for m in ids)
        assert skipped(batches).get("repeated_segment", 0) == 0


def test_a_post_checks_resend_of_an_nfo_is_a_repeat() -> None:
    """One of the two (the .nfo) sent again just after its post: a repeat, no repost."""
    lines = scene_upload(BASE, "")
    resend = line(BASE + 5, lines[0].split("\t")[1], "retry.nfo@JBinUp.local", poster=POSTER)
    later = [f"{BASE + at}\t{text.split(chr(9), 1)[1]}" for at, text in enumerate(lines[5:], 6)]
    batches = index([*lines[:5], dated(resend), *later])
    [release] = merged(batches)
    assert release.complete == 1.0
    assert skipped(batches)["repeated_segment"] == 1


@pytest.mark.parametrize("cuts", [(), {2}, {4}, {8}])
def test_reposts_of_an_upload_whose_first_post_lost_its_first_file_are_each_whole(
    cuts: set[int],
) -> None:
    """gopoststuff's subject (`{name} [{i}/{M}] - "{file}" yEnc ({k}/{N})`, sample.conf's
    `{{.Dir}} [{{.FileNum}}/{{.FileCount}}] - "{{.Name}}" yEnc ({{.Part}}/{{.Parts}})`):
    a takedown took the first post's .mobi, the first file; the poster posts the ebook
    again four times, minutes apart. Each repost's .mobi, numbered before the .par2 and
    .vol the first post holds and posted minutes after them, is its own post's (each
    release held the next post's book: the generator's 4M posting-tools lines)."""
    name = "Jay Lake - City House Sky (1977)"
    files = [(f"{name}.mobi", 2), (f"{name}.par2", 1), (f"{name}.vol00+01.par2", 1)]
    lines = []
    for n in range(5):
        at = BASE + 16_000 * n
        for i, (file, total) in enumerate(files, start=1):
            if n == 0 and i == 1:
                continue  # taken down
            for k in range(1, total + 1):
                subject = f'{name} [{i}/3] - "{file}" yEnc ({k}/{total})'
                lines.append(dated(line(at, subject, f"p{n}.{i}.{k}@gps", poster="yuki@mail.ru")))
                at += 7
    for releases in (merged(index(lines, cuts=cuts)),):
        posts = sorted(
            sorted({m.split(".", 1)[0] for mids in segments_of(r).values() for m in mids})
            for r in releases
        )
        assert posts == [["p0"], ["p1"], ["p2"], ["p3"], ["p4"]]
        assert sorted(len(r.files) for r in releases) == [2, 3, 3, 3, 3]


ALBUM = [
    ("Artist-Album-(CAT168)-WEB-2021-GRP.nfo", 1),
    *((f"{n:02}-artist-track_{n}.flac", 3) for n in range(1, 9)),
    ("Artist-Album-(CAT168)-WEB-2021-GRP.par2", 1),
    ("Artist-Album-(CAT168)-WEB-2021-GRP.vol00+01.par2", 1),
    ("Artist-Album-(CAT168)-WEB-2021-GRP.vol01+01.par2", 1),
]
NGPOST_FROM = "8o3Ngh5S6Yh6r@ngPost.com"  # src/NgPost.h randomStdFrom: 13 letters/digits


def ngpost_album(
    first: int,
    tag: str,
    lost: frozenset[tuple[int, int]] = frozenset(),
    *,
    files: list[tuple[str, int]] = ALBUM,
    every: int = 60,
) -> list[str]:
    """An album posted by ngPost: subject `[0i/M] "name" (k/N)` (src/nntp/NntpArticle.cpp),
    its random From, the files one after another (`every` article numbers apart); `lost`:
    (i, k) a takedown took."""
    texts: list[str] = []
    for i, (name, total) in enumerate(files, start=1):
        for k in range(1, total + 1):
            if (i, k) not in lost:
                subject = f'[{i:02}/{len(files)}] "{name}" ({k}/{total})'
                texts.append(line(first, subject, f"{tag}{i}.{k}@ngPost", poster=NGPOST_FROM))
    return in_flight(texts, every=every)


def test_an_album_reposted_after_a_takedown_is_two_whole_releases() -> None:
    """A takedown took a track whole and most of two others (tracks of three segments,
    each a release key of its own); the poster posts the album again right after. Each
    post is a release of its own: the repost's track the first post lacks goes with the
    repost (its files came just before it), and the repost's segments of the tracks the
    first post kept some of are the repost's, not the first post's missing ones."""
    lost = frozenset({(5, 1), (5, 2), (5, 3), (6, 2), (8, 1), (8, 3)})
    first = ngpost_album(BASE, "", lost)
    again = ngpost_album(BASE + 60 * len(first) + 500, "again.")
    for every in (None, 100):
        releases = sorted(merged(index(first + again, batch_every=every)), key=lambda r: r.posted)
        assert len(releases) == 2
        for release, tag in zip(releases, ("", "again."), strict=True):
            ids = [m for mids in segments_of(release).values() for m in mids]
            assert all(m.startswith("again.") == bool(tag) for m in ids)
        assert [len(r.files) for r in releases] == [len(ALBUM) - 1, len(ALBUM)]
        assert releases[1].complete == 1.0


def test_an_album_reposted_soon_after_a_takedown_of_tracks_first_segments_is_two_releases() -> None:
    """Tracks of eight segments, each a release key of its own, posted over several
    connections (a little out of order, as Nyuu posts them); a takedown took segments of
    two tracks, and the poster posts the album again minutes later. In the repost, a
    track's lost segments come among its first, before three of its repeats in a row:
    each track's repost is the repost's all the same, not the first post's lost
    segments (its key's repeats start its pass after the upload's repost began)."""
    tracks = [(f"{n:02}-artist-track_{n}.flac", 8) for n in range(1, 5)]
    files = [("Artist-Album-(CAT7)-WEB-2021-GRP.nfo", 1), *tracks,
             ("Artist-Album-(CAT7)-WEB-2021-GRP.par2", 1)]  # fmt: skip
    # The order each post sends a file's segments in, by [i/M] (the rest in order).
    first_order = {2: [4, 1, 3, 6, 7], 4: [4, 8, 5, 6]}  # the others taken down
    again_order = {2: [2, 4, 3, 1, 7, 5, 8, 6], 4: [4, 1, 2, 3, 7, 6, 5, 8]}

    def post(tag: str, order: dict[int, list[int]]) -> list[str]:
        texts = []
        for i, (name, total) in enumerate(files, start=1):
            for k in order.get(i, range(1, total + 1)):
                subject = f'[{i:02}/{len(files)}] "{name}" ({k}/{total})'
                texts.append(line(BASE, subject, f"{tag}{i}.{k}@ngPost", poster=NGPOST_FROM))
        return texts

    first = in_flight(post("", first_order), every=20)
    again = in_flight(post("again.", again_order), every=20)
    again = [f"{int(t.split(chr(9), 1)[0]) + 20 * len(first) + 4_000}\t{t.split(chr(9), 1)[1]}"
             for t in again]  # fmt: skip
    for every in (None, 100):
        lines = [dated(text) for text in first + again]
        releases = sorted(merged(index(lines, batch_every=every)), key=lambda r: r.posted)
        assert len(releases) == 2
        for release, tag in zip(releases, ("", "again."), strict=True):
            ids = [m for mids in segments_of(release).values() for m in mids]
            assert all(m.startswith("again.") == bool(tag) for m in ids)
        assert releases[1].complete == 1.0


def test_an_album_posted_again_and_again_is_one_release_a_post_where_a_batch_cuts_a_track() -> None:
    """ngPost posts an album (tracks of 23 segments, each file a release key of its own)
    and then the same album again and again at once, new message-ids each time; a
    takedown took most of a track of the first post. A batch cut inside that track in
    the third post leaves the next batch the end of the track and then whole posts of
    it: each post's copy of the track starts over at 1, new numbers to what the batch
    held of the third's, and their repeats started each post's pass at segment 9. The
    next post's first eight segments went with the post before (they filled the
    takedown's gap), and every later post held the next one's eight (seen in
    `uidx index`'s batches of 500,000 articles over the generator's 4M posting-tools
    lines: six releases of one album mixed). Each post is its own release whatever the
    cut, as in one pass."""
    album = [
        ("Artist-Album-(CAT587)-WEB-2006-TVP.nfo", 1),
        *((f"{n:02}-artist-track_{n}.flac", 23) for n in range(1, 5)),
    ]
    lost = frozenset((4, k) for k in range(1, 24) if k not in (1, 6, 13, 18, 23))

    lines: list[str] = []
    for n in range(5):
        taken = lost if n == 0 else frozenset()
        lines += ngpost_album(BASE + 40_000 * n, f"p{n}.", taken, files=album, every=20)
    # Inside track 3 (album file 4) of the third post: its segment 8 is the last before.
    cut = next(at for at, text in enumerate(lines, start=1) if "p2.4.8@" in text.split("\t")[4])
    whole = merged(index(lines))
    for batches in (index(lines, cuts={cut}), index(lines, cuts={cut}, batch_every=400)):
        releases = sorted(merged(batches), key=lambda r: r.posted)
        assert [
            sorted({m.split(".", 1)[0] for mids in segments_of(r).values() for m in mids})
            for r in releases
        ] == [["p0"], ["p1"], ["p2"], ["p3"], ["p4"]]
        assert {r.key: segments_of(r) for r in releases} == {r.key: segments_of(r) for r in whole}


def test_an_albums_sfv_posted_again_first_in_its_repost_is_the_reposts() -> None:
    """An album posted again: its .sfv (a release key of its own, one segment) comes first,
    then the tracks, whose repeats start the repost's pass in the batch's other keys. The
    .sfv's copy comes just before that start, so it is the repost's (a post check re-sends
    a segment seconds after its post, not just before its poster's next pass of the upload);
    one pass took it for a re-send, while a batch that holds the repost alone keeps it."""
    album = [
        ("Artist-Album-(CAT168)-WEB-2021-GRP.sfv", 1),
        *((f"{n:02}-artist-track_{n}.flac", 3) for n in range(1, 9)),
    ]

    def post(first: int, tag: str) -> list[str]:
        texts = []
        for i, (name, total) in enumerate(album, start=1):
            for k in range(1, total + 1):
                subject = f'[{i:02}/{len(album)}] "{name}" ({k}/{total})'
                texts.append(line(first, subject, f"{tag}{i}.{k}@ngPost", poster=NGPOST_FROM))
        return in_flight(texts, every=60)

    lines = post(BASE, "") + post(BASE + 60 * 25 + 3_000, "again.")
    for cuts in ((), {25}):
        batches = index(lines, cuts=cuts)
        releases = sorted(merged(batches), key=lambda r: r.posted)
        assert [len(r.files) for r in releases] == [9, 9], cuts
        assert skipped(batches).get("repeated_segment", 0) == 0


def test_a_sample_set_posted_last_stays_with_its_upload_when_a_repost_follows() -> None:
    """The upload's sample and its par2, numbered after the volumes, are its last files;
    the poster posts it all again at once. A batch cut after the volumes leaves the
    sample set in one piece with the repost's first files: the sample set stays with its
    upload (a tool posts in the order of its file counter), not with the repost."""
    files = [
        ("show.s01e01.nfo", 1),
        ("show.s01e01.par2", 1),
        ("show.s01e01.part1.rar", 30),
        ("show.s01e01.part2.rar", 30),
        ("sample-show.s01e01.mkv", 10),
        ("sample-show.s01e01.par2", 1),
    ]
    first = in_flight(upload(BASE, HEAD, files), every=10)
    after = int(first[-1].split("\t", 1)[0]) + 10
    again = in_flight(upload(after, HEAD, files, tag="again."), every=10)
    for every in (None, 62):
        releases = sorted(merged(index(first + again, batch_every=every)), key=lambda r: r.posted)
        assert len(releases) == 2
        for release, tag in zip(releases, ("", "again."), strict=True):
            ids = [m for mids in segments_of(release).values() for m in mids]
            assert len(ids) == 73
            assert all(m.startswith("again.") == bool(tag) for m in ids)


SCENE = "Edge.S01E10.1080p.WEB.x265-NTb"
BARE_FILES = [
    (f"{SCENE}.nfo", 1),
    (f"{SCENE}.mkv", 50),
    (f"{SCENE}.par2", 1),
    (f"{SCENE}.vol00+01.par2", 1),
    (f"{SCENE}.vol01+02.par2", 2),
    (f"{SCENE}.vol03+04.par2", 4),
]


def bare_upload(
    first: int, files: list[tuple[str, int]], tag: str, *, counter: bool = False
) -> list[str]:
    """An upload whose subjects are `"name" yEnc (k/N)`, without a head (the files' stem
    links them) and, unless `counter`, without [i/M]; the files one after another."""
    texts: list[str] = []
    for i, (name, total) in enumerate(files, start=1):
        numbered = f"[{i}/{len(files)}] - " if counter else ""
        for k in range(1, total + 1):
            subject = f'{numbered}"{name}" yEnc ({k}/{total})'
            message_id = f"{tag}{name}.{k}@ex"
            texts.append(line(first + len(texts), subject, message_id, poster="Klaus <k@ftd.nu>"))
    return texts


def posted_again_at_once(
    files: list[tuple[str, int]], *, every: int = 15, counter: bool = False
) -> list[str]:
    """A bare upload, in flight, and the same posted again right after it (new ids)."""
    first = in_flight(bare_upload(BASE, files, "", counter=counter), every=every)
    after = int(first[-1].split("\t", 1)[0]) + every
    return first + in_flight(bare_upload(after, files, "again.", counter=counter), every=every)


def assert_each_post_its_own(releases: list[CatalogRelease], segments: int) -> None:
    """Two releases, the first post's segments in one and the repost's in the other."""
    assert len(releases) == 2
    for release, tag in zip(sorted(releases, key=lambda r: r.posted), ("", "again."), strict=True):
        ids = [m for mids in segments_of(release).values() for m in mids]
        assert len(ids) == segments
        assert all(m.startswith("again.") == bool(tag) for m in ids), release.name


def test_a_post_posted_again_at_once_keeps_its_par2_set_wherever_a_batch_cuts_it() -> None:
    """A post (.nfo, video, par2 set) posted again at once: the repost's .nfo comes
    seconds after the post's last volume. A batch cut anywhere in the post's .nfo and
    video leaves its par2 set in a piece with the repost's .nfo (under the post's key:
    that batch saw no .nfo before it), and the par2 set, new to the post's generation and
    nearer in date to that .nfo than to the post's video, went on with it; the repost's
    own par2 set then went to the post. The generator's seed 8 so, in an edge's batches
    of 1,020 articles: a catalog other than a whole range's index. The par2 set is posted
    again later, so it is the post's, wherever the cut, in whatever order the batches
    come. (Not covered: a cut inside the par2 set or just after the post's end, which
    leaves a batch fewer than RUN segments of a file posted again, not told apart from
    a post check's re-send.)"""
    lines = posted_again_at_once(BARE_FILES)
    whole = merged(index(lines))
    assert_each_post_its_own(whole, 59)
    expected = {r.key: segments_of(r) for r in whole}
    for at in range(1, 52):  # after the .nfo or a segment of the video
        batches = index(lines, cuts={at})
        for order in (batches, batches[::-1]):
            assert {r.key: segments_of(r) for r in merged(order)} == expected, at


def test_a_posts_nfo_alone_in_a_batch_stays_its_own_when_the_repost_is_in_the_next() -> None:
    """The same, posted faster: the post's .nfo and video start in one second. A cut
    right after the .nfo leaves the rest of the post and the repost's .nfo in the next
    batch, a piece dated as the video: the .nfo's second, so it was placed first and
    took the repost's .nfo, and the post's own .nfo went to the repost. A file's copies
    go to the generations in order of date, in whatever order the batches come."""
    files = [
        (f"{SCENE}.nfo", 1),
        (f"{SCENE}.mkv", 26),
        (f"{SCENE}.par2", 1),
        (f"{SCENE}.vol00+03.par2", 3),
    ]
    lines = posted_again_at_once(files, every=5)
    whole = merged(index(lines))
    assert_each_post_its_own(whole, 31)
    batches = index(lines, cuts={1})
    for order in (batches, batches[::-1]):
        cut = merged(order)
        assert_each_post_its_own(cut, 31)
        assert {r.key: segments_of(r) for r in cut} == {r.key: segments_of(r) for r in whole}


@settings(max_examples=200, deadline=None)
@given(
    nfo=st.booleans(),
    video=st.integers(2 * RUN + 4, 60),
    volumes=st.lists(st.integers(1, 4), max_size=4),
    counter=st.booleans(),
    # An article every 1 to 4 s: the dates tell the order of two articles (in one second
    # they do not, and the merge has nothing else to go by).
    every=st.sampled_from([10, 15, 40]),
    gap=st.integers(1, 400),
    data=st.data(),
)
def test_any_post_posted_again_is_what_one_pass_makes_wherever_a_batch_cuts_its_video(
    nfo: bool,
    video: int,
    volumes: list[int],
    counter: bool,
    every: int,
    gap: int,
    data: st.DataObject,
) -> None:
    """Any post of that shape (an .nfo or none, a video, a par2 set; [i/M] or none)
    posted again after any pause, cut anywhere in its video that leaves RUN segments of
    it on each side (nearer a file's end a batch cannot tell a repost from a re-send),
    the two batches in either order: each post keeps its own copies, as in one pass."""
    files = [(f"{SCENE}.nfo", 1)] if nfo else []
    files += [(f"{SCENE}.mkv", video), (f"{SCENE}.par2", 1)]
    files += [(f"{SCENE}.vol{n:02}+{n + 1:02}.par2", total) for n, total in enumerate(volumes)]
    first = in_flight(bare_upload(BASE, files, "", counter=counter), every=every)
    after = int(first[-1].split("\t", 1)[0]) + every * gap
    lines = first + in_flight(bare_upload(after, files, "again.", counter=counter), every=every)
    whole = merged(index(lines))
    assert_each_post_its_own(whole, len(first))
    cut = data.draw(st.integers(nfo + RUN, nfo + video - RUN), label="cut")
    batches = index(lines, cuts={cut})
    for order in (batches, batches[::-1]):
        assert {r.key: segments_of(r) for r in merged(order)} == {
            r.key: segments_of(r) for r in whole
        }


@pytest.mark.parametrize("batch_every", [None, 45, 61, 100])
@pytest.mark.parametrize("after", [30, 43])
def test_a_post_checks_resends_in_a_row_do_not_cut_the_upload_in_two(
    batch_every: int | None, after: int
) -> None:
    """A tool re-posts what its post check found missing as it goes on posting, and
    re-sends that fall due together come in a row: here three old segments of the
    second volume (3, 11 and 19) just after its 30th, or after its last while the third
    volume posts, then the rest of the upload. The generator's PowerPost uploads met
    both (4M articles, seed 1: House.S10E18.720p.HDTV.H.264-OMA came out as two releases
    of 1,968 and 1,194 articles, neither whole; three albums each lost three articles to
    a release of their own). It is one upload, every volume whole, each number once, in
    one pass and cut anywhere."""
    files = [(f"{SCENE}.part{n:02}.rar", 40) for n in range(1, 5)]
    files += [(f"{SCENE}.par2", 1), (f"{SCENE}.vol00+01.par2", 1)]
    texts = bare_upload(BASE, files, "", counter=True)
    at = 40 + after  # after the second volume's 30th segment, or the third's 3rd
    resent = [
        text.replace(f".{k}@ex>", f".{k}.again@ex>")
        for k in (3, 11, 19)
        for text in texts[40 + k - 1 : 40 + k]
    ]
    lines = in_flight(texts[:at] + resent + texts[at:])
    releases = merged(index(lines, batch_every=batch_every))
    assert [(len(r.files), sorted(len(f.segments) for f in r.files)) for r in releases] == [
        (6, [1, 1, 40, 40, 40, 40])
    ]


def test_two_posters_uploads_of_one_name_at_once_stay_apart_wherever_a_batch_cuts() -> None:
    """Two posters upload the same scene volumes at once, their articles interleaved
    (no head and no [i/M]: the names make one release key). A batch holding both gives
    each poster's files a chunk of their own (under the key and its repost key), and
    so does a batch cut anywhere; there, each poster's later files are as near in date
    to the other poster's earlier ones as to their own. Each upload stays whole and
    apart, as in one pass."""
    files = [(f"{SCENE}.r{n:02}", 5) for n in range(6)]
    mary = bare_upload(0, files, "mary.")
    sven = [
        text.replace("Klaus <k@ftd.nu>", "Sven <s@y.nl>") for text in bare_upload(0, files, "sven.")
    ]
    posted = sorted(
        [(20 * at, t) for at, t in enumerate(mary)]
        + [(20 * at + 13, t) for at, t in enumerate(sven)]
    )
    lines = [dated(f"{BASE + at}\t{text.split(chr(9), 1)[1]}") for at, text in posted]
    for cut in range(len(lines)):
        releases = merged(index(lines, cuts={cut}))
        tags = sorted(
            sorted({m.split(".", 1)[0] for mids in segments_of(r).values() for m in mids})
            for r in releases
        )
        assert tags == [["mary"], ["sven"]], cut


def test_a_file_its_first_post_lost_nearly_all_of_is_reposted_whole() -> None:
    """An album track (a release key of its own) whose first post kept two segments (the
    rest taken down) is posted again whole: the repost's 21 are a release of their own,
    not the rest of the first post's file."""
    track = [("01-artist-house_wolf.flac", 21)]
    head = "Artist-Album-(CAT1)-WEB-2020-GRP"
    first = [text for text in upload(BASE, head, track) if _name_and_k(text)[1] <= 2]
    again = upload(BASE + 3_000, head, track, tag="again.")
    lines = [dated(text) for text in first + again]
    # (A batch cut that leaves fewer than RUN of the repost's new segments with those
    # it posts again is not told apart: see the merge's docstring.)
    for every in (None, 7, 10, 16):
        releases = merged(index(lines, batch_every=every))
        assert sorted(len(f.segments) for r in releases for f in r.files) == [2, 21]
        assert [r.repost_of is not None for r in sorted(releases, key=lambda r: r.posted)] == [
            False,
            True,
        ]


def _median_gap_cuts(articles: list[int]) -> list[int]:
    """gap_cuts as defined: after each gap wider than WIDE times the median gap (and MIN_GAP)."""
    gaps = [b - a for a, b in itertools.pairwise(articles)]
    wide = max(MIN_GAP, WIDE * sorted(gaps)[len(gaps) // 2]) if gaps else MIN_GAP
    return [at for at, gap in enumerate(gaps, 1) if gap > wide]


def test_gap_cuts_and_starts_over_answer_as_defined_without_their_shortcuts() -> None:
    """gap_cuts sorts for the median only when a gap passes MIN_GAP, and starts_over skips
    ascending numbers: the same answers as the definitions, on random postings."""
    rng = random.Random(7)
    for _ in range(3000):
        count = rng.randint(0, 40)
        articles = sorted(rng.sample(range(rng.choice([50, 2_000, 200_000])), count))
        assert gap_cuts(articles) == _median_gap_cuts(articles), articles
        total = rng.randint(1, 80)
        numbers = [rng.randint(1, total) for _ in range(count)]
        if rng.random() < 0.5:
            numbers.sort()
        window = min(SHUFFLE, total // 2)
        highest, drop = 0, 0
        for number in numbers:
            highest = max(highest, number)
            drop = max(drop, highest - number)
        assert starts_over(numbers, total) == (bool(window) and drop > window), numbers


@given(key=st.binary(max_size=40))
def test_a_repost_key_is_blake2b_of_its_prefix_and_the_key(key: bytes) -> None:
    # Stored catalogs hold these keys: however it is computed, the value stays.
    assert repost_key(key) == hashlib.blake2b(b"repost\x00" + key, digest_size=16).digest()
    assert repost_key(key) == repost_key(key)


@pytest.mark.parametrize("cuts", [{12}, {2, 12}], ids=["whole files", "a cut in part01"])
def test_an_nfo_posted_weeks_after_its_rar_set_goes_with_it_wherever_a_batch_is_cut(
    cuts: set[int],
) -> None:
    """A rar set [01/03]..[03/03] without a head, and its .nfo posted as [01/01] 27 days
    later (the corpus's zephleggett__dl-nzb__test.nzb): one key (the names' stem) and,
    by the truth, one upload. The one-pass path of a key (`merge._only_generation`) takes
    an [i/M] number under names of one stem as one upload's; `_split`, which the merge
    takes when a file key comes twice (a batch cut inside a file), took the .nfo's [01]
    for another upload's, so where a batch was cut decided whether it was one release."""

    def posts(first: int, files: list[tuple[str, int]], tag: str) -> list[str]:
        texts: list[str] = []
        for i, (name, total) in enumerate(files, start=1):
            for k in range(1, total + 1):
                subject = f'[{i:02d}/{len(files):02d}] - "{name}" yEnc ({k}/{total})'
                texts.append(
                    dated(line(first + len(texts), subject, f"{tag}{i}.{k}@x", poster="Tom <t@x>"))
                )
        return texts

    rars = posts(BASE, [(f"Some.Movie.2019.1080p.part{i:02d}.rar", 4) for i in (1, 2, 3)], "r")
    nfo = posts(BASE + 27 * 86_400 * 10, [("Some.Movie.2019.1080p.nfo", 1)], "n")
    releases = merged(index(rars + nfo, cuts=cuts))
    assert [sorted(f.name for f in r.files) for r in releases] == [
        [
            "Some.Movie.2019.1080p.nfo",
            *(f"Some.Movie.2019.1080p.part{i:02d}.rar" for i in (1, 2, 3)),
        ]
    ]


def _keys_by_upload(releases: list[CatalogRelease]) -> dict[str, bytes]:
    """Each release's key by the tag of its message-ids (one upload each)."""
    keys = {}
    for release in releases:
        [tag] = {m[:1] for mids in segments_of(release).values() for m in mids}
        keys[tag] = release.key
    return keys


@pytest.mark.parametrize("tool", [True, False])
def test_an_upload_indexed_late_changes_no_later_uploads_key(tool: bool) -> None:
    """A backfill: four uploads of one release key (random names under one From and M,
    or one poster's same files posted again days apart), the earliest indexed last.
    A release's key is its guid (a grab's NZB link): the uploads after the earliest
    keep theirs whatever comes before them. The earliest upload has the release key;
    the one that had it before has a key of its own now, which no other upload had."""
    day = 24 * 60 * 60 * 10  # articles: `dated` gives a second every ten
    if tool:
        rng = random.Random(5)  # NewsUP's obfuscated names: 12 random letters and digits
        alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        names = [
            [
                (f"{''.join(rng.choices(alphabet, k=12))}{suffix}", total)
                for suffix, total in ((".par2", 1), ("", 40))
            ]
            for _ in range(4)
        ]
        uploads = [newsup_upload(BASE + n * day, names[n], tag) for n, tag in enumerate("abcd")]
    else:
        uploads = [
            [dated(text) for text in upload(BASE + n * day, HEAD, FILES, tag=f"{tag}.")]
            for n, tag in enumerate("abcd")
        ]
    later = [text for texts in uploads[1:] for text in texts]
    before = _keys_by_upload(merged(index(later, batch_every=len(uploads[1]))))
    after = _keys_by_upload(merged(index(uploads[0]) + index(later, batch_every=len(uploads[1]))))
    assert sorted(before) == ["b", "c", "d"]
    assert sorted(after) == ["a", "b", "c", "d"]
    assert {tag: after[tag] for tag in "cd"} == {tag: before[tag] for tag in "cd"}
    assert after["a"] == before["b"]  # the release key, the earliest upload's
    assert after["b"] not in {*before.values(), after["a"]}


def _pins(releases: list[CatalogRelease]) -> dict[bytes, Pins]:
    """The pins a catalog of `releases` gives the merges after it (its rows' anchors and
    guids by each source key, as store/catalog.py's `pins` reads them)."""
    found: dict[bytes, list[tuple[str, bytes]]] = {}
    for release in releases:
        assert release.anchor  # a row's anchor is a message-id of its upload
        for source in release.sources:
            found.setdefault(source, []).append((release.anchor, release.key))
    return {key: tuple(sorted(pairs)) for key, pairs in found.items()}


def _pinned(batches: list[Batch], pins: dict[bytes, Pins]) -> list[CatalogRelease]:
    merger = ReleaseMerger(pins=pins)
    for batch in batches:
        merger.add_all(batch.releases)
    return list(merger.releases())


def _random_name_uploads(count: int) -> list[list[str]]:
    """`count` NewsUP uploads of random names (one From and M: one release key), a day
    apart, tagged a, b, c..."""
    day = 24 * 60 * 60 * 10  # articles: `dated` gives a second every ten
    rng = random.Random(5)  # NewsUP's obfuscated names: 12 random letters and digits
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    names = [
        [
            (f"{''.join(rng.choices(alphabet, k=12))}{suffix}", total)
            for suffix, total in ((".par2", 1), ("", 40))
        ]
        for _ in range(count)
    ]
    return [newsup_upload(BASE + n * day, names[n], tag) for n, tag in enumerate("abcdef"[:count])]


def test_a_stored_uploads_key_stays_when_an_earlier_upload_comes_late() -> None:
    """Migration 0044: three uploads of one release key built, then the earliest
    backfilled. With the catalog's anchors (pins) every stored upload keeps its key
    (its row's guid), the release key's too, and the backfilled one gets a key none
    had; without them (a merge as if nothing were stored) the release key moves to
    the backfilled upload."""
    uploads = _random_name_uploads(4)
    later = index([text for texts in uploads[1:] for text in texts], batch_every=41)
    before = merged(later)
    pins = _pins(before)
    after = _keys_by_upload(_pinned(index(uploads[0]) + later, pins))
    assert {tag: after[tag] for tag in "bcd"} == _keys_by_upload(before)
    assert after["a"] not in _keys_by_upload(before).values()
    unpinned = _keys_by_upload(merged(index(uploads[0]) + later))
    assert unpinned["a"] == _keys_by_upload(before)["b"]  # what the pins prevent


def test_a_stored_uploads_key_stays_when_its_own_first_articles_come_late() -> None:
    """An upload's first file indexed after the rest of it (a range leased again after
    its lease expired, a backfill newest first): the key made of its earliest file
    chunk then would move to one of the chunk before it; the row's anchor keeps it."""
    first, second = _random_name_uploads(2)
    head, rest = second[:1], second[1:]  # the .par2: its first file
    built = merged(index(first) + index(rest, batch_every=13))
    keys = _keys_by_upload(built)
    batches = index(first) + index(rest, batch_every=13) + index(head)
    assert _keys_by_upload(_pinned(batches, _pins(built))) == keys
    assert _keys_by_upload(merged(batches))["b"] != keys["b"]  # what the pin prevents


def _uploads_of_one_key(rng: random.Random) -> list[str]:
    """Uploads that share release keys, in article order: a poster's same files posted
    again (a minute, some minutes or a day apart), NewsUP's random names under its
    default From, a file posted again at once, or JBinUp scene uploads (their .nfo
    and .sfv a key of their own, linked with the volumes: `uploads.link`)."""
    day = 24 * 60 * 60 * 10  # articles: `dated` gives a second every ten
    kind = rng.randrange(4)
    if kind == 0:
        uploads = [
            [
                dated(text)
                for text in upload(
                    BASE + n * rng.choice([60, 400, day]), HEAD, FILES, tag=f"{tag}."
                )
            ]
            for n, tag in enumerate("abc")
        ]
    elif kind == 1:
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        uploads = [
            newsup_upload(
                BASE + n * rng.choice([50, 600, day]),
                [
                    ("".join(rng.choices(alphabet, k=12)) + suffix, total)
                    for suffix, total in ((".par2", 1), ("", 40))
                ],
                tag,
            )
            for n, tag in enumerate("abc")
        ]
    elif kind == 2:
        uploads = [posted_again_at_once([("a.mkv", 30), ("a.par2", 2)], every=rng.choice([5, 15]))]
    else:
        uploads = [
            scene_upload(BASE + n * rng.choice([100, day]), tag) for n, tag in enumerate("ab")
        ]
    return sorted(
        (text for texts in uploads for text in texts), key=lambda t: int(t.split("\t", 1)[0])
    )


def _indexed_in_any_order(rng: random.Random, texts: list[str]) -> list[Batch]:
    """The batches of `texts` cut every few lines, with a span or two indexed again cut
    otherwise (a range leased again), stored in any order."""
    batches = index(texts, batch_every=rng.randrange(5, 60))
    for _ in range(rng.randrange(3)):
        start = rng.randrange(len(texts))
        end = rng.randrange(start, len(texts)) + 1
        batches += index(texts[start:end], batch_every=rng.randrange(3, 50))
    rng.shuffle(batches)
    return batches


def _held(releases: list[CatalogRelease]) -> list[tuple[str, ...]]:
    """What each release holds (its segments' message-ids), whatever its key."""
    return sorted(
        tuple(sorted(m for mids in segments_of(r).values() for m in mids)) for r in releases
    )


def test_a_merge_with_its_catalogs_pins_keeps_every_key_and_changes_no_release() -> None:
    """Seeded cases (helper-101's review): uploads sharing keys, batches cut anyhow, a
    span indexed twice, stored in any order; a catalog built of all of them or of
    some first. With the pins of the catalog before it a merge makes the releases a
    merge without pins makes (pins choose keys, never what a release holds), no two
    under one key, and merged again with its own catalog's pins the same keys: a
    catalog followed build by build is a fixed point (no guid moves, no row is
    written again). One anchor can start chunks of two uploads (a batch cut across
    the end of one and the start of the next), and a linked upload's key is the part
    that kept one."""
    failed = []
    for seed in range(600):
        rng = random.Random(seed)
        batches = _indexed_in_any_order(rng, _uploads_of_one_key(rng))
        plain = merged(batches)
        first = merged(batches[: rng.randrange(1, len(batches) + 1)])
        for before in (plain, first):
            once = _pinned(batches, _pins(before))
            again = _pinned(batches, _pins(once))
            if not (
                _held(once) == _held(plain)
                and len({r.key for r in once}) == len(once)
                and sorted(r.key for r in again) == sorted(r.key for r in once)
                and _held(again) == _held(once)
            ):
                failed.append(seed)
        if sorted(r.key for r in _pinned(batches, _pins(plain))) != sorted(r.key for r in plain):
            failed.append(seed)
    assert failed == []


def test_a_stored_key_whose_upload_went_into_another_rows_goes_to_no_other_upload() -> None:
    """helper-103's seeded case 208: one upload posted twice at once (two runs
    interleaved, new message-ids), stored a batch at a time and built after each. The
    first batch makes the release key's row (the repost's part08); the second's
    chunks make a generation that holds that row's anchor and keeps a row of its own.
    When the first post's first segment comes late, that generation holds both rows'
    anchors and keeps its own; the release key's row is left without one, and its key
    went to the first post's generation, whose segments it never held. A row whose
    anchor went into a generation that kept another row's key is gone: its key is
    given to no other upload."""
    texts: list[str] = []
    for i, name, second in ((1, "third.part01.rar", 1), (8, "third.part08.rar", 2)):
        for k in (1, 2):
            for tag in ("p", "r"):  # the first post's, then the repost's
                subject = f'Third.Gamma.2018.720p-GRP [{i:02}/08] - "{name}" yEnc ({k}/2)'
                fields = line(BASE + len(texts), subject, f"{i}.{k}.{tag}@x").split("\t")
                fields[3] = formatdate(1_796_000_000 + second + k)
                texts.append("\t".join(fields))
    late, two, one = index(texts[0:1]), index(texts[1:5]), index(texts[5:8])
    first = merged(one)
    before = _pinned(one + two, _pins(first))
    after = _pinned(one + two + late, _pins(before))
    assert _held(after) == _held(merged(one + two + late))
    held = {r.key: {m for mids in segments_of(r).values() for m in mids} for r in before}
    for release in after:
        ids = {m for mids in segments_of(release).values() for m in mids}
        assert release.key not in held or ids & held[release.key], release.key.hex()
