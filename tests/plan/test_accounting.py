"""GPU accounting (issue 13 point 5) on both databases: each finished job records nodes x GPUs
per node x wall seconds through job_execution.record_result, reused copies cost 0 and count as
saved, and the store's sums agree with the timing executor's own account (bench_test_plan's gpu_hours)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, select

from benchmarks.plan_sim import SERIES, Injected, Simulation
from stackbot.config import Settings
from stackbot.db import accounting_store
from stackbot.db.engine import session_scope
from stackbot.db.models import Job, Series
from stackbot.domain import accounting
from stackbot.web import dashboard
from stackbot.web.readmodel.series import series_slug


def test_gpu_seconds_is_nodes_times_gpus_times_wall_time() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert accounting.gpu_seconds("2x4", start, start + timedelta(seconds=90)) == 720.0
    assert accounting.gpu_seconds("1x4", start.replace(tzinfo=None), start + timedelta(60)) > 0
    assert accounting.gpu_seconds("1x4", None, start) == 0.0
    with pytest.raises(ValueError, match="'four'"):
        accounting.gpus_of_shape("four")


def test_store_sums_agree_with_the_timing_executor(engine: Engine, settings: Settings) -> None:
    settings = settings.model_copy(update={"test_plan_policy": "every-stack"})
    sim = Simulation(engine, settings, prs=4, injected=Injected(fail_at=[2], flaky_at=[3]))
    with session_scope(engine) as session:
        session.add(Series(repo_id=sim.repo_id, key=SERIES))
    sim.push()
    sim.drive()
    sim.use_policy("series-first")
    sim.push(4)  # its bisection reuses the stack trees the first push tested
    sim.drive()
    with Session(engine) as session:
        jobs = list(session.exec(select(Job)))
        total = accounting_store.all_gpu_hours(session)
        series = accounting_store.series_gpu_hours(session, series_key=SERIES)
    finished = [j for j in jobs if j.reused_from_job_id is None]
    assert finished and all(j.gpu_seconds is not None for j in finished)
    copies = [j for j in jobs if j.reused_from_job_id is not None]
    assert copies and all(j.gpu_seconds == 0.0 for j in copies)
    assert total.total == pytest.approx(sim.gpu_hours(), rel=1e-9)
    assert total.total > 0
    assert {"tree", "confirm", "baseline"} <= set(total.by_purpose)  # bisection: all reused
    assert series.total + total.by_purpose["baseline"] == pytest.approx(total.total)
    by_id = {j.id: j for j in jobs}
    saved = sum(by_id[j.reused_from_job_id].gpu_seconds or 0.0 for j in copies) / 3600
    assert total.saved_by_reuse == pytest.approx(saved) and saved > 0

    app = FastAPI()
    app.state.engine = engine
    dashboard.install(app)
    with TestClient(app) as client:
        body = client.get(f"/api/series/{series_slug(SERIES)}/gpu").json()
        assert client.get("/api/series/a%00b/gpu").status_code == 404
        assert client.get("/api/series/6308/gpu").status_code == 404
    assert body["gpu_hours"] == pytest.approx(series.total, abs=1e-3)
    assert body["saved_by_reuse"] == pytest.approx(series.saved_by_reuse, abs=1e-3)
    assert set(body["by_purpose"]) == set(series.by_purpose)
    assert sum(p["gpu_hours"] for p in body["by_push"]) == pytest.approx(series.total, abs=1e-2)
    parts = body["shared"]["gpu_hours"] + sum(p["gpu_hours"] for p in body["by_pr"].values())
    assert parts == pytest.approx(series.total, abs=1e-2)
