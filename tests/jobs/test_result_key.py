"""A result is keyed by what decides it (issue 24 point 3): the tree, the test set's definition
(targets, markers, conventions), the shape and the runner environment the nodes reported. It is
reused only where all of them match; a changed definition or environment runs the job again.
On both databases, through the service that creates jobs and the one that records results; the
key is on the job page and in its JSON."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.result import Counts, TestResult
from gpu_jobs.spec import JobResult, Shape
from gpu_jobs.testsets import TestSet
from stackbot.db import jobs_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, Job, Repository
from stackbot.services import jobs as job_service
from stackbot.services.job_execution import record_result
from stackbot.web import dashboard

QUICK = TestSet(
    name="quick",
    shapes=(Shape(1, 2),),
    megatron_targets=("tests/test_quick.py",),
    reference_targets=(),
    markers="not internal",
    tolerated_markers=("flaky",),
)
OLD_ENV = {"python": "3.11.7", "torch": "2.5.1", "cuda": "12.4"}
NEW_ENV = {"python": "3.11.7", "torch": "2.6.0", "cuda": "12.6"}


@pytest.fixture
def repo_id(engine: Engine) -> int:
    with session_scope(engine) as session:
        repo = Repository(full_name="o/r", clone_url="file:///nowhere")
        session.add(repo)
        session.flush()
        assert repo.id is not None
        return repo.id


def _run(engine: Engine, repo_id: int, tree: str) -> int:
    with session_scope(engine) as session:
        run = IntegrationRun(
            repo_id=repo_id,
            kind="series",
            name=f"series-{tree[:4]}",
            base_ref="main",
            base_sha="b" * 40,
            status="clean",
            final_tree=tree,
            final_commit=tree[::-1],
            heads={"1": "1" * 40},
        )
        session.add(run)
        session.flush()
        assert run.id is not None
        return run.id


def _jobs_for(engine: Engine, repo_id: int, tree: str, test_set: TestSet = QUICK) -> Job:
    run_id = _run(engine, repo_id, tree)
    with session_scope(engine) as session:
        run = session.get(IntegrationRun, run_id)
        assert run is not None
        (job,) = job_service.create_run_jobs(
            session, run, [job_service.JobRequest(test_set, "1x2")]
        )
        session.flush()
        session.expunge(job)
    return job


def _finish(engine: Engine, job: Job, environment: dict[str, str]) -> None:
    assert job.id is not None
    result = JobResult(
        job_id=f"stackbot-job-{job.id}",
        status="passed",
        test_set=job.test_set,
        shape=job.shape,
        counts=Counts(passed=1),
        tests=(
            TestResult("tests/test_quick.py::test_ok", "passed", 0.1, {0: "passed", 1: "passed"}),
        ),
        environment=environment,
    )
    record_result(engine, job.id, result, node="gpu-01")


def _job(engine: Engine, job_id: int | None) -> Job:
    with Session(engine) as session:
        row = jobs_store.get_job(session, job_id=job_id or 0)
        assert row is not None
        session.expunge(row)
        return row


def test_the_same_key_reuses_and_a_changed_definition_or_environment_does_not(
    engine: Engine, repo_id: int
) -> None:
    tree, other_tree = "a" * 40, "c" * 40
    first = _jobs_for(engine, repo_id, tree)
    assert first.reused_from_job_id is None and first.status == "queued"
    _finish(engine, first, OLD_ENV)
    stored = _job(engine, first.id)
    assert stored.runner_env == OLD_ENV
    assert stored.result_key == job_service.result_key(tree, stored.config_hash, "1x2", OLD_ENV)

    # Same tree, definition, shape and environment: carried, no GPU job.
    same = _jobs_for(engine, repo_id, tree)
    assert same.reused_from_job_id == first.id and same.status == "passed"
    assert _job(engine, same.id).result_key == stored.result_key

    # The test set's definition changed (a marker expression, a convention): run again.
    for changed in (
        replace(QUICK, markers="not internal and not slow"),
        replace(QUICK, tolerated_markers=("flaky", "flaky_in_dev")),
        replace(QUICK, min_world_size={"tests/test_quick.py": 8}),
        replace(QUICK, megatron_targets=("tests/test_quick.py", "tests/test_more.py")),
    ):
        fresh = _jobs_for(engine, repo_id, tree, changed)
        assert fresh.reused_from_job_id is None and fresh.status == "queued", changed

    # The nodes now run another torch/CUDA (a job on another tree reports it): the result
    # obtained with the old environment is no longer reused, the new one is.
    elsewhere = _jobs_for(engine, repo_id, other_tree)
    assert elsewhere.reused_from_job_id is None
    _finish(engine, elsewhere, NEW_ENV)
    with Session(engine) as session:
        assert jobs_store.reusable_job(session, tree=tree, config_hash=stored.config_hash) is None
        found = jobs_store.first_runs_on_trees(
            session, trees=[tree], config_hashes=[stored.config_hash]
        )
        assert found == []  # nor is it a known result for a bisection's prefix
    again = _jobs_for(engine, repo_id, tree)
    assert again.reused_from_job_id is None and again.status == "queued"
    _finish(engine, again, NEW_ENV)
    carried = _jobs_for(engine, repo_id, tree)
    assert carried.reused_from_job_id == again.id
    assert _job(engine, again.id).result_key != stored.result_key


@pytest.fixture
def client(engine: Engine) -> Iterator[TestClient]:
    app = FastAPI()
    app.state.engine = engine
    dashboard.install(app)
    with TestClient(app) as test_client:
        yield test_client


def test_the_job_page_and_its_json_show_the_key(
    engine: Engine, repo_id: int, client: TestClient
) -> None:
    job = _jobs_for(engine, repo_id, "d" * 40)
    pending = client.get(f"/api/jobs/{job.id}").json()["result_key"]
    assert pending == {
        "tree": "d" * 40,
        "test_set_definition": job.config_hash,
        "shape": "1x2",
        "runner_environment": None,
        "digest": None,
    }
    _finish(engine, job, OLD_ENV)
    key = client.get(f"/api/jobs/{job.id}").json()["result_key"]
    assert key["runner_environment"] == OLD_ENV
    assert key["digest"] == job_service.result_key("d" * 40, job.config_hash, "1x2", OLD_ENV)
    page = client.get(f"/jobs/{job.id}").text
    assert f"Result key <code>{key['digest'][:12]}</code>" in page
    assert "CUDA 12.4, Python 3.11.7, torch 2.5.1" in page
    assert f"test set definition <code>{job.config_hash[:12]}</code>" in page
