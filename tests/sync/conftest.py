"""The GitHub stand-in and the real ingest pipeline around it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from stackbot.config import Settings
from tests.support.standin import *  # noqa: F403  (fixtures)
from tests.support.standin import StandinWorld
from tests.sync.pipeline import Pipeline, make_pipeline, pipeline_settings


@pytest.fixture
def bot_settings(standin: StandinWorld, tmp_path: Path) -> Settings:
    return pipeline_settings(standin, tmp_path)


@pytest.fixture
def pipeline(standin: StandinWorld, bot_settings: Settings, engine: Engine) -> Iterator[Pipeline]:
    yield from make_pipeline(standin, bot_settings, engine)
