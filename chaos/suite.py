"""scripts/chaos: faults injected into real uidx processes; nothing lost, doubled or let in.

Theory of operation
-------------------
Everything runs for real: a private PostgreSQL cluster (`testing.postgres`),
`uidx coordinator` and `uidx edge` processes, the spool filled by `uidx
spool import` from `uidx generate` data (see chaos_setup). One invocation
has three parts:

1. The chaos run. 16 nodes lease at once while the edges start (the lease
   burst: one holder per range, checked in SQL; the long run also starts
   16 edge processes at once and then stops all but 8); the edges talk
   through a proxy (chaos_proxy) that loses the reply of some batch posts
   (every n-th, whichever edge sent it) after the coordinator committed
   them. The spool is fed part by part (one range each) while faults are
   injected one after another at random moments: edges killed (SIGKILL)
   and started again with the same token (at random moments, and at two
   named points of a batch post, by the proxy: held before it reaches the
   coordinator, and after the commit before the answer reaches the edge;
   the named kills import a part kept from the feed, so that a batch post
   comes at once), an edge frozen (SIGSTOP) past its lease until
   another node holds its range and then let go (SIGCONT), the coordinator
   (`--processes 2`: the supervisor and its workers) killed and started
   again, one coordinator process killed while a catalog build runs or keys
   are pending (the supervisor starts another), PostgreSQL stopped (`pg_ctl
   stop -m immediate`) and started, and rounds of bad input (chaos_abuse).
   The last part of the spool waits until the faults are done, so there is
   always work in flight to hit. Then every range must be done, and the
   catalog the builders followed (what is left pending built first) must be
   the one a whole rebuild makes.
2. The negative control: the same kind of run with the fence off (`uidx
   coordinator --unsafe-no-fence`) and the primary keys of batches,
   fragments and rule_counts dropped (they alone refuse an exact replay,
   as a 500), one edge behind the reply-losing proxy: the checker must find
   doubled segments. The long run repeats it with the fence on (and the
   keys still dropped): nothing may be doubled, the compare-and-set alone
   answers every retry "already stored".
3. The cost of fencing (chaos_fence): the same batches stored through
   BatchStore with and without the fence.

Alongside the chaos run, once its edges run, on a cluster of their own
(chaos_side):

4. The prefetch part (chaos_prefetch): `uidx prefetch` fills a spool from
   a private INN2 through an NNTP fault proxy (chaos_nntp: 502 on connect,
   480 to a first GROUP, an OVER reply cut or stalled), killed with SIGKILL
   mid-chunk and after chunks landed, started again each time; the spool
   must cover every planned range once, with INN2's own lines.
5. The clock run (chaos_clock): an edge on a clock running at a fifth of
   the real speed holds a range past its lease and is fenced (409, nothing
   stored); an edge two hours ahead takes the range over and indexes it.
6. Several machines (chaos_several): a private INN2, an S3 spool on a
   private SeaweedFS, `uidx coordinator --processes 2`, two prefetchers with
   two connections each, two edges; one prefetcher killed (SIGKILL) while
   the other runs beside it, the object store killed while chunks are
   uploaded and started again, one coordinator process killed while the
   other serves: every segment stored once, no ERROR line or 5xx answer in
   the coordinator's log.

The conclusions are drawn by chaos_check's pure functions. Progress goes to
stderr; the figures last, on stdout, as one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from chaos import check as checks
from chaos.clock import CLOCK_KINDS, libfaketime
from chaos.fence import FenceCost, fence_cost
from chaos.prefetch import PREFETCH_KINDS
from chaos.prepare import (
    Part,
    create_database,
    expected_message_ids,
    generate,
    prepare_database,
    split,
    spool_import_args,
    truth_message_ids,
    uidx,
)
from chaos.procs import log
from chaos.proxy import ReplyDropper
from chaos.run import (
    NAMED_KILLS,
    ChaosConfig,
    Interrupted,
    Outcome,
    Run,
    check_config,
    conclude,
    control_run,
    interrupt,
    long_config,
    short_config,
)
from chaos.several import SEVERAL_KINDS
from chaos.several import failures as several_failures
from chaos.several import figures as several_figures
from chaos.side import SideRuns, alongside
from usenet_indexer.store.pgcluster import Cluster
from usenet_indexer.testing.postgres import private_cluster
from usenet_indexer.testing.processes import child_env

KINDS = (
    "edge_kill9",
    *NAMED_KILLS.values(),
    "edge_sigstop",
    "reply_lost",
    "coordinator_kill9",
    "build_kill9",
    "edge_build_kill9",
    "postgres_restart",
    "lease_burst",
    "bad_input",
    "abuse",
    *PREFETCH_KINDS,
    *CLOCK_KINDS,
    *SEVERAL_KINDS,
)
# The side runs' kinds: left out (not failed) when INN2 or libfaketime cannot run here.
SIDE_KINDS = {"prefetch": PREFETCH_KINDS, "clock": CLOCK_KINDS, "several": SEVERAL_KINDS}
LEFT_OUT = (
    "8: the edges of the chaos run read a spool made by `uidx spool import`, not by the"
    " prefetcher: that the resume point never passes a missing chunk is checked on the"
    " prefetcher's spool (every range covered once, no hole), not through edges",
)


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@attrs.frozen
class Data:
    """The generated lines cut into parts, and what the catalog must hold."""

    parts: tuple[Part, ...]
    expected: frozenset[str]
    truth: frozenset[str]
    control_parts: tuple[Part, ...]
    control_expected: frozenset[str]

    @classmethod
    def make(cls, config: ChaosConfig, folder: Path) -> Data:
        folder.mkdir()
        log(f"generating {config.articles:,} articles (seed {config.seed})")
        parts = tuple(split(generate(folder, config.articles, config.seed), folder, config.ranges))
        expected = frozenset(expected_message_ids(parts, config.chunk_articles))
        truth = frozenset(truth_message_ids(folder / "truth.jsonl.gz"))
        control = parts[: config.control_ranges]
        log(
            f"{len(parts)} ranges; {len(expected):,} segments expected "
            f"({len(expected & truth):,} of the truth's {len(truth):,} not dropped by rule)"
        )
        return cls(
            parts,
            expected,
            truth,
            control,
            frozenset(expected_message_ids(control, config.chunk_articles)),
        )


def invoke(config: ChaosConfig, folder: Path) -> dict[str, Any]:
    """Prepare, run the three parts, and return the figures (the JSON of the last line)."""
    began = time.perf_counter()
    rng = random.Random(config.seed)
    data = Data.make(config, folder / "data")
    library = libfaketime()
    side = SideRuns(config, folder, data.parts[-1], data.truth, library)
    # Durable: PostgreSQL is stopped with `-m immediate` mid-run, and the
    # throwaway settings (synchronous_commit = off) would lose commits it had
    # acknowledged (seen here: a spool import's rows gone after the restart,
    # and a range waiting for them forever). In /dev/shm its fsyncs cost little.
    with private_cluster(durable=True) as cluster:
        main, outcome, finished = _chaos_part(config, folder, cluster, data, rng, side)
        controls = {
            fenced: _control_part(config, folder, cluster, data, rng, fenced=fenced)
            for fenced in ((False, True) if config.fenced_control else (False,))
        }
        log("the cost of fencing: BatchStore with and without the fence")
        names = ("fence_cost_fenced", "fence_cost_unfenced")
        cost = fence_cost(
            cluster.url("postgres"),
            {name: cluster.url(name) for name in names},
            data.parts,
            config.batch_articles,
            config.fence_rounds,
        )
    seconds = time.perf_counter() - began
    return _report(config, main, outcome, finished, controls, cost, seconds, data.truth, side)


def _chaos_part(
    config: ChaosConfig,
    folder: Path,
    cluster: Cluster,
    data: Data,
    rng: random.Random,
    side: SideRuns,
) -> tuple[Run, Outcome, bool]:
    dropper = ReplyDropper(config.drop_every, config.drop_limit)
    main = _make_run(
        "chaos", config, folder, cluster, data.parts, rng, True, dropper,
        processes=config.coordinator_processes,
    )  # fmt: skip
    spares = main.prepared.node_ids[config.burst_edges : config.burst_edges + config.stops]
    main.spare_nodes.extend(spares)
    _spool_import(main, data.parts[:1])
    log(f"chaos run: coordinator, a burst of {config.burst_edges} leases, edges, then faults")
    finished = trio.run(alongside, side, main)
    samples = [rows for _, rows in main.monitor.samples]
    outcome = conclude(main, data.expected, samples, data.truth, rebuild=True)
    log(f"chaos run: {'every range done' if finished else 'NOT every range done'}")
    return main, outcome, finished


def _control_part(
    config: ChaosConfig,
    folder: Path,
    cluster: Cluster,
    data: Data,
    rng: random.Random,
    *,
    fenced: bool,
) -> tuple[Outcome, Run, bool]:
    name = "control_fenced" if fenced else "control_unfenced"
    dropper = ReplyDropper(2, config.drop_limit)
    control = _make_run(
        name, config, folder, cluster, data.control_parts, rng, fenced, dropper, without_keys=True
    )
    _spool_import(control, data.control_parts)
    log(f"negative control ({'fence on' if fenced else 'fence OFF'}, keys dropped)")
    done = trio.run(control_run, control)
    outcome = conclude(control, data.control_expected, [], data.truth)
    found = outcome.catalog
    log(f"  {dropper.dropped} replies lost; doubled {found.doubled}, lost {found.lost}")
    return outcome, control, done


def _spool_import(run: Run, parts: Sequence[Part]) -> None:
    env = child_env(DATABASE_URL=run.prepared.url, UIDX_HOME=str(run.home))
    for part in parts:
        uidx(spool_import_args(part, run.config.chunk_articles), env)
        run.fed.add(run.prepared.range_ids[run.parts.index(part)])


def _make_run(
    name: str,
    config: ChaosConfig,
    folder: Path,
    cluster: Cluster,
    parts: Sequence[Part],
    rng: random.Random,
    fenced: bool,
    dropper: ReplyDropper,
    *,
    without_keys: bool = False,
    processes: int = 1,
) -> Run:
    run_folder = folder / name
    (run_folder / "home").mkdir(parents=True)
    create_database(cluster.url("postgres"), name)
    # The burst's nodes, spares for frozen edges, and the abuser (the last one).
    nodes = config.burst_edges + config.stops + 1
    prepared = prepare_database(
        cluster.url(name), run_folder / "home", parts, nodes, without_keys=without_keys
    )
    return Run(name, config, run_folder, cluster, parts, prepared, fenced, rng, dropper, processes)


def _report(
    config: ChaosConfig,
    main: Run,
    outcome: Outcome,
    finished: bool,
    controls: dict[bool, tuple[Outcome, Run, bool]],
    cost: FenceCost,
    seconds: float,
    truth: frozenset[str],
    side: SideRuns,
) -> dict[str, Any]:
    tally = main.tally
    side_faults = _side_faults(side)
    faults = {kind: side_faults.get(kind, tally.faults.get(kind, 0)) for kind in KINDS}
    catalog = outcome.catalog
    spool = _spool_figures(side)
    clock = _clock_figures(side)
    several = side.several
    several_lost = several.catalog.lost if several is not None else 0
    several_doubled = several.catalog.doubled if several is not None else 0
    unfenced, unfenced_run, _ = controls[False]
    http_5xx = sum(n for status, n in tally.bad_statuses.items() if status >= 500)
    rebuild = outcome.rebuild if outcome.rebuild is not None else checks.RebuildCheck(0, 0, 0, 0)
    report: dict[str, Any] = {
        "faults": faults,
        "expected": catalog.expected,
        "stored": catalog.stored,
        # Segments of the catalogs, and articles of the prefetcher's spool.
        "lost": catalog.lost + spool["spool_lost_articles"] + clock["clock_lost"] + several_lost,
        "doubled": catalog.doubled
        + spool["spool_doubled_articles"]
        + clock["clock_doubled"]
        + several_doubled,
        "catalog_lost": catalog.lost,
        "catalog_doubled": catalog.doubled,
        "unexpected": catalog.unexpected,
        "truth_segments": len(truth),
        "truth_segments_stored": outcome.truth_stored,
        "rows_after_409": outcome.rows_after_409,
        # The catalog the builders followed (some killed mid-build) against a whole rebuild.
        "catalog_rows": rebuild.rows,
        "catalog_rows_differing": rebuild.differing,
        "catalog_rows_missing": rebuild.missing,
        "catalog_rows_extra": rebuild.extra,
        "catalog_rows_changed": rebuild.changed,
        "catalog_rows_sample": list(rebuild.sample),
        "http_5xx": http_5xx,
        "never_throttled": tally.never_throttled,
        "conflicts_409": outcome.conflicts_409,
        "stopped_edges_409": outcome.stopped_edges_409,
        "already_stored": outcome.already_stored,
        "recovery_p50_seconds": _seconds(checks.percentile(tally.recovery, 0.5)),
        "recovery_p95_seconds": _seconds(checks.percentile(tally.recovery, 0.95)),
        "recovery_samples": len(tally.recovery),
        "unrecovered": tally.unrecovered,
        "fence_cost_ratio": round(cost.ratio, 3),
        "fenced_batches_per_s": round(cost.fenced_per_second, 1),
        "unfenced_batches_per_s": round(cost.unfenced_per_second, 1),
        "negative_control_doubled": unfenced.catalog.doubled,
        "negative_control_lost": unfenced.catalog.lost,
        "negative_control_replies_lost": unfenced_run.dropper.dropped,
        "holder_violations": outcome.grant_violations,
        "lease_burst": tally.burst,
        "same_node_regrants": outcome.same_node_regrants,
        "chain_gaps": outcome.chains.gaps,
        "ranges_incomplete": outcome.chains.incomplete,
        "every_range_done": finished,
        "lease_state_lost": tally.lease_state_lost,
        "coordinator_restart_seconds": [round(s, 2) for s in tally.coordinator_restart_seconds],
        "postgres_down_statuses": {
            str(k): v for k, v in sorted(tally.postgres_down_statuses.items())
        },
        "postgres_reconnect_seconds": [round(s, 2) for s in tally.postgres_reconnect_seconds],
        "bad_input_statuses": {str(k): v for k, v in sorted(tally.bad_statuses.items())},
        # The coordinator's own log: ERROR lines, and 5xx other than the 503s
        # of the database's planned stops (the proxies count those).
        "coordinator_log_errors": len(outcome.log_problems.errors),
        "coordinator_log_5xx": len(outcome.log_problems.without(503).answered_5xx),
        "coordinator_log_503": len(outcome.log_problems.answered_5xx)
        - len(outcome.log_problems.without(503).answered_5xx),
        "coordinator_log_sample": outcome.log_problems.without(503).describe(5),
        "edges_exited": tally.edges_exited,
        "faults_skipped": dict(tally.skipped),
        **spool,
        **clock,
        **several_figures(several),
        # The run on several machines: lost, doubled, 5xx or ERROR in its coordinator's log.
        "several_failures": []
        if several is None
        else several_failures(several, faults=True, s3=True),
        "side_runs_not_run": dict(side.not_run),
        "left_out": [*LEFT_OUT, *(f"{name}: {why}" for name, why in side.not_run.items())],
        "articles": config.articles,
        "ranges": len(main.parts),
        "seed": config.seed,
        "seconds": round(seconds, 1),
    }
    if True in controls:
        report["fenced_control_doubled"] = controls[True][0].catalog.doubled
        report["fenced_control_already_stored"] = controls[True][0].already_stored
    report["failures"] = failures(report)
    return report


def _side_faults(side: SideRuns) -> dict[str, int]:
    faults: dict[str, int] = {}
    if side.prefetch is not None:
        faults.update(side.prefetch.faults)
    if side.clock is not None:
        faults.update(side.clock.faults)
    if side.several is not None:
        faults.update(side.several.faults)
    return faults


def _spool_figures(side: SideRuns) -> dict[str, Any]:
    """The prefetch part's figures (zeros when it did not run)."""
    done = side.prefetch
    if done is None:
        return dict.fromkeys(SPOOL_FAILURES, 0) | {"prefetch_complete": None}
    spool = done.spool
    return {
        "spool_holes": spool.coverage.holes,
        "spool_overlaps": spool.coverage.overlaps,
        "spool_lost_articles": spool.coverage.lost_articles,
        "spool_doubled_articles": spool.coverage.doubled_articles,
        "spool_bad_lines": spool.bad_lines,
        "spool_missing_files": spool.missing_files,
        "spool_orphan_files": spool.orphan_files,
        "spool_tmp_left": spool.temporary_left,
        "spool_chunks": spool.chunks,
        "spool_gaps": spool.gaps,
        "spool_lines": spool.lines,
        "prefetch_articles": side.config.prefetch.articles,
        "prefetch_complete": done.complete,
        "prefetch_exit_status": done.exit_status,
        "prefetch_in_flight_at_kills": done.in_flight_at_kills,
        "prefetch_refetched": done.refetched,
        "prefetch_tmp_removed": done.temporary_removed,
        "prefetch_errors_logged": done.errors_logged,
        # What they said (the first 20, cut short), to tell a fault that went unlogged.
        "prefetch_warnings": [line[:300] for line in done.warnings[:20]],
        "prefetch_seconds": round(done.seconds, 1),
    }


def _clock_figures(side: SideRuns) -> dict[str, Any]:
    """The clock run's figures (zeros when it did not run)."""
    found, outcome = side.clock, side.clock_outcome
    if found is None or outcome is None:
        return dict.fromkeys(CLOCK_FAILURES, 0) | {"clock_done": None}
    return {
        "clock_lost": outcome.catalog.lost,
        "clock_doubled": outcome.catalog.doubled,
        "clock_slow_edge_rows": found.slow_rows,
        "clock_slow_edge_409": found.slow_409,
        "clock_offset_edge_rows": found.offset_rows,
        "clock_done": found.done,
    }


# Figures of the side runs that must be 0.
SPOOL_FAILURES = (
    "spool_holes", "spool_overlaps", "spool_lost_articles", "spool_doubled_articles",
    "spool_bad_lines", "spool_missing_files", "spool_orphan_files", "spool_tmp_left",
)  # fmt: skip
CLOCK_FAILURES = ("clock_lost", "clock_doubled", "clock_slow_edge_rows")


def failures(report: dict[str, Any]) -> list[str]:
    """What makes the run fail (an empty list: it passed)."""
    bad = [
        f"{key} = {report[key]}"
        for key in ("lost", "doubled", "rows_after_409", "catalog_rows_differing", "http_5xx",
                    "never_throttled",
                    "coordinator_log_errors",
                    "coordinator_log_5xx", "holder_violations",
                    "chain_gaps", "ranges_incomplete", "lease_state_lost", "unrecovered",
                    *SPOOL_FAILURES, *CLOCK_FAILURES)
        if report[key]
    ]  # fmt: skip
    bad += _side_failures(report)
    bad += report.get("several_failures", [])
    if not report["every_range_done"]:
        bad.append("not every range was done")
    burst = report["lease_burst"]
    if burst.get("granted") != burst.get("distinct_ranges") or burst.get("not_as_granted_in_sql"):
        bad.append(f"the lease burst granted a range twice or SQL disagrees: {burst}")
    down = report["postgres_down_statuses"]
    if any(int(status) >= 500 and status != "503" for status in down):
        bad.append(f"other 5xx than 503 while PostgreSQL was down: {down}")
    if report["negative_control_doubled"] <= 0:
        bad.append("the negative control (fence off) found no doubled segment")
    if report.get("fenced_control_doubled"):
        bad.append("the fenced control doubled segments")
    not_run = {kind for name in report["side_runs_not_run"] for kind in SIDE_KINDS[name]}
    missing = [
        kind for kind, count in report["faults"].items() if count < 1 and kind not in not_run
    ]
    if missing:
        bad.append(f"faults never injected: {', '.join(missing)}")
    return bad


def _side_failures(report: dict[str, Any]) -> list[str]:
    bad = []
    if report["prefetch_complete"] is False:
        bad.append("the prefetcher did not fill the spool in time (a hang?)")
    if report["prefetch_complete"] and report["prefetch_exit_status"] != 0:
        bad.append(f"the prefetcher exited with {report['prefetch_exit_status']} on SIGTERM")
    if report["prefetch_complete"] is not None and (
        report["prefetch_refetched"] != report["prefetch_in_flight_at_kills"]
    ):
        bad.append("a chunk in flight at a kill was not fetched again")
    if report["clock_done"] is not None:
        if not report["clock_done"]:
            bad.append("the clock run's range was not done")
        if report["clock_slow_edge_409"] < 1:
            bad.append("the slow edge got no 409")
        if report["clock_offset_edge_rows"] < 1:
            bad.append("nothing was stored from the edge two hours ahead")
    return bad


def _print_figures(report: dict[str, Any]) -> None:
    faults = ", ".join(f"{kind} {count}" for kind, count in report["faults"].items())
    lines = [
        f"faults injected: {faults}",
        f"segments: expected {report['expected']:,}, stored {report['stored']:,}, "
        f"lost {report['lost']}, doubled {report['doubled']}",
        f"409s returned {report['conflicts_409']} (to frozen edges {report['stopped_edges_409']}); "
        f"rows written after a 409: {report['rows_after_409']}; "
        f"retries answered 'already stored': {report['already_stored']}",
        f"catalog rows the builders followed vs a whole rebuild: {report['catalog_rows']:,} rows, "
        f"{report['catalog_rows_differing']} differing ({report['catalog_rows_missing']} missing, "
        f"{report['catalog_rows_extra']} extra, {report['catalog_rows_changed']} changed)",
        f"recovery (fault -> range leased again): p50 {report['recovery_p50_seconds']} s, "
        f"p95 {report['recovery_p95_seconds']} s over {report['recovery_samples']}",
        f"5xx under bad input and abuse: {report['http_5xx']} ({report['bad_input_statuses']});"
        f" brute force never answered 429: {report['never_throttled']}",
        f"coordinator log: {report['coordinator_log_errors']} ERROR lines, "
        f"{report['coordinator_log_5xx']} 5xx answers (and {report['coordinator_log_503']} "
        "503 while PostgreSQL was stopped)",
        f"cost of fencing: {report['fenced_batches_per_s']} vs "
        f"{report['unfenced_batches_per_s']} batches/s (ratio {report['fence_cost_ratio']})",
        f"negative control (fence off): doubled {report['negative_control_doubled']}",
        f"prefetcher: spool holes {report['spool_holes']}, overlaps {report['spool_overlaps']}, "
        f"bad lines {report['spool_bad_lines']}; chunks in flight at kills "
        f"{report.get('prefetch_in_flight_at_kills')}, fetched again "
        f"{report.get('prefetch_refetched')}",
        f"clocks: slow edge 409s {report.get('clock_slow_edge_409')}, rows "
        f"{report['clock_slow_edge_rows']}; edge +2h rows {report.get('clock_offset_edge_rows')}",
        f"several machines (S3 spool, 2 prefetchers, 2 coordinator processes): lost "
        f"{report.get('several_lost')}, doubled {report.get('several_doubled')}, coordinator log "
        f"{report.get('several_coordinator_log_errors')} ERROR / "
        f"{report.get('several_coordinator_log_5xx')} 5xx, runs of chunks not stored while the"
        f" store was down {report.get('several_not_stored')}",
        f"left out: {'; '.join(report['left_out'])}",
    ]
    for line in lines:
        log(line)
    for failure in report["failures"]:
        log(f"FAILED: {failure}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/chaos", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--short", action="store_true", help="the CI version (small, quick)")
    parser.add_argument("--seed", type=int, default=None, help="seed (default: random)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (logs)")
    args = parser.parse_args(argv)
    # A timeout or a CI runner stops it with SIGTERM: the processes are
    # killed, the cluster stopped and the folder removed on the way out.
    signal.signal(signal.SIGTERM, interrupt)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1 << 31)
    config = check_config(short_config(seed) if args.short else long_config(seed))
    report: dict[str, Any] | None = None
    try:
        with _work_folder(args.keep) as folder:
            report = invoke(config, folder)
            if report["failures"] and args.keep is None:
                kept = keep_logs(folder)
                log(f"the run failed: its logs are kept in {kept}")
    except* Interrupted:
        log("interrupted (SIGTERM); cleaned up")
    if report is None:
        return 143
    _print_figures(report)
    print(json.dumps(report))
    return 1 if report["failures"] else 0


def keep_logs(folder: Path) -> Path:
    """Copy every log of a run's work folder (coordinators', edges', prefetchers' and
    PostgreSQL's, at their places under it) into a new folder beside it, which is not
    removed; its path. A failed run is otherwise read from the code alone."""
    kept = Path(tempfile.mkdtemp(prefix="uidx-chaos-failed-", dir=folder.parent))
    for path in sorted(folder.rglob("*.log")):
        if path.is_file():
            copy = kept / path.relative_to(folder)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
    return kept


@contextlib.contextmanager
def _work_folder(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=False)
        yield keep.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="uidx-chaos-") as folder:
        yield Path(folder)


if __name__ == "__main__":
    sys.exit(main())
