"""A worker: claims tasks, runs their handlers under a heartbeat, records the outcome.

While a handler runs, a heartbeat thread extends the task's lease every third of it. If the
process dies, the heartbeats stop, the lease expires, and another worker claims the task again;
the handler then finds what the first attempt recorded in ``ctx.state``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from stackbot.config import Settings
from stackbot.db.models import Task
from stackbot.errors import StackbotError
from stackbot.taskqueue import TaskContext, TaskRegistry, queue

if TYPE_CHECKING:
    from stackbot.services.resources import WorkerResources

log = logging.getLogger(__name__)


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _Heartbeat:
    """Extends one task's lease until stopped; notes when the lease was lost."""

    def __init__(
        self, engine: Engine, task_id: int, worker_id: str, lease_s: float, clock: queue.Clock
    ) -> None:
        self._engine, self._task_id, self._worker_id, self._lease_s = (
            engine,
            task_id,
            worker_id,
            lease_s,
        )
        self._clock = clock
        self._stop = threading.Event()
        self.lost = False
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{task_id}", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._lease_s / 3):
            try:
                if not queue.heartbeat(
                    self._engine, self._task_id, self._worker_id, self._lease_s, clock=self._clock
                ):
                    self.lost = True
                    log.warning("task %d: lease lost; another worker may redo it", self._task_id)
                    return
            except Exception:  # a DB hiccup: the next beat may succeed before the lease ends
                log.exception("task %d: heartbeat failed", self._task_id)


class Worker:
    """Runs tasks from the queue. ``clock`` is what leases are measured by when claiming and
    extending them (tests move a fake one instead of waiting for leases to run out)."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        registry: TaskRegistry,
        *,
        worker_id: str | None = None,
        lease_s: float | None = None,
        resources: WorkerResources | None = None,
        clock: queue.Clock = queue.utcnow,
    ) -> None:
        """``resources``: what the worker keeps between tasks, shared with the process's other
        workers (default: its own, made on first use)."""
        self.engine = engine
        self.settings = settings
        self.registry = registry
        self._resources = resources
        self.worker_id = worker_id or new_worker_id()
        self.lease_s = lease_s if lease_s is not None else settings.worker.lease_seconds
        self.clock = clock
        self._wake = threading.Event()
        self.processed = 0

    @property
    def resources(self) -> WorkerResources:
        if self._resources is None:
            from stackbot.services.resources import WorkerResources  # (imports git, gpu_jobs)

            self._resources = WorkerResources(self.settings)
        return self._resources

    def wake(self) -> None:
        """Look for work now instead of at the next poll (the intake calls this)."""
        self._wake.set()

    def run_one(self) -> bool:
        """Claim and run one due task; False when none is due."""
        task = queue.claim(self.engine, self.worker_id, lease_s=self.lease_s, clock=self.clock)
        if task is None:
            return False
        self.execute(task)
        return True

    def run_until_idle(self, *, max_tasks: int | None = None) -> int:
        """Run due tasks until none is left (tasks waiting for a later retry are not waited
        for). Returns how many ran."""
        count = 0
        while (max_tasks is None or count < max_tasks) and self.run_one():
            count += 1
        return count

    def run_forever(self, stop_event: threading.Event) -> None:
        """Run tasks until ``stop_event`` is set; the task in hand is always finished first."""
        log.info("worker %s started (lease %.0fs)", self.worker_id, self.lease_s)
        while not stop_event.is_set():
            try:
                ran = self.run_one()
            except Exception:  # the database went away: keep the worker alive and retry
                log.exception("worker %s: claiming a task failed", self.worker_id)
                ran = False
                stop_event.wait(self.settings.worker.poll_interval_s * 4)
            if not ran:
                self._wake.wait(self.settings.worker.poll_interval_s)
                self._wake.clear()
        log.info("worker %s stopped after %d tasks", self.worker_id, self.processed)

    def execute(self, task: Task) -> None:
        assert task.id is not None
        handler = self.registry.get(task.kind)
        label = f"task {task.id} {task.kind}"
        if handler is None:
            queue.bury(self.engine, task, f"no handler is registered for task kind {task.kind!r}")
            log.error("%s: dead, no handler for this kind", label)
            return
        if task.attempts > task.max_attempts:
            reason = (
                f"given up after {task.max_attempts} attempts (the last ones lost their worker)"
            )
            queue.bury(self.engine, task, reason)
            log.error("%s: dead, %s", label, reason)
            return
        ctx = TaskContext(
            task,
            self.worker_id,
            self.engine,
            self.settings,
            state=dict(task.state),
            resources=self.resources,
        )
        log.info("%s started (attempt %d/%d)", label, task.attempts, task.max_attempts)
        started = time.monotonic()
        with _Heartbeat(self.engine, task.id, self.worker_id, self.lease_s, self.clock) as beat:
            try:
                handler(ctx)
                error: BaseException | None = None
            except queue.LeaseLost as lost:
                log.warning(
                    "%s: abandoned after %.2fs: %s", label, time.monotonic() - started, lost
                )
                return
            except Exception as failure:
                error = failure
        elapsed = time.monotonic() - started
        self.processed += 1
        if error is None:
            self._complete(ctx, label, elapsed, lease_lost=beat.lost)
        else:
            self._fail(task, error, label, elapsed)

    def _complete(
        self, ctx: TaskContext[WorkerResources], label: str, elapsed: float, *, lease_lost: bool
    ) -> None:
        try:
            done = not lease_lost and queue.complete(
                self.engine, ctx.task_id, self.worker_id, in_same_transaction=ctx.write_completion
            )
        except Exception as error:  # what the handler left to write failed: nothing was written
            self._fail(ctx.task, error, label, elapsed)
            return
        if done:
            log.info("%s done in %.2fs", label, elapsed)
        else:
            log.warning("%s finished in %.2fs but its lease was lost; not recorded", label, elapsed)

    def _fail(self, task: Task, error: BaseException, label: str, elapsed: float) -> None:
        try:
            status = queue.fail(
                self.engine,
                task,
                error,
                backoff_base_s=self.settings.worker.backoff_base_s,
                backoff_cap_s=self.settings.worker.backoff_cap_s,
            )
        except queue.LeaseLost:
            log.warning("%s failed in %.2fs after its lease was lost: %s", label, elapsed, error)
            return
        outcome = "dead" if status == queue.DEAD else "will retry"
        # A deliberate error's message says it all; anything else is a bug worth a traceback.
        trace = None if isinstance(error, StackbotError) else error
        log.warning(
            "%s failed in %.2fs (%s): %s: %s",
            label,
            elapsed,
            outcome,
            type(error).__name__,
            error,
            exc_info=trace,
        )
