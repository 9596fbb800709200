"""A series' flaky tests (issue 13 point 3) on SQLite and PostgreSQL: each test the real planner
classed ``flaky`` (failed on a run's tree, passed on the rerun of the same tree) is listed per
test across runs and pushes, with the failing and the passing job of each time; an event that
runs share through reused results is counted once; a fixed number of queries whatever the
series' size; an unknown series is a 404."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, event
from sqlmodel import Session, select

from benchmarks.plan_sim import Injected
from stackbot.config import Settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine
from stackbot.db.models import Job, TestResult
from tests.support import postgres
from tests.support.series_sim import series_sim, sim_client

FLAKY = "tests/unit_tests/test_layer_3.py::test_flaky_3"


def _outcome(engine: Engine, job_id: int, nodeid: str) -> str:
    with Session(engine) as session:
        return session.exec(
            select(TestResult.outcome).where(
                TestResult.job_id == job_id, TestResult.nodeid == nodeid
            )
        ).one()


def test_flaky_tests_are_listed_per_test_across_pushes_with_both_jobs(
    engine: Engine, settings: Settings
) -> None:
    sim = series_sim(engine, settings, "series-first", prs=4, injected=Injected(flaky_at=[3]))
    first = sim.push()
    sim.drive()
    second = sim.push(4)  # a new series tree that still holds #3: flaky there again
    sim.drive()
    with sim_client(sim) as client:
        body = client.get("/api/series/6307/flaky").json()
        html = client.get("/series/6307/flaky").text
        series_page = client.get("/series/6307").text
    assert 'href="/series/6307/flaky"' in series_page
    [test] = body["tests"]
    assert test["nodeid"] == FLAKY and test["times"] == 2 and test["configs"] == ["amax-group 1x4"]
    assert len(set(test["trees"])) == 2
    for flaky, run_id in zip(test["events"], (first.series_run, second.series_run), strict=True):
        assert flaky["reported_by"] == [{"run": run_id, "kind": "series", "target_pr": None}]
        assert flaky["failed_run"] == flaky["passed_run"] == run_id
        failed, passed = flaky["failed_job"], flaky["passed_job"]
        assert _outcome(engine, failed, FLAKY) == "failed"
        assert _outcome(engine, passed, FLAKY) == "passed"
        with Session(engine) as session:
            jobs = [session.get(Job, failed), session.get(Job, passed)]
        assert [j.purpose for j in jobs if j] == ["tree", "confirm"]
        assert {j.tree_sha for j in jobs if j} == {flaky["tree"]}
        assert f'<a href="/jobs/{failed}">job {failed}</a>' in html
        assert f'<a href="/jobs/{passed}">job {passed}</a>' in html
        assert f'<a href="/runs/{run_id}">run {run_id}</a>' in html
    assert f"<code>{FLAKY}</code>" in html and "<strong>2</strong>" in html


def test_a_flaky_event_reused_by_another_run_is_counted_once(
    engine: Engine, settings: Settings
) -> None:
    """Under every-stack, #4's stack tree is the series tree: its findings point at reused
    copies of the series' jobs, so that event is listed once, reported by both runs, with the
    jobs that ran."""
    sim = series_sim(engine, settings, "every-stack", prs=4, injected=Injected(flaky_at=[3]))
    pushed = sim.push()
    sim.drive()
    with sim_client(sim) as client:
        [test] = client.get("/api/series/6307/flaky").json()["tests"]
    assert test["times"] == 2  # the series tree (= #4's stack) and #3's stack
    reporters = sorted(sorted(r["run"] for r in e["reported_by"]) for e in test["events"])
    assert reporters == sorted(
        [sorted([pushed.series_run, pushed.stack_runs[4]]), [pushed.stack_runs[3]]]
    )
    with Session(engine) as session:
        for flaky in test["events"]:
            for key in ("failed_job", "passed_job"):
                job = session.get(Job, flaky[key])
                assert job is not None and job.reused_from_job_id is None
            assert _outcome(engine, flaky["failed_job"], FLAKY) == "failed"
            assert _outcome(engine, flaky["passed_job"], FLAKY) == "passed"


def test_unknown_series_is_a_404_and_a_series_without_flaky_tests_says_so(
    engine: Engine, settings: Settings
) -> None:
    sim = series_sim(engine, settings, "series-first", prs=2)
    sim.push()
    sim.drive()
    with sim_client(sim) as client:
        for path in ("/series/{}/flaky", "/api/series/{}/flaky"):
            for slug in ("9999", "a%00b", "root-1"):
                assert client.get(path.format(slug)).status_code == 404, path.format(slug)
        assert client.get("/api/series/6307/flaky").json()["tests"] == []
        assert "No test of this series has been flaky" in client.get("/series/6307/flaky").text


PAGES = ("/series/6307/flaky", "/api/series/6307/flaky")


def _queries(database_url: str, settings: Settings, prs: int) -> dict[str, int]:
    migrate.upgrade(database_url)
    engine = make_engine(database_url)
    try:
        # Every PR from #2 up holds the flaky test: every stack and the series find it.
        injected = Injected(flaky_at=[2])
        sim = series_sim(engine, settings, "every-stack", prs=prs, injected=injected)
        sim.push()
        sim.drive()
        seen: list[str] = []

        def record(*args: object) -> None:
            seen.append(str(args[2]))

        counts = {}
        with sim_client(sim) as client:
            [test] = client.get("/api/series/6307/flaky").json()["tests"]
            assert test["times"] == prs - 1  # #2..#N's stacks; the series tree is #N's
            for path in PAGES:
                assert client.get(path).status_code == 200
                seen.clear()
                event.listen(engine, "before_cursor_execute", record)
                try:
                    assert client.get(path).status_code == 200
                finally:
                    event.remove(engine, "before_cursor_execute", record)
                counts[path] = len(seen)
        return counts
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_each_page_reads_a_fixed_number_of_queries(
    backend: str, settings: Settings, tmp_path: Path
) -> None:
    found = {}
    for prs in (3, 7):
        with postgres.empty_database(backend, tmp_path, str(prs)) as url:
            found[prs] = _queries(url, settings, prs)
    assert found[3] == found[7], found
    assert found[3]["/api/series/6307/flaky"] <= 5
