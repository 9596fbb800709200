"""The GitHub stand-in and the real ingest pipeline around it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from stackbot.adapters.github import pacing
from stackbot.adapters.github.pacing import WritePacer
from stackbot.config import Settings
from tests.support.standin import *  # noqa: F403  (fixtures)
from tests.support.standin import StandinWorld
from tests.sync.pipeline import Pipeline, make_pipeline, pipeline_settings


@pytest.fixture
def bot_settings(standin: StandinWorld, tmp_path: Path) -> Settings:
    return pipeline_settings(standin, tmp_path)


@pytest.fixture
def pipeline(
    standin: StandinWorld, bot_settings: Settings, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Pipeline]:
    # The handlers' clients share the process-wide write pacer (80 writes a minute, 500 an
    # hour, GitHub's limits); a test session writes more than that to the stand-in, which has
    # no such limit, so these tests give the process a pacer with room.
    monkeypatch.setattr(pacing, "_SHARED", WritePacer(per_minute=10**6, per_hour=10**6))
    yield from make_pipeline(standin, bot_settings, engine)
