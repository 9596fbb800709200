"""Fixtures every test package may use: an isolated environment, settings, and databases.

``database_url`` is parametrized over SQLite and a real PostgreSQL: a test that asks for it
runs on both. ``engine`` is that database migrated to head through Alembic (the only way the
schema is created).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from stackbot.config import Settings, load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine
from tests.support import postgres

# One Chromium for the whole session: two Playwright sync instances cannot share a thread.
from tests.support.browser import browser  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's STACKBOT_* variables or stackbot.toml."""
    for name in list(os.environ):
        if name.startswith("STACKBOT_") and not name.startswith("STACKBOT_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("STACKBOT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'stackbot.db'}"
    else:
        with postgres.fresh_database() as url:
            yield url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    migrate.upgrade(database_url)
    engine = make_engine(database_url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def postgres_engine() -> Iterator[Engine]:
    """A migrated fresh PostgreSQL database, for what only PostgreSQL does (mark the test
    ``postgres``)."""
    with postgres.fresh_database() as url:
        migrate.upgrade(url)
        engine = make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(dev=True, data_dir=tmp_path / "data")
