"""Is the database answering? The one query ``/healthz`` makes."""

from __future__ import annotations

from sqlalchemy import Engine


def database_answers(engine: Engine) -> str | None:
    """None when a trivial query succeeds, else what went wrong."""
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1").scalar_one()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None
