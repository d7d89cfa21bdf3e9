"""The compiled fragment checks (wire/_fastfragments.pyx `facts`) against their oracle, fragments._facts,
and the compiled release checks (`ReleaseChecks`) against theirs, batchwire._release.

The compiled `facts` may leave any fragment to the pure checks (None), but
when it answers, the figures must be the pure ones, and it must never
answer for a fragment the pure checks refuse. It must also answer for the
fragments real batches carry (else it would be an oracle pair in name only):
every generator profile's and the real corpus's subjects, names in any
script, message-ids of one width and of many.
"""

from __future__ import annotations

import csv
import zlib
from array import array
from pathlib import Path

import attrs
import msgpack
import pytest
import zstandard
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_batchwire import BAD, LIMITED, encoded, good_wire, msgpack_values, real_batches
from test_fragments import GOOD, file_chunk

from usenet_indexer.core.batch import UNDATED, FileChunk
from usenet_indexer.core.indexer import RangeIndexer
from usenet_indexer.core.subject import MAX_FILES as MAX_FILE_INDEX
from usenet_indexer.core.subject import MAX_SEGMENTS as MAX_TOTAL_SEGMENTS
from usenet_indexer.synth.generator import PROFILES, GeneratorConfig, generate
from usenet_indexer.wire import batchwire, fragments
from usenet_indexer.wire.batchwire import DEFAULT_LIMITS, BatchLimits, MalformedBatch, decode_batch
from usenet_indexer.wire.fragments import BadFragment
from usenet_indexer.wire.packed import PackedRelease, pack_batch

CAP = 4096


def compiled(raw: bytes, cap: int = CAP) -> fragments.Facts | None:
    """The compiled checks' answer (None: left to the pure ones)."""
    assert fragments.COMPILED_FACTS is not None
    return fragments._compiled_facts(raw, cap)


def agree(raw: bytes, cap: int = CAP) -> fragments.Facts | None:
    """Both checks on one inflated fragment: the compiled answer (None: left to pure)."""
    got = compiled(raw, cap)
    try:
        expected = fragments._facts(raw, cap)
    except BadFragment as error:
        refused = str(error)
    else:
        assert got is None or got == expected
        return got
    assert got is None, f"compiled let through what pure refuses: {refused}"
    return None


def inflated(files: list[FileChunk]) -> bytes:
    return fragments.layout(fragments.pack(files))


def test_the_compiled_checks_are_built() -> None:
    # Without them every comparison below would be None against the pure checks.
    assert fragments.COMPILED_FACTS is not None, (
        "wire/_fastfragments is not built: run scripts/bootstrap"
    )


def test_the_good_fragments_are_answered_compiled() -> None:
    assert agree(inflated(GOOD)) is not None
    undated = [attrs.evolve(f, posted=0) for f in GOOD]
    facts = agree(inflated(undated))
    assert facts is not None
    assert (facts.posted, facts.latest) == (0, 0)
    assert facts.representative[0] == UNDATED


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profiles_batches_are_answered_compiled_and_alike(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=20_000, seed=3, profile=profile))
    indexer = RangeIndexer(group="alt.binaries.test", first=1)
    indexer.add_data(b"\n".join(generated.lines) + b"\n", len(generated.lines) + 1)
    releases = pack_batch(indexer.finish()).releases
    assert releases
    for release in releases:
        assert agree(fragments.layout(release.fragment)) is not None


def test_the_real_corpus_subjects_and_names_are_answered_compiled(corpus_dir: Path) -> None:
    with (corpus_dir / "subjects.tsv").open(encoding="utf-8", newline="") as stream:
        rows = list(csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(rows) > 100
    assert any(not row["subject"].isascii() for row in rows)  # real posts are not all ASCII
    files = [
        file_chunk(
            i, [f"part{i}.{k}@news" for k in range(3)], name=row["expected"], subject=row["subject"]
        )
        for i, row in enumerate(rows)
    ]
    for at in range(0, len(files), 50):
        assert agree(inflated(files[at : at + 50])) is not None


TEXTS = [
    "plain.rar",
    "né - 日本語 🎬.mkv",  # two, three and four bytes a character
    "\u00e9" * CAP,  # exactly the cap in characters, twice that in bytes
    "x" * CAP,
]
BAD_UTF8 = [
    b"\xc0\xaf",  # overlong "/"
    b"\xe0\x80\xaf",  # overlong, three bytes
    b"\xed\xa0\x80",  # a surrogate
    b"\xf4\x90\x80\x80",  # above U+10FFFF
    b"\xf8\x88\x80\x80\x80",  # five bytes
    b"\xc3",  # cut short
    b"\xe2\x82",  # cut short
    b"\x80",  # a lone continuation byte
    b"a\x00b",  # NUL
    "é".encode() * (CAP + 1),  # one character over the cap
]


@pytest.mark.parametrize("text", TEXTS)
def test_names_in_any_script_are_answered_compiled(text: str) -> None:
    files = [file_chunk(0, ["a@b", "c@d"], name=text, subject=text)]
    assert agree(inflated(files)) is not None


def _with_name(name: bytes, ids: bytes = b"a@b\nc@d", width: int = 0) -> bytes:
    """A one-file fragment built by hand (pack would not write bad UTF-8)."""
    count = 2
    entry = fragments._ENTRY.pack(bytes(16), count, 0, count, 0, len(name), 0)
    numbers = fragments._planes(array("I", range(1, count + 1)).tobytes())
    sizes = fragments._planes(array("I", [1] * count).tobytes())
    return fragments._HEAD.pack(1, width) + entry + numbers + sizes + ids + name


@pytest.mark.parametrize("name", BAD_UTF8)
def test_what_python_would_not_decode_is_left_to_pure(name: bytes) -> None:
    raw = _with_name(name)
    assert compiled(raw) is None
    with pytest.raises(BadFragment):
        fragments._facts(raw, CAP)


@pytest.mark.parametrize("ids", [b"n\xc3\xa9@b\nc@d", "日本@x\n🎬@y".encode()])
def test_joined_message_ids_in_utf8_are_answered_compiled(ids: bytes) -> None:
    assert agree(_with_name(b"a.rar", ids)) is not None


@pytest.mark.parametrize(
    "ids",
    [
        b"n\xc3@b\nc@d",
        b"a@\xed\xa0\x80\nc@d",
        *(b"a" + bad + b"b\nc@d" for bad in fragments.ID_FORBIDDEN),
        b"a@b\n",
        b"\na@b",
    ],
)
def test_bad_joined_message_ids_are_left_to_pure(ids: bytes) -> None:
    raw = _with_name(b"a.rar", ids)
    assert compiled(raw) is None
    with pytest.raises(BadFragment):
        fragments._facts(raw, CAP)


@settings(max_examples=500, deadline=None)
@given(
    data=st.data(),
    damage=st.lists(
        st.tuples(
            st.integers(0, 1 << 20),
            st.sampled_from([0, 1, 2, 0x09, 0x0A, 0x0D, 0x3C, 0x3E, 0x80, 0xC3, 0xED, 0xFF]),
        ),
        max_size=4,
    ),
)
@example(data=None, damage=[])
def test_damaged_fragments_get_the_same_answer(
    data: st.DataObject | None, damage: list[tuple[int, int]]
) -> None:
    files = list(GOOD)
    if data is not None:
        files.append(
            file_chunk(
                7,
                data.draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5)),
                name=data.draw(st.text(max_size=20)),
                subject=data.draw(st.text(max_size=40)),
                index=data.draw(st.none() | st.integers(0, 5000)),
            )
        )
    raw = bytearray(inflated(files))
    for at, value in damage:
        raw[at % len(raw)] = value
    agree(bytes(raw))


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=400), head=st.tuples(st.integers(0, 3), st.integers(0, 40)))
def test_garbage_gets_the_same_answer(raw: bytes, head: tuple[int, int]) -> None:
    agree(fragments._HEAD.pack(*head) + raw)
    agree(raw)


def test_caps_are_the_pure_ones() -> None:
    # A file's total at the subject parser's cap and one over; an index likewise.
    top = MAX_TOTAL_SEGMENTS
    at_cap = [attrs.evolve(file_chunk(0, ["a@b"]), total_segments=top)]
    assert agree(inflated(at_cap)) is not None
    over = [attrs.evolve(file_chunk(0, ["a@b"]), total_segments=top + 1)]
    assert compiled(inflated(over)) is None
    index = [file_chunk(0, ["a@b"], index=MAX_FILE_INDEX)]
    assert agree(inflated(index)) is not None
    # Two files with one key.
    twice = [file_chunk(0, ["a@b"]), attrs.evolve(file_chunk(1, ["c@d"]), key=GOOD[0].key)]
    twice[0] = attrs.evolve(twice[0], key=GOOD[0].key)
    assert compiled(inflated(twice)) is None
    many = [file_chunk(i, [f"{i}@x"]) for i in range(100)]
    assert agree(inflated(many)) is not None
    assert compiled(inflated([*many, attrs.evolve(many[0], total_segments=5)])) is None


def test_inspect_answers_as_the_pure_checks_do() -> None:
    # The public entry: the same Facts whichever way it went.
    data = fragments.pack(GOOD)
    assert fragments.inspect(data, max_bytes=1 << 24, max_text_chars=CAP) == fragments._facts(
        fragments.layout(data), CAP
    )


# --- the release checks: ReleaseChecks against batchwire._release ---------------------


def release_agree(
    item: object, limits: BatchLimits = DEFAULT_LIMITS, budget: int | None = None
) -> tuple[PackedRelease, int] | None:
    """Both checks on one release's map: the compiled answer (None: left to pure)."""
    checks = batchwire._compiled_checks(limits)
    assert checks is not None
    budget = limits.max_fragment_bytes if budget is None else budget
    got = checks.check(item, budget)
    try:
        expected = batchwire._release(item, "releases[0]", limits, budget)
    except MalformedBatch as error:
        refused = str(error)
    else:
        if got is not None:
            # Every field, the inflated bytes (not part of a PackedRelease's value) and
            # the types too (an int, not a subclass; a tuple of groups).
            fields = [(type(v), v) for v in (*attrs.astuple(got[0], recurse=False), got[1])]
            assert fields == [
                (type(v), v) for v in (*attrs.astuple(expected[0], recurse=False), expected[1])
            ]
        return got
    assert got is None, f"compiled let through what pure refuses: {refused}"
    return None


def test_the_compiled_release_checks_are_built() -> None:
    assert batchwire.COMPILED_CHECKS is not None, (
        "wire/_fastfragments is not built: run scripts/bootstrap"
    )


def test_a_packed_release_is_made_as_its_init_makes_it() -> None:
    # ReleaseChecks sets each field of a new PackedRelease; it is only the same
    # value while the class has nothing its __init__ would run besides.
    for field in attrs.fields(PackedRelease):
        assert field.validator is None, field.name
        assert field.converter is None, field.name
    assert not hasattr(PackedRelease, "__attrs_post_init__")
    assert attrs.fields(PackedRelease).inflated.eq is False


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profiles_releases_are_answered_compiled_and_alike(profile: str) -> None:
    generated = generate(GeneratorConfig(articles=20_000, seed=3, profile=profile))
    indexer = RangeIndexer(group="alt.binaries.test", first=1)
    indexer.add_data(b"\n".join(generated.lines) + b"\n", len(generated.lines) + 1)
    body = batchwire.encode_batch(pack_batch(indexer.finish()), range_id=1, epoch=1)
    wire = msgpack.unpackb(body)
    assert wire["releases"]
    for item in wire["releases"]:
        assert release_agree(item) is not None
    compiled, pure = decode_batch(body), decode_batch(body, pure=True)
    assert compiled == pure
    assert [r.inflated for r in compiled.batch.releases] == [
        r.inflated for r in pure.batch.releases
    ]


def test_the_real_batches_releases_are_answered_compiled() -> None:
    # UTF-8 names and heads, releases without a head, with several groups: answered
    # wherever the fragment's checks are (not for column-wise ids in UTF-8).
    answered = 0
    for batch in real_batches():
        for item in msgpack.unpackb(encoded(batch))["releases"]:
            facts = compiled(fragments.layout(item["fragment"]))
            assert (release_agree(item) is not None) == (facts is not None)
            answered += facts is not None
    assert answered >= 2


@pytest.mark.parametrize("name", sorted(BAD))
def test_every_hostile_release_is_left_to_pure(name: str) -> None:
    change, _ = BAD[name]
    wire = good_wire()
    change(wire)
    releases = wire.get("releases")
    for item in releases if isinstance(releases, list) else []:
        release_agree(item)


@pytest.mark.parametrize("name", sorted(LIMITED))
def test_releases_at_other_caps_get_the_same_answer(name: str) -> None:
    limits, _ = LIMITED[name]
    for item in good_wire()["releases"]:
        release_agree(item, limits)


def test_what_pure_accepts_beyond_the_compiled_path_is_left_to_it() -> None:
    item = good_wire()["releases"][0]
    raw = fragments.layout(item["fragment"])
    # A version 2 fragment (older edges), and a zstd frame without its size.
    deflated = bytes((fragments.DEFLATED,)) + zlib.compress(raw)
    sizeless = bytes((fragments.VERSION,)) + zstandard.ZstdCompressor(
        write_content_size=False
    ).compress(raw)
    assert release_agree({**item, "fragment": deflated}) is None
    assert batchwire._release({**item, "fragment": deflated}, "", DEFAULT_LIMITS, 1 << 20)
    assert release_agree({**item, "fragment": sizeless}) is None


def test_the_budget_and_text_caps_are_the_pure_ones() -> None:
    item = good_wire()["releases"][0]
    size = len(fragments.layout(item["fragment"]))
    assert release_agree(item, budget=size) is not None
    assert release_agree(item, budget=size - 1) is None
    cap = DEFAULT_LIMITS.max_text_chars
    for field in ("name", "poster", "head_name"):
        assert release_agree({**item, field: "é" * cap}) is not None
        assert release_agree({**item, field: "é" * (cap + 1)}) is None
    assert release_agree({**item, "head_name": None}) is not None
    assert release_agree({**item, "files_announced": None}) is not None
    for announced in (0, MAX_FILE_INDEX):
        assert release_agree({**item, "files_announced": announced}) is not None
    for announced in (-1, MAX_FILE_INDEX + 1, 2**64, True):
        assert release_agree({**item, "files_announced": announced}) is None
    groups = [f"alt.binaries.{i}" for i in range(DEFAULT_LIMITS.max_groups)]
    assert release_agree({**item, "groups": groups}) is not None
    assert release_agree({**item, "groups": [*groups, "alt.x"]}) is None
    assert release_agree({**item, "groups": []}) is not None
    assert release_agree({**item, "groups": ["a", "b", "a"]}) is None


@settings(max_examples=300, deadline=None)
@given(data=st.data(), value=msgpack_values)
def test_a_release_with_a_value_replaced_gets_the_same_answer(
    data: st.DataObject, value: object
) -> None:
    item = dict(good_wire()["releases"][0])
    key = data.draw(st.sampled_from([*item, "other"]))
    if data.draw(st.booleans()):
        item[key] = value
    else:
        item.pop(key, None)
    release_agree(item)


@settings(max_examples=300, deadline=None)
@given(
    damage=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=4)
)
def test_a_release_with_a_damaged_fragment_gets_the_same_answer(
    damage: list[tuple[int, int]],
) -> None:
    item = dict(good_wire()["releases"][0])
    fragment = bytearray(item["fragment"])
    for at, value in damage:
        fragment[at % len(fragment)] = value
    item["fragment"] = bytes(fragment)
    release_agree(item)


# A damaged fragment above rarely gets past zstd (its checksum): these reach the
# layout checks and the frame checks of ReleaseChecks with what a hostile edge can send.

# Numbers a u32 field of the layout may be set to: the caps and one past, the
# bounds of u32 and of a signed 32-bit number.
_EDGE_U32 = [0, 1, 44, 64, 65, 256, 100_000, 100_001, 4_000_001, 2**31 - 1, 2**31, 2**32 - 1]


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    damage=st.lists(
        st.tuples(
            st.integers(0, 1 << 20),
            st.sampled_from([0, 1, 0x09, 0x0A, 0x3C, 0x80, 0xC3, 0xED, 0xF4, 0xFF]),
        ),
        max_size=3,
    ),
    fields=st.lists(st.tuples(st.integers(0, 1 << 10), st.sampled_from(_EDGE_U32)), max_size=2),
    cut=st.none() | st.integers(0, 1 << 20),
)
def test_a_release_with_a_damaged_layout_framed_again_gets_the_same_answer(
    data: st.DataObject,
    damage: list[tuple[int, int]],
    fields: list[tuple[int, int]],
    cut: int | None,
) -> None:
    item = dict(good_wire()["releases"][data.draw(st.integers(0, 1))])
    raw = bytearray(fragments.layout(item["fragment"]))
    for at, value in damage:
        raw[at % len(raw)] = value
    for at, value in fields:
        # A count, width, segment count, index, total or text length (aligned or not).
        at %= len(raw) - 3
        raw[at : at + 4] = value.to_bytes(4, "little")
    if cut is not None:
        del raw[cut % len(raw) :]
    item["fragment"] = bytes((fragments.VERSION,)) + zstandard.ZstdCompressor(
        write_checksum=data.draw(st.booleans())
    ).compress(bytes(raw))
    release_agree(item, budget=data.draw(st.sampled_from([len(raw), len(raw) - 1, 1 << 20])))


_SKIPPABLE = (0x184D2A50).to_bytes(4, "little") + (4).to_bytes(4, "little") + b"abcd"


def _raw_frame(
    content: bytes, *, size: int | None = None, window: int | None = None, dict_id: int = 0
) -> bytes:
    """One zstd frame holding `content` as a raw block, its header made by hand: the
    content size it says (8 bytes), a window descriptor (single segment without),
    a dictionary id."""
    descriptor = 0xC0 | (0x20 if window is None else 0) | (3 if dict_id else 0)
    head = b"\x28\xb5\x2f\xfd" + bytes((descriptor,))
    head += b"" if window is None else bytes((window,))
    head += dict_id.to_bytes(4, "little") if dict_id else b""
    head += (len(content) if size is None else size).to_bytes(8, "little")
    return head + (len(content) << 3 | 1).to_bytes(3, "little") + content


def _frames(raw: bytes) -> dict[str, tuple[bytes, bool]]:
    """Frames of a good layout, and whether the pure checks accept each."""
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(raw)
    at_cap = (fragments.MAX_WINDOW.bit_length() - 1 - 10) << 3  # exponent, no mantissa
    with_dictionary = zstandard.ZstdCompressionDict(
        raw[:64], dict_type=zstandard.DICT_TYPE_RAWCONTENT
    )
    return {
        "plain": (frame, True),
        "without a checksum": (zstandard.ZstdCompressor().compress(raw), True),
        "a raw block": (_raw_frame(raw), True),
        "a window at the cap": (_raw_frame(raw, window=at_cap), True),
        "a window past the cap": (_raw_frame(raw, window=at_cap + 1), False),
        "the largest window": (_raw_frame(raw, window=0xFF), False),
        "a skippable frame first": (_SKIPPABLE + frame, False),
        "a skippable frame after": (frame + _SKIPPABLE, False),
        "a skippable frame alone": (_SKIPPABLE, False),
        "two frames": (frame + frame, False),
        "a byte after": (frame + b"\0", False),
        "cut short": (frame[:-1], False),
        "size 0, data after": (_raw_frame(raw, size=0), False),
        "size one short": (_raw_frame(raw, size=len(raw) - 1), False),
        "size one long": (_raw_frame(raw, size=len(raw) + 1), False),
        "size 2**63": (_raw_frame(raw, size=2**63), False),
        "size unknown": (_raw_frame(raw, size=2**64 - 1), False),
        "a dictionary id": (_raw_frame(raw, dict_id=7), False),
        "a dictionary": (zstandard.ZstdCompressor(dict_data=with_dictionary).compress(raw), False),
    }


@pytest.mark.parametrize("name", sorted(_frames(bytes(64))))
def test_crafted_zstd_frames_get_the_same_answer(name: str) -> None:
    item = good_wire()["releases"][0]
    frame, accepted = _frames(fragments.layout(item["fragment"]))[name]
    got = release_agree({**item, "fragment": bytes((fragments.VERSION,)) + frame})
    assert (got is not None) == accepted
    if not accepted:
        with pytest.raises(MalformedBatch, match=r"releases\[0\]\.fragment: "):
            batchwire._release(
                {**item, "fragment": bytes((fragments.VERSION,)) + frame},
                "releases[0]",
                DEFAULT_LIMITS,
                DEFAULT_LIMITS.max_fragment_bytes,
            )


def _outcome(body: bytes, *, pure: bool) -> tuple[object, ...]:
    try:
        wire = decode_batch(body, pure=pure)
    except MalformedBatch as error:
        return ("refused", str(error))
    return ("accepted", wire, [r.inflated for r in wire.batch.releases])


@settings(max_examples=300, deadline=None)
@given(damage=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=3))
def test_a_damaged_body_gets_the_same_answer_either_way(damage: list[tuple[int, int]]) -> None:
    # The whole intake: the same batch or the same refusal (pure words every one).
    body = bytearray(encoded(real_batches()[1]))
    for at, value in damage:
        body[at % len(body)] = value
    assert _outcome(bytes(body), pure=False) == _outcome(bytes(body), pure=True)
