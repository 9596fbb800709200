"""Task handlers the worker tests load into real ``stackbot worker`` processes through
``STACKBOT_EXTRA_TASK_MODULES='["tests.queue.task_modules"]'``.

Each handler leaves evidence the tests read: lines appended to a file named in the payload, or
rows in ``test_task_runs`` (created by the tests; its primary key is the task id, so a task run
twice to completion cannot go unnoticed).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from sqlalchemy import text

from stackbot.taskqueue import TaskContext, TaskRegistry

CREATE_RUNS_TABLE = (
    "CREATE TABLE test_task_runs (task_id INTEGER PRIMARY KEY, worker_id TEXT NOT NULL)"
)


def _note(ctx: TaskContext, line: str) -> None:
    with Path(ctx.payload["log"]).open("a") as log:
        log.write(f"{line} task={ctx.task_id} pid={os.getpid()} attempt={ctx.attempt}\n")


def resumable(ctx: TaskContext) -> None:
    """Two steps; the first is recorded, then the handler dawdles (where the test kills it)."""
    if ctx.state.get("step") != "prepared":
        _note(ctx, "prepare")
        ctx.save_state({"step": "prepared", "by": os.getpid()})
        time.sleep(float(ctx.payload.get("sleep_s", 0)))
    _note(ctx, f"finish from={ctx.state['step']}")


def exclusive(ctx: TaskContext) -> None:
    """Records that it ran; a second completed run of one task violates the primary key."""
    time.sleep(float(ctx.payload.get("sleep_s", 0)))
    with ctx.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO test_task_runs (task_id, worker_id) VALUES (:t, :w)"),
            {"t": ctx.task_id, "w": ctx.worker_id},
        )


def register_tasks(registry: TaskRegistry) -> None:
    registry.add("test_resumable", resumable)
    registry.add("test_exclusive", exclusive)
