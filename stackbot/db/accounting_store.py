"""GPU accounting queries (issue 13 point 5): two aggregate queries per view, whatever the
number of PRs or jobs."""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from stackbot.db.models import Job
from stackbot.domain.accounting import GpuHours


def series_gpu_hours(session: Session, *, series_key: str) -> GpuHours:
    """GPU-hours the jobs of one series spent, by purpose, and what their reused copies saved."""
    return _gpu_hours(session, col(Job.series_key) == series_key)


def runs_gpu_hours(session: Session, *, run_ids: list[int]) -> GpuHours:
    """The same for the jobs of some integration runs (one PR's runs, or one push's)."""
    if not run_ids:
        return GpuHours()
    return _gpu_hours(session, col(Job.integration_run_id).in_(run_ids))


def all_gpu_hours(session: Session) -> GpuHours:
    """The same for every job (main's baselines included)."""
    return _gpu_hours(session, col(Job.id).is_not(None))


def _gpu_hours(session: Session, where: object) -> GpuHours:
    hours = GpuHours()
    spent = session.exec(
        select(Job.purpose, func.coalesce(func.sum(Job.gpu_seconds), 0.0))
        .where(where)  # type: ignore[arg-type]
        .where(col(Job.reused_from_job_id).is_(None))
        .group_by(col(Job.purpose))
    ).all()
    for purpose, seconds in spent:
        hours.add(purpose, float(seconds or 0.0))
    source = aliased(Job)
    saved = session.exec(
        select(func.coalesce(func.sum(source.gpu_seconds), 0.0))
        .select_from(Job)
        .join(source, col(Job.reused_from_job_id) == source.id)
        .where(where)  # type: ignore[arg-type]
    ).one()
    hours.saved_by_reuse = float(saved or 0.0) / 3600.0
    return hours
