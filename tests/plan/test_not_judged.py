"""A target run on fewer ranks than it needs is "not judged" (issue 24 point 6): its tests are
never suspects, never rerun or bisected, never blamed on a PR; its row is neutral in the verdict
and its check run; the job's error is the configuration's. On both databases for the planner."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.result import Counts, TestResult
from gpu_jobs.spec import JobResult
from stackbot.db import jobs_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep, Job, Repository
from stackbot.domain import report_lines
from stackbot.domain.comparison import Comparison
from stackbot.domain.report_checks import row_conclusion
from stackbot.domain.report_view import TestRow
from stackbot.domain.verdict_kinds import row_state
from stackbot.services import test_plan
from stackbot.services.job_execution import record_result

GRID = "tests/unit_tests/test_hyper_comm_grid.py"
NOTE = f"not judged: {GRID} needs 8 ranks, this job has 4"


def _short_of_ranks(job_id: int) -> JobResult:
    tests = (
        TestResult(f"{GRID}::test_fits", "passed", 0.1, {0: "passed"}),
        TestResult(f"{GRID}::test_grid_2x2x2", "error", 0.1, {0: "error"}, NOTE),
    )
    return JobResult(
        job_id=f"stackbot-job-{job_id}",
        status="error",
        message=f"{GRID} needs 8 ranks and ran on 4 (shape 1x4): 1 of its tests ... not judged",
        error_of="configuration",
        test_set="own:8035",
        shape="1x4",
        counts=Counts(passed=1, error=1),
        tests=tests,
    )


def test_the_planner_neither_reruns_nor_bisects_nor_blames_tests_it_could_not_judge(
    engine: Engine,
) -> None:
    with session_scope(engine) as session:
        repo = Repository(full_name="o/r", clone_url="file:///nowhere")
        session.add(repo)
        session.flush()
        assert repo.id is not None
        run = IntegrationRun(
            repo_id=repo.id,
            kind="series",
            name="series-1",
            series_key="#1",
            base_ref="main",
            base_sha="b" * 40,
            status="clean",
            final_tree="f" * 40,
            final_commit="e" * 40,
            heads={"8034": "1" * 40, "8035": "2" * 40},
        )
        session.add(run)
        session.flush()
        assert run.id is not None
        for position, (pr, tree) in enumerate(((8034, "d" * 40), (8035, "f" * 40)), 1):
            session.add(
                IntegrationStep(
                    run_id=run.id,
                    position=position,
                    pr_number=pr,
                    head_sha=str(position) * 40,
                    outcome="clean",
                    tree=tree,
                    commit=str(position + 2) * 40,
                )
            )
        job = Job(
            repo_id=repo.id,
            integration_run_id=run.id,
            test_set="own:8035",
            shape="1x4",
            tree_sha="f" * 40,
            commit_sha="e" * 40,
            config_hash="h" * 64,
            targets=[GRID],
        )
        session.add(job)
        session.flush()
        run_id, job_id = run.id, job.id
    assert job_id is not None
    record_result(engine, job_id, _short_of_ranks(job_id), node="gpu-01")
    outcome = test_plan.plan_run(engine, run_id, policy="series-first", infra_retries=2)
    assert outcome.created == []  # no confirming rerun, no bisection
    assert outcome.final
    with Session(engine) as session:
        assert jobs_store.findings_of_run(session, run_id=run_id) == []
        stored = jobs_store.get_job(session, job_id=job_id)
        assert stored is not None and stored.result is not None
        assert stored.result["error_of"] == "configuration"


def test_a_not_judged_row_is_neutral_never_a_failure_of_the_pr() -> None:
    comparison = Comparison(
        counts=Counts(passed=1, error=1),
        main_counts=None,
        failing_new=(f"{GRID}::test_grid_2x2x2",),
    )
    row = TestRow("own:8035", "1x4", "error", comparison, error_of="configuration")
    assert row_state(row) == "not-judged"
    assert row_conclusion(row) == "neutral"
    assert "not judged: run on fewer ranks than its tests need" in report_lines.test_line(row)
    # The same failure on enough ranks (or of the tree) is a failure.
    tree_error = TestRow("own:8035", "2x4", "error", comparison, error_of="tree")
    assert row_state(tree_error) == "new-failures"
    assert row_conclusion(tree_error) == "failure"
