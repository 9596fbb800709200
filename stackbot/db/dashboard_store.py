"""The dashboard's reads: series, pull requests, integration runs, jobs and tasks, fetched in
batches (one query per kind of row for a whole page, never one per row) so a 60-PR series with
hundreds of jobs stays fast.

Keyword-only functions over a session; no business rules (``stackbot.web.readmodel`` builds the
pages from what these return).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func
from sqlalchemy import select as select_columns
from sqlmodel import Session, col, select

from stackbot.db import read_clock
from stackbot.db.models import (
    Approval,
    DependencyEdge,
    IntegrationRun,
    IntegrationStep,
    Job,
    PullRequest,
    Repository,
    Series,
    SeriesMember,
    Task,
)
from stackbot.domain.integration import RunKind

# -- series -----------------------------------------------------------------------------------


def series_with_repositories(session: Session) -> Sequence[tuple[Series, Repository]]:
    """Every series with its repository, in no particular order."""
    return session.exec(select(Series, Repository).join(Repository)).all()


def find_series(
    session: Session, *, key: str, repo: str | None = None
) -> tuple[Series, Repository] | None:
    """The series ``key`` (of the repository named ``repo``, or of any) with its repository.

    A key or name holding a NUL (from a ``%00`` in a URL) names no series: PostgreSQL's text
    cannot hold one, so it is not even compared."""
    if "\x00" in key or (repo is not None and "\x00" in repo):
        return None
    query = select(Series, Repository).join(Repository).where(Series.key == key)
    if repo:
        query = query.where(Repository.full_name == repo)
    return session.exec(query).first()


def members_of_series(session: Session, *, series_ids: Collection[int]) -> Sequence[SeriesMember]:
    """The members of several series, in no particular order."""
    return session.exec(
        select(SeriesMember).where(col(SeriesMember.series_id).in_(series_ids))
    ).all()


def member_numbers(session: Session, *, series_id: int | None) -> list[int]:
    """The PR numbers of one series by position (numbers, not ORM objects: a 500-PR series
    has 500 members)."""
    statement = (
        select_columns(col(SeriesMember.pr_number))
        .where(col(SeriesMember.series_id) == series_id)
        .order_by(col(SeriesMember.position))
    )
    return [number for (number,) in session.execute(statement).all()]


def series_of_pull(session: Session, *, repo_id: int, number: int) -> Series | None:
    """A series the PR belongs to, if any."""
    return session.exec(
        select(Series)
        .join(SeriesMember, col(SeriesMember.series_id) == col(Series.id))
        .where(Series.repo_id == repo_id, SeriesMember.pr_number == number)
    ).first()


# -- pull requests and their graph ------------------------------------------------------------


def pulls_numbered(session: Session, *, numbers: Collection[int]) -> Sequence[PullRequest]:
    """The PRs with these numbers, in every repository (callers key them by repository)."""
    return session.exec(select(PullRequest).where(col(PullRequest.number).in_(numbers))).all()


def repository_by_id(session: Session, *, repo_id: int) -> Repository | None:
    return session.get(Repository, repo_id)


def find_pull(
    session: Session, *, number: int, repo: str | None = None
) -> tuple[PullRequest, Repository] | None:
    """PR ``number`` (of the repository named ``repo``, or of any) with its repository."""
    query = select(PullRequest, Repository).join(Repository).where(PullRequest.number == number)
    if repo:
        query = query.where(Repository.full_name == repo)
    return session.exec(query).first()


def pull_table_rows(
    session: Session, *, repo_id: int, numbers: Collection[int]
) -> Sequence[Row[Any]]:
    """Only the columns a table of PRs shows: a PR's body, commits and comments can be large.
    Rows have ``number``, ``title``, ``author``, ``state``, ``draft``, ``merged``,
    ``head_sha`` and ``superseded_by``."""
    return session.execute(
        select_columns(
            col(PullRequest.number),
            col(PullRequest.title),
            col(PullRequest.author),
            col(PullRequest.state),
            col(PullRequest.draft),
            col(PullRequest.merged),
            col(PullRequest.head_sha),
            col(PullRequest.superseded_by),
        ).where(col(PullRequest.repo_id) == repo_id, col(PullRequest.number).in_(numbers))
    ).all()


def approval_vetters(
    session: Session, *, repo_id: int, pr_numbers: Collection[int]
) -> Sequence[Row[Any]]:
    """Who approved which commit of these PRs: rows of ``pr_number``, ``sha``, ``vetter``."""
    return session.execute(
        select_columns(col(Approval.pr_number), col(Approval.sha), col(Approval.vetter)).where(
            col(Approval.repo_id) == repo_id, col(Approval.pr_number).in_(pr_numbers)
        )
    ).all()


def edges_from(session: Session, *, repo_id: int, children: Collection[int]) -> Sequence[Row[Any]]:
    """The edges whose child is one of ``children``: rows of ``child``, ``parent``, ``source``,
    ``text`` and ``origin`` (columns, not ORM objects: a 500-PR series has 500 of them)."""
    return session.execute(
        select_columns(
            col(DependencyEdge.child),
            col(DependencyEdge.parent),
            col(DependencyEdge.source),
            col(DependencyEdge.text),
            col(DependencyEdge.origin),
        ).where(col(DependencyEdge.repo_id) == repo_id, col(DependencyEdge.child).in_(children))
    ).all()


def parent_edges(session: Session, *, repo_id: int, number: int) -> Sequence[DependencyEdge]:
    """The edges from PR ``number`` to the PRs it depends on."""
    return session.exec(
        select(DependencyEdge).where(
            DependencyEdge.repo_id == repo_id, DependencyEdge.child == number
        )
    ).all()


def child_edges(session: Session, *, repo_id: int, number: int) -> Sequence[DependencyEdge]:
    """The edges to PR ``number`` from the PRs that depend on it."""
    return session.exec(
        select(DependencyEdge).where(
            DependencyEdge.repo_id == repo_id, DependencyEdge.parent == number
        )
    ).all()


# -- integration runs -------------------------------------------------------------------------


def latest_series_runs(session: Session, *, keys: Collection[str]) -> Sequence[IntegrationRun]:
    """The newest series run of each (repository, series key) among ``keys``."""
    newest = (
        select(func.max(IntegrationRun.id))
        .where(IntegrationRun.kind == RunKind.SERIES, col(IntegrationRun.series_key).in_(keys))
        .group_by(col(IntegrationRun.repo_id), col(IntegrationRun.series_key))
    )
    return session.exec(select(IntegrationRun).where(col(IntegrationRun.id).in_(newest))).all()


def latest_series_run(session: Session, *, repo_id: int, series_key: str) -> IntegrationRun | None:
    return session.exec(
        select(IntegrationRun)
        .where(
            IntegrationRun.repo_id == repo_id,
            IntegrationRun.kind == RunKind.SERIES,
            IntegrationRun.series_key == series_key,
        )
        .order_by(col(IntegrationRun.id).desc())
    ).first()


def latest_stack_runs(
    session: Session, *, repo_id: int, target_prs: Collection[int]
) -> Sequence[IntegrationRun]:
    """The newest stack run targeting each of ``target_prs`` (none for a PR never run)."""
    newest = (
        select(func.max(IntegrationRun.id))
        .where(
            IntegrationRun.repo_id == repo_id,
            IntegrationRun.kind == RunKind.STACK,
            col(IntegrationRun.target_pr).in_(target_prs),
        )
        .group_by(col(IntegrationRun.target_pr))
    )
    return session.exec(select(IntegrationRun).where(col(IntegrationRun.id).in_(newest))).all()


def runs_targeting(
    session: Session, *, repo_id: int, pr_number: int, limit: int
) -> Sequence[IntegrationRun]:
    """The newest ``limit`` runs targeting PR ``pr_number``, newest first."""
    return session.exec(
        select(IntegrationRun)
        .where(IntegrationRun.repo_id == repo_id, IntegrationRun.target_pr == pr_number)
        .order_by(col(IntegrationRun.id).desc())
        .limit(limit)
    ).all()


# -- jobs -------------------------------------------------------------------------------------

# What a job summary needs: everything but the (large) result JSON.
_JOB_COLUMNS: tuple[Any, ...] = (
    Job.id,
    Job.test_set,
    Job.shape,
    Job.status,
    Job.counts,
    Job.kind,
    Job.tree_sha,
    Job.commit_sha,
    Job.integration_run_id,
    Job.reused_from_job_id,
    Job.node,
    Job.executor,
    Job.created_at,
    Job.started_at,
    Job.finished_at,
    Job.out_dir,
    Job.error,
    Job.step_position,
    Job.purpose,
    Job.retry_of_job_id,
)


def job_rows_of_runs(session: Session, *, run_ids: Collection[int]) -> Sequence[Row[Any]]:
    """The jobs of these integration runs, oldest first, without their result JSON (rows have
    the columns of ``Job`` but ``result``)."""
    return session.execute(
        select_columns(*_JOB_COLUMNS)
        .where(col(Job.integration_run_id).in_(run_ids))
        .order_by(col(Job.id))
    ).all()


def baseline_job_rows(session: Session, *, commit_shas: Collection[str]) -> Sequence[Row[Any]]:
    """The baseline jobs of these commits, oldest first, without their result JSON."""
    return session.execute(
        select_columns(*_JOB_COLUMNS)
        .where(col(Job.kind) == "baseline", col(Job.commit_sha).in_(commit_shas))
        .order_by(col(Job.id))
    ).all()


def newest_jobs(session: Session, *, limit: int) -> Sequence[Job]:
    return session.exec(select(Job).order_by(col(Job.id).desc()).limit(limit)).all()


def merged_steps_of_runs(session: Session, *, run_ids: Collection[int]) -> dict[int, list[int]]:
    """The PRs each run merged (clean or resolved), in merge order: the PRs its tree holds."""
    if not run_ids:
        return {}
    found: dict[int, list[int]] = {run_id: [] for run_id in run_ids}
    for step in session.exec(
        select(IntegrationStep)
        .where(col(IntegrationStep.run_id).in_(run_ids))
        .order_by(col(IntegrationStep.run_id), col(IntegrationStep.position))
    ):
        if step.outcome in ("clean", "resolved"):
            found[step.run_id].append(step.pr_number)
    return found


def runs_by_ids(session: Session, *, run_ids: Collection[int]) -> Sequence[IntegrationRun]:
    if not run_ids:
        return []
    return session.exec(select(IntegrationRun).where(col(IntegrationRun.id).in_(run_ids))).all()


# -- tasks and changes ------------------------------------------------------------------------


def task_status_counts(session: Session) -> dict[str, int]:
    """How many tasks are in each status (only the statuses present)."""
    return {
        status: count
        for status, count in session.exec(
            select(Task.status, func.count()).group_by(col(Task.status))
        ).all()
    }


def dead_tasks(session: Session, *, limit: int) -> Sequence[Task]:
    """The newest ``limit`` dead tasks, newest first."""
    return session.exec(
        select(Task).where(Task.status == "dead").order_by(col(Task.id).desc()).limit(limit)
    ).all()


def active_tasks(session: Session, *, limit: int) -> Sequence[Task]:
    """Running tasks, then pending ones by when they may run: what the queue is doing."""
    return session.exec(
        select(Task)
        .where(col(Task.status).in_(("running", "pending")))
        .order_by(col(Task.status).desc(), col(Task.run_after), col(Task.id))
        .limit(limit)
    ).all()


def change_markers(session: Session) -> list[datetime | int | None]:
    """Values one of which changes whenever anything the dashboard shows changes (cheap: a few
    max() queries)."""
    return [
        session.exec(select(func.max(Task.updated_at))).one(),
        session.exec(select(func.max(Job.id))).one(),
        session.exec(select(func.max(Job.finished_at))).one(),
        session.exec(select(func.max(Job.started_at))).one(),
        session.exec(select(func.max(IntegrationRun.id))).one(),
        session.exec(select(func.max(Series.updated_at))).one(),
        session.exec(select(func.max(PullRequest.synced_at))).one(),
        read_clock.ticks(session),  # every other change to what pages show (triggers)
    ]
