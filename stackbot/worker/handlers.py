"""The worker's handlers, assembled: every task kind of :mod:`stackbot.domain.tasks` with the
service that runs it, plus the handlers of the ``extra_task_modules`` setting (plugins, tests);
and the work a worker starts with (:func:`seed_tasks`).

``stackbot worker``, ``stackbot serve --worker`` and ``stackbot demo`` build their workers from
here; nothing else imports the services to run them.
"""

from __future__ import annotations

from sqlalchemy import Engine

from stackbot.config import Settings
from stackbot.domain.tasks import PAYLOADS
from stackbot.services import (
    base_guard,
    base_moved,
    commands,
    deliveries,
    integrate,
    landing,
    maintenance,
    merge_group,
    poll_jobs,
    reconcile,
    reporting,
    retarget,
    retest,
    series_conflicts,
    stack_commands,
    sync,
    test_alone,
)
from stackbot.taskqueue import TaskRegistry, queue


def service_registry(settings: Settings) -> TaskRegistry:
    """A handler for every task kind stackbot queues, and those of the configured extras."""
    registry = TaskRegistry()
    for module in (
        deliveries,
        sync,
        commands,
        reconcile,
        reporting,
        integrate,
        poll_jobs,
        base_moved,
        retest,
        series_conflicts,
        maintenance,
        retarget,
        base_guard,
        stack_commands,
        test_alone,
        landing,
        merge_group,
    ):
        module.register_tasks(registry)
    missing = sorted(set(PAYLOADS) - set(registry.kinds))
    assert not missing, f"task kinds without a handler: {missing}"
    registry.load(settings.extra_task_modules)
    return registry


def seed_tasks(engine: Engine) -> None:
    """Queue what a starting worker process begins with, unless already queued: the repair of
    what was missed while no worker ran, and the maintenance rounds."""
    queue.seed(engine, [*reconcile.first_rounds(engine), maintenance.first_round()])
