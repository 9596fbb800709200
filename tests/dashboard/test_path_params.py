"""Path parameters no row can match, on SQLite and PostgreSQL, never a 500: integers outside the
integer columns' range are refused (422; ids and PR numbers are 1 .. 2**31 - 1, PostgreSQL's
INTEGER), and a series slug holding a NUL finds no series (404)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from stackbot.web import dashboard

ROUTES = ["/api/jobs", "/api/runs", "/api/pulls", "/jobs", "/runs", "/pulls"]


@pytest.fixture
def client(engine: Engine) -> Iterator[TestClient]:
    app = FastAPI()
    app.state.engine = engine
    dashboard.install(app)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_an_id_no_row_can_have_is_refused(client: TestClient) -> None:
    answers = {
        f"{route}/{value}": client.get(f"{route}/{value}").status_code
        for route in ROUTES
        for value in ["2147483648", "99999999999999999999", "0", "-1"]
    }
    assert answers == dict.fromkeys(answers, 422)


def test_the_largest_id_is_a_404(client: TestClient) -> None:
    answers = {route: client.get(f"{route}/2147483647").status_code for route in ROUTES}
    assert answers == dict.fromkeys(ROUTES, 404)


def test_the_schema_documents_the_range(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path, name in [
        ("/api/jobs/{job_id}", "job_id"),
        ("/api/runs/{run_id}", "run_id"),
        ("/api/pulls/{number}", "number"),
    ]:
        (parameter,) = [p for p in paths[path]["get"]["parameters"] if p["name"] == name]
        assert parameter["schema"]["minimum"] == 1
        assert parameter["schema"]["maximum"] == 2**31 - 1


def test_a_series_slug_with_a_nul_is_a_404(client: TestClient) -> None:
    paths = ["/api/series/a%00b", "/series/a%00b", "/series/root-%00", "/api/series/%00"]
    answers = {path: client.get(path).status_code for path in paths}
    assert answers == dict.fromkeys(paths, 404)
