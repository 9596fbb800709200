"""The test plan end to end on both databases: the policy's choice of trees, the planner, job
reuse and the queue's ``poll_jobs`` tasks, with GPU time simulated (benchmarks/plan_sim.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from benchmarks.plan_sim import Injected, Simulation
from stackbot.config import Settings
from stackbot.db import jobs_store


def _sim(
    engine: Engine,
    settings: Settings,
    policy: str = "series-first",
    prs: int = 12,
    **kwargs: object,
) -> Simulation:
    settings = settings.model_copy(update={"test_plan_policy": policy})
    return Simulation(engine, settings, prs=prs, **kwargs)  # type: ignore[arg-type]


def _purposes(sim: Simulation) -> list[str]:
    return [job.purpose for job in sim.originals()]


@pytest.mark.parametrize("layer", [1, 7, 12])
def test_a_failure_is_bisected_to_the_pr_that_introduced_it(
    engine: Engine, settings: Settings, layer: int
) -> None:
    sim = _sim(engine, settings, injected=Injected(fail_at=[layer]))
    pushed = sim.push()
    sim.drive()
    assert sim.attributed(pushed.series_run) == {str(layer): layer}
    [finding] = sim.findings(pushed.series_run)
    assert finding.failure_class == "new" and finding.test_set == "amax-group"
    assert (finding.evidence["passes_at"], finding.evidence["fails_at"]) == (layer - 1, layer)
    extra = [p for p in _purposes(sim) if p in ("confirm", "bisect")]
    assert extra.count("confirm") == 1
    assert len(extra) <= math.ceil(math.log2(12)) + 1
    # Only the series tree was tested with every configuration: no stack got jobs.
    assert _purposes(sim).count("tree") == 3


def test_two_failures_at_different_layers(engine: Engine, settings: Settings) -> None:
    sim = _sim(engine, settings, injected=Injected(fail_at=[3, 10]))
    pushed = sim.push()
    sim.drive()
    assert sim.attributed(pushed.series_run) == {"3": 3, "10": 10}


def test_a_flaky_test_is_attributed_to_no_pr(engine: Engine, settings: Settings) -> None:
    sim = _sim(engine, settings, injected=Injected(flaky_at=[5]))
    pushed = sim.push()
    sim.drive()
    [finding] = sim.findings(pushed.series_run)
    assert (finding.failure_class, finding.pr_number) == ("flaky", None)
    assert finding.evidence["failed_in"] != finding.evidence["passed_in"]
    assert "bisect" not in _purposes(sim)


def test_an_infra_failure_is_retried_on_another_node_and_then_passes(
    engine: Engine, settings: Settings
) -> None:
    # gpu-00 is broken: the first job placed there fails its node check.
    sim = _sim(engine, settings, injected=Injected(broken_nodes=["gpu-00"]), prs=4)
    pushed = sim.push()
    sim.drive()
    jobs = sim.originals()
    retries = [j for j in jobs if j.purpose == "retry"]
    assert retries, "the infra result should have been retried"
    for retry in retries:
        assert "gpu-00" in retry.excluded_nodes
        assert retry.status == "passed" and "gpu-00" not in (retry.node or "")
    assert sim.findings(pushed.series_run) == []  # infra is never a test result


def test_a_pr_that_conflicts_in_the_series_is_tested_on_its_own_stack(
    engine: Engine, settings: Settings
) -> None:
    sim = _sim(engine, settings, prs=4, conflicting=[5])
    pushed = sim.push()
    sim.drive()
    tested_runs = {job.integration_run_id for job in sim.originals() if job.purpose == "tree"}
    assert tested_runs == {pushed.series_run, pushed.stack_runs[5]}


def test_every_stack_tests_each_stack_and_attributes_from_them(
    engine: Engine, settings: Settings
) -> None:
    sim = _sim(engine, settings, "every-stack", prs=6, injected=Injected(fail_at=[4]))
    pushed = sim.push()
    sim.drive()
    # 6 stacks + the series (identical to stack 6) × 3 configurations, + main's 3.
    assert _purposes(sim).count("tree") == 6 * 3
    assert sim.attributed(pushed.series_run) == {"4": 4}
    # The series run's bisection took every prefix from the identical stack trees.
    assert "bisect" not in _purposes(sim)


def test_a_stack_run_attributes_an_ancestors_failure_to_the_ancestor(
    engine: Engine, settings: Settings
) -> None:
    sim = _sim(engine, settings, "every-stack", prs=6, injected=Injected(fail_at=[4]))
    pushed = sim.push()
    sim.drive()
    # Stacks 4, 5 and 6 hold the failure; each names #4, which introduced it, not itself.
    for pr in (4, 5, 6):
        assert sim.attributed(pushed.stack_runs[pr]) == {"4": 4}, pr
    for pr in (1, 2, 3):
        assert sim.attributed(pushed.stack_runs[pr]) == {}, pr


def test_a_push_reuses_the_trees_it_did_not_change(engine: Engine, settings: Settings) -> None:
    sim = _sim(engine, settings, prs=12, injected=Injected(fail_at=[4]))
    sim.push()
    sim.drive()
    before = len(sim.originals())
    pushed = sim.push(12)  # the top PR: every prefix below it is unchanged
    sim.drive()
    added = [j.purpose for j in sim.originals()[before:]]
    # The new series tree (3 configurations) and its confirming rerun; the bisection's
    # prefixes are the trees the first push tested.
    assert sorted(added) == ["confirm", "tree", "tree", "tree"]
    assert sim.attributed(pushed.series_run) == {"4": 4}


def test_results_are_reused_across_policies(engine: Engine, settings: Settings) -> None:
    sim = _sim(engine, settings, "every-stack", prs=6, injected=Injected(fail_at=[2]))
    sim.push()
    sim.drive()
    before = len(sim.originals())
    sim.use_policy("series-first")
    pushed = sim.push(6)
    sim.drive()
    added = sorted(j.purpose for j in sim.originals()[before:])
    assert added == ["confirm", "tree", "tree", "tree"]
    assert sim.attributed(pushed.series_run) == {"2": 2}


def test_the_queue_starts_main_then_the_series_then_bisection(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    sim = _sim(engine, settings, "every-stack", prs=5, nodes=2)  # amax-group 2x4 needs two nodes
    sim.push()
    sim.drive()
    order = sorted(sim.executor.jobs.values(), key=lambda r: r.start)
    names = [sim.tree_of_commit[r.spec.commit or ""] for r in order]
    sizes = [len(tree) for tree in names]
    # main (empty tree) first, three configurations; then the series (5 PRs); then stacks
    # from the lowest layer up.
    assert sizes[:3] == [0, 0, 0]
    assert sizes[3:6] == [5, 5, 5]
    stacks = sizes[6:]
    assert stacks == sorted(stacks)


def test_at_most_n_jobs_of_one_series_run_at_once(engine: Engine, settings: Settings) -> None:
    settings = settings.model_copy(update={"max_running_jobs_per_series": 2})
    sim = _sim(engine, settings, "every-stack", prs=5, nodes=8)
    sim.push()
    sim.drive()
    runs = [r for r in sim.executor.jobs.values() if sim.tree_of_commit[r.spec.commit or ""]]
    for run in runs:  # at each series job's start, at most 2 series jobs ran (itself included)
        overlapping = [other for other in runs if other.start <= run.start < other.end]
        assert len(overlapping) <= 2


def test_after_a_parent_lands_nothing_already_tested_runs_again(
    engine: Engine, settings: Settings
) -> None:
    """Issue 24 point 4: PR 1 squash-merged into main (main otherwise unchanged): the series of
    PRs 2..N on the new main has the tree tested before, so its configured and own-test results
    are carried; only main's new commit gets its own baselines."""
    sim = _sim(engine, settings, prs=6, own_test_minutes=10.0)
    first = sim.push()
    sim.drive()
    before = {job.id for job in sim.originals()}
    # Every PR's own test file in one job on the series tree (issue 24 point 6).
    [own_job] = [j for j in sim.originals() if j.test_set == "own"]
    assert own_job.targets == [f"tests/unit_tests/test_pr_{n}.py" for n in range(1, 7)]
    landed = sim.land(1)
    sim.drive()
    again = [job for job in sim.originals() if job.id not in before]
    assert [j for j in again if j.kind != "baseline"] == []
    assert {j.test_set for j in again} <= {"amax-group", "blockwise-recipe"}  # main's baselines
    assert landed.series_run != first.series_run
    with Session(engine) as session:
        carried = jobs_store.jobs_of_run(session, run_id=landed.series_run)
    assert carried and all(j.reused_from_job_id is not None for j in carried)
    # PR 1's file is main's now: the children's own files are a part of the job that ran.
    [own_copy] = [j for j in carried if j.test_set == "own"]
    assert own_copy.reused_from_job_id == own_job.id
    assert own_copy.targets == [f"tests/unit_tests/test_pr_{n}.py" for n in range(2, 7)]


def test_every_tree_runs_the_own_files_of_every_pr_it_holds_in_one_job(
    engine: Engine, settings: Settings
) -> None:
    """Issue 24 point 6: one own-files job per shape and tree, its targets the files of every PR
    the tree holds: a stack's tree runs its ancestors' new test files too (a child can break
    them, and under every-stack nothing else runs them on the child's tree)."""
    sim = _sim(engine, settings, "every-stack", prs=4, own_test_minutes=10.0)
    pushed = sim.push()
    sim.drive()
    with Session(engine) as session:
        for k, run_id in pushed.stack_runs.items():
            jobs = jobs_store.jobs_of_run(session, run_id=run_id)
            [own] = [j for j in jobs if j.test_set == "own"]
            assert own.shape == "2x4"  # Megatron writes its unit tests for 8 ranks
            assert own.targets == [f"tests/unit_tests/test_pr_{n}.py" for n in range(1, k + 1)]
        series = jobs_store.jobs_of_run(session, run_id=pushed.series_run)
        [own] = [j for j in series if j.test_set == "own"]
        assert len(own.targets or ()) == 4
    # 4 trees (the top stack's is the series tree): 4 own-files jobs, 1 + 2 + 3 + 4 files.
    ran = [j for j in sim.originals() if j.test_set == "own"]
    assert sorted(len(j.targets or ()) for j in ran) == [1, 2, 3, 4]
    minutes = sorted(
        round((r.end - r.start) / 60)
        for r in sim.executor.jobs.values()
        if r.spec.test_set == "own"
    )
    assert minutes == [10, 20, 30, 40]  # each file 10 simulated minutes
