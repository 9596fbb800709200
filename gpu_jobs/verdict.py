"""The job's status from what its nodes reported and what its ranks wrote.

Rules, first match wins: a node that stopped the job before its tests (setup failed, node check
failed: ``infra``; a missing commit or no target: ``error``) decides; then a cancel
(``cancelled``); the job's timeout (``timeout``); a node without a report (``infra``: its
runner was killed or died with its node); torchrun failing before any rank started
(``infra``); a lost rank (``infra``, below); a crashed or a hung rank (``error``, naming them
and, for a rank whose pytest could not start or collect the tests or that died before any
result, the lines of its output naming the error: an error of the tree, not the node); no test
collected (``error``, with pytest's closing line); failures only of targets that need more
ranks than the job has (``error``, saying so); a test that failed or errored on any rank
(``failed``); otherwise ``passed`` (naming tolerated flaky tests). The test set's conventions
are applied to the merged outcomes first (:mod:`gpu_jobs.conventions`). A ``failed`` or
``timeout`` job, or an ``error`` one whose ranks crashed or hung, whose ranks' output holds an
infrastructure signature (:mod:`gpu_jobs.infra_signatures`: NCCL timeouts, Xid and ECC errors,
CUDA out of memory on an otherwise passing test, ...) is ``infra`` instead, the matched line
its ``cause``.

A rank is *lost* (issue 13: "a rank lost" is infra, whenever it happens) when

- torchrun's failure summary names it as the first observed failure and it was ended by a
  signal only something outside it sends: SIGKILL (the kernel's OOM killer, an operator, a
  node agent), SIGTERM or SIGHUP. The ranks torchrun stopped after it (listed with SIGTERM,
  or SIGKILL once its grace ran out) are not lost but stopped; or
- its ranks were all ended by such signals while none crashed (the summary is missing, so
  nothing inside the job explains them); or
- its pytest session ended but its JUnit report is missing or unreadable.

A rank that exits with a code of its own (``os._exit(3)``, pytest's collection or usage errors)
or dies of a signal it raised on itself (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL: the tree's
code crashed the interpreter) is *crashed*: an ``error``, the tree's when its output says why.
A lost rank makes the job ``infra`` even if tests already ran, on it or on other ranks, and
even if other ranks crashed after it (a collective whose peer vanished raises): an ``infra``
result carries no test outcomes and zero counts (:meth:`JobResult.uncounted`), so what the
surviving ranks reported is never counted as a test result; its message says how many results
were written and the JUnit files stay in ``logs``. stackbot retries an ``infra`` job on another
node, a bounded number of times (``infra_retries``).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpu_jobs.causes import PYTEST_EXITS, Cause, find_cause, no_tests_summary, rank_output
from gpu_jobs.conventions import (
    NOT_JUDGED,
    Judged,
    apply_conventions,
    short_of_ranks_message,
    tolerated_message,
)
from gpu_jobs.infra_signatures import find_signature
from gpu_jobs.junit import (
    MergedTests,
    RankReport,
    describe_ranks,
    junit_path,
    merge_ranks,
    read_rank_report,
)
from gpu_jobs.nodes import NodeReport, read_reports, write_atomic
from gpu_jobs.phase import PhaseWatch
from gpu_jobs.result import ErrorOf
from gpu_jobs.spec import Counts, Durations, JobResult, JobSpec, JobStatus, NodeCheck
from gpu_jobs.testsets import builtin_infra_signatures

# pytest's exit statuses that mean "the session ran": ok, tests failed, nothing collected.
_SESSION_RAN = (0, 1, 5)
_STOPPED_BY_LAUNCHER = (-int(signal.SIGTERM), -int(signal.SIGKILL))
# Signals a rank does not raise on itself by crashing: something outside it ended it.
_LOST_SIGNALS = (-int(signal.SIGKILL), -int(signal.SIGTERM), -int(signal.SIGHUP))


@dataclass
class RankFate:
    crashed: dict[int, int | None] = field(default_factory=dict)  # rank -> exit code if known
    stopped: list[int] = field(default_factory=list)  # stopped by torchrun after another failed
    hung: list[int] = field(default_factory=list)
    causes: dict[int, Cause] = field(default_factory=dict)  # crashed rank -> what stopped it
    # rank -> the signal's exit code (None: its session ended, its JUnit report is missing)
    lost: dict[int, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class JobVerdict:
    """What the rules conclude about a job: its status, the message saying why, whose fault an
    error is (``error_of``) and the output lines naming what stopped a rank (``cause``)."""

    status: JobStatus
    message: str
    error_of: ErrorOf = ""
    cause: str = ""


def decide(
    spec: JobSpec,
    out_dir: Path,
    reports: Mapping[int, NodeReport | None],
    *,
    started_at: str,
    finished_at: str,
    total_s: float,
) -> JobResult:
    """The job's result from its nodes' reports and its ranks' files under ``out_dir``."""
    present = {node: report for node, report in sorted(reports.items()) if report is not None}
    absent = sorted(node for node, report in reports.items() if report is None)
    world = range(spec.shape.world_size)
    tests_dir = out_dir / "tests"
    rank_reports = {rank: read_rank_report(junit_path(tests_dir, rank), rank) for rank in world}
    ran_tests = any(report.tests is not None for report in present.values())
    merged = merge_ranks(rank_reports, world) if ran_tests else MergedTests((), Counts(), ())
    judged = apply_conventions(spec, merged)
    merged = judged.merged
    fate = _rank_fate(present, {r for r, rep in rank_reports.items() if rep is not None})
    _read_causes(spec, out_dir, present, fate)
    verdict = _status(spec, present, absent, judged, fate, out_dir)
    if verdict.status in ("failed", "timeout") or (
        verdict.status == "error" and (fate.crashed or fate.hung)
    ):
        verdict = _infra_signature(spec, verdict, present, out_dir, merged)
    first = next(iter(present.values()), None)
    result = JobResult(
        job_id=spec.job_id,
        status=verdict.status,
        message=verdict.message,
        cause=verdict.cause,
        error_of=verdict.error_of,
        test_set=spec.test_set,
        shape=str(spec.shape),
        commit=first.commit if first else spec.commit,
        counts=merged.counts,
        tests=merged.tests,
        failed_ranks=merged.failed_ranks,
        crashed_ranks=tuple(sorted(fate.crashed)),
        hung_ranks=tuple(sorted(fate.hung)),
        missing_targets=first.missing_targets if first else (),
        node_check=_node_check(spec, present),
        durations=_durations(present, total_s),
        nodes=tuple(present[n].node_name if n in present else f"node{n}?" for n in sorted(reports)),
        logs=_logs(present, rank_reports, tests_dir, out_dir),
        started_at=started_at,
        finished_at=finished_at,
        environment=dict(first.environment) if first else {},
    )
    return result.uncounted() if result.status == "infra" else result


def _status(
    spec: JobSpec,
    present: Mapping[int, NodeReport],
    absent: list[int],
    judged: Judged,
    fate: RankFate,
    out_dir: Path,
) -> JobVerdict:
    merged = judged.merged
    for report in present.values():
        if report.abort_status is not None:
            error_of = report.abort_error_of or ("node" if report.abort_status == "infra" else "")
            return JobVerdict(
                report.abort_status,  # type: ignore[arg-type]
                report.abort_message,
                error_of,  # type: ignore[arg-type]
                report.abort_cause,
            )
    phases = [report.tests for report in present.values() if report.tests is not None]
    if any(report.interrupted for report in present.values()):
        return JobVerdict(
            "cancelled", "cancelled while running (the runner was sent SIGTERM or SIGINT)"
        )
    if any(phase.timed_out for phase in phases):
        return JobVerdict(
            "timeout",
            f"timed out after {spec.timeout_s:g}s; ranks {describe_ranks(fate.hung)} had not "
            "finished their tests",
        )
    if absent:
        return JobVerdict(
            "infra",
            f"node(s) {describe_ranks(absent)} wrote no report: their runner was killed or "
            "crashed, the node was lost; see the scheduler's log",
            "node",
        )
    launch_failed = [p for p in phases if p.launch_failed]
    if launch_failed:
        return JobVerdict(
            "infra",
            f"torchrun exited {launch_failed[0].exit_code} before any rank started; see "
            f"{launch_failed[0].log}",
            "node",
        )
    if fate.lost:
        return _lost_verdict(fate, PhaseWatch(out_dir / "tests", range(spec.shape.world_size)))
    if fate.crashed or fate.hung:
        return _crash_verdict(fate, merged.counts.total)
    if merged.counts.total == 0:
        return _nothing_collected(spec, present, out_dir)
    not_judged = {n for _, ids in judged.short_of_ranks.values() for n in ids}
    short = short_of_ranks_message(judged, spec)
    bad = [
        t for t in merged.tests if t.outcome in ("failed", "error") and t.nodeid not in not_judged
    ]
    if not bad and short:  # not judged: the shape, not the tree, is what is wrong
        return JobVerdict("error", short, "configuration")
    if bad:
        message = (
            f"{len(bad)} of {merged.counts.total} tests failed or errored on ranks "
            f"{describe_ranks(merged.failed_ranks)}; first: {bad[0].nodeid}"
        )
        return JobVerdict("failed", "; ".join(filter(None, (message, short))))
    broken = [p for p in phases if p.exit_code not in (0, None)]
    if broken:
        return JobVerdict(
            "error",
            f"torchrun exited {broken[0].exit_code} although every rank reported; see {broken[0].log}",
        )
    notes = [tolerated_message(judged, spec)]
    first = next(iter(present.values()))
    if first.missing_targets:
        notes.append(f"{len(first.missing_targets)} target(s) absent from the tree and not run")
    return JobVerdict("passed", "; ".join(filter(None, notes)))


def _infra_signature(
    spec: JobSpec,
    verdict: JobVerdict,
    present: Mapping[int, NodeReport],
    out_dir: Path,
    merged: MergedTests,
) -> JobVerdict:
    """``infra`` when a rank's output holds an infrastructure signature (the spec's list, else
    the node's built-in one): the machine failed, so the failures are not the tree's."""
    signatures = spec.infra_signatures
    if signatures is None:
        signatures = builtin_infra_signatures()
    if not signatures:
        return verdict
    gpus = spec.shape.gpus_per_node
    lines: dict[int, list[str]] = {}
    for rank in range(spec.shape.world_size):
        report = present.get(rank // gpus)
        if report is not None and report.tests is not None:
            log = out_dir / report.tests.log
            lines[rank] = rank_output(out_dir / "tests", log, rank // gpus, rank % gpus)
    failing = [
        t.message
        for t in merged.tests
        if t.outcome in ("failed", "error") and not t.message.startswith(NOT_JUDGED)
    ]
    found = find_signature(lines, signatures, failing)
    if found is None:
        return verdict
    message = (
        f"{found.message()}; the machine failed, not the tests: not counted ({verdict.message})"
    )
    return JobVerdict("infra", message, "node", found.excerpt)


def _nothing_collected(
    spec: JobSpec, present: Mapping[int, NodeReport], out_dir: Path
) -> JobVerdict:
    message = "no tests were collected from the targets: " + ", ".join(spec.targets)
    if spec.markers is not None:
        message += f" with -m {spec.markers!r}"
    closing = ""
    for node, report in present.items():
        if report.tests is not None and report.tests.ranks:
            local = 0
            lines = rank_output(out_dir / "tests", out_dir / report.tests.log, node, local)
            closing = no_tests_summary(lines)
            break
    if closing:
        message += f" (pytest: {closing})"
    return JobVerdict("error", message, "tree", closing)


def _lost_verdict(fate: RankFate, progress: PhaseWatch) -> JobVerdict:
    parts = []
    for rank, code in sorted(fate.lost.items()):
        own = PhaseWatch(progress.progress_dir.parent, [rank]).results()
        if code is None:
            parts.append(f"rank {rank} ended its tests but its JUnit report is missing")
        else:
            parts.append(
                f"rank {rank} was lost ({_signal_name(code)}) after {own} test "
                f"result{'' if own == 1 else 's'}"
            )
    if fate.crashed:
        failed = sorted(fate.crashed)
        who = f"rank {failed[0]}" if len(failed) == 1 else f"ranks {describe_ranks(failed)}"
        parts.append(f"{who} failed after that")
    if fate.stopped:
        parts.append(_stopped(fate.stopped))
    written = progress.results()
    parts.append(
        f"the node failed, not the tests: none of the {written} test results the ranks wrote "
        "are counted"
    )
    return JobVerdict("infra", "; ".join(parts), "node")


def _stopped(ranks: list[int]) -> str:
    """The ranks torchrun stopped after the first failure."""
    if len(ranks) == 1:
        return f"rank {describe_ranks(ranks)} was stopped by torchrun after that"
    return f"ranks {describe_ranks(ranks)} were stopped by torchrun after that"


def _signal_name(code: int) -> str:
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"exit code {code}"


def _crash_verdict(fate: RankFate, results: int) -> JobVerdict:
    message = _crash_message(fate, results)
    if not fate.causes:
        return JobVerdict("error", message)
    first = min(fate.causes)
    cause = fate.causes[first]
    excerpt = f"rank {first}:\n{cause.excerpt}"
    return JobVerdict("error", f"error of the tree under test: {message}", "tree", excerpt)


def _crash_message(fate: RankFate, results: int) -> str:
    parts = []
    groups: dict[tuple[int | None, str], list[int]] = {}
    for rank, code in sorted(fate.crashed.items()):
        cause = fate.causes.get(rank)
        groups.setdefault((code, cause.summary if cause else ""), []).append(rank)
    for (code, summary), ranks in groups.items():
        cause = fate.causes.get(ranks[0])
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {describe_ranks(ranks)}"
        if cause is not None and cause.from_pytest and code in PYTEST_EXITS:
            when = "" if results else ", before any result"
            parts.append(f"{summary} ({who}: pytest exit {code}, {PYTEST_EXITS[code]}{when})")
        elif cause is not None:
            parts.append(
                f"{summary} ({who} crashed" + (f", exit code {code})" if code is not None else ")")
            )
        else:
            parts.append(f"{who} crashed" + (f" (exit code {code})" if code is not None else ""))
    if fate.hung:
        parts.append(f"ranks {describe_ranks(fate.hung)} hung and were killed")
    if fate.stopped:
        parts.append(_stopped(fate.stopped))
    return "; ".join(parts)


def _rank_fate(present: Mapping[int, NodeReport], reported: set[int]) -> RankFate:
    fate = RankFate()
    stopped_codes: dict[int, int | None] = {}
    for report in present.values():
        phase = report.tests
        if phase is None:
            continue
        fate.hung.extend(phase.hung_ranks)
        if phase.timed_out or phase.interrupted or phase.launch_failed:
            continue  # gpu_jobs stopped the ranks itself, or none started
        for rank in phase.ranks:
            if rank in phase.hung_ranks:
                continue
            status = phase.finished.get(rank)
            code = phase.rank_exit_codes.get(rank)
            if status in _SESSION_RAN:
                if rank not in reported:
                    fate.lost[rank] = None  # the session ended; its report never arrived
                continue
            if status is None and code in _LOST_SIGNALS and rank == phase.root_cause:
                fate.lost[rank] = code  # killed from outside, first of its node
            elif status is None and code in _STOPPED_BY_LAUNCHER:
                fate.stopped.append(rank)
                stopped_codes[rank] = code
            else:
                fate.crashed[rank] = code if code is not None else status
    if fate.stopped and not fate.crashed and not fate.hung and not fate.lost:
        # Nothing else failed, so the signals came from outside: those ranks were lost.
        fate.lost = {rank: stopped_codes[rank] for rank in fate.stopped}
        fate.stopped = []
    return fate


def _read_causes(
    spec: JobSpec, out_dir: Path, present: Mapping[int, NodeReport], fate: RankFate
) -> None:
    """What each crashed rank's output says stopped it."""
    gpus = spec.shape.gpus_per_node
    for rank in fate.crashed:
        report = present.get(rank // gpus)
        if report is None or report.tests is None:
            continue
        lines = rank_output(
            out_dir / "tests", out_dir / report.tests.log, rank // gpus, rank % gpus
        )
        cause = find_cause(lines, report.tree_root)
        if cause is not None:
            fate.causes[rank] = cause


def _node_check(spec: JobSpec, present: Mapping[int, NodeReport]) -> NodeCheck:
    if not spec.node_check:
        return "skipped"
    if any(report.node_check_message for report in present.values()):
        return "failed"
    if present and all(report.node_check is not None for report in present.values()):
        return "passed"
    return "skipped"


def _durations(present: Mapping[int, NodeReport], total_s: float) -> Durations:
    reports = list(present.values())
    return Durations(
        setup_s=max((r.setup_s for r in reports), default=0.0),
        node_check_s=max((r.node_check.duration_s for r in reports if r.node_check), default=0.0),
        tests_s=max((r.tests.duration_s for r in reports if r.tests), default=0.0),
        total_s=total_s,
    )


def _logs(
    present: Mapping[int, NodeReport],
    rank_reports: Mapping[int, RankReport | None],
    tests_dir: Path,
    out_dir: Path,
) -> dict[str, str]:
    logs: dict[str, str] = {}
    for node_report in present.values():
        logs.update(node_report.logs)
    for rank, rank_report in rank_reports.items():
        if rank_report is not None:
            logs[f"junit-rank{rank}"] = str(junit_path(tests_dir, rank).relative_to(out_dir))
    return logs


def result_from_out_dir(spec: JobSpec, out_dir: Path) -> JobResult:
    """result.json if the runner wrote one, else a verdict from whatever the nodes left there
    (written to result.json, so collecting twice gives the same answer)."""
    path = out_dir / "result.json"
    if path.exists():
        return JobResult.from_json(path.read_text(encoding="utf-8"))
    reports = read_reports(out_dir, spec.shape.nodes)
    result = decide(spec, out_dir, reports, started_at="", finished_at="", total_s=0.0)
    write_atomic(path, result.to_json())
    return result
