"""The scorer: a perfect index scores perfectly, and every kind of damage moves its figure."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from usenet_indexer.errors import InputError
from usenet_indexer.synth.generator import GeneratorConfig, generate
from usenet_indexer.synth.truth import (
    INDEXABLE_JUNK,
    Score,
    Truth,
    TruthRelease,
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
