"""The ``integrate`` task: integrate a series, create the jobs its trees need, ask for reports.

Queued by ``sync_pull`` and ``pr_command``, and by ``base_moved`` for every active series. It
fetches the mirror, makes a ``stack`` run for each live PR and one ``series`` run
(:func:`stackbot.domain.pipeline.plan_series`; a run identical to a stored one, same base and
heads, is not made again), creates the jobs of every tree whose PRs are all approved (reusing
results of identical trees) and the baseline jobs on the base commit, then asks for
``poll_jobs``, a ``report`` of every PR of the series, and the series' conflict matrix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.testsets import OwnTests
from stackbot.adapters.git import GitMirror
from stackbot.adapters.git_maintenance import shared_use
from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db import integration_store, jobs_store, landing_store
from stackbot.db.engine import session_scope
from stackbot.db.models._columns import utcnow
from stackbot.domain.integration import RunKind, RunStatus, StepOutcome
from stackbot.domain.landing import QUEUE_MODE
from stackbot.domain.pipeline import PlannedRun, PrState, plan_series, untested_reason
from stackbot.domain.series import build_series_graph
from stackbot.domain.tasks import ConflictMatrix, Integrate, PollJobs, Report
from stackbot.domain.types import PrNumber
from stackbot.errors import BadInput
from stackbot.services import approval_carry, test_plan
from stackbot.services import jobs as job_service
from stackbot.services import own_tests as own_service
from stackbot.services.integration import RunRequest, run_integration
from stackbot.services.resources import ServiceContext, WorkerResources
from stackbot.taskqueue import TaskRegistry

log = logging.getLogger(__name__)


@dataclass
class IntegrateOutcome:
    run_ids: list[int] = field(default_factory=list)
    reused_runs: list[int] = field(default_factory=list)
    jobs_created: list[int] = field(default_factory=list)
    affected: list[PrNumber] = field(default_factory=list)
    untested: dict[int, str] = field(default_factory=dict)  # run id -> why no jobs


@dataclass(frozen=True)
class _Target:
    """What every run of one integration shares: the repository, its base and the heads."""

    repo_id: int
    base_ref: str  # the branch
    base_sha: str  # the commit every run is pinned to
    heads: Mapping[int, str]
    series_key: str | None


def integrate(
    engine: Engine,
    settings: Settings,
    resources: WorkerResources,
    task: Integrate,
) -> IntegrateOutcome:
    """Integrate one series (or one PR in no series) and create the jobs its trees need."""
    with Session(engine) as session:
        repository = store.get_repository(session, full_name=task.repo)
        if repository is None or repository.id is None:
            raise BadInput(f"{task.repo} is not known to stackbot; sync one of its PRs first")
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
        affected = _affected(session, repo_id, task)
    graph = build_series_graph(records, repo=task.repo)
    states: dict[int, PrState] = {
        int(r.number): PrState(
            r.number,
            r.head_sha,
            live=r.is_open and not r.merged and r.number not in graph.superseded,
            approved_shas=approvals.get(r.number, frozenset()),
        )
        for r in records
    }
    lone = task.number
    if task.gate:
        planned = _gate_plan(task.gate, states)
    else:
        planned = plan_series(graph, states, series_key=task.series_key, lone_pr=lone)
    outcome = IntegrateOutcome(affected=affected)
    if not planned:
        return outcome
    mirror = GitMirror.open_or_clone(
        clone_url, settings.mirrors_dir, timeout=settings.git_fetch_timeout_s
    )
    # A repack of the mirror must not drop what this integration fetches and writes.
    with shared_use(mirror.git_dir, wait_s=settings.maintenance.lock_wait_s):
        # Only what this integration merges: the base and each planned PR's head.
        wanted = sorted({n for plan in planned for n in plan.prs})
        mirror.fetch([f"refs/heads/{base_ref}", *(f"refs/pull/{n}/head" for n in wanted)])
        base_sha = mirror.rev_parse(base_ref)
        # A new head whose own patch is the approved one's keeps its vetter's approval.
        for carried in approval_carry.carry_approvals(
            engine, mirror, repo_id=repo_id, base_sha=base_sha, rows=rows, graph=graph,
            numbers=wanted,
        ):  # fmt: skip
            if carried.decision.carry:
                state = states[carried.number]
                states[carried.number] = dataclasses.replace(
                    state, approved_shas=state.approved_shas | {carried.head_sha}
                )
        target = _Target(
            repo_id,
            base_ref,
            base_sha,
            {int(r.number): r.head_sha for r in records},
            task.series_key,
        )
        requests = job_service.job_requests(resources.test_sets(), settings)
        own = resources.own_tests()
        made: list[int] = []
        for plan in planned:
            run_id, reused = _run_once(engine, settings, resources, mirror, target, plan)
            (outcome.reused_runs if reused else outcome.run_ids).append(run_id)
            made.append(run_id)
        outcome.untested.update(test_runs(engine, settings, made, requests, states, own=own))
        with session_scope(engine) as session:
            tested = [
                rid for rid in outcome.run_ids + outcome.reused_runs if rid not in outcome.untested
            ]
            if tested:
                job_service.create_baseline_jobs(
                    session,
                    repo_id=repo_id,
                    base_ref=base_ref,
                    base_sha=base_sha,
                    base_tree=mirror.tree_of(base_sha),
                    requests=[*requests, *_own_baselines(session, own, tested)],
                )
        plan_tested_runs(engine, settings, tested)
        with Session(engine) as session:
            outcome.jobs_created = [
                j.id for j in jobs_store.jobs_of_runs(session, run_ids=tested) if j.id is not None
            ]
    return outcome


def _gate_plan(prs: Sequence[PrNumber], states: Mapping[int, PrState]) -> list[PlannedRun]:
    """A landing's speculative tree as one run: exactly ``prs`` in this order (each depending on
    the one before it: a conflict skips the rest), named by the PRs and their heads so that an
    identical tree asked again is the same run. Nothing when a PR of it is no longer live."""
    if not prs or any(not (s := states.get(int(n))) or not s.live for n in prs):
        return []
    digest = hashlib.sha1(
        " ".join(f"{n}:{states[int(n)].head_sha}" for n in prs).encode()
    ).hexdigest()
    depends = {n: (prs[i - 1],) for i, n in enumerate(prs) if i}
    return [PlannedRun("gate", f"gate-{digest[:16]}", tuple(prs), None, depends)]


def _run_once(
    engine: Engine,
    settings: Settings,
    resources: WorkerResources,
    mirror: GitMirror,
    target: _Target,
    plan: PlannedRun,
) -> tuple[int, bool]:
    """The run for ``plan``: a stored identical one (same kind, target, base and heads), or a
    new one. Returns (run id, reused)."""
    wanted = {str(n): target.heads[n] for n in plan.prs}
    kind = RunKind(plan.kind)
    with Session(engine) as session:
        for run in integration_store.recent_runs(
            session, repo_id=target.repo_id, kind=kind, base_sha=target.base_sha, name=plan.name
        ):
            if run.heads == wanted and run.id is not None:
                return run.id, True
    request = RunRequest(
        base_ref=target.base_sha,
        prs=[(n, target.heads[n]) for n in plan.prs],
        kind=kind,
        name=plan.name,
        depends_on={n: tuple(p) for n, p in plan.depends_on.items()},
        generated_files=tuple(settings.generated_files),
        checker_command=settings.allowlist_checker_command,
    )
    result = run_integration(
        mirror, request, allowlist=resources.allowlist(mirror), memo=resources.step_memo(mirror)
    )
    with session_scope(engine) as session:
        row = integration_store.save_run(
            session,
            target.repo_id,
            result,
            series_key=target.series_key,
            target_pr=plan.target_pr,
        )
        row.base_ref = target.base_ref  # the branch, not the SHA the run was pinned to
        session.add(row)
        own_service.record_own_test_files(
            session, mirror, resources.own_tests(), row, depends_on=plan.depends_on
        )
        assert row.id is not None
        return row.id, False


def _own_baselines(
    session: Session, own: OwnTests | None, run_ids: Sequence[int]
) -> list[job_service.JobRequest]:
    """Main's jobs for the own test files of the tested runs' PRs that main has."""
    requests: list[job_service.JobRequest] = []
    for run_id in run_ids:
        run = integration_store.get_run(session, run_id=run_id)
        if run is not None:
            steps = integration_store.steps_of(session, run_id=run_id)
            requests.extend(own_service.baseline_requests(own, run, steps))
    return requests


def test_runs(
    engine: Engine,
    settings: Settings,
    run_ids: Sequence[int],
    requests: Sequence[job_service.JobRequest],
    states: dict[int, PrState],
    *,
    own: OwnTests | None = None,
) -> dict[int, str]:
    """Create the jobs of one integration's runs that the test plan policy tests; returns why
    each other run gets no jobs."""
    untested: dict[int, str] = {}
    chosen = _runs_to_test(engine, run_ids, settings.test_plan_policy)
    for run_id in run_ids:
        if run_id not in chosen:
            untested[run_id] = chosen_elsewhere(settings.test_plan_policy)
    # The series' jobs first: a stack whose tree equals the series' then reuses them, and the
    # shared jobs keep the series' place in the queue instead of a stack's.
    for run_id in chosen:
        why = _create_jobs(engine, run_id, requests, states, own)
        if why:
            untested[run_id] = why
    if any(run_id in untested for run_id in _series_runs(engine, chosen)):
        # The series tree cannot be tested (a PR in it waits for a vetter, say): each PR's
        # stack is tested instead, as under every-stack, so an approved PR is not held back.
        for run_id in run_ids:
            if run_id not in chosen:
                why = _create_jobs(engine, run_id, requests, states, own)
                if why:
                    untested[run_id] = why
                else:
                    untested.pop(run_id, None)
    return untested


def _series_runs(engine: Engine, run_ids: Sequence[int]) -> list[int]:
    with Session(engine) as session:
        runs = [integration_store.get_run(session, run_id=run_id) for run_id in run_ids]
    return [r.id for r in runs if r is not None and r.id and r.kind == RunKind.SERIES]


def plan_tested_runs(engine: Engine, settings: Settings, run_ids: Sequence[int]) -> None:
    """Plan each tested run once its jobs and main's exist: a reused finished result may
    already call for a rerun or a bisection."""
    for run_id in run_ids:
        test_plan.plan_run(
            engine, run_id, policy=settings.test_plan_policy, infra_retries=settings.infra_retries
        )


def _runs_to_test(engine: Engine, run_ids: Sequence[int], policy: str) -> list[int]:
    """Which of one integration's runs get jobs under the test plan policy, series first."""
    with Session(engine) as session:
        runs = [r for rid in run_ids if (r := integration_store.get_run(session, run_id=rid))]
        steps = {r.id: integration_store.steps_of(session, run_id=r.id) for r in runs if r.id}
        chosen = test_plan.tested_runs(runs, steps, policy=policy)
    ordered = sorted(chosen, key=lambda r: (r.kind != RunKind.SERIES, run_ids.index(r.id or 0)))
    return [r.id for r in ordered if r.id is not None]


def chosen_elsewhere(policy: str) -> str:
    """Why a stack gets no jobs of its own under ``series-first``."""
    return (
        "tested in the series tree (test plan series-first): a failure there is bisected to "
        "the PR that introduced it"
    )


def _create_jobs(
    engine: Engine,
    run_id: int,
    requests: Sequence[job_service.JobRequest],
    states: dict[int, PrState],
    own: OwnTests | None = None,
) -> str | None:
    """Jobs for the run's tree, or why it is not tested."""
    with session_scope(engine) as session:
        run = integration_store.get_run(session, run_id=run_id)
        assert run is not None
        steps = integration_store.steps_of(session, run_id=run_id)
        merged = [
            s.pr_number for s in steps if s.outcome in (StepOutcome.CLEAN, StepOutcome.RESOLVED)
        ]
        if run.kind == RunKind.STACK and run.status == RunStatus.CONFLICT:
            return "the stack does not merge cleanly"
        if not merged or not run.final_tree or not run.final_commit:
            return "nothing merged"
        heads = {PrNumber(int(k)): v for k, v in run.heads.items()}
        why = untested_reason([PrNumber(n) for n in merged], heads, states)
        if why:
            return why
        own_requests = own_service.run_requests(own, run, steps)
        job_service.create_run_jobs(session, run, [*requests, *own_requests])
    return None


def _affected(session: Session, repo_id: int, task: Integrate) -> list[PrNumber]:
    """Whose reports the integration changes: every member of the series, or the lone PR."""
    if task.series_key is not None:
        series = store.get_series(session, repo_id=repo_id, key=task.series_key)
        if series is not None and series.id is not None:
            return [PrNumber(n) for n in store.series_member_numbers(session, series_id=series.id)]
    return [task.number] if task.number is not None else []


# While a landing merges its PRs one by one (seconds), main passes through trees that nobody
# will keep: a series integrated on one of them would start GPU jobs (main's baselines, the
# other PRs' trees) on a main that is gone a second later. Such an integration waits until the
# landing has merged (or stopped); a landing merging longer than this is not waited for (a
# crashed or stuck one must not hold every series of the repository back).
HOLD_WHILE_MERGING_S = 3.0
MERGING_HELD_AT_MOST = timedelta(minutes=10)


def held_by_a_landing(engine: Engine, task: Integrate) -> bool:
    """Whether ``task`` should wait for a landing of its repository that is merging now (a
    landing's own gate run and a landing through GitHub's merge queue, whose merges take a queue
    run each, are not held)."""
    if task.gate:
        return False
    with Session(engine) as session:
        repository = store.get_repository(session, full_name=task.repo)
        if repository is None or repository.id is None:
            return False
        merging = landing_store.merging_landings_of_repo(
            session,
            repo_id=repository.id,
            since=utcnow() - MERGING_HELD_AT_MOST,
            except_method=QUEUE_MODE,
        )
    return bool(merging)


def handle_integrate(ctx: ServiceContext, task: Integrate) -> None:
    if held_by_a_landing(ctx.engine, task):
        log.info("integrate %s %s: held while a landing merges", task.repo, task.series_key)
        ctx.enqueue_task(task, delay_s=HOLD_WHILE_MERGING_S)
        return
    outcome = integrate(ctx.engine, ctx.settings, ctx.services, task)
    log.info(
        "integrate %s %s: %d new runs, %d unchanged, %d jobs",
        task.repo,
        task.series_key or f"#{task.number}",
        len(outcome.run_ids),
        len(outcome.reused_runs),
        len(outcome.jobs_created),
    )
    if outcome.jobs_created:
        ctx.enqueue_task(PollJobs())
    if outcome.affected:
        ctx.enqueue_task(Report.of(task.repo, outcome.affected))
    if task.series_key is not None and outcome.run_ids and not task.gate:
        # After the reports: the matrix is for the dashboard, and costs a merge per pair.
        ctx.enqueue_task(ConflictMatrix(task.repo, task.series_key))


def register_tasks(registry: TaskRegistry) -> None:
    registry.add_task(Integrate, handle_integrate)
