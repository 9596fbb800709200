"""Dashboard pages and the JSON API over a seeded database (SQLite and PostgreSQL)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from tests.support.dashboard_data import seed_series


def _text(html: str) -> str:
    """The page's visible text with tags removed and whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" · ", " · ")


def test_index_lists_the_series(client: TestClient, engine: Engine) -> None:
    seed_series(engine, prs=4)
    page = client.get("/")
    assert page.status_code == 200
    assert 'href="/series/6307"' in page.text
    assert "NVIDIA/Megatron-LM" in page.text
    api = client.get("/api/series").json()
    assert api[0]["key"] == "#6307"
    assert api[0]["pr_count"] == 4
    assert api[0]["latest_run_status"] == "conflict"


def test_series_page_draws_the_graph_and_tables(client: TestClient, engine: Engine) -> None:
    seed_series(engine, prs=5)
    page = client.get("/series/6307")
    assert page.status_code == 200
    html = page.text
    assert html.count('class="node ') == 5
    assert html.count('class="edge"') == 4
    assert 'data-source="depends_on"' in html and 'data-source="base_branch"' in html
    assert 'data-pr="8035" data-state="conflict"' in html  # the second PR's stack conflicts
    assert 'data-pr="8038" data-state="superseded"' in html
    assert "megatron/core/transformer/layer.py" in html
    assert "depends on #8035, which conflicts" in html
    assert "parent not found" in html and "missing_parent" not in html
    assert "main: 14 passed, 9 failed" in _text(html)
    data = client.get("/api/series/6307").json()
    assert [p["number"] for p in data["pulls"]] == [8034, 8035, 8036, 8037, 8038]
    assert data["pulls"][2]["approval"] is None
    assert data["pulls"][0]["approval"] == "carol"
    assert {e["source"] for e in data["edges"]} == {"depends_on", "base_branch"}


def test_pull_run_and_job_pages(client: TestClient, engine: Engine, tmp_path: Path) -> None:
    seeded = seed_series(engine, prs=3, log_dir=tmp_path / "jobs")
    pull = client.get("/pulls/8036")
    assert pull.status_code == 200
    assert "#8035" in pull.text  # its parent
    run_id = client.get("/api/pulls/8036").json()["runs"][0]["id"]
    run = client.get(f"/runs/{run_id}")
    assert run.status_code == 200
    assert "parallel_state.get_tensor_model_parallel_group" in run.text  # a stale entry
    jobs = client.get("/jobs")
    assert jobs.status_code == 200
    assert "[runner] passed" in jobs.text  # log tail
    job_id = client.get("/api/jobs").json()["finished"][-1]["id"]
    job = client.get(f"/jobs/{job_id}")
    assert job.status_code == 200
    assert "[runner] launching" in job.text
    assert client.get(f"/api/jobs/{job_id}").json()["log"].startswith("[runner]")
    assert seeded["series_run_id"]


@pytest.mark.parametrize(
    "path",
    [
        "/series/9999",
        "/pulls/1",
        "/runs/424242",
        "/jobs/424242",
        "/api/series/9999",
        "/api/pulls/1",
        "/api/runs/424242",
        "/api/jobs/424242",
    ],
)
def test_missing_things_are_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404


def test_change_token_moves_when_data_changes(client: TestClient, engine: Engine) -> None:
    before = client.get("/api/changes").json()["token"]
    seed_series(engine, prs=2)
    assert client.get("/api/changes").json()["token"] != before


def test_no_external_assets(client: TestClient, engine: Engine) -> None:
    seed_series(engine, prs=3)
    for path in ("/", "/series/6307", "/pulls/8034", "/jobs", "/tasks"):
        html = client.get(path).text
        assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert "https://" not in html
    assert client.get("/static/style.css").status_code == 200
    assert client.get("/static/live.js").status_code == 200


def test_a_pulls_page_says_in_words_what_it_waits_for_and_links_the_series_run(
    client: TestClient, engine: Engine
) -> None:
    """Issue 27: a PR left out of the series run links that run and says why; a trusted author
    is not "approved by" anyone; edge sources are words, not `depends_on`."""
    from sqlmodel import Session, select

    from stackbot.db.models import Approval

    seed_series(engine, prs=4)
    with Session(engine) as session:
        approval = session.exec(select(Approval).where(Approval.pr_number == 8034)).one()
        approval.kind, approval.vetter = "trusted", "bob"
        session.add(approval)
        session.commit()
    series_run = client.get("/api/series/6307").json()["series_run"]["id"]
    left_out = _text(client.get("/pulls/8035").text)
    assert f"Series #6307 · run {series_run} : this PR was left out: it conflicts with #8034" in (
        left_out
    )
    assert f'href="/runs/{series_run}"' in client.get("/pulls/8035").text
    assert "No jobs yet" not in left_out and "nothing is tested while this PR is in conflict" in (
        left_out
    )
    trusted = _text(client.get("/pulls/8034").text)
    assert "trusted author bob: tested without waiting for a vetter" in trusted
    assert "approved by bob" not in trusted and "trusted " + "1" not in trusted
    assert "depends_on" not in left_out and "“Depends on”" in left_out
    waiting = _text(client.get("/pulls/8036").text)
    assert "waiting for a vetter to comment /ok to test" in waiting
