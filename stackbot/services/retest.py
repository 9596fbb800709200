"""The ``retest`` task: new jobs (no reuse) for a PR's current stack run, for one test set or
all. Asked for by ``/stackbot retest [SET]`` or by re-running a check run on GitHub. The PR's
own test files (``own:N``) are rerun as the stack tree's batched own-files jobs: the files of
every PR that tree holds, the PR's results split out of them again."""

from __future__ import annotations

from sqlalchemy import Engine

from gpu_jobs.testsets import is_own_test_set
from stackbot.db import github_store as store
from stackbot.db import integration_store
from stackbot.db.engine import session_scope
from stackbot.domain.own_tests import OwnFile
from stackbot.domain.tasks import PollJobs, Report, Retest
from stackbot.services import jobs as job_service
from stackbot.services import own_tests as own_service
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry


def handle_retest(ctx: ServiceContext, task: Retest) -> None:
    with session_scope(ctx.engine) as session:
        repository = store.get_repository(session, full_name=task.repo)
        pr = (
            store.get_pull(session, repo_id=repository.id, number=task.number)
            if repository and repository.id
            else None
        )
        if repository is None or repository.id is None or pr is None:
            return
        run = integration_store.latest_stack_run(
            session, repo_id=repository.id, target_pr=task.number
        )
        if run is None or run.heads.get(str(task.number)) != pr.head_sha or not run.final_tree:
            return  # no integration of the current head yet: the next integrate tests it
        names = task.test_sets  # None: all, the PR's own test files (``own:N``) too
        configured = None if names is None else [n for n in names if not is_own_test_set(n)]
        requests = job_service.job_requests(ctx.services.test_sets(), ctx.settings, configured)
        steps = integration_store.steps_of(session, run_id=run.id) if run.id else []
        if names is None or any(is_own_test_set(n) for n in names):
            requests += own_service.run_requests(ctx.services.own_tests(), run, steps)
        created = job_service.create_run_jobs(session, run, requests, force=True)
    if created:
        ctx.enqueue_task(PollJobs())
        ctx.enqueue_task(Report.of(task.repo, [task.number]))


def own_files_of_head(engine: Engine, repo: str, number: int) -> tuple[bool, list[str]]:
    """Whether PR ``number``'s current head is integrated (its newest stack run merged that
    head), and the paths of its own test files there (what ``own:N`` runs)."""
    with session_scope(engine) as session:
        repository = store.get_repository(session, full_name=repo)
        if repository is None or repository.id is None:
            return False, []
        pr = store.get_pull(session, repo_id=repository.id, number=number)
        run = integration_store.latest_stack_run(session, repo_id=repository.id, target_pr=number)
        if pr is None or run is None or run.id is None or not run.final_tree:
            return False, []
        if run.heads.get(str(number)) != pr.head_sha:
            return False, []
        for step in integration_store.steps_of(session, run_id=run.id):
            if step.pr_number == number:
                return True, [OwnFile.from_json(f).path for f in step.own_test_files or ()]
        return True, []


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(Retest, handle_retest)
