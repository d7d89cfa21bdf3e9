"""The scorer: a perfect index scores perfectly, and every kind of damage moves its figure."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import attrs
import orjson
import pytest

from usenet_indexer.errors import InputError
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.synth.truth import (
    INDEXABLE_JUNK,
    Kind,
    Score,
    Truth,
    TruthFile,
    TruthJunk,
    TruthRelease,
    grouping_score,
    perfect_releases,
    score,
)

Releases = list[dict[str, Any]]


@pytest.fixture(scope="module")
def truth() -> Truth:
    return generate(GeneratorConfig(articles=20_000, seed=11)).truth


@pytest.fixture
def perfect(truth: Truth) -> Releases:
    # A fresh deep copy per test: tests damage it.
    return perfect_releases(truth)


def _place(truth: Truth, test: Callable[[TruthRelease], bool], skip: int = 0) -> int:
    """Index (in truth and in the perfect output alike) of a release that passes `test`."""
    found = [place for place, release in enumerate(truth.releases) if test(release)]
    assert len(found) > skip, "the generated truth lacks a release this test needs"
    return found[skip]


def _legit(min_files: int = 1) -> Callable[[TruthRelease], bool]:
    return lambda release: release.kind == "legit" and len(release.files) >= min_files


def _kinds(truth: Truth, *kinds: str) -> int:
    return sum(release.kind in kinds for release in truth.releases)


def _files(truth: Truth) -> int:
    return sum(len(release.files) for release in truth.releases)


def _segments(truth: Truth) -> int:
    return sum(release.segment_count for release in truth.releases)


def _distinct_segments(release: TruthRelease) -> int:
    return sum(len({segment[0] for segment in file.segments}) for file in release.files)


def _assert_perfect_except(result: Score, truth: Truth, **expected: float) -> None:
    perfect = {
        "segments_right_file": 1.0,
        "segments_missing": 0,
        "files_split": 0,
        "files_right_release": 1.0,
        "wrongly_merged": 0.0,
        "reposts_merged": 0,
        "reposts_apart": _kinds(truth, "repost"),
        "exe_dropped": 1.0,
        "legit_dropped": 0.0,
        "obfuscated_flagged": 1.0,
        "legit_flagged": 0.0,
        "names_right": 1.0,
        "junk_as_release": 0,
    }
    perfect.update(expected)
    actual = {name: getattr(result, name) for name in perfect}
    assert actual == pytest.approx(perfect)


def test_the_truth_has_what_these_tests_damage(truth: Truth) -> None:
    kinds = {release.kind for release in truth.releases}
    assert kinds == {"legit", "obfuscated", "exe_flood", "repost"}
    assert any(release.probe_candidate for release in truth.releases)
    assert truth.junk


def test_a_perfect_index_scores_perfectly(truth: Truth, perfect: Releases) -> None:
    result = score(perfect, truth)
    _assert_perfect_except(result, truth)
    counts = result.counts
    assert counts.output_releases == len(truth.releases)
    assert (
        counts.output_dropped == _kinds(truth, "exe_flood") == counts.dropped_by_rule["executable"]
    )
    assert counts.truth_segments == counts.output_segments == _segments(truth)
    assert counts.junk_articles == len(truth.junk)
    assert counts.unknown_segments == counts.duplicated_segments == 0
    assert sum(counts.truth_releases.values()) == len(truth.releases)


def test_releases_may_be_any_iterable(truth: Truth, perfect: Releases) -> None:
    assert score(iter(perfect), truth) == score(perfect, truth)


def test_a_file_moved_to_another_release(truth: Truth, perfect: Releases) -> None:
    source = _place(truth, _legit(min_files=3))
    target = _place(
        truth, lambda release: release.kind == "legit" and release is not truth.releases[source]
    )
    files = perfect[source]["files"]
    # Move its smallest file, so that the source keeps most of its segments.
    smallest = min(files, key=lambda file: len(file["segments"]))
    files.remove(smallest)
    perfect[target]["files"].append(smallest)
    result = score(perfect, truth)
    # Wrong: the moved file, and every file of the release that now mixes two releases.
    wrong = 1 + len(truth.releases[target].files)
    _assert_perfect_except(
        result,
        truth,
        files_right_release=(_files(truth) - wrong) / _files(truth),
        wrongly_merged=1 / len(perfect),
    )


def test_two_releases_merged_into_one(truth: Truth, perfect: Releases) -> None:
    first, second = _place(truth, _legit()), _place(truth, _legit(), skip=1)
    perfect[first]["files"].extend(perfect[second]["files"])
    del perfect[second]
    result = score(perfect, truth)
    wrong = len(truth.releases[first].files) + len(truth.releases[second].files)
    legit = _kinds(truth, "legit")
    _assert_perfect_except(
        result,
        truth,
        files_right_release=(_files(truth) - wrong) / _files(truth),
        wrongly_merged=1 / len(perfect),
        names_right=(legit - 1) / legit,  # the second one now goes by the first one's name
    )
    assert result.counts.output_releases == len(truth.releases) - 1


def test_a_repost_merged_with_its_original_is_no_wrong_merge(
    truth: Truth, perfect: Releases
) -> None:
    repost = _place(truth, lambda release: release.kind == "repost")
    original = next(
        place
        for place, release in enumerate(truth.releases)
        if release.id == truth.releases[repost].repost_of
    )
    # Merged file by file, as an indexer keying files by name would.
    by_name = {file["name"]: file for file in perfect[original]["files"]}
    for file in perfect[repost]["files"]:
        if file["name"] in by_name:
            by_name[file["name"]]["segments"].extend(file["segments"])
        else:
            perfect[original]["files"].append(file)
    del perfect[repost]
    reposts = _kinds(truth, "repost")
    _assert_perfect_except(
        score(perfect, truth), truth, reposts_merged=1, reposts_apart=reposts - 1
    )


def test_a_repost_kept_out_as_repeats_counts_as_merged(truth: Truth, perfect: Releases) -> None:
    # An indexer keeping one article per segment drops a repost's articles as repeats.
    del perfect[_place(truth, lambda release: release.kind == "repost")]
    reposts = _kinds(truth, "repost")
    _assert_perfect_except(
        score(perfect, truth), truth, reposts_merged=1, reposts_apart=reposts - 1
    )


def test_a_legit_release_dropped(truth: Truth, perfect: Releases) -> None:
    place = _place(truth, _legit())
    perfect[place]["dropped"] = "executable"
    legit = _kinds(truth, "legit", "obfuscated")
    result = score(perfect, truth)
    _assert_perfect_except(result, truth, legit_dropped=1 / legit)
    assert result.counts.dropped_by_rule["executable"] == _kinds(truth, "exe_flood") + 1


def test_a_legit_release_missing(truth: Truth, perfect: Releases) -> None:
    place = _place(truth, _legit())
    del perfect[place]
    result = score(perfect, truth)
    _assert_perfect_except(
        result,
        truth,
        legit_dropped=1 / _kinds(truth, "legit", "obfuscated"),
        segments_missing=_distinct_segments(truth.releases[place]),
    )


def test_an_obfuscated_release_not_flagged(truth: Truth, perfect: Releases) -> None:
    place = _place(truth, lambda release: release.kind == "obfuscated" and release.probe_candidate)
    perfect[place]["probe_candidate"] = False
    candidates = sum(
        release.kind == "obfuscated" and release.probe_candidate for release in truth.releases
    )
    _assert_perfect_except(
        score(perfect, truth), truth, obfuscated_flagged=(candidates - 1) / candidates
    )


def test_a_legit_release_flagged_for_a_needless_probe(truth: Truth, perfect: Releases) -> None:
    perfect[_place(truth, _legit())]["probe_candidate"] = True
    _assert_perfect_except(score(perfect, truth), truth, legit_flagged=1 / _kinds(truth, "legit"))


def test_an_executable_flood_kept(truth: Truth, perfect: Releases) -> None:
    perfect[_place(truth, lambda release: release.kind == "exe_flood")]["dropped"] = None
    floods = _kinds(truth, "exe_flood")
    _assert_perfect_except(score(perfect, truth), truth, exe_dropped=(floods - 1) / floods)


def test_an_executable_flood_left_out_counts_as_dropped(truth: Truth, perfect: Releases) -> None:
    del perfect[_place(truth, lambda release: release.kind == "exe_flood")]
    _assert_perfect_except(score(perfect, truth), truth)


def test_junk_inside_a_release(truth: Truth, perfect: Releases) -> None:
    file = perfect[_place(truth, _legit())]["files"][0]
    # Junk an indexer must never index (a Latin-1 subject, bad_utf8, it may).
    junk = [j for j in truth.junk if j.kind not in INDEXABLE_JUNK][:3]
    for item in junk:
        file["segments"].append([1, item.message_id, 1000])
    result = score(perfect, truth)
    _assert_perfect_except(result, truth, junk_as_release=3)


def test_a_segment_under_the_wrong_number(truth: Truth, perfect: Releases) -> None:
    file = perfect[_place(truth, _legit())]["files"][0]
    file["segments"][0][0] += 1000
    segments = _segments(truth)
    _assert_perfect_except(
        score(perfect, truth), truth, segments_right_file=(segments - 1) / segments
    )


def test_a_segment_in_another_file(truth: Truth, perfect: Releases) -> None:
    def suits(release: TruthRelease) -> bool:
        sizes = sorted(len(file.segments) for file in release.files)
        return release.kind == "legit" and len(sizes) >= 2 and sizes[-1] >= 3 and sizes[-2] >= 2

    files = perfect[_place(truth, suits)]["files"]
    big = max(files, key=lambda file: len(file["segments"]))
    other = next(file for file in files if file is not big and len(file["segments"]) >= 2)
    # The other file keeps its majority, so exactly one segment is misplaced.
    other["segments"].append(big["segments"].pop())
    segments = _segments(truth)
    _assert_perfect_except(
        score(perfect, truth),
        truth,
        segments_right_file=(segments - 1) / segments,
        files_split=1,
    )


def test_a_file_split_in_two(truth: Truth, perfect: Releases) -> None:
    release = perfect[_place(truth, lambda r: r.kind == "legit" and len(r.files[0].segments) >= 4)]
    file = release["files"][0]
    half = copy.deepcopy(file)
    cut = len(file["segments"]) // 2
    file["segments"], half["segments"] = file["segments"][:cut], file["segments"][cut:]
    release["files"].append(half)
    _assert_perfect_except(score(perfect, truth), truth, files_split=1)


def test_a_wrong_name(truth: Truth, perfect: Releases) -> None:
    place = _place(truth, _legit())
    perfect[place]["name"] = "Something.Else.Entirely"
    legit = _kinds(truth, "legit")
    _assert_perfect_except(score(perfect, truth), truth, names_right=(legit - 1) / legit)


def test_a_name_with_more_around_it_is_right(truth: Truth, perfect: Releases) -> None:
    place = _place(truth, _legit())
    perfect[place]["name"] = (
        f"am9295 post {truth.releases[place].name.replace('.', ' ')} [FTD#805887]"
    )
    _assert_perfect_except(score(perfect, truth), truth)


def test_duplicated_and_unknown_message_ids_are_counted(truth: Truth, perfect: Releases) -> None:
    file = perfect[_place(truth, _legit())]["files"][0]
    file["segments"].append(list(file["segments"][0]))
    file["segments"].append([99, "made-up@example.invalid", 10])
    result = score(perfect, truth)
    assert result.counts.duplicated_segments == 1
    assert result.counts.unknown_segments == 1
    _assert_perfect_except(result, truth)


def test_an_empty_index(truth: Truth) -> None:
    result = score([], truth)
    legit = [release for release in truth.releases if release.kind in ("legit", "obfuscated")]
    _assert_perfect_except(
        result,
        truth,
        segments_missing=sum(_distinct_segments(release) for release in legit),
        legit_dropped=1.0,
        obfuscated_flagged=0.0,
        reposts_apart=0,
    )
    assert result.counts.output_releases == 0


@pytest.mark.parametrize(
    "release",
    [{}, {"name": "x", "dropped": None, "probe_candidate": False}, {"name": "x", "dropped": None,
     "probe_candidate": False, "files": [{"segments": [[1, "a"]]}]}],
)  # fmt: skip
def test_a_release_of_the_wrong_shape_is_refused(truth: Truth, release: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        score([release], truth)


def test_the_score_prints_as_json(truth: Truth, perfect: Releases) -> None:
    data = orjson.loads(orjson.dumps(score(perfect, truth).as_dict()))
    assert data["segments_right_file"] == 1.0
    assert data["counts"]["truth_releases"]["legit"] == _kinds(truth, "legit")
    assert set(data["counts"]["truth_releases"]) == {"legit", "obfuscated", "exe_flood", "repost"}


# --- grouping_score on hand-made cases --------------------------------------------
#
# Two uploads, A (two files; segment 3 of a1 posted twice by a post check, a1's
# segment 4 never posted) and B, an executable flood F, a repost R of B, one
# text post. Each case builds an output by hand and checks the figures exactly.


def _file(index: int, prefix: str, ks: list[int], total: int) -> TruthFile:
    segments = tuple(
        (k, f"{prefix}.{k}.{copy}@x", 1000, 100 + 10 * index + k + copy)
        for copy, k in enumerate(ks)
    )
    return TruthFile(index, f"{prefix}.bin", f'"{prefix}.bin" yEnc (1/{total})', total, segments)


def _release(id_: int, kind: Kind, files: tuple[TruthFile, ...], **fields: Any) -> TruthRelease:
    defaults: dict[str, Any] = {
        "name": f"R{id_}",
        "real_name": f"R{id_}",
        "poster": f"p{id_}@x",
        "groups": ("a.b.test",),
        "tool": "hand",
        "posted": 0,
        "files_announced": len(files),
        "obfuscated": False,
        "probe_candidate": False,
        "repost_of": None,
        "truncated": False,
    }
    defaults.update(fields)
    return TruthRelease(id=id_, kind=kind, files=files, **defaults)


@pytest.fixture
def hand() -> Truth:
    a = _release(1, "legit", (_file(1, "a1", [1, 2, 3, 3], 4), _file(2, "a2", [1, 2], 2)))
    b = _release(
        2, "obfuscated", (_file(1, "b1", [1, 2, 3], 3),), obfuscated=True, probe_candidate=True
    )
    flood = _release(3, "exe_flood", (_file(1, "f1", [1], 1),))
    repost = _release(4, "repost", (_file(1, "r1", [1, 2, 3], 3),), repost_of=2)
    junk = (TruthJunk("text.1@x", "text", 900),)
    return Truth("a.b.test", 0, 100, 900, 15, (a, b, flood, repost), junk)


def _out(*files: list[tuple[int, str]], **fields: Any) -> dict[str, Any]:
    release: dict[str, Any] = {"name": "out", "dropped": None, "probe_candidate": False}
    release.update(fields)
    release["files"] = [
        {
            "name": "f",
            "subject": "s",
            "total_segments": 1,
            "segments": [[k, mid, 1] for k, mid in f],
        }
        for f in files
    ]
    return release


def _segments_of(truth: Truth, place: int, file: int) -> list[tuple[int, str]]:
    return [(k, mid) for k, mid, _size, _article in truth.releases[place].files[file].segments]


def _hand_perfect(truth: Truth) -> list[dict[str, Any]]:
    return [
        _out(_segments_of(truth, 0, 0), _segments_of(truth, 0, 1)),
        _out(_segments_of(truth, 1, 0), probe_candidate=True),
        _out(_segments_of(truth, 2, 0), dropped="executable"),
        _out(_segments_of(truth, 3, 0)),
    ]


def test_grouping_one_to_one_allows_unposted_and_reposted_segments(hand: Truth) -> None:
    output = _hand_perfect(hand)
    # A keeps one copy of the re-sent segment 3; segment 4 was never posted.
    output[0]["files"][0]["segments"].pop()
    result = grouping_score(output, hand)
    assert result.target_releases == 3
    assert result.one_to_one == 1.0
    assert (result.split, result.wrongly_merged, result.legit_dropped) == (0.0, 0.0, 0.0)
    assert result.segments_right == result.files_right_release == 1.0
    assert result.exe_dropped == result.probe_flagged == 1.0
    assert result.repost_segments_lost == 0
    assert all(goal["met"] for goal in result.goals().values())


def test_grouping_a_missing_posted_segment_is_not_one_to_one(hand: Truth) -> None:
    output = _hand_perfect(hand)
    output[0]["files"][1]["segments"].pop()  # a2's segment 2 lost
    result = grouping_score(output, hand)
    assert result.one_to_one == pytest.approx(2 / 3)
    assert result.split == result.wrongly_merged == 0.0


def test_grouping_a_split_release(hand: Truth) -> None:
    output = _hand_perfect(hand)
    a2 = output[0]["files"].pop()
    output.append(_out([(k, mid) for k, mid, _size in a2["segments"]]))
    result = grouping_score(output, hand)
    assert result.one_to_one == pytest.approx(2 / 3)
    assert result.split == pytest.approx(1 / 3)
    assert result.wrongly_merged == 0.0
    # A's home is the piece with a1 (4 articles): a2 is out of it; b1 and r1 are right.
    assert result.files_right_release == pytest.approx(3 / 4)
    assert result.segments_right == 1.0
    assert result.by_pattern["legit"] == {
        "releases": 1,
        "one_to_one": 0,
        "split": 1,
        "wrongly_merged": 0,
        "absent_or_dropped": 0,
    }
    assert not result.goals()["split"]["met"]


def test_grouping_a_wrong_merge(hand: Truth) -> None:
    output = _hand_perfect(hand)
    # B's file lands in A's release.
    output[0]["files"].extend(output.pop(1)["files"])
    result = grouping_score(output, hand)
    assert result.one_to_one == pytest.approx(1 / 3)  # only the repost is still alone
    assert result.wrongly_merged == pytest.approx(2 / 3)
    assert result.split == 0.0
    assert result.files_right_release == pytest.approx(1 / 4)  # every file of the mixed release
    assert result.probe_flagged == 0.0  # B's home is A's release, not a probe candidate
    assert result.segments_right == 1.0


def test_grouping_a_repost_merged_with_its_original_is_a_wrong_merge(hand: Truth) -> None:
    output = _hand_perfect(hand)
    output[1]["files"].extend(output.pop(3)["files"])
    result = grouping_score(output, hand)
    assert result.wrongly_merged == pytest.approx(2 / 3)
    assert result.one_to_one == pytest.approx(1 / 3)
    # The lenient score sees the same thing as a repost found twice.
    assert score(output, hand).reposts_merged == 1
    assert score(output, hand).wrongly_merged == 0.0


def test_grouping_a_repost_dropped_as_repeats_loses_its_segments(hand: Truth) -> None:
    output = _hand_perfect(hand)
    del output[3]
    result = grouping_score(output, hand)
    assert result.repost_segments_lost == 3
    assert result.legit_dropped == pytest.approx(1 / 3)
    assert result.one_to_one == pytest.approx(2 / 3)


def test_grouping_junk_in_a_release_spoils_it(hand: Truth) -> None:
    output = _hand_perfect(hand)
    output[0]["files"][1]["segments"].append([9, "text.1@x", 1])
    result = grouping_score(output, hand)
    assert result.one_to_one == pytest.approx(2 / 3)
    assert result.wrongly_merged == 0.0


def test_grouping_a_segment_in_the_wrong_file_or_number(hand: Truth) -> None:
    output = _hand_perfect(hand)
    a1, a2 = output[0]["files"]
    a2["segments"].append(a1["segments"].pop(0))  # a1's segment 1 now in a2's file
    output[1]["files"][0]["segments"][0][0] = 7  # b1's segment 1 listed as 7
    result = grouping_score(output, hand)
    placed = 4 + 2 + 3 + 1 + 3
    assert result.segments_right == pytest.approx((placed - 2) / placed)
    assert result.one_to_one == 1.0  # the releases still hold exactly their segments


def test_grouping_drops_and_probes(hand: Truth) -> None:
    output = _hand_perfect(hand)
    output[2]["dropped"] = None
    output[0]["dropped"] = "executable"
    output[1]["probe_candidate"] = False
    result = grouping_score(output, hand)
    assert result.exe_dropped == 0.0
    assert result.legit_dropped == pytest.approx(1 / 3)
    assert result.probe_flagged == 0.0
    assert grouping_score([], hand).legit_dropped == 1.0
    assert grouping_score([], hand).exe_dropped == 1.0  # absent floods count as dropped


def test_grouping_headerless_releases_count_as_releases_only(hand: Truth) -> None:
    releases = (attrs.evolve(hand.releases[1], headerless=True), *hand.releases[2:])
    truth = attrs.evolve(hand, releases=(hand.releases[0], *releases))
    output = _hand_perfect(truth)
    output[1]["files"][0]["segments"][0][0] = 7  # no subject tells its k: not graded
    result = grouping_score(output, truth)
    assert result.segments_right == 1.0
    assert result.one_to_one == 1.0
