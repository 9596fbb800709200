"""Which handler runs which kind of task, and what a handler is given.

A handler is ``Callable[[TaskContext], None]``. It returns normally when the task is done and
raises to fail it (:mod:`stackbot.errors` says whether that retries or dead-letters). Handlers
may be run more than once for one task (a worker died, a lease expired): they read
``ctx.state`` to skip what an earlier attempt recorded through ``ctx.save_state``.

Task modules: each module listed in :data:`TASK_MODULES` (or in the ``extra_task_modules``
setting, env ``STACKBOT_EXTRA_TASK_MODULES='["pkg.mod"]'``, used by tests and plugins) has a
function ``register_tasks(registry: TaskRegistry) -> None``. Add yours to ``TASK_MODULES``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db.models import Task
from stackbot.domain.events import FollowUp
from stackbot.errors import BadInput
from stackbot.worker import queue

Handler = Callable[["TaskContext"], None]

# Modules whose register_tasks(registry) adds the service's handlers, in this order.
TASK_MODULES: tuple[str, ...] = (
    "stackbot.worker.deliveries",
    "stackbot.services.sync",
    "stackbot.services.vetting",
    "stackbot.services.reconcile",
    "stackbot.services.reporting",
    "stackbot.services.pipeline",
)


@dataclass
class TaskContext:
    """What one run of a handler sees: its task, its recorded state, and ways to act."""

    task: Task
    worker_id: str
    engine: Engine
    settings: Settings
    state: dict[str, Any] = field(default_factory=dict)
    follow_ups: list[FollowUp] = field(default_factory=list)
    finishers: list[Callable[[Session], None]] = field(default_factory=list)
    # stackbot.adapters.github.GitHubClient, typed loosely so the worker does not import the
    # GitHub stack (PyGithub) until a handler needs it.
    _github: Any = None

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

        Raises :class:`stackbot.worker.queue.LeaseLost` if another worker owns the task now;
        the handler should let it propagate.
        """
        queue.save_state(self.engine, self.task_id, self.worker_id, state)
        self.state = dict(state)

    def enqueue(self, kind: str, payload: dict[str, Any], *, dedupe_key: str | None = None) -> None:
        """Queue a follow-up task; it is written in the transaction that completes this task,
        so a redo after a crash cannot queue it twice."""
        self.follow_ups.append(FollowUp(kind, payload, dedupe_key))

    def on_completion(self, write: Callable[[Session], None]) -> None:
        """Write something in the transaction that completes this task."""
        self.finishers.append(write)

    def github(self) -> Any:
        """The GitHub client, built on first use."""
        if self._github is None:
            adapter = importlib.import_module("stackbot.adapters.github")
            self._github = adapter.GitHubClient.from_settings(self.settings)
        return self._github

    def write_completion(self, session: Session) -> None:
        for follow_up in self.follow_ups:
            queue.enqueue(
                session, follow_up.kind, follow_up.payload, dedupe_key=follow_up.dedupe_key
            )
        for write in self.finishers:
            write(session)


class TaskRegistry:
    """Task kind -> handler."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def add(self, kind: str, handler: Handler) -> None:
        if kind in self._handlers:
            raise ValueError(f"task kind {kind!r} already has a handler")
        self._handlers[kind] = handler

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


def default_registry(settings: Settings) -> TaskRegistry:
    """The service's handlers plus those of the configured extra task modules."""
    registry = TaskRegistry()
    registry.load(TASK_MODULES)
    registry.load(settings.extra_task_modules)
    return registry
