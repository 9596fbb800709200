"""``benchmarks/bench_landing.py`` drives the real landing: on a burst of three series asked to
land within two minutes, the gate tests the second and third speculatively on top of the ones
ahead (gate runs), lands all of them within one series test run plus GitHub's calls, and keeps
every account; when the first series fails, the speculative runs on top of it are thrown away
and the others land without it. Simulated time, on both databases."""

from __future__ import annotations

import argparse
from pathlib import Path

from sqlmodel import Session, select

from benchmarks import bench_landing as bench
from stackbot.db.engine import make_engine
from stackbot.db.models import IntegrationRun

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
