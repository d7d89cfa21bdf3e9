"""IMDb, TheTVDB, TVmaze and TMDB ids read out of NFO text (decode/ids.py).

The NFO lines below are written the way scene and P2P NFOs write their
links (the sites' own URL shapes), not from the parser's patterns.
"""

from __future__ import annotations

import pytest

from usenet_indexer.decode.ids import MediaIds, media_ids
from usenet_indexer.decode.nfo import nfo_text

CASES = [
    ("  IMDb........: https://www.imdb.com/title/tt0133093/", MediaIds(imdb=133093)),
    ("Link: http://imdb.com/title/tt10872600/?ref_=nv_sr_1", MediaIds(imdb=10872600)),
    ("m.imdb.com/title/tt0944947", MediaIds(imdb=944947)),
    ("iMDB Rating : 8.7/10 (tt0133093)", MediaIds(imdb=133093)),
    ("TVDB ......: https://thetvdb.com/?tab=series&id=81189", MediaIds(tvdb=81189)),
    ("http://thetvdb.com/index.php?tab=series&id=121361&lid=7", MediaIds(tvdb=121361)),
    ("https://thetvdb.com/dereferrer/series/305288", MediaIds(tvdb=305288)),
    ("https://thetvdb.com/series/breaking-bad", MediaIds()),
    ("TVDB ID: 81189", MediaIds(tvdb=81189)),
    ("TVmaze ....: https://www.tvmaze.com/shows/169/breaking-bad", MediaIds(tvmaze=169)),
    ("http://api.tvmaze.com/shows/82", MediaIds(tvmaze=82)),
    ("https://www.themoviedb.org/movie/603-the-matrix", MediaIds(tmdb=603)),
    ("https://www.themoviedb.org/tv/1396-breaking-bad", MediaIds(tmdb_tv=1396)),
    ("TMDb: 27205", MediaIds(tmdb=27205)),
    # Not ids: a year and a size, a web shop, an episode number, a phone number.
    ("Released 2019 - 1 x 4.37 GB - www.attrition.tt/shop", MediaIds()),
    ("Episode ..: S01E05 Runtime 43 min", MediaIds()),
    ("Call 0800tt12345678901", MediaIds()),
]


@pytest.mark.parametrize(("line", "expected"), CASES)
def test_an_nfo_line_names_its_ids(line: str, expected: MediaIds) -> None:
    assert media_ids(line) == expected


def test_a_whole_nfo_in_cp437_gives_every_kind_and_the_most_named_id() -> None:
    art = "\u2550" * 60
    text = "\n".join(
        [
            art,
            "             The.Matrix.1999.1080p.BluRay.x264-GROUP",
            art,
            " IMDb ......: https://www.imdb.com/title/tt0133093/",
            " TMDb ......: https://www.themoviedb.org/movie/603",
            " Also by the makers: https://www.imdb.com/title/tt0234215/",
            art,
            " https://www.imdb.com/title/tt0133093/",
        ]
    )
    ids = media_ids(nfo_text(text.encode("cp437")))
    assert ids == MediaIds(imdb=133093, tmdb=603)
    assert ids.imdb_text == "0133093"
    assert ids
    assert not MediaIds()
