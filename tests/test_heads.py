"""Release names as the *arr programs read them: a subject's head without the poster's
and the tools' noise (core/heads.py), and the name a release takes from its head or
its files (core/naming.py).

Every head here is a real one, from ../shared/corpus (subjects.tsv and the NZBs).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from usenet_indexer.core.heads import head_release_name
from usenet_indexer.core.indexer import find_segment_counter
from usenet_indexer.core.naming import release_name
from usenet_indexer.core.subject import parse_file_subject
from usenet_indexer.testing.corpus import load_corpus


def _before_counter(subject: str) -> str:
    """The subject before its segment counter `(k/N)`. The corpus's collection subjects
    (nZEDb's, the search sites') come without one: such a subject is all before it."""
    encoded = subject.encode()
    found = find_segment_counter(encoded)
    if found is None or encoded[found[1] + 1 :].strip(b" 0123456789"):
        return subject
    return encoded[: found[0]].decode()


def name_of(subject: str) -> str:
    """The name a one-file release of this subject gets, as the indexer names it."""
    info = parse_file_subject(_before_counter(subject))
    return release_name(info.head_name, [(info.file_name, 1)])


@pytest.mark.parametrize(
    ("head", "name"),
    [
        # a handle and "post", the FTD post id
        ("am9295 post Ubuntu 8.10 Desktop i386 [FTD#805887].", "Ubuntu 8.10 Desktop i386"),
        ("Eragon postet   Rapunzel  S02E12   german Sub  hardcodet   ", "Rapunzel S02E12 german Sub hardcodet"),
        ("Old Dad uppt Scary Movie5 WEB RiP Line XviD German 01/24] - ", "Scary Movie5 WEB RiP Line XviD German"),
        ("Uploader.Presents-Need.For.Speed.Rivals.XBOX360-PROTOCOL", "Need.For.Speed.Rivals.XBOX360-PROTOCOL"),
        ("(01/59) - [Lords-of-Usenet] presents Sins.of.a.Solar.Empire.Rebellion.Forbidden.Worlds-RELOADED - ",
         "Sins.of.a.Solar.Empire.Rebellion.Forbidden.Worlds-RELOADED"),
        # a board's site and sponsor
        ("<TOWN><www.town.ag > <partner of www.ssl-news.info > Greek.S04E06.Katerstimmung.German.DL.Dubbed.WEB-DL.XviD-GEZ  ",
         "Greek.S04E06.Katerstimmung.German.DL.Dubbed.WEB-DL.XviD-GEZ"),
        (".: Breaking.Bad.S04E10.Prost.German.WS.DVDRip.XviD-GTVG :. - .:www.thunder-news.org:. - .:sponsored by secretusenet.com:. - ",
         "Breaking.Bad.S04E10.Prost.German.WS.DVDRip.XviD-GTVG"),
        ("<<<Thor1602>>><<<NCIS.Los.Angeles.S03E02.Die.Cyberattacke.GERMAN.DUBBED.HDTVRiP.XviD-SOF>>>usenet-space-cowboys.info<<<Powered by https://secretusenet.com>< ",
         "NCIS.Los.Angeles.S03E02.Die.Cyberattacke.GERMAN.DUBBED.HDTVRiP.XviD-SOF"),
        ("place2home.net - Call.of.Duty.Ghosts.XBOX360-iMARS - ", "Call.of.Duty.Ghosts.XBOX360-iMARS"),
        ("- codari_4_usenetrevolution.info-Partner of SSL-News UK.Single.Charts.Top.40  ", "UK.Single.Charts.Top.40"),
        ("Cabin in the Woods  (AVCHD)  2013  (720p)  Postet by (Edition50) ", "Cabin in the Woods (AVCHD) 2013 (720p)"),
        # sizes, counters in words, tags, requests
        ("NEUES 4y (PW)  [@ usenet-4all.info - powered by ssl.news -] [7,05 GB] ", "NEUES 4y"),
        ("'Mission: Impossible' - 1x09 - NTSC - DivX - 28 of 48 - ", "Mission: Impossible' - 1x09 - NTSC - DivX"),
        ("Re: REQ: Jay Lake's Mainspring series/trilogy (see titles inside) - ", "Jay Lake's Mainspring series/trilogy (see titles inside)"),
        ("*FULL REPOST* New eBooks 26 Nov 2012 & 20% PAR2 Set -  ", "New eBooks 26 Nov 2012 & 20% PAR2 Set"),
        ("REPOST: [scnzbefnet][500025] Major.Crimes.S02E13.720p.HDTV.x264-IMMERSE ", "Major.Crimes.S02E13.720p.HDTV.x264-IMMERSE"),
        ("NCIS S11E21 yEnc - ", "NCIS S11E21"),
        # what stays: a disc number, a name's own "100MB"
        ("AsianDVDClub.org - Sengoku Basara: Season 2 (2010) AVC 1080p BD50+BD25 - Disc 1 of 2 ",
         "Sengoku Basara: Season 2 (2010) AVC 1080p BD50+BD25 - Disc 1 of 2"),
        ("reftestnzb 100MB auto 05a19e3d 2019-01-15 ", "reftestnzb 100MB auto 05a19e3d 2019-01-15"),
        ("Christopher Moore - Practrcal Demonkeeping (1992) [New Post] ",
         "Christopher Moore - Practrcal Demonkeeping (1992)"),
        # nothing but noise: no name
        ("Egbert47 post voor u op www.nzbworld.me - ", None),
        ("(Slaapkop post voor http://the-ultimate-force.org.ua/) ", None),
        ("<TOWN> www.town.ag > sponsored by www.ssl-news.info > ", None),
        ("[PRiVATE]-[WtFnZb]-[", None),
        ("(????) ", None),
        ("", None),
    ],
)  # fmt: skip
def test_a_head_without_its_noise(head: str, name: str | None) -> None:
    assert head_release_name(head) == name


@pytest.mark.parametrize(
    ("subject", "name"),
    [
        # a random head: the file says the name
        ('[N3wZ] \\6aZWVk237607\\::[PRiVATE]-[WtFnZb]-[The.Show.S01E02.1080p.NF.WEB-DL.DDP5.1.Atmos.H.264-playWEB.mkv]-[2/8] - "" yEnc 2241590477 (1/3128)',
         "The.Show.S01E02.1080p.NF.WEB-DL.DDP5.1.Atmos.H.264-playWEB"),
        # a poster's word: the file says more
        ('Film - [13/59] - "Jerry Maguire (1996) 1080p DTS multisub HUN HighCode-PHD.part13.rar" yEnc (1/1)',
         "Jerry Maguire (1996) 1080p DTS multisub HUN HighCode-PHD"),
        ('(Angels4Always) [1/1] - "Vermeulen, John - De tweelingparadox.rar" yEnc (1/1)',
         "Vermeulen, John - De tweelingparadox"),
        # only a site: the file's name
        ('www.wolfsteamers.info [1/6] - "Wohnen Bauen Leben - Sommer 2014.par2" - 16,46 MB yEnc (1/1)',
         "Wohnen Bauen Leben - Sommer 2014"),
        # a collection's head says more than one of its files
        ('(Zelazny works) [36/39] - "Roger Zelazny - The Furies.mobi" yEnc (1/1)', "Zelazny works"),
        # a random file name does not replace a head
        ('999XL[074/103] - "LLKJ678CCDE1223ss.part073.rar" yEnc (1/1)', "999XL"),
    ],
)  # fmt: skip
def test_the_name_comes_from_the_head_or_the_file_that_says_more(subject: str, name: str) -> None:
    assert name_of(subject) == name


# What no head's name may keep: a board's address, a sponsor line, a poster's
# "<handle> post", the yEnc marker, a size, the FTD post id, "File n of m".
NOISE = re.compile(
    r"(?i)\bwww\.|https?://|sponsored by|powered by|partner (?:of|von)|^\S+ post(?:et)? "
    r"|\buppt\b|\byenc\b|\d+[.,]\d+\s?[kmg]b\b|\[?FTD#|\bfile \d+ of \d+"
)


def _corpus_subjects(corpus_dir: Path) -> list[str]:
    with (corpus_dir / "subjects.tsv").open(encoding="utf-8", newline="") as stream:
        rows = csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE)
        subjects = [row["subject"] for row in rows]
    for _name, nzb in load_corpus(corpus_dir / "nzb"):
        subjects.extend(file.subject for file in nzb.files)
    return subjects


def test_no_corpus_head_name_keeps_a_posters_or_a_boards_noise(corpus_dir: Path) -> None:
    """Every real subject's head read as a name: none keeps a site, a sponsor, a
    poster's prefix, a size or the tool's words (2,000 subjects, 1,500 heads)."""
    named = 0
    noisy = []
    for subject in _corpus_subjects(corpus_dir):
        name = parse_file_subject(_before_counter(subject)).head_name
        if name is None:
            continue
        named += 1
        if NOISE.search(name):
            noisy.append((name, subject))
    assert named > 1500
    assert noisy == []
