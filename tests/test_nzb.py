"""Tests for usenet_indexer.core.nzb: writing an NZB, reading one back, NZB file names."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from usenet_indexer.core.nzb import (
    NZB_DOCTYPE,
    NZB_NAMESPACE,
    Nzb,
    NzbFile,
    NzbSegment,
    nzb_filename,
    parse_nzb,
    write_nzb,
)
from usenet_indexer.errors import InputError
from usenet_indexer.testing.corpus import find_corpus, load_corpus

CORPUS = find_corpus(Path(__file__).resolve().parent)
needs_corpus = pytest.mark.skipif(CORPUS is None, reason="real-data corpus (corpus/nzb) not found")

# What XML 1.0 cannot carry; the writer replaces each such character by U+FFFD.
NOT_XML_CHAR = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

HOSTILE = [
    pytest.param('"double" & \'single\' <tag attr="x"> &amp; &#0; ]]> <!-- -->', id="markup"),
    pytest.param("nul\x00byte and \x01\x08\x0b\x0c\x1b\x1f controls", id="controls"),
    pytest.param("lone \ud800 high and \udfff low surrogates", id="surrogates"),
    pytest.param("noncharacters \ufffe \uffff", id="noncharacters"),
    pytest.param("tab\there, newline\nhere, CRLF\r\nhere, CR\rhere", id="whitespace"),
    pytest.param("  leading and trailing spaces  ", id="spaces"),
    pytest.param("你好世界 ñ 🎬 \u202eexe.mkv", id="non-ascii"),
    pytest.param("x" * 1_000_000 + '&<>"\x00\ud800', id="one-megabyte"),
]


def sanitized(text: str) -> str:
    return NOT_XML_CHAR.sub("\ufffd", text)


def make_release(**changes: Any) -> dict[str, Any]:
    release: dict[str, Any] = {
        "name": "Some.Release.2024",
        "poster": "poster <poster@example.com>",
        "groups": ["alt.binaries.test", "alt.binaries.misc"],
        "posted": 1_700_000_000,
        "files_announced": 3,
        "complete": 5 / 6,
        "bytes": 1110,
        "probe_candidate": False,
        "dropped": None,
        "files": [
            {
                "name": "some.release.par2",
                "subject": 'Some.Release.2024 [3/3] - "some.release.par2" yEnc (1/1)',
                "total_segments": 1,
                "segments": [[1, "par@example.com", 500]],
            },
            {
                "name": "some.release.part2.rar",
                "subject": 'Some.Release.2024 [2/3] - "some.release.part2.rar" yEnc (1/2)',
                "total_segments": 2,
                "date": 1_700_000_100,
                "segments": [[2, "r2b@example.com", 100], [1, "r2a@example.com", 200]],
            },
            {
                "name": "some.release.part1.rar",
                "subject": 'Some.Release.2024 [1/3] - "some.release.part1.rar" yEnc (01/03)',
                "total_segments": 3,
                "segments": [[3, "r1c@example.com", 10], [1, "r1a@example.com", 300]],
            },
        ],
    }
    release.update(changes)
    return release


def file_entry(name: str, subject: str, segments: list[list[Any]]) -> dict[str, Any]:
    return {"name": name, "subject": subject, "total_segments": 1, "segments": segments}


# --- writing ---------------------------------------------------------------


def test_round_trip_keeps_files_segments_groups_poster_subject() -> None:
    release = make_release()
    nzb = parse_nzb(write_nzb(release))
    assert nzb.meta == (("name", "Some.Release.2024"),)
    assert nzb.meta_value("name") == "Some.Release.2024"
    assert nzb.meta_value("password") is None
    by_subject = {file.subject: file for file in nzb.files}
    assert len(by_subject) == 3
    for written in release["files"]:
        file = by_subject[written["subject"]]
        assert file.poster == release["poster"]
        assert file.groups == tuple(release["groups"])
        assert file.date == written.get("date", release["posted"])
        expected = sorted((n, b, m) for n, m, b in written["segments"])
        assert [(s.number, s.bytes, s.message_id) for s in file.segments] == expected


def test_files_in_name_order_with_par2_last_and_segments_by_number() -> None:
    files = [
        file_entry("b.rar", "b", [[3, "b3@x", 1], [1, "b1@x", 1], [2, "b2@x", 1]]),
        file_entry("a.vol00+01.PAR2", "vol", [[1, "v@x", 1]]),
        file_entry("a.par2", "par", [[1, "p@x", 1]]),
        file_entry("A.nfo", "nfo", [[1, "n@x", 1]]),
        file_entry("a.rar", "a", [[1, "a@x", 1]]),
    ]
    nzb = parse_nzb(write_nzb(make_release(files=files)))
    assert [f.subject for f in nzb.files] == ["nfo", "a", "b", "par", "vol"]
    assert [s.number for s in nzb.files[2].segments] == [1, 2, 3]
    # The same input in another order gives the same bytes: the order is the writer's.
    assert write_nzb(make_release(files=files[::-1])) == write_nzb(make_release(files=files))


def test_output_is_strict_xml_with_nzb_doctype_namespace_and_head() -> None:
    data = write_nzb(make_release())
    assert data.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n' + NZB_DOCTYPE.encode())
    root = ET.fromstring(data)  # expat: any well-formedness error raises
    ns = f"{{{NZB_NAMESPACE}}}"
    assert root.tag == f"{ns}nzb"
    meta = root.findall(f"{ns}head/{ns}meta")
    assert [(m.get("type"), m.text) for m in meta] == [("name", "Some.Release.2024")]
    files = root.findall(f"{ns}file")
    assert len(files) == 3
    for file in files:
        assert set(file.attrib) == {"poster", "date", "subject"}
        assert [g.text for g in file.findall(f"{ns}groups/{ns}group")] == [
            "alt.binaries.test",
            "alt.binaries.misc",
        ]
        for segment in file.findall(f"{ns}segments/{ns}segment"):
            assert set(segment.attrib) == {"bytes", "number"}


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_give_well_formed_xml_that_reads_back(hostile: str) -> None:
    release = make_release(
        name=hostile,
        poster=hostile,
        files=[file_entry(hostile, hostile, [[1, "ok@example.com", 1]])],
    )
    data = write_nzb(release)
    root = ET.fromstring(data)
    assert root.tag == f"{{{NZB_NAMESPACE}}}nzb"
    nzb = parse_nzb(data)
    assert nzb.meta_value("name") == sanitized(hostile)
    (file,) = nzb.files
    assert file.subject == sanitized(hostile)
    assert file.poster == sanitized(hostile)


def test_hostile_group_and_message_id_stay_well_formed() -> None:
    release = make_release(
        groups=["alt.<b>&\x00"],
        files=[file_entry("f", "s", [[1, 'id"&<\x01>@x', 1]])],
    )
    nzb = parse_nzb(write_nzb(release))
    assert nzb.files[0].groups == ("alt.<b>&\ufffd",)
    assert nzb.files[0].segments[0].message_id == 'id"&<\ufffd>@x'


def test_write_refuses_numbers_that_are_not_integers() -> None:
    with pytest.raises(TypeError):
        write_nzb(make_release(files=[file_entry("f", "s", [["1", "a@x", 1]])]))
    with pytest.raises(TypeError):
        write_nzb(make_release(posted=1.5))
    with pytest.raises(KeyError):
        write_nzb({"name": "x"})


# Any text at all, surrogates and controls included: the writer must cope.
any_text = st.text(st.characters(exclude_categories=()), max_size=60)
message_ids = st.text(
    st.characters(exclude_categories=("Cs", "Cc", "Z"), exclude_characters="<>"),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=1000)
@given(
    name=any_text,
    poster=any_text,
    subjects=st.lists(any_text, min_size=1, max_size=4),
    ids=st.lists(message_ids, min_size=1, max_size=5),
)
def test_round_trip_of_arbitrary_text(
    name: str, poster: str, subjects: list[str], ids: list[str]
) -> None:
    files = [
        file_entry(f"file{i}", subject, [[k, f"{mid}.{i}", k * 7] for k, mid in enumerate(ids, 1)])
        for i, subject in enumerate(subjects)
    ]
    data = write_nzb(make_release(name=name, poster=poster, files=files))
    ET.fromstring(data)
    nzb = parse_nzb(data)
    assert nzb.meta_value("name") == sanitized(name)
    assert [f.subject for f in nzb.files] == [sanitized(s) for s in subjects]
    for i, file in enumerate(nzb.files):
        assert file.poster == sanitized(poster)
        assert [s.message_id for s in file.segments] == [f"{sanitized(m)}.{i}" for m in ids]


# --- file names ------------------------------------------------------------


def assert_safe_filename(result: str) -> None:
    assert result.endswith(".nzb")
    assert len(result) > len(".nzb")
    assert not result.startswith((".", " "))
    assert len(result.encode("utf-8")) <= 255
    assert not re.search(r'[\x00-\x1f\x7f/\\:*?"<>|\ud800-\udfff]', result)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Some.Release.2024", "Some.Release.2024.nzb"),
        ("../../etc/passwd", "_.._etc_passwd.nzb"),
        ('a\\b/c:d*e?f"g<h>i|j', "a_b_c_d_e_f_g_h_i_j.nzb"),
        ("...", "release.nzb"),
        ("", "release.nzb"),
        ("  .hidden", "hidden.nzb"),
        ("name.NZB", "name.nzb"),
        ("trailing dots...", "trailing dots.nzb"),
        ("CON", "_CON.nzb"),
        ("lpt1.txt", "_lpt1.txt.nzb"),
        ("nul\x00byte", "nul_byte.nzb"),
        ("lone\ud800surrogate", "lone_surrogate.nzb"),
        ("evil\u202egnp.exe", "evil_gnp.exe.nzb"),
        ("你好世界.part01", "你好世界.part01.nzb"),
    ],
)
def test_nzb_filename_examples(name: str, expected: str) -> None:
    assert nzb_filename(name) == expected
    assert_safe_filename(nzb_filename(name))


def test_nzb_filename_caps_length_on_a_character_boundary() -> None:
    result = nzb_filename("é" * 1_000_000)
    assert_safe_filename(result)
    assert result == "é" * 100 + ".nzb"
    assert nzb_filename("x" * 1_000_000) == "x" * 200 + ".nzb"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_nzb_filename_is_safe_for_hostile_names(hostile: str) -> None:
    assert_safe_filename(nzb_filename(hostile))


@settings(max_examples=300, deadline=1000)
@given(name=st.text(st.characters(exclude_categories=()), max_size=300))
def test_nzb_filename_is_always_safe(name: str) -> None:
    assert_safe_filename(nzb_filename(name))


# --- reading ---------------------------------------------------------------


MINIMAL = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b'<nzb><file subject="s (1/2)" poster="p" date="5"><groups><group>g</group></groups>'
    b'<segments><segment bytes="9" number="2">b@x</segment>'
    b'<segment bytes="8" number="1">a@x</segment></segments></file></nzb>'
)
MINIMAL_NZB = Nzb(
    meta=(),
    files=(
        NzbFile(
            poster="p",
            date=5,
            subject="s (1/2)",
            groups=("g",),
            segments=(NzbSegment(2, 9, "b@x"), NzbSegment(1, 8, "a@x")),
        ),
    ),
)


def test_parse_keeps_the_listed_segment_order_and_works_without_namespace() -> None:
    assert parse_nzb(MINIMAL) == MINIMAL_NZB


@pytest.mark.parametrize(
    "trailer",
    [b"", b"\n", b"\r\n  \t\n", b"<!-- generated by something -->\n", b"<?pi data?>"],
)
def test_parse_accepts_trailing_whitespace_comments_and_processing_instructions(
    trailer: bytes,
) -> None:
    assert parse_nzb(MINIMAL + trailer) == MINIMAL_NZB


@pytest.mark.parametrize("trailer", [b"junk", b"<nzb/>", b"\x00", b"&amp;"])
def test_parse_refuses_trailing_data_after_the_document(trailer: bytes) -> None:
    with pytest.raises(InputError, match="well-formed"):
        parse_nzb(MINIMAL + trailer)


def test_parse_refuses_every_truncation() -> None:
    for end in range(0, len(MINIMAL) - 1, 7):
        with pytest.raises(InputError):
            parse_nzb(MINIMAL[:end])


def test_parse_handles_declared_encodings_and_boms() -> None:
    text = MINIMAL.decode().replace('subject="s (1/2)"', 'subject="café (1/2)"')
    latin1 = text.replace("UTF-8", "ISO-8859-1").encode("latin-1")
    utf16 = text.replace("UTF-8", "UTF-16").encode("utf-16")  # with BOM
    utf8_bom = b"\xef\xbb\xbf" + text.encode()
    for data in (latin1, utf16, utf8_bom):
        assert parse_nzb(data).files[0].subject == "café (1/2)"


def test_parse_defaults_and_angle_brackets() -> None:
    data = (
        b'<nzb xmlns="http://www.newzbin.com/DTD/2003/nzb"><head>'
        b'<meta type="tag">a</meta><meta type="tag">b</meta><meta>untyped</meta></head>'
        b'<file subject="s"><groups><group> g </group><group/></groups><segments>'
        b'<segment bytes=" 9 " number="1">\n  &lt;id@x&gt;\n</segment></segments>'
        b"<unknown/></file><other/></nzb>"
    )
    nzb = parse_nzb(data)
    assert nzb.meta == (("tag", "a"), ("tag", "b"), ("", "untyped"))
    assert nzb.files == (NzbFile("", 0, "s", ("g",), (NzbSegment(1, 9, "id@x"),)),)


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE nzb [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<nzb><file subject="&lol3;"/></nzb>"""


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(BILLION_LAUGHS, id="billion-laughs"),
        pytest.param(BILLION_LAUGHS.decode().encode("utf-16"), id="billion-laughs-utf16"),
        pytest.param(
            b'<!DOCTYPE nzb [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><nzb>&xxe;</nzb>',
            id="external-entity",
        ),
        pytest.param(
            b'<!DOCTYPE nzb [<!ENTITY % p SYSTEM "http://example.com/x.dtd"> %p;]><nzb/>',
            id="parameter-entity",
        ),
        pytest.param(
            b'<!DOCTYPE nzb [<!ENTITY u SYSTEM "x" NDATA gif>]><nzb/>', id="unparsed-entity"
        ),
    ],
)
def test_parse_refuses_entity_declarations(data: bytes) -> None:
    with pytest.raises(InputError, match="entity"):
        parse_nzb(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "well-formed"),
        (b"not xml at all", "well-formed"),
        (b"<nzb><file subject='s'></nzb>", "well-formed"),
        (b"<nzb>&undefined;</nzb>", "well-formed"),
        (b"<html><body/></html>", "root element is <html>"),
        (b"<nzb><file poster='p'/></nzb>", "no subject"),
        (b"<nzb><file subject='s'><segments><segment bytes='1'>a@x</segment>", "well-formed"),
        (
            b"<nzb><file subject='s'><segments><segment bytes='1'>a@x</segment>"
            b"</segments></file></nzb>",
            "lacks its number",
        ),
        (
            b"<nzb><file subject='s'><segments><segment bytes='1' number='1'> &lt;&gt; </segment>"
            b"</segments></file></nzb>",
            "no message-id",
        ),
        (
            b"<nzb><file subject='s'><segments><segment bytes='x' number='1'>a@x</segment>"
            b"</segments></file></nzb>",
            "not a decimal number",
        ),
        (
            b"<nzb><file subject='s'><segments><segment bytes='1' number='-1'>a@x</segment>"
            b"</segments></file></nzb>",
            "not a decimal number",
        ),
        (b"<nzb><file subject='s' date='1_000'/></nzb>", "not a decimal number"),
        (b"<nzb><file subject='s' date='" + b"9" * 5000 + b"'/></nzb>", "not a decimal number"),
    ],
)
def test_parse_refuses_malformed_input(data: bytes, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_nzb(data)


# --- the real-data corpus ----------------------------------------------------


@attrs.frozen
class SourceRow:
    files: int
    segments: int
    groups: frozenset[str]
    posters: int


def read_sources_table(sources: Path) -> tuple[tuple[int, int, int], dict[str, SourceRow]]:
    text = sources.read_text(encoding="utf-8")
    section = text.split("## NZB files", 1)[1].split("Useful properties", 1)[0]
    total = re.search(r"(\d+) NZB files, (\d+) `<file>` entries, (\d+) `<segment>`", section)
    assert total is not None
    rows: dict[str, SourceRow] = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.split("|")[1:-1]]
            rows[cells[0].strip("`")] = SourceRow(
                files=int(cells[5]),
                segments=int(cells[6]),
                groups=frozenset(g.strip() for g in cells[7].split(",")),
                posters=int(cells[8]),
            )
    totals = (int(total[1]), int(total[2]), int(total[3]))
    return totals, rows


@needs_corpus
def test_every_corpus_nzb_parses_with_the_counts_sources_md_gives() -> None:
    assert CORPUS is not None
    (nzbs, files, segments), rows = read_sources_table(CORPUS / "SOURCES.md")
    corpus = load_corpus(CORPUS / "nzb")
    assert len(corpus) == nzbs == len(rows) == 28
    assert sum(len(nzb.files) for _, nzb in corpus) == files == 480
    assert sum(len(f.segments) for _, nzb in corpus for f in nzb.files) == segments == 35737
    for name, nzb in corpus:
        row = rows[name]
        assert len(nzb.files) == row.files, name
        assert sum(len(f.segments) for f in nzb.files) == row.segments, name
        assert {g for f in nzb.files for g in f.groups} == row.groups, name
        assert len({f.poster for f in nzb.files}) == row.posters, name


@needs_corpus
def test_corpus_nzbs_hold_sane_values() -> None:
    assert CORPUS is not None
    for name, nzb in load_corpus(CORPUS / "nzb"):
        for file in nzb.files:
            assert file.subject, name
            assert file.poster, name
            assert file.groups, name
            assert file.date > 1_000_000_000, name
            for segment in file.segments:
                assert segment.number >= 1, name
                assert segment.bytes > 0, name
                assert not re.search(r"[\s<>]", segment.message_id), name


@needs_corpus
def test_corpus_nzb_survives_write_and_parse() -> None:
    # A real NZB rewritten through the writer keeps every segment; the 10 GB
    # post is the largest file of the corpus (15,355 segments).
    assert CORPUS is not None
    source = parse_nzb(
        (CORPUS / "nzb" / "sabnzbd__sabnzbd.github.io__test_download_10GB.nzb").read_bytes()
    )
    release = {
        "name": "reftestnzb 10GB",
        "poster": source.files[0].poster,
        "groups": list(source.files[0].groups),
        "posted": source.files[0].date,
        "files": [
            {
                "name": f"file{i:02d}",
                "subject": f.subject,
                "date": f.date,
                "segments": [[s.number, s.message_id, s.bytes] for s in f.segments],
            }
            for i, f in enumerate(source.files)
        ],
    }
    again = parse_nzb(write_nzb(release))
    assert [f.subject for f in again.files] == [f.subject for f in source.files]
    for before, after in zip(source.files, again.files, strict=True):
        assert after.segments == tuple(sorted(before.segments, key=lambda s: s.number))
        assert (after.poster, after.date, after.groups) == (
            before.poster,
            before.date,
            before.groups,
        )
