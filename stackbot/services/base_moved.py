"""The ``base_moved`` task: a push to a branch that open PRs target re-integrates every active
series of the repository (each series' runs are pinned to the base commit they merged onto)."""

from __future__ import annotations

from sqlmodel import Session

from stackbot.db import github_store as store
from stackbot.domain.tasks import BaseMoved, Integrate
from stackbot.domain.types import SeriesKey
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry


def handle_base_moved(ctx: ServiceContext, task: BaseMoved) -> None:
    with Session(ctx.engine) as session:
        repository = store.get_repository(session, full_name=task.repo)
        if repository is None or repository.id is None:
            return  # nothing of this repository is tracked
        keys = [
            SeriesKey(s.key) for s in store.list_series(session, repo_id=repository.id) if s.order
        ]
    reason = f"{task.branch or 'the base'} moved"
    for key in keys:
        ctx.enqueue_task(Integrate(task.repo, series_key=key, number=None, reason=reason))


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(BaseMoved, handle_base_moved)
