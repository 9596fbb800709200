"""The sync package's pipeline plus the tasks of issue 15 (retarget_children, check_base)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from stackbot.adapters.http_server import BackgroundServer
from stackbot.config import Settings
from stackbot.services import (
    base_guard,
    commands,
    deliveries,
    reconcile,
    reporting,
    retarget,
    stack_commands,
    sync,
)
from stackbot.taskqueue import TaskRegistry
from stackbot.web.app import create_app
from stackbot.worker.runner import Worker
from tests.support.standin import WEBHOOK_SECRET, StandinWorld
from tests.sync.pipeline import HANDLED, Pipeline


@pytest.fixture
def stack_pipeline(
    standin: StandinWorld, bot_settings: Settings, engine: Engine
) -> Iterator[Pipeline]:
    registry = TaskRegistry()
    modules = (
        deliveries,
        sync,
        commands,
        reconcile,
        reporting,
        retarget,
        base_guard,
        stack_commands,
    )
    for module in modules:
        module.register_tasks(registry)
    with BackgroundServer().serving(create_app(bot_settings, engine=engine)) as app:
        standin.control.configure_webhook(
            f"{app.url}/webhooks/github", WEBHOOK_SECRET, mode="queue"
        )
        yield Pipeline(
            standin,
            bot_settings,
            engine,
            Worker(engine, bot_settings, registry),
            handled=(*HANDLED, "retarget_children", "check_base", "restack_pr", "port_pr"),
        )
