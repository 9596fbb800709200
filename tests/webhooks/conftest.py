"""The webhook app over a migrated database (SQLite and PostgreSQL), in-process and live."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from stackbot.adapters.http_server import BackgroundServer
from stackbot.config import Settings, load_settings
from stackbot.db.models import Task, WebhookDelivery
from stackbot.web.app import create_app
from tests.support.signing import TEST_SECRET


@pytest.fixture
def signed_settings(tmp_path: Path) -> Settings:
    return load_settings(dev=False, webhook_secret=TEST_SECRET, data_dir=tmp_path / "data")


@pytest.fixture
def app(signed_settings: Settings, engine: Engine) -> FastAPI:
    return create_app(signed_settings, engine=engine)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


# The app under a real uvicorn on a free port (limits need a real HTTP server).
LiveServer = BackgroundServer


@pytest.fixture
def live_server(app: FastAPI) -> Iterator[LiveServer]:
    with BackgroundServer().serving(app) as server:
        yield server


def count_rows(engine: Engine) -> tuple[int, int]:
    """(webhook deliveries, tasks) in the database."""
    with engine.connect() as conn:
        deliveries = conn.execute(select(func.count()).select_from(WebhookDelivery)).scalar_one()
        tasks = conn.execute(select(func.count()).select_from(Task)).scalar_one()
    return int(deliveries), int(tasks)
