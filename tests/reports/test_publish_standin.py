"""Publishing reports on the GitHub stand-in: sticky comments found again and edited in place,
check runs through their life, coalesced writes, and commit statuses when checks are refused.
Writes are counted from the stand-in's own request log."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.domain.comparison import Counts, TestOutcomes, compare_with_main
from stackbot.domain.report import MARKER
from stackbot.domain.report_view import (
    ApprovalView,
    IntegrationView,
    PrRef,
    PrReportView,
    StepView,
    TestRow,
)
from stackbot.services.report_views import build_report_views
from stackbot.services.reporting import publish_reports
from tests.sync.pipeline import Pipeline, open_pr, push

WRITE_METHODS = ("POST", "PATCH", "PUT", "DELETE")


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only: these tests are about GitHub writes; the Report rows they keep are
    exercised on PostgreSQL by tests/sync/test_store.py."""
    return f"sqlite:///{tmp_path / 'stackbot.db'}"


def writes(pipeline: Pipeline) -> list[tuple[str, str]]:
    """Every write stackbot sent to the stand-in (token exchanges aside)."""
    return [
        (r.method, r.path)
        for r in pipeline.control.requests()
        if r.method in WRITE_METHODS
        and not r.path.endswith("/access_tokens")
        and r.auth.startswith("installation")
    ]


def comparison(passed: int, main_passed: int, main_failed: int):  # type: ignore[no-untyped-def]
    here = {f"t::{i}": "passed" for i in range(passed)}
    main = {
        f"t::{i}": ("passed" if i < main_passed else "failed")
        for i in range(main_passed + main_failed)
    }
    return compare_with_main(
        TestOutcomes("passed", Counts.of_tests(here), here),
        TestOutcomes("failed", Counts.of_tests(main), main),
    )


def rows(status: str) -> tuple[TestRow, ...]:
    finished = comparison(23, 14, 9) if status == "passed" else None
    return (
        TestRow("amax-group", "2x4", status, finished),
        TestRow("blockwise-recipe", "1x4", status, finished),
    )


def view(pipeline: Pipeline, number: int, status: str = "queued") -> PrReportView:
    return PrReportView(
        repo=pipeline.repo,
        pr=PrRef(number, "PR"),
        head_sha=pipeline.head(number),
        approval=ApprovalView("approved", by="bob"),
        tests=rows(status),
    )


def open_prs(pipeline: Pipeline, count: int) -> list[int]:
    # These tests publish by hand: the pipeline's own report tasks stay queued.
    pipeline.handled = tuple(kind for kind in pipeline.handled if kind != "report")
    numbers = [
        open_pr(pipeline, author="carol", branch=f"carol/pr{i}", title=f"PR {i}")
        for i in range(count)
    ]
    pipeline.deliver()
    return numbers


def test_unchanged_reports_for_ten_prs_write_nothing(pipeline: Pipeline) -> None:
    numbers = open_prs(pipeline, 10)
    client = pipeline.client()
    first = publish_reports(
        pipeline.engine, client, pipeline.repo, [view(pipeline, n) for n in numbers]
    )
    # two test check runs and stackbot/approval per PR (these views have no integration)
    assert (first.comments_created, first.checks_created) == (10, 30)
    sent = len(writes(pipeline))
    assert sent == 40
    again = publish_reports(
        pipeline.engine, client, pipeline.repo, [view(pipeline, n) for n in numbers]
    )
    assert again.writes == 0 and again.skipped == 40
    assert len(writes(pipeline)) == sent
    for number in numbers:
        [sticky] = pipeline.stickies(number)
        assert sticky.body.startswith(MARKER)


def test_changes_make_at_most_one_write_per_pr_and_object(pipeline: Pipeline) -> None:
    numbers = open_prs(pipeline, 10)
    client = pipeline.client()
    publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, n) for n in numbers])
    sent = len(writes(pipeline))
    # Two updates for every PR in one call (running, then finished): the last one wins.
    views = [view(pipeline, n, "running") for n in numbers] + [
        view(pipeline, n, "passed") for n in numbers
    ]
    counts = publish_reports(pipeline.engine, client, pipeline.repo, views)
    new = writes(pipeline)[sent:]
    # stackbot/approval (same verdict: these views have no integration) is not written again
    assert (counts.comments_edited, counts.checks_updated, counts.comments_created) == (10, 20, 0)
    assert len(new) == 30
    assert max(Counter(new).values()) == 1  # one write per comment and per check run
    assert all(method == "PATCH" for method, _ in new)


def test_check_runs_go_from_queued_to_completed_on_the_head(pipeline: Pipeline) -> None:
    [number] = open_prs(pipeline, 1)
    client = pipeline.client()
    head = pipeline.head(number)
    seen = []
    for status in ("queued", "running", "passed"):
        publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number, status)])
        runs = {run.name: run for run in pipeline.control.check_runs(pipeline.repo, head)}
        assert sorted(runs) == [
            "stackbot/approval",
            "stackbot/tests: amax-group 2x4",
            "stackbot/tests: blockwise-recipe 1x4",
        ]
        seen.append(
            (
                runs["stackbot/tests: amax-group 2x4"].status,
                runs["stackbot/tests: amax-group 2x4"].conclusion,
            )
        )
    assert seen == [("queued", None), ("in_progress", None), ("completed", "success")]
    run = {r.name: r for r in pipeline.control.check_runs(pipeline.repo, head)}[
        "stackbot/tests: amax-group 2x4"
    ]
    assert run.title == "23 passed · main: 14 passed, 9 failed"
    assert run.external_id == f"{number}/amax-group/2x4"
    assert run.summary is not None and "9 newly pass" in run.summary
    # A push: the new head gets its own check runs, the old head's stay as they were.
    new_head = push(pipeline, number, author="carol")
    pipeline.deliver()
    publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number, "queued")])
    assert [r.status for r in pipeline.control.check_runs(pipeline.repo, new_head)] == [
        "completed",  # stackbot/approval: approved
        "queued",
        "queued",
    ]
    assert len(pipeline.control.check_runs(pipeline.repo, head)) == 3


def test_the_sticky_comment_is_found_by_its_marker_when_the_database_forgot_it(
    pipeline: Pipeline,
) -> None:
    [number] = open_prs(pipeline, 1)
    client = pipeline.client()
    publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number)])
    [sticky] = pipeline.stickies(number)
    pipeline.control.comment(pipeline.repo, number, "bob", f"> {MARKER}\n> quoting the bot")
    forget_report(pipeline, number)
    sent = len(writes(pipeline))
    unchanged = publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number)])
    assert writes(pipeline)[sent:] == [  # the check runs' ids were forgotten too, the comment not
        ("POST", f"/repos/{pipeline.repo}/check-runs"),
        ("POST", f"/repos/{pipeline.repo}/check-runs"),
        ("POST", f"/repos/{pipeline.repo}/check-runs"),
    ]
    assert unchanged.comments_created == 0 and unchanged.comments_edited == 0
    forget_report(pipeline, number)
    changed = publish_reports(
        pipeline.engine, client, pipeline.repo, [view(pipeline, number, "running")]
    )
    assert (changed.comments_created, changed.comments_edited) == (0, 1)
    [edited] = pipeline.stickies(number)
    assert edited.id == sticky.id and "running" in edited.body


def test_a_deleted_sticky_comment_is_posted_again(pipeline: Pipeline) -> None:
    [number] = open_prs(pipeline, 1)
    client = pipeline.client()
    publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number)])
    [sticky] = pipeline.stickies(number)
    deleted = httpx.delete(
        f"{pipeline.standin.url}/repos/{pipeline.repo}/issues/comments/{sticky.id}",
        headers={"Authorization": f"token {pipeline.standin.bob_token}"},
    )
    assert deleted.status_code == 204, deleted.text
    counts = publish_reports(
        pipeline.engine, client, pipeline.repo, [view(pipeline, number, "running")]
    )
    assert counts.comments_created == 1
    [again] = pipeline.stickies(number)
    assert again.id != sticky.id


def test_commit_statuses_stand_in_when_check_runs_are_refused(pipeline: Pipeline) -> None:
    [number] = open_prs(pipeline, 1)
    client = pipeline.client()
    head = pipeline.head(number)
    pipeline.control.inject_fault(
        "checks_forbidden", method="POST|PATCH", path="/check-runs", count=1000
    )
    publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number, "running")])
    statuses = {s.context: s for s in pipeline.control.statuses(pipeline.repo, head)}
    assert sorted(statuses) == [
        "stackbot/approval",
        "stackbot/tests: amax-group 2x4",
        "stackbot/tests: blockwise-recipe 1x4",
    ]
    assert statuses["stackbot/tests: amax-group 2x4"].state == "pending"
    tried = len([r for r in pipeline.control.requests("POST", "/check-runs")])
    publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number, "passed")])
    # the fallback is remembered: no second refused attempt per check
    assert len([r for r in pipeline.control.requests("POST", "/check-runs")]) == tried
    latest = {
        s.context: s for s in pipeline.control.statuses(pipeline.repo, head)
    }  # the last per context wins
    assert latest["stackbot/tests: amax-group 2x4"].state == "success"
    assert (
        latest["stackbot/tests: amax-group 2x4"].description
        == "23 passed · main: 14 passed, 9 failed"
    )
    assert pipeline.control.check_runs(pipeline.repo, head) == []


def test_views_built_from_the_database_publish(pipeline: Pipeline) -> None:
    numbers = open_prs(pipeline, 3)
    with session_scope(pipeline.engine) as session:
        views = build_report_views(session, pipeline.settings, repo=pipeline.repo, numbers=numbers)
    counts = publish_reports(pipeline.engine, pipeline.client(), pipeline.repo, views)
    # no jobs yet: only the pending stackbot/approval of each PR
    assert counts.comments_created == 3 and counts.checks_created == 3
    body = pipeline.stickies(numbers[0])[0].body
    assert f"a vetter must comment `/ok to test {pipeline.head(numbers[0])[:7]}`" in body
    assert f"http://stackbot.test/pulls/{numbers[0]}" in body


def forget_report(pipeline: Pipeline, number: int) -> None:
    with session_scope(pipeline.engine) as session:
        repository = store.get_repository(session, full_name=pipeline.repo)
        assert repository is not None and repository.id is not None
        store.delete_report(session, repo_id=repository.id, pr_number=number)


def test_the_integration_checks_link_moves_to_the_series_run_where_it_conflicts(
    pipeline: Pipeline,
) -> None:
    """#8050's case: its stack run is clean (the check links it), then the series run finds a
    conflict with a PR it does not depend on: the failing check must link the series run, not
    the clean stack run it was created with."""
    [number] = open_prs(pipeline, 1)
    client = pipeline.client()
    head = pipeline.head(number)
    stack = IntegrationView(
        "stack", "clean", "main", "7" * 40, "5" * 40, (StepView(number, "clean"),), url="u/runs/3"
    )
    clean = replace(view(pipeline, number), stack_integration=stack)
    publish_reports(pipeline.engine, client, pipeline.repo, [clean])
    checks = {r.name: r for r in pipeline.control.check_runs(pipeline.repo, head)}
    assert checks["stackbot/integration"].details_url == "u/runs/3"
    steps = (
        StepView(number + 1, "clean"),
        StepView(number, "conflict", conflicting_paths=("a.py",), conflicts_with=(number + 1,)),
    )
    series = IntegrationView("series", "conflict", "main", "7" * 40, None, steps, url="u/runs/5")
    publish_reports(
        pipeline.engine, client, pipeline.repo, [replace(clean, series_integration=series)]
    )
    checks = {r.name: r for r in pipeline.control.check_runs(pipeline.repo, head)}
    integration = checks["stackbot/integration"]
    assert integration.conclusion == "failure"
    assert integration.details_url == "u/runs/5"
    assert integration.summary is not None and "sibling conflict" in integration.summary


def test_a_test_check_run_the_new_tree_lacks_is_completed_not_left_queued(
    pipeline: Pipeline,
) -> None:
    """A stacked PR's check runs for an earlier tree (its parent's test files counted as its own
    until the parent joined the series) must not stay queued when the current tree has no such
    rows: a required check left queued blocks the merge for good."""
    [number] = open_prs(pipeline, 1)
    client = pipeline.client()
    publish_reports(pipeline.engine, client, pipeline.repo, [view(pipeline, number, "queued")])
    publish_reports(
        pipeline.engine, client, pipeline.repo, [replace(view(pipeline, number), tests=())]
    )
    runs = {r.name: r for r in pipeline.control.check_runs(pipeline.repo, pipeline.head(number))}
    tests = [r for name, r in runs.items() if name.startswith("stackbot/tests: ")]
    assert len(tests) == 2, runs
    assert all(r.status == "completed" and r.conclusion == "neutral" for r in tests), tests
    assert all("no longer run" in (r.title or "") for r in tests)
    # and nothing is written again while it stays so
    again = publish_reports(
        pipeline.engine, client, pipeline.repo, [replace(view(pipeline, number), tests=())]
    )
    assert again.writes == 0
