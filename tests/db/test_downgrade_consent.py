"""``stackbot db downgrade`` never drops a table holding rows without ``--yes``, however the
revision is spelled (issue 29 point 1), on SQLite and PostgreSQL; it says what it would drop,
with row counts, before asking."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from stackbot.db import migrate
from stackbot.db.engine import make_engine


def stackbot_db(*argv: str, url: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stackbot", "db", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "STACKBOT_DATA_DIR": str(data_dir), "STACKBOT_DATABASE_URL": url},
    )


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def add_repositories(url: str, count: int) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for n in range(count):
                conn.execute(
                    text(
                        "INSERT INTO repositories (full_name, clone_url, default_branch, "
                        "created_at) VALUES (:name, 'https://x', 'main', CURRENT_TIMESTAMP)"
                    ),
                    {"name": f"o/r{n}"},
                )
    finally:
        engine.dispose()


def clock_rows(database_url: str) -> int:
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM read_clock")).scalar_one())
    finally:
        engine.dispose()


# Every migration, counted from the head: "-N" reaches base however many there are.
STEPS_TO_BASE = (
    f"-{len(list((Path(__file__).parents[2] / 'migrations' / 'versions').glob('0*.py')))}"
)


@pytest.mark.parametrize("spelling", ["base", STEPS_TO_BASE, "0001-1", "0008@base", "0001"])
def test_a_downgrade_dropping_rows_needs_yes_however_spelled(
    database_url: str, tmp_path: Path, spelling: str
) -> None:
    migrate.upgrade(database_url)
    add_repositories(database_url, 3)
    before = tables(database_url)
    done = stackbot_db("downgrade", spelling, url=database_url, data_dir=tmp_path / "data")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("stackbot db:")]
    assert "--yes" in line
    assert tables(database_url) == before  # nothing was dropped
    if spelling == "0001":  # keeps 0001's tables: drops the later ones (read_clock holds a row)
        assert "read_clock" in done.stdout and "repositories" not in done.stdout
    else:
        assert "repositories" in done.stdout and "3 rows" in done.stdout
        # 3 repositories and the read clock's rows (the global one and one per watched table)
        assert f"{3 + clock_rows(database_url)} row(s)" in line


def test_with_yes_it_drops_and_says_what(database_url: str, tmp_path: Path) -> None:
    migrate.upgrade(database_url)
    add_repositories(database_url, 2)
    done = stackbot_db(
        "downgrade", STEPS_TO_BASE, "--yes", url=database_url, data_dir=tmp_path / "data"
    )
    assert done.returncode == 0, done.stderr
    assert "repositories" in done.stdout and "2 rows" in done.stdout
    assert tables(database_url) == set()


def test_a_downgrade_dropping_only_empty_tables_needs_no_yes(
    database_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(database_url, "0007")
    migrate.upgrade(database_url, "0008")  # read_clock's migration, the one undone below
    engine = make_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM read_clock"))
    finally:
        engine.dispose()
    done = stackbot_db("downgrade", "-1", url=database_url, data_dir=tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert "undoes 0008" in done.stdout and "read_clock" in done.stdout
    assert "read_clock" not in tables(database_url)
    assert migrate.current_revision(database_url) == "0007"


def test_an_empty_schema_still_needs_yes_for_base(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'data' / 'stackbot.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM read_clock"))
    finally:
        engine.dispose()
    done = stackbot_db("downgrade", "0001-1", url=url, data_dir=tmp_path / "data")
    assert done.returncode == 2 and "every table" in done.stderr, done.stderr
