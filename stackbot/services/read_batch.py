"""What one read of many PR views shares, read once: a memo that lives in the SQLAlchemy
session for the duration of a batch (see :func:`stackbot.services.report_views.build_report_views`).
Outside a batch every lookup reads the database, so a session that writes between two reports
never sees a stale value."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlmodel import Session

from stackbot.db import integration_store, jobs_store
from stackbot.db.models import IntegrationStep, Job
from stackbot.domain.comparison import TestOutcomes
from stackbot.domain.job_outcomes import job_outcomes

T = TypeVar("T")
MEMO = "stackbot.report_views.batch"


@contextmanager
def batch(session: Session) -> Iterator[None]:
    """While building the views of many PRs in one read, what they share (the series run, its
    jobs and their results, main's baselines, the series list) is read once."""
    if MEMO in session.info:
        yield
        return
    session.info[MEMO] = {}
    try:
        yield
    finally:
        session.info.pop(MEMO, None)


def memo(session: Session, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
    """``compute()``, or in a batch the value already computed for ``key``."""
    found: dict[tuple[Any, ...], Any] | None = session.info.get(MEMO)
    if found is None:
        return compute()
    if key not in found:
        found[key] = compute()
    return found[key]  # type: ignore[no-any-return]


def memo_table(session: Session) -> dict[tuple[Any, ...], Any] | None:
    """The batch's memo itself (None outside a batch), for preloading it."""
    found: dict[tuple[Any, ...], Any] | None = session.info.get(MEMO)
    return found


def steps_of(session: Session, run_id: int) -> list[IntegrationStep]:
    return memo(
        session, ("steps", run_id), lambda: integration_store.steps_of(session, run_id=run_id)
    )


def jobs_of_run(session: Session, run_id: int) -> list[Job]:
    return memo(session, ("jobs", run_id), lambda: jobs_store.jobs_of_run(session, run_id=run_id))


def baselines_on(session: Session, repo_id: int, commit_sha: str) -> Sequence[Job]:
    return memo(
        session,
        ("baselines on", repo_id, commit_sha),
        lambda: jobs_store.baselines_on(session, repo_id=repo_id, commit_sha=commit_sha),
    )


def outcomes_of(session: Session, job: Job) -> TestOutcomes | None:
    """What the job's tests did (:func:`stackbot.domain.job_outcomes.job_outcomes` of its row),
    read once per batch; its per-test rows are read only when its result cannot be."""
    if job.id is None:
        return job_outcomes(job.status, job.result, job.counts, dict)
    job_id = job.id

    def stored_tests() -> dict[str, str]:
        rows = memo(
            session, ("results", job_id), lambda: jobs_store.results_of_job(session, job_id=job_id)
        )
        return {row.nodeid: row.outcome for row in rows}

    return memo(
        session,
        ("outcomes", job_id),
        lambda: job_outcomes(job.status, job.result, job.counts, stored_tests),
    )


def prefetch_results(session: Session, jobs: Sequence[Job]) -> None:
    """In a batch, the per-test rows of every job about to be shown, in one query."""
    table = memo_table(session)
    if table is None:
        return
    wanted = [j.id for j in jobs if j.id is not None and ("results", j.id) not in table]
    if wanted:
        for job_id, rows in jobs_store.results_of_jobs(session, job_ids=wanted).items():
            table[("results", job_id)] = rows
