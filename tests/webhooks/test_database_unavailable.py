"""While the database cannot be reached (PostgreSQL restarting, a SQLite file gone), every
answer that needs it is 503 with Retry-After (the sender or browser tries again), never 500."""

from __future__ import annotations

import json
import shutil

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from tests.support import postgres, signing

URL = "/webhooks/github"


def _make_unreachable(engine: Engine) -> None:
    """New connections fail and pooled ones are gone, as while the server restarts."""
    url = engine.url
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        shutil.move(url.database, url.database + ".away")
        shutil.os.mkdir(url.database)  # type: ignore[attr-defined]
    else:
        with psycopg.connect(postgres.ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{url.database}" WITH ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (url.database,),
            )
    engine.dispose()


def test_a_delivery_while_the_database_is_down_is_503_with_retry_after(
    client: TestClient, engine: Engine
) -> None:
    _make_unreachable(engine)
    body = json.dumps({"zen": "down", "hook_id": 1}).encode()
    response = client.post(URL, content=body, headers=signing.headers("ping", body))
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) > 0
    assert "redeliver" in response.json()["error"]


@pytest.mark.parametrize("path", ["/api/series", "/api/jobs", "/api/tasks", "/"])
def test_the_dashboard_and_api_answer_503_while_the_database_is_down(
    client: TestClient, engine: Engine, path: str
) -> None:
    _make_unreachable(engine)
    response = client.get(path, headers={"accept": "text/html"})
    assert response.status_code == 503, response.text[:500]
    assert int(response.headers["retry-after"]) > 0
    assert "database" in response.text.lower()
    assert "password" not in response.text.lower() and "select" not in response.text.lower()
