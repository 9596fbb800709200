"""The ``conflict_matrix`` task: pairwise conflicts of a series' live PRs on the base
(generated files ignored), computed by :mod:`stackbot.services.conflicts` with the worker's
cache and the matrix stored last time (a push to one PR recomputes only its pairs, in any
worker process), stored on the series for the dashboard."""

from __future__ import annotations

from sqlmodel import Session

from stackbot.adapters.git import GitMirror
from stackbot.adapters.git_maintenance import shared_use
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.domain import tasks
from stackbot.domain.types import PrNumber, Sha
from stackbot.services.conflicts import ConflictMatrix, conflict_matrix
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry


def handle_conflict_matrix(ctx: ServiceContext, task: tasks.ConflictMatrix) -> None:
    with Session(ctx.engine) as session:
        repository = store.get_repository(session, full_name=task.repo)
        series = (
            store.get_series(session, repo_id=repository.id, key=task.series_key)
            if repository is not None and repository.id is not None
            else None
        )
        if repository is None or series is None or len(series.order) < 2:
            return
        heads = {
            row.number: row.head_sha
            for row in store.list_pulls(session, repo_id=repository.id or 0)
            if row.number in series.order
        }
        clone_url, base_ref, series_id = repository.clone_url, repository.default_branch, series.id
        previous = ConflictMatrix.from_json(series.conflict_matrix or {})
        order = [n for n in series.order if n in heads]
    mirror = GitMirror.open_or_clone(clone_url, ctx.settings.mirrors_dir)
    # Its merges write objects a concurrent repack must not drop.
    with shared_use(mirror.git_dir, wait_s=ctx.settings.maintenance.lock_wait_s):
        base_sha = mirror.rev_parse(base_ref)
        matrix = conflict_matrix(
            mirror,
            Sha(base_sha),
            [(PrNumber(n), Sha(heads[n])) for n in order],
            generated=ctx.settings.generated_files,
            cache=ctx.services.conflict_cache(mirror),
            previous=previous,
        )
    with session_scope(ctx.engine) as session:
        row = store.get_series_by_id(session, series_id=series_id) if series_id else None
        if row is not None:
            row.conflict_matrix = matrix.to_json()
            session.add(row)


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(tasks.ConflictMatrix, handle_conflict_matrix)
