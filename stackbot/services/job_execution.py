"""Running GPU jobs (:mod:`stackbot.services.jobs` creates them): submit, poll, collect the
result (copied to the jobs reusing it) and cancel.

Jobs are submitted by the ``poll_jobs`` task, not where they are created: a local host has a
small pool of GPUs (or CPU rank slots), and the executor answers ``PoolBusy`` until one frees.

Starting a job is idempotent. The intent (``starting``, with the job's one out_dir ``job-N``)
is committed before the executor is asked; the executor's submit is idempotent for an out_dir
(the local executor finds the runners it started there, the Slurm one the allocation sbatch
gave, by the job's unique name); the handle is stored in one conditional update after. A pass
that dies anywhere in between (an exception, a SIGKILL, a re-claimed task) leaves the job
``starting``, and the next pass submits it again into the same out_dir, which adopts the run
already going (or finished) instead of starting a second one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session

from gpu_jobs.executors import Executor, ExecutorError, JobHandle, PoolBusy, StartUnknown
from gpu_jobs.spec import ContractError, JobResult
from gpu_jobs.testsets import OwnTests, TestSet, is_own_test_set
from stackbot.db import jobs_store
from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, Job, TestResult
from stackbot.db.models._columns import utcnow
from stackbot.db.models.jobs import STARTING
from stackbot.domain import accounting, infra_failures
from stackbot.domain.broken_nodes import NodePolicy
from stackbot.services import broken_nodes
from stackbot.services.jobs import copy_outcome, result_key

log = logging.getLogger(__name__)


@dataclass
class Advance:
    """What one ``poll_jobs`` pass changed."""

    submitted: list[int] = field(default_factory=list)
    started: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)  # originals and the copies updated
    unfinished: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.submitted or self.started or self.finished)


@dataclass(frozen=True)
class JobBackend:
    """Where jobs run and what they run: the executor and the configured test sets."""

    executor: Executor
    test_sets: Mapping[str, TestSet]
    jobs_dir: Path
    node_check: bool
    # At most this many jobs of one series starting or running (0: no limit).
    per_series_limit: int = 0
    # How PRs' own test files run (the batched ``own`` jobs); None: not configured.
    own_tests: OwnTests | None = None
    # When nodes with repeated infra failures are excluded (None: never).
    node_policy: NodePolicy | None = None

    def test_set_of(self, job: Job) -> TestSet | None:
        """What ``job`` runs: its configured test set, or PRs' own test files (its targets)."""
        if not is_own_test_set(job.test_set):
            return self.test_sets.get(job.test_set)
        if self.own_tests is None or not job.targets:
            return None
        found = self.own_tests.test_set(tuple(job.targets), job.shape)
        return dataclasses.replace(found, name=job.test_set)  # ``own:N`` stored before batching


def own_timeout(job: Job, test_set: TestSet) -> float | None:
    """An own-files job's time limit: ``[own_tests] timeout_s`` per file it runs (the files of
    every PR in its tree run one after another in it); None: the test set's own limit."""
    if not is_own_test_set(job.test_set):
        return None
    return test_set.timeout_s * max(1, len(job.targets or ()))


# The order queued jobs start in (issue 13): main's baselines first (every comparison needs
# them), then the trees of series runs, then the reruns that confirm a failure and the infra
# retries, then bisection steps, lowest prefix first, then single stacks, lowest layer first.
_PURPOSE_RANK = {"baseline": 0, "tree": 1, "confirm": 2, "retry": 2, "bisect": 3}


def queue_priority(job: Job, run: IntegrationRun | None) -> tuple[int, int, int]:
    rank = _PURPOSE_RANK.get(job.purpose, 1)
    if job.kind == "baseline":
        rank = 0
    layer = job.step_position or 0
    if run is not None and run.kind == "stack" and job.purpose in ("tree", "confirm", "retry"):
        rank = 4  # a stack: after the series' own work
        layer = len(run.heads or {})  # its size: the lowest layer of the series first
    return (rank, layer, job.id or 0)


def advance_jobs(engine: Engine, backend: JobBackend, *, repo_url_of: dict[int, str]) -> Advance:
    """Poll every job in flight, collect the finished ones, then submit queued jobs while the
    executor has room. ``repo_url_of`` maps a repository id to the URL runners fetch from."""
    advance = Advance()
    with Session(engine) as session:
        in_flight = jobs_store.in_flight_jobs(session)
        starting = jobs_store.starting_jobs(session)
        queued = jobs_store.queued_originals(session)
        session.expunge_all()
    for job in in_flight:
        _poll_one(engine, backend.executor, job, advance)
    if advance.finished and backend.node_policy is not None:
        # Before anything is submitted: a node these results show broken gets no more jobs.
        broken_nodes.review_nodes(engine, policy=backend.node_policy)
    with Session(engine) as session:
        runs = {r.id: r for r in jobs_store.runs_of_jobs(session, jobs=queued) if r.id}
        busy = jobs_store.running_per_series(session)
        broken = broken_nodes.excluded_nodes(session) if backend.node_policy else ()
        session.expunge_all()
    queued.sort(key=lambda job: queue_priority(job, runs.get(job.integration_run_id or 0)))
    # Jobs an earlier pass began to start: adopted first (they may run already).
    for job in starting:
        if not _submit_one(engine, backend, job, repo_url_of, advance, broken):
            break
    else:
        for job in queued:
            series = job.series_key
            if (
                series
                and backend.per_series_limit
                and busy.get(series, 0) >= backend.per_series_limit
            ):
                continue  # this series holds its share of the nodes; others may go first
            if not _submit_one(engine, backend, job, repo_url_of, advance, broken):
                break
            if series:
                busy[series] = busy.get(series, 0) + 1
    with Session(engine) as session:
        advance.unfinished = jobs_store.count_unfinished(session)
    return advance


def _poll_one(engine: Engine, executor: Executor, job: Job, advance: Advance) -> None:
    assert job.id is not None and job.external_id
    handle = JobHandle.from_str(job.external_id)
    try:
        state = executor.poll(handle)
    except ExecutorError as error:
        log.warning("job %d: polling failed (%s); will try again", job.id, error)
        return
    if state.phase == "running" and job.status != "running":
        with session_scope(engine) as session:
            row = jobs_store.get_job(session, job_id=job.id)
            assert row is not None
            row.status = "running"
            row.node = state.node or row.node
            row.started_at = _parse_time(state.started_at) or utcnow()
            session.add(row)
        advance.started.append(job.id)
    if state.phase != "finished":
        return
    try:
        result = executor.collect(handle)
    except (ExecutorError, ContractError) as error:
        result = JobResult(handle.job_id, "infra", f"the job's result cannot be read: {error}")
    finished = record_result(engine, job.id, result, node=state.node)
    advance.finished.extend(finished)


def _earlier_messages(session: Session, row: Job) -> list[str | None]:
    """The messages of the jobs ``row`` retries, newest first."""
    found: list[str | None] = []
    seen = {row.id}
    previous = row.retry_of_job_id
    while previous is not None and previous not in seen:
        seen.add(previous)
        earlier = jobs_store.get_job(session, job_id=previous)
        if earlier is None:
            break
        found.append(earlier.error)
        previous = earlier.retry_of_job_id
    return found


def record_result(engine: Engine, job_id: int, result: JobResult, *, node: str | None) -> list[int]:
    """Store a finished job's result (and copy it to the jobs reusing it); returns their ids.

    An ``infra`` result is stored without test outcomes whatever reported it (a runner of
    any version, Slurm's word on a node failure): it is never counted as a test result. A
    mass failure is infra too, the first time in a retry chain
    (:func:`stackbot.domain.infra_failures.classify_result`)."""
    if result.status == "infra":
        result = result.uncounted()
    with session_scope(engine) as session:
        row = jobs_store.get_job(session, job_id=job_id)
        assert row is not None
        result = infra_failures.classify_result(result, _earlier_messages(session, row))
        row.status = result.status
        row.counts = {k: int(v) for k, v in vars(result.counts).items()}
        row.result = result.to_dict()
        row.node = ", ".join(result.nodes) or node or row.node
        row.started_at = _parse_time(result.started_at) or row.started_at or utcnow()
        row.finished_at = _parse_time(result.finished_at) or utcnow()
        row.error = result.message if result.status != "passed" and result.message else None
        row.gpu_seconds = accounting.gpu_seconds(row.shape, row.started_at, row.finished_at)
        row.runner_env = dict(result.environment) if result.environment else None
        row.result_key = result_key(row.tree_sha, row.config_hash, row.shape, row.runner_env)
        session.add(row)
        jobs_store.add_test_results(
            session,
            results=(
                TestResult(
                    job_id=job_id,
                    nodeid=test.nodeid,
                    outcome=test.outcome,
                    duration_s=test.duration_s,
                    failed_ranks=sorted(
                        rank for rank, outcome in test.ranks.items() if outcome != "passed"
                    )
                    if test.outcome != "passed"
                    else [],
                    message=test.message or None,
                )
                for test in result.tests
            ),
        )
        copies = jobs_store.copies_of(session, job_id=job_id)
        for copy in copies:
            copy_outcome(copy, row)
            session.add(copy)
        return [job_id, *(c.id for c in copies if c.id is not None)]


def _submit_one(
    engine: Engine,
    backend: JobBackend,
    job: Job,
    repo_url_of: dict[int, str],
    advance: Advance,
    broken: tuple[str, ...] = (),
) -> bool:
    """Start one queued job, or adopt one an earlier pass began to start; False when the
    executor has no room (stop submitting). ``broken``: the excluded nodes, left out with the
    nodes the job's own retry chain failed on."""
    assert job.id is not None
    test_set = backend.test_set_of(job)
    if test_set is None:
        _fail(engine, job.id, "error", f"test set {job.test_set!r} is no longer configured")
        return True
    out_dir = job_out_dir(backend.jobs_dir, job.id)
    if job.status != STARTING:
        with session_scope(engine) as session:
            intended = jobs_store.mark_starting(
                session, job_id=job.id, executor=backend.executor.kind, out_dir=str(out_dir)
            )
        if not intended:
            return True
    try:
        spec = test_set.job_spec(
            job_id=f"stackbot-job-{job.id}",
            shape=job.shape,
            repo_url=repo_url_of.get(job.repo_id),
            commit=job.commit_sha,
            node_check=backend.node_check,
            exclude_nodes=tuple(sorted({*(job.excluded_nodes or ()), *broken})),
            timeout_s=own_timeout(job, test_set),
        )
        handle = backend.executor.submit(spec, out_dir)
    except StartUnknown as error:  # it may run: neither failed nor queued, adopted later
        log.warning("job %d: cannot tell yet whether it started (%s)", job.id, error)
        return True
    except PoolBusy:  # nothing started: the job waits for room as a queued one
        with session_scope(engine) as session:
            jobs_store.unmark_starting(session, job_id=job.id)
        return False
    except ContractError as error:
        _fail(engine, job.id, "error", f"bad job: {error}")
        return True
    except ExecutorError as error:
        _fail(engine, job.id, "infra", f"the executor refused the job: {error}")
        return True
    with session_scope(engine) as session:
        stored = jobs_store.record_handle(
            session,
            job_id=job.id,
            executor=handle.kind,
            external_id=handle.to_str(),
            out_dir=handle.out_dir,
        )
    if stored:
        advance.submitted.append(job.id)
        log.info("job %d (%s %s) submitted to %s", job.id, job.test_set, job.shape, handle.kind)
    return True


def _fail(engine: Engine, job_id: int, status: str, message: str) -> None:
    with session_scope(engine) as session:
        row = jobs_store.get_job(session, job_id=job_id)
        assert row is not None
        row.status = status
        row.error = message
        row.finished_at = utcnow()
        row.gpu_seconds = accounting.gpu_seconds(row.shape, row.started_at, row.finished_at)
        session.add(row)


def job_out_dir(jobs_dir: Path, job_id: int) -> Path:
    """``job-N``: one directory per job, whatever the number of attempts to start it (the
    executor adopts what an earlier attempt started there)."""
    return jobs_dir / f"job-{job_id}"


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def cancel_jobs(engine: Engine, executor: Executor, job_ids: Iterable[int]) -> None:
    for job_id in job_ids:
        with Session(engine) as session:
            job = jobs_store.get_job(session, job_id=job_id)
            handle = JobHandle.from_str(job.external_id) if job and job.external_id else None
        if handle is not None:
            executor.cancel(handle)
