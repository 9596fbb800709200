"""Reads and writes of GPU jobs and their per-test results (the ``jobs`` and ``test_results``
tables). Keyword-only functions, no business rules: the services decide, these fetch and store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun, Job, TestFinding, TestResult
from stackbot.db.models._columns import utcnow
from stackbot.db.models.jobs import (
    FINISHED_STATES,
    IN_FLIGHT_STATES,
    NOT_REUSABLE_STATES,
    STARTING,
)


def get_job(session: Session, *, job_id: int) -> Job | None:
    return session.get(Job, job_id)


def jobs_by_ids(session: Session, *, job_ids: Iterable[int]) -> list[Job]:
    ids = list(job_ids)
    if not ids:
        return []
    return list(session.exec(select(Job).where(col(Job.id).in_(ids))))


def jobs_of_run(session: Session, *, run_id: int) -> list[Job]:
    """The run's jobs, oldest first."""
    return list(
        session.exec(select(Job).where(Job.integration_run_id == run_id).order_by(col(Job.id)))
    )


def jobs_of_runs(session: Session, *, run_ids: Sequence[int]) -> list[Job]:
    if not run_ids:
        return []
    return list(session.exec(select(Job).where(col(Job.integration_run_id).in_(list(run_ids)))))


def baseline_job_exists(session: Session, *, commit_sha: str, config_hash: str) -> bool:
    """Whether the base commit has a job of this configuration whose outcome counts (and was
    obtained in today's runner environment, or is still to run)."""
    found = session.exec(
        select(Job)
        .where(
            Job.kind == "baseline",
            Job.commit_sha == commit_sha,
            Job.config_hash == config_hash,
            col(Job.status).not_in(list(NOT_REUSABLE_STATES)),
        )
        .order_by(col(Job.id).desc())
    ).all()
    now = current_environment(session, config_hash=config_hash)
    return any(same_environment(job, now) for job in found)


def reusable_job(session: Session, *, tree: str, config_hash: str, attempt: int = 1) -> Job | None:
    """The newest original job (never a copy) on ``tree`` with this configuration whose
    outcome counts and whose runner environment is today's (:func:`current_environment`);
    ``attempt`` 2 is a confirming rerun (never the first run's own job)."""
    found = session.exec(
        select(Job)
        .where(
            Job.tree_sha == tree,
            Job.config_hash == config_hash,
            Job.attempt == attempt,
            col(Job.reused_from_job_id).is_(None),
            col(Job.status).not_in(list(NOT_REUSABLE_STATES)),
        )
        .order_by(col(Job.id).desc())
    ).all()
    now = current_environment(session, config_hash=config_hash)
    return next((job for job in found if same_environment(job, now)), None)


def own_jobs_on_tree(session: Session, *, tree: str, test_set: str, shape: str) -> list[Job]:
    """The original first-attempt jobs of ``test_set`` on ``shape`` on ``tree`` whose outcome
    counts, newest first (the candidates whose own test files cover a request's)."""
    return list(
        session.exec(
            select(Job)
            .where(
                Job.tree_sha == tree,
                Job.test_set == test_set,
                Job.shape == shape,
                Job.attempt == 1,
                col(Job.reused_from_job_id).is_(None),
                col(Job.status).not_in(list(NOT_REUSABLE_STATES)),
            )
            .order_by(col(Job.id).desc())
        ).all()
    )


def current_environment(session: Session, *, config_hash: str) -> dict[str, str] | None:
    """The runner environment jobs of this configuration run in now: the one the most recently
    finished job of it reported (None: none reported one yet)."""
    row = session.exec(
        select(Job.runner_env)
        .where(
            Job.config_hash == config_hash,
            col(Job.reused_from_job_id).is_(None),
            col(Job.runner_env).is_not(None),
            col(Job.finished_at).is_not(None),
        )
        .order_by(col(Job.finished_at).desc(), col(Job.id).desc())
    ).first()
    return dict(row) if row else None


def same_environment(job: Job, now: dict[str, str] | None) -> bool:
    """Whether ``job``'s result holds in the runner environment ``now``: a job still to run will
    run there; a finished one must have reported that environment (one that reported none,
    from before environments were reported, counts only while none is known)."""
    if job.status not in FINISHED_STATES or now is None:
        return True
    return bool(job.runner_env) and dict(job.runner_env or {}) == now


def finished_baselines(session: Session, *, repo_id: int, commit_sha: str) -> list[Job]:
    """The finished baseline jobs on a base commit, oldest first."""
    return list(
        session.exec(
            select(Job)
            .where(
                Job.repo_id == repo_id,
                Job.kind == "baseline",
                Job.commit_sha == commit_sha,
                col(Job.status).in_(list(FINISHED_STATES)),
            )
            .order_by(col(Job.id))
        )
    )


def copies_of(session: Session, *, job_id: int) -> list[Job]:
    """The jobs that took (or wait for) this job's outcome."""
    return list(session.exec(select(Job).where(Job.reused_from_job_id == job_id)))


def in_flight_jobs(session: Session) -> list[Job]:
    return list(session.exec(select(Job).where(col(Job.status).in_(list(IN_FLIGHT_STATES)))))


def queued_originals(session: Session) -> list[Job]:
    """Queued jobs that run themselves (copies wait for their original), oldest first."""
    return list(
        session.exec(
            select(Job)
            .where(Job.status == "queued", col(Job.reused_from_job_id).is_(None))
            .order_by(col(Job.id))
        )
    )


def starting_jobs(session: Session) -> list[Job]:
    """Jobs whose start was intended and whose handle is not stored yet, oldest first."""
    return list(session.exec(select(Job).where(Job.status == STARTING).order_by(col(Job.id))))


def mark_starting(session: Session, *, job_id: int, executor: str, out_dir: str) -> bool:
    """``queued`` → ``starting`` with the out_dir the executor will use; False when the job
    is no longer queued (another pass took it)."""
    done = session.execute(
        update(Job)
        .where(col(Job.id) == job_id, col(Job.status) == "queued")
        .values(status=STARTING, executor=executor, out_dir=out_dir)
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]


def unmark_starting(session: Session, *, job_id: int) -> None:
    """``starting`` → ``queued``: the executor started nothing (no room)."""
    session.execute(
        update(Job)
        .where(col(Job.id) == job_id, col(Job.status) == STARTING)
        .values(status="queued")
    )


def record_handle(
    session: Session, *, job_id: int, executor: str, external_id: str, out_dir: str
) -> bool:
    """``starting`` → ``submitted`` with the executor's handle, in one statement; False when
    the job was not starting (a stale pass: the handle is already stored)."""
    done = session.execute(
        update(Job)
        .where(col(Job.id) == job_id, col(Job.status) == STARTING)
        .values(
            status="submitted",
            executor=executor,
            external_id=external_id,
            out_dir=out_dir,
            submitted_at=utcnow(),
        )
    )
    return bool(done.rowcount)  # type: ignore[attr-defined]


def count_unfinished(session: Session) -> int:
    return len(
        session.exec(select(Job.id).where(col(Job.status).not_in(list(FINISHED_STATES)))).all()
    )


def add_test_results(session: Session, *, results: Iterable[TestResult]) -> None:
    session.add_all(list(results))


def results_of_job(session: Session, *, job_id: int) -> list[TestResult]:
    """A job's per-test results by node id."""
    return list(
        session.exec(
            select(TestResult).where(TestResult.job_id == job_id).order_by(col(TestResult.nodeid))
        )
    )


def results_of_jobs(session: Session, *, job_ids: Sequence[int]) -> dict[int, list[TestResult]]:
    """The per-test results of several jobs in one query: job id → results by node id (every
    asked id is a key, with an empty list when the job has none)."""
    found: dict[int, list[TestResult]] = {job_id: [] for job_id in job_ids}
    if not found:
        return found
    rows = session.exec(
        select(TestResult)
        .where(col(TestResult.job_id).in_(sorted(found)))
        .order_by(col(TestResult.job_id), col(TestResult.nodeid))
    )
    for row in rows:
        found[row.job_id].append(row)
    return found


def runs_of_jobs(session: Session, *, jobs: Sequence[Job]) -> list[IntegrationRun]:
    """The runs these jobs test, and for baseline jobs every run on their base commit."""
    run_ids = {j.integration_run_id for j in jobs if j.integration_run_id is not None}
    base_shas = {j.commit_sha for j in jobs if j.kind == "baseline"}
    runs = list(session.exec(select(IntegrationRun).where(col(IntegrationRun.id).in_(run_ids))))
    if base_shas:
        runs += list(
            session.exec(select(IntegrationRun).where(col(IntegrationRun.base_sha).in_(base_shas)))
        )
    return runs


# -- the test plan (issue 13) -----------------------------------------------------------------


def lock_run(session: Session, *, run_id: int) -> IntegrationRun | None:
    """The run, locked for this transaction (PostgreSQL; SQLite's writer lock already is), so
    two planning passes of one run do not both create its next jobs."""
    statement = select(IntegrationRun).where(IntegrationRun.id == run_id)
    bind = session.get_bind()
    if bind.dialect.name == "postgresql":
        statement = statement.with_for_update()
    return session.exec(statement).first()


def lock_trees(session: Session, *, keys: Iterable[tuple[str, str, int]]) -> None:
    """Lock (tree, configuration hash, attempt) keys for this transaction, in one order.

    Whoever creates a job on a tree first looks for an original to reuse and else makes one;
    two transactions doing that at once on PostgreSQL (two workers integrating runs with one
    tree, or both creating main's jobs) would each find none and make two originals. A
    transaction-scoped advisory lock per key makes the look-and-create one step: the second
    waits for the first to commit and then finds its job. SQLite needs none, its writes are
    serialised (``session_scope`` begins them IMMEDIATE). A collision of two keys' lock
    numbers only makes them wait for each other.
    """
    bind = session.get_bind()
    if bind.dialect.name != "postgresql":
        return
    numbers = sorted({_lock_number(key) for key in keys})
    for number in numbers:
        session.execute(select(func.pg_advisory_xact_lock(number)))


def _lock_number(key: tuple[str, str, int]) -> int:
    tree, config_hash, attempt = key
    digest = hashlib.sha256(f"job:{tree}:{config_hash}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def first_runs_on_trees(
    session: Session, *, trees: Sequence[str], config_hashes: Sequence[str]
) -> list[Job]:
    """First-attempt jobs (originals) on any of ``trees`` with any of the configurations,
    finished or not, except those whose outcome says nothing about the tree or was obtained in
    another runner environment than today's."""
    if not trees or not config_hashes:
        return []
    found = list(
        session.exec(
            select(Job)
            .where(
                col(Job.tree_sha).in_(list(set(trees))),
                col(Job.config_hash).in_(list(set(config_hashes))),
                Job.attempt == 1,
                col(Job.reused_from_job_id).is_(None),
                col(Job.status).not_in(list(NOT_REUSABLE_STATES)),
            )
            .order_by(col(Job.id))
        )
    )
    digests = set(config_hashes)
    now = {digest: current_environment(session, config_hash=digest) for digest in digests}
    return [job for job in found if same_environment(job, now[job.config_hash])]


def baselines_on(session: Session, *, repo_id: int, commit_sha: str) -> list[Job]:
    """Every baseline job on a base commit, oldest first, finished or not."""
    return list(
        session.exec(
            select(Job)
            .where(Job.repo_id == repo_id, Job.kind == "baseline", Job.commit_sha == commit_sha)
            .order_by(col(Job.id))
        )
    )


def findings_of_run(session: Session, *, run_id: int) -> list[TestFinding]:
    return list(
        session.exec(
            select(TestFinding)
            .where(TestFinding.run_id == run_id)
            .order_by(col(TestFinding.test_set), col(TestFinding.shape), col(TestFinding.nodeid))
        )
    )


def findings_of_runs(session: Session, *, run_ids: Sequence[int]) -> list[TestFinding]:
    if not run_ids:
        return []
    return list(session.exec(select(TestFinding).where(col(TestFinding.run_id).in_(list(run_ids)))))


def replace_findings(session: Session, *, run_id: int, findings: Sequence[TestFinding]) -> bool:
    """Make the run's findings exactly ``findings`` (matched by test set, shape and node id);
    True when anything changed."""
    existing = {(f.test_set, f.shape, f.nodeid): f for f in findings_of_run(session, run_id=run_id)}
    changed = False
    wanted = {(f.test_set, f.shape, f.nodeid): f for f in findings}
    for key, row in existing.items():
        if key not in wanted:
            session.delete(row)
            changed = True
    for key, new in wanted.items():
        found = existing.get(key)
        if found is None:
            session.add(new)
            changed = True
            continue
        row = found
        if (row.failure_class, row.pr_number, row.evidence) != (
            new.failure_class,
            new.pr_number,
            new.evidence,
        ):
            row.failure_class, row.pr_number, row.evidence = (
                new.failure_class,
                new.pr_number,
                new.evidence,
            )
            row.updated_at = utcnow()
            session.add(row)
            changed = True
    return changed


def running_per_series(session: Session) -> dict[str, int]:
    """How many jobs of each series are starting, submitted or running."""
    rows = session.exec(
        select(Job.series_key).where(
            col(Job.series_key).is_not(None),
            col(Job.status).in_([STARTING, *IN_FLIGHT_STATES]),
            col(Job.reused_from_job_id).is_(None),
        )
    ).all()
    counts: dict[str, int] = {}
    for key in rows:
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    return counts


def runs_with_open_findings(session: Session) -> list[int]:
    """Runs whose plan waits on something (a rerun, a bisection probe, maybe another run's
    job on the same tree)."""
    rows = session.exec(
        select(TestFinding.run_id)
        .where(col(TestFinding.failure_class).in_(["suspect", "bisecting"]))
        .distinct()
    ).all()
    return sorted(int(r) for r in rows)


def copies_or_retries_of(session: Session, *, job_id: int) -> list[Job]:
    """Jobs that retry this one (an infra result) or confirm it."""
    return list(session.exec(select(Job).where(Job.retry_of_job_id == job_id)))
