"""NFO text (CP437 art, Latin-1, UTF-8, UTF-16) and the release names in it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.decode.nfo import nfo_text, release_names

# In the style of a scene TV NFO: a block-letter logo and a double frame, CP437.
TV_NFO = """\
       ▄▄▄▄▄▄▄   ▄▄▄▄▄▄▄  ▄▄▄▄▄▄▄▄  ▄▄   ▄▄
      ██▀▀▀▀▀██ ██▀▀▀▀▀██ ██▀▀▀▀▀▀  ██   ██
      ██     ██ ██▄▄▄▄▄██ ██  ▄▄▄▄  ██▄▄▄██  ░▒▓ proudly presents ▓▒░
      ▀▀▀▀▀▀▀▀  ▀▀     ▀▀ ▀▀▀▀▀▀▀▀   ▀▀▀▀▀
╔══════════════════════════════════════════════════════════╗
║  Show.Name.S01E02.1080p.WEB.H264-GROUP                    ║
╟──────────────────────────────────────────────────────────╢
║  Release Date....: 2024-03-14                             ║
║  Air Date........: 2024-03-13                             ║
║  Source..........: WEB                                    ║
║  Video...........: H264 @ 6000 kbps, 1920x1080            ║
║  Audio...........: English DDP5.1                         ║
║  Size............: 2.41 GiB in 50x50MB (rar)              ║
║  URL.............: https://www.tvmaze.com/shows/12345     ║
╚══════════════════════════════════════════════════════════╝
   Also out: Other.Show.S02E05.720p.HDTV.x264-OTHERGRP
   Greetings-To-All-Our-Friends and Release-Date fans
   Contact: group-crew@example.org   irc.example-net.org #GROUP
"""

# A movie NFO from a Windows editor: Windows-1252, German text, no art.
MOVIE_NFO = """\
Film.Titel.2019.German.DL.1080p.BluRay.x264-GRP

Titel.........: Film Titel (2019)
Größe.........: 12.345 MB
Veröffentlicht: 14.03.2024
Qualität......: BluRay, 1080p, x264, DTS-HD
IMDb..........: https://www.imdb.com/title/tt0000001/
Grüße an alle Freunde!
"""

MUSIC_NFO = """\
Artist-Album-2020-FLAC-GRP

Artist........: Artist
Album.........: Album
Genre.........: Electronic
Source........: CDDA
Year..........: 2020

Tracklist:
01-artist-first_track-grp.flac    4:01
02-artist-second_track-grp.flac   5:12
"""

UHD_NFO = """\
                  ┌───────────────────────────────┐
                  │ Movie Title (2019)            │
                  └───────────────────────────────┘
 RELEASE NAME : Movie.Title.2019.2160p.UHD.BluRay.x265-GRP
 RELEASE DATE : 2024.03.14
 RUNTIME      : 1h 52mn
 NOTES        : see www.example-group.net for our rules
"""


def test_a_cp437_nfo_keeps_its_art() -> None:
    text = nfo_text(TV_NFO.encode("cp437"))
    assert text == TV_NFO
    assert "╔═" in text


def test_the_tv_release_name_comes_first() -> None:
    names = release_names(nfo_text(TV_NFO.encode("cp437")))
    assert names == (
        "Show.Name.S01E02.1080p.WEB.H264-GROUP",
        "Other.Show.S02E05.720p.HDTV.x264-OTHERGRP",
    )


def test_a_latin1_nfo_is_not_taken_for_cp437() -> None:
    data = MOVIE_NFO.replace("\n", "\r\n").encode("cp1252")
    text = nfo_text(data)
    assert text == MOVIE_NFO
    assert release_names(text) == ("Film.Titel.2019.German.DL.1080p.BluRay.x264-GRP",)


def test_capital_umlauts_side_by_side_are_still_latin1() -> None:
    text = "GRÖßE: 2 GB, ÄÖÜ und ÄÖ\r\n".encode("cp1252")
    assert nfo_text(text) == "GRÖßE: 2 GB, ÄÖÜ und ÄÖ\n"


def test_a_utf8_nfo_with_a_bom() -> None:
    data = b"\xef\xbb\xbf" + MUSIC_NFO.encode()
    text = nfo_text(data)
    assert text == MUSIC_NFO
    # The track files are no release names: no year, no tag.
    assert release_names(text) == ("Artist-Album-2020-FLAC-GRP",)


def test_a_utf16_nfo() -> None:
    assert nfo_text(UHD_NFO.encode("utf-16")) == UHD_NFO


def test_the_uhd_movie_and_no_url() -> None:
    names = release_names(nfo_text(UHD_NFO.encode("cp437")))
    assert names == ("Movie.Title.2019.2160p.UHD.BluRay.x265-GRP",)


def test_names_next_to_frames_and_file_extensions() -> None:
    text = "║Show.Name.S03E10.720p.WEB.h264-grp║ show.name.s03e10.720p.web.h264-grp.mkv"
    assert release_names(text) == ("Show.Name.S03E10.720p.WEB.h264-grp",)


def test_software_and_music_names() -> None:
    text = "Some.Tool.v2.3.Incl.Keygen-GRP\nVA-Summer_Hits_2021-2CD-FLAC-2021-GRP\n"
    assert set(release_names(text)) == {
        "Some.Tool.v2.3.Incl.Keygen-GRP",
        "VA-Summer_Hits_2021-2CD-FLAC-2021-GRP",
    }


def test_boilerplate_gives_no_names() -> None:
    text = (
        "Release-Date: 2024-03-14\nhttp://www.some-site.com/Show.Name.S01E01-GRP\n"
        "Greetings-to-all-GROUPS\nmail: crew-2020@site-x.org\nSupply-And-Demand-Team\n"
        "Greetings-To-TC-And-CD-Crew\nBig-Thanks-To-WEB-Team\n"
    )
    assert release_names(text) == ()


def test_controls_and_nuls_are_dropped() -> None:
    assert nfo_text(b"a\x00b\x07c\td\r\ne") == "abc\td\ne"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000))
def test_any_bytes_give_text_and_names(data: bytes) -> None:
    text = nfo_text(data)
    assert "\x00" not in text
    assert all(isinstance(n, str) for n in release_names(text))


def test_a_long_line_without_spaces_is_quick() -> None:
    # No catastrophic backtracking: candidates start only at word starts.
    assert release_names("a" * 500_000 + "-" + "b.c" * 100_000) == ()
