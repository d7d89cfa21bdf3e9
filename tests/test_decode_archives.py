"""Archive listings: real 7z and zip archives made at test time, real RAR ones, and fuzzing."""

from __future__ import annotations

import random
import struct
import tracemalloc
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from probe_tools import require_tool, run_tool

from usenet_indexer.decode.archives import ArchiveError, ArchiveListing, list_archive
from usenet_indexer.decode.rar import RAR4_SIGNATURE, RAR5_SIGNATURE
from usenet_indexer.decode.sevenzip import SEVENZIP_SIGNATURE

CORPUS = Path(__file__).resolve().parent / "corpus" / "decode"
RARFILE = CORPUS / "rarfile"
MOVIE = "Movie.Title.2019.2160p.UHD.BluRay.x265-GRP.mkv"
FILES = {
    f"release/{MOVIE}": 400_000,  # incompressible: a first segment holds only its start
    "release/sub/movie.title.2019.nfo": 2_000,
    "release/empty.txt": 0,
}
NAMES = set(FILES)
SEGMENT = 64 * 1024


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Archives made by Debian's 7z and zip over the same generated files."""
    sevenzip = require_tool("7z", "p7zip-full")
    zip_tool = require_tool("zip", "zip")
    folder = tmp_path_factory.mktemp("archives")
    rng = random.Random(3)
    for name, size in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(rng.randbytes(size))
    runs = {
        "encoded.7z": [sevenzip, "a", "-bd", "-y", "encoded.7z", "release"],
        "plain.7z": [sevenzip, "a", "-bd", "-y", "-mhc=off", "plain.7z", "release"],
        "lzma2.7z": [sevenzip, "a", "-bd", "-y", "-m0=lzma2", "lzma2.7z", "release"],
        "password.7z": [sevenzip, "a", "-bd", "-y", "-pSecret", "password.7z", "release"],
        "headers.7z": [sevenzip, "a", "-bd", "-y", "-pSecret", "-mhe=on", "headers.7z", "release"],
        "infozip.zip": [zip_tool, "-q", "-r", "infozip.zip", "release"],
        "7z.zip": [sevenzip, "a", "-bd", "-y", "-tzip", "7z.zip", "release"],
        "password.zip": [zip_tool, "-q", "-r", "-P", "Secret", "password.zip", "release"],
    }
    for argv in runs.values():
        run_tool(argv, folder)
    return {name: (folder / name).read_bytes() for name in runs}


def rar(name: str) -> bytes:
    return (RARFILE / name).read_bytes()


@pytest.mark.parametrize("name", ["infozip.zip", "7z.zip"])
def test_a_whole_zip_lists_its_files(made: dict[str, bytes], name: str) -> None:
    listing = list_archive(made[name])
    # In the order the tool met them on disk.
    assert set(listing.names) == NAMES
    assert len(listing.names) == len(NAMES)
    assert (listing.kind, listing.complete, listing.encrypted) == ("zip", True, False)


@pytest.mark.parametrize("name", ["infozip.zip", "7z.zip"])
def test_a_first_segment_of_a_zip_names_the_file_it_starts(
    made: dict[str, bytes], name: str
) -> None:
    listing = list_archive(made[name][:SEGMENT])
    assert listing.kind == "zip"
    assert listing.names[0].endswith(MOVIE)
    assert not listing.complete


def test_an_encrypted_zip(made: dict[str, bytes]) -> None:
    listing = list_archive(made["password.zip"])
    assert listing.encrypted
    assert listing.names[0] == f"release/{MOVIE}"


@pytest.mark.parametrize("name", ["encoded.7z", "plain.7z", "lzma2.7z"])
def test_a_whole_7z_lists_its_files(made: dict[str, bytes], name: str) -> None:
    listing = list_archive(made[name])
    assert set(listing.names) == NAMES
    assert (listing.kind, listing.complete, listing.encrypted) == ("7z", True, False)


@pytest.mark.parametrize("name", ["encoded.7z", "plain.7z", "headers.7z"])
def test_a_first_segment_of_a_7z_names_nothing(made: dict[str, bytes], name: str) -> None:
    # The header is at the end of a 7z: the first 64 kB do not hold it.
    assert list_archive(made[name][:SEGMENT]) == ArchiveListing("7z", (), False, False)


def test_encrypted_7z_entries_and_headers(made: dict[str, bytes]) -> None:
    entries = list_archive(made["password.7z"])
    assert set(entries.names) == NAMES
    assert entries.encrypted
    assert list_archive(made["headers.7z"]) == ArchiveListing("7z", (), False, True)


@pytest.mark.parametrize(
    ("name", "kind", "names"),
    [
        (
            "rar3-subdirs.rar",
            "rar4",
            (
                "sub/dir2/file2.txt",
                "sub/with space/long fn.txt",
                "sub/üȵĩöḋè/file.txt",
                "sub/dir1/file1.txt",
            ),
        ),
        (
            "rar5-subdirs.rar",
            "rar5",
            (
                "sub/dir2/file2.txt",
                "sub/with space/long fn.txt",
                "sub/üȵĩöḋè/file.txt",
                "sub/dir1/file1.txt",
            ),
        ),
        ("unicode.rar", "rar4", ("уииоотивл.txt", "\U0001d400\U0001d401\U0001d401\U0001d402.txt")),
    ],
)
def test_real_rar_archives_list_their_files(name: str, kind: str, names: tuple[str, ...]) -> None:
    assert list_archive(rar(name)) == ArchiveListing(kind, names, True, False)


@pytest.mark.parametrize(
    ("name", "kind"), [("rar3-vols.part1.first8k", "rar4"), ("rar5-vols.part1.first8k", "rar5")]
)
def test_a_first_segment_of_a_rar_volume(name: str, kind: str) -> None:
    # The first file's data runs past the segment: named, and no further.
    assert list_archive(rar(name)) == ArchiveListing(kind, ("vols/bigfile.txt",), False, False)


@pytest.mark.parametrize(
    ("name", "kind"), [("rar3-comment-psw.rar", "rar4"), ("rar5-psw.rar", "rar5")]
)
def test_rar_with_encrypted_files_lists_them(name: str, kind: str) -> None:
    listing = list_archive(rar(name))
    assert listing.kind == kind
    assert listing.encrypted
    assert listing.names


@pytest.mark.parametrize(
    ("name", "kind"), [("rar3-comment-hpsw.rar", "rar4"), ("rar5-hpsw.rar", "rar5")]
)
def test_rar_with_encrypted_headers_names_nothing(name: str, kind: str) -> None:
    assert list_archive(rar(name)) == ArchiveListing(kind, (), False, True)


def zip_local(name: bytes, data: bytes = b"", flags: int = 0, extra: bytes = b"") -> bytes:
    header = struct.pack(
        "<4sHHHHHIIIHH",
        b"PK\x03\x04", 20, flags, 0, 0, 0, zlib.crc32(data), len(data), len(data), len(name),
        len(extra),
    )  # fmt: skip
    return header + name + extra + data


def test_zip_names_in_code_page_437_and_utf8() -> None:
    data = zip_local(b"caf\x82.txt") + zip_local("naïve.txt".encode(), flags=0x800) + b"PK\x01\x02"
    assert list_archive(data).names == ("café.txt", "naïve.txt")


def test_a_zip_unicode_path_field_names_the_file() -> None:
    raw = b"caf\xe9.txt"
    field = b"\x01" + struct.pack("<I", zlib.crc32(raw)) + "café.txt".encode()
    extra = struct.pack("<HH", 0x7075, len(field)) + field
    assert list_archive(zip_local(raw, extra=extra)).names == ("café.txt",)


def test_a_zip_entry_with_a_data_descriptor_stops_the_listing() -> None:
    data = zip_local(b"a.mkv", flags=0x08) + b"x" * 100 + zip_local(b"b.nfo")
    assert list_archive(data) == ArchiveListing("zip", ("a.mkv",), False, False)


def test_an_empty_zip_is_complete() -> None:
    assert list_archive(b"PK\x05\x06" + b"\0" * 18) == ArchiveListing("zip", (), True, False)


def test_nul_and_control_characters_in_names_are_replaced() -> None:
    listing = list_archive(zip_local(b"a\x00b\x1b.mkv"))
    assert listing.names == ("a\ufffdb\ufffd.mkv",)


@pytest.mark.parametrize(
    "data", [b"", b"MZ\x90\x00", b"Rar!", b"7z", b"PK\x03", b"\x00" * 100, b"not an archive"]
)
def test_data_without_a_signature_is_an_error(data: bytes) -> None:
    with pytest.raises(ArchiveError) as raised:
        list_archive(data)
    assert raised.value.reason == "no signature"


def rar5_block(body: bytes) -> bytes:
    size = bytes([len(body)])  # a one-byte vint: the tests' bodies are short
    return struct.pack("<I", zlib.crc32(size + body)) + size + body


@pytest.mark.parametrize(
    "data",
    [
        RAR5_SIGNATURE + struct.pack("<I", 0) + b"\x03\x01\x00\x00",  # a bad CRC
        RAR5_SIGNATURE + rar5_block(b"\x02\x00\xff"),  # a file header that ends inside a vint
        RAR4_SIGNATURE + struct.pack("<HBHH", 0, 0x74, 0x8000, 40) + b"\0" * 40,  # bad CRC
        RAR4_SIGNATURE + struct.pack("<HBHH", 0, 0x73, 0, 3) + b"\0" * 10,  # shorter than 7
        SEVENZIP_SIGNATURE + b"\x00\x04" + b"\0" * 24,  # a bad start header CRC
    ],
)
def test_a_malformed_first_header_is_an_error(data: bytes) -> None:
    with pytest.raises(ArchiveError) as raised:
        list_archive(data)
    assert raised.value.reason == "malformed"


@pytest.mark.parametrize(
    "data",
    [
        RAR5_SIGNATURE,
        RAR4_SIGNATURE,
        SEVENZIP_SIGNATURE + b"\0\4",
        RAR5_SIGNATURE + b"\1\2",
        RAR5_SIGNATURE + b"\0\0\0\0\x7f\x01",  # a header of 127 bytes, 1 here
        zip_local(b"a" * 10)[:30] + b"\0" * 4,  # a name past the data
    ],
)
def test_a_signature_alone_lists_nothing_yet(data: bytes) -> None:
    listing = list_archive(data)
    assert listing.names == ()
    assert not listing.complete


def test_huge_length_fields_are_never_allocated() -> None:
    huge_vint = b"\xff" * 9 + b"\x01"
    cases = [
        RAR5_SIGNATURE + rar5_block(b"\x01\x00") + rar5_block(b"\x02\x02" + huge_vint),
        SEVENZIP_SIGNATURE + b"\0\4" + start_header(1 << 62, 1 << 62, 0),
        zip_local(b"a") + zip_local(b"b")[:18] + b"\xff" * 8 + b"\xff\xff\xff\xff",
    ]
    for data in cases:
        checked(data)


def start_header(offset: int, size: int, crc: int) -> bytes:
    fields = struct.pack("<QQI", offset, size, crc)
    return struct.pack("<I", zlib.crc32(fields)) + fields


def checked(data: bytes) -> ArchiveListing | None:
    """list_archive on hostile data: an ArchiveError or a listing, and no big allocation."""
    tracemalloc.start()
    try:
        listing = list_archive(data)
    except ArchiveError:
        listing = None
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 4 * len(data) + (1 << 20)
    return listing


SIGNATURES = [RAR4_SIGNATURE, RAR5_SIGNATURE, SEVENZIP_SIGNATURE + b"\0\4", b"PK\x03\x04"]


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(SIGNATURES), st.binary(max_size=2000))
def test_fuzz_random_bytes_after_a_signature(signature: bytes, rest: bytes) -> None:
    checked(signature + rest)


def rar_corpus() -> list[bytes]:
    return [p.read_bytes()[:4000] for p in sorted(RARFILE.iterdir()) if p.suffix != ".md"]


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(rar_corpus()), st.data())
def test_fuzz_mutated_real_rar(data: bytes, draw: st.DataObject) -> None:
    checked(mutated(bytearray(data), draw))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_fuzz_mutated_real_7z_and_zip(made: dict[str, bytes], draw: st.DataObject) -> None:
    name = draw.draw(st.sampled_from(sorted(made)))
    whole = made[name]
    # The start and the end: the 7z header and the zip central directory are at the end.
    data = whole[:2000] + whole[-2000:] if name.endswith(".zip") else whole
    checked(mutated(bytearray(data), draw))


def mutated(data: bytearray, draw: st.DataObject) -> bytes:
    """Bytes changed, length fields made huge, the end cut off."""
    for _ in range(draw.draw(st.integers(1, 12))):
        at = draw.draw(st.integers(0, len(data) - 1))
        if draw.draw(st.booleans()):
            data[at] = draw.draw(st.integers(0, 255))
        else:
            data[at : at + 4] = b"\xff\xff\xff\x7f"
    return bytes(data[: draw.draw(st.integers(len(data) // 2, len(data)))])


def rar5_blocks(data: bytes) -> list[tuple[int, int, int]]:
    """(start, header start, header size) of each RAR 5 block, read loosely."""
    blocks, at = [], len(RAR5_SIGNATURE)
    while at + 5 < len(data):
        size, start = data[at + 4], at + 5  # one-byte sizes in the test archives
        if size & 0x80 or size == 0 or start + size > len(data):
            break
        flags = data[start + 1]
        data_size = data[start + 2 + bool(flags & 1)] if flags & 2 else 0
        blocks.append((at, start, size))
        at = start + size + data_size
    return blocks


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(["rar5-subdirs.rar", "rar5-psw.rar", "rar5-hpsw.rar"]), st.data())
def test_fuzz_rar5_headers_past_their_crc(name: str, draw: st.DataObject) -> None:
    # Mutations inside a header, its CRC then fixed: the reader sees them.
    data = bytearray(rar(name))
    at, start, size = draw.draw(st.sampled_from(rar5_blocks(bytes(data))))
    for _ in range(draw.draw(st.integers(1, 4))):
        data[draw.draw(st.integers(start, start + size - 1))] = draw.draw(st.integers(0, 255))
    data[at : at + 4] = struct.pack("<I", zlib.crc32(data[at + 4 : start + size]))
    checked(bytes(data))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_fuzz_a_7z_end_header_past_its_crcs(made: dict[str, bytes], draw: st.DataObject) -> None:
    # Mutations inside the plain end header, both CRCs then fixed: the reader sees them.
    data = bytearray(made["plain.7z"])
    _, offset, size, _ = struct.unpack_from("<IQQI", data, 8)
    at = 32 + offset
    for _ in range(draw.draw(st.integers(1, 6))):
        data[draw.draw(st.integers(at, at + size - 1))] = draw.draw(st.integers(0, 255))
    data[28:32] = struct.pack("<I", zlib.crc32(data[at : at + size]))
    data[8:12] = struct.pack("<I", zlib.crc32(data[12:32]))
    checked(bytes(data))
