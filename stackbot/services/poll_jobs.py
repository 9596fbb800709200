"""The ``poll_jobs`` task: advance every GPU job (poll, collect, submit while there is room),
report the PRs whose jobs changed, and come back while any job is unfinished.

One such task exists at a time (its dedupe key is its kind); it reschedules itself in the
transaction that completes it, after the executor's poll interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.spec import Shape
from gpu_jobs.testsets import TestSet
from stackbot.adapters.git import GitMirror
from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db import jobs_store
from stackbot.db.models import Repository
from stackbot.domain.integration import RunKind
from stackbot.domain.tasks import PollJobs, Report
from stackbot.domain.types import PrNumber, RepoName
from stackbot.services import broken_nodes, quarantine, test_plan
from stackbot.services.job_execution import JobBackend, advance_jobs
from stackbot.services.resources import ServiceContext
from stackbot.taskqueue import TaskRegistry

# How long the local executor's jobs wait between polls (Slurm's is a setting).
LOCAL_POLL_INTERVAL_S = 2.0


def handle_poll_jobs(ctx: ServiceContext, task: PollJobs) -> None:
    settings, resources = ctx.settings, ctx.services
    with Session(ctx.engine) as session:
        repo_urls = {
            r.id: _runner_url(r, settings.mirrors_dir)
            for r in store.list_repositories(session)
            if r.id is not None
        }
    backend = JobBackend(
        executor=resources.executor(),
        test_sets=resources.test_sets(),
        own_tests=resources.own_tests(),
        jobs_dir=settings.jobs_dir,
        node_check=settings.job_node_check,
        per_series_limit=settings.max_running_jobs_per_series,
        node_policy=broken_nodes.policy_of(settings),
    )
    advance = advance_jobs(ctx.engine, backend, repo_url_of=repo_urls)
    planned = replan_after(ctx.engine, advance.finished, settings=settings)
    if advance.changed:
        changed = advance.submitted + advance.started + advance.finished
        for repo, numbers in prs_of_jobs(ctx.engine, changed).items():
            ctx.enqueue_task(Report.of(repo, numbers))
    # Excluded nodes: their node checks, due every recheck interval or when asked for.
    node_policy = broken_nodes.policy_of(settings)
    widest = _check_shape(settings.executor, backend.test_sets)
    broken_nodes.check_nodes(
        ctx.engine,
        backend.executor,
        jobs_dir=settings.jobs_dir,
        policy=node_policy,
        shape_of=lambda node: widest,
    )
    with Session(ctx.engine) as session:
        check_in = broken_nodes.next_check_in(session, policy=node_policy, now=broken_nodes.clock())
    slurm = settings.executor == "slurm"
    delay = settings.slurm.poll_interval_s if slurm else LOCAL_POLL_INTERVAL_S
    if advance.unfinished or planned:
        ctx.enqueue_task(task, delay_s=delay)
    elif check_in is not None:  # nothing else to poll: come back when a check is due
        ctx.enqueue_task(task, delay_s=max(delay, check_in))


def _check_shape(executor: str, test_sets: Mapping[str, TestSet]) -> Shape:
    """A node check's shape: one local device (the local executor's nodes are its GPUs), or a
    whole Slurm node (the most GPUs per node any test set uses)."""
    if executor != "slurm":
        return Shape(1, 1)
    per_node = [s.gpus_per_node for t in test_sets.values() for s in t.shapes]
    return Shape(1, max(per_node, default=1))


def replan_after(engine: Engine, finished: Sequence[int], *, settings: Settings) -> list[int]:
    """Plan again every tested run whose jobs (or main's) just finished: confirm, bisect,
    retry (``stackbot.services.test_plan``). Returns the jobs the plans added."""
    if not finished:
        return []
    with Session(engine) as session:
        jobs = jobs_store.jobs_by_ids(session, job_ids=finished)
        run_ids = {r.id for r in jobs_store.runs_of_jobs(session, jobs=jobs) if r.id}
        # Plans that may wait on these jobs' trees from another run (reused results).
        run_ids |= set(jobs_store.runs_with_open_findings(session))
        repos = {
            job.repo_id: (repository.clone_url, job.commit_sha)
            for job in jobs
            if (repository := session.get(Repository, job.repo_id)) is not None
        }
    created = test_plan.retry_infra_baselines(
        engine, finished, infra_retries=settings.infra_retries
    )
    for run_id in sorted(run_ids):
        outcome = test_plan.plan_run(
            engine,
            run_id,
            policy=settings.test_plan_policy,
            infra_retries=settings.infra_retries,
            flaky_window_days=settings.quarantine_window_days,
        )
        created.extend(outcome.created)
    # The flaky observations these jobs made may quarantine a test; their results may release
    # one (issue 26). Later plans read the quarantine.
    for repo_id, (clone_url, commit) in sorted(repos.items()):
        quarantine.review_repository(
            engine,
            repo_id,
            policy=quarantine.policy_of(settings),
            authors=quarantine.mirror_authors(clone_url, settings.mirrors_dir, commit),
        )
    return created


def _runner_url(repository: Repository, mirrors_dir: Path) -> str:
    """Runners fetch the integration commits from stackbot's mirror (they exist nowhere else
    unless pushed)."""
    mirror = GitMirror.open_or_clone(repository.clone_url, mirrors_dir)
    return str(mirror.git_dir)


def prs_of_jobs(engine: Engine, job_ids: Sequence[int]) -> dict[RepoName, list[PrNumber]]:
    """The PRs whose reports show these jobs: a stack run's PR, every PR of a series run, and
    for a baseline job every PR tested on that base."""
    found: dict[RepoName, set[PrNumber]] = {}
    with Session(engine) as session:
        jobs = jobs_store.jobs_by_ids(session, job_ids=job_ids)
        runs = jobs_store.runs_of_jobs(session, jobs=jobs)
        names = {r.id: RepoName(r.full_name) for r in store.list_repositories(session)}
        for run in runs:
            series = run.kind == RunKind.SERIES
            prs = (
                {PrNumber(int(n)) for n in run.heads} if series else {PrNumber(run.target_pr or 0)}
            )
            found.setdefault(names[run.repo_id], set()).update(p for p in prs if p)
    return {repo: sorted(numbers) for repo, numbers in found.items()}


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(PollJobs, handle_poll_jobs)
