"""The GitHub stand-in and the real ingest pipeline around it."""

from __future__ import annotations

from tests.support.standin import *  # noqa: F403  (fixtures)
from tests.sync.pipeline import bot_settings, pipeline  # noqa: F401  (fixtures)
