"""Reads and writes of GPU jobs and their per-test results (the ``jobs`` and ``test_results``
tables). Keyword-only functions, no business rules: the services decide, these fetch and store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import update
from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun, Job, TestResult
from stackbot.db.models._columns import utcnow
from stackbot.db.models.jobs import (
    FINISHED_STATES,
    IN_FLIGHT_STATES,
    NOT_REUSABLE_STATES,
    STARTING,
)
from stackbot.domain.integration import RunKind


def get_job(session: Session, *, job_id: int) -> Job | None:
    return session.get(Job, job_id)


def jobs_by_ids(session: Session, *, job_ids: Iterable[int]) -> list[Job]:
    ids = list(job_ids)
    if not ids:
        return []
    return list(session.exec(select(Job).where(col(Job.id).in_(ids))))


def jobs_of_run(session: Session, *, run_id: int) -> list[Job]:
    """The run's jobs, oldest first."""
    return list(
        session.exec(select(Job).where(Job.integration_run_id == run_id).order_by(col(Job.id)))
    )


def jobs_of_runs(session: Session, *, run_ids: Sequence[int]) -> list[Job]:
    if not run_ids:
        return []
    return list(session.exec(select(Job).where(col(Job.integration_run_id).in_(list(run_ids)))))


def baseline_job_exists(session: Session, *, commit_sha: str, config_hash: str) -> bool:
    """Whether the base commit has a job of this configuration whose outcome counts."""
    found = session.exec(
        select(Job.id).where(
            Job.kind == "baseline",
            Job.commit_sha == commit_sha,
            Job.config_hash == config_hash,
            col(Job.status).not_in(list(NOT_REUSABLE_STATES)),
        )
    ).first()
    return found is not None


def reusable_job(session: Session, *, tree: str, config_hash: str) -> Job | None:
    """The newest original job (never a copy) on ``tree`` with this configuration whose
    outcome counts."""
    return session.exec(
        select(Job)
        .where(
            Job.tree_sha == tree,
            Job.config_hash == config_hash,
            col(Job.reused_from_job_id).is_(None),
            col(Job.status).not_in(list(NOT_REUSABLE_STATES)),
        )
        .order_by(col(Job.id).desc())
    ).first()


def finished_baselines(session: Session, *, repo_id: int, commit_sha: str) -> list[Job]:
    """The finished baseline jobs on a base commit, oldest first."""
    return list(
        session.exec(
            select(Job)
            .where(
                Job.repo_id == repo_id,
                Job.kind == "baseline",
                Job.commit_sha == commit_sha,
                col(Job.status).in_(list(FINISHED_STATES)),
            )
            .order_by(col(Job.id))
        )
    )


def copies_of(session: Session, *, job_id: int) -> list[Job]:
    """The jobs that took (or wait for) this job's outcome."""
    return list(session.exec(select(Job).where(Job.reused_from_job_id == job_id)))


def in_flight_jobs(session: Session) -> list[Job]:
    return list(session.exec(select(Job).where(col(Job.status).in_(list(IN_FLIGHT_STATES)))))


def queued_originals(session: Session) -> list[Job]:
    """Queued jobs that run themselves (copies wait for their original), oldest first."""
    return list(
        session.exec(
            select(Job)
            .where(Job.status == "queued", col(Job.reused_from_job_id).is_(None))
            .order_by(col(Job.id))
        )
    )


def starting_jobs(session: Session) -> list[Job]:
    """Jobs whose start was intended and whose handle is not stored yet, oldest first."""
    return list(session.exec(select(Job).where(Job.status == STARTING).order_by(col(Job.id))))


def mark_starting(session: Session, *, job_id: int, executor: str, out_dir: str) -> bool:
    """``queued`` → ``starting`` with the out_dir the executor will use; False when the job
    is no longer queued (another pass took it)."""
    done = session.execute(
        update(Job)
        .where(col(Job.id) == job_id, col(Job.status) == "queued")
        .values(status=STARTING, executor=executor, out_dir=out_dir)
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]


def unmark_starting(session: Session, *, job_id: int) -> None:
    """``starting`` → ``queued``: the executor started nothing (no room)."""
    session.execute(
        update(Job)
        .where(col(Job.id) == job_id, col(Job.status) == STARTING)
        .values(status="queued")
    )


def record_handle(
    session: Session, *, job_id: int, executor: str, external_id: str, out_dir: str
) -> bool:
    """``starting`` → ``submitted`` with the executor's handle, in one statement; False when
    the job was not starting (a stale pass: the handle is already stored)."""
    done = session.execute(
        update(Job)
        .where(col(Job.id) == job_id, col(Job.status) == STARTING)
        .values(
            status="submitted",
            executor=executor,
            external_id=external_id,
            out_dir=out_dir,
            submitted_at=utcnow(),
        )
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]


def count_unfinished(session: Session) -> int:
    return len(
        session.exec(select(Job.id).where(col(Job.status).not_in(list(FINISHED_STATES)))).all()
    )


def add_test_results(session: Session, *, results: Iterable[TestResult]) -> None:
    session.add_all(list(results))


def results_of_job(session: Session, *, job_id: int) -> list[TestResult]:
    """A job's per-test results by node id."""
    return list(
        session.exec(
            select(TestResult).where(TestResult.job_id == job_id).order_by(col(TestResult.nodeid))
        )
    )


def runs_of_jobs(session: Session, *, jobs: Sequence[Job]) -> list[IntegrationRun]:
    """The runs these jobs test, and for baseline jobs every stack run on their base commit."""
    run_ids = {j.integration_run_id for j in jobs if j.integration_run_id is not None}
    base_shas = {j.commit_sha for j in jobs if j.kind == "baseline"}
    runs = list(session.exec(select(IntegrationRun).where(col(IntegrationRun.id).in_(run_ids))))
    if base_shas:
        runs += list(
            session.exec(
                select(IntegrationRun).where(
                    col(IntegrationRun.base_sha).in_(base_shas),
                    IntegrationRun.kind == RunKind.STACK,
                )
            )
        )
    return runs
