"""The web application: webhook intake, health and metrics, the dashboard and its JSON API.

``create_app`` is the only way the app is built (``stackbot serve``, the tests, the demo). More
routers are added with ``app.include_router``; they find the database in ``app.state.engine``
and the settings in ``app.state.settings``.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import Engine

from stackbot import __version__
from stackbot.config import Settings
from stackbot.db.engine import make_engine
from stackbot.taskqueue import TaskRegistry, inbox
from stackbot.web import dashboard, exposure, health, webhooks
from stackbot.worker.runner import Worker

log = logging.getLogger(__name__)
WORKER_STOP_TIMEOUT_S = 30.0


def create_app(
    settings: Settings, *, engine: Engine | None = None, worker: TaskRegistry | None = None
) -> FastAPI:
    """Build the app; with ``worker`` (the handlers, :func:`stackbot.worker.handlers.service_registry`)
    it also runs one task worker thread inside it.

    Refuses (``UnsafeSettingsError``) to run without a webhook secret outside development mode.
    """
    settings.check_safe_to_serve()
    own_engine = engine is None
    engine = engine if engine is not None else make_engine(settings.effective_database_url)
    intake_engine = inbox.make_intake_engine(engine) if own_engine else engine
    embedded = EmbeddedWorker(engine, settings, worker) if worker is not None else None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        tune_garbage_collector()
        if embedded is not None:
            embedded.start()
        try:
            yield
        finally:
            if embedded is not None:
                embedded.stop()
            if own_engine:
                engine.dispose()
                if intake_engine is not engine:
                    intake_engine.dispose()

    # /docs is served by the dashboard from its own copy of Swagger UI (no CDN: works offline).
    app = FastAPI(
        title="stackbot", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    metrics = health.Metrics()
    app.state.engine = engine
    app.state.intake_engine = intake_engine
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.webhook_secret = _webhook_secret(settings)
    if embedded is not None:
        app.state.wake_worker = embedded.worker.wake
    app.add_middleware(health.LatencyMiddleware, metrics=metrics)
    app.include_router(webhooks.router)
    app.include_router(health.router)
    dashboard.install(app)
    exposure.install(app, settings)
    return app


def tune_garbage_collector() -> None:
    """A server keeps many long-lived objects (modules, templates, SQLAlchemy metadata), and
    CPython's full collections kept walking them: they were the dashboard's p95 tail (90 ms
    against a 27 ms median, benchmarks/bench_dashboard.py). Freeze what exists at startup and
    collect the young generation less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)


def _webhook_secret(settings: Settings) -> bytes | None:
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else ""
    if secret:
        return secret.encode()
    # check_safe_to_serve() let this through, so we are in development mode.
    log.warning(
        "STACKBOT_WEBHOOK_SECRET is not set: development mode accepts UNSIGNED webhook "
        "deliveries from anyone who can reach this port. Set a secret before exposing it."
    )
    return None


class EmbeddedWorker:
    """One worker thread inside the server process (``stackbot serve --worker``)."""

    def __init__(self, engine: Engine, settings: Settings, registry: TaskRegistry) -> None:
        self.worker = Worker(engine, settings, registry)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self.worker.run_forever, args=(self._stop,), name="embedded-worker", daemon=True
        )

    def start(self) -> None:
        from stackbot.worker.handlers import seed_tasks

        seed_tasks(self.worker.engine)
        self._thread.start()

    def stop(self) -> None:
        """Let the task in hand finish (up to a limit; its lease covers the rest)."""
        self._stop.set()
        self.worker.wake()
        self._thread.join(WORKER_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            log.warning("the embedded worker is still busy; its task will be redone elsewhere")
