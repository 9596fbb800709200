"""The line a test row gets when its job retried infra failures (issue 13): what the attempts
before it were, on which machines and why, in the comment, the check run and the verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stackbot.domain.comparison import compare_with_main
from stackbot.domain.report import render_sticky_comment
from stackbot.domain.report_checks import render_check_run
from stackbot.domain.report_lines import test_line as row_line
from stackbot.domain.retries import (
    Attempt,
    NotePart,
    infra_cause,
    note_markdown,
    note_text,
    retry_chain,
    retry_note,
)
from stackbot.domain.verdict import decide
from tests.reports.cases import amax_tests, outcomes, retried_after_infra

LOST = (
    "rank 1 was lost (killed by SIGKILL) after 3 test results; the node failed, not the tests: "
    "none of the 6 test results the ranks wrote are counted"
)
URL = "http://bot.example"


def attempt(job_id: int, status: str, node: str | None, error: str | None = None) -> Attempt:
    return Attempt(job_id, status, node, error, f"{URL}/jobs/{job_id}")


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        (LOST, "rank 1 lost, killed by SIGKILL"),
        (
            "rank 3 ended its tests but its JUnit report is missing; the node failed, not the tests",
            "rank 3's report lost",
        ),
        (
            "node gpu-01: node check failed: tests/node_check/test_nccl.py::test_all_reduce: boom",
            "node-check failed",
        ),
        ("node 1 failed node_check: CUDA error", "node-check failed"),
        (
            "timed out after 600s during node_check, before any test ran",
            "timed out in node_check, no test ran",
        ),
        (
            "timed out after 90s during setup, before any test ran",
            "timed out in setup, no test ran",
        ),
        (
            "a node failed under the job: the job ended NODE_FAIL (exit 0:0) before any runner "
            "reported; see /jobs/9/slurm-1.out",
            "Slurm node failure",
        ),
        (
            "node(s) 1 wrote no report: their runner was killed or crashed, the node was lost",
            "node 1 wrote no report",
        ),
        (
            "torchrun exited 1 before any rank started; see tests.log",
            "torchrun could not start the ranks",
        ),
        ("the job's result cannot be read: bad JSON", "result unreadable"),
        ("the disk is full; more text", "the disk is full"),
        ("x" * 100, "x" * 59 + "…"),
        (None, "no reason recorded"),
        ("  \n ", "no reason recorded"),
    ],
)
def test_an_infra_message_is_said_in_a_few_words(message: str | None, cause: str) -> None:
    assert infra_cause(message) == cause


def test_a_chain_is_followed_back_to_the_first_attempt() -> None:
    assert retry_chain(7, {7: 5, 5: 2}) == [2, 5, 7]
    assert retry_chain(7, {}) == [7]
    assert retry_chain(7, {7: 5, 5: 7}) == [5, 7]  # a loop in bad data ends


def test_a_first_attempt_has_no_note() -> None:
    assert retry_note([]) == ()
    assert retry_note([attempt(1, "passed", "gpu-01")]) == ()
    # a job that retries a non-infra attempt (a rerun) is not an infra retry
    assert retry_note([attempt(1, "failed", "gpu-01"), attempt(2, "passed", "gpu-02")]) == ()


def test_a_retry_that_passed_names_both_machines_and_why_the_first_failed() -> None:
    note = retry_note([attempt(11, "infra", "gpu-01", LOST), attempt(12, "passed", "gpu-02")])
    assert note_text(note) == (
        "passed on a retry on gpu-02 after an infra failure on gpu-01 "
        "(rank 1 lost, killed by SIGKILL)"
    )
    assert note_markdown(note) == (
        f"passed on a retry on [gpu-02]({URL}/jobs/12) after an infra failure on "
        f"[gpu-01]({URL}/jobs/11) (rank 1 lost, killed by SIGKILL)"
    )


def test_two_infra_failures_before_a_failing_retry() -> None:
    note = retry_note(
        [
            attempt(1, "infra", "gpu-01", LOST),
            attempt(2, "infra", None, "node 0 failed node_check: x"),
            attempt(3, "failed", "gpu-03"),
        ]
    )
    assert note_text(note) == (
        "failed on a retry on gpu-03 after infra failures on gpu-01 (rank 1 lost, killed by "
        "SIGKILL) and job 2 (node-check failed)"
    )


def test_every_attempt_infra_says_how_many_and_where() -> None:
    two = retry_note(
        [attempt(1, "infra", "gpu-01", LOST), attempt(2, "infra", "gpu-02", "node check failed")]
    )
    assert note_text(two) == (
        "no result after 2 attempts, both infra failures (gpu-01: rank 1 lost, killed by "
        "SIGKILL; gpu-02: node-check failed)"
    )
    three = retry_note([attempt(i, "infra", f"gpu-0{i}", LOST) for i in (1, 2, 3)])
    assert note_text(three).startswith("no result after 3 attempts, all infra failures (gpu-01:")
    assert note_markdown(three).count("](http://bot.example/jobs/") == 3


def test_a_retry_still_waiting_or_running() -> None:
    first = attempt(1, "infra", "gpu-01", LOST)
    assert note_text(retry_note([first, attempt(2, "queued", None)])) == (
        "queued again on another node after an infra failure on gpu-01 "
        "(rank 1 lost, killed by SIGKILL)"
    )
    assert note_text(retry_note([first, attempt(2, "running", "gpu-02")])).startswith(
        "running again on gpu-02 after an infra failure on gpu-01"
    )


def test_brackets_in_a_linked_name_do_not_break_the_link() -> None:
    assert note_markdown([NotePart("gpu-[01-02]", "u")]) == r"[gpu-\[01-02\]](u)"


def test_the_comment_has_one_line_under_each_retried_row() -> None:
    view = retried_after_infra()
    lines = render_sticky_comment(view).splitlines()
    # the test rows, folded below the failure groups (whose INFRA group names the retries too)
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("<details>")) :]
    passed = lines.index(
        "- ✅ **amax-group 1x4**: 14 passed · main: 14 passed"
    )  # the row itself as before
    assert lines[passed + 1] == (
        "  - 🔁 passed on a retry on [gpu-02](http://stackbot.example:8000/jobs/202) after an "
        "infra failure on [gpu-01](http://stackbot.example:8000/jobs/201) "
        "(rank 1 lost, killed by SIGKILL)"
    )
    infra = lines.index("- ⚠️ **amax-group 2x4**: no tests · main: 14 passed; job infra")
    assert lines[infra + 1].startswith("  - 🔁 no result after 2 attempts, both infra failures (")
    # the row that passed at once has no note
    assert "- ✅ **blockwise-recipe 1x4**: 3 passed · main: 3 passed" in lines
    assert [i for i, line in enumerate(lines) if "🔁" in line] == [passed + 1, infra + 1]


def test_without_earlier_attempts_an_infra_row_keeps_its_error() -> None:
    view = retried_after_infra()
    row = replace(view.tests[1], attempts=())
    assert row_line(row).endswith("; job infra: " + (row.error or ""))
    assert row_line(view.tests[1]).endswith("; job infra")


def test_the_verdict_and_the_check_run_say_it_too() -> None:
    view = retried_after_infra()
    verdict = decide(view)
    assert verdict.summary == (
        "amax-group 2x4 has no result after 2 attempts, both infra failures (gpu-03, gpu-04: "
        "node-check failed; gpu-05, gpu-06: Slurm node failure)"
    )
    check = render_check_run(view, "amax-group", "1x4")
    assert check.conclusion == "success"
    assert "\n- attempts: 🔁 passed on a retry on [gpu-02](" in check.summary
    clean = render_check_run(view, "blockwise-recipe", "1x4")
    assert "- attempts:" not in clean.summary


def test_a_failing_retry_keeps_its_failures_and_says_it_was_a_retry() -> None:
    view = retried_after_infra()
    failing = compare_with_main(outcomes(amax_tests(12, 2), "failed"), outcomes(amax_tests(14)))
    row = replace(
        view.tests[0],
        status="failed",
        comparison=failing,
        attempts=(view.tests[0].attempts[0], replace(view.tests[0].attempts[1], status="failed")),
    )
    text = render_sticky_comment(replace(view, tests=(row,)))
    assert "- ❌ **amax-group 1x4**: 12 passed, 2 failed · main: 14 passed (2 newly fail)" in text
    assert "  - 🔁 failed on a retry on [gpu-02](" in text
