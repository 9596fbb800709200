"""The jobs page's filters and what a job row says (issue 12 point 9), SQLite and PostgreSQL:
a PR keeps the jobs whose tree held it (its stacks and the series, not main's baselines), a
test set keeps that set's jobs, and the executor's nodes are named once each."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.web.readmodel import list_jobs
from stackbot.web.readmodel.jobs import node_names
from stackbot.web.readmodel.jobs import tested_by as what_jobs_tested
from stackbot.web.readmodel.summaries import JobSummary
from tests.support.dashboard_data import seed_series


def _shown(groups: dict[str, list[JobSummary]]) -> list[JobSummary]:
    return [job for name in ("running", "queued", "finished") for job in groups[name]]


def test_a_pr_filter_keeps_the_jobs_whose_tree_held_that_pr(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    seed_series(engine, prs=4, log_dir=tmp_path / "jobs")
    with Session(engine) as session:
        everything = _shown(list_jobs(session))
        only = _shown(list_jobs(session, pr=8034))
        tested = what_jobs_tested(session, only)
        baselines = [job for job in everything if job.kind == "baseline"]
    assert baselines and only and len(only) < len(everything)
    assert all(8034 in tested[job.id].prs for job in only)
    assert not any(job.kind == "baseline" for job in only)
    page = client.get("/jobs", params={"pr": 8034})
    assert page.status_code == 200
    assert "Jobs testing #8034" in page.text
    assert len(re.findall(r'<a href="/jobs/\d+">', page.text)) == len(only)


def test_a_test_set_filter_keeps_that_sets_jobs(client: TestClient, engine: Engine) -> None:
    seed_series(engine, prs=3)
    with Session(engine) as session:
        amax = _shown(list_jobs(session, test_set="amax-group"))
        both = _shown(list_jobs(session, pr=8035, test_set="blockwise-recipe"))
    assert amax and all(job.test_set == "amax-group" for job in amax)
    assert both and all(job.test_set == "blockwise-recipe" for job in both)
    page = client.get("/jobs", params={"test_set": "blockwise-recipe"})
    assert "· blockwise-recipe" in page.text and 'href="/jobs">all jobs' in page.text
    assert client.get("/jobs", params={"pr": 0}).status_code == 422


def test_the_nodes_the_executor_reported_are_named_once_each() -> None:
    assert node_names("vm, vm") == "vm ×2"
    assert node_names("gpu-a01,gpu-a02,gpu-a01") == "gpu-a01 ×2, gpu-a02"
    assert node_names(None) == "—"


def test_a_pr_tested_only_on_the_series_tree_shows_those_tests_in_its_row(
    client: TestClient, engine: Engine
) -> None:
    """Series-first testing: a PR whose own stack ran no jobs but which the series tree holds
    shows the series' tests in its row (its verdict counts them), not "no jobs"; a PR the
    series left out still says "no jobs"."""
    seed_series(engine, prs=3, jobs_per_pr=0, extra_jobs=3)
    html = client.get("/series/6307").text
    rows = dict(re.findall(r'<tr data-pr="(\d+)"[^>]*>(.*?)</tr>', html, re.S))
    assert 'href="#series-tests">series tree</a>' in rows["8034"]  # clean in the series run
    assert "amax-group 1x4" in rows["8034"] and "no jobs" not in rows["8034"]
    assert "no jobs" in rows["8035"] and "series tree" not in rows["8035"]  # left out
    assert 'id="series-tests"' in html


def test_a_pr_page_shows_the_series_tests_that_its_verdict_counts(
    client: TestClient, engine: Engine
) -> None:
    seed_series(engine, prs=3, jobs_per_pr=0, extra_jobs=3)
    held = client.get("/pulls/8034").text
    assert "Tests of the series tree that holds this PR" in held
    assert "No jobs of its own" in held and "amax-group 1x4" in held
    assert len(client.get("/api/pulls/8034").json()["series_tests"]) == 3
    left_out = client.get("/pulls/8035").text  # its series step conflicts
    assert "Tests of the series tree" not in left_out
    assert "No jobs yet" not in left_out  # it says why it has no jobs:
    assert "No jobs: its stack did not merge" in left_out
    assert client.get("/api/pulls/8035").json()["series_tests"] == []


def test_a_series_job_names_only_the_prs_its_tree_holds(client: TestClient, engine: Engine) -> None:
    """The series run left #8035 (conflict) and #8036 (its child) out: its jobs did not test
    them, so neither the job's "tested" line nor the PR filter says they did."""
    seed_series(engine, prs=4, jobs_per_pr=0, extra_jobs=2)
    with Session(engine) as session:
        jobs = _shown(list_jobs(session))
        tested = what_jobs_tested(session, jobs)
    series_jobs = [tested[job.id] for job in jobs if job.kind != "baseline"]
    assert len(series_jobs) == 2
    for job in series_jobs:
        assert job.prs == (8034, 8037) and job.text == "series #6307 (#8034, #8037)"
    with Session(engine) as session:
        assert _shown(list_jobs(session, pr=8035)) == []
    page = client.get("/jobs").text
    assert "#8035" not in page and "series #6307 (#8034, #8037)" in page
