"""The pipeline's tasks: integrate a series, test its trees against main, and report.

- ``integrate`` (queued by ``sync_pull`` and ``pr_command``, and by ``base_moved`` for every
  active series): fetches the mirror, makes a ``stack`` run for each live PR and one ``series``
  run (:func:`stackbot.domain.pipeline.plan_series`; a run identical to a stored one, same base
  and heads, is not made again), computes the conflict matrix, creates the jobs of every tree
  whose PRs are all approved (reusing results of identical trees) and the baseline jobs on the
  base commit, then asks for ``poll_jobs`` and a ``report`` of every PR of the series.
- ``poll_jobs``: advances every job (poll, collect, submit while there is room), reports the
  PRs whose jobs changed, and comes back while any job is unfinished.
- ``base_moved``: a push to a base branch re-integrates every active series of the repository.
- ``retest``: new jobs (no reuse) for a PR's current stack run, for one test set or all.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.adapters.git import GitMirror
from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db.engine import session_scope
from stackbot.db.integration_store import save_run
from stackbot.db.models import IntegrationRun, Job, Repository, Series
from stackbot.db.models._columns import utcnow
from stackbot.domain.integration import RunKind, StepOutcome
from stackbot.domain.pipeline import PlannedRun, PrState, plan_series, untested_reason
from stackbot.domain.series import build_series_graph
from stackbot.domain.types import PrNumber, Sha
from stackbot.errors import BadInput
from stackbot.services import jobs as job_service
from stackbot.services.conflicts import conflict_matrix
from stackbot.services.integration import RunRequest, StepMemo, run_integration
from stackbot.services.sync import INTEGRATE, report_follow_up
from stackbot.services.tree_allowlist import TreeAllowlist
from stackbot.worker import queue
from stackbot.worker.registry import TaskContext, TaskRegistry

log = logging.getLogger(__name__)

POLL_JOBS = "poll_jobs"
CONFLICT_MATRIX = "conflict_matrix"
BASE_MOVED = "base_moved"
RETEST = "retest"
REPORT = "report"


@dataclass
class IntegrateOutcome:
    run_ids: list[int] = field(default_factory=list)
    reused_runs: list[int] = field(default_factory=list)
    jobs_created: list[int] = field(default_factory=list)
    affected: list[int] = field(default_factory=list)
    untested: dict[int, str] = field(default_factory=dict)  # run id -> why no jobs


# -- integrate ------------------------------------------------------------------------------


def integrate(
    engine: Engine,
    settings: Settings,
    *,
    repo: str,
    series_key: str | None,
    number: int | None,
    allowlist_cache: dict[str, TreeAllowlist] | None = None,
) -> IntegrateOutcome:
    """Integrate one series (or one PR in no series) and create the jobs its trees need."""
    with Session(engine) as session:
        repository = store.get_repository(session, full_name=repo)
        if repository is None or repository.id is None:
            raise BadInput(f"{repo} is not known to stackbot; sync one of its PRs first")
        repo_id, clone_url, base_ref = (
            repository.id,
            repository.clone_url,
            repository.default_branch,
        )
        rows = store.list_pulls(session, repo_id=repo_id)
        records = [store.pr_record(row) for row in rows]
        approvals = {
            row.number: frozenset(
                a.sha for a in store.approvals_of(session, repo_id=repo_id, pr_number=row.number)
            )
            for row in rows
        }
    graph = build_series_graph(records, repo=repo)
    states: dict[int, PrState] = {
        int(r.number): PrState(
            r.number,
            r.head_sha,
            live=r.is_open and not r.merged and r.number not in graph.superseded,
            approved_shas=approvals.get(r.number, frozenset()),
        )
        for r in records
    }
    lone = PrNumber(number) if number is not None else None
    planned = plan_series(graph, states, series_key=series_key, lone_pr=lone)
    outcome = IntegrateOutcome(affected=_series_members(engine, repo_id, series_key, number))
    if not planned:
        return outcome
    mirror = GitMirror.open_or_clone(
        clone_url, settings.mirrors_dir, timeout=settings.git_fetch_timeout_s
    )
    mirror.fetch()
    tracker = (allowlist_cache or {}).get(str(mirror.git_dir))
    if tracker is None:
        tracker = TreeAllowlist(mirror)
        if allowlist_cache is not None:
            allowlist_cache[str(mirror.git_dir)] = tracker
    base_sha = mirror.rev_parse(base_ref)
    heads: dict[int, str] = {int(r.number): r.head_sha for r in records}
    requests = job_service.job_requests(settings)
    for plan in planned:
        run_id, reused = _run_once(
            engine, settings, mirror, tracker, repo_id, base_ref, base_sha, plan, heads, series_key
        )
        (outcome.reused_runs if reused else outcome.run_ids).append(run_id)
        why = _create_jobs(engine, run_id, requests, states)
        if why:
            outcome.untested[run_id] = why
    with session_scope(engine) as session:
        base_tree = mirror.tree_of(base_sha)
        tested = [
            rid for rid in outcome.run_ids + outcome.reused_runs if rid not in outcome.untested
        ]
        if tested:
            job_service.create_baseline_jobs(
                session,
                repo_id=repo_id,
                base_ref=base_ref,
                base_sha=base_sha,
                base_tree=base_tree,
                requests=requests,
            )
        outcome.jobs_created = [
            j.id for j in job_service.jobs_of_runs(session, tested) if j.id is not None
        ]
    return outcome


def _run_once(
    engine: Engine,
    settings: Settings,
    mirror: GitMirror,
    tracker: TreeAllowlist,
    repo_id: int,
    base_ref: str,
    base_sha: str,
    plan: PlannedRun,
    heads: dict[int, str],
    series_key: str | None,
) -> tuple[int, bool]:
    """The run for ``plan``: a stored identical one (same kind, target, base and heads), or a
    new one. Returns (run id, reused)."""
    wanted = {str(n): heads[n] for n in plan.prs}
    with Session(engine) as session:
        statement = select(IntegrationRun).where(
            IntegrationRun.repo_id == repo_id,
            IntegrationRun.kind == plan.kind,
            IntegrationRun.base_sha == base_sha,
            IntegrationRun.name == plan.name,
        )
        for run in session.exec(statement.order_by(col(IntegrationRun.id).desc()).limit(5)):
            if run.heads == wanted and run.id is not None:
                return run.id, True
    request = RunRequest(
        base_ref=base_sha,
        prs=[(n, heads[n]) for n in plan.prs],
        kind=RunKind(plan.kind),
        name=plan.name,
        depends_on={n: tuple(p) for n, p in plan.depends_on.items()},
        generated_files=tuple(settings.generated_files),
        checker_command=settings.allowlist_checker_command,
    )
    memo = _STEP_MEMOS.setdefault(str(mirror.git_dir), StepMemo())
    result = run_integration(mirror, request, allowlist=tracker, memo=memo)
    with session_scope(engine) as session:
        row = save_run(
            session,
            repo_id,
            result,
            series_key=series_key if plan.kind == "series" or series_key else None,
            target_pr=plan.target_pr,
        )
        row.base_ref = base_ref  # the branch, not the SHA the run was pinned to
        session.add(row)
        assert row.id is not None
        return row.id, False


def _create_jobs(
    engine: Engine,
    run_id: int,
    requests: Sequence[job_service.JobRequest],
    states: dict[int, PrState],
) -> str | None:
    """Jobs for the run's tree, or why it is not tested."""
    with session_scope(engine) as session:
        run = session.get(IntegrationRun, run_id)
        assert run is not None
        steps = store_steps(session, run_id)
        merged = [
            s.pr_number for s in steps if s.outcome in (StepOutcome.CLEAN, StepOutcome.RESOLVED)
        ]
        if run.kind == "stack" and run.status == "conflict":
            return "the stack does not merge cleanly"
        if not merged or not run.final_tree or not run.final_commit:
            return "nothing merged"
        heads = {PrNumber(int(k)): v for k, v in run.heads.items()}
        why = untested_reason([PrNumber(n) for n in merged], heads, states)
        if why:
            return why
        job_service.create_run_jobs(session, run, requests)
    return None


def store_steps(session: Session, run_id: int) -> list[Any]:
    from stackbot.db.models import IntegrationStep

    return list(
        session.exec(
            select(IntegrationStep)
            .where(IntegrationStep.run_id == run_id)
            .order_by(col(IntegrationStep.position))
        )
    )


def handle_conflict_matrix(ctx: TaskContext) -> None:
    """Pairwise conflicts of a series' live PRs on the base (generated files ignored), cached
    by head SHAs, stored on the series for the dashboard."""
    repo, key = ctx.payload.get("repo"), ctx.payload.get("series_key")
    if not isinstance(repo, str) or not isinstance(key, str):
        raise BadInput(f"a conflict_matrix task needs 'repo' and 'series_key', got {ctx.payload!r}")
    with Session(ctx.engine) as session:
        repository = store.get_repository(session, full_name=repo)
        series = (
            session.exec(
                select(Series).where(Series.repo_id == repository.id, Series.key == key)
            ).first()
            if repository is not None
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
        order = [n for n in series.order if n in heads]
    mirror = GitMirror.open_or_clone(clone_url, ctx.settings.mirrors_dir)
    base_sha = mirror.rev_parse(base_ref)
    matrix = conflict_matrix(
        mirror,
        Sha(base_sha),
        [(PrNumber(n), Sha(heads[n])) for n in order],
        generated=ctx.settings.generated_files,
        cache=_MATRIX_CACHES.setdefault(str(mirror.git_dir), _new_matrix_cache()),
    )
    with session_scope(ctx.engine) as session:
        row = session.get(Series, series_id)
        if row is not None:
            row.conflict_matrix = matrix.to_json()
            session.add(row)


_MATRIX_CACHES: dict[str, Any] = {}


def _new_matrix_cache() -> Any:
    from stackbot.services.conflicts import ConflictCache

    return ConflictCache()


def _series_members(
    engine: Engine, repo_id: int, series_key: str | None, number: int | None
) -> list[int]:
    with Session(engine) as session:
        if series_key is not None:
            series = session.exec(
                select(Series).where(Series.repo_id == repo_id, Series.key == series_key)
            ).first()
            if series is not None and series.id is not None:
                from stackbot.db.models import SeriesMember

                members = session.exec(
                    select(SeriesMember.pr_number).where(SeriesMember.series_id == series.id)
                ).all()
                return sorted(set(members))
    return [number] if number is not None else []


def handle_integrate(ctx: TaskContext) -> None:
    repo = ctx.payload.get("repo")
    if not isinstance(repo, str):
        raise BadInput(f"an integrate task needs 'repo', got {ctx.payload!r}")
    key = ctx.payload.get("series_key")
    number = ctx.payload.get("number")
    outcome = integrate(
        ctx.engine,
        ctx.settings,
        repo=repo,
        series_key=key if isinstance(key, str) else None,
        number=number if isinstance(number, int) else None,
        allowlist_cache=_ALLOWLIST_CACHES,
    )
    log.info(
        "integrate %s %s: %d new runs, %d unchanged, %d jobs",
        repo,
        key or f"#{number}",
        len(outcome.run_ids),
        len(outcome.reused_runs),
        len(outcome.jobs_created),
    )
    if outcome.jobs_created:
        ctx.enqueue(POLL_JOBS, {}, dedupe_key=POLL_JOBS)
    if outcome.affected:
        payload, dedupe = report_follow_up(repo, outcome.affected)
        ctx.enqueue(REPORT, payload, dedupe_key=dedupe)
    if isinstance(key, str) and outcome.run_ids:
        # After the reports: the matrix is for the dashboard, and costs a merge per pair.
        ctx.enqueue(
            CONFLICT_MATRIX,
            {"repo": repo, "series_key": key},
            dedupe_key=f"{CONFLICT_MATRIX}:{repo}:{key}",
        )


# Scan caches live as long as the worker process: a later run re-parses only changed files;
# merge steps too: a stack run repeats nothing another run already merged.
_ALLOWLIST_CACHES: dict[str, TreeAllowlist] = {}
_STEP_MEMOS: dict[str, StepMemo] = {}


# -- poll_jobs ------------------------------------------------------------------------------


def handle_poll_jobs(ctx: TaskContext) -> None:
    with Session(ctx.engine) as session:
        repo_urls = {
            r.id: _runner_url(ctx.settings, r)
            for r in session.exec(select(Repository))
            if r.id is not None
        }
    advance = job_service.advance_jobs(ctx.engine, ctx.settings, repo_url_of=repo_urls)
    if advance.changed:
        for repo, numbers in _prs_of_jobs(
            ctx.engine, advance.submitted + advance.started + advance.finished
        ).items():
            payload, dedupe = report_follow_up(repo, numbers)
            ctx.enqueue(REPORT, payload, dedupe_key=dedupe)
    if advance.unfinished:
        delay = ctx.settings.slurm.poll_interval_s if ctx.settings.executor == "slurm" else 2.0

        def poll_again(session: Session) -> None:
            run_after = utcnow() + timedelta(seconds=delay)
            queue.enqueue(session, POLL_JOBS, {}, dedupe_key=POLL_JOBS, run_after=run_after)

        ctx.on_completion(poll_again)


def _runner_url(settings: Settings, repository: Repository) -> str:
    """Runners fetch the integration commits from stackbot's mirror (they exist nowhere else
    unless pushed)."""
    mirror = GitMirror.open_or_clone(repository.clone_url, settings.mirrors_dir)
    return str(mirror.git_dir)


def _prs_of_jobs(engine: Engine, job_ids: Sequence[int]) -> dict[str, list[int]]:
    """The PRs whose reports show these jobs: a stack run's PR, every PR of a series run, and
    for a baseline job every PR tested on that base."""
    found: dict[str, set[int]] = {}
    with Session(engine) as session:
        jobs = session.exec(select(Job).where(col(Job.id).in_(list(job_ids)))).all()
        run_ids = {j.integration_run_id for j in jobs if j.integration_run_id is not None}
        base_shas = {j.commit_sha for j in jobs if j.kind == "baseline"}
        runs = list(session.exec(select(IntegrationRun).where(col(IntegrationRun.id).in_(run_ids))))
        if base_shas:
            runs += list(
                session.exec(
                    select(IntegrationRun).where(
                        col(IntegrationRun.base_sha).in_(base_shas), IntegrationRun.kind == "stack"
                    )
                )
            )
        names = {r.id: r.full_name for r in session.exec(select(Repository))}
        for run in runs:
            prs = {int(n) for n in run.heads} if run.kind == "series" else {run.target_pr or 0}
            found.setdefault(names[run.repo_id], set()).update(p for p in prs if p)
    return {repo: sorted(numbers) for repo, numbers in found.items()}


# -- base_moved and retest --------------------------------------------------------------------


def handle_base_moved(ctx: TaskContext) -> None:
    repo = ctx.payload.get("repo")
    if not isinstance(repo, str):
        raise BadInput(f"a base_moved task needs 'repo', got {ctx.payload!r}")
    with Session(ctx.engine) as session:
        repository = store.get_repository(session, full_name=repo)
        if repository is None or repository.id is None:
            return  # nothing of this repository is tracked
        keys = [s.key for s in store.list_series(session, repo_id=repository.id) if s.order]
    from stackbot.services.sync import integrate_follow_up

    for key in keys:
        payload, dedupe = integrate_follow_up(
            repo, key, 0, f"{ctx.payload.get('branch') or 'the base'} moved"
        )
        payload["number"] = None
        ctx.enqueue(INTEGRATE, payload, dedupe_key=dedupe)


def handle_retest(ctx: TaskContext) -> None:
    repo, number = ctx.payload.get("repo"), ctx.payload.get("number")
    if not isinstance(repo, str) or not isinstance(number, int):
        raise BadInput(f"a retest task needs 'repo' and 'number', got {ctx.payload!r}")
    wanted = _retest_sets(ctx.payload)
    with session_scope(ctx.engine) as session:
        repository = store.get_repository(session, full_name=repo)
        pr = (
            store.get_pull(session, repo_id=repository.id, number=number)
            if repository and repository.id
            else None
        )
        if repository is None or pr is None:
            return
        run = session.exec(
            select(IntegrationRun)
            .where(
                IntegrationRun.repo_id == repository.id,
                IntegrationRun.kind == "stack",
                IntegrationRun.target_pr == number,
            )
            .order_by(col(IntegrationRun.id).desc())
        ).first()
        if run is None or run.heads.get(str(number)) != pr.head_sha or not run.final_tree:
            return  # no integration of the current head yet: the next integrate tests it
        requests = job_service.job_requests(ctx.settings, wanted)
        created = job_service.create_run_jobs(session, run, requests, force=True)
    if created:
        ctx.enqueue(POLL_JOBS, {}, dedupe_key=POLL_JOBS)
        payload, dedupe = report_follow_up(repo, [number])
        ctx.enqueue(REPORT, payload, dedupe_key=dedupe)


def _retest_sets(payload: dict[str, Any]) -> list[str] | None:
    """One test set (``/stackbot retest SET``, or the check run that was re-requested) or all."""
    test_set = payload.get("test_set")
    if isinstance(test_set, str) and test_set:
        return [test_set]
    external = payload.get("external_id")
    if isinstance(external, str) and external.count("/") == 2:
        return [external.split("/")[1]]
    return None


def register_tasks(registry: TaskRegistry) -> None:
    registry.add(INTEGRATE, handle_integrate)
    registry.add(POLL_JOBS, handle_poll_jobs)
    registry.add(BASE_MOVED, handle_base_moved)
    registry.add(RETEST, handle_retest)
    registry.add(CONFLICT_MATRIX, handle_conflict_matrix)
