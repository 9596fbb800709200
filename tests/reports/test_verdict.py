"""One verdict per PR (stackbot.domain.verdict), and the comment and check runs that show it.

The demo's situations, as views: #8050 conflicts with #8035 in the series run and waits for a
vetter; #8034's failures also fail on main; #8748 is clean and involved in no conflict.
"""

from __future__ import annotations

from dataclasses import replace

from stackbot.domain.comparison import compare_with_main
from stackbot.domain.report import MARKER, render_sticky_comment
from stackbot.domain.report_checks import (
    integration_details_url,
    ordered_rows,
    render_approval_check,
    render_check_run,
    render_integration_check,
)
from stackbot.domain.report_view import (
    ApprovalView,
    IntegrationView,
    PrRef,
    PrReportView,
    StackView,
    StepView,
    TestRow,
)
from stackbot.domain.verdict import VerdictKind, decide, row_state
from tests.reports.cases import AMAX, MAIN, SERIES_COMMIT, STACK_COMMIT, amax_tests, outcomes

LAYER = "megatron/core/transformer/transformer_layer.py"
SERIES_STEPS = (
    StepView(8034, "clean"),
    StepView(8035, "resolved", resolved_files=("tools/process_group_usage_allowlist.json",)),
    StepView(8748, "clean"),
    StepView(8050, "conflict", conflicting_paths=(LAYER,), conflicts_with=(8035,)),
)
SERIES = IntegrationView(
    "series", "conflict", "main", MAIN, SERIES_COMMIT, SERIES_STEPS, url="http://x/runs/6"
)
GREEN = outcomes(amax_tests(10))
MAIN_RESULT = outcomes(amax_tests(1, 2), "failed")
SERIES_TESTS = (TestRow("amax-group", "1x4", "passed", compare_with_main(GREEN, MAIN_RESULT)),)


def view(number: int, **changes: object) -> PrReportView:
    base = PrReportView(
        repo="NVIDIA/Megatron-LM",
        pr=PrRef(number, "a PR"),
        head_sha="9984156" + "0" * 33,
        approval=ApprovalView("trusted", by="connor"),
        stack=StackView(series_key="#6307"),
        stack_integration=IntegrationView(
            "stack", "clean", "main", MAIN, STACK_COMMIT, (StepView(number, "clean"),)
        ),
        series_integration=SERIES,
        series_tests=SERIES_TESTS,
        series_tested_commit=SERIES_COMMIT,
        main_sha=MAIN,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def pr_8050() -> PrReportView:
    return view(8050, approval=ApprovalView("waiting"))


def pr_8034() -> PrReportView:
    # Two tests fail here and on main; the rest pass.
    here = outcomes({**amax_tests(6), f"{AMAX}::test_case_06": "failed"}, "failed")
    main = outcomes({f"{AMAX}::test_case_00": "passed", f"{AMAX}::test_case_06": "failed"})
    row = TestRow("amax-group", "1x4", "failed", compare_with_main(here, main))
    return view(8034, tests=(row,), tested_commit=STACK_COMMIT)


def test_a_pr_in_conflict_gets_conflict_with_the_pr_and_path_and_what_to_do() -> None:
    verdict = decide(pr_8050())
    assert verdict.kind is VerdictKind.CONFLICT
    assert verdict.conflicts_with == (8035,) and verdict.paths == (LAYER,)


def test_a_conflict_with_a_pr_it_does_not_depend_on_is_a_sibling_conflict() -> None:
    # #8050 does not depend on #8035: merging #8035's head into it would make an independent
    # PR depend on an unmerged one. The choices instead: declare the dependency, or let one land.
    verdict = decide(pr_8050())
    line = verdict.markdown()
    assert "merge #8035's head" not in line
    assert "sibling conflict" in verdict.summary and "#8035" in verdict.summary
    assert "merges cleanly onto `main`" in verdict.summary  # its own stack run is clean
    assert "`/stackbot depends-on #8035`" in verdict.action
    assert "one of #8050 and #8035 lands" in verdict.action
    # the headline does not hide that #8050 still waits for a vetter
    assert "`/ok to test 9984156`" in line


def test_a_conflict_with_a_pr_it_depends_on_keeps_merging_that_head() -> None:
    v = replace(pr_8050(), stack=StackView(series_key="#6307", ancestors=(8034, 8035)))
    verdict = decide(v)
    assert "merge #8035's head into this branch and resolve" in verdict.action
    assert "sibling" not in verdict.summary


def test_8050s_integration_check_links_the_series_run_where_it_conflicts() -> None:
    v = replace(
        pr_8050(),
        stack_integration=replace(view(8050).stack_integration, url="http://x/runs/3"),
    )
    assert integration_details_url(v) == "http://x/runs/6"  # the series run, not its clean stack
    integration = render_integration_check(v)
    assert integration is not None and "[run 6](http://x/runs/6)" in integration.summary
    # a PR that merges everywhere links its stack run
    clean = view(8748, stack_integration=replace(view(8748).stack_integration, url="http://x/r/4"))
    assert integration_details_url(clean) == "http://x/r/4"


def test_8050s_comment_shows_no_result_of_a_tree_without_it() -> None:
    body = render_sticky_comment(pr_8050())
    first = body.removeprefix(MARKER + "\n").splitlines()[0]
    assert first.startswith("❌ **conflict** with #8035 in `" + LAYER)
    assert "**Tests**" not in body and "10 passed" not in body
    assert "left out" in body


def test_8050s_check_runs_say_conflict_and_approval_pending() -> None:
    integration = render_integration_check(pr_8050())
    assert integration is not None
    assert (integration.name, integration.conclusion) == ("stackbot/integration", "failure")
    assert integration.summary.startswith("❌ **conflict** with #8035")
    approval = render_approval_check(pr_8050())
    assert (approval.name, approval.status, approval.conclusion) == (
        "stackbot/approval",
        "queued",
        None,
    )
    assert "/ok to test 9984156" in approval.title


def test_failures_that_also_fail_on_main_are_no_regressions_never_red() -> None:
    v = pr_8034()
    verdict = decide(v)
    assert verdict.kind is VerdictKind.NO_REGRESSIONS and verdict.tone == "warn"
    assert row_state(v.tests[0]) == "no-regressions"
    body = render_sticky_comment(v)
    assert "❌" not in body.split("Tests: 1 job on the stack")[1].split("</details>")[0]
    assert "🟡 **amax-group 1x4**" in body and "also fail on main" in body
    check = render_check_run(v, "amax-group", "1x4")
    assert check.conclusion == "neutral"
    assert check.summary.startswith("🟡 **no regressions**")


def test_a_series_conflict_shows_only_on_the_prs_it_involves() -> None:
    uninvolved = render_sticky_comment(view(8748))
    assert "#8050" not in uninvolved and "❌" not in uninvolved
    # the series tree holds #8748's whole stack (its own landing tree): ready
    stack = IntegrationView("stack", "clean", "main", MAIN, STACK_COMMIT, SERIES_STEPS[:3])
    assert decide(view(8748, stack_integration=stack)).kind is VerdictKind.READY
    involved = render_sticky_comment(view(8035))
    assert "#8050 conflicts with this PR in `" + LAYER in involved


def test_blocked_by_a_parent_whose_stack_step_conflicts() -> None:
    stack = IntegrationView(
        "stack",
        "conflict",
        "main",
        MAIN,
        None,
        (
            StepView(8034, "conflict", conflicting_paths=(LAYER,)),
            StepView(8035, "skipped", skipped_reason="not attempted"),
        ),
    )
    verdict = decide(view(8035, stack_integration=stack))
    assert verdict.kind is VerdictKind.BLOCKED and verdict.label == "blocked by #8034"
    own = decide(view(8034, stack_integration=stack))
    assert own.kind is VerdictKind.CONFLICT and "merge `main` into this branch" in own.action


def test_new_failures_name_the_test_and_the_file_and_come_first() -> None:
    regressed = outcomes({**amax_tests(2), f"{AMAX}::test_linears": "failed"}, "failed")
    rows = (
        TestRow("amax-group", "1x4", "passed", compare_with_main(GREEN, MAIN_RESULT)),
        TestRow(
            "amax-group",
            "2x4",
            "failed",
            compare_with_main(regressed, outcomes(amax_tests(3))),
            url="http://x/jobs/9",
        ),
    )
    v = view(8035, tests=rows)
    verdict = decide(v)
    assert verdict.kind is VerdictKind.NEW_FAILURES
    assert "`test_linears`" in verdict.summary and f"`{AMAX}`" in verdict.action
    assert "http://x/jobs/9#log" in verdict.action
    assert [row.shape for row in ordered_rows(v)] == ["2x4", "1x4"]


def test_testing_and_needs_approval() -> None:
    running = view(8035, tests=(TestRow("amax-group", "1x4", "running"),))
    assert decide(running).kind is VerdictKind.TESTING
    waiting = decide(view(8035, approval=ApprovalView("waiting"), series_integration=None))
    assert waiting.kind is VerdictKind.NEEDS_APPROVAL
    assert waiting.action == "a vetter must comment `/ok to test 9984156`"
