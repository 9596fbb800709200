"""Which ranks are lost (the job is ``infra``) and which crashed (the tree's ``error``), from
what the nodes reported: torchrun's exit codes and first observed failure, and each rank's
progress and JUnit files. The rule is :mod:`gpu_jobs.verdict`'s docstring; real torchrun runs of
the same cases are in ``test_runner.py`` and ``tests/e2e/test_lost_rank.py``."""

from __future__ import annotations

from pathlib import Path

from gpu_jobs.nodes import NodeReport
from gpu_jobs.phase import PhaseOutcome
from gpu_jobs.spec import JobResult, JobSpec, Shape
from gpu_jobs.verdict import decide

SPEC = JobSpec(job_id="j", test_set="t", targets=("t.py",), shape=Shape(1, 2), checkout=".")


def _junit(out: Path, rank: int) -> None:
    path = out / "tests" / "junit" / f"rank-{rank}.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '<testsuites><testsuite><testcase classname="t" name="test_a" time="0.1">'
        '<properties><property name="nodeid" value="t.py::test_a"/></properties>'
        "</testcase></testsuite></testsuites>"
    )


def _progress(out: Path, rank: int, results: int) -> None:
    path = out / "tests" / "progress" / f"rank-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"nodeid": "t.py::test_a", "outcome": "passed"}\n' * results)


def _decide(out: Path, tests: PhaseOutcome) -> JobResult:
    report = NodeReport(node_rank=0, node_name="gpu-7", ranks=(0, 1), tests=tests)
    return decide(SPEC, out, {0: report}, started_at="", finished_at="", total_s=1.0)


def _phase(**fields: object) -> PhaseOutcome:
    given: dict[str, object] = {"exit_code": 1, **fields}
    return PhaseOutcome(name="tests", ranks=(0, 1), started=(0, 1), **given)  # type: ignore[arg-type]


def test_a_rank_whose_report_never_arrived_is_lost(tmp_path: Path) -> None:
    _junit(tmp_path, 0)
    _progress(tmp_path, 0, 1)
    _progress(tmp_path, 1, 1)
    result = _decide(tmp_path, _phase(exit_code=0, finished={0: 0, 1: 0}))
    assert (result.status, result.error_of) == ("infra", "node"), result.message
    assert "rank 1 ended its tests but its JUnit report is missing" in result.message
    assert "none of the 2 test results" in result.message
    assert result.tests == () and result.counts.total == 0  # rank 0's pass is not counted


def test_ranks_that_fail_after_a_lost_one_do_not_make_it_the_trees_error(tmp_path: Path) -> None:
    # Rank 1 was SIGKILLed first; rank 0's collective then raised (exit 1) before torchrun
    # stopped it: the node's failure all the same.
    _progress(tmp_path, 1, 3)
    result = _decide(tmp_path, _phase(rank_exit_codes={0: 1, 1: -9}, root_cause=1))
    assert result.status == "infra", result.message
    assert result.message.startswith("rank 1 was lost (killed by SIGKILL) after 3 test results")
    assert "rank 0 failed after that" in result.message


def test_a_rank_killed_by_torchrun_after_the_first_failure_is_not_lost(tmp_path: Path) -> None:
    # Rank 0 exited 3 itself, first; rank 1 ignored SIGTERM and torchrun SIGKILLed it.
    result = _decide(tmp_path, _phase(rank_exit_codes={0: 3, 1: -9}, root_cause=0))
    assert result.status == "error", result.message
    assert result.crashed_ranks == (0,) and "rank 0 crashed (exit code 3)" in result.message
    assert "rank 1 was stopped by torchrun after that" in result.message


def test_signals_from_outside_without_a_summary_lose_the_ranks_they_ended(tmp_path: Path) -> None:
    result = _decide(tmp_path, _phase(rank_exit_codes={0: -15, 1: -9}))
    assert result.status == "infra", result.message
    assert "rank 0 was lost (killed by SIGTERM)" in result.message
    assert "rank 1 was lost (killed by SIGKILL)" in result.message


def test_a_signal_a_crashing_rank_raises_on_itself_is_not_lost(tmp_path: Path) -> None:
    result = _decide(tmp_path, _phase(rank_exit_codes={0: -15, 1: -11}, root_cause=1))
    assert result.status == "error" and result.crashed_ranks == (1,), result.message


def test_an_older_runners_report_without_a_root_cause_still_reads(tmp_path: Path) -> None:
    data = _phase(rank_exit_codes={1: -9}).to_dict()
    del data["root_cause"]
    assert PhaseOutcome.from_dict(data).root_cause is None
