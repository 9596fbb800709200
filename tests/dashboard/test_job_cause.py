"""A job that stopped because the tree's tests could not be loaded shows why: the cause the
node read from the rank's output (gpu_jobs' ``cause``) on the job page and in the API, and its
one-line summary in the PR's report (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, select

from gpu_jobs.result import JobResult
from stackbot.config import load_settings
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, Job
from stackbot.domain.report import render_sticky_comment
from stackbot.services.job_execution import record_result
from stackbot.services.report_views import build_report_view
from tests.support.dashboard_data import REPO, seed_series

SUMMARY = (
    "error of the tree under test: ModuleNotFoundError: No module named 'megatron.training' "
    "while importing tests/unit_tests/conftest.py (rank 0: pytest exit 4, usage error, before "
    "any result)"
)
CAUSE = (
    "rank 0:\n"
    "ImportError while loading conftest 'tests/unit_tests/conftest.py'.\n"
    "tests/unit_tests/conftest.py:14: in <module>\n"
    "    from tests.unit_tests.test_utilities import Utils\n"
    "E   ModuleNotFoundError: No module named 'megatron.training'"
)


def test_the_cause_of_a_conftest_import_error_is_shown_where_the_job_is(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    seed_series(engine, prs=2)
    with Session(engine) as session:
        row = session.exec(
            select(Job).where(Job.integration_run_id.is_not(None))  # type: ignore[union-attr]
        ).first()
        assert row is not None and row.id is not None and row.integration_run_id is not None
        run = session.get(IntegrationRun, row.integration_run_id)
        assert run is not None and run.target_pr is not None
        job_id, pr = row.id, run.target_pr
    result = JobResult(
        job_id=f"job-{job_id}", status="error", message=SUMMARY, cause=CAUSE, error_of="tree"
    )
    record_result(engine, job_id, result, node="gpu-node-1")

    page = client.get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert "No module named &#39;megatron.training&#39; while importing" in page.text
    cause = page.text.split('<pre class="cause">', 1)[1].split("</pre>", 1)[0]
    assert "ImportError while loading conftest &#39;tests/unit_tests/conftest.py&#39;." in cause
    assert "E   ModuleNotFoundError" in cause

    stored = client.get(f"/api/jobs/{job_id}").json()
    assert stored["error"] == SUMMARY
    assert stored["result"]["cause"] == CAUSE and stored["result"]["error_of"] == "tree"

    settings = load_settings(dev=True, data_dir=tmp_path / "data")
    with session_scope(engine) as session:
        view = build_report_view(session, settings, repo=REPO, number=pr)
    assert view is not None
    comment = render_sticky_comment(view)
    assert "No module named 'megatron.training' while importing tests/unit_tests/conftest.py" in (
        comment
    ), comment
