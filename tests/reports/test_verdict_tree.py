"""A verdict names the tree its tests ran on (issue 12: a tree's results appear on a PR only as
that tree's). Series-first testing (issue 13) tests #8034 only on the series tree, so its
"ready" must name the series commit, not the commit of its own stack, which ran nothing."""

from __future__ import annotations

from stackbot.domain.report import render_sticky_comment
from stackbot.domain.report_checks import render_integration_check
from stackbot.domain.verdict import VerdictKind, decide
from tests.reports.cases import SERIES_COMMIT, STACK_COMMIT
from tests.reports.test_verdict import view


def test_a_ready_from_the_series_tests_names_the_series_commit() -> None:
    pr = view(8034)  # no stack tests; the series tree holds #8034 and passed
    verdict = decide(pr)
    assert verdict.kind is VerdictKind.READY
    assert SERIES_COMMIT[:7] in verdict.summary and "series" in verdict.summary
    assert STACK_COMMIT[:7] not in verdict.summary
    first = render_sticky_comment(pr).splitlines()[1]
    assert SERIES_COMMIT[:7] in first and STACK_COMMIT[:7] not in first
    check = render_integration_check(pr)
    assert check is not None and STACK_COMMIT[:7] not in check.summary.splitlines()[0]


def test_a_ready_from_the_stacks_own_tests_names_the_stack_commit() -> None:
    from tests.reports.test_verdict import SERIES_TESTS

    verdict = decide(view(8034, tests=SERIES_TESTS, tested_commit=STACK_COMMIT))
    assert verdict.kind is VerdictKind.READY
    assert f"`{STACK_COMMIT[:7]}`" in verdict.summary and "series" not in verdict.summary
