"""Quarantined tests and the evidence they are decided on (issue 26)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun, Job, QuarantineEntry, TestFinding, TestResult
from stackbot.domain.quarantine import ACTIVE, FlakyObservation

# The test plan's classes of a failure that passed on a rerun of the same tree.
_FLAKY_CLASSES = ("flaky", "quarantined")


def entries(session: Session, *, repo_id: int) -> list[QuarantineEntry]:
    return list(
        session.exec(
            select(QuarantineEntry)
            .where(QuarantineEntry.repo_id == repo_id)
            .order_by(col(QuarantineEntry.started_at).desc(), col(QuarantineEntry.nodeid))
        )
    )


def entry(session: Session, *, repo_id: int, nodeid: str) -> QuarantineEntry | None:
    return session.exec(
        select(QuarantineEntry)
        .where(QuarantineEntry.repo_id == repo_id)
        .where(QuarantineEntry.nodeid == nodeid)
    ).first()


def active_tests(session: Session, *, repo_id: int) -> frozenset[str]:
    rows = session.exec(
        select(QuarantineEntry.nodeid)
        .where(QuarantineEntry.repo_id == repo_id)
        .where(QuarantineEntry.state == ACTIVE)
    ).all()
    return frozenset(rows)


def flaky_observations(
    session: Session, *, repo_id: int, since: datetime
) -> list[FlakyObservation]:
    """Every flaky event of the repository's runs whose failing job finished since ``since``,
    by the jobs that ran (a reused copy is read as its original)."""
    rows = session.exec(
        select(TestFinding)
        .join(IntegrationRun, col(TestFinding.run_id) == col(IntegrationRun.id))
        .where(col(IntegrationRun.repo_id) == repo_id)
        .where(col(TestFinding.failure_class).in_(_FLAKY_CLASSES))
    ).all()
    pairs: list[tuple[TestFinding, int, int | None]] = []
    for row in rows:
        evidence = row.evidence or {}
        failed_id, passed_id = _last(evidence.get("failed_in")), _last(evidence.get("passed_in"))
        if failed_id is not None:
            pairs.append((row, failed_id, passed_id))
    ids = {j for _, f, p in pairs for j in (f, p) if j is not None}
    jobs = _jobs(session, ids)
    originals = {j.reused_from_job_id for j in jobs.values() if j.reused_from_job_id}
    jobs.update(_jobs(session, originals - set(jobs)))

    def original(job_id: int | None) -> Job | None:
        job = jobs.get(job_id) if job_id is not None else None
        if job is not None and job.reused_from_job_id is not None:
            return jobs.get(job.reused_from_job_id, job)
        return job

    found: list[FlakyObservation] = []
    for row, failed_ref, passed_ref in pairs:
        failed, passed = original(failed_ref), original(passed_ref)
        if failed is None or failed.id is None or failed.finished_at is None:
            continue
        at = _aware(failed.finished_at)
        if at < since:
            continue
        found.append(
            FlakyObservation(
                nodeid=row.nodeid,
                test_set=row.test_set,
                shape=row.shape,
                tree=failed.tree_sha,
                failed_job=failed.id,
                passed_job=passed.id if passed is not None else None,
                at=at,
            )
        )
    return found


def outcomes_since(session: Session, *, repo_id: int, nodeid: str, since: datetime) -> list[str]:
    """The test's results in jobs that ran (not reused copies) and finished since ``since``,
    oldest first."""
    rows = session.exec(
        select(TestResult.outcome, Job.finished_at, Job.id)
        .join(Job, col(TestResult.job_id) == col(Job.id))
        .where(col(Job.repo_id) == repo_id)
        .where(col(TestResult.nodeid) == nodeid)
        .where(col(Job.reused_from_job_id).is_(None))
        .where(col(Job.finished_at).is_not(None))
    ).all()
    kept = [(_aware(at), job_id, outcome) for outcome, at, job_id in rows if at is not None]
    return [outcome for at, _, outcome in sorted(kept) if at >= since]


def failed_every_time_since(
    session: Session, *, repo_id: int, nodeid: str, since: datetime
) -> bool:
    """Whether the plan found the test ``new`` while it was quarantined: it failed on the same
    tree every time (three runs), which a quarantine never hides."""
    rows = session.exec(
        select(TestFinding.updated_at)
        .join(IntegrationRun, col(TestFinding.run_id) == col(IntegrationRun.id))
        .where(col(IntegrationRun.repo_id) == repo_id)
        .where(col(TestFinding.nodeid) == nodeid)
        .where(col(TestFinding.failure_class) == "new")
    ).all()
    return any(_aware(at) >= since for at in rows)


def _last(value: object) -> int | None:
    if isinstance(value, list) and value:
        last = value[-1]
        if isinstance(last, int) or str(last).isdigit():
            return int(last)
    return None


def _jobs(session: Session, ids: Sequence[int] | set[int]) -> dict[int, Job]:
    wanted = sorted(i for i in ids if i is not None)
    if not wanted:
        return {}
    return {j.id: j for j in session.exec(select(Job).where(col(Job.id).in_(wanted))) if j.id}


def _aware(at: datetime) -> datetime:
    from datetime import UTC

    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
