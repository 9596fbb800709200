"""The ``test_alone`` task (``/stackbot test-alone``, issue 24): test a PR's own stack tree, main
+ its ancestors + itself, at its current head.

Under ``series-first`` a PR inside a series is tested only as part of the series tree, which also
holds the PRs above it; its verdict then says "passes with the series", never "ready". This task
gives the PR's newest stack run (of its current head) the jobs the series tree got: the
configured test sets and the PRs' own test files, each taking the result of an identical tree
and configuration where one exists, main's jobs on the same base, then the run's test plan.
The PR's report then decides on that tree ("ready" means it passed), and its check runs (the
same names) are updated to name it.

Idempotent: a redo finds the jobs the first attempt made and makes none again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.adapters.git import GitMirror
from stackbot.adapters.git_maintenance import shared_use
from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db import integration_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep
from stackbot.domain.integration import RunStatus, StepOutcome
from stackbot.domain.pipeline import PrState, untested_reason
from stackbot.domain.tasks import PollJobs, Report, TestAlone
from stackbot.domain.types import PrNumber, Sha
from stackbot.services import jobs as job_service
from stackbot.services import own_tests as own_service
from stackbot.services import test_plan
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)

_MERGED = (StepOutcome.CLEAN, StepOutcome.RESOLVED)
_MERGED_RUN = (RunStatus.CLEAN, RunStatus.RESOLVED)


@dataclass(frozen=True)
class OwnTree:
    """A PR's own stack tree at its current head, as its newest stack run built it."""

    run_id: int
    base_ref: str
    prs: tuple[int, ...]  # merged, in order (the PR last)
    commit: str | None  # None: the stack does not merge cleanly
    waiting: str | None  # why it may not be tested yet (a PR of it not approved), else None


def own_tree(engine: Engine, repo: str, number: int) -> OwnTree | None:
    """PR ``number``'s own stack tree at its current head; None while that head is not
    integrated."""
    with Session(engine) as session:
        found = _stack_run(session, repo, number)
        if found is None:
            return None
        run, steps = found
        assert run.id is not None
        merged = tuple(s.pr_number for s in steps if s.outcome in _MERGED)
        if run.status not in _MERGED_RUN or not run.final_tree:
            prs = tuple(s.pr_number for s in steps)
            return OwnTree(run.id, run.base_ref, prs, None, None)
        waiting = _waiting(session, run, merged)
        return OwnTree(run.id, run.base_ref, merged, run.final_commit, waiting)


def _stack_run(
    session: Session, repo: str, number: int
) -> tuple[IntegrationRun, list[IntegrationStep]] | None:
    repository = store.get_repository(session, full_name=repo)
    if repository is None or repository.id is None:
        return None
    pr = store.get_pull(session, repo_id=repository.id, number=number)
    run = integration_store.latest_stack_run(session, repo_id=repository.id, target_pr=number)
    if pr is None or run is None or run.id is None or run.heads.get(str(number)) != pr.head_sha:
        return None
    return run, list(integration_store.steps_of(session, run_id=run.id))


def _waiting(session: Session, run: IntegrationRun, merged: tuple[int, ...]) -> str | None:
    """Why the tree may not be tested: the same approval rule as every other tree."""
    states = {
        n: PrState(
            PrNumber(n),
            run.heads.get(str(n), ""),
            live=True,
            approved_shas=frozenset(
                a.sha for a in store.approvals_of(session, repo_id=run.repo_id, pr_number=n)
            ),
        )
        for n in merged
    }
    heads = {PrNumber(int(k)): v for k, v in run.heads.items()}
    return untested_reason([PrNumber(n) for n in merged], heads, states)


def test_own_tree(ctx: ServiceContext, task: TestAlone) -> list[int]:
    """Create the jobs of the PR's own stack tree (and main's); returns the jobs created."""
    tree = own_tree(ctx.engine, task.repo, task.number)
    if tree is None or tree.commit is None or tree.waiting is not None:
        log.info("%s#%d: own tree not testable now (%s)", task.repo, task.number, tree)
        return []
    settings, resources = ctx.settings, ctx.services
    requests = job_service.job_requests(resources.test_sets(), settings)
    own = resources.own_tests()
    with session_scope(ctx.engine) as session:
        run = integration_store.get_run(session, run_id=tree.run_id)
        repository = store.get_repository(session, full_name=task.repo)
        assert run is not None and run.id is not None and repository is not None
        steps = integration_store.steps_of(session, run_id=run.id)
        created = job_service.create_run_jobs(
            session, run, [*requests, *own_service.run_requests(own, run, steps)]
        )
        made = [job.id for job in created if job.id is not None]
        base = _base_tree(settings, repository.clone_url, run.base_sha)
        baselines = job_service.create_baseline_jobs(
            session,
            repo_id=run.repo_id,
            base_ref=run.base_ref,
            base_sha=run.base_sha,
            base_tree=base,
            requests=[*requests, *own_service.baseline_requests(own, run, steps)],
        )
        made += [job.id for job in baselines if job.id is not None]
    test_plan.plan_run(
        ctx.engine,
        tree.run_id,
        policy=settings.test_plan_policy,
        infra_retries=settings.infra_retries,
    )
    return made


def _base_tree(settings: Settings, clone_url: str, base_sha: str) -> str:
    """The tree of the base commit the stack run was pinned to (the integration fetched it)."""
    mirror = GitMirror.open_or_clone(
        clone_url, settings.mirrors_dir, timeout=settings.git_fetch_timeout_s
    )
    with shared_use(mirror.git_dir, wait_s=settings.maintenance.lock_wait_s):
        return mirror.tree_of(Sha(base_sha))


def handle_test_alone(ctx: ServiceContext, task: TestAlone) -> None:
    made = test_own_tree(ctx, task)
    log.info("test-alone %s#%d: %d job(s)", task.repo, task.number, len(made))
    ctx.enqueue_task(PollJobs())
    ctx.enqueue_task(Report.of(task.repo, [task.number]))


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(TestAlone, handle_test_alone)
