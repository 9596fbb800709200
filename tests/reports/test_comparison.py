"""Integration results compared with main, per test set and shape."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_jobs.junit import CaseOutcome, RankReport, merge_ranks
from gpu_jobs.spec import OUTCOMES, JobResult, Outcome
from gpu_jobs.spec import Counts as JobCounts
from gpu_jobs.spec import TestResult as JobTest
from stackbot.domain.comparison import Counts, TestOutcomes, compare_with_main
from stackbot.errors import BadInput


def result(
    status: str, tests: dict[str, str], counts: dict[str, int] | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "status": status,
        "tests": [
            {"nodeid": nodeid, "outcome": outcome, "duration_s": 0.1}
            for nodeid, outcome in tests.items()
        ],
    }
    if counts is not None:
        data["counts"] = counts
    return data


def test_reading_a_gpu_jobs_result() -> None:
    outcomes = TestOutcomes.from_result_json(
        result("failed", {"t.py::a": "passed", "t.py::b": "failed"}, {"passed": 1, "failed": 1})
    )
    assert outcomes.status == "failed"
    assert outcomes.counts == Counts(passed=1, failed=1)
    assert outcomes.tests == {"t.py::a": "passed", "t.py::b": "failed"}


def test_counts_default_to_the_tests_when_absent() -> None:
    outcomes = TestOutcomes.from_result_json(result("passed", {"a": "passed", "b": "skipped"}))
    assert outcomes.counts == Counts(passed=1, skipped=1)


def test_a_test_passes_only_if_it_passed_on_every_rank() -> None:
    data = {
        "status": "failed",
        "tests": [
            {"nodeid": "t::a", "outcome": "passed"},
            {"nodeid": "t::a", "outcome": "failed"},
            {"nodeid": "t::b", "outcome": "passed"},
            {"nodeid": "t::b", "outcome": "passed"},
            {"nodeid": "t::c", "outcome": "failed"},
            {"nodeid": "t::c", "outcome": "error"},
        ],
    }
    assert TestOutcomes.from_result_json(data).tests == {
        "t::a": "failed",
        "t::b": "passed",
        "t::c": "failed",  # failed outranks error, as on the node (gpu_jobs.spec.worst_outcome)
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "must be a JSON object"),
        ({"tests": []}, "no 'status'"),
        ({"status": "passed", "tests": {}}, "'tests' must be a list"),
        ({"status": "passed", "tests": ["x"]}, "tests[0] must be an object"),
        ({"status": "passed", "tests": [{"outcome": "passed"}]}, "tests[0] has no 'nodeid'"),
        (
            {"status": "passed", "tests": [{"nodeid": "a", "outcome": "xpassed"}]},
            "(a) has outcome 'xpassed'",
        ),
        (
            {"status": "passed", "counts": {"passed": -1}},
            "counts.passed must be a non-negative integer",
        ),
        ({"status": "passed", "counts": [1]}, "'counts' must be an object"),
    ],
)
def test_malformed_results_name_the_problem(data: Any, message: str) -> None:
    with pytest.raises(BadInput) as raised:
        TestOutcomes.from_result_json(data)
    assert message in str(raised.value)


def test_comparison_with_main() -> None:
    integration = TestOutcomes.from_result_json(
        result(
            "failed",
            {
                "t::fixed": "passed",  # failed on main
                "t::broken": "failed",  # passed on main
                "t::same": "passed",
                "t::still": "error",  # failed on main too
                "t::new_ok": "passed",  # not on main
                "t::new_bad": "failed",  # not on main
            },
        )
    )
    main = TestOutcomes.from_result_json(
        result(
            "failed",
            {
                "t::fixed": "failed",
                "t::broken": "passed",
                "t::same": "passed",
                "t::still": "failed",
                "t::gone": "passed",
            },
        )
    )
    comparison = compare_with_main(integration, main)
    assert comparison.counts == Counts(passed=3, failed=2, error=1)
    assert comparison.main_counts == Counts(passed=3, failed=2)
    assert comparison.newly_pass == ("t::fixed",)
    assert comparison.newly_fail == ("t::broken",)
    assert comparison.absent_on_main == ("t::new_bad", "t::new_ok")
    assert comparison.still_failing == ("t::still",)
    assert comparison.failing_new == ("t::new_bad",)
    assert comparison.regressed


def test_failures_that_main_shares_are_not_regressions() -> None:
    integration = TestOutcomes.from_result_json(result("failed", {"a": "passed", "b": "failed"}))
    main = TestOutcomes.from_result_json(result("failed", {"a": "failed", "b": "failed"}))
    comparison = compare_with_main(integration, main)
    assert comparison.newly_pass == ("a",)
    assert comparison.still_failing == ("b",)
    assert not comparison.regressed


def test_unidentified_failures_beyond_mains_count_are_regressions() -> None:
    integration = TestOutcomes("failed", Counts(passed=2, error=1), {"a": "passed", "b": "passed"})
    main = TestOutcomes("passed", Counts(passed=2), {"a": "passed", "b": "passed"})
    assert compare_with_main(integration, main).regressed


def test_without_main_any_failure_counts() -> None:
    passing = compare_with_main(TestOutcomes("passed", Counts(passed=3), {}), None)
    assert passing.main_counts is None and not passing.regressed
    assert passing.absent_on_main == ()
    failing = compare_with_main(TestOutcomes("failed", Counts(passed=2, failed=1), {}), None)
    assert failing.regressed


@pytest.mark.parametrize(
    ("counts", "text"),
    [
        (Counts(passed=23), "23 passed"),
        (Counts(passed=14, failed=9), "14 passed, 9 failed"),
        (Counts(passed=1, failed=2, error=3, skipped=4), "1 passed, 2 failed, 3 error, 4 skipped"),
        (Counts(), "no tests"),
    ],
)
def test_counts_are_described_as_users_write_them(counts: Counts, text: str) -> None:
    assert counts.describe() == text


def test_a_gpu_jobs_job_result_is_read_as_written() -> None:
    """The contract with gpu_jobs: its JobResult JSON, per-rank outcomes already merged."""
    job = JobResult(
        job_id="job-7",
        status="failed",
        counts=JobCounts(passed=1, failed=1),
        tests=(
            JobTest("t.py::ok", "passed", 0.2, {0: "passed", 1: "passed"}),
            JobTest("t.py::bad", "failed", 0.3, {0: "passed", 1: "failed"}, "rank 1: assert"),
        ),
    )
    outcomes = TestOutcomes.from_result_json(job.to_dict())
    assert outcomes.status == "failed"
    assert outcomes.counts == Counts(passed=1, failed=1)
    assert outcomes.tests == {"t.py::ok": "passed", "t.py::bad": "failed"}


@pytest.mark.parametrize("first", OUTCOMES)
@pytest.mark.parametrize("second", OUTCOMES)
def test_a_result_listing_each_rank_is_merged_as_the_node_merges_ranks(
    first: Outcome, second: Outcome
) -> None:
    """stackbot's re-merge and gpu_jobs' merge over ranks give a test the same outcome."""
    reports: dict[int, RankReport | None] = {
        rank: RankReport(rank, {"t::a": CaseOutcome("t::a", outcome, 0.1)})
        for rank, outcome in enumerate((first, second))
    }
    (on_node,) = merge_ranks(reports, range(2)).tests
    listed = {
        "status": "failed",
        "tests": [{"nodeid": "t::a", "outcome": o} for o in (first, second)],
    }
    assert TestOutcomes.from_result_json(listed).tests == {"t::a": on_node.outcome}


def test_a_stored_result_without_counts_counts_each_test_once() -> None:
    data = result("failed", {"a": "passed"})
    data["tests"] += [{"nodeid": "b", "outcome": "error"}, {"nodeid": "b", "outcome": "failed"}]
    data["total_s"] = 3.0  # a field this reader does not know, in a stored row: ignored
    assert TestOutcomes.from_result_json(data).counts == Counts(passed=1, failed=1)
