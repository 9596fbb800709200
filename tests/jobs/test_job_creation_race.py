"""Two transactions creating the job for one tree and configuration at once (two workers
integrating runs with one tree, or both creating main's jobs) make one original: the second
takes the first's result. On PostgreSQL each would otherwise find no original and make its own
(the e2e "every tree is tested once" failure with two worker processes); on SQLite writes are
serialised. Both databases."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from gpu_jobs.testsets import TestSet
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, Job, Repository
from stackbot.services import jobs as job_service

TREE, COMMIT, BASE_TREE, BASE = "a" * 40, "b" * 40, "c" * 40, "d" * 40
QUICK = TestSet(name="quick", shapes=(), megatron_targets=("tests",), reference_targets=())
REQUESTS = [job_service.JobRequest(QUICK, "1x2"), job_service.JobRequest(QUICK, "2x2")]


def _repo_and_runs(engine: Engine, runs: int) -> tuple[int, list[int]]:
    with session_scope(engine) as session:
        repo = Repository(full_name="acme/widgets", clone_url="https://example.invalid/w.git")
        session.add(repo)
        session.flush()
        assert repo.id is not None
        rows = [
            IntegrationRun(
                repo_id=repo.id,
                kind="stack" if n else "series",
                name=f"run-{n}",
                base_ref="main",
                base_sha=BASE,
                status="clean",
                final_tree=TREE,
                final_commit=COMMIT,
            )
            for n in range(runs)
        ]
        session.add_all(rows)
        session.flush()
        return repo.id, [r.id for r in rows if r.id is not None]


def _at_once(engine: Engine, first: Callable[[Session], Any], second: Callable[[Session], Any]):
    """``first`` creates in a transaction it keeps open until ``second`` (another session, on
    another thread) has finished or waited 2 s; then both commit."""
    created, errors = threading.Event(), []

    def run_first() -> None:
        try:
            with session_scope(engine) as session:
                first(session)
                created.set()
                other.join(timeout=2.0)  # the second creates now, or waits for this commit
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)
            created.set()

    def run_second() -> None:
        created.wait(timeout=10)
        try:
            with session_scope(engine) as session:
                second(session)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    other = threading.Thread(target=run_second)
    one = threading.Thread(target=run_first)
    other.start()
    one.start()
    one.join(timeout=30)
    other.join(timeout=30)
    assert not one.is_alive() and not other.is_alive()
    assert not errors, errors


def _originals(engine: Engine) -> list[Job]:
    with Session(engine) as session:
        return list(session.exec(select(Job).where(col(Job.reused_from_job_id).is_(None))))


def test_two_runs_with_one_tree_make_one_original_per_configuration(engine: Engine) -> None:
    _, (series, stack) = _repo_and_runs(engine, 2)

    def create(run_id: int) -> Callable[[Session], Any]:
        def go(session: Session) -> None:
            run = session.get(IntegrationRun, run_id)
            assert run is not None
            job_service.create_run_jobs(session, run, REQUESTS)

        return go

    _at_once(engine, create(series), create(stack))
    originals = _originals(engine)
    assert sorted((j.tree_sha, j.shape) for j in originals) == [(TREE, "1x2"), (TREE, "2x2")]
    assert {j.integration_run_id for j in originals} == {series}
    with Session(engine) as session:
        copies = session.exec(select(Job).where(Job.integration_run_id == stack)).all()
    assert sorted(j.reused_from_job_id or 0 for j in copies) == sorted(j.id or 0 for j in originals)


def test_two_integrations_make_mains_jobs_once(engine: Engine) -> None:
    repo_id, _ = _repo_and_runs(engine, 0)

    def create(session: Session) -> None:
        job_service.create_baseline_jobs(
            session,
            repo_id=repo_id,
            base_ref="main",
            base_sha=BASE,
            base_tree=BASE_TREE,
            requests=REQUESTS,
        )

    _at_once(engine, create, create)
    with Session(engine) as session:
        baselines = session.exec(select(Job).where(Job.kind == "baseline")).all()
    assert sorted(j.shape for j in baselines) == ["1x2", "2x2"]
