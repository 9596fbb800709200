"""The webhook app over a migrated database (SQLite and PostgreSQL), in-process and live."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

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


class LiveServer:
    """The app under a real uvicorn on a free port, in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start within 10 s")
            time.sleep(0.01)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()


@pytest.fixture
def live_server(app: FastAPI) -> Iterator[LiveServer]:
    with LiveServer(app) as server:
        yield server


def count_rows(engine: Engine) -> tuple[int, int]:
    """(webhook deliveries, tasks) in the database."""
    with engine.connect() as conn:
        deliveries = conn.execute(select(func.count()).select_from(WebhookDelivery)).scalar_one()
        tasks = conn.execute(select(func.count()).select_from(Task)).scalar_one()
    return int(deliveries), int(tasks)
