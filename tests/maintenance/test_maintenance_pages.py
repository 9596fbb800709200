"""Disk use on the dashboard (``/maintenance``, ``/api/maintenance``) and the operator's CLI
``stackbot maintenance run``, on both databases."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from stackbot.config import Settings
from stackbot.services.maintenance import run_by_hand
from stackbot.web import dashboard
from tests.maintenance.test_maintenance_round import World
from tests.support.signing import REPO_ROOT


@pytest.fixture
def client(engine: Engine, settings: Settings) -> Iterator[TestClient]:
    app = FastAPI()
    app.state.engine = engine
    app.state.settings = settings
    dashboard.install(app)
    with TestClient(app) as test_client:
        yield test_client


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_page_says_no_round_ran_yet(client: TestClient) -> None:
    page = client.get("/maintenance")
    assert page.status_code == 200
    assert "No maintenance round has finished yet" in page.text
    assert client.get("/api/maintenance").json()["measured_at"] is None


def test_the_page_and_api_show_the_stored_figures(
    client: TestClient, engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    run = world.run("pr-1", [1], days_ago=0, target=1)
    world.job(run, status="passed", finished_days_ago=0)
    run_by_hand(engine, settings, dry_run=False, say=lambda _: None)
    data = client.get("/api/maintenance").json()
    areas = {a["area"]: a for a in data["areas"]}
    assert data["measured_at"]
    assert areas["mirrors"]["count"] == 1 and areas["mirrors"]["bytes"] > 0
    assert areas["run_refs"]["count"] == 2
    assert areas["job_output"]["count"] == 1 and areas["job_output"]["bytes"] > 0
    assert areas["database"]["bytes"] > 0
    assert data["rounds"][0]["trigger"] == "cli"
    assert data["settings"]["run_ref_retention_days"] == 30
    text = _text(client.get("/maintenance").text)
    assert "git mirrors" in text and "job output" in text and "runner repository cache" in text
    assert "KiB" in text and "by hand" in text
    assert "30 days after their last run" in text
    assert str(settings.data_dir) not in client.get("/maintenance").text  # no server paths
    assert 'href="/maintenance"' in client.get("/tasks").text


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stackbot", "maintenance", *args],
        capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env},
    )  # fmt: skip


def test_the_cli_prints_what_it_would_free_and_what_it_freed(
    engine: Engine, settings: Settings, database_url: str, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    world.run("pr-1", [1], days_ago=40, target=1)  # written now (NOW is 40 days ahead)
    env = {
        "STACKBOT_DATABASE_URL": database_url,
        "STACKBOT_DATA_DIR": str(settings.data_dir),
        "STACKBOT_MAINTENANCE__RUN_REF_RETENTION_DAYS": "0",
    }
    dry = _cli("run", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("maintenance (dry run): would free")
    assert "would delete 2 run refs" in dry.stderr
    assert world.refs()
    done = _cli("run", "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["run_refs_removed"] == 2 and report["dry_run"] is False
    assert report["usage"]["mirrors"]["count"] == 1
    assert not world.refs()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {}, "stackbot maintenance run"),
        (("run",), {"STACKBOT_MAINTENANCE__INTERVAL_S": "-5"}, "interval_s"),
        (("run",), {"STACKBOT_DATABASE_URL": "postgresql://127.0.0.1:1/none"}, "cannot read"),
    ],
)
def test_bad_input_is_exit_2_with_one_line(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    done = _cli(*args, env=env)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if "INFO" not in line]
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_failed_area_is_named_without_its_error_text(
    client: TestClient, engine: Engine, settings: Settings
) -> None:
    broken = settings.mirrors_dir / "broken.git"
    broken.mkdir(parents=True)
    (broken / "HEAD").write_text("not a repository\n")
    report = run_by_hand(engine, settings, dry_run=False, say=lambda _: None)
    assert report.errors and report.errors[0].startswith("mirrors:")
    assert report.usage["job_output"]["count"] == 0  # the other areas still ran
    html = client.get("/maintenance").text
    assert "failed: mirrors" in _text(html)
    assert str(broken) not in html and "fatal" not in html


def test_a_dry_run_shows_disk_use_now_and_after(
    engine: Engine, settings: Settings, database_url: str, tmp_path: Path
) -> None:
    world = World(engine, settings, tmp_path)
    run = world.run("pr-1", [1], days_ago=40, target=1)
    job = world.job(run, status="passed", finished_days_ago=40)
    env = {
        "STACKBOT_DATABASE_URL": database_url,
        "STACKBOT_DATA_DIR": str(settings.data_dir),
        "STACKBOT_MAINTENANCE__JOB_OUTPUT_RETENTION_DAYS": "0",
    }
    dry = _cli("run", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"would remove job-{job}" in dry.stderr
    [line] = [line for line in dry.stdout.splitlines() if line.strip().startswith("job_output")]
    # Nothing was removed: the job's output is still there, and the line says so.
    assert (settings.jobs_dir / f"job-{job}").is_dir()
    assert "now 24.0 KiB, 1 entry" in line.split("after")[0], line
    assert line.split("after")[1].strip(": ") == "0 B, 0 entries", line
    report = json.loads(_cli("run", "--dry-run", "--json", env=env).stdout)
    assert report["usage_before"]["job_output"]["count"] == 1
    assert report["usage"]["job_output"]["count"] == 0


def test_a_round_that_freed_bytes_but_removed_nothing_says_where(
    client: TestClient, engine: Engine
) -> None:
    """Issue 27: "freed 648 KiB" next to "removed: nothing" read as a contradiction; a repack
    frees bytes while removing no file, and the row says so."""
    from datetime import UTC, datetime

    from sqlmodel import Session

    from stackbot.db.models import MaintenanceRun

    with Session(engine) as session:
        session.add(
            MaintenanceRun(
                trigger="schedule",
                finished_at=datetime.now(UTC),
                freed={"mirrors": 663552, "job_output": 0},
                summary={"run_refs_removed": 0, "job_dirs_removed": 0},
            )
        )
        session.commit()
    row = _text(client.get("/maintenance").text).split("scheduled")[1]
    assert "no files removed ; freed in git mirrors 648.0 KiB" in row, row
    assert client.get("/api/maintenance").json()["rounds"][0]["freed_in"] == [
        ["git mirrors", 663552]
    ]
