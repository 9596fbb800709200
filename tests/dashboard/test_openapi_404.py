"""The OpenAPI description declares the 404 of every route that looks one thing up (issue 29
point 7), and the 404 each answers is the one declared, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from stackbot.web import dashboard

MISSING = {
    "/api/pulls/{number}": "/api/pulls/4242",
    "/api/runs/{run_id}": "/api/runs/4242",
    "/api/jobs/{job_id}": "/api/jobs/4242",
    "/api/series/{slug}": "/api/series/no-such-series",
    "/api/series/{slug}/gpu": "/api/series/no-such-series/gpu",
    "/api/series/{slug}/flaky": "/api/series/no-such-series/flaky",
}


@pytest.fixture
def client(engine: Engine) -> Iterator[TestClient]:
    app = FastAPI()
    app.state.engine = engine
    dashboard.install(app)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_every_lookup_route_declares_the_404_it_answers(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    declared = {path: "404" in paths[path]["get"]["responses"] for path in MISSING}
    assert declared == dict.fromkeys(MISSING, True)
    for path, url in MISSING.items():
        schema = paths[path]["get"]["responses"]["404"]["content"]["application/json"]["schema"]
        assert schema["required"] == ["detail"]
        answer = client.get(url)
        assert answer.status_code == 404, (url, answer.text)
        assert isinstance(answer.json()["detail"], str) and answer.json()["detail"]
