"""Which handler runs which kind of task, and what a handler is given.

A handler runs one task. It returns normally when the task is done and raises to fail it
(:mod:`stackbot.errors` says whether that retries or dead-letters). Handlers may be run more
than once for one task (a worker died, a lease expired): they read ``ctx.state`` to skip what an
earlier attempt recorded through ``ctx.save_state``.

The service's handlers take their typed payload (:mod:`stackbot.domain.tasks`) and are added
with :meth:`TaskRegistry.add_task`; the process that runs workers assembles them
(:func:`stackbot.worker.handlers.service_registry`) and hands every context its resources
(``R``: the services' :class:`~stackbot.services.resources.WorkerResources`, which this package
never imports). Plugins and tests may add handlers of kinds of
their own with :meth:`TaskRegistry.add`, from modules named in the ``extra_task_modules``
setting (env ``STACKBOT_EXTRA_TASK_MODULES='["pkg.mod"]'``), each with a function
``register_tasks(registry: TaskRegistry) -> None``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db.models import Task
from stackbot.domain.tasks import FollowUp, TaskPayload
from stackbot.errors import BadInput
from stackbot.taskqueue import queue

R = TypeVar("R")


@dataclass
class TaskContext(Generic[R]):
    """What one run of a handler sees: its task, its recorded state, the worker's resources
    (``R``), and the ways to act: record progress, queue follow-up work, write on completion."""

    task: Task
    worker_id: str
    engine: Engine
    settings: Settings
    state: dict[str, Any] = field(default_factory=dict)
    follow_ups: list[FollowUp] = field(default_factory=list)
    finishers: list[Callable[[Session], None]] = field(default_factory=list)
    # What the worker keeps between tasks (GitHub client, executor, caches), handed over by the
    # process that runs the worker; None only for a context that needs none.
    resources: R | None = None

    @property
    def task_id(self) -> int:
        assert self.task.id is not None
        return self.task.id

    @property
    def payload(self) -> dict[str, Any]:
        return self.task.payload

    @property
    def attempt(self) -> int:
        return self.task.attempts

    def save_state(self, state: dict[str, Any]) -> None:
        """Record progress now (its own transaction): a redo starts from it.

        Raises :class:`stackbot.taskqueue.queue.LeaseLost` if another worker owns the task now;
        the handler should let it propagate.
        """
        queue.save_state(self.engine, self.task_id, self.worker_id, state)
        self.state = dict(state)

    def enqueue(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        dedupe_key: str | None = None,
        delay_s: float = 0.0,
    ) -> None:
        """Queue a follow-up task of any kind (plugins, tests); see :meth:`enqueue_task`."""
        self.follow_ups.append(FollowUp(kind, payload, dedupe_key, delay_s))

    def enqueue_task(
        self,
        task: TaskPayload,
        *,
        dedupe_key: str | None = None,
        delay_s: float = 0.0,
        unless_open: bool = False,
    ) -> None:
        """Queue a follow-up task; it is written in the transaction that completes this task,
        so a redo after a crash cannot queue it twice. Its payload's own dedupe key unless
        ``dedupe_key`` is given; ``delay_s``: not claimed before that many seconds after this
        task completes; ``unless_open``: not queued while a task of its kind is pending or
        running (a periodic round that activity must not postpone)."""
        self.follow_ups.append(
            FollowUp.of(task, dedupe_key=dedupe_key, delay_s=delay_s, unless_open=unless_open)
        )

    def on_completion(self, write: Callable[[Session], None]) -> None:
        """Write something in the transaction that completes this task."""
        self.finishers.append(write)

    @property
    def services(self) -> R:
        """The worker's resources, as the worker process handed them over."""
        if self.resources is None:
            raise RuntimeError(
                f"task {self.task_id} ({self.task.kind}): this context was made without the "
                "worker's resources; make it through stackbot.worker.runner.Worker"
            )
        return self.resources

    def write_completion(self, session: Session) -> None:
        for follow_up in self.follow_ups:
            queue.enqueue_follow_up(session, follow_up)
        for write in self.finishers:
            write(session)


P = TypeVar("P", bound=TaskPayload)


Handler = Callable[[TaskContext[Any]], None]


class TaskRegistry:
    """Task kind -> handler."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def add(self, kind: str, handler: Handler) -> None:
        if kind in self._handlers:
            raise ValueError(f"task kind {kind!r} already has a handler")
        self._handlers[kind] = handler

    def add_task(
        self, payload_type: type[P], handler: Callable[[TaskContext[Any], P], None]
    ) -> None:
        """Run ``handler`` with the task's payload decoded as ``payload_type`` (a bad payload
        fails the task with an error naming the field)."""

        def run(ctx: TaskContext[Any]) -> None:
            # from_payload returns Self, which mypy widens to the union over a bound TypeVar.
            handler(ctx, cast(P, payload_type.from_payload(ctx.payload)))

        run.__name__ = getattr(handler, "__name__", str(payload_type.KIND))
        self.add(payload_type.KIND, run)

    def handler(self, kind: str) -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`add`."""

        def decorate(function: Handler) -> Handler:
            self.add(kind, function)
            return function

        return decorate

    def get(self, kind: str) -> Handler | None:
        return self._handlers.get(kind)

    @property
    def kinds(self) -> list[str]:
        return sorted(self._handlers)

    def load(self, module_names: Iterable[str]) -> None:
        for name in module_names:
            try:
                module = importlib.import_module(name)
            except ImportError as error:
                raise BadInput(f"task module {name!r} cannot be imported: {error}") from error
            register = getattr(module, "register_tasks", None)
            if register is None:
                raise BadInput(f"task module {name!r} has no register_tasks(registry) function")
            register(self)
