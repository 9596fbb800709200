"""Alembic, driven from code: ``stackbot db upgrade`` and the tests use these functions."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

import stackbot


def migrations_dir() -> Path:
    package_dir = Path(stackbot.__file__).resolve().parent
    for candidate in (package_dir / "_migrations", package_dir.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError(
        "the Alembic migrations folder is missing: expected migrations/ beside the stackbot "
        "package (source checkout) or stackbot/_migrations (installed wheel)"
    )


def alembic_config(database_url: str) -> Config:
    from stackbot.db.engine import normalise_url

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # '%' must be doubled for ConfigParser interpolation (passwords may contain it).
    config.set_main_option("sqlalchemy.url", normalise_url(database_url).replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url), revision)


def current_heads() -> list[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return list(script.get_heads())


def current_revision(database_url: str) -> str | None:
    """The revision the database is at (None: never migrated)."""
    from alembic.migration import MigrationContext

    from stackbot.db.engine import make_engine

    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
