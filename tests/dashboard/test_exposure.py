"""What the dashboard shows whom: no server paths or raw task errors, security headers, HTML
error pages for browsers, and the access setting (open, behind a proxy, off)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, select

from stackbot.config import load_settings
from stackbot.db.models import Job, Task
from stackbot.web.app import create_app
from tests.support.dashboard_data import seed_series

HTML = {"accept": "text/html,application/xhtml+xml"}


def _client(engine: Engine, tmp_path: Path, **settings: object) -> TestClient:
    app = create_app(load_settings(dev=True, data_dir=tmp_path / "data", **settings), engine=engine)
    return TestClient(app)


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[TestClient]:
    with _client(engine, tmp_path) as test_client:
        yield test_client


def test_pages_and_api_show_no_server_paths(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    seed_series(engine, prs=2, log_dir=tmp_path / "secret-jobs")
    with Session(engine) as session:
        job = session.exec(select(Job).where(Job.out_dir.is_not(None))).first()  # type: ignore[union-attr]
        assert job is not None and job.id is not None and job.out_dir
        job_id, out_dir = job.id, job.out_dir
    for url in (f"/api/jobs/{job_id}", f"/jobs/{job_id}", "/api/jobs", "/jobs", "/api/series/6307"):
        answer = client.get(url)
        assert answer.status_code == 200, url
        assert str(tmp_path) not in answer.text and "secret-jobs" not in answer.text, url
    assert out_dir.startswith(str(tmp_path))  # the log is still read from there
    assert client.get(f"/jobs/{job_id}").text.count('class="log"') == 1


def test_dead_tasks_show_the_kind_of_error_not_its_text(client: TestClient, engine: Engine) -> None:
    leaked = (
        'OperationalError: (psycopg.errors.UndefinedTable) relation "jobs" does not exist '
        "[SQL: SELECT jobs.out_dir FROM jobs WHERE jobs.id = %(id)s] "
        "[parameters: {'id': 7}] /srv/stackbot/data/mirrors/x.git pid 4242"
    )
    with Session(engine) as session:
        session.add(
            Task(kind="integrate", payload={}, status="dead", attempts=6, last_error=leaked)
        )
        session.commit()
    for url in ("/tasks", "/api/tasks"):
        text = client.get(url).text
        assert "OperationalError" in text, url
        assert "worker&#39;s log" in text or "worker's log" in text, url
        for secret in ("SELECT", "parameters", "/srv/stackbot", "4242", "UndefinedTable"):
            assert secret not in text, (url, secret)


def test_every_answer_carries_the_security_headers(client: TestClient) -> None:
    for url in ("/", "/api/series", "/healthz", "/jobs/123"):
        headers = client.get(url).headers
        assert "script-src 'self'" in headers["content-security-policy"], url
        assert "frame-ancestors 'none'" in headers["content-security-policy"], url
        assert headers["x-content-type-options"] == "nosniff", url


def test_browsers_get_html_error_pages_and_programs_json(client: TestClient) -> None:
    page = client.get("/jobs/999999", headers=HTML)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "404" in page.text and "no job 999999" in page.text
    invalid = client.get("/jobs/0", headers=HTML)
    assert invalid.status_code == 422 and invalid.headers["content-type"].startswith("text/html")
    api = client.get("/api/jobs/999999", headers=HTML)  # the API stays JSON whatever is asked
    assert api.status_code == 404 and api.json() == {"detail": "no job 999999"}
    assert client.get("/api/jobs/0").status_code == 422


def test_behind_a_proxy_only_requests_it_signed_in_get_through(
    engine: Engine, tmp_path: Path
) -> None:
    seed_series(engine, prs=2)
    with _client(engine, tmp_path, dashboard_access="proxy") as client:
        for url in ("/", "/series/6307", "/api/series", "/jobs", "/metrics"):
            assert client.get(url).status_code == 401, url
            signed_in = client.get(url, headers={"X-Forwarded-User": "alice"})
            assert signed_in.status_code == 200, url
        assert client.get("/", headers=HTML).headers["content-type"].startswith("text/html")
        assert client.get("/healthz").status_code == 200
        # The webhook is guarded by its signature, not by the proxy.
        delivery = client.post(
            "/webhooks/github", content=b"{}", headers={"X-GitHub-Event": "ping"}
        )
        assert "proxy" not in delivery.text


def test_turned_off_the_dashboard_and_api_are_not_there(engine: Engine, tmp_path: Path) -> None:
    with _client(engine, tmp_path, dashboard_access="off") as client:
        for url in ("/", "/api/series", "/jobs/1", "/tasks"):
            answer = client.get(url, headers={"X-Forwarded-User": "alice"})
            assert answer.status_code == 404, url
        assert client.get("/healthz").status_code == 200
