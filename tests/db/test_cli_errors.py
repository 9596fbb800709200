"""``stackbot db`` on databases and data directories it cannot use: exit 2 and one line naming
what to fix, never a traceback; ``downgrade`` never drops the schema without being told to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import inspect
from sqlmodel import SQLModel

import stackbot.db.models  # noqa: F401
from stackbot.db import migrate
from stackbot.db.engine import make_engine


def stackbot_db(*argv: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STACKBOT_DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "stackbot", "db", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**env, "STACKBOT_DATA_DIR": str(data_dir)},
    )


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("stackbot db:")]
    return line


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_on_a_corrupt_sqlite_file_exits_2(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "stackbot.db").write_bytes(b"\x00garbage, not SQLite\xff" * 400)
    line = error_line(stackbot_db("upgrade", data_dir=data_dir))
    assert "stackbot.db" in line and "not a database" in line and "backup" in line


def test_upgrade_with_an_unwritable_data_dir_exits_2(tmp_path: Path) -> None:
    # Tests run as root, where chmod stops no write: a directory under a regular file does.
    (tmp_path / "a-file").write_text("x")
    data_dir = tmp_path / "a-file" / "data"
    line = error_line(stackbot_db("upgrade", data_dir=data_dir))
    assert str(data_dir) in line and "STACKBOT_DATA_DIR" in line


def test_downgrade_needs_a_revision_and_yes_for_base(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    url = f"sqlite:///{data_dir / 'stackbot.db'}"
    migrate.upgrade(url)
    assert "needs --yes" in error_line(stackbot_db("downgrade", data_dir=data_dir))
    assert "--yes" in error_line(stackbot_db("downgrade", "base", data_dir=data_dir))
    assert "--yes" in error_line(stackbot_db("downgrade", "--revision", "base", data_dir=data_dir))
    assert set(SQLModel.metadata.tables) <= tables(url)  # nothing was dropped
    done = stackbot_db("downgrade", "base", "--yes", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert tables(url) == set()
