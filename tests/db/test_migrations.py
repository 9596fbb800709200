"""The schema exists only through Alembic, and Alembic's schema is exactly the models'."""

from __future__ import annotations

import subprocess
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

import stackbot.db.models  # noqa: F401
from stackbot.db import migrate
from stackbot.db.engine import make_engine


def test_upgrade_yields_exactly_the_models_schema(database_url: str) -> None:
    migrate.upgrade(database_url)
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, SQLModel.metadata)
        assert diff == [], f"models and migrations differ: {diff}"
        tables = set(inspect(engine).get_table_names())
        assert set(SQLModel.metadata.tables) <= tables
    finally:
        engine.dispose()


def test_downgrade_base_removes_every_table(database_url: str) -> None:
    migrate.upgrade(database_url)
    migrate.downgrade(database_url, "base")
    engine = make_engine(database_url)
    try:
        remaining = set(inspect(engine).get_table_names()) - {"alembic_version"}
        assert remaining == set()
        # and back up again: the round trip works
        migrate.upgrade(database_url)
        assert set(SQLModel.metadata.tables) <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_single_migration_head() -> None:
    assert len(migrate.current_heads()) == 1


@pytest.mark.parametrize("action", ["upgrade", "downgrade"])
def test_cli_db_commands(database_url: str, action: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKBOT_DATABASE_URL", database_url)
    if action == "downgrade":
        migrate.upgrade(database_url)
    extra = ["base", "--yes"] if action == "downgrade" else []
    result = subprocess.run(
        [sys.executable, "-m", "stackbot", "db", action, *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    engine = make_engine(database_url)
    try:
        tables = set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()
    assert (tables == set()) == (action == "downgrade")
