"""The RangeIndexer: grouping, batches, rules, probes and bad input."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Container
from email.utils import formatdate
from pathlib import Path
from typing import Any

import attrs
import pytest

from usenet_indexer.core.batch import Batch
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.merge import CatalogRelease, ReleaseMerger
from usenet_indexer.core.rules import ExecutableRule, NamePatternRule, rule_from_wire

GROUP = "alt.binaries.test"
BASE = 2**32 + 10  # article numbers need 64 bits
DATE = "Mon, 30 Nov 2026 10:19:15 +0000"


def line(
    number: int,
    subject: str,
    message_id: str,
    *,
    poster: str = "poster <p@example.com>",
    size: int = 700_000,
    references: str = "",
    xref: str | None = None,
) -> str:
    xref_field = xref if xref is not None else f"Xref: news.example.com {GROUP}:{number}"
    return "\t".join(
        [
            str(number),
            subject,
            poster,
            DATE,
            f"<{message_id}>",
            references,
            str(size),
            str(size // 128),
            xref_field,
        ]
    )


def upload(
    first: int,
    head: str,
    files: list[tuple[str, int]],
    *,
    poster: str = "poster <p@example.com>",
    shuffle: random.Random | None = None,
    tag: str = "",
) -> list[str]:
    """Overview lines of one upload: (file name, segments) each, files interleaved."""
    segments = [
        (i, name, k, total)
        for i, (name, total) in enumerate(files, start=1)
        for k in range(1, total + 1)
    ]
    if shuffle is not None:
        shuffle.shuffle(segments)
    lines = []
    for offset, (i, name, k, total) in enumerate(segments):
        subject = f'{head} [{i}/{len(files)}] - "{name}" yEnc ({k}/{total})'
        lines.append(line(first + offset, subject, f"{tag}{name}.{k}@ex", poster=poster))
    return lines


def index(
    lines: list[str],
    *,
    batch_every: int | None = None,
    cuts: Container[int] = (),
    **options: object,
) -> list[Batch]:
    """The lines' batches: one after every `batch_every` lines and after each line
    position (1-based) `cuts` names, and the last."""
    indexer = RangeIndexer(group=GROUP, first=BASE, **options)  # type: ignore[arg-type]
    batches = []
    for position, text in enumerate(lines, start=1):
        number = (
            int(text.split("\t", 1)[0])
            if text.split("\t", 1)[0].isdigit()
            else indexer.resume_point
        )
        indexer.add_text(text + "\n", max(indexer.resume_point, number + 1))
        if (batch_every and position % batch_every == 0) or position in cuts:
            batches.append(indexer.take())
    batches.append(indexer.finish())
    return batches


def merged(batches: list[Batch]) -> list[CatalogRelease]:
    merger = ReleaseMerger()
    for batch in batches:
        merger.add_all(batch.releases)
        for candidate in batch.probe_candidates:
            merger.mark_probe(candidate.release_key)
    return list(merger.releases())


def skipped(batches: list[Batch]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for batch in batches:
        for reason, count in batch.skipped:
            counts[reason] = counts.get(reason, 0) + count
    return counts


def test_segments_group_into_files_and_files_into_one_release() -> None:
    lines = upload(
        BASE,
        "Some.Release.2024",
        [("some.release.part1.rar", 5), ("some.release.par2", 1)],
        shuffle=random.Random(3),
    )
    [release] = merged(index(lines))
    assert release.name == "Some.Release.2024"
    assert release.files_announced == 2
    assert release.complete == 1.0
    assert release.groups == (GROUP,)
    assert [f.name for f in release.files] == ["some.release.part1.rar", "some.release.par2"]
    rar = release.files[0]
    assert [s[0] for s in rar.segments] == [1, 2, 3, 4, 5]
    assert [s[1] for s in rar.segments] == [f"some.release.part1.rar.{k}@ex" for k in range(1, 6)]
    assert rar.subject == 'Some.Release.2024 [1/2] - "some.release.part1.rar" yEnc (1/5)'
    assert release.bytes == 6 * 700_000
    assert release.posted == 1_796_033_955


def test_feeding_whole_or_line_by_line_gives_the_same_batch() -> None:
    lines = upload(BASE, "A", [("a.rar", 3), ("a.par2", 2)]) + upload(
        BASE + 5, "B", [("b.rar", 4)], poster="other"
    )
    whole = RangeIndexer(group=GROUP, first=BASE)
    whole.add_text("\n".join(lines) + "\n", BASE + len(lines))
    by_line = index(lines)
    assert whole.take() == by_line[0]


def test_a_release_across_batches_merges_into_one() -> None:
    lines = upload(
        BASE,
        "Big.Release",
        [(f"big.part{i:02}.rar", 20) for i in range(1, 6)],
        shuffle=random.Random(1),
    )
    batches = index(lines, batch_every=17)
    assert len(batches) > 5
    assert all(len(b.releases) <= 1 for b in batches)
    keys = {b.releases[0].key for b in batches if b.releases}
    assert len(keys) == 1
    [across] = merged(batches)
    [whole] = merged(index(lines))
    # Shuffled whole, the numbers seem to start over now and then: the
    # indexer cuts pieces there (reposts.restarts), and the merge joins them.
    assert across.chunks >= len(batches)
    assert attrs.evolve(across, chunks=1) == attrs.evolve(whole, chunks=1)


def test_batches_move_the_resume_point() -> None:
    lines = upload(BASE, "R", [("r.rar", 10)])
    indexer = RangeIndexer(group=GROUP, first=BASE)
    indexer.add_text("\n".join(lines[:4]), BASE + 4)
    first = indexer.take()
    indexer.add_text("\n".join(lines[4:]), BASE + 12)
    second = indexer.finish()
    assert (first.first, first.next, second.first, second.next) == (
        BASE,
        BASE + 4,
        BASE + 4,
        BASE + 12,
    )
    assert first.lines == 4
    assert second.lines == 6
    with pytest.raises(ValueError, match="finish"):
        indexer.add_text("", BASE + 20)


def test_next_article_may_not_go_back() -> None:
    indexer = RangeIndexer(group=GROUP, first=BASE)
    indexer.add_text("", BASE + 10)
    with pytest.raises(ValueError, match="below the resume point"):
        indexer.add_text("", BASE + 5)


def test_out_of_order_and_repeated_segments() -> None:
    lines = upload(BASE, "R", [("r.rar", 6)], shuffle=random.Random(7))
    repeat = line(BASE + 6, 'R [1/1] - "r.rar" yEnc (3/6)', "repost-of-3@ex")
    [release] = merged(index([*lines, repeat]))
    segments = release.files[0].segments
    assert [s[0] for s in segments] == [1, 2, 3, 4, 5, 6]
    assert segments[2][1] == "r.rar.3@ex"  # the first post of a segment wins
    assert release.complete == 1.0


def test_missing_segments_make_a_release_incomplete() -> None:
    lines = upload(BASE, "R", [("r.rar", 10)])
    del lines[3]
    [release] = merged(index(lines))
    assert release.complete == pytest.approx(0.9)


def test_same_subject_by_two_posters_is_two_releases() -> None:
    a = upload(BASE, "Same.Name", [("same.rar", 3)], poster="one")
    b = upload(BASE + 3, "Same.Name", [("same.rar", 3)], poster="two", tag="b")
    interleaved = [x for pair in zip(a, b, strict=True) for x in pair]
    releases = merged(index(interleaved))
    assert sorted(r.poster for r in releases) == ["one", "two"]
    assert all(len(r.files[0].segments) == 3 for r in releases)


def test_crossposts_are_one_release_with_every_group() -> None:
    xref = "Xref: news.example.com alt.binaries.test:{n} alt.binaries.misc:77"
    lines = [
        line(
            BASE + k,
            f'X [1/1] - "x.rar" yEnc ({k + 1}/2)',
            f"x{k}@ex",
            xref=xref.format(n=BASE + k),
        )
        for k in range(2)
    ]
    [release] = merged(index(lines))
    assert release.groups == ("alt.binaries.misc", "alt.binaries.test")


def test_overlong_message_ids_are_skipped_as_bad() -> None:
    long_id = "x" * 1200 + "@ex"
    lines = [
        line(BASE + k, f'X [1/1] - "x.rar" yEnc ({k + 1}/3)', long_id if k == 1 else f"x{k}@ex")
        for k in range(3)
    ]
    [batch] = index(lines)
    [release] = [r for r in batch.releases if r.dropped is None]
    assert list(release.files[0].numbers) == [1, 3]
    assert dict(batch.skipped)["bad_message_id"] == 1


def test_xref_entries_without_a_group_name_are_left_out() -> None:
    # The coordinator refuses an empty group name: it must never be sent.
    xref = "Xref: news.example.com :77 alt.binaries.test:{n} nocolon"
    lines = [line(BASE, 'X [1/1] - "x.rar" yEnc (1/1)', "x@ex", xref=xref.format(n=BASE))]
    [release] = merged(index(lines))
    assert release.groups == ("alt.binaries.test",)


def test_replies_and_text_posts_are_not_releases() -> None:
    lines = [
        line(BASE, 'Re: Some.Release [1/1] - "a.rar" yEnc (1/1)', "r1@ex", references="<orig@ex>"),
        line(BASE + 1, "Looking for a good release of something", "t1@ex", size=2_400),
        line(BASE + 2, "Re: question (1/2)", "r2@ex"),
    ]
    batches = index(lines)
    assert merged(batches) == []
    assert skipped(batches) == {"reply": 2, "text_post": 1}


def random_subject_line(
    rng: random.Random, at: int, poster: str, digits: str = "", **options: Any
) -> str:
    """Article BASE + `at` of Nyuu's `--subject '${rand(24)}'` under one `poster`: a
    random subject of letters (and `digits`), a random message-id; `options`: line's."""
    letters = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ" + digits
    subject = "".join(rng.choices(letters, k=24))
    return line(BASE + at, subject, f"{at}.{rng.getrandbits(40):x}@nyuu", poster=poster, **options)


def test_an_upload_with_a_random_subject_per_article_is_one_probe_candidate() -> None:
    """Nyuu --subject '${rand(N)}' with one random --from: no counter, no yEnc marker."""
    rng = random.Random(8)
    poster = "Xk2Pq9vRt4@Lm3Nb.QWE"
    texts = [
        random_subject_line(
            rng, at, poster, "23456789",
            size=716_800 if at % 20 != 19 else 31_337,  # each file's last article is short
        )
        for at in range(60)
    ]  # fmt: skip
    texts.insert(30, line(BASE + 60, "Anyone have the FAQ?", "faq@ex", size=1_900))
    renumbered = [f"{BASE + at}\t{text.split(chr(9), 1)[1]}" for at, text in enumerate(texts)]
    batches = index(renumbered, batch_every=25)
    [release] = merged(batches)
    assert release.poster == poster
    assert sum(len(f.segments) for f in release.files) == 60
    assert release.probe_candidate
    assert skipped(batches) == {"text_post": 1}


def test_an_upload_with_a_random_subject_per_article_lists_the_groups_its_xref_names() -> None:
    """As every release does (its files' Xref fields): `uidx index` of a dump knows no
    group of its own, and such an upload came out of it with no group at all, where
    the edge (whose ranges are of a group) listed its range's group."""
    rng = random.Random(9)
    poster = "Xk2Pq9vRt4@Lm3Nb.QWE"
    lines = [
        random_subject_line(
            rng, at, poster,
            xref=f"Xref: news.example.com {GROUP}:{BASE + at} alt.binaries.other:{7 + at}",
        )
        for at in range(20)
    ]  # fmt: skip
    for group in ("", GROUP):
        indexer = RangeIndexer(group=group, first=BASE)
        indexer.add_data("".join(f"{text}\n" for text in lines).encode(), BASE + len(lines))
        [release] = indexer.finish().releases
        assert release.groups == ("alt.binaries.other", GROUP), group


def test_an_upload_with_a_random_subject_per_article_is_whole_wherever_a_batch_cuts_it() -> None:
    """The same upload (its articles among others'), cut anywhere: a batch that holds
    one or two of its articles, at its start or its end, or its short last article
    first, cannot tell them from a text post or another poster's stray articles; the
    batch after or before it can. Every article is the upload's, as in one pass."""
    rng = random.Random(8)
    poster = "Xk2Pq9vRt4@Lm3Nb.QWE"
    texts = []
    for at in range(30):
        subject = "".join(rng.choices("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ", k=24))
        size = 716_800 if at % 10 != 9 else 31_337  # each file's last article is short
        texts.append(
            line(0, subject, f"{at}.{rng.getrandbits(40):x}@nyuu", poster=poster, size=size)
        )
        texts.append(line(0, f"Question {at}?", f"q{at}@ex", size=1_900))
    lines = [f"{BASE + at}\t{text.split(chr(9), 1)[1]}" for at, text in enumerate(texts)]
    for cut in range(1, len(lines)):
        batches = index(lines, cuts={cut})
        [release] = merged(batches)
        assert sum(len(f.segments) for f in release.files) == 30, cut
        assert skipped(batches) == {"text_post": 30}, cut


def test_articles_with_a_random_subject_and_poster_each_are_unattributable() -> None:
    """ngPost --obfuscate: every article's subject and From are its own."""
    rng = random.Random(9)
    texts = [
        line(
            BASE + at,
            f"{rng.getrandbits(128):032x}",
            f"{rng.getrandbits(128):032x}@ngPost",
            poster=f"{rng.getrandbits(48):012x}@ngPost.com",
        )
        for at in range(40)
    ]
    for every in (None, 1, 2, 7):
        batches = index(texts, batch_every=every)
        assert merged(batches) == []
        assert skipped(batches) == {"unattributable": 40}


def test_malformed_lines_are_counted_and_skipped() -> None:
    good = upload(BASE, "Good", [("good.rar", 3)])
    n = BASE + 3
    bad = [
        f"{n}\tonly\tthree",
        line(n + 1, 'Good [1/1] - "good.rar" yEnc (2/3)', "x@ex").replace(str(n + 1), "12x", 1),
        line(n + 2, 'Other [1/1] - "o.rar" yEnc (1/2)', "o1@ex").replace("\t700000\t", "\tlots\t"),
        line(n + 3, 'Other [1/1] - "o\x00.rar" yEnc (1/2)', "o2@ex"),
        line(n + 4, 'Forged [1/1] - "f.rar" yEnc (1000000/1)', "f1@ex"),
        line(n + 5, 'Forged [1/1] - "f.rar" yEnc (5/3)', "f2@ex"),
        line(n + 6, 'Other [1/1] - "o.rar" yEnc (2/2)', "o3@ex").replace("<o3@ex>", "no-brackets"),
        # A forged counter on a file that is open: caught when the batch is taken.
        line(n + 7, 'Good [1/1] - "good.rar" yEnc (9/3)', "g9@ex"),
    ]
    batches = index([*good[:2], *bad, good[2]])
    assert skipped(batches) == {
        "too_few_fields": 1,
        "bad_number": 1,
        "bad_bytes": 1,
        "nul_byte": 1,
        "forged_counter": 3,
        "bad_message_id": 1,
    }
    [release] = merged(batches)
    assert [s[0] for s in release.files[0].segments] == [1, 2, 3]


def test_invalid_utf8_falls_back_to_latin1() -> None:
    raw = line(BASE, 'Caf\xe9 [1/1] - "caf\xe9.rar" yEnc (1/1)', "c@ex").encode("latin-1")
    indexer = RangeIndexer(group=GROUP, first=BASE)
    indexer.add_data(raw, BASE + 1)
    [release] = merged([indexer.finish()])
    assert release.name == "Caf\xe9"
    assert release.files[0].name == "caf\xe9.rar"


def test_utf8_names_survive() -> None:
    lines = upload(BASE, "你好世界", [("你好世界.part01.rar", 2)])
    [release] = merged(index(lines))
    assert release.name == "你好世界"


def test_executable_floods_are_dropped_and_counted() -> None:
    flood = upload(BASE, "Movie.2024.1080p.WEB-DL", [("Movie.2024.1080p.WEB-DL.exe", 3)])
    flood2 = upload(BASE + 3, "Game.2024", [("setup.scr", 1), ("game.nfo", 1)], poster="x")
    legit = upload(BASE + 5, "Tool.2024", [("tool.rar", 2), ("setup.exe", 1)], poster="y")
    batches = index(flood + flood2 + legit)
    assert [r.name for r in merged(batches)] == ["Tool.2024"]
    counts = {(c.rule, c.key): (c.releases, c.segments) for b in batches for c in b.rule_counts}
    assert counts == {("executable", "exe"): (1, 3), ("executable", "scr"): (1, 2)}
    kept = merged(index(flood + flood2 + legit, keep_dropped=True))
    assert sorted((r.name, r.dropped) for r in kept) == [
        ("Game.2024", "executable"),
        ("Movie.2024.1080p.WEB-DL", "executable"),
        ("Tool.2024", None),
    ]


def test_rules_are_data() -> None:
    rules = [
        rule_from_wire(r.to_wire())
        for r in (ExecutableRule(), NamePatternRule(name="spam", pattern=r"casino"))
    ]
    lines = upload(BASE, "Best.Casino.Bonus", [("casino.rar", 1)]) + upload(
        BASE + 1, "Fine", [("fine.rar", 1)], poster="z"
    )
    batches = index(lines, rules=rules)
    assert [r.name for r in merged(batches)] == ["Fine"]
    assert [(c.rule, c.key, c.releases) for c in batches[0].rule_counts] == [("spam", "", 1)]


def test_obfuscated_releases_with_par2_are_probe_candidates() -> None:
    name = "xqJc9cLkzgbVTTSlQflzdiuWtCWE2O6n2"
    lines = upload(
        BASE,
        "",
        [(f"{name}.part1.rar", 3), (f"{name}.vol00+01.par2", 2), (f"{name}.par2", 1)],
        poster="rnd@ngPost.com",
    )
    batches = index(lines)
    [candidate] = batches[0].probe_candidates
    assert candidate.file_name == f"{name}.par2"  # the index par2 lists every name
    assert candidate.message_id == f"{name}.par2.1@ex"
    [release] = merged(batches)
    assert release.probe_candidate
    assert release.name == name
    plain = upload(BASE, "", [("Readable.Name.part1.rar", 1), ("Readable.Name.par2", 1)])
    assert index(plain)[0].probe_candidates == ()


def test_keys_do_not_depend_on_batching_or_order() -> None:
    lines = upload(BASE, "K", [("k.rar", 4), ("k.par2", 1)])
    one = index(lines)[0].releases[0]
    rng = random.Random(5)
    shuffled = lines[:]
    rng.shuffle(shuffled)
    renumbered = [f"{BASE + i}\t{text.split(chr(9), 1)[1]}" for i, text in enumerate(shuffled)]
    other = index(renumbered)[0].releases[0]
    assert one.key == other.key
    assert {f.key for f in one.files} == {f.key for f in other.files}


def _open_file_of(ks: list[bytes], mids: list[bytes], sizes: list[bytes], total: int) -> object:
    from usenet_indexer.core.indexer import _OpenFile
    from usenet_indexer.core.subject import parse_file_subject

    articles = [str(BASE + at).encode() for at in range(len(ks))]
    segments = b"".join(
        b"%b\t%b\t%b\t%b\t%b\t" % (k, article, DATE.encode(), mid, size)
        for k, article, mid, size in zip(ks, articles, mids, sizes, strict=True)
    )
    open_file = _OpenFile(
        b"p", b"R", b"", total, b"1/1", b"", DATE.encode(), b"", bytearray(segments)
    )
    open_file.info = parse_file_subject('R - "r.rar" yEnc ')
    return open_file


def _file_chunk(open_file: Any, skipped: Counter[str], slow: bool = False) -> list[Any]:
    """The indexer's file check for one file alone, as a release of one file goes through it."""

    from usenet_indexer.core.indexer import (
        _file_chunks,
        _file_chunks_slow,
        _Passes,
        release_pass_starts,
    )

    def check(passes: _Passes) -> list[Any]:
        if slow:
            return _file_chunks_slow(open_file, open_file.lists(), skipped, passes)
        return _file_chunks(open_file, open_file.lists(), skipped, passes)

    passes = _Passes({})
    chunks = check(passes)
    if passes.deferred:
        passes.starts = release_pass_starts([(open_file.lists(), open_file.total)])
        chunks = check(passes)
    return chunks


def test_whole_list_file_checks_agree_with_the_segment_by_segment_check() -> None:
    """Clean texts (plain digits, <...> ids): the quick paths (in order, out of
    order, repeats) give what the segment-by-segment check gives."""
    from collections import Counter

    rng = random.Random(11)
    for _ in range(400):
        total = rng.randint(1, 40)
        count = rng.randint(1, 60)
        numbers = [rng.randint(1, total) for _ in range(count)]
        if rng.random() < 0.4:
            numbers = list(range(1, min(count, total) + 1))
        if rng.random() < 0.3:
            rng.shuffle(numbers)
        width = rng.choice([1, 1, 2, 3])
        ks = [str(k).zfill(width).encode() for k in numbers]
        mids = [f"<m{rng.randint(0, 9)}.{k}@ex>".encode() for k in numbers]
        sizes = [str(rng.choice([0, 1, 700_000, 2**32 - 1])).encode() for _ in numbers]
        quick: Counter[str] = Counter()
        slow: Counter[str] = Counter()
        made = _file_chunk(_open_file_of(ks, mids, sizes, total), quick)
        want = _file_chunk(_open_file_of(ks, mids, sizes, total), slow, slow=True)
        assert made == want
        assert quick == slow


def test_file_checks_send_odd_texts_segment_by_segment() -> None:
    """Sizes past uint32, ids without brackets and repeats with "<>" are sorted out one by one."""
    from collections import Counter

    cases = [
        ([b"1", b"2"], [b"<a>", b"<b>"], [b"5", b"4294967296"], {"bad_bytes": 1}, [1]),
        ([b"1", b"2"], [b"<a>", b"b"], [b"5", b"6"], {"bad_message_id": 1}, [1]),
        ([b"1", b"1"], [b"<>", b"<b>"], [b"5", b"6"], {"bad_message_id": 1}, [1]),
        ([b"2", b"1", b"2"], [b"<a>", b"<b>", b"<c>"], [b"5", b"6", b"7"], {"repeated_segment": 1}, [1, 2]),
        ([b"1", b"99999999999999999999999"], [b"<a>", b"<b>"], [b"5", b"6"], {"forged_counter": 1}, [1]),
    ]  # fmt: skip
    for ks, mids, sizes, counted, numbers in cases:
        skipped: Counter[str] = Counter()
        (chunk,) = _file_chunk(_open_file_of(ks, mids, sizes, 2), skipped)
        assert chunk is not None
        assert dict(skipped) == counted
        assert list(chunk.numbers) == numbers


def test_plain_dates_read_as_email_utils_reads_them() -> None:
    from email.utils import mktime_tz, parsedate_tz

    from usenet_indexer.core.indexer import parse_date

    rng = random.Random(5)
    days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    for _ in range(3000):
        text = (
            f"{rng.choice(days)}, {rng.randint(0, 35)} {rng.choice([*months, 'Foo'])} "
            f"{rng.choice([rng.randint(1000, 9999), rng.randint(1970, 2040)])} "
            f"{rng.randint(0, 25):02}:{rng.randint(0, 61):02}:{rng.randint(0, 61):02} "
            f"{rng.choice('+-')}{rng.randint(0, 14):02}{rng.choice([0, 30, 45, 99]):02}"
        )
        parsed = parsedate_tz(text)
        assert parse_date(text) == (int(mktime_tz(parsed)) if parsed else 0), text


def test_subjects_longer_than_the_wire_allows_are_skipped() -> None:
    """A 1 MB subject never reaches a batch (the coordinator would refuse the range's batches)."""
    long_subject = "X" * 1_000_000 + ' [1/1] - "x.rar" yEnc (1/1)'
    lines = [line(BASE, long_subject, "long@ex"), *upload(BASE + 1, "Fine", [("fine.rar", 2)])]
    batches = index(lines)
    assert [r.name for r in merged(batches)] == ["Fine"]
    assert skipped(batches) == {"too_long": 1}


@pytest.mark.parametrize(
    ("poster", "counter"),
    # Another poster (obfuscating tools give each file its own), or the same poster's
    # other counter (a separately posted [1/1]). Another poster's other M is another
    # uploader's upload with a file of the name: the test after this one.
    # A file posted on its own ([1/1]) under a random From: an .nfo beside its rar set
    # (the real NZB zephleggett__dl-nzb__test.nzb).
    [("zed <z@x>", "[1/2]"), ("amy <a@y>", "[1/3]"), ("zed <z@x>", "[1/1]")],
)
def test_a_release_takes_poster_and_counter_of_its_earliest_file_whatever_the_batch_cuts(
    poster: str, counter: str
) -> None:
    # No head: the stem links the files, whatever their posters and counters.
    def part(number: int, name: str, k: int, poster: str, date: str, of: str) -> str:
        text = line(number, f'{of} - "{name}" yEnc ({k}/2)', f"{name}.{k}@ex", poster=poster)
        fields = text.split("\t")
        fields[3] = date
        return "\t".join(fields)

    # A minute apart (a file numbered first and posted minutes after the others is
    # another post's: test_reposts).
    late, early = "Mon, 30 Nov 2026 10:01:00 +0000", "Mon, 30 Nov 2026 10:00:00 +0000"
    lines = [
        part(BASE, "Some.Release.part01.rar", 1, poster, late, counter),
        part(BASE + 1, "Some.Release.part01.rar", 2, poster, late, counter),
        part(BASE + 2, "Some.Release.part02.rar", 1, "amy <a@y>", early, "[2/2]"),
        part(BASE + 3, "Some.Release.part02.rar", 2, "amy <a@y>", early, "[2/2]"),
    ]
    whole = merged(index(lines))
    assert len(whole) == 1
    assert (whole[0].poster, whole[0].files_announced) == ("amy <a@y>", 2)
    chunks = [c for b in index(lines, batch_every=2) for c in b.releases]
    assert len(chunks) == 2
    for order in (chunks, chunks[::-1]):
        merger = ReleaseMerger()
        merger.add_all(order)
        (release,) = merger.releases()
        assert (release.poster, release.files_announced) == ("amy <a@y>", 2)


@pytest.mark.parametrize("cut", [None, 9, 18])
@pytest.mark.parametrize("m3u", [True, False])
def test_another_uploaders_album_with_a_track_of_one_name_is_its_own_release(
    cut: int | None, m3u: bool
) -> None:
    """Two uploaders' albums of one artist, each track's subject without a head (Nyuu's
    `[{0filenum}/{files}] - "{filename}" yEnc ({part}/{parts})`, PowerPost's `(????)
    [05/19] - "{filename}" yEnc (01/36)`), each file keyed by its name's stem: a track
    of each album shares a name but its extension. Its [i/M] says another M: it is the
    other album's, in one pass and wherever a batch cuts (it came into the first
    album's release, in place of that album's fifth file, which went to a release of
    its own: the generator's 4M posting-tools lines). Without its .m3u the other album
    has as many files as the first: six hours later, it is another upload all the same."""
    nyuu = [
        ("01-the_black_keys-island.flac", 3),
        ("02-the_black_keys-heart_silent.flac", 3),
        ("03-the_black_keys-white.flac", 3),
        ("04-the_black_keys-ocean.flac", 3),
        ("05-the_black_keys-shadow.flac", 3),
    ]
    # PowerPost numbers the .nfo, .jpg and .m3u first: its track 1 is its fourth file.
    powerpost = [
        ("00-the_black_keys-harbor_kingdom-web-2018.nfo", 1),
        ("00-the_black_keys-harbor_kingdom-web-2018.jpg", 2),
        ("00-the_black_keys-harbor_kingdom-web-2018.m3u", 1),
        ("01-the_black_keys-island.mp3", 3),
        ("02-the_black_keys-harbor.mp3", 3),
    ]
    if not m3u:
        powerpost = [powerpost[0], powerpost[1], *powerpost[3:]]
    powerpost.append(("03-the_black_keys-kingdom.mp3", 3))
    lines = []
    for i, (name, total) in enumerate(nyuu, start=1):
        for k in range(1, total + 1):
            subject = f'[{i}/{len(nyuu)}] - "{name}" yEnc ({k}/{total}) 9072546'
            lines.append((subject, f"Ny{i}k{k}-1700002738840@nyuu", "root <root@x.localdomain>"))
    for i, (name, total) in enumerate(powerpost, start=1):
        for k in range(1, total + 1):
            subject = f'(????) [{i:02}/{len(powerpost)}] - "{name}" yEnc ({k:02}/{total:02})'
            lines.append((subject, f"part{k}of{total}.{i}@powerpost", "Yenc@power-post.org"))
    texts = []
    for at, (subject, mid, who) in enumerate(lines):
        fields = line(BASE + at * 7, subject, mid, poster=who).split("\t")
        # The first album at 10:00, the other six hours later.
        hour = 10 if at < sum(total for _, total in nyuu) else 16
        fields[3] = f"Mon, 30 Nov 2026 {hour}:{at % 60:02}:00 +0000"
        texts.append("\t".join(fields))
    releases = merged(index(texts, cuts={cut} if cut else ()))
    by_poster = {r.poster: sorted(f.name for f in r.files) for r in releases}
    assert len(releases) == 2
    assert by_poster == {
        "root <root@x.localdomain>": sorted(name for name, _ in nyuu),
        "Yenc@power-post.org": sorted(name for name, _ in powerpost),
    }


@pytest.mark.parametrize("cut", [None, 3])
def test_an_nfo_posted_on_its_own_weeks_later_under_another_from_joins_its_rar_set(
    cut: int | None,
) -> None:
    """The real NZB zephleggett__dl-nzb__test.nzb: a magazine's rar set `[01/36]
    "The_Economist_USA_-_April_19_2025.part01.rar" yEnc (1/2)`, and its .nfo posted
    27 days later on its own (`[01/01] - "....nfo" yEnc (1/1)`) under a random From.
    A file posted on its own ([1/1]) joins the upload of its name whoever posts it and
    whenever (the NZB lists it with the rar set)."""
    name = "The_Economist_USA_-_April_19_2025"
    texts = []
    for i in range(1, 4):
        for k in (1, 2):
            subject = f'[{i:02}/03] "{name}.part{i:02}.rar" yEnc ({k}/2)'
            texts.append((subject, f"rar{i}.{k}@ex", "Myfranco@mile.com", 1745868842))
    texts.append((f'[01/01] - "{name}.nfo" yEnc (1/1)', "nfo@ex", "8Bs3Yn0D@5Sc.ChS", 1748242398))
    lines = []
    for at, (subject, mid, who, posted) in enumerate(texts):
        fields = line(BASE + at, subject, mid, poster=who).split("\t")
        fields[3] = formatdate(posted)
        lines.append("\t".join(fields))
    [release] = merged(index(lines, cuts={cut} if cut else ()))
    assert sorted(f.name for f in release.files) == sorted(
        [f"{name}.nfo", *(f"{name}.part{i:02}.rar" for i in range(1, 4))]
    )


def test_a_files_subject_pads_its_counter_as_the_poster_does_wherever_batches_cut_it() -> None:
    """A poster pads the counter to N's width ("(01/30)"). A batch whose lines of the file
    start at "(13/30)" (a cut), or one whose first line of it is "(12/30)" (segments out
    of order), cannot tell from that line: the subject pads as any of the file's lines
    do, wherever batches cut it and in whatever order they are merged."""
    head = 'Padded.Release [1/1] - "padded.release.rar" yEnc '
    segments = [(k, line(0, f"{head}({k:02}/30)", f"p{k}@ex")) for k in range(1, 31)]
    shuffled = [segments[11], *segments[:11], *segments[12:]]
    for posted in (segments, shuffled):
        lines = [f"{BASE + at}\t{text.split(chr(9), 1)[1]}" for at, (_, text) in enumerate(posted)]
        for cuts in ((), {12}, {20}):
            batches = index(lines, cuts=cuts)
            for order in (batches, batches[::-1]):
                [release] = merged(order)
                assert release.files[0].subject == f"{head}(01/30)", (posted[0][0], cuts)


def test_messy_data_gives_the_same_batch_fed_whole_line_by_line_or_in_chunks() -> None:
    """NUL bytes (first, middle and last line), CRLF, empty and short lines, repeats,
    forged counters and a second poster on one prefix: the fast path and the slow
    path agree however the lines are cut into feeds."""
    rng = random.Random(7)
    lines = upload(BASE, "Mix", [("mix.part1.rar", 6), ("mix.par2", 2)], shuffle=rng)
    n = BASE + len(lines)
    lines += [
        line(n, 'Mix [1/2] - "mix.part1.rar" yEnc (2/6)', "again@ex"),  # a repeat
        line(n + 1, 'Mix [1/2] - "mix.part1.rar" yEnc (2/6)', "p2@ex", poster="second <s@x>"),
        line(n + 2, 'Mix [1/2] - "mix.part1.rar" yEnc (9/6)', "forged@ex"),
        line(n + 3, 'Mix [1/2] - "mix.part1.rar" yEnc (3/6) 123', "tail@ex"),
        f"{n + 4}\tshort\tline",
        "",
        line(n + 5, 'Nul [1/1] - "n\x00.rar" yEnc (1/1)', "nul@ex"),
        line(n + 6, 'Mix [1/2] - "mix.part1.rar" yEnc (4/6)', "p4@ex", poster="second <s@x>"),
    ]
    lines.insert(0, line(BASE - 1, 'Nul [1/1] - "first\x00.rar" yEnc (1/1)', "nul0@ex"))
    lines.append(line(n + 7, 'Nul [1/1] - "last\x00.rar" yEnc (1/1)', "nul1@ex"))
    end = n + 8

    def fed(cuts: list[int], *, crlf: bool = False, trailing: bool = True) -> Batch:
        indexer = RangeIndexer(group=GROUP, first=BASE - 1)
        newline = "\r\n" if crlf else "\n"
        for start, stop in zip([0, *cuts], [*cuts, len(lines)], strict=True):
            text = newline.join(lines[start:stop])
            if trailing or stop < len(lines):
                text += newline
            indexer.add_text(text, end if stop == len(lines) else indexer.resume_point)
        return indexer.finish()

    whole = fed([])
    assert dict(whole.skipped) == {
        "forged_counter": 1,
        "nul_byte": 3,
        "repeated_segment": 2,  # (2/6) again, and (3/6) with another tail
        "too_few_fields": 1,
    }
    assert whole.lines == len(lines) - 1  # the empty line does not count; the NUL lines do
    assert fed(list(range(1, len(lines)))) == whole
    assert fed([], crlf=True, trailing=False) == whole
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(lines)), rng.randint(1, 6)))
        assert fed(cuts, crlf=rng.random() < 0.5) == whole


def test_every_malformed_line_is_a_line_read() -> None:
    """What a binary looks like as overview data (`uidx index /bin/ls`): lines with NUL
    bytes and lines without tabs. Each is read and skipped as malformed, so no
    batch says it skipped more lines than it read."""
    from usenet_indexer.core.indexer import MALFORMED

    data = b"\x7fELF\x02\x01\x00\nno tabs\n\x00\x00\nstill none\n1\t\x00\t2\nlast\n\n"
    for cut in range(len(data) + 1):
        indexer = RangeIndexer(group=GROUP, first=0)
        for part in (data[:cut], data[cut:]):
            indexer.add_data(part, 1)
        batch = indexer.finish()
        malformed = sum(n for reason, n in batch.skipped if reason in MALFORMED)
        # A cut inside a line makes two of it (the indexer is fed whole lines).
        assert malformed <= batch.lines
        if data[:cut].endswith(b"\n") or cut == 0:
            assert batch.lines == malformed == 6, cut
            assert dict(batch.skipped) == {"nul_byte": 3, "too_few_fields": 3}
    # With good lines beside them: every line is read, once.
    good = line(BASE, 'Good [1/1] - "good.rar" yEnc (1/1)', "g@ex").encode()
    indexer = RangeIndexer(group=GROUP, first=BASE)
    indexer.add_data(data + good + b"\n", BASE + 1)
    batch = indexer.finish()
    assert batch.lines == 7
    assert len(batch.releases) == 1


def test_nul_lines_are_blanked_by_position() -> None:
    from usenet_indexer.core.indexer import _blank_nul_lines

    rng = random.Random(1)
    for _ in range(5000):
        data = bytes(rng.choice(b"ab\n\x00") for _ in range(rng.randint(0, 30)))
        lines = data.split(b"\n")
        expected = [b"" if b"\x00" in text else text for text in lines]
        blanked = _blank_nul_lines(data, lines)
        assert blanked == sum(b"\x00" in text for text in data.split(b"\n")), data
        assert lines == expected, data


def test_the_executable_rule_reads_extensions_as_subject_extension_does() -> None:
    """ExecutableRule.verdict inlines subject.extension: the same verdicts."""
    from usenet_indexer.core.rules import COMPANION_EXTENSIONS, EXECUTABLE_EXTENSIONS, ReleaseView
    from usenet_indexer.core.subject import extension

    def by_extension(names: list[str]) -> str | None:
        found = ""
        for name in names:
            ext = extension(name)
            if ext in EXECUTABLE_EXTENSIONS:
                found = found or ext
            elif ext not in COMPANION_EXTENSIONS:
                return None
        return found or None

    pieces = ["a", ".", ".exe", ".EXE", ".nfo", ".Nfo", "exe", ".s", ".scr", "x" * 5, ".\u0130", ""]
    rng = random.Random(2)
    rule = ExecutableRule()
    for _ in range(5000):
        names = [
            "".join(rng.choices(pieces, k=rng.randint(0, 4))) for _ in range(rng.randint(1, 3))
        ]
        assert rule.verdict(ReleaseView(names, str)) == by_extension(names), names


def test_overview_blocks_end_at_line_ends_and_close_their_file(tmp_path: Path) -> None:
    """`uidx index` reads dumps in blocks of whole lines (plain, gzip, zlib); a
    dump that does not inflate is an InputError, and its file is closed."""
    import gzip
    import zlib

    from usenet_indexer.errors import InputError
    from usenet_indexer.spool.dumps import read_blocks

    text = "".join(f"{n}\tsubject {n}\tposter\n" for n in range(20_000)).encode() + b"no end"
    files = {"plain": text, "packed.gz": gzip.compress(text), "packed.z": zlib.compress(text)}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
        for block_bytes in (7, 10_000, 1 << 20):
            blocks = list(read_blocks(tmp_path / name, block_bytes=block_bytes))
            assert b"".join(blocks) == text
            assert all(block.endswith(b"\n") for block in blocks[:-1])
            assert blocks[-1].endswith(b"no end")
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(text)[:-5000])
    with pytest.raises(InputError):
        list(read_blocks(broken, block_bytes=10_000))


def test_a_gzip_dump_is_read_in_big_steps(tmp_path: Path) -> None:
    """The reading thread reads a gzip dump `INFLATE_READ_BYTES` at a time (each
    step needs the GIL back from the indexing thread): a few reads of the file
    for 12 MB of it, not one per 512 kB (isal's own step)."""
    import gzip
    import io
    import random

    from usenet_indexer.spool.dumps import read_blocks

    class Counted(io.FileIO):
        reads = 0
        read_bytes = 0

        def readinto(self, buffer: Any) -> int | None:
            n = super().readinto(buffer)
            Counted.reads += 1
            Counted.read_bytes += n or 0
            return n

        def read(self, size: int | None = -1) -> bytes:
            data = super().read(size)
            Counted.reads += 1
            Counted.read_bytes += len(data)
            return data

    class CountedPath(type(Path())):  # type: ignore[misc]
        def open(self, *args: object, **kwargs: object) -> Counted:
            return Counted(self, "rb")

    rng = random.Random(5)
    text = b"".join(b"%d\t%s\n" % (n, rng.randbytes(60).hex().encode()) for n in range(180_000))
    packed = tmp_path / "packed.gz"
    packed.write_bytes(gzip.compress(text, compresslevel=1))
    assert packed.stat().st_size > 12 << 20
    assert b"".join(read_blocks(CountedPath(packed))) == text
    # All of the file read through the file the dump was opened as, in a few reads.
    assert Counted.read_bytes >= packed.stat().st_size
    assert Counted.reads < 10


def test_overview_blocks_stop_their_reading_thread(tmp_path: Path) -> None:
    """read_blocks reads ahead in a thread: a reader that stops early, or a dump
    that fails, ends that thread (and closes the file) before the caller goes on."""
    import gc
    import gzip
    import threading

    from usenet_indexer.errors import InputError
    from usenet_indexer.spool.dumps import read_blocks

    def readers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "read-ahead"]

    text = "".join(f"{n}\tsubject {n}\tposter\n" for n in range(50_000)).encode()
    packed = tmp_path / "packed.gz"
    packed.write_bytes(gzip.compress(text))
    blocks = read_blocks(packed, block_bytes=1_000)
    assert next(blocks).endswith(b"\n")
    assert readers()  # reading ahead, with more than READ_AHEAD blocks to come
    blocks.close()
    assert not readers()
    for _ in read_blocks(packed, block_bytes=1_000):
        break  # the loop drops the generator: closed as it goes
    gc.collect()
    assert not readers()
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(text)[:-5000])
    with pytest.raises(InputError, match="cannot be read as overview data"):
        list(read_blocks(broken, block_bytes=1_000))
    assert not readers()


# The keys a process computes: the releases' and files' of a compiled and a pure index,
# and a repost key. With "blocked", CPython's private _blake2 module is not there for
# uidx (hashlib is imported first: on CPython its blake2b is _blake2's, imported by
# hashlib itself), so uidx's imports take their fallback.
KEYS = """
import hashlib, sys
if sys.argv[1] == "blocked":
    sys.modules["_blake2"] = None  # `import _blake2` raises ImportError from now on
from usenet_indexer.core import indexer, reposts
assert indexer.COMPILED_SCAN is not None, "the compiled indexer did not import"
text = "".join(
    f"{n}\\tRel [1/2] - \\"f{n % 2}.rar\\" yEnc ({n // 2 + 1}/3)\\tp <p@x>\\t"
    f"Mon, 30 Nov 2026 10:19:15 +0000\\t<m{n}@x>\\t\\t700000\\t5000\\tXref: h a.b.c:{n}\\n"
    for n in range(1, 7)
)
for pure in (False, True):
    ranged = indexer.RangeIndexer(group="a.b.c", first=1, pure=pure)
    ranged.add_text(text, 7)
    batch = ranged.finish()
    print(sorted(r.key.hex() for r in batch.releases))
    print(sorted(f.key.hex() for r in batch.releases for f in r.files))
print(reposts.repost_key(b"key").hex())
"""


def test_without_the_private_blake2_module_the_keys_are_the_same() -> None:
    root = Path(__file__).parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    outputs = [
        subprocess.run(
            [sys.executable, "-c", KEYS, how],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        for how in ("blocked", "as-is")
    ]
    for done in outputs:
        assert done.returncode == 0, done.stderr
    blocked, as_is = (done.stdout.splitlines() for done in outputs)
    assert blocked == as_is
    assert len(as_is) == 5
    assert as_is[0] != "[]"
    assert as_is[1] != "[]"
