"""A verdict names the tree its tests ran on (issue 12: a tree's results appear on a PR only as
that tree's). Series-first testing (issue 13) tests #8034 only on the series tree, so its
verdict must name the series commit, not the commit of its own stack, which ran nothing; and
since that tree also holds #8035 and #8748, it is not "ready" (issue 24: "ready" means the tree
the PR would land in passed) but "passes with the series", offering `/stackbot test-alone`."""

from __future__ import annotations

from stackbot.domain.report import render_sticky_comment
from stackbot.domain.report_checks import render_check_run, render_integration_check
from stackbot.domain.report_view import IntegrationView
from stackbot.domain.verdict import VerdictKind, decide
from tests.reports.cases import MAIN, SERIES_COMMIT, STACK_COMMIT
from tests.reports.test_verdict import SERIES_STEPS, SERIES_TESTS, view


def _stack_of(number: int) -> IntegrationView:
    """The PR's own stack run: the series steps up to and including it."""
    prs = [step.pr for step in SERIES_STEPS]
    steps = SERIES_STEPS[: prs.index(number) + 1]
    return IntegrationView("stack", "clean", "main", MAIN, STACK_COMMIT, steps)


def test_a_pass_only_inside_the_series_tree_is_not_ready_and_names_the_tree() -> None:
    pr = view(8034, stack_integration=_stack_of(8034))  # no stack tests; the series passed
    verdict = decide(pr)
    assert verdict.kind is VerdictKind.WITH_SERIES and verdict.tone == "ok"
    assert verdict.label == "passes with the series"
    assert "as part of the series tree with #8035, #8748" in verdict.summary
    assert SERIES_COMMIT[:7] in verdict.summary and STACK_COMMIT[:7] not in verdict.summary
    assert "main + #8034" in verdict.summary
    assert verdict.action == "land with the series, or `/stackbot test-alone`"
    first = render_sticky_comment(pr).splitlines()[1]
    assert first.startswith("☑️ **passes with the series**: as part of the series tree with #8035")
    assert first.endswith("land with the series, or `/stackbot test-alone`")
    check = render_integration_check(pr)
    assert check is not None and STACK_COMMIT[:7] not in check.title
    assert f"its tests ran on the series tree {SERIES_COMMIT[:7]}" in check.title


def test_a_middle_pr_names_only_the_prs_above_its_own_stack() -> None:
    verdict = decide(view(8035, stack_integration=_stack_of(8035)))
    assert verdict.kind is VerdictKind.WITH_SERIES
    assert "with #8748," in verdict.summary and "main + #8034, #8035" in verdict.summary


def test_the_top_pr_whose_stack_is_the_series_tree_is_ready_on_the_series_commit() -> None:
    verdict = decide(view(8748, stack_integration=_stack_of(8748)))
    assert verdict.kind is VerdictKind.READY
    assert SERIES_COMMIT[:7] in verdict.summary and "series" in verdict.summary


def test_a_series_tree_on_another_base_is_not_the_prs_own_tree() -> None:
    stack = _stack_of(8748)
    moved = IntegrationView("stack", "clean", "main", "f" * 40, STACK_COMMIT, stack.steps)
    assert decide(view(8748, stack_integration=moved)).kind is VerdictKind.WITH_SERIES


def test_a_ready_from_the_stacks_own_tests_names_the_stack_commit() -> None:
    pr = view(8034, tests=SERIES_TESTS, tested_commit=STACK_COMMIT)
    verdict = decide(pr)
    assert verdict.kind is VerdictKind.READY
    assert f"`{STACK_COMMIT[:7]}`" in verdict.summary and "series" not in verdict.summary
    check = render_integration_check(pr)
    assert check is not None
    assert check.title.endswith(f"as {STACK_COMMIT[:7]}, the commit its tests ran on")


def test_every_pr_of_the_series_tree_gets_its_test_check_run_naming_the_tree() -> None:
    for number in (8034, 8035, 8748):
        pr = view(number, stack_integration=_stack_of(number))
        check = render_check_run(pr, "amax-group", "1x4")
        assert check.name == "stackbot/tests: amax-group 1x4"
        assert (check.status, check.conclusion) == ("completed", "success")
        tree = f"the series integration `{SERIES_COMMIT[:7]}` with #8034, #8035, #8748 on main"
        assert tree in check.summary, check.summary
        assert "· main: 1 passed, 2 failed" in check.title  # the comparison with main
        own_tree = number == 8748
        assert ("(the tree this PR lands in)" in check.summary) is own_tree
