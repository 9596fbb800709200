"""A simulated series (benchmarks/plan_sim.py) with its ``series`` row, and a dashboard client
over it: what the series' GPU-hours and flaky-tests pages are tested on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from benchmarks.plan_sim import SERIES, Simulation
from stackbot.config import Settings
from stackbot.db.engine import session_scope
from stackbot.db.models import Series
from stackbot.web import dashboard


def series_sim(engine: Engine, settings: Settings, policy: str, **kwargs: Any) -> Simulation:
    """A Simulation under ``policy`` whose series (#6307) the dashboard knows."""
    settings = settings.model_copy(update={"test_plan_policy": policy})
    sim = Simulation(engine, settings, **kwargs)
    with session_scope(engine) as session:
        session.add(Series(repo_id=sim.repo_id, key=SERIES, order=list(range(1, sim.prs + 1))))
    return sim


@contextmanager
def sim_client(sim: Simulation) -> Iterator[TestClient]:
    """The dashboard and API over the simulation's database and settings."""
    app = FastAPI()
    app.state.engine = sim.engine
    app.state.settings = sim.settings
    dashboard.install(app)
    with TestClient(app) as client:
        yield client
