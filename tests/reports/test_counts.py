"""Failures counted and grouped as Dr.CI does (issue 27): the line under the verdict counts
failures, not jobs; the groups NEW FAILURE / FAILS ON MAIN TOO / FLAKY / INFRA link each line
to its job and log; what the verdict does not need is folded; no internal names."""

from __future__ import annotations

from dataclasses import replace

from stackbot.domain.comparison import compare_with_main
from stackbot.domain.report import MARKER, render_sticky_comment
from stackbot.domain.report_checks import check_run_name, render_check_run
from stackbot.domain.report_failures import count_line
from stackbot.domain.report_lines import test_line as row_line
from stackbot.domain.report_view import FindingView, IntegrationView, StepView, TestRow
from tests.reports.cases import AMAX, approved_clean, outcomes
from tests.reports.test_verdict import GREEN, MAIN_RESULT, pr_8034, view

JOB = "http://x/jobs/7"


def _lines(body: str) -> list[str]:
    return body.removeprefix(MARKER + "\n").splitlines()


def test_a_green_pr_says_no_failures_and_fits_on_one_screen() -> None:
    rows = (
        TestRow("amax-group", "1x4", "passed", compare_with_main(GREEN, MAIN_RESULT), url=JOB),
        TestRow("own:8748", "2x4", "passed", compare_with_main(GREEN, None), url=JOB),
    )
    v = view(8748, tests=rows, tested_commit="5" * 40)
    body = render_sticky_comment(v)
    lines = _lines(body)
    assert lines[0].startswith("✅ **ready**")
    assert "test jobs pass" not in lines[0]  # failures are counted, not jobs
    assert lines[1] == "✅ no failures"
    assert "<details><summary>Tests: 2 jobs on the stack integration" in body
    # shown outside the folds: a screenful
    visible = [line for line in body.split("<details>")[0].splitlines() if line.strip()]
    assert len(visible) <= 12, visible


def test_failures_are_counted_and_grouped_with_links_to_job_and_log() -> None:
    here = outcomes({f"{AMAX}::test_a": "failed", f"{AMAX}::test_b": "failed"}, "failed")
    main = outcomes({f"{AMAX}::test_a": "passed", f"{AMAX}::test_b": "passed"})
    rows = (
        TestRow("amax-group", "1x4", "failed", compare_with_main(here, main), url=JOB),
        TestRow("amax-group", "2x4", "infra", None, url="http://x/jobs/8", error="node lost"),
    )
    finding = FindingView("amax-group", "1x4", f"{AMAX}::test_c", "flaky", failed_in=(9,))
    v = view(8034, tests=rows, tested_commit="5" * 40, findings=(finding,), dashboard="http://x")
    body = render_sticky_comment(v)
    lines = _lines(body)
    assert lines[1] == "❌ 2 new failures · ⚠️ 1 without a result (infra) · ⚪ 1 flaky"
    new = body.index("**NEW FAILURE**")
    assert new < body.index("**INFRA**") and new < body.index("**FLAKY**")
    assert f"`test_a`, `test_b` in `{AMAX}`" in body
    assert f"[job 7]({JOB}) · [log]({JOB}#log)" in body
    assert "[job 8](http://x/jobs/8) · [log](http://x/jobs/8#log)" in body
    assert "[Log of job 9](http://x/jobs/9#log)" in body
    # the check run of the row counts the same
    check = render_check_run(v, "amax-group", "1x4")
    assert check.summary.splitlines()[1] == lines[1]
    assert f"[log]({JOB}#log)" in check.summary


def test_failures_main_has_too_are_their_own_group_and_not_new() -> None:
    body = render_sticky_comment(pr_8034())
    assert _lines(body)[1] == "🟡 1 fails on main too"
    assert "**FAILS ON MAIN TOO**" in body and "**NEW FAILURE**" not in body


def test_nothing_counted_before_a_job_finished() -> None:
    running = (TestRow("amax-group", "1x4", "running"),)
    assert count_line(view(8748, tests=running, series_tests=())) == ""


def test_a_test_set_with_targets_absent_from_the_tree_says_which() -> None:
    row = TestRow(
        "amax-group",
        "1x4",
        "passed",
        compare_with_main(GREEN, MAIN_RESULT),
        missing_targets=("tests/unit_tests/ssm/test_a.py", "tests/unit_tests/ssm/test_b.py"),
    )
    line = row_line(row)
    assert "2 targets absent from the tree, not run: `tests/unit_tests/ssm/test_a.py`" in line
    assert "`tests/unit_tests/ssm/test_b.py`" in line


def test_a_prs_own_test_files_are_named_in_words() -> None:
    row = TestRow("own:8034", "2x4", "passed", compare_with_main(GREEN, None))
    assert "**#8034's own test files 2x4**" in row_line(row)
    assert "own:8034" not in row_line(row)
    # the check run keeps the stable name a repository can require (issue 24)
    assert check_run_name("own:8034", "2x4") == "stackbot/tests: own files"


def test_a_resolution_in_both_runs_is_said_once() -> None:
    resolved = StepView(
        8035,
        "resolved",
        resolved_files=("tools/process_group_usage_allowlist.json",),
        resolution="tools/process_group_usage_allowlist.json conflicted with changes on the base; "
        "regenerated on the merged tree: total 11 → 9",
    )
    stack = IntegrationView("stack", "resolved", "main", "7" * 40, "5" * 40, (resolved,))
    series = IntegrationView("series", "resolved", "main", "7" * 40, "6" * 40, (resolved,))
    body = render_sticky_comment(
        replace(view(8035), stack_integration=stack, series_integration=series)
    )
    assert body.count("regenerated on the merged tree: total 11 → 9") == 1
    # the path is not said twice in one sentence either
    assert "`tools/process_group_usage_allowlist.json` conflicted with changes on the base" in body


def test_a_trusted_author_is_not_said_to_be_approved() -> None:
    body = render_sticky_comment(approved_clean())
    assert "approved for testing by @phlip" in body
    trusted = render_sticky_comment(replace(approved_clean(), approval=view(1).approval))
    assert "@connor is a trusted author" in trusted and "approved by" not in trusted
