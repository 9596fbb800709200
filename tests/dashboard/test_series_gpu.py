"""A series' GPU-hours page (issue 13 point 5) on SQLite and PostgreSQL, over jobs run by the
real planner and queue with a timing executor (benchmarks/plan_sim.py): amax-group 1x4 takes
600 s, amax-group 2x4 900 s, blockwise-recipe 1x4 300 s, so one tree costs 4x600 + 8x900 + 4x300
GPU-seconds = 3.0 GPU-hours, 2.0 of them the 2x4 job. Each page reads a fixed number of queries
whatever the series' size; an unknown series is a 404."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, event
from sqlmodel import Session, col, select

from benchmarks.plan_sim import SERIES, Injected, Simulation
from gpu_jobs.result import Counts
from gpu_jobs.result import TestResult as ResultTest
from gpu_jobs.spec import JobResult
from stackbot.config import Settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine, session_scope
from stackbot.db.models import IntegrationRun, Job
from stackbot.services import job_execution
from tests.support import postgres
from tests.support.series_sim import series_sim, sim_client


def _add_own_job(sim: Simulation, run_id: int, pr: int, seconds: float) -> int:
    """A job of PR ``pr``'s own test files on the run's tree (``own:N``, 1x4), finished
    through the service's record_result with the given wall time."""
    with session_scope(sim.engine) as session:
        run = session.get(IntegrationRun, run_id)
        assert run is not None and run.final_tree and run.final_commit
        job = Job(
            repo_id=sim.repo_id,
            integration_run_id=run_id,
            test_set=f"own:{pr}",
            shape="1x4",
            tree_sha=run.final_tree,
            commit_sha=run.final_commit,
            config_hash=f"own-{pr}",
            status="running",
            series_key=SERIES,
            targets=[f"tests/unit_tests/test_layer_{pr}.py"],
        )
        session.add(job)
        session.flush()
        assert job.id is not None
        job_id = job.id
    start = datetime(2026, 1, 2, tzinfo=UTC)
    nodeid = f"tests/unit_tests/test_layer_{pr}.py::test_own"
    job_execution.record_result(
        sim.engine,
        job_id,
        JobResult(
            str(job_id),
            "passed",
            "",
            counts=Counts.of_tests({nodeid: "passed"}),
            tests=(ResultTest(nodeid, "passed", 1.0, {0: "passed"}),),
            test_set=f"own:{pr}",
            shape="1x4",
            nodes=("gpu-07",),
            started_at=start.isoformat(),
            finished_at=(start + timedelta(seconds=seconds)).isoformat(),
        ),
        node=None,
    )
    return job_id


def test_series_first_gpu_hours_per_push_and_per_pr_and_the_policy_saving(
    engine: Engine, settings: Settings
) -> None:
    sim = series_sim(engine, settings, "series-first", prs=4)
    first = sim.push()
    sim.drive()
    second = sim.push(2)  # a new head of #2: a new series tree and stacks #2..#4
    sim.drive()
    own = _add_own_job(sim, second.series_run, 3, 450.0)  # 4 GPUs x 450 s = 0.5 GPU-h

    with Session(engine) as session:
        two_by_four = session.exec(
            select(Job).where(
                Job.integration_run_id == first.series_run,
                Job.test_set == "amax-group",
                Job.shape == "2x4",
            )
        ).one()
        assert two_by_four.started_at is not None and two_by_four.finished_at is not None
        wall = two_by_four.finished_at - two_by_four.started_at
        assert wall == timedelta(seconds=900)
        assert two_by_four.gpu_seconds == 7200.0  # 2 nodes x 4 GPUs x 900 s = 2.0 GPU-h
        assert session.get(Job, own) is not None

    with sim_client(sim) as client:
        body = client.get("/api/series/6307/gpu").json()
        html = client.get("/series/6307/gpu").text
        series_page = client.get("/series/6307").text

    # Two pushes, each testing one series tree (3 jobs, 3.0 GPU-h), nothing reused.
    assert body["gpu_hours"] == 6.5
    assert body["by_purpose"] == {"tree": 6.5}
    assert body["saved_by_reuse"] == 0.0
    assert body["jobs"] == 7
    pushes = body["by_push"]
    assert [p["series_run"] for p in pushes] == [first.series_run, second.series_run]
    one, two = pushes
    assert one["first"] is True and two["first"] is False
    assert two["changed"] == [2] and two["base_moved"] is False and two["dropped"] == []
    assert sorted(one["runs"]) == sorted([first.series_run, *first.stack_runs.values()])
    # The second push made stacks #2..#4 again; #1's stack is the first push's.
    assert sorted(two["runs"]) == sorted(
        [second.series_run, *(second.stack_runs[k] for k in (2, 3, 4))]
    )
    assert (one["gpu_hours"], one["jobs"], one["by_purpose"]) == (3.0, 3, {"tree": 3.0})
    assert (two["gpu_hours"], two["jobs"]) == (3.5, 4)  # its series tree + #3's own files
    # series-first left stacks #1..#3 (then #2, #3) to the series tree; #4's stack tree is the
    # series tree, tested anyway. Each would have cost a tree: 3.0 GPU-h.
    assert (one["untested_stacks"], one["saved_by_policy"]) == (3, 9.0)
    assert (two["untested_stacks"], two["saved_by_policy"]) == (2, 6.0)
    policy = body["saved_by_policy"]
    assert policy["policy"] == "series-first"
    assert (policy["gpu_hours"], policy["untested_stacks"]) == (15.0, 5)
    assert policy["per_stack_gpu_hours"] == 3.0
    assert policy["mean_seconds_by_config"] == {
        "amax-group 1x4": 600.0,
        "amax-group 2x4": 900.0,
        "blockwise-recipe 1x4": 300.0,
    }
    assert policy["gpus_by_config"] == {
        "amax-group 1x4": 4,
        "amax-group 2x4": 8,
        "blockwise-recipe 1x4": 4,
    }
    # Per PR: only #3's own test files ran for one PR; the series trees are shared.
    assert body["by_pr"] == {
        "3": {
            "gpu_hours": 0.5,
            "by_purpose": {"tree": 0.5},
            "saved_by_reuse": 0.0,
            "jobs": 1,
            "reused_jobs": 0,
        }
    }
    assert body["shared"]["gpu_hours"] == 6.0 and body["shared"]["jobs"] == 6
    assert sum(p["gpu_hours"] for p in pushes) == pytest.approx(body["gpu_hours"])

    assert 'href="/series/6307/gpu"' in series_page
    assert "<strong>6.50</strong> GPU-h" in html
    # why the jobs ran, in words (not the raw purpose: "tree 3.00")
    assert "testing trees 3.00" in html and "tree 3.00" not in html.replace("testing trees", "")
    assert "by purpose" not in html
    assert f'<tr data-run="{second.series_run}">' in html and "pushed" in html
    assert "15.00 GPU-h" in html and "5 stacks left to the series tree" in html
    assert '<tr data-pr="3">' in html and 'id="shared">6.00 GPU-h' in html


def test_every_stack_gpu_hours_per_pr_and_what_reuse_saved(
    engine: Engine, settings: Settings
) -> None:
    sim = series_sim(engine, settings, "every-stack", prs=4)
    pushed = sim.push()
    sim.drive()
    with sim_client(sim) as client:
        body = client.get("/api/series/6307/gpu").json()
        html = client.get("/series/6307/gpu").text
    # The series tree is tested first; #1..#3's stacks are three more trees; #4's stack is the
    # series tree, so its three jobs reuse the series' results and save their 3.0 GPU-h.
    assert (body["gpu_hours"], body["jobs"], body["reused_jobs"]) == (12.0, 12, 3)
    assert body["saved_by_reuse"] == 3.0
    tree = {"gpu_hours": 3.0, "by_purpose": {"tree": 3.0}, "saved_by_reuse": 0.0, "jobs": 3}
    assert body["by_pr"] == {
        "1": {**tree, "reused_jobs": 0},
        "2": {**tree, "reused_jobs": 0},
        "3": {**tree, "reused_jobs": 0},
        "4": {
            "gpu_hours": 0.0,
            "by_purpose": {},
            "saved_by_reuse": 3.0,
            "jobs": 0,
            "reused_jobs": 3,
        },
    }
    assert body["shared"]["gpu_hours"] == 3.0
    [push] = body["by_push"]
    assert push["series_run"] == pushed.series_run and push["gpu_hours"] == 12.0
    assert push["saved_by_reuse"] == 3.0
    assert body["saved_by_policy"]["policy"] == "every-stack"
    assert (body["saved_by_policy"]["gpu_hours"], body["saved_by_policy"]["untested_stacks"]) == (
        0.0,
        0,
    )
    assert '<tr data-pr="4">' in html and "3 results reused from identical trees" in html


def test_unknown_series_is_a_404(engine: Engine, settings: Settings) -> None:
    sim = series_sim(engine, settings, "series-first", prs=2)
    with sim_client(sim) as client:
        for path in ("/series/{}/gpu", "/api/series/{}/gpu"):
            for slug in ("9999", "a%00b", "root-1"):
                assert client.get(path.format(slug)).status_code == 404, path.format(slug)
        # A known series with nothing run yet: zeros and empty lists, not errors.
        empty = client.get("/api/series/6307/gpu").json()
        assert (empty["gpu_hours"], empty["by_push"], empty["by_pr"]) == (0.0, [], {})
        assert client.get("/series/6307/gpu").status_code == 200


PAGES = ("/series/6307/gpu", "/api/series/6307/gpu")


def _queries(database_url: str, settings: Settings, prs: int) -> dict[str, int]:
    migrate.upgrade(database_url)
    engine = make_engine(database_url)
    try:
        sim = series_sim(engine, settings, "every-stack", prs=prs, injected=Injected(flaky_at=[2]))
        sim.push()
        sim.drive()
        sim.use_policy("series-first")
        sim.push(prs)
        sim.drive()
        seen: list[str] = []

        def record(*args: object) -> None:
            seen.append(str(args[2]))

        counts = {}
        with sim_client(sim) as client:
            for path in PAGES:
                assert client.get(path).status_code == 200
                seen.clear()
                event.listen(engine, "before_cursor_execute", record)
                try:
                    assert client.get(path).status_code == 200
                finally:
                    event.remove(engine, "before_cursor_execute", record)
                counts[path] = len(seen)
        with Session(engine) as session:
            runs = session.exec(select(IntegrationRun.id).where(col(IntegrationRun.id) > 0)).all()
            assert len(runs) > prs  # every stack and two series runs
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
    assert found[3]["/api/series/6307/gpu"] <= 7
