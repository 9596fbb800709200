"""Excluded nodes on the dashboard, the JSON API and the CLI (issue 26 point 4), on SQLite and
PostgreSQL: two infra jobs in a row on one node (an NCCL watchdog timeout each, recorded by the
real ``record_result``) exclude it; the quarantine page and ``/api/nodes`` show which jobs, the
signature lines and since when; ``stackbot nodes`` lists it, asks for its check, re-admits it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from gpu_jobs.result import JobResult
from stackbot.cli.main import main
from stackbot.db import nodes_store
from stackbot.db.models import Job, Task
from stackbot.domain.broken_nodes import NodePolicy
from stackbot.services import broken_nodes
from stackbot.services.job_execution import record_result
from tests.dashboard.test_infra_failures import CAUSE, LINE, MESSAGE
from tests.support.dashboard_data import seed_series


def _tree_jobs(engine: Engine, count: int) -> list[int]:
    seed_series(engine, prs=2)
    with Session(engine) as session:
        rows = session.exec(
            select(Job).where(col(Job.integration_run_id).is_not(None)).order_by(col(Job.id))
        ).all()
        return [r.id for r in rows if r.id is not None][:count]


def _infra(job_id: int) -> JobResult:
    return JobResult(
        job_id=f"job-{job_id}",
        status="infra",
        message=MESSAGE,
        cause=CAUSE,
        error_of="node",
        nodes=("gpu-07",),
    )


def _two_infra_in_a_row(engine: Engine) -> list[int]:
    first, second = _tree_jobs(engine, 2)
    record_result(engine, first, _infra(first), node="gpu-07")
    record_result(engine, second, _infra(second), node="gpu-07")
    broken_nodes.review_nodes(engine, policy=NodePolicy(), now=datetime.now(UTC))
    return [first, second]


def test_the_quarantine_page_and_the_api_show_an_excluded_node_with_its_evidence(
    client: TestClient, engine: Engine
) -> None:
    assert "No node is excluded." in client.get("/quarantine").text
    jobs = _two_infra_in_a_row(engine)
    html = client.get("/quarantine").text
    section = html.split('id="excluded-nodes"', 1)[1].split("</table>", 1)[0]
    assert '<tr data-node="gpu-07">' in section
    for job_id in jobs:
        assert f'<a href="/jobs/{job_id}">job {job_id}</a>' in section
    assert "nccl-watchdog-timeout" in section and "Watchdog caught collective" in section
    data = client.get("/api/nodes").json()
    [node] = data["excluded"]
    assert node["node"] == "gpu-07" and node["state"] == "excluded"
    assert [e["job"] for e in node["evidence"]] == jobs
    assert all(
        e["line"] == LINE and e["signature"] == "nccl-watchdog-timeout" for e in node["evidence"]
    )
    assert node["excluded_at"] and node["checks"] == []
    assert data["rule"] == {
        "infra_count": 2,
        "window_hours": 72,
        "recheck_minutes": 30,
        "recheck_max_hours": 24,
    }


def test_a_clean_job_between_two_infra_failures_keeps_the_node_in(engine: Engine) -> None:
    first, clean, second = _tree_jobs(engine, 3)
    record_result(engine, first, _infra(first), node="gpu-07")
    passed = JobResult(job_id=f"job-{clean}", status="passed", nodes=("gpu-07",))
    record_result(engine, clean, passed, node="gpu-07")
    record_result(engine, second, _infra(second), node="gpu-07")
    assert broken_nodes.review_nodes(engine, policy=NodePolicy(), now=datetime.now(UTC)) == []


@pytest.fixture
def cli_env(
    engine: Engine, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKBOT_DATABASE_URL", database_url)
    monkeypatch.setenv("STACKBOT_DATA_DIR", str(tmp_path / "data"))


def test_the_cli_lists_checks_and_readmits_an_excluded_node(
    engine: Engine, cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = _two_infra_in_a_row(engine)
    assert main(["nodes", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [n["node"] for n in listed["excluded"]] == ["gpu-07"]
    assert main(["nodes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gpu-07: excluded since")
    assert f"job {jobs[0]} " in out and "[nccl-watchdog-timeout]" in out

    assert main(["nodes", "check", "gpu-07"]) == 0
    with Session(engine) as session:
        row = nodes_store.entry(session, node="gpu-07")
        polls = session.exec(select(Task).where(Task.kind == "poll_jobs")).all()
    assert row is not None and row.check_asked and polls

    assert main(["nodes", "readmit", "gpu-07", "--by", "maintainer-p"]) == 0
    with Session(engine) as session:
        row = nodes_store.entry(session, node="gpu-07")
    assert row is not None and row.state == "readmitted" and row.ended_by == "maintainer-p"
    assert nodes_store.excluded(Session(engine)) == []


def test_naming_a_node_that_is_not_excluded_is_exit_2_with_one_line(
    engine: Engine, cli_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _two_infra_in_a_row(engine)
    assert main(["nodes", "readmit", "gpu-99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gpu-99" in err[0] and "excluded now: gpu-07" in err[0]
    assert "Traceback" not in err[0]
