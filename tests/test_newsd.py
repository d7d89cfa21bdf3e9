"""scripts/newsd post --days: the realistic generated group, dated over weeks, on a private INN2.

The demo posts these articles (scripts/demo); `uidx ranges plan --days`
bisects over their dates, so what the server returns must carry the dates
the generator gave, old ones included (INN2's artcutoff would drop articles
over 10 days old).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime

import pytest
import trio

from usenet_indexer.nntp.client import connect
from usenet_indexer.testing.newsd import realistic_articles
from usenet_indexer.testing.newsd_private import (
    CannotInstall,
    PrivateNewsServer,
    private_news_server,
)

GROUP = "alt.binaries.uidx.dated"
ARTICLES = 600
SEED = 3
DAYS = 21.0
# INN2's default artcutoff: articles posted longer ago than this are refused.
INN_DEFAULT_CUTOFF_DAYS = 10
DEADLINE_SECONDS = 120
POST_TIMEOUT_SECONDS = 120


@pytest.fixture(scope="module")
def dated_server() -> Iterator[tuple[PrivateNewsServer, int]]:
    """A private INN2 with ARTICLES realistic articles posted over DAYS days; and their end."""
    # An hour back: the last dates are not "now" by chance.
    end = int(time.time()) - 3600
    try:
        with private_news_server([GROUP], prefix="uidx-newsd-dated-") as server:
            server.post(GROUP, ARTICLES, seed=SEED, days=DAYS, end=end,
                        timeout_seconds=POST_TIMEOUT_SECONDS)  # fmt: skip
            yield server, end
    except CannotInstall as error:
        if os.environ.get("CI"):
            pytest.fail(f"INN2 is required in CI: {error}")
        pytest.skip(f"INN2 is not available here: {error}")


@pytest.mark.trio
async def test_realistic_articles_come_back_with_their_dates_over_weeks(
    dated_server: tuple[PrivateNewsServer, int],
) -> None:
    server, end = dated_server
    posted = list(realistic_articles(GROUP, ARTICLES, SEED, days=DAYS, end=end))
    with trio.fail_after(DEADLINE_SECONDS):
        async with connect(server.url()) as client:
            count, low, high = await client.group(GROUP)
            assert (count, low, high) == (ARTICLES, 1, ARTICLES)
            lines = [line async for _, part in client.over_pipelined([(1, high)]) for line in part]
    assert len(lines) == ARTICLES
    dates = []
    for number, (line, article) in enumerate(zip(lines, posted, strict=True), start=1):
        fields = line.decode().split("\t")
        assert int(fields[0]) == number
        assert (fields[1], fields[2], fields[4]) == (
            article.subject, article.poster, article.message_id,
        )  # fmt: skip
        assert fields[3] == article.date
        dates.append(parsedate_to_datetime(fields[3]).timestamp())
    assert dates == sorted(dates)
    # Spread over the weeks asked for, ending before `end`, the oldest past INN2's cut-off.
    assert dates[-1] - dates[0] > (DAYS - 1) * 86_400
    assert end - DAYS * 86_400 <= dates[0] < end - INN_DEFAULT_CUTOFF_DAYS * 86_400
    assert dates[-1] < end
    assert len({int(d) // 86_400 for d in dates}) > DAYS - 1


def test_realistic_articles_are_a_real_groups_mix() -> None:
    articles = list(realistic_articles(GROUP, 2_000, SEED, days=7, end=1_800_000_000))
    assert len(articles) == 2_000
    assert len({a.message_id for a in articles}) == 2_000
    # Uploads of many posters interleave, some crossposted; replies refer to their posts.
    assert len({a.poster for a in articles}) > 50
    assert any(a.newsgroups is not None and GROUP in a.newsgroups.split(",") for a in articles)
    assert any(a.references for a in articles)
    assert sum(" yEnc (" in a.subject for a in articles) > 1_900
    # The same arguments give the same articles (a test compares them with the server's).
    assert articles == list(realistic_articles(GROUP, 2_000, SEED, days=7, end=1_800_000_000))
