"""The maintenance task runs once per period, whatever the number of workers (both databases,
real ``stackbot worker`` processes)."""

from __future__ import annotations

import time
from datetime import UTC
from pathlib import Path

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.db import maintenance_store
from stackbot.db.engine import session_scope
from stackbot.db.models import MaintenanceRun, Task
from stackbot.domain.tasks import FollowUp, Maintenance, TaskKind
from stackbot.taskqueue import queue
from tests.queue.workers import WorkerProcess, wait_for


def test_a_period_is_claimed_by_one_task_only(engine: Engine) -> None:
    def claim(period: int, task_id: int) -> int | None:
        with session_scope(engine) as session:
            row = maintenance_store.claim_period(session, period=period, task_id=task_id)
            return None if row is None else row.id

    first = claim(7, 1)
    assert first is not None
    assert claim(7, 1) == first  # the same task, retried: its round
    assert claim(7, 2) is None  # another task: this period's round is taken
    assert claim(8, 2) not in (None, first)


def _when(task: Task) -> float:
    at = task.run_after
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def _maintenance_tasks(engine: Engine) -> list[Task]:
    with Session(engine) as session:
        return list(
            session.exec(
                select(Task).where(Task.kind == TaskKind.MAINTENANCE).order_by(col(Task.id))
            )
        )


def test_two_workers_run_one_round_per_period(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    # Two tasks for the same period, as two worker starts racing past each other would leave.
    task = FollowUp.of(Maintenance())
    with session_scope(engine) as session:
        for _ in range(2):
            queue.enqueue(session, task.kind, task.payload)
    workers = [
        WorkerProcess(database_url, tmp_path / f"worker-{n}.log", "--concurrency", "2")
        for n in range(2)
    ]
    try:
        for worker in workers:
            worker.wait_until_ready()

        def settled() -> bool:
            tasks = _maintenance_tasks(engine)
            return sum(t.status == "done" for t in tasks) >= 2 and not any(
                t.status == "running" or (t.status == "pending" and _when(t) <= time.time())
                for t in tasks
            )

        wait_for(settled, 60, "both maintenance tasks done", *workers)
    finally:
        for worker in workers:
            worker.close()
    with Session(engine) as session:
        rounds = list(session.exec(select(MaintenanceRun)))
    assert len(rounds) == 1, rounds
    assert rounds[0].finished_at is not None and rounds[0].trigger == "schedule"
    tasks = _maintenance_tasks(engine)
    pending = [t for t in tasks if t.status == "pending"]
    # Exactly one next round, at the start of the next period (a day by default).
    assert len(pending) == 1, [(t.id, t.status) for t in tasks]
    interval = 86400
    expected = (rounds[0].period or 0) * interval + interval
    assert abs(_when(pending[0]) - expected) < 5
    assert time.time() < expected
    logs = "".join(w.output() for w in workers)
    assert "this period's round was run by another task" in logs


def test_a_worker_start_queues_one_round_unless_one_is_open(engine: Engine) -> None:
    from stackbot.services.maintenance import FIRST_ROUND_DELAY_S
    from stackbot.worker.handlers import seed_tasks

    seed_tasks(engine)
    seed_tasks(engine)  # a second worker starting
    tasks = _maintenance_tasks(engine)
    assert [t.status for t in tasks] == ["pending"]
    assert abs(_when(tasks[0]) - (time.time() + FIRST_ROUND_DELAY_S)) < 30
