"""One reader of a job row's test outcomes (issue 23): the report, the PR's own-test files and
the test planner read the same job the same way, so they cannot disagree about it."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db import integration_store, jobs_store
from stackbot.db.engine import session_scope
from stackbot.db.models import Job, PullRequest, TestResult
from stackbot.domain.job_outcomes import job_outcomes
from stackbot.services import job_execution, report_views
from stackbot.services import own_tests as own_service
from stackbot.services.test_plan import plan_run
from tests.plan.test_own_tests import FILES, _create, _jobs, _result, _run

CTX = "tests/unit_tests/test_ctx.py"
HERE = {f"{CTX}::test_0": "passed", f"{CTX}::test_broken": "failed"}


def _without_status() -> dict[str, Any]:
    return {"tests": [{"nodeid": n, "outcome": o} for n, o in HERE.items()]}


@pytest.mark.parametrize(
    ("result", "rows"),
    [
        pytest.param(_without_status(), False, id="the result's status is the row's"),
        pytest.param(None, True, id="no result, per-test rows"),
    ],
)
def test_the_report_the_own_tests_and_the_planner_read_a_job_alike(
    engine: Engine, settings: Settings, result: dict[str, Any] | None, rows: bool
) -> None:
    # A finished job whose row's status ("failed") stands for the job: its stored result says
    # no status of its own (or there is none and its tests are the per-test rows).
    with session_scope(engine) as session:
        run = _run(session, "stack", [(8034, "h8034"), (8035, "h8035")], own=FILES)
        for n in (8034, 8035):
            session.add(PullRequest(repo_id=run.repo_id, number=n, head_sha=f"h{n}"))
        run_id = run.id
    assert run_id is not None
    _create(engine, settings, run_id)  # the own-files jobs, and main's baseline of test_ctx.py
    jobs = {(j.kind, j.test_set, j.shape): j for j in _jobs(engine)}
    baseline_id = jobs[("baseline", "own", "1x4")].id
    tree_id = jobs[("integration", "own", "1x4")].id
    assert baseline_id is not None and tree_id is not None
    main = {f"{CTX}::test_0": "passed"}
    job_execution.record_result(engine, baseline_id, _result(baseline_id, main), node="n")
    with session_scope(engine) as session:
        job = session.get(Job, tree_id)
        assert job is not None
        job.status, job.result, job.counts = "failed", result, {"passed": 1, "failed": 1}
        session.add(job)
        if rows:
            session.add_all(
                TestResult(job_id=tree_id, nodeid=n, outcome=o) for n, o in HERE.items()
            )

    # The report: one new test failing here, not on main.
    with Session(engine) as session:
        view = report_views.build_report_view(
            session, settings, repo="NVIDIA/Megatron-LM", number=8035
        )
        series = integration_store.get_run(session, run_id=run_id)
        [own] = own_service.own_tests_views(session, 8035, [(series, "the stack")])
    assert view is not None
    [row] = view.tests
    assert row.comparison is not None
    assert row.comparison.failing_new == (f"{CTX}::test_broken",)
    # The PR's own-test files: the same failure, file by file.
    assert f"`{CTX}` (1x4): 1 passed, 1 failed (failing: `test_broken`) vs 1 on main" in [
        f.line() for f in own.files
    ]
    # The planner: the same failure, of a test main does not have (new in this PR), so it is
    # not rerun (a new test is never retried into green): it is bisected to the PR that added it.
    plan_run(engine, run_id, policy="every-stack", infra_retries=1)
    with Session(engine) as session:
        found = {
            (f.nodeid, f.failure_class) for f in jobs_store.findings_of_run(session, run_id=run_id)
        }
    assert found & {(f"{CTX}::test_broken", "new"), (f"{CTX}::test_broken", "bisecting")}, (
        "the planner read no failing test in the job"
    )
    assert not [j for j in _jobs(engine) if j.purpose == "confirm"]


def test_the_reader_falls_back_from_the_result_to_the_rows_to_the_counts() -> None:
    def no_rows() -> dict[str, str]:
        return {}

    def unread() -> dict[str, str]:
        raise AssertionError("the rows are read only when the result cannot be")

    assert job_outcomes("running", _without_status(), {}, unread) is None
    read = job_outcomes("failed", _without_status(), {}, unread)
    assert read is not None and read.status == "failed" and dict(read.tests) == HERE
    # A stored result's own status gives way to the row's.
    stored = {**_without_status(), "status": "passed"}
    read = job_outcomes("timeout", stored, {}, unread)
    assert read is not None and read.status == "timeout" and read.counts.failed == 1
    # An unreadable result: the per-test rows, then the counts alone.
    read = job_outcomes("failed", {"tests": "?"}, {"failed": 2}, lambda: HERE)
    assert read is not None and dict(read.tests) == HERE and read.per_test
    read = job_outcomes("failed", {"tests": "?"}, {"failed": 2}, no_rows)
    assert read is not None and read.counts.failed == 2 and not read.per_test
    assert job_outcomes("failed", None, {"failed": -1}, no_rows) is None
    assert job_outcomes("error", None, {}, no_rows) is None
