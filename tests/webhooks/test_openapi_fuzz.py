"""Schemathesis over ``/openapi.json``: every documented operation, with inputs generated from
its schema (in range and, for path ids, out of it), never answers a 5xx, on SQLite and
PostgreSQL. The app runs in-process (ASGI) over a database holding a seeded series, so
lookups find rows as well as miss them."""

from __future__ import annotations

from pathlib import Path

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from sqlalchemy import Engine

from tests.support.dashboard_data import seed_series

EXAMPLES_PER_OPERATION = 25


def test_no_documented_operation_answers_a_5xx(
    app: FastAPI, engine: Engine, tmp_path: Path
) -> None:
    seed_series(engine, prs=3, log_dir=tmp_path / "jobs")
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/api/jobs/{job_id}", "/webhooks/github"}
    for operation in operations:

        @given(case=st.one_of([operation.as_strategy(mode) for mode in GenerationMode]))
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def call(case: schemathesis.Case) -> None:
            response = case.call()
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {response.status_code}")

        call()
    assert failures == []
