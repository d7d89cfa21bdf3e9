"""The synthetic overview generator: well-formed lines, a truth that matches them, realism."""

from __future__ import annotations

import gzip
import io
import itertools
import re
from collections import Counter
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
from isal import igzip

from usenet_indexer import cli
from usenet_indexer.commands.generate import default_truth_path
from usenet_indexer.errors import ConfigError, InputError
from usenet_indexer.synth import generator
from usenet_indexer.synth.generator import Generated, GeneratorConfig, generate
from usenet_indexer.synth.truth import MALFORMED_KINDS, Truth, TruthRelease

CONFIG = GeneratorConfig(articles=30_000, seed=7)
_SEGMENT_COUNTER = re.compile(r"\((\d+)/(\d+)\)")


@pytest.fixture(scope="module")
def run() -> Generated:
    return generate(CONFIG)


def _message_id(line: bytes) -> str:
    # Field 5 on every line, even the malformed ones (which keep at least 5 fields).
    field = line.split(b"\t")[4]
    assert field.startswith(b"<"), line
    assert field.endswith(b">"), line
    return field[1:-1].decode()


def _fields(lines: tuple[bytes, ...], truth_: Truth) -> Iterator[tuple[str, list[bytes]]]:
    """(message-id, fields) of every line that is not deliberately malformed."""
    malformed = {junk.message_id for junk in truth_.junk if junk.kind in MALFORMED_KINDS}
    for line in lines:
        mid = _message_id(line)
        if mid not in malformed:
            yield mid, line.split(b"\t")


def _release_articles(release: TruthRelease) -> set[int]:
    return {segment[3] for file in release.files for segment in file.segments}


def test_a_seed_always_gives_the_same_run() -> None:
    config = GeneratorConfig(articles=3_000, seed=99)
    first, second = generate(config), generate(config)
    assert first.lines == second.lines
    assert first.truth == second.truth
    other = generate(GeneratorConfig(articles=3_000, seed=100))
    assert other.lines != first.lines


def test_writes_exactly_the_articles_asked_for(run: Generated) -> None:
    assert len(run.lines) == CONFIG.articles == run.truth.lines
    assert generate(GeneratorConfig(articles=0)).lines == ()


def test_article_numbers_ascend_beyond_32_bits_with_small_gaps(run: Generated) -> None:
    numbers = [int(fields[0]) for _mid, fields in _fields(run.lines, run.truth)]
    assert numbers[0] == CONFIG.first_article > 2**32
    steps = Counter(b - a for a, b in itertools.pairwise(numbers))
    assert min(steps) >= 1
    gaps = sum(count for step, count in steps.items() if step > 1)
    # gap_probability 0.002 (plus malformed lines left out of `numbers`).
    assert 10 <= gaps <= 400
    assert run.truth.last_article >= max(numbers)


def test_lines_have_the_overview_fields_except_the_malformed_ones(run: Generated) -> None:
    for _mid, fields in _fields(run.lines, run.truth):
        assert len(fields) == 9, fields
        number, subject, poster, date, mid, _references, size, body_lines, xref = fields
        assert number.isdigit()
        assert size.isdigit()
        assert body_lines.isdigit()
        assert mid.startswith(b"<")
        assert xref.startswith(b"Xref: news.example.com ")
        assert subject
        assert poster
        assert date
        subject.decode()  # well-formed lines are UTF-8
        assert b"\x00" not in subject


def test_malformed_lines_are_malformed_as_the_truth_says(run: Generated) -> None:
    kinds = {junk.message_id: junk.kind for junk in run.truth.junk if junk.kind in MALFORMED_KINDS}
    assert set(kinds.values()) == set(MALFORMED_KINDS)
    for line in run.lines:
        kind = kinds.get(_message_id(line))
        if kind is None:
            continue
        fields = line.split(b"\t")
        if kind == "too_few_fields":
            assert len(fields) < 8
        elif kind == "bad_number":
            assert not fields[0].isdigit()
        elif kind == "bad_bytes":
            assert not fields[6].isdigit()
        elif kind == "nul_subject":
            assert b"\x00" in fields[1]
        else:
            with pytest.raises(UnicodeDecodeError):
                fields[1].decode()


def test_every_article_is_one_truth_segment_or_one_junk_article(run: Generated) -> None:
    in_lines = Counter(_message_id(line) for line in run.lines)
    assert max(in_lines.values()) == 1
    segments = run.truth.segment_index()
    junk = run.truth.junk_index()
    assert not segments.keys() & junk.keys()
    assert set(in_lines) == segments.keys() | junk.keys()
    assert sum(release.segment_count for release in run.truth.releases) == len(segments)


def test_truth_segments_match_their_lines(run: Generated) -> None:
    by_mid = dict(_fields(run.lines, run.truth))
    for release in run.truth.releases[:200]:
        for file in release.files:
            for k, mid, size, article in file.segments:
                fields = by_mid[mid]
                assert int(fields[0]) == article
                assert int(fields[6]) == size
                subject = fields[1].decode()
                assert f'"{file.name}"' in subject
                counter = _SEGMENT_COUNTER.findall(subject)[-1]
                assert (int(counter[0]), int(counter[1])) == (k, file.total_segments)


def test_crossposts_list_every_group_in_xref(run: Generated) -> None:
    crossposted = [release for release in run.truth.releases if len(release.groups) > 1]
    assert crossposted
    by_mid = dict(_fields(run.lines, run.truth))
    for release in crossposted:
        for _k, mid, _size, article in release.files[0].segments:
            entries = by_mid[mid][8].decode().split()[2:]
            groups = dict(entry.rsplit(":", 1) for entry in entries)
            assert set(groups) == set(release.groups)
            assert groups[CONFIG.group] == str(article)


def test_dates_rise_slowly_from_the_start_time(run: Generated) -> None:
    dates = [
        parsedate_to_datetime(fields[3].decode()).timestamp()
        for _mid, fields in _fields(run.lines, run.truth)
    ]
    assert dates[0] == CONFIG.start_time
    assert all(a <= b for a, b in itertools.pairwise(dates))
    # 0.02 s per article, plus the numbers skipped by gaps.
    assert CONFIG.articles * 0.02 <= dates[-1] - dates[0] <= CONFIG.articles * 0.03


def test_release_mix_looks_like_a_binary_group(run: Generated) -> None:
    kinds = Counter(release.kind for release in run.truth.releases)
    segments: Counter[str] = Counter()
    for release in run.truth.releases:
        segments[release.kind] += release.segment_count
    releases, articles = sum(kinds.values()), sum(segments.values())
    # Floods: most releases by count (~93%), ~20% of the release articles.
    assert 0.88 <= kinds["exe_flood"] / releases <= 0.97
    assert 0.10 <= segments["exe_flood"] / articles <= 0.35
    assert 0.03 <= kinds["obfuscated"] / kinds["legit"] <= 0.25
    assert kinds["repost"] >= 1
    junk = len(run.truth.junk) / CONFIG.articles
    assert 0.006 <= junk <= 0.016


def test_every_posting_tool_shows_up(run: Generated) -> None:
    tools = {release.tool for release in run.truth.releases}
    assert tools == {"nyuu", "ngpost", "powerpost", "teevee", "gopoststuff", "plain", "exe"}
    subjects = [file.subject for release in run.truth.releases for file in release.files]
    assert any(
        re.search(r'^\[\d+/\d+\] - ".+" yEnc \(1/\d+\) \d+$', subject) for subject in subjects
    )
    assert any(re.search(r"yEnc  \d+ \(1/\d+\)$", subject) for subject in subjects)
    assert any(
        re.search(
            r"\[#a\.b\.[a-z.-]+@EFNet\]-\[ .+ \]-\[\d\d/\d\d\] - .+ yEnc \(0*1/\d+\)", subject
        )
        for subject in subjects
    )
    assert any(
        re.search(r'^\w+ post .+ \[FTD#\d+\]\.\[\d\d/\d\d\] - ".+" yEnc', subject)
        for subject in subjects
    )
    assert any(re.match(r'^".+" yEnc \(1/\d+\)$', subject) for subject in subjects)
    assert any(re.search(r'\[0+/\d+\] - ".+\.nzb"', subject) for subject in subjects)


def test_executable_floods_are_small_bare_executables(run: Generated) -> None:
    floods = [release for release in run.truth.releases if release.kind == "exe_flood"]
    assert floods
    for release in floods:
        assert 1 <= len(release.files) <= 2
        for file in release.files:
            assert file.name.endswith((".exe", ".scr", ".com", ".bat", ".msi"))
            assert 1 <= file.total_segments <= 5
        assert not release.probe_candidate


def test_obfuscated_releases_have_random_names_and_are_probe_candidates(run: Generated) -> None:
    obfuscated = [release for release in run.truth.releases if release.kind == "obfuscated"]
    assert obfuscated
    for release in obfuscated:
        assert release.obfuscated
        assert release.real_name != release.name
        assert release.probe_candidate == any(
            file.name.endswith((".par2", ".nfo")) for file in release.files
        )
    # Always with a par2 set; only a run that cuts the upload short can leave it out.
    assert all(release.probe_candidate for release in obfuscated if not release.truncated)
    assert sum(not release.truncated for release in obfuscated) >= 5
    legit = [release for release in run.truth.releases if release.kind == "legit"]
    assert not any(release.probe_candidate or release.obfuscated for release in legit)


def test_reposts_repeat_their_original_with_new_message_ids(run: Generated) -> None:
    by_id = {release.id: release for release in run.truth.releases}
    reposts = [release for release in run.truth.releases if release.kind == "repost"]
    assert reposts
    for repost in reposts:
        assert repost.repost_of is not None
        original = by_id[repost.repost_of]
        assert (original.name, original.poster, original.groups) == (
            repost.name,
            repost.poster,
            repost.groups,
        )
        assert repost.first_article > original.last_article
        assert repost.files[0].subject == next(
            f.subject for f in original.files if f.index == repost.files[0].index
        )


def test_some_releases_miss_segments_and_some_repeat_one(run: Generated) -> None:
    incomplete = duplicated = 0
    for release in run.truth.releases:
        if release.truncated or release.kind not in ("legit", "obfuscated"):
            continue
        for file in release.files:
            ks = [segment[0] for segment in file.segments]
            incomplete += len(set(ks)) < file.total_segments
            duplicated += len(ks) > len(set(ks))
    assert incomplete >= 1
    assert duplicated >= 1
    assert any(release.complete < 1 for release in run.truth.releases if not release.truncated)


def test_uploads_interleave_and_some_are_cut_by_the_run(run: Generated) -> None:
    releases, first, last = run.truth.releases, run.truth.first_article, run.truth.last_article
    # Under way when the run starts: their first files or segments went out before it.
    started = [r for r in releases if r.truncated and r.first_article - first < 100]
    assert any(r.files[0].index > 1 or r.files[0].segments[0][0] > 1 for r in started)
    # Still going when it ends.
    assert any(r.truncated and last - r.last_article < 100 for r in releases)
    # A big upload's articles are spread among other uploads' articles.
    big = max(releases, key=lambda release: release.segment_count)
    span = big.last_article - big.first_article + 1
    assert span > 2 * big.segment_count


def test_big_runs_have_releases_that_span_many_batches() -> None:
    # articles >= spanning_min_articles (1M by default); a small knob keeps this test quick.
    config = GeneratorConfig(
        articles=20_000, seed=3, spanning_min_articles=10_000, spanning_fraction=0.02
    )
    run = generate(config)
    batch = 2_000  # stands for the 500k-article batch of a 1M run
    spanning = [
        release
        for release in run.truth.releases
        if len(
            {(article - config.first_article) // batch for article in _release_articles(release)}
        )
        >= 8
    ]
    assert len(spanning) >= 2
    assert (
        sum(release.kind == "legit" and release.segment_count >= 300 for release in spanning) >= 2
    )


def test_a_run_longer_than_a_spanning_upload_has_them_in_waves_of_one_size() -> None:
    # spanning_max_articles stands for the 10M of a real run: a 4x longer run has
    # four waves of spanning uploads, each as big and as many as a 1x run has, not
    # 4x as many uploads each 4x as big (40% of the run's articles).
    stretch, count, target = 10_000, 5, 200  # min 2k articles each; 2% of a stretch
    config = GeneratorConfig(
        articles=4 * stretch,
        seed=3,
        spanning_min_articles=stretch // count,
        spanning_fraction=target / stretch,
        spanning_max_articles=stretch,
    )
    run = generate(config)
    waves: dict[int, int] = {}
    for release in run.truth.releases:
        articles = sorted(_release_articles(release))
        if (
            not articles
            or release.tool != "nyuu"
            or not 0.8 * target <= len(articles) <= 1.15 * target
        ):
            continue
        start, end = articles[0] - config.first_article, articles[-1] - config.first_article
        wave, into = divmod(start, stretch)
        if into <= 0.15 * stretch and 0.8 * stretch <= end - start <= 1.1 * stretch:
            waves[wave] = waves.get(wave, 0) + 1
    assert waves == {0: count, 1: count, 2: count, 3: count}
    # Spanning uploads of at most 10% of the run's articles, as in a run of one stretch.
    assert sum(waves.values()) * target <= 0.1 * config.articles


def test_truth_survives_a_round_trip_through_gzip(run: Generated) -> None:
    buffer = io.BytesIO()
    with igzip.IGzipFile(fileobj=buffer, mode="wb") as stream:  # type: ignore[no-untyped-call]
        run.truth.dump(stream)
    with gzip.open(io.BytesIO(buffer.getvalue())) as stream:
        assert Truth.load(stream) == run.truth


@pytest.mark.parametrize(
    "data",
    [b"", b"not json\n", b'{"type": "truth", "format": 99}\n', b'{"type": "truth", "format": 1}\n'],
)
def test_truth_load_refuses_what_it_did_not_write(data: bytes) -> None:
    with pytest.raises(InputError):
        Truth.load(io.BytesIO(data))


def test_truth_load_refuses_unknown_records() -> None:
    buffer = io.BytesIO()
    generate(GeneratorConfig(articles=50)).truth.dump(buffer)
    with pytest.raises(InputError, match="unknown truth record"):
        Truth.load(io.BytesIO(buffer.getvalue() + b'{"type": "weird"}\n'))


@pytest.mark.parametrize(
    ("field", "value"),
    [("articles", -1), ("junk_fraction", 1.5), ("concurrent_uploads", 0), ("legit_weight", -0.1)],
)
def test_config_refuses_bad_values(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        GeneratorConfig(**{"articles": 10, field: value})  # type: ignore[arg-type]


def test_config_refuses_all_zero_weights() -> None:
    with pytest.raises(ConfigError):
        GeneratorConfig(
            articles=10, legit_weight=0, obfuscated_weight=0, exe_flood_weight=0, repost_weight=0
        )


def test_truth_is_only_known_after_the_last_line() -> None:
    lines = generator.OverviewGenerator(GeneratorConfig(articles=10))
    with pytest.raises(RuntimeError):
        lines.truth()


def test_generate_command_writes_lines_and_truth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "overview.gz"
    code = cli.main(
        [
            "generate",
            "--articles",
            "2000",
            "--out",
            str(out),
            "--seed",
            "5",
            "--first-article",
            "1000",
        ]
    )
    assert code == 0
    expected = generate(GeneratorConfig(articles=2_000, seed=5, first_article=1_000))
    with gzip.open(out) as stream:
        assert stream.read() == b"".join(line + b"\n" for line in expected.lines)
    truth_path = default_truth_path(out)
    assert truth_path == tmp_path / "overview.truth.jsonl.gz"
    with gzip.open(truth_path) as stream:
        assert Truth.load(stream) == expected.truth
    assert "2000 lines" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "overview.gz",
        "overview.truth.jsonl.gz",
    ]


def test_generate_command_writes_plain_files_too(tmp_path: Path) -> None:
    out, truth_path = tmp_path / "overview.txt", tmp_path / "truth.jsonl"
    assert (
        cli.main(["generate", "--articles", "300", "--out", str(out), "--truth", str(truth_path)])
        == 0
    )
    assert len(out.read_bytes().splitlines()) == 300
    with truth_path.open("rb") as stream:
        assert Truth.load(stream).lines == 300


def test_generate_command_reports_an_unwritable_output(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "overview.gz"
    assert cli.main(["generate", "--articles", "10", "--out", str(out)]) == 1  # cannot write it


def test_generate_command_takes_a_profile(tmp_path: Path) -> None:
    out = tmp_path / "tools.gz"
    assert (
        cli.main(
            ["generate", "--articles", "3000", "--profile", "posting-tools", "--out", str(out)]
        )
        == 0
    )
    expected = generate(GeneratorConfig(articles=3_000, profile="posting-tools"))
    with gzip.open(out) as stream:
        assert stream.read() == b"".join(line + b"\n" for line in expected.lines)
    with gzip.open(default_truth_path(out)) as stream:
        assert Truth.load(stream) == expected.truth


def test_generate_to_standard_output_keeps_the_stream_clean(
    tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    """`uidx generate --out - --truth T | ...`: only lines on stdout, the summary on stderr."""
    truth_path = tmp_path / "truth.jsonl"
    assert (
        cli.main(["generate", "--articles", "300", "--out", "-", "--truth", str(truth_path)]) == 0
    )
    captured = capfdbinary.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 300
    assert all(line.split(b"\t")[0].isdigit() for line in lines)
    assert b"300 lines" in captured.err
    with truth_path.open("rb") as stream:
        assert Truth.load(stream).lines == 300


def test_generate_to_standard_output_needs_a_truth_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["generate", "--articles", "10", "--out", "-"]) == 78
    assert cli.main(["generate", "--articles", "10", "--out", "-", "--truth", "-"]) == 78
    argv = ["generate", "--articles", "10", "--out", "x", "--first-article", str(2**63 - 5)]
    assert cli.main(argv) == 78
    captured = capfd.readouterr()
    assert captured.out == ""
    said = captured.err.splitlines()
    assert (
        said[0] == "uidx generate: --truth: give it with --out - (the lines go to standard output)"
    )
    assert said[2].startswith("uidx generate: --first-article: the last article would be")
    assert list(tmp_path.iterdir()) == []
