"""GPU jobs for integrated trees: which jobs a run gets, created once, or a result reused.

A job is one test set × shape × tree. Its result is reusable for any run whose tree and job
configuration match (``config_hash``): such a run gets its own job row pointing at the original
(``reused_from_job_id``) and copying its outcome, so every run's report and page read their own
rows, and "reused from run N" can be said. Identical trees are never tested twice.

Running the jobs (submit, poll, collect, cancel) is :mod:`stackbot.services.job_execution`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlmodel import Session

from gpu_jobs.testsets import TestSet, is_own_test_set
from stackbot.config import Settings
from stackbot.db import jobs_store
from stackbot.db.models import IntegrationRun, Job
from stackbot.db.models.jobs import FINISHED_STATES as FINISHED

log = logging.getLogger(__name__)


def config_hash(test_set: TestSet, shape: str) -> str:
    """What makes two jobs on one tree the same job."""
    data = {
        "test_set": test_set.name,
        "shape": shape,
        "targets": list(test_set.megatron_targets),
        "env": dict(sorted(test_set.env.items())),
        "container_image": test_set.container_image,
        "setup_commands": list(test_set.setup_commands),
        "timeout_s": test_set.timeout_s,
        # Only when set, so test sets without conventions keep the hashes they had.
        **test_set.conventions(),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def result_key(
    tree: str, config_hash: str, shape: str, environment: Mapping[str, str] | None
) -> str:
    """What decides a job's result (issue 24): the tree, the test set's definition (its
    ``config_hash``: targets, markers, conventions, env, image, timeout), the shape and the
    runner environment the nodes reported (python, torch, CUDA, image digest). A result is
    reused only where all of them are the same; any change invalidates it."""
    data = {
        "tree": tree,
        "test_set_definition": config_hash,
        "shape": shape,
        "runner_environment": dict(sorted((environment or {}).items())),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class JobRequest:
    test_set: TestSet
    shape: str

    @property
    def targets(self) -> list[str] | None:
        """The job's own targets: PRs' own test files (None: the test set's)."""
        if not is_own_test_set(self.test_set.name):
            return None
        return list(self.test_set.megatron_targets)

    @property
    def label(self) -> str:
        return f"{self.test_set.name} {self.shape}"


def job_requests(
    sets: Mapping[str, TestSet], settings: Settings, names: Iterable[str] | None = None
) -> list[JobRequest]:
    """One request per shape of each test set named (default: the configured default sets)."""
    wanted = list(names) if names is not None else list(settings.default_test_sets)
    requests: list[JobRequest] = []
    for name in wanted:
        test_set = sets.get(name)
        if test_set is None:
            log.warning("test set %r is configured but not defined; known: %s", name, sorted(sets))
            continue
        requests.extend(JobRequest(test_set, str(shape)) for shape in test_set.shapes)
    return requests


def create_run_jobs(
    session: Session,
    run: IntegrationRun,
    requests: Sequence[JobRequest],
    *,
    force: bool = False,
) -> list[Job]:
    """The run's jobs: one per request, reusing an earlier result on the same tree unless
    ``force`` (a retest). Idempotent: a request the run already has a job for is left alone."""
    assert run.id is not None and run.final_tree and run.final_commit
    existing = {
        (job.test_set, job.shape): job for job in jobs_store.jobs_of_run(session, run_id=run.id)
    }
    created = []
    # Two runs with one tree (a series and a stack, or one integration on two workers) look for
    # an original to reuse at once: the lock makes the second find the first's.
    jobs_store.lock_trees(
        session,
        keys=[(run.final_tree, config_hash(r.test_set, r.shape), 1) for r in requests],
    )
    for request in requests:
        key = (request.test_set.name, request.shape)
        if key in existing and not force:
            continue
        digest = config_hash(request.test_set, request.shape)
        source = None
        if not force:
            source = reusable_job(session, run.final_tree, digest) or covering_job(
                session, run.final_tree, request
            )
        job = Job(
            repo_id=run.repo_id,
            integration_run_id=run.id,
            kind="integration",
            base_ref=run.base_ref,
            test_set=request.test_set.name,
            shape=request.shape,
            tree_sha=run.final_tree,
            commit_sha=run.final_commit,
            config_hash=digest,
            purpose="tree",
            series_key=run.series_key,
            targets=request.targets,
        )
        if source is not None:
            copy_outcome(job, source)
        session.add(job)
        created.append(job)
    session.flush()
    return created


def create_baseline_jobs(
    session: Session,
    *,
    repo_id: int,
    base_ref: str,
    base_sha: str,
    base_tree: str,
    requests: Sequence[JobRequest],
) -> list[Job]:
    """Jobs on the base commit, once per base SHA and configuration (two integrations at once
    included: the base tree's keys are locked before looking)."""
    created = []
    jobs_store.lock_trees(
        session, keys=[(base_tree, config_hash(r.test_set, r.shape), 1) for r in requests]
    )
    for request in requests:
        digest = config_hash(request.test_set, request.shape)
        if jobs_store.baseline_job_exists(session, commit_sha=base_sha, config_hash=digest):
            continue
        job = Job(
            repo_id=repo_id,
            kind="baseline",
            base_ref=base_ref,
            test_set=request.test_set.name,
            shape=request.shape,
            tree_sha=base_tree,
            commit_sha=base_sha,
            config_hash=digest,
            purpose="baseline",
            targets=request.targets,
        )
        source = reusable_job(session, base_tree, digest)
        if source is not None:
            copy_outcome(job, source)
        session.add(job)
        created.append(job)
    session.flush()
    return created


def reusable_job(session: Session, tree: str, digest: str) -> Job | None:
    """The original job (never a copy) whose result a job on ``tree`` may take."""
    return jobs_store.reusable_job(session, tree=tree, config_hash=digest)


def covering_job(session: Session, tree: str, request: JobRequest) -> Job | None:
    """For own test files: the original job on ``tree`` that ran every one of the request's
    files, and maybe more, with the same definition otherwise (shape, env, image, conventions,
    timeout) and today's runner environment. Each PR's results are read from an own-files job
    file by file, so its result holds for the fewer files: when a parent lands, the children's
    tree is the one tested before, now without the parent's files (main has them), and nothing
    is run again."""
    if not is_own_test_set(request.test_set.name):
        return None
    wanted = set(request.test_set.megatron_targets)
    for job in jobs_store.own_jobs_on_tree(
        session, tree=tree, test_set=request.test_set.name, shape=request.shape
    ):
        ran = tuple(job.targets or ())
        if not wanted <= set(ran):
            continue
        same = dataclasses.replace(request.test_set, megatron_targets=ran)
        if config_hash(same, request.shape) != job.config_hash:
            continue  # another definition: its result does not hold
        now = jobs_store.current_environment(session, config_hash=job.config_hash)
        if jobs_store.same_environment(job, now):
            return job
    return None


def copy_outcome(job: Job, source: Job) -> None:
    """Make ``job`` a copy of ``source``'s outcome (now, or when it finishes)."""
    job.reused_from_job_id = source.id
    job.status = source.status if source.status in FINISHED else "queued"
    job.counts = dict(source.counts or {})
    job.result = source.result
    job.node = source.node
    job.out_dir = source.out_dir
    job.started_at = source.started_at
    job.finished_at = source.finished_at
    job.error = source.error
    job.runner_env = dict(source.runner_env) if source.runner_env else None
    job.result_key = source.result_key
    job.gpu_seconds = 0.0  # a reused result costs nothing of its own
