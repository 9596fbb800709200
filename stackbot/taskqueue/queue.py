"""The durable task queue: rows of ``tasks`` claimed by workers under leases.

A task is ``pending`` until a worker claims it, ``running`` while a worker holds its lease,
then ``done`` or ``dead`` (the dead-letter state the dashboard shows). A worker that dies keeps
nothing: once its lease expires, the next claim takes the task again, with the ``state`` the
handler recorded through :func:`save_state`, so the redo resumes where the first try stopped.

Every change to a running task names the worker (``lease_owner``): a worker that lost its lease
cannot complete, fail or save state over the worker that now owns the task.

Claiming is one ``UPDATE ... WHERE id = (SELECT ... LIMIT 1) RETURNING``: on PostgreSQL the
inner select takes ``FOR UPDATE SKIP LOCKED``, so concurrent workers pass over each other's rows;
on SQLite the statement runs in a ``BEGIN IMMEDIATE`` transaction, SQLite's single writer.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col

from stackbot.db.engine import session_scope, sqlite_writer
from stackbot.db.models import Task
from stackbot.domain.tasks import FollowUp
from stackbot.errors import Disposition, RetryLater, disposition

log = logging.getLogger(__name__)

PENDING, RUNNING, DONE, DEAD = "pending", "running", "done", "dead"
STATUSES = (PENDING, RUNNING, DONE, DEAD)
DEFAULT_MAX_ATTEMPTS = 6
MAX_ERROR_CHARS = 4000


class LeaseLost(Exception):
    """The worker no longer owns the task (its lease expired and another worker claimed it)."""


Clock = Callable[[], datetime]  # aware UTC; leases are measured by it


def utcnow() -> datetime:
    return datetime.now(UTC)


def write_connection(engine: Engine) -> Connection:
    """A connection whose transactions take SQLite's write lock at BEGIN (see stackbot.db.engine)."""
    return engine.connect().execution_options(sqlite_begin="IMMEDIATE")


# -- enqueue ------------------------------------------------------------------------------------


def enqueue(
    session: Session,
    kind: str,
    payload: dict[str, Any],
    *,
    dedupe_key: str | None = None,
    run_after: datetime | None = None,
    max_attempts: int | None = None,
) -> Task:
    """Add a pending task in the session's transaction.

    With a ``dedupe_key`` that a pending task already holds, that task takes the new payload and
    ``run_after`` instead, so a burst of identical requests leaves one pending task. Claimed
    tasks have no key, so a request arriving while one runs queues exactly one more.
    """
    task_id = enqueue_row(
        session.connection(),
        kind,
        payload,
        dedupe_key=dedupe_key,
        run_after=run_after,
        max_attempts=max_attempts,
    )
    task = session.get(Task, task_id, populate_existing=True)
    assert task is not None  # the row was written in this very transaction
    return task


def enqueue_follow_up(session: Session, follow_up: FollowUp) -> Task | None:
    """Queue ``follow_up`` in the session's transaction (``delay_s`` counted from now); None
    when it is ``unless_open`` and a task of its kind is pending or running."""
    if follow_up.unless_open and has_open_task(session, kind=follow_up.kind):
        return None
    run_after = utcnow() + timedelta(seconds=follow_up.delay_s) if follow_up.delay_s else None
    return enqueue(
        session,
        follow_up.kind,
        follow_up.payload,
        dedupe_key=follow_up.dedupe_key,
        run_after=run_after,
    )


def seed(engine: Engine, follow_ups: Sequence[FollowUp]) -> None:
    """Queue the work a worker starts with (its own transaction; ``unless_open`` holds)."""
    with session_scope(engine) as session:
        for follow_up in follow_ups:
            enqueue_follow_up(session, follow_up)


def enqueue_row(
    conn: Connection,
    kind: str,
    payload: dict[str, Any],
    *,
    dedupe_key: str | None = None,
    run_after: datetime | None = None,
    max_attempts: int | None = None,
) -> int:
    """:func:`enqueue` on a bare connection (the webhook intake's fast path); returns the id."""
    now = utcnow()
    values = {
        "kind": kind,
        "dedupe_key": dedupe_key,
        "payload": payload,
        "state": {},
        "status": PENDING,
        "attempts": 0,
        "max_attempts": max_attempts or DEFAULT_MAX_ATTEMPTS,
        "run_after": run_after or now,
        "created_at": now,
        "updated_at": now,
    }
    if dedupe_key is None:
        plain = insert(Task).values(values).returning(col(Task.id))
        return int(conn.execute(plain).scalar_one() or 0)
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = dialect_insert(Task).values(values)
    statement = statement.on_conflict_do_update(
        index_elements=[col(Task.dedupe_key)],
        set_={
            "payload": statement.excluded.payload,
            "run_after": statement.excluded.run_after,
            "updated_at": statement.excluded.updated_at,
        },
    )
    return int(conn.execute(statement.returning(col(Task.id))).scalar_one() or 0)


# -- claim and lease ----------------------------------------------------------------------------


def claim(
    engine: Engine,
    worker_id: str,
    *,
    lease_s: float,
    kinds: Sequence[str] | None = None,
    clock: Clock = utcnow,
) -> Task | None:
    """Take the next due task (or a running one whose lease expired) for ``worker_id``."""
    now = clock()
    # Two index range scans, each stopping at its first row: a running task whose lease expired
    # (few rows), else the oldest due pending one. One query over "due OR expired" made
    # PostgreSQL sort every due row on each claim, so claims slowed as the backlog grew.
    expired = (col(Task.status) == RUNNING) & (col(Task.lease_expires_at) < now)
    due = (col(Task.status) == PENDING) & (col(Task.run_after) <= now)
    for condition, order in (
        (expired, (col(Task.lease_expires_at), col(Task.id))),
        (due, (col(Task.run_after), col(Task.id))),
    ):
        task = _claim_first(engine, worker_id, condition, order, lease_s, kinds, now)
        if task is not None:
            return task
    return None


def _claim_first(
    engine: Engine,
    worker_id: str,
    condition: Any,
    order: tuple[Any, ...],
    lease_s: float,
    kinds: Sequence[str] | None,
    now: datetime,
) -> Task | None:
    candidate = select(col(Task.id)).where(condition)
    if kinds is not None:
        candidate = candidate.where(col(Task.kind).in_(list(kinds)))
    candidate = candidate.order_by(*order).limit(1)
    if engine.dialect.name == "postgresql":
        candidate = candidate.with_for_update(skip_locked=True)
    statement = (
        update(Task)
        .where(col(Task.id) == candidate.scalar_subquery())
        # The candidate is re-checked: on SQLite the read below and the write are separate.
        .where(condition)
        .values(
            status=RUNNING,
            lease_owner=worker_id,
            lease_expires_at=now + timedelta(seconds=lease_s),
            attempts=col(Task.attempts) + 1,
            dedupe_key=None,
            updated_at=now,
        )
        .returning(Task)
    )
    if engine.dialect.name == "sqlite" and not _any_due(engine, condition, kinds):
        return None
    with sqlite_writer(engine), session_scope(engine, immediate=True) as session:
        task = session.scalars(
            statement, execution_options={"synchronize_session": False}
        ).one_or_none()
        if task is not None:
            session.flush()
            session.expunge(task)
    return task


def _any_due(engine: Engine, condition: Any, kinds: Sequence[str] | None) -> bool:
    """A read that never blocks a writer (WAL): idle polls need not take SQLite's write lock."""
    probe = select(col(Task.id)).where(condition).limit(1)
    if kinds is not None:
        probe = probe.where(col(Task.kind).in_(list(kinds)))
    with engine.connect() as conn:
        return conn.execute(probe).first() is not None


def _owned(task_id: int, worker_id: str) -> Any:
    return (
        (col(Task.id) == task_id)
        & (col(Task.status) == RUNNING)
        & (col(Task.lease_owner) == worker_id)
    )


def _update_owned(engine: Engine, task_id: int, worker_id: str, **values: Any) -> bool:
    values.setdefault("updated_at", utcnow())
    with sqlite_writer(engine), write_connection(engine) as conn, conn.begin():
        result = conn.execute(update(Task).where(_owned(task_id, worker_id)).values(**values))
        return result.rowcount == 1


def heartbeat(
    engine: Engine, task_id: int, worker_id: str, lease_s: float, *, clock: Clock = utcnow
) -> bool:
    """Extend the lease if ``worker_id`` still owns the task; False when it does not."""
    expires = clock() + timedelta(seconds=lease_s)
    return _update_owned(engine, task_id, worker_id, lease_expires_at=expires)


def save_state(engine: Engine, task_id: int, worker_id: str, state: dict[str, Any]) -> None:
    """Record the task's progress, so a redo resumes from it. Raises :class:`LeaseLost`."""
    if not _update_owned(engine, task_id, worker_id, state=state):
        raise LeaseLost(f"task {task_id} is no longer held by {worker_id}")


def complete(
    engine: Engine,
    task_id: int,
    worker_id: str,
    *,
    in_same_transaction: Callable[[Session], None] | None = None,
) -> bool:
    """Mark the task done; ``in_same_transaction`` writes what must commit with it (follow-up
    tasks, the records the handler finished). False, and nothing written, if the lease was lost.
    """
    now = utcnow()
    with sqlite_writer(engine), session_scope(engine, immediate=True) as session:
        result = session.execute(
            update(Task)
            .where(_owned(task_id, worker_id))
            .values(
                status=DONE,
                lease_owner=None,
                lease_expires_at=None,
                finished_at=now,
                updated_at=now,
            ),
            execution_options={"synchronize_session": False},
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            return False
        if in_same_transaction is not None:
            in_same_transaction(session)
    return True


# -- failure ------------------------------------------------------------------------------------


def backoff_delay(
    attempts: int, *, base_s: float, cap_s: float, jitter: Callable[[], float] = random.random
) -> float:
    """``min(cap, base * 2**(attempts-1))``, less up to a quarter at random so retries of many
    tasks that failed together (GitHub down) do not all come back in the same second."""
    delay = min(cap_s, base_s * 2.0 ** max(0, attempts - 1))
    return delay * (1.0 - 0.25 * jitter())


def fail(
    engine: Engine,
    task: Task,
    error: BaseException,
    *,
    retry_after: float | None = None,
    backoff_base_s: float = 2.0,
    backoff_cap_s: float = 300.0,
) -> str:
    """Record a failed attempt: retry later (``pending``) or dead-letter. Returns the new status.

    :func:`stackbot.errors.disposition` decides: bad input and permanent errors are dead at
    once; anything else retries with exponential backoff (or after ``RetryLater.retry_after``)
    until ``max_attempts`` attempts were made.
    """
    assert task.id is not None and task.lease_owner is not None
    message = f"{type(error).__name__}: {error}"[:MAX_ERROR_CHARS]
    if isinstance(error, RetryLater) and retry_after is None:
        retry_after = error.retry_after
    retry = disposition(error) is Disposition.RETRY and task.attempts < task.max_attempts
    now = utcnow()
    if retry:
        if retry_after is None:
            retry_after = backoff_delay(task.attempts, base_s=backoff_base_s, cap_s=backoff_cap_s)
        values: dict[str, Any] = {
            "status": PENDING,
            "run_after": now + timedelta(seconds=retry_after),
        }
    else:
        values = {"status": DEAD, "finished_at": now}
    values.update(lease_owner=None, lease_expires_at=None, last_error=message)
    if not _update_owned(engine, task.id, task.lease_owner, **values):
        raise LeaseLost(f"task {task.id} is no longer held by {task.lease_owner}")
    return str(values["status"])


def bury(engine: Engine, task: Task, reason: str) -> None:
    """Dead-letter a claimed task at once (unknown kind, too many lost leases)."""
    assert task.id is not None and task.lease_owner is not None
    now = utcnow()
    _update_owned(
        engine,
        task.id,
        task.lease_owner,
        status=DEAD,
        finished_at=now,
        lease_owner=None,
        lease_expires_at=None,
        last_error=reason[:MAX_ERROR_CHARS],
    )


# -- the dashboard's view -----------------------------------------------------------------------


def requeue_dead(engine: Engine, task_id: int) -> bool:
    """Give a dead task a fresh set of attempts; False if it is not dead."""
    now = utcnow()
    with sqlite_writer(engine), write_connection(engine) as conn, conn.begin():
        result = conn.execute(
            update(Task)
            .where((col(Task.id) == task_id) & (col(Task.status) == DEAD))
            .values(status=PENDING, attempts=0, run_after=now, finished_at=None, updated_at=now)
        )
        return result.rowcount == 1


def stats(engine: Engine) -> dict[str, int]:
    """Number of tasks in each status (every status present, zeros included)."""
    counts = dict.fromkeys(STATUSES, 0)
    with engine.connect() as conn:
        rows = conn.execute(select(col(Task.status), func.count()).group_by(col(Task.status)))
        for status, count in rows:
            counts[str(status)] = int(count)
    return counts


def has_open_task(session: Session, *, kind: str) -> bool:
    """Whether a task of ``kind`` is pending or running."""
    statement = select(col(Task.id)).where(
        col(Task.kind) == kind, col(Task.status).in_([PENDING, RUNNING])
    )
    found = session.execute(statement.limit(1)).first()
    return found is not None


def list_tasks(engine: Engine, status: str | None = None, limit: int = 100) -> list[Task]:
    """The newest tasks, optionally of one status."""
    statement = select(Task).order_by(col(Task.id).desc()).limit(limit)
    if status is not None:
        statement = statement.where(col(Task.status) == status)
    with Session(engine) as session:
        tasks = list(session.scalars(statement))
        session.expunge_all()
    return tasks


def get_task(engine: Engine, task_id: int) -> Task | None:
    with Session(engine) as session:
        task = session.get(Task, task_id)
        if task is not None:
            session.expunge(task)
    return task
