"""Broken nodes through the real service (issue 26 point 4), on SQLite and PostgreSQL: the
simulated cluster's executor honours ``exclude_nodes`` and ``only_nodes`` as Slurm does; a
broken node takes two jobs, is excluded from every later submission, fails its node check
(stays out) and is re-admitted once a check passes on it."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import Session

from benchmarks.plan_sim import Injected, Simulation
from stackbot.config import Settings
from stackbot.db import nodes_store
from stackbot.db.models import NodeExclusion

BROKEN = "gpu-00"


def _tests_on(sim: Simulation, node: str) -> list[str]:
    return [
        job_id
        for job_id, nodes in sim.executor.placed
        if node in nodes and not job_id.startswith("node-check")
    ]


def _checks_on(sim: Simulation, node: str) -> list[str]:
    return [j for j, nodes in sim.executor.placed if j.startswith("node-check") and node in nodes]


def _poll_at(sim: Simulation, seconds: float) -> None:
    """Let simulated time pass and run one poll_jobs pass then."""
    sim.now += seconds
    sim._poll_now()
    sim.worker.run_until_idle()


def _next_check(engine: Engine, sim: Simulation) -> NodeExclusion:
    """Let time pass until the node's next check finished; its row then."""
    done = len(_row(engine).checks)
    for _ in range(30):  # the wait doubles after each failed check, up to a day
        _poll_at(sim, 3600)
        _poll_at(sim, 121)  # a check takes two minutes
        row = _row(engine)
        if len(row.checks) > done:
            return row
    raise AssertionError("no node check finished")


def _row(engine: Engine) -> NodeExclusion:
    with Session(engine) as session:
        row = nodes_store.entry(session, node=BROKEN)
    assert row is not None
    return row


def test_a_broken_node_takes_two_jobs_then_none_until_a_node_check_passes(
    engine: Engine, settings: Settings
) -> None:
    sim = Simulation(engine, settings, prs=6, injected=Injected(broken_nodes=[BROKEN]))
    for push in (None, 3, 5, 2, 6, 1, 4, 3):
        sim.push(push)
        sim.drive()
    # The executor takes the first free nodes: without the exclusion gpu-00 would take a job
    # in nearly every round (only a job's own retry chain left it out).
    assert len(sim.executor.placed) > 30, len(sim.executor.placed)
    assert len(_tests_on(sim, BROKEN)) == 2
    with Session(engine) as session:
        [row] = nodes_store.exclusions(session)
    assert (row.node, row.state) == (BROKEN, "excluded")
    assert len(row.evidence) == 2
    assert all(e["line"] == f"node check failed on {BROKEN}" for e in row.evidence)
    # Every job submitted after the exclusion left it out, as Slurm's --exclude does.
    second = next(
        r for r in sim.executor.jobs.values() if r.spec.job_id == _tests_on(sim, BROKEN)[-1]
    )
    later = [
        r.spec
        for r in sim.executor.jobs.values()
        if r.start >= second.end and r.spec.test_set != "node-check"
    ]
    assert later and all(BROKEN in spec.exclude_nodes for spec in later)

    # Node checks run on that node alone; still broken, it fails them.
    row = _next_check(engine, sim)
    assert row.state == "excluded" and row.checks[-1]["status"] == "infra"
    assert len(_checks_on(sim, BROKEN)) == len(row.checks)
    assert all(nodes == (BROKEN,) for j, nodes in sim.executor.placed if j.startswith("node-"))

    # Repaired: the next check passes, and the node takes jobs again.
    sim.injected.broken_nodes = []
    row = _next_check(engine, sim)
    assert row.state == "readmitted" and row.checks[-1]["status"] == "passed"
    assert row.end_note is not None and "node check passed" in row.end_note
    before = len(_tests_on(sim, BROKEN))
    sim.push(4)
    sim.drive()
    assert len(_tests_on(sim, BROKEN)) > before
