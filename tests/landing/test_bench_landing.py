"""``benchmarks/bench_landing.py`` drives the real landing: on a burst of three series asked to
land within two minutes, the gate tests the second and third speculatively on top of the ones
ahead (gate runs), lands all of them within one series test run plus GitHub's calls, and keeps
every account; when the first series fails, the speculative runs on top of it are thrown away
and the others land without it. Simulated time, on both databases."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from benchmarks import bench_landing as bench
from stackbot.db.engine import make_engine
from stackbot.db.models import IntegrationRun, Job

RUN_S = 900.0  # the longest job of a tree (amax-group 2x4): one series test run
GITHUB_S = 600.0


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(hours=1.0, window=3, nodes=16, fix_hours=2.0, tmp=str(tmp_path))


def _burst(broken: int | None = None) -> bench.Traffic:
    return bench.Traffic(
        (
            bench.SeriesArrival(60.0, "root-#100", (100, 101, 102), broken, None),
            bench.SeriesArrival(90.0, "root-#110", (110, 111), None, None),
            bench.SeriesArrival(120.0, "root-#120", (120,), None, None),
        ),
        (),
    )


def _gate_runs(url: str) -> list[list[int]]:
    engine = make_engine(url)
    with Session(engine) as session:
        runs = session.exec(select(IntegrationRun).where(IntegrationRun.kind == "gate")).all()
        found = [sorted(int(n) for n in run.heads) for run in runs]
    engine.dispose()
    return found


def test_a_burst_lands_speculatively_within_one_run(database_url: str, tmp_path: Path) -> None:
    result = bench.simulate("speculative", _args(tmp_path), _burst(), database_url)
    assert result["landed_prs"] == 6 and result["landed_series"] == 3
    gates = _gate_runs(database_url)
    assert [100, 101, 102, 110, 111] in gates  # the second on top of the first
    assert [100, 101, 102, 110, 111, 120] in gates  # the third on top of both
    assert result["land_to_landed_p95_s"] <= RUN_S + GITHUB_S
    for key in (
        "untested_merges",
        "partly_landed_unaccounted",
        "prs_closed_by_base_deletion",
        "merge_group_jobs_on_tested_trees",
        "runs_thrown_away",
    ):
        assert result[key] == 0, key


def test_a_failing_series_ahead_throws_its_speculation_away(
    database_url: str, tmp_path: Path
) -> None:
    result = bench.simulate("speculative", _args(tmp_path), _burst(broken=101), database_url)
    assert result["landed_prs"] == 6  # the first too, after its fix
    assert result["stopped_landings"] == 1
    assert result["runs_thrown_away"] >= 1  # the trees built on top of the failing series
    gates = _gate_runs(database_url)
    assert [110, 111, 120] in gates  # the third re-tested without the failing first
    assert result["untested_merges"] == 0 and result["prs_closed_by_base_deletion"] == 0
    assert result["partly_landed_unaccounted"] == 0


def test_per_pr_queues_a_child_only_once_its_parent_landed(
    database_url: str, tmp_path: Path
) -> None:
    """Today's practice: a child is based on its parent's branch, so it enters the merge queue
    for main only once its parent merged; each PR is tested alone on main + the PRs ahead of it
    in the queue, never on top of its own parent still in the queue."""
    result = bench.simulate("per-pr", _args(tmp_path), _burst(), database_url)
    assert result["landed_prs"] == 6 and result["landed_series"] == 3
    series_of = {n: key for key, prs in SERIES.items() for n in prs}
    for tree in _gate_runs(database_url):
        for key in SERIES:
            held = [n for n in tree if series_of.get(n) == key]
            assert len(held) <= 1, f"{held} of {key} tested together in {tree}"
    assert result["untested_merges"] == 0 and result["prs_closed_by_base_deletion"] == 0
    _sizes_hold_the_burst(result)


SERIES = {"root-#100": (100, 101, 102), "root-#110": (110, 111), "root-#120": (120,)}


def _sizes_hold_the_burst(result: dict[str, Any]) -> None:
    sizes = result["by_series_size"]
    assert (sizes["1"]["series"], sizes["1"]["prs"], sizes["1"]["landed_prs"]) == (1, 1, 1)
    assert (sizes["2-5"]["series"], sizes["2-5"]["prs"], sizes["2-5"]["landed_prs"]) == (2, 5, 5)
    assert sizes["6-30"]["series"] == 0 and sizes["6-30"]["gpu_hours_per_landed_pr"] is None
    spent = sum(values["gpu_hours"] for values in sizes.values())
    assert abs(spent - result["gpu_hours"]) < 0.05  # every GPU-hour in exactly one place
    assert sizes["1"]["gpu_hours"] > 0 and sizes["2-5"]["gpu_hours"] > 0


def test_gpu_hours_are_broken_down_by_series_size(database_url: str, tmp_path: Path) -> None:
    result = bench.simulate("speculative", _args(tmp_path), _burst(), database_url)
    _sizes_hold_the_burst(result)
    # the 3-PR and 2-PR series were each tested as one tree: less than a run per PR
    one_pr = result["by_series_size"]["1"]["gpu_hours_per_landed_pr"]
    assert result["by_series_size"]["2-5"]["gpu_hours_per_landed_pr"] < one_pr


def test_ratios_to_per_pr_in_all_and_per_series_size() -> None:
    def line(policy: str, total: float, one: float, few: float | None) -> dict[str, Any]:
        return {
            "policy": policy,
            "gpu_hours_per_landed_pr": total,
            "by_series_size": {
                "1": {"gpu_hours_per_landed_pr": one},
                "2-5": {"gpu_hours_per_landed_pr": few},
                "main": {"gpu_hours": 1.0},
            },
        }

    results = [line("per-pr", 4.0, 2.0, 4.0), line("speculative", 1.0, 2.0, None)]
    bench.add_ratios(results)
    assert results[0]["ratio_to_per_pr"] == 1.0
    assert results[1]["ratio_to_per_pr"] == 0.25
    assert results[1]["by_series_size"]["1"]["ratio_to_per_pr"] == 1.0
    assert results[1]["by_series_size"]["2-5"]["ratio_to_per_pr"] is None  # none landed
    assert "ratio_to_per_pr" not in results[1]["by_series_size"]["main"]


def _job(job_id: int, tree: str, status: str, reused: int | None = None) -> Job:
    return Job(
        id=job_id,
        repo_id=1,
        kind="integration",
        test_set="amax-group",
        shape="1x4",
        tree_sha=tree,
        commit_sha=tree,
        config_hash="c" * 64,
        status=status,
        reused_from_job_id=reused,
    )


def test_jobs_on_tested_trees_is_measured_from_the_jobs() -> None:
    """``merge_group_jobs_on_tested_trees`` counts jobs that ran on a tree and configuration
    that already passed (a reused result and a rerun of a failed tree do not count)."""
    jobs = [
        _job(1, "t1", "passed"),
        _job(2, "t1", "passed", reused=1),  # reused: spent nothing
        _job(3, "t2", "failed"),
        _job(4, "t2", "passed"),  # a rerun of a failed tree: not a tested tree yet
        _job(5, "t1", "passed"),  # ran again on a tree that passed
        _job(6, "t2", "passed"),  # and again
    ]
    assert bench.jobs_on_passed_trees(jobs) == 2
    assert bench.jobs_on_passed_trees(jobs[:4]) == 0
