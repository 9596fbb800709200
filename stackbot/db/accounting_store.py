"""GPU accounting queries (issue 13 point 5): a fixed number of aggregate queries per view,
whatever the number of PRs, runs or jobs."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func
from sqlalchemy import select as select_columns
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from gpu_jobs.testsets import is_own_test_set, own_test_set_pr
from stackbot.db.models import IntegrationRun, IntegrationStep, Job
from stackbot.domain.accounting import (
    GpuHours,
    RunFacts,
    SavedRow,
    SeriesAccount,
    SpentRow,
    account_series,
)

_MERGED = ("clean", "resolved")


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


def series_account(session: Session, *, repo_id: int, series_key: str) -> SeriesAccount:
    """One series' account (:func:`stackbot.domain.accounting.account_series`) in five
    queries, whatever the number of PRs, pushes or jobs: its runs, the merged steps of its
    series runs, its jobs' GPU-seconds grouped by run, purpose and configuration, its reused
    copies' sources' GPU-seconds grouped by run and test set, and the trees its jobs tested."""
    in_series: tuple[Any, ...] = (
        col(IntegrationRun.repo_id) == repo_id,
        col(IntegrationRun.series_key) == series_key,
    )
    runs = session.execute(
        select_columns(
            col(IntegrationRun.id),
            col(IntegrationRun.kind),
            col(IntegrationRun.target_pr),
            col(IntegrationRun.base_sha),
            col(IntegrationRun.heads),
            col(IntegrationRun.final_tree),
            col(IntegrationRun.created_at),
        ).where(*in_series)
    ).all()
    merged: dict[int, set[int]] = {}
    for run_id, pr_number in session.exec(
        select(IntegrationStep.run_id, IntegrationStep.pr_number)
        .join(IntegrationRun, col(IntegrationStep.run_id) == col(IntegrationRun.id))
        .where(*in_series)
        .where(col(IntegrationRun.kind) == "series")
        .where(col(IntegrationStep.outcome).in_(_MERGED))
    ).all():
        merged.setdefault(run_id, set()).add(pr_number)
    facts = [
        RunFacts(
            id=run_id,
            kind=kind,
            target_pr=target_pr,
            base_sha=base_sha,
            heads=dict(heads or {}),
            final_tree=final_tree,
            created_at=created_at,
            merged=frozenset(merged.get(run_id, ())),
        )
        for run_id, kind, target_pr, base_sha, heads, final_tree, created_at in runs
        if run_id is not None
    ]
    spent_rows = session.execute(
        select_columns(
            col(Job.integration_run_id),
            col(Job.purpose),
            col(Job.test_set),
            col(Job.shape),
            col(Job.status),
            func.count(),
            func.coalesce(func.sum(Job.gpu_seconds), 0.0),
        )
        .join(IntegrationRun, col(Job.integration_run_id) == col(IntegrationRun.id))
        .where(*in_series)
        .where(col(Job.reused_from_job_id).is_(None))
        .group_by(
            col(Job.integration_run_id),
            col(Job.purpose),
            col(Job.test_set),
            col(Job.shape),
            col(Job.status),
        )
    ).all()
    spent = [
        SpentRow(
            run_id,
            purpose,
            test_set,
            shape,
            status,
            int(n),
            float(seconds or 0.0),
            own_pr=own_test_set_pr(test_set),
            own=is_own_test_set(test_set),
        )
        for run_id, purpose, test_set, shape, status, n, seconds in spent_rows
        if run_id is not None
    ]
    source = aliased(Job)
    saved_rows = session.exec(
        select(
            Job.integration_run_id,
            Job.test_set,
            func.count(),
            func.coalesce(func.sum(source.gpu_seconds), 0.0),
        )
        .select_from(Job)
        .join(source, col(Job.reused_from_job_id) == source.id)
        .join(IntegrationRun, col(Job.integration_run_id) == col(IntegrationRun.id))
        .where(*in_series)
        .group_by(col(Job.integration_run_id), col(Job.test_set))
    ).all()
    saved = [
        SavedRow(run_id, test_set, int(n), float(seconds or 0.0), own_pr=own_test_set_pr(test_set))
        for run_id, test_set, n, seconds in saved_rows
        if run_id is not None
    ]
    trees = session.exec(
        select(Job.tree_sha)
        .join(IntegrationRun, col(Job.integration_run_id) == col(IntegrationRun.id))
        .where(*in_series)
        .distinct()
    ).all()
    return account_series(facts, spent, saved, set(trees))
