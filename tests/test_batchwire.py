"""The batch wire format: round trips of real batches, bodies, and hostile input."""

from __future__ import annotations

import contextlib
import gzip
import tracemalloc
import zlib
from array import array
from collections.abc import Callable
from typing import Any

import attrs
import msgpack
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from isal import isal_zlib

from usenet_indexer.core.batch import Batch, FileChunk, ProbeCandidate, ReleaseChunk, RuleCount
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.rules import ExecutableRule, NamePatternRule
from usenet_indexer.errors import LocalProtocolError, RemoteProtocolError
from usenet_indexer.wire import fragments
from usenet_indexer.wire.batchwire import (
    BatchLimits,
    BodyTooLarge,
    CorruptBody,
    MalformedBatch,
    UnsupportedEncoding,
    WireBatch,
    compress_body,
    decode_batch,
    decode_body,
    encode_batch,
)
from usenet_indexer.wire.packed import PackedBatch, pack_batch

GROUP = "alt.binaries.test"
BASE = 2**32 + 10  # article numbers need 64 bits
DATE = "Mon, 30 Nov 2026 10:19:15 +0000"
MB = 1 << 20


def overview_line(number: int, subject: str, message_id: str, poster: str) -> str:
    fields = [str(number), subject, poster, DATE, f"<{message_id}>", "", "700000", "5468"]
    return "\t".join([*fields, f"Xref: news.example.com {GROUP}:{number} alt.binaries.x:1"])


def upload(first: int, head: str, files: list[tuple[str, int]], poster: str) -> list[str]:
    """Overview lines of one upload, its segments in reverse order (as they often come)."""
    lines: list[str] = []
    for i, (name, total) in enumerate(files, start=1):
        for k in range(total, 0, -1):
            subject = f'{head} [{i}/{len(files)}] - "{name}" yEnc ({k}/{total})'
            number = first + len(lines)
            lines.append(overview_line(number, subject, f"{name}.{k}@{poster}", poster))
    return lines


def real_batches() -> list[Batch]:
    """Batches from the real RangeIndexer: kept, dropped, probed, UTF-8, across two takes."""
    obfuscated = "xqJc9cLkzgbVTTSlQflzdiuWtCWE2O6n2"
    lines = (
        upload(BASE, "Some.Release.2024", [("some.part1.rar", 5), ("some.par2", 2)], "a@x")
        + upload(BASE + 7, "你好世界", [("你好世界.part01.rar", 3)], "b@x")
        + upload(BASE + 10, "Movie.2024", [("Movie.2024.exe", 3)], "c@x")
        + upload(BASE + 13, "Best.Casino", [("casino.rar", 1)], "d@x")
        + upload(BASE + 14, "", [(f"{obfuscated}.rar", 2), (f"{obfuscated}.par2", 1)], "e@x")
        + ["garbage line", f"{BASE + 18}\tRe: a question\tf@x\t{DATE}\t<q@x>\t<r@x>\t10\t1"]
    )
    rules = (ExecutableRule(), NamePatternRule(name="spam", pattern="casino"))
    indexer = RangeIndexer(group=GROUP, first=BASE, rules=rules, keep_dropped=True)
    indexer.add_text("\n".join(lines[:9]) + "\n", BASE + 9)
    first = indexer.take()
    indexer.add_text("\n".join(lines[9:]) + "\n", BASE + 30)
    return [first, indexer.finish()]


def encoded(batch: Batch, *, range_id: int = 1, epoch: int = 1) -> bytes:
    return encode_batch(pack_batch(batch), range_id=range_id, epoch=epoch)


def round_trip(batch: Batch, *, range_id: int = 7, epoch: int = 3) -> WireBatch:
    body = compress_body(encoded(batch, range_id=range_id, epoch=epoch))
    data = decode_body(body, content_encoding="gzip", max_body_bytes=MB, max_inflated_bytes=MB)
    return decode_batch(data)


def test_real_batches_round_trip() -> None:
    batches = real_batches()
    second = batches[1]
    # The batches carry what the format must keep: all kinds of values.
    assert {c.key for c in second.rule_counts} == {"", "exe"}
    assert any(r.dropped for r in second.releases)
    assert second.probe_candidates
    assert second.skipped
    assert any(f.index is None or r.head_name is None for r in second.releases for f in r.files)
    for batch in batches:
        decoded = round_trip(batch, range_id=2**63 - 1, epoch=0)
        # What the coordinator takes from the fragments equals what the edge packed.
        assert decoded == WireBatch(range_id=2**63 - 1, epoch=0, batch=pack_batch(batch))
        kept = [r for r in batch.releases if r.dropped is None]
        assert [r.key for r in decoded.batch.releases] == [r.key for r in kept]
        assert decoded.batch.segments == batch.segments
        for chunk, packed in zip(kept, decoded.batch.releases, strict=True):
            assert fragments.unpack(packed.fragment) == list(chunk.files)
            assert packed.files == len(chunk.files)
            assert packed.bytes == sum(sum(f.sizes) for f in chunk.files)


def empty_strings_batch() -> Batch:
    file = FileChunk(
        key=bytes(16),
        name="",
        subject="",
        index=0,
        total_segments=3,
        posted=-(2**63),
        numbers=array("I", [1, 3]),
        message_ids="a@b\nc@d",
        sizes=array("I", [0, 2**32 - 1]),
    )
    release = ReleaseChunk(
        key=bytes(range(16)),
        head_name="",
        poster="",
        groups=(),
        files_announced=0,
        files=(file,),
    )
    return Batch(
        group="",
        first=2**63 - 3,
        next=2**63 - 1,
        releases=(release,),
        rule_counts=(RuleCount(rule="", key="", releases=0, segments=0),),
        probe_candidates=(ProbeCandidate(release.key, "x y@z", ""),),
        lines=2,
        skipped=(("", 0),),
    )


def test_empty_strings_and_extreme_values_survive() -> None:
    batch = empty_strings_batch()
    decoded = round_trip(batch).batch
    assert decoded == pack_batch(batch)
    assert fragments.unpack(decoded.releases[0].fragment) == list(batch.releases[0].files)


def test_only_kept_release_chunks_travel_as_fragments() -> None:
    batch = real_batches()[1]
    wire = msgpack.unpackb(encoded(batch))
    assert wire["v"] == 2
    kept = [r for r in batch.releases if r.dropped is None]
    assert len(kept) < len(batch.releases)
    assert [r["key"] for r in wire["releases"]] == [r.key for r in kept]
    for sent, chunk in zip(wire["releases"], kept, strict=True):
        assert set(sent) == {
            "key", "head_name", "poster", "groups", "files_announced", "name", "fragment"
        }  # fmt: skip
        assert fragments.unpack(sent["fragment"]) == list(chunk.files)


def test_compressed_bodies_are_plain_gzip() -> None:
    body = encoded(real_batches()[0])
    compressed = compress_body(body)
    assert gzip.decompress(compressed) == body
    assert zlib.decompress(compressed, 31) == body
    assert compress_body(body) == compressed  # no timestamp in the header
    assert len(compressed) < len(body)


def test_encoding_what_msgpack_cannot_carry_is_our_error() -> None:
    batch = attrs.evolve(real_batches()[0], group="bad \udcff")
    with pytest.raises(LocalProtocolError, match="cannot be encoded"):
        encoded(batch)


# --- bodies -------------------------------------------------------------------------


def body(data: bytes, encoding: str | None, *, max_body: int = MB, max_inflated: int = MB) -> bytes:
    return decode_body(
        data, content_encoding=encoding, max_body_bytes=max_body, max_inflated_bytes=max_inflated
    )


@pytest.mark.parametrize("encoding", [None, "", "identity", " Identity "])
def test_identity_bodies(encoding: str | None) -> None:
    assert body(b"abc", encoding) == b"abc"


@pytest.mark.parametrize("encoding", ["gzip", " GZIP ", "x-gzip", "Gzip\t"])
def test_gzip_bodies(encoding: str) -> None:
    assert body(gzip.compress(b"abc" * 1000), encoding) == b"abc" * 1000


@pytest.mark.parametrize(
    "encoding", ["br", "deflate", "compress", "zstd", "gzip, gzip", "gzip,identity", "gzip;q=1"]
)
def test_other_encodings_are_refused(encoding: str) -> None:
    with pytest.raises(UnsupportedEncoding, match="not supported") as caught:
        body(gzip.compress(b"abc"), encoding)
    assert caught.value.http_status == 415


def test_bodies_over_the_caps_are_refused() -> None:
    data = gzip.compress(bytes(1000))
    assert body(bytes(100), None, max_body=100, max_inflated=100) == bytes(100)
    assert body(data, "gzip", max_body=len(data), max_inflated=1000) == bytes(1000)
    cases: list[tuple[bytes, str | None, int, int]] = [
        (bytes(101), None, 100, 1000),  # identity over the body cap
        (bytes(101), None, 1000, 100),  # identity over the inflated cap
        (data, "gzip", len(data) - 1, 1000),  # compressed over the body cap
        (data, "gzip", len(data), 999),  # inflates one byte over
    ]
    for data_, encoding, max_body, max_inflated in cases:
        with pytest.raises(BodyTooLarge) as caught:
            body(data_, encoding, max_body=max_body, max_inflated=max_inflated)
        assert caught.value.http_status == 413


def gzip_bomb(size: int) -> bytes:
    """`size` zero bytes gzipped, built a megabyte at a time (never whole in memory)."""
    compressor = isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31)
    zeros = bytes(MB)
    parts = [compressor.compress(zeros) for _ in range(size // MB)]
    return b"".join([*parts, compressor.flush()])


def test_a_gzip_bomb_is_refused_in_bounded_memory() -> None:
    bomb = gzip_bomb(1 << 30)
    assert len(bomb) < 2 * MB
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLarge, match="inflates to over"):
            body(bomb, "gzip", max_body=4 * MB, max_inflated=64 * MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * MB  # the 64 MB cap and change, not the 1 GB


def test_corrupt_gzip_is_a_bad_request() -> None:
    good = gzip.compress(b"some batch" * 100)
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    bad_crc = good[:-8] + bytes(4) + good[-4:]
    cases = {
        "truncated": good[:-5],
        "header only": good[:10],
        "corrupt": bytes(flipped),
        "bad crc": bad_crc,
        "not gzip": b"not gzip at all",
        "zlib, not gzip": zlib.compress(b"abc"),
        "two members": good + gzip.compress(b"more"),
        "trailing bytes": good + b"\x00",
        "empty": b"",
    }
    for name, data in cases.items():
        with pytest.raises(CorruptBody) as caught:
            body(data, "gzip")
        assert caught.value.http_status == 400, name
        assert isinstance(caught.value, MalformedBatch)


def test_errors_belong_to_the_hierarchy() -> None:
    for error in (BodyTooLarge, UnsupportedEncoding, MalformedBatch, CorruptBody):
        assert issubclass(error, RemoteProtocolError)
    assert MalformedBatch.http_status == 422


# --- hostile documents ---------------------------------------------------------------

Wire = dict[str, Any]


def good_wire() -> Wire:
    """A valid document as plain Python data, to break one value at a time."""
    wire: Wire = msgpack.unpackb(encoded(real_batches()[1], range_id=5, epoch=9))
    return wire


def set_top(key: str, value: object) -> Callable[[Wire], None]:
    return lambda wire: wire.__setitem__(key, value)


def set_release(key: str, value: object) -> Callable[[Wire], None]:
    return lambda wire: wire["releases"][0].__setitem__(key, value)


def change_files(change: Callable[[list[FileChunk]], list[FileChunk]]) -> Callable[[Wire], None]:
    """Repack the first release's files after `change` (fragments.pack checks nothing)."""

    def apply(wire: Wire) -> None:
        release = wire["releases"][0]
        release["fragment"] = fragments.pack(change(fragments.unpack(release["fragment"])))

    return apply


def set_file(**changes: Any) -> Callable[[Wire], None]:
    return change_files(lambda files: [attrs.evolve(files[0], **changes), *files[1:]])


def segments(numbers: tuple[int, ...], ids: str) -> Callable[[Wire], None]:
    return set_file(numbers=array("I", numbers), sizes=array("I", numbers), message_ids=ids)


def set_fragment(change: Callable[[bytes], bytes]) -> Callable[[Wire], None]:
    return lambda wire: wire["releases"][0].__setitem__(
        "fragment", change(wire["releases"][0]["fragment"])
    )


def deflated(raw: bytes) -> bytes:
    return bytes((fragments.DEFLATED,)) + zlib.compress(raw)


def inflated(fragment: bytes) -> bytes:
    return fragments.layout(fragment)


def unsized(raw: bytes) -> bytes:
    """A version 3 fragment whose zstd frame does not say its size."""
    frame = zstandard.ZstdCompressor(level=1, write_content_size=False).compress(raw)
    return bytes((fragments.VERSION,)) + frame


def duplicate(key: str) -> Callable[[Wire], None]:
    return lambda wire: wire[key].append(wire[key][0])


FRAGMENT = r"releases\[0\]\.fragment: "
BAD: dict[str, tuple[Callable[[Wire], None], str]] = {
    "version 1": (set_top("v", 1), "version 1 is not supported"),
    "version as text": (set_top("v", "2"), "version '2' is not supported"),
    "version as bool": (set_top("v", True), "version True is not supported"),
    "no version": (lambda w: w.pop("v"), "version None"),
    "unknown key": (set_top("extra", 1), "batch: unknown 'extra'"),
    "missing key": (lambda w: w.pop("lines"), "batch: missing lines"),
    "negative range": (set_top("range", -1), "range: -1 is out of range"),
    "range over bigint": (set_top("range", 2**63), "range: 9223372036854775808"),
    "negative epoch": (set_top("epoch", -5), "epoch: -5"),
    "negative first": (set_top("first", -1), "first: -1 is out of range"),
    "next over bigint": (set_top("next", 2**64 - 1), "next: 18446744073709551615"),
    "next before first": (set_top("next", BASE - 1), "next: 4294967305 is out of range"),
    "float lines": (set_top("lines", 1.5), "lines: expected an integer, got a float"),
    "bool lines": (set_top("lines", False), "lines: expected an integer, got a boolean"),
    "group as bin": (set_top("group", b"abc"), "group: expected a string, got binary"),
    "NUL in group": (set_top("group", "a\x00b"), "group: holds a NUL"),
    "long group": (set_top("group", "g" * 5000), "group: 5000 characters, over the cap"),
    "skipped not array": (set_top("skipped", {}), "skipped: expected an array, got a map"),
    "skipped triple": (set_top("skipped", [["a", 1, 2]]), r"skipped\[0\]: expected \[reason"),
    "skipped negative": (set_top("skipped", [["a", -1]]), r"skipped\[0\]: -1 is out of range"),
    "skipped twice": (duplicate("skipped"), "skipped: two entries have the reason"),
    "rule count unknown key": (
        lambda w: w["rule_counts"][0].update(x=1),
        r"rule_counts\[0\]: unknown 'x'",
    ),
    "rule count twice": (duplicate("rule_counts"), r"two entries have the \(rule, key\)"),
    # Stored in PostgreSQL int columns: past them was a 500.
    "rule count releases over int": (
        lambda w: w["rule_counts"][0].update(releases=2**31),
        r"rule_counts\[0\]\.releases: 2147483648 is out of range 0\.\.2147483647",
    ),
    "lines over int": (set_top("lines", 2**31), "lines: 2147483648 is out of range"),
    "rule count negative": (
        lambda w: w["rule_counts"][0].update(segments=-2),
        r"rule_counts\[0\].segments: -2",
    ),
    "probe for another release": (
        lambda w: w["probe_candidates"][0].update(release_key=bytes(16)),
        "not a release of this batch",
    ),
    "probe id in brackets": (
        lambda w: w["probe_candidates"][0].update(message_id="<a@b>"),
        r"probe_candidates\[0\].message_id: a message-id holds '<'",
    ),
    "probe with two ids": (
        lambda w: w["probe_candidates"][0].update(message_id="a@b\nc@d"),
        r"a message-id holds '\\n'",
    ),
    "probe without id": (
        lambda w: w["probe_candidates"][0].update(message_id=""),
        "an empty message-id",
    ),
    "short release key": (set_release("key", bytes(15)), r"releases\[0\].key: 15 bytes, not 16"),
    "release key as text": (set_release("key", "k" * 16), "expected binary, got a string"),
    "release twice": (duplicate("releases"), "releases: two entries have the key"),
    "head name as int": (set_release("head_name", 3), "head_name: expected a string or nil"),
    "NUL in release name": (set_release("name", "a\x00b"), r"releases\[0\].name: holds a NUL"),
    "release name as nil": (set_release("name", None), "name: expected a string, got nil"),
    "groups not array": (set_release("groups", "a.b"), r"releases\[0\].groups: expected an"),
    "group as int": (set_release("groups", [1]), r"groups\[0\]: expected a string"),
    "group twice": (set_release("groups", ["a", "a"]), "two entries have the name 'a'"),
    "group with a line break": (set_release("groups", ["a\nb"]), "not a newsgroup name"),
    "empty group": (set_release("groups", [""]), "not a newsgroup name"),
    "files announced over": (set_release("files_announced", 10**5), "files_announced: 100000"),
    "release with files": (set_release("files", []), r"releases\[0\]: unknown 'files'"),
    "fragment as text": (set_release("fragment", "abc"), "fragment: expected binary, got a str"),
    "empty fragment": (set_release("fragment", b""), FRAGMENT + "version None is not 3"),
    "fragment version 1": (
        set_fragment(lambda f: b"\x01" + f[1:]),
        FRAGMENT + r"version 1 is not 3 \(or 2\)",
    ),
    "fragment not zlib": (
        set_release("fragment", b"\x02not deflate"),
        FRAGMENT + "not a plain zlib stream",
    ),
    "fragment not deflate": (
        set_release("fragment", b"\x02\x78\x9cnot deflate"),
        FRAGMENT + "does not inflate",
    ),
    "fragment truncated": (
        set_fragment(lambda f: deflated(inflated(f))[:-3]),
        FRAGMENT + "the deflate stream is trun",
    ),
    "bytes after the fragment": (
        set_fragment(lambda f: deflated(inflated(f)) + b"more"),
        FRAGMENT + "4 bytes after the deflate stream",
    ),
    "zstd fragment truncated": (set_fragment(lambda f: f[:-3]), FRAGMENT + "does not decompress"),
    "bytes after the zstd frame": (
        set_fragment(lambda f: f + b"more"),
        FRAGMENT + "does not decompress: .*4 bytes of unused data",
    ),
    "two zstd frames": (
        set_fragment(lambda f: f + f[1:]),
        FRAGMENT + "does not decompress: .*unused data",
    ),
    "zstd checksum wrong": (
        set_fragment(lambda f: f[:-1] + bytes([f[-1] ^ 1])),
        FRAGMENT + "does not decompress: .*checksum",
    ),
    "zstd frame without its size": (
        set_fragment(lambda f: unsized(inflated(f))),
        FRAGMENT + "the zstd frame does not say its size",
    ),
    "not a zstd frame": (
        set_release("fragment", bytes((fragments.VERSION,)) + b"not zstd"),
        FRAGMENT + "not a zstd frame",
    ),
    "fragment too short": (set_release("fragment", deflated(b"\x01")), "too short for its head"),
    "fragment without files": (change_files(lambda files: []), FRAGMENT + "claims 0 files"),
    "fragment claims more files": (
        set_fragment(lambda f: deflated(b"\x09" + inflated(f)[1:])),
        FRAGMENT + "claims 9 files",
    ),
    "fragment cut short": (
        set_fragment(lambda f: deflated(inflated(f)[:60])),  # the head, one entry, 8 bytes
        FRAGMENT + "claims .* segments in",
    ),
    "file twice": (
        change_files(lambda files: [files[0], *files]),
        FRAGMENT + "two files have the same key",
    ),
    "1 MB name": (set_file(name="n" * MB), FRAGMENT + r".*1048576 \w+, over"),
    "NUL in name": (set_file(name="a\x00.rar"), FRAGMENT + "file 0: its name holds a NUL"),
    "lone surrogate in name": (set_file(name="a\udc80.rar"), "file 0: its name is not UTF-8"),
    "long subject": (set_file(subject="s" * 4097), "4097 characters, over 4096"),
    "long non-ASCII subject": (
        set_file(subject="ü" * 4097),
        "file 0: its subject has 4097 characters, over 4096",
    ),
    "index over": (set_file(index=100_000), r"file 0: .*index 100000"),
    "no segment total": (set_file(total_segments=0), "file 0: .* segments of 0"),
    "segment total over": (set_file(total_segments=500_001), "segments of 500001"),
    "no segments": (segments((), ""), "file 0: 0 segments of"),
    "segment 0": (segments((0, 1), "a\nb"), "file 0: segment number 0"),
    "segment over total": (segments((1, 9), "a\nb"), "file 0: segment 9 of a file of"),
    "segments descending": (
        segments((2, 1), "a\nb"),
        r"not strictly ascending at \[1\] \(1 after 2\)",
    ),
    "segment repeated": (
        segments((1, 1), "a\nb"),
        r"not strictly ascending at \[1\] \(1 after 1\)",
    ),
    "too few ids": (segments((1, 2), "a"), "1 message-ids for 2 segments"),
    "too many ids": (segments((1, 2), "a\nb\nc"), "3 message-ids for 2 segments"),
    "empty id": (segments((1, 2, 3), "a\n\nb"), "an empty message-id"),
    "leading newline": (segments((1, 2), "\na"), "an empty message-id"),
    "id with >": (segments((1, 2), "a\nb>"), "a message-id holds '>'"),
    "ids of one width with >": (segments((1, 2), "a>\nbc"), "a message-id holds '>'"),
    "id with CR": (segments((1, 2), "a\rx\nb"), r"a message-id holds '\\r'"),
    "id with NUL": (segments((1, 2), "a\nb\x00"), r"a message-id holds '\\x00'"),
    "id with a lone surrogate": (
        segments((1, 2), "a\udc80\nbc"),
        "message-ids are not UTF-8",
    ),
    "ids of one width with a lone surrogate": (
        segments((1, 2), "a\udc80\nbcde"),
        "message-ids are not UTF-8",
    ),
    "more segments than lines": (set_top("lines", 1), "segments from only 1 lines"),
    # Every segment is an article of the batch's span: one-article batches claiming
    # millions of segments summed a release's bytes past a bigint (a 500).
    "more segments than articles": (
        lambda wire: wire.__setitem__("next", wire["first"] + 1),
        r"segments from only 1 articles \(first..next\)",
    ),
    # The store spans a release's dates as int8range(posted, latest, '[]'): no room
    # past the largest bigint (a 500 at every try of the range).
    "a file at the largest bigint": (
        set_file(posted=2**63 - 1),
        "a file dated 9223372036854775807, the largest bigint",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_hostile_documents_are_refused(name: str) -> None:
    change, message = BAD[name]
    wire = good_wire()
    change(wire)
    with pytest.raises(MalformedBatch, match=message) as caught:
        decode_batch(msgpack.packb(wire))
    assert caught.value.http_status == 422


def test_the_good_document_is_accepted() -> None:
    decoded = decode_batch(msgpack.packb(good_wire()))
    assert decoded.batch == pack_batch(real_batches()[1])


LIMITED: dict[str, tuple[BatchLimits, str]] = {
    "releases": (BatchLimits(max_releases=1), r"releases: \d+ items, over the cap of 1"),
    "files": (BatchLimits(max_files=2), "over the cap of 2 files per batch"),
    "segments": (BatchLimits(max_segments=3), "over the cap of 3 segments per batch"),
    "groups": (BatchLimits(max_groups=1), r"groups: 2 items, over the cap of 1"),
    "fragment": (BatchLimits(max_fragment_bytes=150), "inflates to more than 150 bytes"),
    "text": (
        BatchLimits(max_text_chars=20),
        "characters, over (the cap of )?20|message-id of more than 20 bytes",
    ),
    "probes": (BatchLimits(max_probe_candidates=0), "probe_candidates: 1 items"),
    "rule counts": (BatchLimits(max_rule_counts=1), "rule_counts: 2 items"),
    "skipped": (BatchLimits(max_skipped=1), "skipped: 2 items"),
}


@pytest.mark.parametrize("name", sorted(LIMITED))
def test_caps_are_arguments(name: str) -> None:
    limits, message = LIMITED[name]
    with pytest.raises(MalformedBatch, match=message):
        decode_batch(msgpack.packb(good_wire()), limits=limits)


def test_all_fragments_of_a_batch_share_one_inflating_budget() -> None:
    wire = good_wire()
    sizes = [len(inflated(r["fragment"])) for r in wire["releases"]]
    assert len(sizes) >= 2
    document = msgpack.packb(wire)
    assert decode_batch(document, limits=BatchLimits(max_inflated_fragments=sum(sizes)))
    # Each fragment is under the cap of one; the second goes over what is left.
    limits = BatchLimits(max_fragment_bytes=max(sizes), max_inflated_fragments=sizes[0] + 1)
    with pytest.raises(MalformedBatch, match=r"releases\[1\]\.fragment: inflates to more than"):
        decode_batch(document, limits=limits)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_files must be 0 or more"):
        BatchLimits(max_files=-1)


def test_msgpack_level_garbage_is_malformed() -> None:
    good = msgpack.packb(good_wire())
    group = msgpack.packb(GROUP)
    surrogate = group[:1] + b"alt.binaries.t\xed\xa0\x80"  # same length, U+D800 encoded
    assert len(surrogate) == len(group)
    cases = {
        "empty": b"",
        "truncated": good[:-1],
        "trailing data": good + b"\x00",
        "an array": msgpack.packb([1, 2]),
        "a lone surrogate": good.replace(group, surrogate),
        "invalid UTF-8": good.replace(group, group[:1] + b"\xff" * (len(group) - 1)),
        "a huge array header": b"\xdd\xff\xff\xff\xff",
        "a huge map header": b"\xdf\xff\xff\xff\xff",
        "a huge str header": b"\xdb\xff\xff\xff\xff",
        "an int map key": msgpack.packb({1: 2}),
        "a repeated key": b"\x82\xa1v\x01\xa1v\x01",
        "an ext type": msgpack.packb(msgpack.ExtType(1, b"abc")),
        "deep nesting": b"\x91" * 100_000,
        "reserved byte": b"\xc1",
    }
    for name, data in cases.items():
        with pytest.raises(MalformedBatch):
            decode_batch(data)
        assert name


@settings(max_examples=300, deadline=1000)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_give_only_malformed_batch(data: bytes) -> None:
    with contextlib.suppress(MalformedBatch):
        decode_batch(data)


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=15,
)


@settings(max_examples=100, deadline=1000)
@given(msgpack_values)
def test_arbitrary_documents_give_only_malformed_batch(value: object) -> None:
    with contextlib.suppress(MalformedBatch):
        decode_batch(msgpack.packb(value))


def slots(value: object) -> list[tuple[Any, Any]]:
    """Every (container, key or index) of a document, to put something else in."""
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return []
    return [(value, key) for key, _ in items] + [s for _, v in items for s in slots(v)]


@settings(
    max_examples=100, deadline=1000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_documents_with_a_value_replaced_give_a_batch_or_malformed_batch(
    good_body: bytes, data: st.DataObject
) -> None:
    wire = msgpack.unpackb(good_body)
    container, key = data.draw(st.sampled_from(slots(wire)))
    container[key] = data.draw(msgpack_values)
    with contextlib.suppress(MalformedBatch):
        decode_batch(msgpack.packb(wire))


@pytest.fixture(scope="module")
def good_body() -> bytes:
    return encoded(real_batches()[1])


@settings(
    max_examples=300, deadline=1000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_mutated_bodies_give_a_batch_or_malformed_batch(
    good_body: bytes, data: st.DataObject
) -> None:
    mutated = bytearray(good_body)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(mutated) - 1))
        mutated[at] = data.draw(st.integers(0, 255))
    try:
        decoded = decode_batch(bytes(mutated))
    except MalformedBatch:
        return
    assert isinstance(decoded.batch, PackedBatch)
