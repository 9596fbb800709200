"""Broken nodes (issue 26 point 4), applied: exclude on evidence, re-admit on a node check.

:func:`review_nodes` runs in every ``poll_jobs`` pass that collected finished jobs, before the
pass submits queued ones: it excludes the nodes whose latest jobs were infra in a row
(:mod:`stackbot.domain.broken_nodes`), recording those jobs and their infra signature lines
as the evidence. :func:`excluded_nodes` is what every submission then leaves out (Slurm's
``--exclude``; the local executor's GPUs ``gpuN``). :func:`check_nodes` submits a node check
to each excluded node when one is due (``recheck_minutes`` after the exclusion, backed off after
each failed check; at once when a maintainer asked: ``stackbot nodes check NODE``), polls it, and re-admits the node when it passes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from gpu_jobs.executors import Executor, ExecutorError, JobHandle, PoolBusy, StartUnknown
from gpu_jobs.spec import ContractError, JobSpec, Shape
from gpu_jobs.testsets import NODE_CHECK_TARGET
from stackbot.config import Settings
from stackbot.db import nodes_store
from stackbot.db.engine import session_scope
from stackbot.db.models import Job, NodeExclusion
from stackbot.db.nodes_store import FinishedJob
from stackbot.domain import infra_failures
from stackbot.domain.broken_nodes import (
    EXCLUDED,
    INFRA,
    READMITTED,
    NodeJob,
    NodePolicy,
    blamed,
    check_due,
    node_names,
    to_exclude,
)

log = logging.getLogger(__name__)
NODE_CHECK_TIMEOUT_S = 900.0
MESSAGE_CHARS = 500


def _wall_clock() -> datetime:
    return datetime.now(UTC)


# What "now" is (a simulation sets it, as for the quarantine's clock).
clock: Callable[[], datetime] = _wall_clock


def policy_of(settings: Settings) -> NodePolicy:
    return NodePolicy(
        infra_count=settings.node_infra_count,
        window_hours=settings.node_window_hours,
        recheck_minutes=settings.node_recheck_minutes,
        recheck_max_hours=settings.node_recheck_max_hours,
    )


def nodes_of(job: Job | FinishedJob) -> list[str]:
    """The nodes a job ran on, as exclusions name them: the devices the local executor's
    handle names (``gpuN``), else the job's nodes (Slurm's node names)."""
    if job.external_id:
        try:
            handle = JobHandle.from_str(job.external_id)
        except ContractError:
            handle = None
        if handle is not None and handle.data.get("nodes"):
            return [str(n) for n in handle.data["nodes"]]
    return node_names(job.node)


def _evidence_of(job: FinishedJob) -> tuple[str | None, str]:
    """The infra signature and line that made ``job`` infra (else its message)."""
    found = infra_failures.signature_of(job.error)
    if found is not None:
        return found.name, found.line[:MESSAGE_CHARS]
    return None, (job.error or "infra").splitlines()[0][:MESSAGE_CHARS]


def node_jobs(jobs: Sequence[FinishedJob]) -> list[NodeJob]:
    found: list[NodeJob] = []
    for job in jobs:
        nodes = nodes_of(job)
        at = aware(job.finished_at)
        if job.status == INFRA:
            signature, line = _evidence_of(job)
            for node in blamed(nodes, job.error):
                found.append(NodeJob(node, job.id, INFRA, at, line, signature))
        else:
            found.extend(NodeJob(node, job.id, job.status, at) for node in nodes)
    return found


def review_nodes(engine: Engine, *, policy: NodePolicy, now: datetime | None = None) -> list[str]:
    """Exclude the nodes the evidence says are broken; returns the nodes excluded now."""
    now = now or clock()
    try:
        with session_scope(engine) as session:
            rows = {row.node: row for row in nodes_store.exclusions(session)}
            held = [n for n, row in rows.items() if row.state == EXCLUDED]
            since = {
                n: aware(row.ended_at)
                for n, row in rows.items()
                if row.state == READMITTED and row.ended_at is not None
            }
            jobs = nodes_store.finished_on_nodes(session, since=now - policy.window)
            found = to_exclude(node_jobs(jobs), now=now, policy=policy, held=held, since=since)
            for node, evidence in found.items():
                row = _restart(rows.get(node), node, now)
                row.evidence = [e.to_json() for e in evidence]
                session.add(row)
    except IntegrityError:  # another worker excluded the same node at the same moment
        return review_nodes(engine, policy=policy, now=now)
    for node, evidence in found.items():
        jobs_named = ", ".join(f"job {e.job_id}" for e in evidence)
        log.warning("node %s excluded: infra in a row (%s)", node, jobs_named)
    return sorted(found)


def excluded_nodes(session: Session) -> tuple[str, ...]:
    return tuple(nodes_store.excluded(session))


def _restart(row: NodeExclusion | None, node: str, now: datetime) -> NodeExclusion:
    if row is None:
        return NodeExclusion(node=node, state=EXCLUDED, excluded_at=now)
    history = list(row.history or [])
    history.append(
        {
            "excluded_at": aware(row.excluded_at).isoformat(),
            "ended_at": aware(row.ended_at).isoformat() if row.ended_at else None,
            "state": row.state,
            "note": row.end_note,
            "evidence": row.evidence,
            "checks": row.checks,
        }
    )
    row.history = history
    row.state, row.excluded_at, row.checks = EXCLUDED, now, []
    row.check_handle, row.check_asked, row.last_check_at = None, False, None
    row.ended_at = row.ended_by = row.end_note = None
    return row


# -- node checks ---------------------------------------------------------------------------


def check_spec(row: NodeExclusion, shape: Shape) -> JobSpec:
    """The node check of one excluded node: gpu_jobs' node check suite, pinned to the node."""
    number = len(row.checks or []) + 1
    stamp = int(aware(row.excluded_at).timestamp())
    return JobSpec(
        job_id=f"node-check-{row.node}-{stamp}-{number}",
        test_set="node-check",
        targets=(NODE_CHECK_TARGET,),
        shape=shape,
        reference=True,
        node_check=True,
        only_nodes=(row.node,),
        timeout_s=NODE_CHECK_TIMEOUT_S,
    )


def check_out_dir(jobs_dir: Path, spec: JobSpec) -> Path:
    """One directory per check (the same one if a pass dies after submitting it: adopted)."""
    return jobs_dir / "node-checks" / spec.job_id


def check_nodes(
    engine: Engine,
    executor: Executor,
    *,
    jobs_dir: Path,
    policy: NodePolicy,
    shape_of: Callable[[str], Shape],
    now: datetime | None = None,
) -> list[str]:
    """Poll the node checks in flight (re-admitting a node whose check passed) and submit the
    ones due. ``shape_of(node)``: the shape of a node's check (the whole node). Returns lines
    saying what changed."""
    now = now or clock()
    changes: list[str] = []
    with Session(engine) as session:
        nodes = [row.node for row in nodes_store.exclusions(session) if row.state == EXCLUDED]
    for node in nodes:
        with session_scope(engine) as session:
            row = nodes_store.entry(session, node=node)
            if row is None or row.state != EXCLUDED:
                continue
            if row.check_handle:
                changes += _poll_check(executor, row, now)
            elif check_due(
                excluded_at=aware(row.excluded_at),
                last_check_at=aware(row.last_check_at) if row.last_check_at else None,
                failed_checks=len(row.checks or []),
                asked=row.check_asked,
                now=now,
                policy=policy,
            ):
                changes += _submit_check(executor, row, jobs_dir, shape_of(node), now)
            session.add(row)
    for line in changes:
        log.info("%s", line)
    return changes


def _submit_check(
    executor: Executor, row: NodeExclusion, jobs_dir: Path, shape: Shape, now: datetime
) -> list[str]:
    try:
        spec = check_spec(row, shape)
        handle = executor.submit(spec, check_out_dir(jobs_dir, spec))
    except (PoolBusy, StartUnknown):  # no room now (or no answer): the next pass tries
        return []
    except (ContractError, ExecutorError) as error:
        _record_check(row, now, "error", f"the node check could not be submitted: {error}")
        return [f"node {row.node}: node check not submitted ({error})"]
    row.check_handle, row.check_asked = handle.to_str(), False
    return [f"node {row.node}: node check submitted"]


def _poll_check(executor: Executor, row: NodeExclusion, now: datetime) -> list[str]:
    assert row.check_handle is not None
    handle = JobHandle.from_str(row.check_handle)
    try:
        if executor.poll(handle).phase != "finished":
            return []
        result = executor.collect(handle)
    except (ExecutorError, ContractError) as error:
        log.warning("node %s: polling its node check failed (%s)", row.node, error)
        return []
    row.check_handle = None
    _record_check(row, now, result.status, result.message or "")
    if result.status == "passed":
        row.state, row.ended_at, row.ended_by = READMITTED, now, None
        row.end_note = f"node check passed ({result.job_id})"
        return [f"node {row.node}: re-admitted, its node check passed"]
    return [f"node {row.node}: stays excluded, its node check is {result.status}"]


def _record_check(row: NodeExclusion, now: datetime, status: str, message: str) -> None:
    checks = list(row.checks or [])
    checks.append({"at": now.isoformat(), "status": status, "message": message[:MESSAGE_CHARS]})
    row.checks, row.last_check_at = checks, now


def next_check_in(session: Session, *, policy: NodePolicy, now: datetime) -> float | None:
    """Seconds until the next node check is due or needs polling (0: now); None: no node is
    excluded."""
    waits: list[float] = []
    for row in nodes_store.exclusions(session):
        if row.state != EXCLUDED:
            continue
        if row.check_handle or row.check_asked:
            return 0.0
        last = aware(row.last_check_at or row.excluded_at)
        due = last + policy.recheck_after(len(row.checks or []))
        waits.append(max(0.0, (due - now).total_seconds()))
    return min(waits) if waits else None


# -- a maintainer's hand ---------------------------------------------------------------------


class NotExcluded(Exception):
    """The node named is not excluded (the message lists those that are)."""


def ask_check(session: Session, node: str) -> NodeExclusion:
    """``stackbot nodes check NODE``: its node check is due at once."""
    row = _excluded_row(session, node)
    row.check_asked = True
    session.add(row)
    return row


def readmit_by_maintainer(
    session: Session, node: str, *, login: str, now: datetime | None = None
) -> NodeExclusion:
    """``stackbot nodes readmit NODE``: back in the submissions without a check."""
    row = _excluded_row(session, node)
    row.state, row.ended_at, row.ended_by = READMITTED, now or clock(), login
    row.end_note, row.check_handle, row.check_asked = f"re-admitted by {login}", None, False
    session.add(row)
    return row


def _excluded_row(session: Session, node: str) -> NodeExclusion:
    row = nodes_store.entry(session, node=node)
    if row is None or row.state != EXCLUDED:
        now_excluded = ", ".join(nodes_store.excluded(session)) or "none"
        raise NotExcluded(f"node {node!r} is not excluded (excluded now: {now_excluded})")
    return row


def aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
