"""The gate on the GitHub stand-in, both databases, real integration (git merges on the
stand-in's repository), the real landing: two series queued with ``/stackbot land``; the second
is integrated and tested speculatively on top of the first (a gate run: main + the first's PRs
+ its own); once the first lands, the second's tree on the new main is the tree already tested
and it lands with no new job. A landing whose tree failed behind a passing one is not taken
out while the one ahead may still fail; the landings behind it are tested without it.

The GPU jobs are not run: a test marks them passed (or a tree failed), as the test plan leaves
them once they finished."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import Session, col, select

from stackbot.db.engine import session_scope
from stackbot.db.models import IntegrationRun, IntegrationStep, Job, Landing, Task, TestFinding
from stackbot.domain.landing_text import LANDING_MARKER
from stackbot.domain.tasks import Integrate
from stackbot.services import integrate, landing
from stackbot.taskqueue import queue
from tests.sync.pipeline import Pipeline, open_pr


def _series(pipeline: Pipeline, name: str) -> list[int]:
    first = open_pr(pipeline, author="erin", branch=f"{name}-1", title=f"{name} one")
    second = open_pr(
        pipeline, author="erin", branch=f"{name}-2", title=f"{name} two", base=f"{name}-1"
    )
    return [first, second]


def _start(pipeline: Pipeline, *names: str) -> list[list[int]]:
    made = [_series(pipeline, name) for name in names]
    pipeline.deliver()
    pipeline.control.set_merge_settings(pipeline.repo, delete_branch_on_merge=True)
    landing.register_tasks(pipeline.worker.registry)
    integrate.register_tasks(pipeline.worker.registry)
    pipeline.handled = (*pipeline.handled, "land", "integrate")
    for numbers in made:
        pipeline.control.comment(pipeline.repo, numbers[-1], "bob", "/stackbot land")
        pipeline.deliver()
    return made


def _again(pipeline: Pipeline) -> None:
    """Every waiting landing looks again now (rather than in 30 s), then the tasks run."""
    with session_scope(pipeline.engine) as session:
        for task in session.exec(select(Task).where(Task.status == "pending")):
            task.run_after = queue.utcnow()
            session.add(task)
    pipeline.run_tasks()


def _runs(pipeline: Pipeline, kind: str) -> list[tuple[IntegrationRun, list[int]]]:
    with Session(pipeline.engine) as session:
        runs = session.exec(
            select(IntegrationRun)
            .where(IntegrationRun.kind == kind)
            .order_by(col(IntegrationRun.id))
        ).all()
        found = []
        for run in runs:
            steps = session.exec(
                select(IntegrationStep)
                .where(IntegrationStep.run_id == run.id)
                .order_by(col(IntegrationStep.position))
            ).all()
            found.append((run, [s.pr_number for s in steps]))
        session.expunge_all()
    return found


def _pass_all(pipeline: Pipeline) -> None:
    """Every unfinished job ends passed."""
    with session_scope(pipeline.engine) as session:
        for job in session.exec(select(Job).where(col(Job.status).not_in(["passed", "failed"]))):
            job.status = "passed"
            session.add(job)


def _fail(pipeline: Pipeline, run_id: int | None, pr: int) -> None:
    """The run's tree failed a test PR ``pr`` broke: its jobs failed, and the test plan's
    finding says the failure is new (confirmed, bisected to ``pr``)."""
    assert run_id is not None
    with session_scope(pipeline.engine) as session:
        jobs = session.exec(select(Job).where(Job.integration_run_id == run_id)).all()
        for job in jobs:
            job.status = "failed"
            session.add(job)
        session.add(
            TestFinding(
                run_id=run_id,
                test_set=jobs[0].test_set,
                shape=jobs[0].shape,
                nodeid="tests/unit_tests/test_layer.py::test_broken",
                failure_class="new",
                pr_number=pr,
            )
        )


def _row(pipeline: Pipeline, landing_id: int) -> Landing:
    with Session(pipeline.engine) as session:
        return session.exec(select(Landing).where(Landing.id == landing_id)).one()


def _comment(pipeline: Pipeline, number: int) -> str:
    found = [c.body for c in pipeline.bot_comments(number) if c.body.startswith(LANDING_MARKER)]
    assert len(found) == 1, f"#{number}: {len(found)} landing comments"
    return found[0]


def test_the_second_landing_is_tested_on_the_first_and_lands_on_its_tested_tree(
    pipeline: Pipeline,
) -> None:
    (x1, x2), (y1, y2) = _start(pipeline, "ex", "why")
    control, repo = pipeline.control, pipeline.repo
    [(gate, gate_prs)] = _runs(pipeline, "gate")
    assert gate_prs == [x1, x2, y1, y2]  # main + the landing ahead + its own PRs
    assert gate.status == "clean" and gate.final_tree
    body = _comment(pipeline, y2)
    assert f"with the landings ahead of it (#{x1} → #{x2})" in body
    assert "landings ahead" not in _comment(pipeline, x2)  # the head: its own tree on main

    _pass_all(pipeline)  # every tree tested green: the series run of X and the gate run
    _again(pipeline)
    _again(pipeline)
    assert all(control.pull(repo, n).merged for n in (x1, x2))
    for _ in range(3):
        _again(pipeline)
    assert all(control.pull(repo, n).merged for n in (y1, y2)), _comment(pipeline, y2)
    with Session(pipeline.engine) as session:
        rows = session.exec(select(Landing).order_by(col(Landing.id))).all()
        tested = session.get(IntegrationRun, rows[1].tested_run_id)
        assert tested is not None
        jobs = session.exec(select(Job).where(Job.integration_run_id == tested.id)).all()
    # The tree on the new main is the gate's tree: its results, no new job.
    assert tested.kind == "series" and tested.base_sha != gate.base_sha
    assert jobs and all(j.reused_from_job_id is not None for j in jobs)
    second = rows[1]
    assert second.state == "landed"
    assert second.tested_tree == gate.final_tree == second.landed_tree
    assert "✅ **Landed** on `main`" in _comment(pipeline, y1)
    assert not [
        p for p in control.repo(repo).pulls.values() if p.state == "closed" and not p.merged
    ]


def test_a_landing_whose_tree_failed_waits_and_those_behind_are_tested_without_it(
    pipeline: Pipeline,
) -> None:
    (x1, x2), (y1, y2), (z1, z2) = _start(pipeline, "ex", "why", "zed")
    gates = {tuple(prs): run for run, prs in _runs(pipeline, "gate")}
    assert set(gates) == {(x1, x2, y1, y2), (x1, x2, y1, y2, z1, z2)}
    _fail(pipeline, gates[(x1, x2, y1, y2)].id, y1)  # Y broke a test on top of X
    _again(pipeline)

    gates = {tuple(prs): run for run, prs in _runs(pipeline, "gate")}
    assert (x1, x2, z1, z2) in gates  # Z re-integrated and tested without Y
    with Session(pipeline.engine) as session:
        rows = session.exec(select(Landing).order_by(col(Landing.id))).all()
    assert [r.state for r in rows] == ["waiting", "waiting", "waiting"]  # X may still fail
    body = _comment(pipeline, y2)
    assert "its tree failed on top of them" in body and "new failures" in body
    assert f"(#{x1} → #{x2}; #{y1} → #{y2})" in _comment(pipeline, z2)

    _pass_all(pipeline)  # X's tree and Z's tree without Y pass
    for _ in range(3):
        _again(pipeline)
    assert all(pipeline.control.pull(pipeline.repo, n).merged for n in (x1, x2))
    # Y at the head: its tree on the new main is the tree that failed on top of X.
    mine = [run for run, prs in _runs(pipeline, "series") if prs == [y1, y2]]
    assert mine and mine[-1].final_tree == gates[(x1, x2, y1, y2)].final_tree
    assert _row(pipeline, 2).state == "waiting"
    _fail(pipeline, mine[-1].id, y1)
    for _ in range(3):
        _again(pipeline)
    second, third = _row(pipeline, 2), _row(pipeline, 3)
    assert second.state == "stopped" and second.reason is not None
    assert second.reason.startswith("the tree to land was not tested green: new failures")
    assert "⛔ **Landing stopped**" in _comment(pipeline, y1)
    assert not any(pipeline.control.pull(pipeline.repo, n).merged for n in (y1, y2))
    assert third.state in ("waiting", "merging", "landed")  # no longer behind Y
    assert f"#{y1}" not in (third.waiting_for or "")


def test_an_integration_asked_while_a_landing_merges_waits_for_its_last_merge(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker reads the push of the landing's first merge and integrates the
    repository's other series: on that main, gone a moment later, it would start GPU jobs
    (main's baselines, the other series' trees) on a tree nobody keeps (seen in the demo with two
    workers). It waits until the landing has merged, then integrates on the main that holds the
    whole landing."""
    x1, x2 = _series(pipeline, "ex")
    y1, y2 = _series(pipeline, "why")
    pipeline.deliver()
    pipeline.control.set_merge_settings(pipeline.repo, delete_branch_on_merge=True)
    landing.register_tasks(pipeline.worker.registry)
    integrate.register_tasks(pipeline.worker.registry)
    pipeline.handled = (*pipeline.handled, "land", "integrate")
    _again(pipeline)
    _pass_all(pipeline)
    [other] = [run.series_key for run, prs in _runs(pipeline, "series") if prs == [y1, y2]]
    assert other is not None
    real_merge_one = landing._merge_one
    asked: list[bool] = []

    def merge_then_another_worker_integrates(*args: Any) -> bool:
        merged = real_merge_one(*args)
        if args[4].number == x1 and not asked:  # main holds #x1 alone now
            task = Integrate(pipeline.repo, series_key=other, number=None, reason="main moved")
            asked.append(integrate.held_by_a_landing(pipeline.engine, task))
            with session_scope(pipeline.engine) as session:
                queue.enqueue(session, "integrate", task.to_payload())
            claimed = queue.claim(
                pipeline.engine, pipeline.worker.worker_id, lease_s=60, kinds=("integrate",)
            )
            assert claimed is not None
            pipeline.worker.execute(claimed)
        return merged

    monkeypatch.setattr(landing, "_merge_one", merge_then_another_worker_integrates)
    pipeline.control.comment(pipeline.repo, x2, "bob", "/stackbot land")
    pipeline.deliver()
    for _ in range(3):
        _again(pipeline)

    control, repo = pipeline.control, pipeline.repo
    assert asked == [True] and all(control.pull(repo, n).merged for n in (x1, x2))
    row = _row(pipeline, 1)
    assert row.state == "landed"
    between, final = (entry["merge_sha"] for entry in row.entries)
    bases = [run.base_sha for run, prs in _runs(pipeline, "series") if prs == [y1, y2]]
    assert between not in bases  # nothing integrated (or tested) on the main in between
    assert bases[-1] == final
