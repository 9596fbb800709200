"""Maintenance rounds (the ``maintenance_runs`` table) and the facts retention decides on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select as columns
from sqlalchemy import text
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from stackbot.db.models import (
    IntegrationRun,
    Job,
    MaintenanceRun,
    PullRequest,
    Repository,
    Series,
    SeriesMember,
)
from stackbot.db.models._columns import utcnow
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.domain.retention import JobFact, RunFact


def claim_period(session: Session, *, period: int, task_id: int) -> MaintenanceRun | None:
    """The round of ``period`` for task ``task_id``: made now, or made earlier by the same task
    (a retried attempt); None when another task has it (it ran, or runs, this period)."""
    dialect = session.connection().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    values = {
        "period": period,
        "task_id": task_id,
        "trigger": "schedule",
        "started_at": utcnow(),
        "freed": {},
        "usage": {},
        "summary": {},
    }
    session.execute(
        insert(MaintenanceRun).values(values).on_conflict_do_nothing(index_elements=["period"])
    )
    row = session.exec(select(MaintenanceRun).where(MaintenanceRun.period == period)).one()
    return row if row.task_id == task_id else None


def start_manual(session: Session) -> MaintenanceRun:
    row = MaintenanceRun(trigger="cli")
    session.add(row)
    session.flush()
    return row


def finish(
    session: Session,
    *,
    run_id: int,
    freed: dict[str, int],
    usage: dict[str, Any],
    summary: dict[str, Any],
    error: str | None,
) -> None:
    row = session.get(MaintenanceRun, run_id)
    assert row is not None
    row.freed, row.usage, row.summary, row.error = freed, usage, summary, error
    row.finished_at = utcnow()
    session.add(row)


def recent(session: Session, *, limit: int = 10) -> list[MaintenanceRun]:
    """The newest finished rounds, newest first."""
    return list(
        session.exec(
            select(MaintenanceRun)
            .where(col(MaintenanceRun.finished_at).is_not(None))
            .order_by(col(MaintenanceRun.finished_at).desc(), col(MaintenanceRun.id).desc())
            .limit(limit)
        )
    )


def repositories(session: Session) -> list[Repository]:
    return list(session.exec(select(Repository).order_by(col(Repository.id))))


def run_facts(session: Session) -> list[RunFact]:
    rows = session.execute(
        columns(
            col(IntegrationRun.id),
            col(IntegrationRun.repo_id),
            col(IntegrationRun.kind),
            col(IntegrationRun.ref_name),
            col(IntegrationRun.series_key),
            col(IntegrationRun.target_pr),
            col(IntegrationRun.base_sha),
            col(IntegrationRun.created_at),
        )
    ).all()
    return [
        RunFact(int(i or 0), repo, kind, ref, key, pr, base, _aware(created))
        for i, repo, kind, ref, key, pr, base, created in rows
    ]


def job_facts(session: Session) -> list[JobFact]:
    rows = session.execute(
        columns(
            col(Job.id),
            col(Job.repo_id),
            col(Job.integration_run_id),
            col(Job.kind),
            col(Job.commit_sha),
            col(Job.status),
            col(Job.finished_at),
            col(Job.reused_from_job_id),
        )
    ).all()
    return [
        JobFact(
            int(i or 0),
            repo,
            run,
            kind,
            commit,
            status in FINISHED_STATES,
            _aware(done) if done else None,
            reused,
        )
        for i, repo, run, kind, commit, status, done, reused in rows
    ]


def open_prs(session: Session) -> dict[int, frozenset[int]]:
    rows = session.exec(
        select(PullRequest.repo_id, PullRequest.number).where(PullRequest.state == "open")
    ).all()
    found: dict[int, set[int]] = {}
    for repo_id, number in rows:
        found.setdefault(repo_id, set()).add(number)
    return {repo: frozenset(numbers) for repo, numbers in found.items()}


def series_with_open_prs(session: Session) -> dict[int, frozenset[str]]:
    rows = session.exec(
        select(Series.repo_id, Series.key)
        .join(SeriesMember, col(SeriesMember.series_id) == col(Series.id))
        .join(
            PullRequest,
            (col(PullRequest.repo_id) == col(Series.repo_id))
            & (col(PullRequest.number) == col(SeriesMember.pr_number)),
        )
        .where(PullRequest.state == "open")
        .distinct()
    ).all()
    found: dict[int, set[str]] = {}
    for repo_id, key in rows:
        found.setdefault(repo_id, set()).add(key)
    return {repo: frozenset(keys) for repo, keys in found.items()}


def database_bytes(session: Session) -> int | None:
    """The database's size: cheap on both (PostgreSQL's own count; SQLite's pages)."""
    dialect = session.connection().dialect.name
    if dialect == "postgresql":
        return int(
            session.execute(text("select pg_database_size(current_database())")).scalar_one()
        )
    if dialect == "sqlite":
        pages = session.execute(text("pragma page_count")).scalar_one()
        size = session.execute(text("pragma page_size")).scalar_one()
        return int(pages) * int(size)
    return None


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
