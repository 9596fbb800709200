"""Quarantine on evidence, release on evidence (issue 26 points 1-2), end to end on both
databases: the real planner, job reuse and ``poll_jobs`` tasks with GPU time simulated
(benchmarks/plan_sim.py), and the quarantine review that runs after each round."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session

from benchmarks.plan_sim import Injected, Simulation
from stackbot.config import Settings
from stackbot.db import quarantine_store
from stackbot.db.engine import session_scope
from stackbot.db.models import QuarantineEntry
from stackbot.domain.quarantine import QuarantinePolicy
from stackbot.services import quarantine

FLAKY = "tests/unit_tests/test_layer_3.py::test_flaky_3"
FAILING = "tests/unit_tests/test_layer_2.py::test_fail_2"


def _sim(engine: Engine, settings: Settings, injected: Injected, **update: object) -> Simulation:
    settings = settings.model_copy(update={"test_plan_policy": "series-first", **update})
    return Simulation(engine, settings, prs=4, injected=injected)


def _entries(sim: Simulation) -> dict[str, QuarantineEntry]:
    with Session(sim.engine) as session:
        rows = quarantine_store.entries(session, repo_id=sim.repo_id)
        session.expunge_all()
    return {row.nodeid: row for row in rows}


def _classes(sim: Simulation, run_id: int) -> dict[str, str]:
    return {f.nodeid: f.failure_class for f in sim.findings(run_id)}


def test_a_test_flaky_three_times_is_quarantined_with_its_evidence(
    engine: Engine, settings: Settings
) -> None:
    sim = _sim(engine, settings, Injected(flaky_at=[3]))
    for push in (None, 3, 3):
        run = sim.push(push).series_run
        sim.drive()
        assert _classes(sim, run)[FLAKY] == "flaky"
    entry = _entries(sim)[FLAKY]
    assert (entry.state, entry.reason) == ("active", "evidence")
    # Three flaky events, each a failing job and the passing rerun of the same tree.
    assert len(entry.evidence) == 3
    assert len({e["failed_job"] for e in entry.evidence}) == 3
    assert all(e["passed_job"] != e["failed_job"] for e in entry.evidence)
    assert len({e["tree"] for e in entry.evidence}) == 3
    start = entry.started_at.replace(tzinfo=entry.started_at.tzinfo or UTC)
    expires = entry.expires_at.replace(tzinfo=entry.expires_at.tzinfo or UTC)
    assert expires - start == timedelta(days=30)
    # From now on its flake is shown as quarantined (not counted) in the next run.
    run = sim.push(3).series_run
    sim.drive()
    assert _classes(sim, run)[FLAKY] == "quarantined"


def test_two_flaky_observations_do_not_quarantine(engine: Engine, settings: Settings) -> None:
    sim = _sim(engine, settings, Injected(flaky_at=[3]))
    for push in (None, 3):
        sim.push(push)
        sim.drive()
    assert _entries(sim) == {}


def test_a_deterministic_failure_is_never_quarantined(engine: Engine, settings: Settings) -> None:
    sim = _sim(engine, settings, Injected(fail_at=[2]), quarantine_flaky_count=1)
    for push in (None, 2, 2, 2):
        run = sim.push(push).series_run
        sim.drive()
        assert _classes(sim, run)[FAILING] == "new"
    assert _entries(sim) == {}


def test_a_quarantined_test_is_released_after_n_clean_runs(
    engine: Engine, settings: Settings
) -> None:
    sim = _sim(engine, settings, Injected(flaky_at=[3]), quarantine_release_after=3)
    for push in (None, 3, 3):
        sim.push(push)
        sim.drive()
    assert _entries(sim)[FLAKY].state == "active"
    sim.injected = Injected(flaky_at=[3], fixed=[3])  # the test is fixed: it passes now
    sim.push(3)
    sim.drive()
    entry = _entries(sim)[FLAKY]
    with Session(engine) as session:
        progress = quarantine.release_progress(session, entry)
    assert entry.state == "active" and 1 <= progress < 3
    for _ in range(2):
        sim.push(3)
        sim.drive()
    entry = _entries(sim)[FLAKY]
    assert entry.state == "released", entry
    assert entry.end_note is not None and "in a row" in entry.end_note


def test_a_quarantine_expires_unless_renewed(engine: Engine, settings: Settings) -> None:
    sim = _sim(engine, settings, Injected())
    policy = QuarantinePolicy()
    now = datetime.now(UTC)
    with session_scope(engine) as session:
        quarantine.quarantine_by_maintainer(
            session, sim.repo_id, FLAKY, login="vetter", policy=policy, now=now
        )
    later = now + timedelta(days=20)
    with session_scope(engine) as session:
        _, renewed = quarantine.quarantine_by_maintainer(
            session, sim.repo_id, FLAKY, login="vetter", policy=policy, now=later
        )
    assert renewed
    # 31 days after the start: still active (renewed on day 20); 51 days: expired.
    quarantine.review_repository(engine, sim.repo_id, policy=policy, now=now + timedelta(31))
    assert _entries(sim)[FLAKY].state == "active"
    quarantine.review_repository(engine, sim.repo_id, policy=policy, now=now + timedelta(51))
    entry = _entries(sim)[FLAKY]
    assert entry.state == "expired" and entry.renewed_by == "vetter"


def test_a_test_seen_flaky_that_fails_a_tree_twice_gets_a_third_run_not_an_ejection(
    engine: Engine, settings: Settings
) -> None:
    sim = _sim(engine, settings, Injected(flaky_at=[3]))
    sim.push()
    sim.drive()  # fails once, passes the rerun: seen flaky (not quarantined: one time)
    sim.injected.flaky_runs = 2  # from now on it fails a tree's first two runs
    pushed = sim.push(4)
    sim.drive()
    [finding] = sim.findings(pushed.series_run)
    assert (finding.nodeid, finding.failure_class, finding.pr_number) == (FLAKY, "flaky", None)
    attempts = sorted(j.attempt for j in sim.originals() if j.purpose == "confirm")
    assert attempts == [2, 2, 3]  # the first push's rerun; this push's rerun and a third run
    assert not _entries(sim)


def test_a_test_never_seen_flaky_that_fails_a_tree_twice_is_a_new_failure(
    engine: Engine, settings: Settings
) -> None:
    sim = _sim(engine, settings, Injected(flaky_at=[3], flaky_runs=2))
    pushed = sim.push()
    sim.drive()
    [finding] = sim.findings(pushed.series_run)
    assert (finding.failure_class, finding.pr_number) == ("new", 3)
