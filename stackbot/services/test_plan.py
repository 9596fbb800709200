"""Apply the test plan (``stackbot.domain.test_plan``) to one integration run's stored jobs.

:func:`plan_run` reads the run's merged steps, its jobs and main's results, asks the domain which
jobs are still wanted, creates them (taking the result of an identical tree and configuration
where one exists: an identical tree is never tested twice) and stores the findings. It runs
under a lock on the run, so two passes (``integrate`` and ``poll_jobs`` on two workers) create
each job once; it is called again whenever the run's jobs or main's change, and a pass that
reused finished results plans again at once.

Which runs get jobs at all is :func:`tested_runs`: under ``series-first`` the series run, plus
the stack of every PR that the series run leaves out or cannot merge (and a PR in no series);
under ``every-stack`` every run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.testsets import is_own_test_set
from stackbot.db import integration_store, jobs_store, quarantine_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep, Job, TestFinding
from stackbot.db.models.jobs import FINISHED_STATES, NOT_REUSABLE_STATES
from stackbot.domain.integration import RunKind, StepOutcome
from stackbot.domain.own_tests import file_of
from stackbot.domain.quarantine import QuarantinePolicy
from stackbot.domain.test_plan import (
    BISECT,
    CONFIRM,
    RETRY,
    TREE,
    Config,
    JobFact,
    Layer,
    TreePlan,
    WantedJob,
    plan_tree,
)
from stackbot.domain.types import PrNumber
from stackbot.services import quarantine, read_batch
from stackbot.services.jobs import copy_outcome

log = logging.getLogger(__name__)

SERIES_FIRST, EVERY_STACK = "series-first", "every-stack"
# How gpu_jobs.conventions begins the message of a test whose target ran short of ranks.
NOT_JUDGED = "not judged: "
_MERGED = (StepOutcome.CLEAN, StepOutcome.RESOLVED)
# A pass that took finished results plans again; this bounds the rounds (one per prefix
# probe of a bisection at most).
_MAX_ROUNDS = 16
# The purposes whose job takes an identical tree's result instead of running again.
_REUSING = (TREE, BISECT, CONFIRM)


@dataclass
class PlanOutcome:
    created: list[int] = field(default_factory=list)  # new job ids (queued or reused copies)
    findings_changed: bool = False
    final: bool = True


def tested_runs(
    runs: Sequence[IntegrationRun],
    steps_of: Mapping[int, Sequence[IntegrationStep]],
    *,
    policy: str,
) -> list[IntegrationRun]:
    """The runs whose trees get jobs under ``policy`` (the runs of one integration)."""
    if policy == EVERY_STACK:
        return list(runs)
    series = [r for r in runs if r.kind == RunKind.SERIES]
    if not series:
        return list(runs)  # a PR in no series: its stack is all there is
    in_series = {
        s.pr_number for run in series for s in steps_of.get(run.id or 0, ()) if s.outcome in _MERGED
    }
    return [
        run
        for run in runs
        if run.kind == RunKind.SERIES
        or (run.target_pr is not None and run.target_pr not in in_series)
    ]


def plan_run(
    engine: Engine,
    run_id: int,
    *,
    policy: str,
    infra_retries: int,
    flaky_window_days: int = QuarantinePolicy.window_days,
) -> PlanOutcome:
    """Create the jobs the run's test plan still wants and store its findings.
    ``flaky_window_days``: how far back a test's flaky record counts (the quarantine's
    window): such a test's repeated failure gets more reruns before it counts."""
    outcome = PlanOutcome()
    for _ in range(_MAX_ROUNDS):
        created, changed, final, again = _plan_once(
            engine,
            run_id,
            policy=policy,
            infra_retries=infra_retries,
            flaky_window_days=flaky_window_days,
        )
        outcome.created.extend(created)
        outcome.findings_changed |= changed
        outcome.final = final
        if not again:
            break
    return outcome


def _seen_flaky(session: Session, repo_id: int, window_days: int) -> frozenset[str]:
    """The repository's tests seen flaky (failed, then passed on a rerun of the same tree)
    within the window, on the quarantine's clock."""
    since = quarantine.clock() - timedelta(days=window_days)
    seen = quarantine_store.flaky_observations(session, repo_id=repo_id, since=since)
    return frozenset(o.nodeid for o in seen)


def _plan_once(
    engine: Engine, run_id: int, *, policy: str, infra_retries: int, flaky_window_days: int
) -> tuple[list[int], bool, bool, bool]:
    with session_scope(engine) as session:
        run = jobs_store.lock_run(session, run_id=run_id)
        if run is None or run.id is None:
            return [], False, True, False
        jobs = jobs_store.jobs_of_run(session, run_id=run.id)
        tree_jobs = [j for j in jobs if j.purpose == TREE and j.attempt == 1]
        if not tree_jobs:
            return [], False, True, False
        steps = integration_store.steps_of(session, run_id=run.id)
        layers, commits = _layers(steps)
        configs = _configs(tree_jobs)
        hashes = {config: job.config_hash for job in tree_jobs if (config := _config(job))}
        facts = [_fact(session, job) for job in jobs]
        main = _main_results(session, run, configs)
        known = _known_results(session, layers, hashes, run_id=run.id)
        # Every run bisects over its own layers: a stack run's failure introduced by an ancestor
        # is that ancestor's, as in the series run (a stack's prefixes are its ancestors' stack
        # trees, mostly tested already, so this costs little).
        bisect = True
        plan = plan_tree(
            layers=layers,
            configs=configs,
            jobs=facts,
            main=main,
            bisect=bisect,
            target_pr=PrNumber(run.target_pr) if run.target_pr is not None else None,
            infra_retries=infra_retries,
            results_by_tree=known,
            quarantined=quarantine_store.active_tests(session, repo_id=run.repo_id),
            seen_flaky=_seen_flaky(session, run.repo_id, flaky_window_days),
        )
        templates = {config: job for job in tree_jobs if (config := _config(job))}
        created: list[Job] = []
        existing = {_key(job) for job in jobs}
        missing = [w for w in _unique(plan.wanted) if _wanted_key(w, hashes) not in existing]
        # Other runs with these trees may be planning now: lock the keys before looking for a
        # result to reuse, so one tree is never tested twice (the run lock covers this run only).
        jobs_store.lock_trees(
            session,
            keys=[
                (_tree_of(run, w, layers, templates[w.config]), hashes[w.config], w.attempt)
                for w in missing
                if w.purpose in _REUSING
            ],
        )
        for wanted in missing:
            job = _make_job(session, run, wanted, templates[wanted.config], layers, commits)
            session.add(job)
            created.append(job)
        session.flush()
        changed = jobs_store.replace_findings(
            session, run_id=run.id, findings=_finding_rows(run.id, plan)
        )
        again = any(job.status in FINISHED_STATES for job in created)
        ids = [job.id for job in created if job.id is not None]
    if ids:
        log.info("run %d: the test plan added %d job(s)", run_id, len(ids))
    return ids, changed, plan.final, again


def retry_infra_baselines(
    engine: Engine, job_ids: Sequence[int], *, infra_retries: int
) -> list[int]:
    """Main's jobs whose result is infra, retried on another node (a run's own jobs are
    retried by its plan); returns the retries made."""
    made: list[int] = []
    with session_scope(engine) as session:
        for job in jobs_store.jobs_by_ids(session, job_ids=job_ids):
            if job.kind != "baseline" or job.status != "infra" or job.id is None:
                continue
            chain = _retry_chain(session, job)
            if len(chain) - 1 >= infra_retries:
                continue
            if jobs_store.copies_or_retries_of(session, job_id=job.id):
                continue  # already retried
            nodes = sorted({n for j in chain for n in _node_names(j.node)})
            retry = Job(
                repo_id=job.repo_id,
                kind="baseline",
                base_ref=job.base_ref,
                test_set=job.test_set,
                shape=job.shape,
                tree_sha=job.tree_sha,
                commit_sha=job.commit_sha,
                config_hash=job.config_hash,
                purpose=RETRY,
                attempt=job.attempt,
                retry_of_job_id=job.id,
                excluded_nodes=nodes,
                targets=job.targets,
            )
            session.add(retry)
            session.flush()
            if retry.id is not None:
                made.append(retry.id)
    return made


def _retry_chain(session: Session, job: Job) -> list[Job]:
    chain = [job]
    while chain[-1].retry_of_job_id is not None and len(chain) < 50:
        parent = jobs_store.get_job(session, job_id=chain[-1].retry_of_job_id)
        if parent is None:
            break
        chain.append(parent)
    return chain


def _node_names(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def merged_order(steps: Sequence[IntegrationStep]) -> list[int]:
    """The PR numbers of a run's merged steps in merge order: position k of a bisection (the
    prefix of k PRs) ends with ``merged_order(steps)[k - 1]``."""
    return [int(layer.pr) for layer in _layers(steps)[0]]


def _layers(steps: Sequence[IntegrationStep]) -> tuple[list[Layer], list[str]]:
    merged = [s for s in sorted(steps, key=lambda s: s.position) if s.outcome in _MERGED]
    layers = [
        Layer(index, PrNumber(s.pr_number), s.tree or "") for index, s in enumerate(merged, 1)
    ]
    return layers, [s.commit or "" for s in merged]


def _config(job: Job) -> Config:
    return Config(job.test_set, job.shape, tuple(job.targets) if job.targets else None)


def _configs(tree_jobs: Sequence[Job]) -> list[Config]:
    return sorted({_config(job) for job in tree_jobs})


def _tests(session: Session, job: Job) -> dict[str, str]:
    """The finished job's outcomes per node id, read as the report reads them, without the
    tests it could not judge (their target ran on fewer ranks than it needs: never a suspect,
    never bisected, never blamed on a PR). An own-files job's tests are those of its targets
    (a result it took from a job that ran more files, a landed parent's among them, holds more)."""
    outcomes = read_batch.outcomes_of(session, job)
    if outcomes is None:
        return {}
    unjudged = _not_judged(job)
    targets = set(job.targets or ()) if is_own_test_set(job.test_set) else None
    return {
        nodeid: outcome
        for nodeid, outcome in outcomes.tests.items()
        if nodeid not in unjudged and (targets is None or file_of(nodeid) in targets)
    }


def _not_judged(job: Job) -> set[str]:
    """The node ids gpu_jobs' conventions marked "not judged" in the job's stored result."""
    tests = (job.result or {}).get("tests") or ()
    return {
        str(test.get("nodeid"))
        for test in tests
        if isinstance(test, dict) and str(test.get("message") or "").startswith(NOT_JUDGED)
    }


def _fact(session: Session, job: Job) -> JobFact:
    assert job.id is not None
    return JobFact(
        id=job.id,
        config=_config(job),
        purpose=job.purpose,
        step_position=job.step_position,
        attempt=job.attempt,
        status=job.status,
        tests=_tests(session, job),
        node=job.node,
        retry_of=job.retry_of_job_id,
    )


def _main_results(
    session: Session, run: IntegrationRun, configs: Sequence[Config]
) -> dict[Config, Mapping[str, str] | None]:
    """Main's outcomes per configuration (None while main's job runs; absent: no result)."""
    baselines = jobs_store.baselines_on(session, repo_id=run.repo_id, commit_sha=run.base_sha)
    found: dict[Config, Mapping[str, str] | None] = {}
    for config in configs:
        candidates = [
            j
            for j in baselines
            if j.test_set == config.test_set
            and j.shape == config.shape
            and _same_targets(j.targets, config.targets)
        ]
        counted = [j for j in candidates if j.status not in NOT_REUSABLE_STATES]
        if not counted:
            continue
        newest = counted[-1]
        found[config] = _tests(session, newest) if newest.status in FINISHED_STATES else None
    return found


def _same_targets(on_main: Sequence[str] | None, here: Sequence[str] | None) -> bool:
    """A baseline of a PR's own test files runs those of them that exist on main."""
    if not here:
        return not on_main
    return bool(on_main) and set(on_main or ()) <= set(here)


def _known_results(
    session: Session, layers: Sequence[Layer], hashes: Mapping[Config, str], *, run_id: int
) -> dict[tuple[str, Config], Mapping[str, str] | None]:
    """Results of other runs' first attempts on the prefixes' trees (None: still running)."""
    by_hash = {digest: config for config, digest in hashes.items()}
    jobs = jobs_store.first_runs_on_trees(
        session, trees=[layer.tree for layer in layers], config_hashes=list(by_hash)
    )
    known: dict[tuple[str, Config], Mapping[str, str] | None] = {}
    for job in jobs:
        if job.integration_run_id == run_id and job.purpose == BISECT:
            continue  # the run's own probes are read as its jobs
        key = (job.tree_sha, by_hash[job.config_hash])
        if job.status in FINISHED_STATES:
            known[key] = _tests(session, job)
        else:
            known.setdefault(key, None)
    return known


def _key(job: Job) -> tuple[object, ...]:
    return (
        job.test_set,
        job.shape,
        job.config_hash,
        job.purpose,
        job.step_position,
        job.attempt,
        job.retry_of_job_id,
    )


def _wanted_key(wanted: WantedJob, hashes: Mapping[Config, str]) -> tuple[object, ...]:
    config = wanted.config
    return (
        config.test_set,
        config.shape,
        hashes[config],
        wanted.purpose,
        wanted.step_position,
        wanted.attempt,
        wanted.retry_of,
    )


def _unique(wanted: Sequence[WantedJob]) -> list[WantedJob]:
    seen: dict[tuple[object, ...], WantedJob] = {}
    for item in wanted:
        seen.setdefault(item.key, item)
    return list(seen.values())


def _tree_of(run: IntegrationRun, wanted: WantedJob, layers: Sequence[Layer], template: Job) -> str:
    if wanted.step_position is None:
        return run.final_tree or template.tree_sha
    return layers[wanted.step_position - 1].tree


def _make_job(
    session: Session,
    run: IntegrationRun,
    wanted: WantedJob,
    template: Job,
    layers: Sequence[Layer],
    commits: Sequence[str],
) -> Job:
    tree = _tree_of(run, wanted, layers, template)
    if wanted.step_position is None:
        commit = run.final_commit or template.commit_sha
    else:
        commit = commits[wanted.step_position - 1]
    job = Job(
        repo_id=run.repo_id,
        integration_run_id=run.id,
        kind="integration",
        base_ref=run.base_ref,
        test_set=template.test_set,
        shape=template.shape,
        tree_sha=tree,
        commit_sha=commit,
        config_hash=template.config_hash,
        purpose=wanted.purpose,
        step_position=wanted.step_position,
        attempt=wanted.attempt,
        retry_of_job_id=wanted.retry_of,
        excluded_nodes=list(wanted.excluded_nodes),
        targets=list(template.targets) if template.targets else None,
        series_key=run.series_key,
    )
    if wanted.purpose in _REUSING:
        # An identical tree already tested with this configuration (by another run, an
        # earlier push or the other policy) is not tested again.
        source = jobs_store.reusable_job(
            session, tree=tree, config_hash=template.config_hash, attempt=wanted.attempt
        )
        if source is not None:
            copy_outcome(job, source)
    return job


def _finding_rows(run_id: int, plan: TreePlan) -> list[TestFinding]:
    return [
        TestFinding(
            run_id=run_id,
            test_set=f.config.test_set,
            shape=f.config.shape,
            nodeid=f.nodeid,
            failure_class=f.failure_class,
            pr_number=f.pr,
            evidence=dict(f.evidence),
        )
        for f in plan.findings
    ]


__all__ = ["EVERY_STACK", "RETRY", "SERIES_FIRST", "PlanOutcome", "plan_run", "tested_runs"]
