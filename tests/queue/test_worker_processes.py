"""Real worker processes: SIGKILL mid-task loses nothing, SIGTERM finishes the task in hand,
and two processes on PostgreSQL never run one task twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from stackbot.db.engine import session_scope
from stackbot.taskqueue import queue
from tests.queue.task_modules import CREATE_RUNS_TABLE
from tests.queue.workers import WorkerProcess, wait_for


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.close()


def _start(
    workers: list[WorkerProcess], database_url: str, tmp_path: Path, *args: str
) -> WorkerProcess:
    worker = WorkerProcess(database_url, tmp_path / f"worker-{len(workers)}.log", *args)
    workers.append(worker)
    return worker


def _enqueue(engine: Engine, kind: str, payload: dict[str, object]) -> int:
    with session_scope(engine) as session:
        task = queue.enqueue(session, kind, payload)
        assert task.id is not None
        return task.id


def _state(engine: Engine, task_id: int) -> tuple[str, dict[str, object]]:
    task = queue.get_task(engine, task_id)
    assert task is not None
    return task.status, task.state


def test_sigkilled_worker_loses_nothing(
    engine: Engine, database_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    log = tmp_path / "handler.log"
    task_id = _enqueue(engine, "test_resumable", {"log": str(log), "sleep_s": 60})
    first = _start(workers, database_url, tmp_path, "--lease", "2")
    wait_for(
        lambda: _state(engine, task_id)[1].get("step") == "prepared", 30, "the first step", first
    )
    os.kill(first.pid, signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL
    assert _state(engine, task_id)[0] == "running"  # still leased to the dead worker

    second = _start(workers, database_url, tmp_path, "--lease", "2")
    wait_for(lambda: _state(engine, task_id)[0] == "done", 30, "the redo", second)
    second.process.send_signal(signal.SIGTERM)
    assert second.wait() == 0, second.output()

    lines = log.read_text().splitlines()
    assert lines == [
        f"prepare task={task_id} pid={first.pid} attempt=1",
        f"finish from=prepared task={task_id} pid={second.pid} attempt=2",
    ]
    task = queue.get_task(engine, task_id)
    assert task is not None and (task.attempts, task.state["by"]) == (2, first.pid)


def test_sigterm_finishes_the_task_in_hand_then_exits_0(
    engine: Engine, database_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    log = tmp_path / "handler.log"
    slow = _enqueue(engine, "test_resumable", {"log": str(log), "sleep_s": 2})
    worker = _start(workers, database_url, tmp_path)
    wait_for(
        lambda: _state(engine, slow)[1].get("step") == "prepared", 30, "the task to start", worker
    )
    waiting = _enqueue(engine, "test_resumable", {"log": str(log), "sleep_s": 0})
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    assert _state(engine, slow)[0] == "done"
    assert _state(engine, waiting)[0] == "pending"  # nothing new was started after SIGTERM
    assert (
        log.read_text()
        .splitlines()[-1]
        .startswith(f"finish from=prepared task={slow} pid={worker.pid}")
    )
    assert "finishing the tasks in hand" in worker.output()


def test_two_worker_processes_never_run_the_same_task(
    engine: Engine, database_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    """PostgreSQL is the several-workers deployment, but one SQLite file must hold too."""
    with engine.begin() as conn:
        conn.execute(text(CREATE_RUNS_TABLE))
    pair = [_start(workers, database_url, tmp_path, "--concurrency", "2") for _ in range(2)]
    for worker in pair:
        worker.wait_until_ready()
    count = 300
    ids = [_enqueue(engine, "test_exclusive", {"sleep_s": 0.005}) for _ in range(count)]
    wait_for(lambda: queue.stats(engine)["done"] == count, 120, f"{count} tasks", *pair)
    for worker in pair:
        worker.process.send_signal(signal.SIGTERM)
    assert [worker.wait() for worker in pair] == [0, 0]
    with engine.connect() as conn:
        runs = conn.execute(text("SELECT task_id, worker_id FROM test_task_runs")).all()
    assert sorted(task_id for task_id, _ in runs) == ids  # each exactly once (primary key)
    # Only the test's tasks: a worker also schedules its own (maintenance), not yet run.
    ours = [t for t in queue.list_tasks(engine, limit=count + 100) if t.id in set(ids)]
    assert len(ours) == count
    assert {t.attempts for t in ours} == {1}  # none retried
    processes = {worker_id.rsplit("-", 1)[0] for _, worker_id in runs}
    assert len(processes) == 2, "both processes should have taken a share of the tasks"


def test_bad_task_module_is_exit_2_naming_it(database_url: str, engine: Engine) -> None:
    env = dict(
        os.environ,
        STACKBOT_DATABASE_URL=database_url,
        STACKBOT_EXTRA_TASK_MODULES='["no.such.module"]',
    )
    result = subprocess.run(
        [sys.executable, "-m", "stackbot", "worker", "--once"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "no.such.module" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lease", "-1"], "not a positive number of seconds"),
        (["--lease", "nan"], "not a positive number of seconds"),
        (["--concurrency", "0"], "not a positive whole number"),
    ],
)
def test_bad_worker_arguments_are_exit_2(args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stackbot", "worker", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert message in result.stderr
