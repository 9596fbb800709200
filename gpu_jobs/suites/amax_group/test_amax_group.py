"""amax-group: amaxes are reduced over the owner's group, never over a global one.

Needs an even number of ranks >= 4 (written for 4 and 8); with fewer, the tests that need them
fail saying so. Setting GPU_JOBS_AMAX_FAULT=reduce_over_global makes the group under test the
global model-parallel group instead of the layer's own, to show the suite catches that bug.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.distributed as dist

from gpu_jobs.reference.amax import (
    GROUP_KINDS,
    DelayedScalingState,
    GridLayout,
    GroupRegistry,
    amax_reduction_group,
    build_collection,
    custom_grid,
    delayed_scaling_step,
    standard_grid,
    strided_layer_grid,
)
from gpu_jobs.suites.world import World

SUITE = "amax-group"
FAULT_ENV = "GPU_JOBS_AMAX_FAULT"
# (tp, cp, dp, pp) grids per world size; parametrised at collection, when WORLD_SIZE is known.
STANDARD_GRIDS: dict[int, list[tuple[int, int, int, int]]] = {
    4: [(4, 1, 1, 1), (2, 2, 1, 1), (2, 1, 2, 1), (1, 2, 2, 1), (1, 1, 4, 1), (2, 1, 1, 2)],
    8: [(2, 2, 2, 1), (4, 1, 2, 1), (2, 1, 4, 1), (1, 2, 4, 1), (2, 2, 1, 2), (2, 1, 2, 2)],
}
WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))
STRIDED = "strided-layer"

ReduceGroupFor = Callable[[GridLayout, bool], Any]


def grid_shapes(world_size: int) -> list[tuple[int, int, int, int]]:
    if world_size in STANDARD_GRIDS:
        return STANDARD_GRIDS[world_size]
    if world_size >= 4 and world_size % 2 == 0:
        return [(world_size, 1, 1, 1), (2, 1, world_size // 2, 1), (1, 1, world_size, 1)]
    return STANDARD_GRIDS[4]  # tests fail on require_ranks before using these


GRIDS = grid_shapes(WORLD_SIZE)
GRID_IDS = [f"tp{tp}-cp{cp}-dp{dp}-pp{pp}" for tp, cp, dp, pp in GRIDS]


def layout_named(name: str, world_size: int) -> GridLayout:
    if name == STRIDED:
        return strided_layer_grid(world_size)
    tp, cp, dp, pp = GRIDS[GRID_IDS.index(name)]
    return standard_grid(world_size, tp=tp, cp=cp, dp=dp, pp=pp)


def global_layout(world_size: int) -> GridLayout:
    """The model-parallel state of the whole job: TP 2, PP 2 (on 4 ranks TP×DP×CP is [0, 1])."""
    if world_size % 4 == 0:
        return standard_grid(world_size, tp=2, dp=world_size // 4, pp=2)
    return standard_grid(world_size, tp=2, dp=world_size // 2)


def local_amaxes(world: World) -> torch.Tensor:
    """Distinct per rank; entry k's largest value sits on rank (world_size - 1 - k) mod W."""
    entries = torch.arange(world.world_size, dtype=torch.float32)
    values = (entries + world.rank) % world.world_size + 1.0
    return (values * 0.375).to(world.device)


def amax_mismatch(
    reduced: torch.Tensor, everyone: torch.Tensor, members: Sequence[int]
) -> str | None:
    """Why ``reduced`` is not the max over exactly ``members``' amaxes, or None when it is."""
    expected = everyone[list(members)].amax(dim=0)
    if torch.equal(reduced, expected):
        return None
    return (
        f"reduced amaxes {reduced.tolist()} != max over ranks {list(members)}: {expected.tolist()}"
    )


@pytest.fixture
def reduce_group_for(world: World, group_registry: GroupRegistry) -> ReduceGroupFor:
    """The group the code under test reduces over for a layer laid out as given."""
    fault = os.environ.get(FAULT_ENV, "")
    if fault not in ("", "reduce_over_global"):
        pytest.fail(f"{FAULT_ENV} must be unset or 'reduce_over_global'; got {fault!r}")

    def select(layout: GridLayout, tp_only_amax_red: bool) -> Any:
        collection = build_collection(layout, world.rank, group_registry)
        chosen = amax_reduction_group(collection, tp_only_amax_red)
        if fault:
            wrong = build_collection(global_layout(world.world_size), world.rank, group_registry)
            return wrong.tp_dp_cp
        return chosen

    return select


@pytest.mark.parametrize("shape", GRID_IDS)
def test_standard_grid_groups_hold_the_layout_ranks(
    world: World, group_registry: GroupRegistry, shape: str
) -> None:
    world.require_ranks(4, SUITE, even=True)
    layout = layout_named(shape, world.world_size)
    collection = build_collection(layout, world.rank, group_registry)
    problems = []
    for kind in GROUP_KINDS:
        expected = layout.members(kind, world.rank)
        group = getattr(collection, kind)
        ones = torch.ones(1, device=world.device)
        dist.all_reduce(ones, group=group)
        got = sorted(dist.get_process_group_ranks(group))
        if got != list(expected) or int(ones.item()) != len(expected):
            problems.append(
                f"{kind}: group ranks {got}, sum of ones {ones.item()}, want {list(expected)}"
            )
    world.settle(not problems, "; ".join(problems))


def test_layer_on_every_other_rank_reduces_over_its_own_ranks(
    world: World, reduce_group_for: ReduceGroupFor
) -> None:
    world.require_ranks(4, SUITE, even=True)
    layout = strided_layer_grid(world.world_size)
    got = tuple(sorted(dist.get_process_group_ranks(reduce_group_for(layout, False))))
    want = layout.members("tp_dp_cp", world.rank)
    if world.world_size == 4:
        # DESIGN.md's case: the layer on [0, 2] reduces over [0, 2], not the global [0, 1].
        want = (0, 2) if world.rank % 2 == 0 else (1, 3)
    world.settle(got == want, f"amax reduction group is {list(got)}, want the layer's {list(want)}")


@pytest.mark.parametrize("tp_only_amax_red", [False, True], ids=["tp_dp_cp", "tp_cp"])
@pytest.mark.parametrize("layout_name", [*GRID_IDS, STRIDED])
def test_delayed_scaling_amax_is_the_max_over_the_selected_group(
    world: World, reduce_group_for: ReduceGroupFor, layout_name: str, tp_only_amax_red: bool
) -> None:
    world.require_ranks(4, SUITE, even=True)
    layout = layout_named(layout_name, world.world_size)
    group = reduce_group_for(layout, tp_only_amax_red)
    members = layout.members("tp_cp" if tp_only_amax_red else "tp_dp_cp", world.rank)
    local = local_amaxes(world)
    everyone = world.gather(local)
    state = DelayedScalingState.fresh(local.numel(), history_len=4, device=world.device)
    reduced = delayed_scaling_step(state, local, group)
    scales = world.gather(state.scale)
    problem = amax_mismatch(reduced, everyone, members)
    if problem is None and not all(torch.equal(scales[m], state.scale) for m in members):
        problem = f"scales differ inside group {list(members)}: {scales[list(members)].tolist()}"
    world.settle(problem is None, problem or "")


@pytest.mark.parametrize("wrong_group", ["parallel_state_tp_dp_cp", "world"])
def test_reducing_over_a_global_group_is_detected(
    world: World, group_registry: GroupRegistry, wrong_group: str
) -> None:
    world.require_ranks(4, SUITE, even=True)
    layout = strided_layer_grid(world.world_size)
    global_collection = build_collection(
        global_layout(world.world_size), world.rank, group_registry
    )
    group = (
        global_collection.tp_dp_cp if wrong_group == "parallel_state_tp_dp_cp" else dist.group.WORLD
    )
    local = local_amaxes(world)
    everyone = world.gather(local)
    state = DelayedScalingState.fresh(local.numel(), history_len=4, device=world.device)
    reduced = delayed_scaling_step(state, local, group)
    mismatch = amax_mismatch(reduced, everyone, layout.members("tp_dp_cp", world.rank))
    detected = world.any_rank(mismatch is not None)
    world.settle(
        detected,
        f"reducing over the {wrong_group} group gave exactly the layer group's amaxes on every "
        "rank: the check cannot tell a wrong reduction group from the right one",
    )


@pytest.mark.parametrize(("tp_only_amax_red", "missing"), [(True, "tp_cp"), (False, "tp_dp_cp")])
def test_missing_field_raises_value_error_naming_it(
    world: World, group_registry: GroupRegistry, tp_only_amax_red: bool, missing: str
) -> None:
    full = standard_grid(world.world_size, dp=world.world_size)
    partial = custom_grid(
        world.world_size, {kind: groups for kind, groups in full.groups.items() if kind != missing}
    )
    collection = build_collection(partial, world.rank, group_registry)
    try:
        amax_reduction_group(collection, tp_only_amax_red)
    except ValueError as error:
        problem = (
            None if missing in str(error) else f"ValueError does not name {missing!r}: {error}"
        )
    else:
        problem = f"no ValueError for a collection without {missing!r}"
    world.settle(problem is None, problem or "")
