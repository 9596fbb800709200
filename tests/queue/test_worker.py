"""The in-process Worker: handlers, follow-up tasks, failures and lost leases."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, update
from sqlmodel import col

from stackbot.config import Settings
from stackbot.db.engine import session_scope
from stackbot.db.models import Task
from stackbot.errors import BadInput
from stackbot.taskqueue import TaskContext, TaskRegistry, queue
from stackbot.worker.runner import Worker
from tests.queue.clock import FakeClock


def _enqueue(engine: Engine, kind: str, payload: dict[str, object] | None = None) -> int:
    with session_scope(engine) as session:
        task = queue.enqueue(session, kind, payload or {})
        assert task.id is not None
        return task.id


def test_unknown_kind_is_dead_lettered_naming_it(engine: Engine, settings: Settings) -> None:
    task_id = _enqueue(engine, "no_such_kind")
    Worker(engine, settings, TaskRegistry()).run_until_idle()
    task = queue.get_task(engine, task_id)
    assert task is not None
    assert task.status == "dead", (task.status, task.attempts, task.run_after, task.last_error)
    assert "no_such_kind" in (task.last_error or "")


def test_follow_ups_are_written_with_the_completion(engine: Engine, settings: Settings) -> None:
    registry = TaskRegistry()
    seen: list[dict[str, object]] = []

    @registry.handler("parent")
    def parent(ctx: TaskContext) -> None:
        ctx.save_state({"step": "one"})
        ctx.enqueue("child", {"from": ctx.task_id}, dedupe_key="child:1")
        ctx.enqueue("child", {"from": ctx.task_id, "again": True}, dedupe_key="child:1")

    @registry.handler("child")
    def child(ctx: TaskContext) -> None:
        seen.append(ctx.payload)

    parent_id = _enqueue(engine, "parent")
    assert Worker(engine, settings, registry).run_until_idle() == 2
    assert seen == [{"from": parent_id, "again": True}]  # the two requests collapsed
    parent_task = queue.get_task(engine, parent_id)
    assert parent_task is not None and parent_task.state == {"step": "one"}
    assert queue.stats(engine) == {"pending": 0, "running": 0, "done": 2, "dead": 0}


def test_failing_handler_retries_and_bad_input_dies(engine: Engine, settings: Settings) -> None:
    registry = TaskRegistry()
    registry.add("flaky", lambda ctx: (_ for _ in ()).throw(RuntimeError("flaky")))
    registry.add("bad", lambda ctx: (_ for _ in ()).throw(BadInput("PR #1 has no head")))
    flaky, bad = _enqueue(engine, "flaky"), _enqueue(engine, "bad")
    Worker(engine, settings, registry).run_until_idle()
    flaky_task, bad_task = queue.get_task(engine, flaky), queue.get_task(engine, bad)
    assert flaky_task is not None and (flaky_task.status, flaky_task.attempts) == ("pending", 1)
    assert bad_task is not None and bad_task.status == "dead"
    assert bad_task.last_error == "BadInput: PR #1 has no head"


def _wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for: {what}"
        time.sleep(0.02)


def _renewed(engine: Engine, task_id: int, now: datetime, lease: timedelta) -> bool:
    """Whether the task's lease runs a whole ``lease`` from ``now`` (a heartbeat at ``now``)."""
    task = queue.get_task(engine, task_id)
    expires = task.lease_expires_at if task is not None else None
    if expires is None:
        return False
    return (expires if expires.tzinfo else expires.replace(tzinfo=UTC)) >= now + lease


def test_heartbeat_keeps_a_long_task_and_a_lost_lease_is_not_completed(
    engine: Engine, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="stackbot.worker.runner")
    registry = TaskRegistry()
    started, release = threading.Event(), threading.Event()

    @registry.handler("long")
    def long(ctx: TaskContext) -> None:
        started.set()
        release.wait(10)

    task_id = _enqueue(engine, "long")
    clock, lease = FakeClock(), timedelta(seconds=0.6)
    worker = Worker(
        engine, settings, registry, worker_id="w1", lease_s=lease.total_seconds(), clock=clock
    )
    thread = threading.Thread(target=worker.run_one)
    thread.start()
    assert started.wait(10)
    # More than two leases pass, half a lease at a time; only the heartbeat (every third of a
    # lease, in real time) keeps the task w1's, renewing the lease from each new now.
    for _ in range(5):
        clock.advance(0.3)
        _wait_until(
            lambda: _renewed(engine, task_id, clock(), lease), "a heartbeat renews the lease"
        )
    assert queue.claim(engine, "w2", lease_s=30, clock=clock) is None
    # Steal it as if w1's heartbeats had stopped; w1 must not then mark it done.
    task = queue.get_task(engine, task_id)
    assert task is not None and task.lease_owner == "w1"
    with session_scope(engine) as session:
        session.execute(update(Task).where(col(Task.id) == task_id).values(lease_owner="w2"))
    _wait_until(
        lambda: any("lease lost" in r.getMessage() for r in caplog.records),
        "a heartbeat notices",
    )
    release.set()
    thread.join(10)
    after = queue.get_task(engine, task_id)
    assert after is not None and (after.status, after.lease_owner) == ("running", "w2")


def test_run_forever_stops_when_asked(engine: Engine, settings: Settings, tmp_path: Path) -> None:
    registry = TaskRegistry()
    ran: list[int] = []
    registry.add("k", lambda ctx: ran.append(ctx.task_id))
    worker = Worker(engine, settings, registry)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop,))
    thread.start()
    task_id = _enqueue(engine, "k")
    worker.wake()
    deadline = time.monotonic() + 10
    while not ran and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    worker.wake()
    thread.join(5)
    assert not thread.is_alive()
    assert ran == [task_id]


def test_a_failing_completion_write_fails_the_task_and_writes_nothing(
    engine: Engine, settings: Settings
) -> None:
    registry = TaskRegistry()

    def broken_finisher(_session: object) -> None:
        raise RuntimeError("the report row cannot be written")

    @registry.handler("k")
    def handler(ctx: TaskContext) -> None:
        ctx.enqueue("child", {})
        ctx.on_completion(broken_finisher)

    task_id = _enqueue(engine, "k")
    Worker(engine, settings, registry).run_one()
    task = queue.get_task(engine, task_id)
    assert task is not None and (task.status, task.attempts) == ("pending", 1)
    assert task.last_error == "RuntimeError: the report row cannot be written"
    assert [t.kind for t in queue.list_tasks(engine)] == ["k"]  # the follow-up was rolled back
