"""Dashboard pages and the JSON API over a seeded database (SQLite and PostgreSQL)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from stackbot.db.models import Approval, DependencyEdge, PullRequest, Repository
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
    assert "parent not found" in html and "missing_parent" not in _text(html)  # data-kind keeps it
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
    seed_series(engine, prs=4)
    with Session(engine) as session:
        approval = session.exec(select(Approval).where(Approval.pr_number == 8034)).one()
        approval.kind, approval.vetter = "trusted", "bob"
        session.add(approval)
        session.commit()
    series_run = client.get("/api/series/6307").json()["series_run"]["id"]
    left_out = _text(client.get("/pulls/8035").text)
    assert (
        f"In series #6307 's latest run ( run {series_run} ): this PR was left out: it "
        "conflicts with #8034"
    ) in left_out
    assert f'href="/runs/{series_run}"' in client.get("/pulls/8035").text
    assert "No jobs yet" not in left_out and "No jobs: its stack did not merge" in left_out
    trusted = _text(client.get("/pulls/8034").text)
    assert "trusted author bob: tested without waiting for a vetter" in trusted
    assert "approved by bob" not in trusted and "trusted " + "1" not in trusted
    assert "depends_on" not in left_out and "“Depends on”" in left_out
    waiting = _text(client.get("/pulls/8036").text)
    assert "waiting for a vetter to comment /ok to test" in waiting


def test_stack_list_draws_each_pr_under_what_it_depends_on(
    client: TestClient, engine: Engine
) -> None:
    """#8037 depends on #8035 only: it is drawn right under #8035's subtree, never indented
    under #8036 (a sibling that also depends on #8034) as a depth-sorted list would."""
    seed_series(engine, prs=4)
    with Session(engine) as session:
        for edge in session.exec(
            select(DependencyEdge).where(col(DependencyEdge.child).in_([8036, 8037]))
        ).all():
            session.delete(edge)
        repo_id = session.exec(select(Repository.id)).one()
        session.add(DependencyEdge(repo_id=repo_id, child=8036, parent=8034, source="depends_on"))
        session.add(DependencyEdge(repo_id=repo_id, child=8037, parent=8035, source="depends_on"))
        session.commit()
    html = client.get("/series/6307").text
    graph = html.split('id="graph"')[1].split('class="legend')[0]
    drawn = re.findall(r'class="node depth-(\d) [^"]*" role="listitem" data-pr="(\d+)"', graph)
    assert [(int(n), int(d)) for d, n in drawn] == [(8034, 0), (8035, 1), (8037, 2), (8036, 1)]


def test_a_failed_jobs_log_opens_at_its_failing_lines(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    """The log view numbers its lines, highlights the failing ones and lists them at the top
    (the verdicts' `log: /jobs/N#log` lands there, as Prow's Spyglass does)."""
    seed_series(engine, prs=2, log_dir=tmp_path / "jobs")
    failed = [j for j in client.get("/api/jobs").json()["finished"] if j["status"] == "failed"]
    pages = [client.get(f"/jobs/{job['id']}").text for job in failed]
    html = next(page for page in pages if 'id="log"' in page)  # main's baselines keep no log
    highlighted = re.findall(r'<span class="log-line failing" id="L(\d+)">([^<]*)', html)
    assert [text.split(" - ")[0] for _, text in highlighted] == [
        "FAILED tests/unit_tests/test_amax_reduction_group.py::test_amax_group"
    ]
    first = highlighted[0][0]
    assert f'data-first-failure="L{first}"' in html
    assert f'<a href="#L{first}">line {first}</a>' in html
    assert "[runner] tests: 0 test results" in html  # "0 … results" is not a failure


def test_pages_say_things_in_words(client: TestClient, engine: Engine, tmp_path: Path) -> None:
    """Issue 27's page-side jargon: the index names its problem count (never a bare `0` next to
    a red run), a job page lists its tree's PRs once, a PR's own test set reads as such."""
    seed_series(engine, prs=3, log_dir=tmp_path / "jobs")
    index = _text(client.get("/").text)
    assert "dependency problems" in index and "1 problem" in index
    series_job = next(
        job
        for job in client.get("/api/jobs").json()["finished"]
        if job["kind"] == "integration" and job["status"] == "failed"
    )
    page = html.unescape(_text(client.get(f"/jobs/{series_job['id']}").text))
    tested = page.split("Tested ")[1].split(" integration job")[0]
    assert re.fullmatch(r"the tree of (#\d+'s stack|series #6307): #8034(, #\d+)*", tested), tested
    from stackbot.web.dashboard import TEMPLATES

    assert TEMPLATES.env.filters["set_name"]("own:8034") == "#8034's own test files"
    # the tree's batched job of every PR's own files
    assert TEMPLATES.env.filters["set_name"]("own 2x4") == "own test files 2x4"
    assert TEMPLATES.env.filters["set_name"]("owner 1x4") == "owner 1x4"


def test_a_page_the_browser_holds_is_answered_304_until_it_changes(
    client: TestClient, engine: Engine
) -> None:
    """Live updates ask "has this page changed?" (If-None-Match): a write elsewhere moves the
    change token but not the page (304, no body); a write the page shows gives 200 and a new
    ETag."""
    seed_series(engine, prs=4)
    first = client.get("/series/6307")
    etag = first.headers["etag"]
    assert first.status_code == 200 and first.headers["cache-control"] == "no-cache"
    before = client.get("/api/changes").json()["token"]
    with Session(engine) as session:
        session.add(Repository(full_name="someone/else", clone_url="file:///nowhere"))
        session.commit()
    assert client.get("/api/changes").json()["token"] != before  # the poll sees a change
    unchanged = client.get("/series/6307", headers={"If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert unchanged.headers["etag"] == etag
    with Session(engine) as session:
        pull = session.exec(select(PullRequest).where(PullRequest.number == 8035)).one()
        pull.title = "A title this page shows"
        session.add(pull)
        session.commit()
    changed = client.get("/series/6307", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and "A title this page shows" in changed.text
    assert changed.headers["etag"] != etag
    assert client.get("/jobs", headers={"If-None-Match": '"stale"'}).status_code == 200
    jobs_etag = client.get("/jobs").headers["etag"]
    assert client.get("/jobs", headers={"If-None-Match": jobs_etag}).status_code == 304


def test_a_pr_page_says_why_it_has_no_jobs_and_links_the_series_run(
    client: TestClient, engine: Engine
) -> None:
    """#8035's stack conflicts: its page says there is no tree to test (not "No jobs yet") and
    links the series run with its outcome there, not only its own stack run."""
    seeded = seed_series(engine, prs=4)
    page = _text(client.get("/pulls/8035").text)
    assert "No jobs: its stack did not merge" in page
    assert "No jobs yet" not in page
    line = page.split("'s latest run")[1].split("Integration runs")[0]
    assert f"run {seeded['series_run_id']}" in line
