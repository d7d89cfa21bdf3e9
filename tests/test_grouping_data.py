"""The posting-tools profile: every pattern of issue 15 is there, as the tools write it, and the
truth matches the lines.

These tests check the data only; what an indexer makes of it is the benchmark's business
(scripts/bench-grouping), never asserted here.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Callable

import pytest

from usenet_indexer.errors import ConfigError
from usenet_indexer.synth.generator import (
    NEWSUP_FROM,
    POWERPOST_FROM,
    RECIPES,
    Generated,
    GeneratorConfig,
    generate,
)
from usenet_indexer.synth.truth import (
    MALFORMED_KINDS,
    UNATTRIBUTABLE,
    Truth,
    TruthFile,
    TruthRelease,
    grouping_score,
    perfect_releases,
)

CONFIG = GeneratorConfig(articles=100_000, seed=5, profile="posting-tools")
# sha256 of seed 1's first 20k lines (joined by "\n") and of their truth dump:
# the default profile must not move by accident. Taken when the posting-tools
# profile was added, and again when a poster stopped reposting an upload whose
# last repost was still being posted (session 8).
DEFAULT_LINES_SHA256 = "1df20da5e93bc8c578990b2873fa95aa8209ef4e6dacea7d4eca5ccac18f7fdc"
DEFAULT_TRUTH_SHA256 = "a9d59bd0cc6cb2d11a633066f4ef645b2fcc520bdf5386302cdc4d0217ef313e"
# Recipes whose articles the truth counts as junk: they leave no release.
JUNK_RECIPES = {"ngpost_obfuscate", "newsup_obfuscate"}
COUNTER = re.compile(r"\((\d+)/(\d+)\)")


@pytest.fixture(scope="module")
def run() -> Generated:
    return generate(CONFIG)


@pytest.fixture(scope="module")
def lines(run: Generated) -> dict[str, list[str]]:
    """Fields of every well-formed line, by message-id."""
    malformed = {junk.message_id for junk in run.truth.junk if junk.kind in MALFORMED_KINDS}
    result = {}
    for line in run.lines:
        raw = line.split(b"\t")
        mid = raw[4][1:-1].decode()
        if mid not in malformed:
            result[mid] = [field.decode("utf-8") for field in raw]
    return result


def releases_of(run: Generated, pattern: str) -> list[TruthRelease]:
    found = [release for release in run.truth.releases if release.pattern == pattern]
    assert found, f"no {pattern} release in the run"
    return found


def subjects(lines: dict[str, list[str]], file: TruthFile) -> list[str]:
    return [lines[mid][1] for _k, mid, _size, _article in file.segments]


def first_subject(lines: dict[str, list[str]], file: TruthFile) -> str:
    return subjects(lines, file)[0]


def span(release: TruthRelease) -> range:
    return range(release.first_article, release.last_article + 1)


def overlap(a: TruthRelease, b: TruthRelease) -> bool:
    return a.first_article <= b.last_article and b.first_article <= a.last_article


def any_release(run: Generated, pattern: str, test: Callable[[TruthRelease], bool]) -> TruthRelease:
    found = [release for release in releases_of(run, pattern) if test(release)]
    assert found, f"no {pattern} release passes the test"
    return found[0]


# --- the default profile and determinism ---------------------------------------


def test_the_default_profile_is_unchanged() -> None:
    default = generate(GeneratorConfig(articles=20_000, seed=1))
    assert hashlib.sha256(b"\n".join(default.lines)).hexdigest() == DEFAULT_LINES_SHA256
    dump = io.BytesIO()
    default.truth.dump(dump)
    assert hashlib.sha256(dump.getvalue()).hexdigest() == DEFAULT_TRUTH_SHA256


def test_a_seed_always_gives_the_same_run() -> None:
    config = GeneratorConfig(articles=5_000, seed=42, profile="posting-tools")
    first, second = generate(config), generate(config)
    assert first.lines == second.lines
    assert first.truth == second.truth
    assert generate(GeneratorConfig(articles=5_000, seed=43, profile="posting-tools")).lines != (
        first.lines
    )
    assert generate(GeneratorConfig(articles=5_000, seed=42)).lines != first.lines


def test_an_unknown_profile_is_refused() -> None:
    with pytest.raises(ConfigError, match="profile"):
        GeneratorConfig(articles=10, profile="nzbget")


def test_the_truth_round_trips_with_its_new_fields(run: Generated) -> None:
    dump = io.BytesIO()
    run.truth.dump(dump)
    assert Truth.load(io.BytesIO(dump.getvalue())) == run.truth
    assert any(release.headerless for release in run.truth.releases)


# --- the truth matches the lines ------------------------------------------------


def test_writes_the_articles_asked_for_each_one_segment_or_one_junk_article(
    run: Generated,
) -> None:
    assert len(run.lines) == CONFIG.articles == run.truth.lines
    ids = Counter(line.split(b"\t")[4][1:-1].decode() for line in run.lines)
    assert max(ids.values()) == 1
    segments, junk = run.truth.segment_index(), run.truth.junk_index()
    assert not segments.keys() & junk.keys()
    assert set(ids) == segments.keys() | junk.keys()
    assert sum(release.segment_count for release in run.truth.releases) + len(junk) == len(ids)


def test_truth_segments_match_their_lines(run: Generated, lines: dict[str, list[str]]) -> None:
    for release in run.truth.releases:
        for file in release.files:
            for k, mid, size, article in file.segments:
                number, subject, poster = lines[mid][:3]
                assert int(number) == article
                assert int(lines[mid][6]) == size
                assert poster == release.poster
                if release.headerless:
                    continue
                assert f'"{file.name}"' in subject
                assert COUNTER.findall(subject)[-1] == (
                    str(k).zfill(len(COUNTER.findall(subject)[-1][0])),
                    str(file.total_segments),
                )


def test_a_perfect_index_of_it_scores_perfectly(run: Generated) -> None:
    result = grouping_score(perfect_releases(run.truth), run.truth)
    assert result.one_to_one == result.segments_right == result.files_right_release == 1.0
    assert result.split == result.wrongly_merged == result.legit_dropped == 0.0
    assert result.probe_flagged == result.exe_dropped == 1.0
    assert result.target_releases > 100


# --- every pattern --------------------------------------------------------------


def test_every_recipe_shows_up(run: Generated) -> None:
    patterns = {release.pattern for release in run.truth.releases}
    assert patterns == set(RECIPES) - JUNK_RECIPES
    assert {release.kind for release in run.truth.releases} == {
        "legit",
        "obfuscated",
        "exe_flood",
        "repost",
        "wrapped_flood",
    }
    tools = {release.tool for release in run.truth.releases}
    assert {"nyuu", "nyuu-F", "ngpost", "newsup", "powerpost", "jbinup", "newsmangler"} <= tools
    assert {"gopoststuff", "teevee", "exe"} <= tools


def test_scene_volumes_and_extras_are_named_differently_in_one_counter(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    def differently_named(release: TruthRelease) -> bool:
        names = [file.name for file in release.files]
        return (
            release.tool == "nyuu"
            and not release.truncated
            and any(n.startswith(release.name) and n.endswith(".nfo") for n in names)
            and any(n.startswith(release.name) and n.endswith(".par2") for n in names)
            and any(n == n.lower() and re.search(r"\.(r\d\d|rar)$", n) for n in names)
        )

    release = any_release(run, "scene", differently_named)
    counters = {re.search(r"\[(\d+)/(\d+)\]", first_subject(lines, f)) for f in release.files}
    totals = {match[2] for match in counters if match}
    assert totals == {str(len(release.files))}
    group = release.name.rsplit("-", 1)[1].lower()
    assert any(file.name.startswith(f"{group}-") for file in release.files)
    assert len({lines[s[1]][2] for f in release.files for s in f.segments}) == 1


def test_nyuu_group_files_gives_each_collection_its_own_counter(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    def totals(release: TruthRelease) -> set[str]:
        return {
            match[1]
            for file in release.files
            if (match := re.search(r"\[\d+/(\d+)\]", first_subject(lines, file)))
        }

    grouped = [r for r in releases_of(run, "scene") if r.tool == "nyuu-F" and not r.truncated]
    assert any(len(totals(release)) >= 2 for release in grouped)
    assert all(release.files_announced is None for release in grouped)


def test_sample_sets_carry_their_own_par2_in_the_counter(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    def with_sample(release: TruthRelease) -> bool:
        names = [file.name for file in release.files]
        return any(n.startswith("sample-") and n.endswith(".mkv") for n in names) and any(
            n.startswith("sample-") and n.endswith(".par2") for n in names
        )

    release = any_release(run, "scene", lambda r: with_sample(r) and r.tool != "nyuu-F")
    sample_par2 = next(
        f for f in release.files if f.name.startswith("sample-") and ".par2" in f.name
    )
    match = re.search(r"\[(\d+)/(\d+)\]", first_subject(lines, sample_par2))
    assert match is not None
    assert int(match[2]) == release.files_announced


def test_an_nfo_announced_as_file_zero(run: Generated, lines: dict[str, list[str]]) -> None:
    release = any_release(run, "scene", lambda r: any(f.index == 0 for f in r.files))
    nfo = next(file for file in release.files if file.index == 0)
    assert nfo.name.endswith(".nfo")
    assert f"-[00/{release.files_announced}] - " in first_subject(lines, nfo)
    assert release.files_announced == len(release.files) - 1 or release.truncated


def test_modern_obfuscated_uploads_hide_the_video_and_name_the_par2(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    posters = Counter(release.poster for release in run.truth.releases)
    release = any_release(run, "nyuu_obfuscated", lambda r: not r.truncated)
    video, *par2 = release.files
    assert re.fullmatch(r"[A-Za-z0-9]{32}\.mkv", video.name)
    assert all(f.name.startswith(release.real_name) and f.name.endswith(".par2") for f in par2)
    assert any(re.search(r"\.vol\d+-\d+\.par2$", f.name) for f in par2)
    assert re.fullmatch(
        rf'\[1/{len(release.files)}\] - "{video.name}" yEnc  \d+ \(\d+/\d+\)',
        first_subject(lines, video),
    )
    assert release.obfuscated
    assert release.probe_candidate
    assert posters[release.poster] == 1


def test_newsup_renames_files_beside_its_rename_par2(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    release = any_release(run, "newsup_rename", lambda r: not r.truncated)
    names = [file.name for file in release.files]
    assert "rename.with.this.par2" in names
    renamed = [n for n in names if "." not in n]
    assert renamed
    assert all(re.fullmatch(r"[A-Za-z0-9]{12}", n) for n in renamed)
    assert re.fullmatch(
        r'\[\d+/\d+\] - "[^"]+" \(\d+/\d+\)', first_subject(lines, release.files[0])
    )
    assert release.probe_candidate
    assert any(r.poster == NEWSUP_FROM for r in run.truth.releases)


def test_hash_named_uploads_have_no_file_counter(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    release = releases_of(run, "hash_named")[0]
    assert len(release.files) >= 15
    for file in release.files:
        assert re.fullmatch(
            r'"[0-9a-f]{40}\.(\d\d|par2|vol\d+-\d+\.par2)" yEnc \(\d+/\d+\)',
            first_subject(lines, file),
        )
    assert release.files_announced is None
    assert release.probe_candidate


def test_powerpost_defaults_are_shared_by_unrelated_uploads(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    uploads = releases_of(run, "powerpost_default")
    assert all(release.poster == POWERPOST_FROM for release in uploads)
    same = [
        (a, b)
        for a, b in itertools.combinations(uploads, 2)
        if a.files_announced == b.files_announced and a.name != b.name and overlap(a, b)
    ]
    assert same
    subject = first_subject(lines, same[0][0].files[-1])
    assert re.fullmatch(r'\(\?\?\?\?\) \[\d+/\d+\] - "[^"]+" yEnc \(\d+/\d+\)', subject)
    # With "FileThread" on, PowerPost makes its own ids and threads every part to part 1;
    # off (its default), the server gives the ids and there are no References.
    threaded = [r for r in uploads if "@powerpost2000AA.local" in r.files[0].segments[0][1]]
    assert threaded
    assert len(threaded) < len(uploads)
    file = threaded[0].files[-1]
    n = file.total_segments
    ids = [(lines[mid][4], lines[mid][5]) for _k, mid, _s, _a in file.segments]
    pattern = rf"<part\d+of{n}\.[0-9A-Za-z$&]{{20}}\d?@powerpost2000AA\.local>"
    assert all(re.fullmatch(pattern, mid) for mid, _ in ids)
    assert all(
        refs == "" if mid.startswith("<part1of") else refs.startswith("<part1of")
        for mid, refs in ids
    )


def test_flood_waves_post_one_film_name_from_several_bots_at_once(run: Generated) -> None:
    waves: defaultdict[str, list[TruthRelease]] = defaultdict(list)
    for release in releases_of(run, "flood_wave"):
        waves[release.name].append(release)
    wave = next(members for members in waves.values() if len(members) >= 3)
    assert len({release.poster for release in wave}) == len(wave)
    # At once: the bots' uploads start within a few hundred articles of each other.
    starts = [release.first_article for release in wave]
    assert max(starts) - min(starts) < 1_000
    wrapped = [r for r in run.truth.releases if r.kind == "wrapped_flood"]
    assert wrapped
    assert all(file.name.endswith(".rar") for release in wrapped for file in release.files)
    assert any(len(waves[release.name]) >= 2 for release in wrapped)


def test_one_name_uploaded_twice_by_different_posters(run: Generated) -> None:
    pairs: defaultdict[str, list[TruthRelease]] = defaultdict(list)
    for release in releases_of(run, "same_name"):
        pairs[release.name].append(release)
    a, b = next(pair for pair in pairs.values() if len(pair) == 2)
    assert a.poster != b.poster
    assert {f.name for f in a.files} & {f.name for f in b.files}
    assert a.kind == b.kind == "legit"


def test_reposts_are_later_uploads_with_new_message_ids(run: Generated) -> None:
    by_id = {release.id: release for release in run.truth.releases}
    reposts = releases_of(run, "repost")
    for repost in reposts:
        assert repost.kind == "repost"
        assert repost.repost_of is not None
        original = by_id[repost.repost_of]
        assert (original.name, original.poster) == (repost.name, repost.poster)
        assert repost.first_article > original.last_article
        ids = {s[1] for f in original.files for s in f.segments}
        assert not ids & {s[1] for f in repost.files for s in f.segments}
        assert {f.name for f in repost.files} <= {f.name for f in original.files} | {
            f.name for f in repost.files
        }
    # After a takedown the repost is often the only complete copy.
    assert any(
        by_id[r.repost_of].complete < 0.9 <= r.complete for r in reposts if r.repost_of is not None
    )


def test_a_post_check_resends_a_segment_a_few_articles_later(run: Generated) -> None:
    retried: list[tuple[TruthRelease, list[tuple[int, str]]]] = []
    for release in run.truth.releases:
        for file in release.files:
            by_k: defaultdict[int, list[tuple[int, str]]] = defaultdict(list)
            for k, mid, _size, article in file.segments:
                by_k[k].append((article, mid))
            retried.extend((release, copies) for copies in by_k.values() if len(copies) == 2)
    assert len(retried) >= 10
    release, ((first, mid1), (second, mid2)) = retried[0]
    assert mid1 != mid2
    assert 0 < second - first < 3_000
    assert second in span(release)


def test_uploads_with_a_random_subject_per_article_keep_one_poster(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    release = any_release(run, "random_subjects", lambda r: r.segment_count >= 20)
    assert release.headerless
    assert release.probe_candidate
    seen = [lines[s[1]][1] for f in release.files for s in f.segments]
    assert len(set(seen)) == len(seen)
    assert not any("yEnc" in subject or COUNTER.search(subject) for subject in seen)
    assert {lines[s[1]][2] for f in release.files for s in f.segments} == {release.poster}


def test_obfuscated_articles_are_unattributable_junk(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    junk = [j for j in run.truth.junk if j.kind == UNATTRIBUTABLE]
    assert len(junk) >= 100
    fields = [lines[j.message_id] for j in junk]
    ngpost = [f for f in fields if f[4].endswith("@ngPost>")]
    # ngPost --obfuscate: the subject is the message-id's UUID, the From new every time.
    assert ngpost
    assert all(f[1] == f[4][1:-1].split("@")[0] for f in ngpost)
    assert len({f[2] for f in ngpost}) == len(ngpost)
    # NewsUP --obfuscate: 1 to 32 random lower-case letters.
    newsup = [f for f in fields if not f[4].endswith("@ngPost>")]
    assert newsup
    assert all(re.fullmatch(r"[a-z]{1,32}", f[1]) for f in newsup)


def test_albums_are_posted_track_by_track_with_powerposts_defaults(
    run: Generated, lines: dict[str, list[str]]
) -> None:
    albums = releases_of(run, "powerpost_album")
    assert Counter(release.poster for release in albums).most_common(1)[0][0] == POWERPOST_FROM
    templates = set()
    # Those posted whole in the run (some were under way when it began, or lost files).
    whole = [release for release in albums if len(release.files) == release.files_announced]
    assert len(whole) > len(albums) / 2
    for release in albums:
        names = [file.name for file in release.files]
        tracks = [n for n in names if n.endswith((".flac", ".mp3"))]
        # One file per track, each named after its track; the album's extras beside them.
        assert all(re.fullmatch(r"\d\d-[^-]+-[^-]+\.(flac|mp3)", n) for n in tracks)
        if release in whole:
            assert len(tracks) >= 8
            assert {n.rsplit(".", 1)[1] for n in names} >= {"m3u", "jpg", "nfo"}
        for file in release.files:
            subject = first_subject(lines, file)
            found = re.fullmatch(
                r'(\(\?\?\?\?\) )?\[(\d+)/(\d+)\] - "([^"]+)" yEnc \((\d+)/(\d+)\)', subject
            )
            assert found is not None, subject
            templates.add(found.group(1))
            assert found.group(4) == file.name
            assert int(found.group(3)) == release.files_announced
            assert len(found.group(2)) == len(found.group(3))  # $1 padded to the digits of $2
            assert len(found.group(5)) == len(found.group(6))  # (kk/NN)
    assert templates == {"(????) ", None}
    # Two albums of one uploader at once, and albums beside other default uploads of their M.
    at_once = [
        (a, b)
        for a, b in itertools.combinations(albums, 2)
        if a.poster == b.poster and a.files_announced == b.files_announced and overlap(a, b)
    ]
    assert at_once
    others = releases_of(run, "powerpost_default")
    assert any(
        a.files_announced == b.files_announced and overlap(a, b) for a in albums for b in others
    )
