"""The task queue's rules, on SQLite and PostgreSQL: dedupe, leases, backoff, dead letters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, event, text, update
from sqlmodel import col

from stackbot.db.engine import session_scope
from stackbot.db.models import Task
from stackbot.errors import BadInput, Permanent, RetryLater
from stackbot.taskqueue import queue
from tests.queue.clock import FakeClock


def _enqueue(
    engine: Engine, kind: str = "k", payload: dict[str, object] | None = None, **kw: object
) -> int:
    with session_scope(engine) as session:
        task = queue.enqueue(session, kind, payload or {}, **kw)  # type: ignore[arg-type]
        assert task.id is not None
        return task.id


def _task(engine: Engine, task_id: int) -> Task:
    task = queue.get_task(engine, task_id)
    assert task is not None
    return task


def _aware(value: datetime) -> datetime:
    """SQLite gives back naive UTC datetimes, PostgreSQL aware ones."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def test_enqueue_claim_complete(engine: Engine) -> None:
    task_id = _enqueue(engine, "sync_pull", {"number": 8034})
    assert queue.stats(engine) == {"pending": 1, "running": 0, "done": 0, "dead": 0}
    task = queue.claim(engine, "w1", lease_s=30)
    assert task is not None and task.id == task_id
    assert (task.status, task.lease_owner, task.attempts, task.payload) == (
        "running",
        "w1",
        1,
        {"number": 8034},
    )
    assert queue.claim(engine, "w2", lease_s=30) is None  # held under w1's lease
    assert queue.complete(engine, task_id, "w1")
    done = _task(engine, task_id)
    assert (done.status, done.lease_owner, done.finished_at is not None) == ("done", None, True)
    assert queue.stats(engine)["done"] == 1


def test_burst_with_one_dedupe_key_collapses_into_one_pending_task(engine: Engine) -> None:
    ids = {_enqueue(engine, "sync_pull", {"n": n}, dedupe_key="sync_pull:o/r:1") for n in range(5)}
    assert len(ids) == 1
    [task_id] = ids
    assert _task(engine, task_id).payload == {"n": 4}  # the newest request wins
    other = _enqueue(engine, "sync_pull", {"n": 0}, dedupe_key="sync_pull:o/r:2")
    assert other != task_id
    assert queue.stats(engine)["pending"] == 2


def test_a_request_while_running_queues_exactly_one_more(engine: Engine) -> None:
    first = _enqueue(engine, dedupe_key="key")
    claimed = queue.claim(engine, "w1", lease_s=30)
    assert claimed is not None and claimed.id == first and claimed.dedupe_key is None
    second = {_enqueue(engine, payload={"n": n}, dedupe_key="key") for n in range(3)}
    assert len(second) == 1 and first not in second
    assert queue.stats(engine) == {"pending": 1, "running": 1, "done": 0, "dead": 0}


def test_claim_takes_due_tasks_in_order_and_filters_kinds(engine: Engine) -> None:
    later = _enqueue(engine, "a", run_after=datetime.now(UTC) + timedelta(hours=1))
    first = _enqueue(engine, "a")
    second = _enqueue(engine, "b")
    assert queue.claim(engine, "w", lease_s=30, kinds=["b"]).id == second  # type: ignore[union-attr]
    assert queue.claim(engine, "w", lease_s=30).id == first  # type: ignore[union-attr]
    assert queue.claim(engine, "w", lease_s=30) is None  # `later` is not due
    assert _task(engine, later).status == "pending"


def test_expired_lease_is_claimed_again_with_its_recorded_state(engine: Engine) -> None:
    task_id = _enqueue(engine)
    clock = FakeClock()
    assert queue.claim(engine, "dead-worker", lease_s=0.2, clock=clock) is not None
    queue.save_state(engine, task_id, "dead-worker", {"step": "integrated", "run_id": 12})
    assert queue.claim(engine, "w2", lease_s=30, clock=clock) is None
    clock.advance(0.3)
    task = queue.claim(engine, "w2", lease_s=30, clock=clock)
    assert task is not None and task.id == task_id
    assert (task.lease_owner, task.attempts, task.state) == (
        "w2",
        2,
        {"step": "integrated", "run_id": 12},
    )
    # The first worker, back from the dead, can change nothing any more.
    assert not queue.heartbeat(engine, task_id, "dead-worker", 30)
    assert not queue.complete(engine, task_id, "dead-worker")
    with pytest.raises(queue.LeaseLost):
        queue.save_state(engine, task_id, "dead-worker", {"step": "x"})
    assert queue.heartbeat(engine, task_id, "w2", 30)
    assert queue.complete(engine, task_id, "w2")


def test_heartbeat_extends_the_lease(engine: Engine) -> None:
    task_id = _enqueue(engine)
    task = queue.claim(engine, "w", lease_s=1)
    assert task is not None and task.lease_expires_at is not None
    before = _aware(task.lease_expires_at)
    assert queue.heartbeat(engine, task_id, "w", 60)
    after = _task(engine, task_id).lease_expires_at
    assert after is not None and _aware(after) - before > timedelta(seconds=50)


def test_backoff_schedule_doubles_up_to_the_cap() -> None:
    no_jitter = [
        queue.backoff_delay(n, base_s=2, cap_s=60, jitter=lambda: 0.0) for n in range(1, 8)
    ]
    assert no_jitter == [2, 4, 8, 16, 32, 60, 60]
    full_jitter = [
        queue.backoff_delay(n, base_s=2, cap_s=60, jitter=lambda: 1.0) for n in range(1, 8)
    ]
    assert full_jitter == [1.5, 3, 6, 12, 24, 45, 45]
    for n in range(1, 8):
        assert (
            0.75 * no_jitter[n - 1]
            <= queue.backoff_delay(n, base_s=2, cap_s=60)
            <= no_jitter[n - 1]
        )


def _claim_and_fail(engine: Engine, error: BaseException, **kw: float) -> tuple[str, Task]:
    task = queue.claim(engine, "w", lease_s=30)
    assert task is not None and task.id is not None
    status = queue.fail(engine, task, error, backoff_base_s=10, backoff_cap_s=100, **kw)
    return status, _task(engine, task.id)


def _make_due(engine: Engine, task_id: int) -> None:
    with session_scope(engine) as session:
        session.execute(
            update(Task).where(col(Task.id) == task_id).values(run_after=datetime.now(UTC))
        )


def test_failures_retry_with_backoff_then_dead_letter(engine: Engine) -> None:
    task_id = _enqueue(engine, max_attempts=3)
    started = datetime.now(UTC)
    for attempt, expected_delay in [(1, 10), (2, 20)]:
        status, task = _claim_and_fail(engine, RuntimeError(f"boom {attempt}"))
        assert (status, task.status, task.attempts, task.lease_owner) == (
            "pending",
            "pending",
            attempt,
            None,
        )
        delay = (_aware(task.run_after) - started).total_seconds()
        assert 0.75 * expected_delay - 1 <= delay <= expected_delay + 1
        assert task.last_error == f"RuntimeError: boom {attempt}"
        assert queue.claim(engine, "w", lease_s=30) is None  # not due before its backoff
        _make_due(engine, task_id)
    status, task = _claim_and_fail(engine, RuntimeError("boom 3"))
    assert (status, task.status, task.attempts) == ("dead", "dead", 3)
    assert [t.id for t in queue.list_tasks(engine, status="dead")] == [task_id]
    assert queue.requeue_dead(engine, task_id)
    again = _task(engine, task_id)
    assert (again.status, again.attempts) == ("pending", 0)
    assert not queue.requeue_dead(engine, task_id)  # only dead tasks
    assert queue.claim(engine, "w", lease_s=30) is not None


@pytest.mark.parametrize("error", [BadInput("no PR #99999"), Permanent("repository deleted")])
def test_bad_input_and_permanent_errors_are_dead_at_once(engine: Engine, error: Exception) -> None:
    _enqueue(engine)
    status, task = _claim_and_fail(engine, error)
    assert (status, task.attempts) == ("dead", 1)
    assert str(error) in (task.last_error or "")


def test_retry_later_waits_as_long_as_asked(engine: Engine) -> None:
    _enqueue(engine)
    started = datetime.now(UTC)
    status, task = _claim_and_fail(engine, RetryLater("rate limited", retry_after=3600))
    assert status == "pending"
    assert 3590 <= (_aware(task.run_after) - started).total_seconds() <= 3610


def test_list_tasks_newest_first(engine: Engine) -> None:
    ids = [_enqueue(engine, "k", {"n": n}) for n in range(3)]
    assert [t.id for t in queue.list_tasks(engine)] == ids[::-1]
    assert [t.id for t in queue.list_tasks(engine, limit=1)] == ids[-1:]
    assert queue.list_tasks(engine, status="dead") == []


@pytest.mark.postgres
def test_a_claim_reads_one_index_range_whatever_the_backlog(postgres_engine: Engine) -> None:
    """With thousands of due tasks a claim must not sort them all: PostgreSQL plans each claim
    statement as an index scan that stops at its first row. (One query over 'due OR expired'
    was planned with a Sort over every due row, so workers slowed as the backlog grew: the
    soak's claims fell from 80/s to under 20/s.)"""
    engine = postgres_engine

    start = datetime(2026, 1, 1, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(
            text(
                "insert into tasks (kind, payload, state, status, attempts, max_attempts,"
                " run_after, created_at, updated_at)"
                " select 'k', '{}', '{}', case when g % 10 = 0 then 'done' else 'pending' end,"
                " 0, 5, :start + g * interval '1 millisecond', :start, :start"
                " from generate_series(1, 30000) g"
            ),
            {"start": start},
        )
        conn.execute(text("analyze tasks"))
    statements: list[tuple[str, object]] = []

    def record(conn: object, cursor: object, statement: str, params: object, *_: object) -> None:
        if statement.lstrip().upper().startswith("UPDATE TASKS"):
            statements.append((statement, params))

    event.listen(engine, "before_cursor_execute", record)
    try:
        task = queue.claim(engine, "w1", lease_s=30)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert task is not None and task.run_after == start + timedelta(milliseconds=1)
    plans = []
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        for statement, params in statements:
            with raw.cursor() as cursor:
                cursor.execute("EXPLAIN " + statement, params)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
    assert all("Seq Scan" not in plan for plan in plans), plans
    # The statement that took the due task walks the index in (run_after, id) order and stops;
    # an expired-lease lookup may sort, but only the running tasks (one per worker thread).
    assert "Sort" not in plans[-1], plans[-1]
