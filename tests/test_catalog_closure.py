"""What a catalog build merges again for the keys a batch touched (core/catalog.py).

The closure is read from a small in-memory catalog here (the SQL that answers
it on PostgreSQL is tested in test_catalog_build.py): its repost chains, the
keys the catalog joined before (both to the fixpoint), and the poster's
releases posted within uploads.TOGETHER_SECONDS, two windows deep; nothing of
other hours or posters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs
from hypothesis import given
from hypothesis import strategies as st

from usenet_indexer.core.catalog import WINDOW_ROUNDS, Again, Closure, Span, Window, coalesced
from usenet_indexer.core.reposts import repost_key
from usenet_indexer.core.uploads import TOGETHER_SECONDS

HOUR = 3600
T0 = 1_700_000_000


def key(n: int) -> bytes:
    return n.to_bytes(16, "big")


def closure_of(
    touched: Iterable[bytes],
    spans: Mapping[bytes, Span],
    rows: Iterable[Iterable[bytes]] = (),
    fresh: Mapping[bytes, tuple[int, int]] | None = None,
) -> set[bytes]:
    """The closure's keys (`driven`)."""
    return driven(touched, spans, rows, fresh).keys


def driven(
    touched: Iterable[bytes],
    spans: Mapping[bytes, Span],
    rows: Iterable[Iterable[bytes]] = (),
    fresh: Mapping[bytes, tuple[int, int]] | None = None,
) -> Closure:
    """The closure driven over dicts, answering each look-up as store/catalog.py's SQL."""
    catalog_rows = [set(r) for r in rows]
    closure = Closure.of(touched, fresh)
    while wanted := closure.wanted():
        if wanted.spans:
            closure.answer(spans={k: spans[k] for k in wanted.spans if k in spans})
            continue
        asked = set(wanted.rows)
        in_rows = {k for row in catalog_rows if row & asked for k in row}
        in_windows = {k for w in wanted.windows for k, s in spans.items() if in_window(w, s)}
        closure.answer(rows=in_rows, windows=in_windows)
    return closure


def test_a_touched_key_brings_its_stored_repost_chain() -> None:
    base = key(1)
    first, second = repost_key(base), repost_key(repost_key(base))
    spans = {
        base: Span("a@b", T0, T0 + 60),
        first: Span("a@b", T0 + 90 * 24 * HOUR, T0 + 90 * 24 * HOUR),
        second: Span("a@b", T0 + 400 * 24 * HOUR, T0 + 400 * 24 * HOUR),
    }
    assert closure_of([base], spans) == {base, first, second}
    del spans[first]  # the chain ends where a repost key is not stored
    assert closure_of([base], spans) == {base}


def test_a_closure_says_what_found_each_key_it_merges_again() -> None:
    # The build's log line says why a build merged more keys than batches touched.
    base = key(1)
    spans = {
        base: Span("a@b", T0, T0 + 60),
        repost_key(base): Span("a@b", T0 + 90 * 24 * HOUR, T0 + 90 * 24 * HOUR),
        key(2): Span("other@c", T0 + 30 * 24 * HOUR, T0 + 30 * 24 * HOUR),
        key(3): Span("a@b", T0 - 900, T0 - 60),
    }
    closure = driven([base], spans, rows=[[base, key(2)]])
    assert closure.keys == {base, repost_key(base), key(2), key(3)}
    assert closure.again() == Again(chains=1, rows=1, windows=1)
    assert str(closure.again()) == "chains 1, rows 1, windows 1"
    # A key found two ways counts once, for the first (a row before a window).
    closure = driven([base], spans, rows=[[base, key(2), key(3)]])
    assert closure.again() == Again(chains=1, rows=2, windows=0)
    # The touched keys are not merged *again*, however else they are found.
    assert driven([base, key(3)], spans, rows=[[base, key(3)]]).again() == Again(chains=1)


def test_the_keys_a_row_was_made_of_come_again_whatever_their_poster_and_date() -> None:
    spans = {key(1): Span("a@b", T0, T0), key(2): Span("other@c", T0 + 30 * 24 * HOUR, T0)}
    assert closure_of([key(1)], spans, rows=[[key(1), key(2)]]) == {key(1), key(2)}
    assert closure_of([key(1)], spans) == {key(1)}


def test_the_posters_releases_near_in_time_come_again_and_no_others() -> None:
    spans = {
        key(1): Span("a@b", T0, T0 + 600),
        # Within TOGETHER_SECONDS of key 1's span, before and after.
        key(2): Span("a@b", T0 - 900, T0 - 60),
        key(3): Span("a@b", T0 + 600 + TOGETHER_SECONDS, T0 + 600 + TOGETHER_SECONDS + 60),
        # The same poster an hour and more away; another poster at the same time.
        key(4): Span("a@b", T0 + 600 + TOGETHER_SECONDS + 2 * HOUR, T0 + 5 * HOUR),
        key(5): Span("c@d", T0, T0 + 600),
        # Undated: never joined by link.
        key(6): Span("a@b", 0, 0),
    }
    assert closure_of([key(1)], spans) == {key(1), key(2), key(3)}


def test_windows_reach_one_deep_not_through_a_posters_whole_history() -> None:
    # A poster around the clock: each upload 20 minutes after the last. The
    # touched key's window finds the next; its window is not looked in
    # (WINDOW_ROUNDS), or every build would bring back all of them.
    spans = {key(n): Span("a@b", T0 + n * 20 * 60, T0 + n * 20 * 60 + 60) for n in range(8)}
    assert WINDOW_ROUNDS == 1
    assert closure_of([key(0)], spans) == {key(0), key(1)}
    # The rows the catalog made are still followed whole, however far: those of
    # what the window found too.
    assert closure_of([key(0)], spans, rows=[[key(1), key(7)]]) == {key(n) for n in (0, 1, 7)}
    # A touched key's rows bring their keys, but not those keys' windows: what
    # they were joined with is in the rows already.
    assert closure_of([key(0)], spans, rows=[[key(0), key(5)]]) == {key(n) for n in (0, 1, 5)}


def test_a_shared_from_asks_a_window_for_an_albums_parts_only() -> None:
    # uploads.link joins an album's tracks posted under PowerPost's default
    # From (issue 28): a track stored later must bring the album's others back,
    # and nothing else of the thousands of uploads under that From: not those
    # of another M, nor those a build found are no album's (a rar upload).
    pp = "Yenc@power-post.org (Yenc-PP-A&A)"
    spans = {
        key(1): Span(pp, T0, T0, 13),
        key(2): Span(pp, T0 + 60, T0 + 60, 13),
        key(3): Span(pp, T0 + 3 * HOUR, T0 + 3 * HOUR, 13),
        key(4): Span(pp, T0 + 120, T0 + 120, 9),
        key(5): Span(pp, T0 + 180, T0 + 180, 13, no_album=True),
        key(6): Span(pp, T0 + 240, T0 + 240, None),
    }
    assert closure_of([key(1)], spans) == {key(1), key(2)}
    # A release marked no album's asks for none; one without a counter neither.
    assert closure_of([key(5)], spans) == {key(5)}
    assert closure_of([key(6)], spans) == {key(6)}
    # Another poster's window still finds every release of his near in time.
    mine = {k: attrs.evolve(s, poster="a@b") for k, s in spans.items()}
    assert closure_of([key(1)], mine) == {key(n) for n in (1, 2, 4, 5, 6)}


def test_a_key_posted_again_a_day_later_brings_the_releases_near_each_post_only() -> None:
    # The same file name uploaded again by someone else a day later under
    # PowerPost's default From (a popular album's track): one key, two runs of
    # chunks. Under a tool's From the merge puts no file more than
    # merge.APART_SECONDS from its generation's latest, so the day between is
    # not read, and a release of that day is not found for the key's first
    # and last dates. A release is found by its whole span, though (key 5:
    # one of its generations may reach over the window).
    pp = "Yenc@power-post.org (Yenc-PP-A&A)"
    day = 24 * HOUR

    def spans(poster: str) -> dict[bytes, Span]:
        return {
            key(1): Span(
                poster, T0, T0 + day + 60, 13, times=((T0, T0 + 60), (T0 + day, T0 + day + 60))
            ),
            key(2): Span(poster, T0 + 120, T0 + 120, 13),
            key(3): Span(poster, T0 + day // 2, T0 + day // 2, 13),
            key(4): Span(poster, T0 + day - 600, T0 + day - 600, 13),
            key(5): Span(
                poster,
                T0 - 9 * day,
                T0 + 2 * day,
                13,
                times=((T0 - 9 * day, T0 - 9 * day), (T0 + 2 * day, T0 + 2 * day)),
            ),
            key(6): Span(poster, T0 + 3 * day, T0 + 3 * day, 13),
        }

    assert closure_of([key(1)], spans(pp)) == {key(n) for n in (1, 2, 4, 5)}
    # Under any other poster's From the key may be one generation from its first
    # post to its last (files added days later), but link joins to it only what
    # was posted together with its first run (merge._first_run_end): the day
    # between is not read either (key 3).
    assert closure_of([key(1)], spans("a@b")) == {key(n) for n in (1, 2, 4, 5)}
    # Chunks within merge.APART_SECONDS of each other are one run: one window.
    span = Span("a@b", T0, T0 + 2 * HOUR, times=((T0, T0 + 60), (T0 + HOUR, T0 + 2 * HOUR)))
    assert span.runs() == [(T0, T0 + 2 * HOUR)]


def test_a_tool_froms_key_posted_all_day_is_looked_around_its_fresh_chunks_only() -> None:
    # A common file name under NewsUP's default From, posted again every 50 minutes
    # for ten hours (one run of chunks: each within merge.APART_SECONDS of the
    # last), and a fresh chunk after all of them (what the batch stored since the
    # key's last build: catalog_pending's dates). The merge puts a file only into a
    # generation whose latest file is within APART_SECONDS of it: only from an hour
    # before the fresh chunk on may a part join it now, and the morning's releases
    # (key 2) are not read again. Without fresh dates, or when a stored chunk comes
    # after the fresh one, or under an uploader's own From, the run is looked
    # around whole.
    newsup = "NewsUP <NewsUP@somewhere.cbr>"
    step = 50 * 60
    times = tuple((T0 + i * step, T0 + i * step + 60) for i in range(13))
    last = times[-1][0]

    def spans(poster: str) -> dict[bytes, Span]:
        return {
            key(1): Span(poster, T0, last + 60, 10, times=times),
            key(2): Span(poster, T0 + 2 * HOUR, T0 + 2 * HOUR, 3),  # the morning
            key(3): Span(poster, last - HOUR, last - HOUR, 3),  # an hour before the fresh one
            key(4): Span(poster, last + 20 * HOUR, last + 20 * HOUR, 3),  # the next day
        }

    fresh = {key(1): (last, last + 60)}
    # (helper-95: the run the fresh chunk reaches is looked around whole: the
    # generation it joins may begin anywhere in it, and may leave its upload for one
    # posted near its first file; see test_catalog_windows' tool From case.)
    assert closure_of([key(1)], spans(newsup), fresh=fresh) == {key(1), key(2), key(3)}
    assert closure_of([key(1)], spans(newsup)) == {key(1), key(2), key(3)}
    # A stored chunk after the fresh one, or reaching into it: the whole run.
    middle = {key(1): (times[5][0], times[5][1])}
    assert closure_of([key(1)], spans(newsup), fresh=middle) == {key(1), key(2), key(3)}
    # A key the fresh dates do not name (a row's keys, a probe's): its whole run.
    assert closure_of([key(1)], spans(newsup), fresh={key(9): (last, last)}) == {
        key(1),
        key(2),
        key(3),
    }
    # Under an uploader's own From too (link reaches a part's first run, which the
    # fresh chunk only lengthens), and a fresh chunk between stored ones is looked
    # around from an hour before it on, the stored ones after it with it (the
    # merge keeps his key one generation).
    assert closure_of([key(1)], spans("a@b"), fresh=fresh) == {key(1), key(2), key(3)}
    assert closure_of([key(1)], spans("a@b"), fresh=middle) == {key(1), key(2), key(3)}


def test_a_key_filled_in_again_and_again_is_looked_around_its_new_post_only() -> None:
    # A poster's key with chunks on days one, three and five (one generation under
    # his own From), day five's fresh: looked around day five's post only; what he
    # posted near days one and three was looked around when those came, and what
    # link joined then is in the key's row. When the fresh chunk is its earliest
    # (its first run, and its place among his parts, may change): every post.
    day = 24 * HOUR
    times = ((T0, T0 + 60), (T0 + 2 * day, T0 + 2 * day + 60), (T0 + 4 * day, T0 + 4 * day + 60))
    spans = {
        key(1): Span("a@b", T0, T0 + 4 * day + 60, 10, times=times),
        key(2): Span("a@b", T0 + 600, T0 + 600, 3),  # near day one
        key(3): Span("a@b", T0 + 2 * day + 600, T0 + 2 * day + 600, 3),  # near day three
        key(4): Span("a@b", T0 + 4 * day + 600, T0 + 4 * day + 600, 3),  # near day five
        key(5): Span("a@b", T0 + 3 * day, T0 + 3 * day, 3),  # between three and five
    }
    fresh = {key(1): (T0 + 4 * day, T0 + 4 * day + 60)}
    # (helper-95: and its first run, where its generation begins: a fill may make it
    # leave its upload for one posted near its first file.)
    assert closure_of([key(1)], spans, fresh=fresh) == {key(1), key(2), key(4)}
    assert closure_of([key(1)], spans) == {key(1), key(2), key(3), key(4)}
    earliest = {key(1): (T0, T0 + 60)}
    assert closure_of([key(1)], spans, fresh=earliest) == {key(1), key(2), key(3), key(4)}


def test_a_release_stored_before_its_latest_date_was_kept_is_open_ended() -> None:
    spans = {
        key(1): Span("a@b", T0, None),
        key(2): Span("a@b", T0 + 30 * 24 * HOUR, T0 + 30 * 24 * HOUR),
    }
    assert closure_of([key(1)], spans) == {key(1), key(2)}
    assert closure_of([key(2)], spans) == {key(1), key(2)}


def test_keys_not_stored_are_left_out() -> None:
    assert closure_of([key(1), key(2)], {key(1): Span("a@b", T0, T0)}) == {key(1)}


def in_window(window: Window, span: Span) -> bool:
    """Whether a release's span (its first file to its last, not its chunks' times) meets
    a window, or one of its chunks of another poster does (`Span.others`), as
    store/catalog.py's window queries ask."""
    return (
        span.poster == window.poster
        and span.posted > 0
        and (window.high is None or span.posted <= window.high)
        and (span.latest is None or span.latest >= window.low)
        and (window.album is None or (span.files_announced == window.album and not span.no_album))
    ) or any(
        poster == window.poster
        and (window.high is None or posted <= window.high)
        and (latest is None or latest >= window.low)
        and (window.album is None or m == window.album)
        for poster, m, posted, latest in span.others
    )


def test_a_second_posters_chunk_under_a_key_is_looked_around_for_that_poster() -> None:
    # Key 1 is a name amy posted first (its row says amy); bob posted the same name
    # on day three, and a sample of his own (key 2) beside it; key 3 is amy's post
    # of day three. Touched by bob's chunk, key 1 brings bob's sample; touched, bob's
    # sample brings key 1 (his chunk in it), and not amy's other release of the day.
    day = 24 * HOUR
    bob_at = T0 + 3 * day
    spans = {
        key(1): Span("amy@a", T0, bob_at + 60, 1, others=(("bob@b", 2, bob_at, bob_at + 60),)),
        key(2): Span("bob@b", bob_at + 40, bob_at + 100, 2),
        key(3): Span("amy@a", bob_at + 10 * HOUR, bob_at + 10 * HOUR, 1),
    }
    fresh = {key(1): (bob_at, bob_at + 60)}
    assert closure_of([key(1)], spans, fresh=fresh) == {key(1), key(2)}
    assert closure_of([key(2)], spans) == {key(1), key(2)}
    # A posting tool's From among a key's posters is looked around its own chunks
    # there, not through the tool's uploads of other hours.
    tool = "yEnc@power-post.org"
    spans[key(1)] = Span("amy@a", T0, bob_at + 60, 1, others=((tool, 3, bob_at, bob_at + 60),))
    spans[key(4)] = Span(tool, bob_at + 60, bob_at + 90, 3)  # an album part beside it
    spans[key(5)] = Span(tool, bob_at + 5 * HOUR, bob_at + 5 * HOUR, 3)  # hours later
    assert closure_of([key(1)], spans, fresh=fresh) == {key(1), key(4)}


def test_a_name_many_posters_posted_is_looked_around_its_fresh_chunks_posters_only() -> None:
    # One name posted once by each of 200 posters, a day apart (a random From per
    # upload, the file named as it is: one key). A build of a chunk posted now asks
    # windows of the row's poster and the fresh chunk's, not one per poster; with no
    # fresh dates (a row's or a probe's mark), of every poster.
    day = 24 * HOUR
    others = tuple((f"p{n}@x", 1, T0 + n * day, T0 + n * day + 60) for n in range(1, 201))
    spans = {key(1): Span("first@x", T0, T0 + 200 * day + 60, 1, others=others)}
    last = T0 + 200 * day

    def posters(fresh: dict[bytes, tuple[int, int]] | None) -> set[str]:
        """The posters of the windows the closure asks."""
        closure = Closure.of([key(1)], fresh)
        asked: set[str] = set()
        while wanted := closure.wanted():
            asked |= {w.poster for w in wanted.windows}
            if wanted.spans:
                closure.answer(spans={k: spans[k] for k in wanted.spans if k in spans})
            else:
                closure.answer(rows=set(), windows=set())
        return asked

    assert posters({key(1): (last, last + 60)}) == {"first@x", "p200@x"}
    assert len(posters(None)) == 201


def test_one_posters_overlapping_windows_are_asked_as_one() -> None:
    windows = [
        Window("a@b", T0, T0 + HOUR),
        Window("a@b", T0 + 30 * 60, T0 + 2 * HOUR),
        Window("a@b", T0 + 5 * HOUR, T0 + 6 * HOUR),
        Window("c@d", T0, T0 + HOUR),
        Window("a@b", T0 + 2 * HOUR + 1, T0 + 3 * HOUR),
    ]
    assert coalesced(windows) == [
        Window("a@b", T0, T0 + 3 * HOUR),
        Window("a@b", T0 + 5 * HOUR, T0 + 6 * HOUR),
        Window("c@d", T0, T0 + HOUR),
    ]
    assert coalesced([Window("a@b", T0, None), Window("a@b", T0 + HOUR, T0 + 2 * HOUR)]) == [
        Window("a@b", T0, None)
    ]
    # An album's windows are joined with those of its M only.
    assert coalesced(
        [Window("p", T0, T0 + HOUR, 13), Window("p", T0, T0 + HOUR, 9), Window("p", T0, T0 + HOUR)]
    ) == [Window("p", T0, T0 + HOUR), Window("p", T0, T0 + HOUR, 9), Window("p", T0, T0 + HOUR, 13)]


_times = st.integers(min_value=0, max_value=40)


_albums = st.one_of(st.none(), st.sampled_from([2, 3]))


@given(
    windows=st.lists(
        st.tuples(st.sampled_from("ab"), _times, st.one_of(st.none(), _times), _albums),
        max_size=12,
    ),
    spans=st.lists(
        st.tuples(
            st.sampled_from("ab"), _times, st.one_of(st.none(), _times), _albums, st.booleans()
        ),
        max_size=20,
    ),
)
def test_coalesced_windows_find_the_same_releases(
    windows: list[tuple[str, int, int | None, int | None]],
    spans: list[tuple[str, int, int | None, int | None, bool]],
) -> None:
    asked = [Window(p, low, None if n is None else low + n, m) for p, low, n, m in windows]
    stored = [
        Span(p, posted, None if n is None else posted + n, m, marked)
        for p, posted, n, m, marked in spans
    ]
    found = {i for i, s in enumerate(stored) for w in asked if in_window(w, s)}
    joined = coalesced(asked)
    assert {i for i, s in enumerate(stored) for w in joined if in_window(w, s)} == found
    assert len(joined) <= len(set(asked))


_span_times = st.tuples(
    st.integers(min_value=-(2**62), max_value=2**62),
    st.one_of(st.none(), st.integers(min_value=0, max_value=3 * 24 * HOUR)),
)


@given(
    poster=st.sampled_from(["a@b", "newsup <newsup@somewhere.cbr>", "yEnc@power-post.org"]),
    posted=st.one_of(st.just(0), st.integers(min_value=1, max_value=2**62)),
    latest=st.one_of(st.none(), st.integers(min_value=0, max_value=2**62)),
    announced=st.one_of(st.none(), st.integers(min_value=0, max_value=4)),
    marked=st.booleans(),
    times=st.lists(_span_times, max_size=6),
    others=st.lists(
        st.tuples(
            st.sampled_from(["c@d", "newsup <newsup@somewhere.cbr>", "yEnc@power-post.org"]),
            st.one_of(st.none(), st.integers(min_value=0, max_value=4)),
            _span_times,
        ),
        max_size=4,
    ),
)
def test_a_chain_of_one_key_has_the_windows_the_general_way_makes(
    poster: str,
    posted: int,
    latest: int | None,
    announced: int | None,
    marked: bool,
    times: list[tuple[int, int | None]],
    others: list[tuple[str, int | None, tuple[int, int | None]]],
) -> None:
    # Most chains are one key: their windows are made the short way (a span's runs
    # once, not its runs' runs), which must be the general way's; other posters'
    # chunks under the key too.
    runs = tuple((start, None if n is None else start + n) for start, n in times)
    foreign = tuple(
        (who, m, start, None if n is None else start + n) for who, m, (start, n) in others
    )
    span = Span(poster, posted, latest, announced, marked, runs, foreign)
    closure = Closure()
    windows: set[tuple[str, int, int | None, int | None]] = set()
    closure._key_windows(key(1), span, windows)
    assert windows == set(closure._chain_windows([span]))


def test_a_chain_with_a_touched_key_of_unknown_fresh_dates_is_looked_around_whole() -> None:
    # A chain: key 1 (day one, and fresh on day six) and its repost key (day three),
    # both touched; the repost key's pending mark holds no dates (a batch with an
    # undated chunk beside its dated one, a probe's mark, a mark from before
    # migration 0037): its whole span is to be looked around, key 3 (near day three)
    # with it. The chain's fresh dates were taken from key 1 alone.
    day = 24 * HOUR
    base, again = key(1), repost_key(key(1))
    spans = {
        base: Span(
            "a@b", T0, T0 + 5 * day, 10, times=((T0, T0 + 60), (T0 + 5 * day, T0 + 5 * day))
        ),
        again: Span("a@b", T0 + 2 * day, T0 + 2 * day, 10),
        key(3): Span("a@b", T0 + 2 * day + 600, T0 + 2 * day + 600, 10),
    }
    fresh = {base: (T0 + 5 * day, T0 + 5 * day)}
    assert key(3) in closure_of([base, again], spans, fresh=fresh)
