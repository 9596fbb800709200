"""The reference suites under real torchrun (gloo on CPU), judged by every rank's JUnit XML."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gpu_suites.launch import Outcome, plain_pytest, rank_outcomes, torchrun_nodes

pytestmark = pytest.mark.torchrun

AMAX = "gpu_jobs.suites.amax_group.test_amax_group"


def assert_all_passed(per_rank: list[dict[str, Outcome]], log: str, *, at_least: int) -> None:
    for rank, outcomes in enumerate(per_rank):
        assert len(outcomes) >= at_least, (
            f"rank {rank} ran only {len(outcomes)} tests; log:\n{log[-4000:]}"
        )
        bad = {test: o for test, o in outcomes.items() if o.outcome != "passed"}
        assert not bad, f"rank {rank}: {bad}"
    assert all(set(o) == set(per_rank[0]) for o in per_rank), "ranks ran different tests"


def test_all_suites_pass_on_4_ranks(tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    (launch,) = torchrun_nodes(
        ["amax_group", "blockwise_recipe", "node_check"], junit, nodes=1, per_node=4
    )
    per_rank = rank_outcomes(junit, 4, launch.stdout)
    assert launch.returncode == 0, launch.stdout[-4000:]
    assert_all_passed(per_rank, launch.stdout, at_least=55)
    assert any(test.startswith(AMAX) for test in per_rank[0])


def test_amax_and_node_check_pass_on_2_nodes_of_4(tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    launches = torchrun_nodes(["amax_group", "node_check"], junit, nodes=2, per_node=4)
    log = "\n".join(launch.stdout for launch in launches)
    per_rank = rank_outcomes(junit, 8, log)
    assert [launch.returncode for launch in launches] == [0, 0], log[-4000:]
    assert_all_passed(per_rank, log, at_least=25)
    assert (
        f"{AMAX}::test_standard_grid_groups_hold_the_layout_ranks[tp2-cp2-dp2-pp1]" in per_rank[7]
    )


def test_reducing_over_the_global_group_is_caught(tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    (launch,) = torchrun_nodes(
        ["amax_group"],
        junit,
        nodes=1,
        per_node=4,
        env={"GPU_JOBS_AMAX_FAULT": "reduce_over_global"},
    )
    per_rank = rank_outcomes(junit, 4, launch.stdout)
    assert launch.returncode != 0
    caught = [
        f"{AMAX}::test_layer_on_every_other_rank_reduces_over_its_own_ranks",
        f"{AMAX}::test_delayed_scaling_amax_is_the_max_over_the_selected_group[strided-layer-tp_dp_cp]",
    ]
    for rank, outcomes in enumerate(per_rank):
        for test in caught:
            assert outcomes[test].outcome == "failed", (
                f"rank {rank} did not catch the fault in {test}"
            )
        assert "max over ranks [0, 2]" in outcomes[caught[1]].message or rank % 2
        assert "want the layer's [0, 2]" in outcomes[caught[0]].message or rank % 2
        detection = [t for t in outcomes if "global_group_is_detected" in t]
        assert len(detection) == 2 and all(outcomes[t].outcome == "passed" for t in detection)


def test_amax_suite_fails_loudly_on_one_rank(tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    launch = plain_pytest(["amax_group"], junit)
    (outcomes,) = rank_outcomes(junit, 1, launch.stdout)
    assert launch.returncode == 1
    assert not any(o.outcome == "skipped" for o in outcomes.values())
    needing_4 = {t: o for t, o in outcomes.items() if "missing_field" not in t}
    assert needing_4 and all(o.outcome == "failed" for o in needing_4.values())
    assert all(
        "needs an even number of ranks >= 4, but WORLD_SIZE=1" in o.message
        for o in needing_4.values()
    )


def test_blockwise_and_node_check_run_single_process(tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    launch = plain_pytest(["blockwise_recipe", "node_check"], junit)
    (outcomes,) = rank_outcomes(junit, 1, launch.stdout)
    assert launch.returncode == 0, launch.stdout[-4000:]
    assert_all_passed([outcomes], launch.stdout, at_least=30)
