"""Groups added with the servers' water marks, and ranges planned back to a date.

The bisect (article_dates.py) is checked on plain dicts of dates with holes;
the commands against real INN2s: the session's server (alt.binaries.uidx.*,
every article dated the same moment) and one of this module with articles an
hour apart, some cancelled, so that the cut-off of `--days` falls among them.
The expected answers are computed here from every OVER line.
"""

from __future__ import annotations

import os
import socket
import subprocess
from bisect import bisect_left
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path

import attrs
import psycopg
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from nntp_fixtures import PASSWORD, USER, NewsServer

from usenet_indexer.cli import main
from usenet_indexer.core.article_dates import (
    Dated,
    DateSearch,
    Probe,
    Step,
    first_at_or_after,
    first_dated,
    parse_date,
)
from usenet_indexer.nntp.client import connect
from usenet_indexer.testing.newsd import INN_BIN, Layout, PostedArticle
from usenet_indexer.testing.newsd_private import private_news_server

# A generous bound on any NNTP round trip of a test (INN2 on loopback).
DEADLINE_SECONDS = 60
CUTOFF = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

# -- the bisect, on dicts ---------------------------------------------------------------


def _dated_at(dates: dict[int, datetime | None]) -> Callable[[int], Dated | None]:
    """What a server's OVER tells a probe: the first article at or after n with a date."""
    numbers = sorted(dates)

    def dated_at(n: int) -> Dated | None:
        for article in numbers[bisect_left(numbers, n) :]:
            date = dates[article]
            if date is not None:
                return Dated(article, date)
        return None

    return dated_at


def _linear(dates: dict[int, datetime | None], cutoff: datetime) -> int | None:
    return next((n for n in sorted(dates) if (d := dates[n]) is not None and d >= cutoff), None)


@st.composite
def dated_groups(draw: st.DrawFn) -> tuple[int, int, dict[int, datetime | None]]:
    """A group low..high with holes, dates rising with the numbers, some unreadable."""
    low = draw(st.integers(1, 2**40))
    high = low + draw(st.integers(-1, 5000))
    present = draw(st.sets(st.integers(low, high), max_size=300)) if high >= low else set()
    steps = iter(draw(st.lists(st.integers(0, 7200), min_size=len(present), max_size=len(present))))
    dates: dict[int, datetime | None] = {}
    moment = CUTOFF - timedelta(seconds=draw(st.integers(0, 300 * 3600)))
    for n in sorted(present):
        moment += timedelta(seconds=next(steps))
        dates[n] = None if draw(st.integers(0, 9)) == 0 else moment
    return low, high, dates


@settings(max_examples=400, deadline=1000)
@given(dated_groups())
def test_the_bisect_finds_what_a_scan_finds(
    group: tuple[int, int, dict[int, datetime | None]],
) -> None:
    low, high, dates = group
    dated_at = _dated_at(dates)
    search = DateSearch.between(low, high, CUTOFF)
    while (probe := search.next_probe()) is not None:
        assert low <= probe.first <= probe.last <= high
        search.answer(probe, dated_at(probe.first))
    assert search.result == _linear(dates, CUTOFF)
    assert search.probes <= max(0, high - low + 1).bit_length() + 1
    assert first_at_or_after(low, high, CUTOFF, dated_at) == search.result


@settings(max_examples=200, deadline=1000)
@given(st.dictionaries(st.integers(1, 2000), st.integers(-100, 100), max_size=200))
def test_dates_out_of_order_still_give_a_boundary(offsets: dict[int, int]) -> None:
    # Posters' clocks: the answer is some boundary between older and recent articles.
    dates = {n: CUTOFF + timedelta(hours=h) for n, h in offsets.items()}
    found = first_at_or_after(1, 2000, CUTOFF, _dated_at(dict(dates)))
    numbers = sorted(dates)
    if found is None:
        assert not numbers or dates[numbers[-1]] < CUTOFF
    else:
        assert dates[found] >= CUTOFF
        before = numbers.index(found) - 1
        assert before < 0 or dates[numbers[before]] < CUTOFF


def test_the_bisect_over_a_small_group_with_holes() -> None:
    hour = timedelta(hours=1)
    dates: dict[int, datetime | None] = {
        n: CUTOFF + (n - 50) * hour for n in range(10, 100) if not 40 <= n < 60
    }
    dates[60] = None  # unreadable: the next one counts
    assert _linear(dates, CUTOFF) == 61
    assert first_at_or_after(10, 99, CUTOFF, _dated_at(dates)) == 61
    assert first_at_or_after(10, 39, CUTOFF, _dated_at(dates)) is None  # all older
    assert first_at_or_after(70, 99, CUTOFF, _dated_at(dates)) == 70  # all recent
    assert first_at_or_after(10, 9, CUTOFF, _dated_at(dates)) is None  # an empty span
    assert first_at_or_after(40, 59, CUTOFF, _dated_at(dates)) is None  # a hole


def test_the_search_checks_its_caller() -> None:
    with pytest.raises(ValueError, match="timezone"):
        DateSearch.between(1, 10, datetime(2026, 11, 27))
    search = DateSearch.between(1, 100, CUTOFF)
    with pytest.raises(ValueError, match="not done"):
        _ = search.result
    probe = search.next_probe()
    assert probe == Probe(51, 100)
    with pytest.raises(ValueError, match="pending"):
        search.answer(Probe(1, 100), None)
    # An answer past the probe's span (a caller reading on) is nothing found there.
    assert search.answer(probe, Dated(101, CUTOFF)) is Step.EMPTY
    assert search.span == (1, 51)
    assert search.answer(Probe(26, 50), Dated(30, CUTOFF - timedelta(1))) is Step.OLDER
    assert search.span == (31, 51)
    assert search.answer(Probe(41, 50), Dated(45, CUTOFF)) is Step.RECENT
    assert search.span == (31, 41)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mon, 30 Nov 2026 10:00:00 +0000", datetime(2026, 11, 30, 10, tzinfo=UTC)),
        ("Mon, 30 Nov 2026 12:00:00 +0200", datetime(2026, 11, 30, 10, tzinfo=UTC)),
        ("30 Nov 2026 10:00:00 -0000", datetime(2026, 11, 30, 10, tzinfo=UTC)),
        ("30 Nov 2026 10:00:00 GMT", datetime(2026, 11, 30, 10, tzinfo=UTC)),
        ("garbage", None),
        ("", None),
        ("Mon, 31 Feb 2026 10:00:00 +0000", None),
        ("Mon, 30 Nov 2026 25:00:00 +0000", None),
        ("Mon, 30 Nov 99999 10:00:00 +0000", None),
        ("Mon, 30 Nov 2026 10:00:00 +9999", None),
    ],
)
def test_dates_are_read_or_refused(text: str, expected: datetime | None) -> None:
    assert parse_date(text) == expected


def test_the_first_dated_line_of_a_window() -> None:
    good = "Mon, 30 Nov 2026 10:00:00 +0000"
    lines = [
        b"5\tbefore the window\tp\t" + good.encode() + b"\t<a@x>\t\t1\t1",
        b"not a line",
        b"7\ttoo\tfew",
        b"x8\tnumber\tp\t" + good.encode(),
        b"9\tunreadable\tp\tyesterday\t<b@x>\t\t1\t1",
        b"10\tfound\tp\t" + good.encode() + b"\t<c@x>\t\t1\t1\tXref: x g:10",
        b"11\tlater\tp\t" + good.encode() + b"\t<d@x>\t\t1\t1",
    ]
    found = Dated(10, datetime(2026, 11, 30, 10, tzinfo=UTC))
    assert first_dated(lines, 6, 20) == found
    # Fed one line at a time, as pieces of an OVER reply arrive.
    pieces = [first_dated([line], 6, 20) for line in lines]
    assert next(p for p in pieces if p is not None) == found
    assert first_dated(lines, 6, 9) is None
    assert first_dated([], 1, 9) is None


# -- a news server with articles an hour apart ---------------------------------------------

DATES_GROUP = "alt.binaries.uidx.dates"
DATED_ARTICLES = 3000
# Article n is dated (DATED_ARTICLES - n) hours and a half before the posting:
# a cut-off of now - N days, taken within half an hour of it, falls between two.
HOUR = timedelta(hours=1)
# Cancelled articles: the first one (low stays 1 in GROUP), every 97th, a run
# astride the cut-off of --days 3 (n >= 2929), and one astride that of
# --days 60 (n >= 1561) longer than the first OVER window of a probe (the
# first probe, at 1501, reads on to 1580).
CANCELLED = frozenset({1, *range(97, DATED_ARTICLES, 97), *range(2925, 2936), *range(1480, 1580)})


@attrs.frozen
class DatedServer:
    """A private INN2 carrying only DATES_GROUP."""

    port: int
    posted_at: datetime

    def url(self) -> str:
        return f"nntp://{USER}:{PASSWORD.replace(' ', '%20')}@127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def dated_server(news_server: NewsServer) -> Iterator[DatedServer]:
    """Started beside the session's server (which says whether INN2 can run here)."""
    with private_news_server(
        [DATES_GROUP],
        prefix="uidx-newsd-dates-",
        user=USER,
        password=PASSWORD,
        start_timeout_seconds=120,
    ) as server:
        posted_at = datetime.now(UTC).replace(microsecond=0)
        articles = [
            PostedArticle(
                f"<dates.{n}@uidx.test>",
                f"dated article {n} (1/1)",
                "poster <poster@example.com>",
                format_datetime(posted_at - (DATED_ARTICLES - n) * HOUR - HOUR / 2),
                b"hello\r\n",
            )
            for n in range(1, DATED_ARTICLES + 1)
        ]
        _takethis(server.feeder_port, articles)
        for n in sorted(CANCELLED):
            _ctlinnd(server.folder, "cancel", articles[n - 1].message_id)
        yield DatedServer(server.port, posted_at)


def _takethis(port: int, articles: list[PostedArticle]) -> None:
    window = 500  # commands in flight (as scripts/newsd post does)
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_SECONDS) as conn:
        replies = conn.makefile("rb")
        assert replies.readline().startswith(b"200")
        conn.sendall(b"MODE STREAM\r\n")
        assert replies.readline().startswith(b"203")
        for start in range(0, len(articles), window):
            batch = articles[start : start + window]
            conn.sendall(
                b"".join(
                    b"TAKETHIS " + a.message_id.encode() + b"\r\n" + a.wire(DATES_GROUP)
                    for a in batch
                )
            )
            for article in batch:
                assert replies.readline() == f"239 {article.message_id}\r\n".encode()
        conn.sendall(b"QUIT\r\n")


def _ctlinnd(folder: Path, *words: str) -> None:
    as_news: dict[str, object] = (
        {"user": "news", "group": "news", "extra_groups": []} if os.geteuid() == 0 else {}
    )
    done = subprocess.run(
        [str(INN_BIN / "ctlinnd"), *words],
        env=Layout(folder).env(),
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        **as_news,  # type: ignore[call-overload]
    )
    assert done.returncode == 0, done.stdout + done.stderr


# -- what the servers say, read here independently -------------------------------------------


@attrs.frozen
class Listing:
    low: int
    high: int
    dates: dict[int, datetime]  # every article OVER lists

    def first_since(self, cutoff: datetime, last: int | None = None) -> int | None:
        top = self.high if last is None else last
        return next((n for n, d in sorted(self.dates.items()) if d >= cutoff and n <= top), None)


def _listing(url: str, group: str) -> Listing:
    async def read() -> Listing:
        with trio.fail_after(DEADLINE_SECONDS):
            async with connect(url) as client:
                _count, low, high = await client.group(group)
                dates = {}
                async for piece in client.over(low, high):
                    for line in piece:
                        fields = line.decode().split("\t")
                        dates[int(fields[0])] = parsedate_to_datetime(fields[3])
        return Listing(low, high, dates)

    return trio.run(read)


def _ranges(pg_url: str) -> list[tuple[int, int]]:
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT first_article, last_article FROM ranges ORDER BY first_article"
        ).fetchall()
    return [(first, last) for first, last in rows]


def _marks(pg_url: str, group: str) -> tuple[int | None, int | None] | None:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT low, high FROM groups WHERE name = %s", (group,)).fetchone()
    return None if row is None else (row[0], row[1])


@pytest.fixture
def home(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("UIDX_HOME", str(tmp_path))
    monkeypatch.delenv("UIDX_NNTP", raising=False)
    return tmp_path


def _plan_days(
    group: str, days: int, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[datetime, datetime, str, str]:
    """Runs `ranges plan GROUP --days N`; the cut-off lies between the two moments returned."""
    before = datetime.now(UTC)
    assert main(["ranges", "plan", group, "--days", str(days), *extra]) == 0
    after = datetime.now(UTC)
    out, err = capsys.readouterr()
    return before - timedelta(days=days), after - timedelta(days=days), out, err


# -- uidx groups add ------------------------------------------------------------------------


@pytest.mark.usefixtures("home")
def test_groups_add_stores_what_group_says(
    news_server: NewsServer,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("UIDX_NNTP", news_server.url())
    for group in (news_server.group, news_server.high_group):
        listing = _listing(news_server.url(), group)
        assert main(["groups", "add", group, "--backfill-days", "3"]) == 0
        assert _marks(pg_url, group) == (listing.low, listing.high)
        assert f"{listing.low}..{listing.high}" in capsys.readouterr().out
    assert _marks(pg_url, news_server.high_group) == (
        news_server.high_first,
        news_server.high_first + news_server.high_articles - 1,
    )


@pytest.mark.usefixtures("home")
def test_the_first_server_that_carries_the_group_answers(
    news_server: NewsServer,
    dated_server: DatedServer,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        down = f"nntp://127.0.0.1:{closed.getsockname()[1]}"
    # Down, then without the group, then the session's server.
    monkeypatch.setenv("UIDX_NNTP", f"{down} {dated_server.url()} {news_server.url()}")
    assert main(["groups", "add", news_server.group]) == 0
    listing = _listing(news_server.url(), news_server.group)
    assert _marks(pg_url, news_server.group) == (listing.low, listing.high)
    assert f"on 127.0.0.1:{news_server.port}" in capsys.readouterr().out


@pytest.mark.usefixtures("home")
def test_a_group_no_server_carries_is_not_added(
    news_server: NewsServer,
    dated_server: DatedServer,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("UIDX_NNTP", f"{news_server.url()} {dated_server.url()}")
    assert main(["groups", "add", "alt.binaries.uidx.none"]) == 1
    err = capsys.readouterr().err
    assert "no server carries alt.binaries.uidx.none" in err
    assert "411" in err
    assert PASSWORD.replace(" ", "%20") not in err
    assert _marks(pg_url, "alt.binaries.uidx.none") is None
    # Watermarks come from the servers, not the command line, when there are servers.
    assert main(["groups", "add", news_server.group, "--low", "1"]) == 78
    assert _marks(pg_url, news_server.group) is None


# -- uidx ranges plan --days ----------------------------------------------------------------


@pytest.mark.usefixtures("home")
def test_plan_days_starts_at_the_first_article_since_the_cutoff(
    dated_server: DatedServer,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("UIDX_NNTP", dated_server.url())
    listing = _listing(dated_server.url(), DATES_GROUP)
    assert (listing.low, listing.high) == (1, DATED_ARTICLES)
    assert len(listing.dates) == DATED_ARTICLES - len(CANCELLED)
    assert main(["groups", "add", DATES_GROUP]) == 0

    earliest, latest, out, err = _plan_days(DATES_GROUP, 3, capsys, "--size", "50")
    first = listing.first_since(earliest)
    assert first == listing.first_since(latest) == 2936  # 2929..2935: cancelled
    assert _ranges(pg_url) == [(2936, 2985), (2986, DATED_ARTICLES)]
    assert f"planned 2 ranges of up to 50 articles in {DATES_GROUP}: 2936..3000" in out
    assert "probe 1 at 1501" in err
    assert err.count("probe ") <= DATED_ARTICLES.bit_length() + 1

    # Further back: from just below what is planned.
    earliest, latest, out, _err = _plan_days(DATES_GROUP, 60, capsys, "--size", "1000")
    first = listing.first_since(earliest)
    assert first is not None
    assert first == listing.first_since(latest) == 1580  # 1561..1579: cancelled
    assert _ranges(pg_url)[0] == (first, first + 999)
    assert _ranges(pg_url)[1][1] == 2935
    assert f"{first}..2935" in out

    # Back past the first article: from the first one OVER lists (1 is cancelled).
    _e, _l, out, _err = _plan_days(DATES_GROUP, 200, capsys, "--size", "5000")
    assert _ranges(pg_url)[0] == (2, first - 1)
    # Everything is planned now: nothing is, and that is no mistake.
    _e, _l, out, _err = _plan_days(DATES_GROUP, 365, capsys)
    assert out.startswith(f"nothing to plan in {DATES_GROUP}")
    assert len(_ranges(pg_url)) == 5


@pytest.mark.usefixtures("home")
def test_plan_days_with_nothing_that_recent(
    dated_server: DatedServer,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("UIDX_NNTP", dated_server.url())
    assert main(["groups", "add", DATES_GROUP, "--backfill-days", "0"]) == 0
    # The backfill (0 days: from now on) is the default; the newest article is older.
    assert main(["ranges", "plan", DATES_GROUP]) == 0
    assert "nothing to plan" in capsys.readouterr().out
    assert _ranges(pg_url) == []
    assert _marks(pg_url, DATES_GROUP) == (1, DATED_ARTICLES)


@pytest.mark.usefixtures("home")
def test_plan_days_in_the_session_groups(
    news_server: NewsServer,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Every article of these groups bears the same Date: all or none are recent.
    monkeypatch.setenv("UIDX_NNTP", news_server.url())
    for group in (news_server.group, news_server.high_group):
        listing = _listing(news_server.url(), group)
        posted = min(listing.dates.values())
        assert posted == max(listing.dates.values())
        days = max(0, (datetime.now(UTC) - posted).days + 1)  # back past that date
        assert main(["groups", "add", group]) == 0
        earliest, latest, out, _err = _plan_days(group, days, capsys, "--size", "100000")
        assert listing.first_since(earliest) == listing.first_since(latest) == listing.low
        assert f"{listing.low}..{listing.high}" in out
    assert _ranges(pg_url) == [
        (1, news_server.articles),
        (news_server.high_first, news_server.high_first + news_server.high_articles - 1),
    ]
