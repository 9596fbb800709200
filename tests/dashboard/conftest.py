"""The dashboard's pages over the test's database (SQLite and PostgreSQL, see tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from stackbot.web import dashboard


@pytest.fixture
def client(engine: Engine) -> Iterator[TestClient]:
    app = FastAPI()
    app.state.engine = engine
    dashboard.install(app)
    with TestClient(app) as test_client:
        yield test_client
