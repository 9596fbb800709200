"""Infra failures as stored and shown (issue 26 point 3), on SQLite and PostgreSQL: a job the node
found an infrastructure signature in shows the matched line on its page and in the PR's report;
a job where most tests fail at once is stored as infra (no test outcomes, retried), and the same
on the retry's node counts as the tree's failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from gpu_jobs.result import Counts, JobResult, TestResult
from stackbot.config import load_settings
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, Job
from stackbot.db.models import TestResult as TestRow
from stackbot.domain.infra_failures import mass_failure, signature_of
from stackbot.domain.report import render_sticky_comment
from stackbot.domain.retries import infra_cause
from stackbot.services.job_execution import record_result
from stackbot.services.report_views import build_report_view
from tests.support.dashboard_data import REPO, seed_series

LINE = (
    "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1121, "
    "OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600047 "
    "milliseconds before timing out."
)
MESSAGE = (
    f"infra signature nccl-watchdog-timeout (nccl) on rank 3: {LINE}; the machine failed, not "
    "the tests: not counted (1 of 40 tests failed or errored on ranks 3; first: "
    "tests/unit_tests/test_parallel_state.py::test_allreduce)"
)
CAUSE = (
    "rank 3, matched nccl-watchdog-timeout:\n"
    "tests/unit_tests/test_parallel_state.py .\n"
    f"[rank3]:[E1204 17:02:11.201934 ProcessGroupNCCL.cpp:616] {LINE}"
)


def a_tree_job(engine: Engine) -> tuple[int, int]:
    seed_series(engine, prs=2)
    with Session(engine) as session:
        row = session.exec(
            select(Job).where(col(Job.integration_run_id).is_not(None)).order_by(col(Job.id))
        ).first()
        assert row is not None and row.id is not None and row.integration_run_id is not None
        run = session.get(IntegrationRun, row.integration_run_id)
        assert run is not None and run.target_pr is not None
        return row.id, run.target_pr


def made_tests(
    failed: int, passed: int, message: str = "AssertionError: boom"
) -> tuple[TestResult, ...]:
    made = [
        TestResult(f"tests/unit_tests/test_m.py::test_{i}", "failed", 0.1, {0: "failed"}, message)
        for i in range(failed)
    ]
    made += [
        TestResult(f"tests/unit_tests/test_m.py::test_ok_{i}", "passed", 0.1, {0: "passed"})
        for i in range(passed)
    ]
    return tuple(made)


def failed_result(job_id: int, failed: int, passed: int) -> JobResult:
    tests = made_tests(failed, passed)
    return JobResult(
        job_id=f"job-{job_id}",
        status="failed",
        message=f"{failed} of {failed + passed} tests failed or errored on ranks 0",
        tests=tests,
        counts=Counts.of_tests({t.nodeid: t.outcome for t in tests}),
        failed_ranks=(0,),
        nodes=("gpu-07",),
    )


def test_an_infra_signature_shows_its_line_on_the_job_page_and_in_the_report(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    job_id, pr = a_tree_job(engine)
    result = JobResult(
        job_id=f"job-{job_id}", status="infra", message=MESSAGE, cause=CAUSE, error_of="node"
    )
    record_result(engine, job_id, result, node="gpu-07")

    page = client.get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert "infra signature nccl-watchdog-timeout (nccl) on rank 3" in page.text
    cause = page.text.split('<pre class="cause">', 1)[1].split("</pre>", 1)[0]
    assert "[Rank 3] Watchdog caught collective operation timeout" in cause
    stored = client.get(f"/api/jobs/{job_id}").json()
    assert stored["status"] == "infra" and stored["result"]["error_of"] == "node"

    settings = load_settings(dev=True, data_dir=tmp_path / "data")
    with session_scope(engine) as session:
        view = build_report_view(session, settings, repo=REPO, number=pr)
    assert view is not None
    comment = render_sticky_comment(view)
    assert "job infra: infra signature nccl-watchdog-timeout (nccl) on rank 3: [Rank 3]" in (
        comment
    ), comment
    # The retry note's words for it: the signature and the line itself.
    assert infra_cause(MESSAGE).startswith(
        "nccl-watchdog-timeout on rank 3: “[Rank 3] Watchdog caught collective operation timeout"
    )


def test_most_tests_failing_at_once_is_infra_once_then_the_trees(engine: Engine) -> None:
    job_id, _ = a_tree_job(engine)
    record_result(engine, job_id, failed_result(job_id, failed=25, passed=5), node="gpu-07")
    with Session(engine) as session:
        first = session.get(Job, job_id)
        assert first is not None
        assert first.status == "infra", first.error
        assert first.error is not None and first.error.startswith(
            "mass failure: 25 of 30 tests failed at once; the machine failed, not the tests"
        )
        assert first.counts == {k: 0 for k in first.counts}  # nothing counted
        assert first.result is not None and first.result["error_of"] == "node"
        assert "25 of 30 tests failed at once, among them:" in first.result["cause"]
        stored = session.exec(select(TestRow.nodeid).where(TestRow.job_id == job_id)).all()
        assert not [n for n in stored if "test_m.py" in n]  # no outcome of this result stored
        # The planner's retry of it, on another node.
        fields = first.model_dump(exclude={"id", "status", "result", "error", "counts"})
        retry = Job(
            **{**fields, "purpose": "retry", "retry_of_job_id": job_id, "status": "running"}
        )
        session.add(retry)
        session.commit()
        assert retry.id is not None
        retry_id = retry.id
    record_result(engine, retry_id, failed_result(retry_id, failed=25, passed=5), node="gpu-03")
    with Session(engine) as session:
        again = session.get(Job, retry_id)
        assert again is not None and again.status == "failed", again.error
        failing = session.exec(
            select(TestRow).where(TestRow.job_id == retry_id, TestRow.outcome == "failed")
        ).all()
        assert len(failing) == 25  # the same on a second node: the tree's failures, counted


@pytest.mark.parametrize(
    ("failed", "passed", "expected"),
    [
        (25, 5, (25, 30)),
        (10, 9, (10, 19)),  # the smallest mass failure: 10 failing, more than half
        (9, 0, None),  # too few to blame the machine: the confirming rerun decides
        (12, 18, None),  # not most
        (15, 15, None),  # half is not most
    ],
)
def test_most_means_more_than_half_and_at_least_ten(
    failed: int, passed: int, expected: tuple[int, int] | None
) -> None:
    found = mass_failure((t.outcome, t.message) for t in made_tests(failed, passed))
    assert (None if found is None else (found.failed, found.judged)) == expected


def test_tests_not_judged_or_tolerated_do_not_make_a_mass_failure() -> None:
    not_judged = [("error", "not judged: tests/unit_tests/x.py needs 8 ranks, this job has 4")] * 40
    tolerated = [("flaky", "tolerated: marked flaky (was failed)")] * 40
    real = [("failed", "AssertionError")] * 5 + [("passed", "")] * 10
    assert mass_failure([*not_judged, *tolerated, *real]) is None
    assert signature_of("rank 1 was lost (killed by SIGKILL) after 3 test results") is None
