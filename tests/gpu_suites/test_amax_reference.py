"""The amax reduction group reference, without a process group: layouts and selection."""

from __future__ import annotations

import pytest

from gpu_jobs.reference.amax import (
    GroupRegistry,
    ProcessGroupCollection,
    amax_reduction_group,
    build_collection,
    custom_grid,
    standard_grid,
    strided_layer_grid,
)


def test_standard_grid_follows_megatron_rank_order() -> None:
    grid = standard_grid(8, tp=2, cp=2, dp=2)
    assert grid.groups["tp"] == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert grid.groups["cp"] == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert grid.groups["dp"] == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert grid.groups["tp_cp"] == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert grid.groups["tp_dp_cp"] == (tuple(range(8)),)
    assert grid.groups["pp"] == tuple((rank,) for rank in range(8))


def test_pipeline_stages_split_tp_dp_cp() -> None:
    grid = standard_grid(4, tp=2, pp=2)
    assert grid.groups["tp_dp_cp"] == ((0, 1), (2, 3))  # the global group of DESIGN.md's case
    assert grid.groups["pp"] == ((0, 2), (1, 3))


def test_strided_layer_on_4_ranks_is_0_2_and_1_3() -> None:
    grid = strided_layer_grid(4)
    assert grid.members("tp_dp_cp", 0) == (0, 2) and grid.members("tp_dp_cp", 3) == (1, 3)
    assert grid.members("tp_cp", 2) == (2,)
    assert "pp" not in grid.groups


def test_strided_layer_on_8_ranks() -> None:
    grid = strided_layer_grid(8)
    assert grid.groups["tp_dp_cp"] == ((0, 2, 4, 6), (1, 3, 5, 7))
    assert grid.groups["tp_cp"] == ((0, 2), (1, 3), (4, 6), (5, 7))
    assert grid.groups["dp"] == ((0, 4), (1, 5), (2, 6), (3, 7))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: standard_grid(4, tp=3), r"tp·cp·dp·pp = 3·1·1·1 = 3 must equal the world size 4"),
        (lambda: standard_grid(4, tp=0, dp=4), "tp size must be a positive integer"),
        (
            lambda: custom_grid(4, {"tp": [[0, 1], [1, 2, 3]]}),
            r"'tp' groups .* must hold each rank 0..3 exactly once",
        ),
        (lambda: custom_grid(2, {"ep": [[0], [1]]}), "unknown group kind 'ep'"),
        (lambda: strided_layer_grid(6 - 3), "needs an even world size >= 4; got 3"),
        (lambda: standard_grid(2, dp=2).members("tp_cp", 5), "rank 5 is in no 'tp_cp' group"),
        (lambda: custom_grid(2, {"dp": [[0, 1]]}).members("tp", 0), "grid has no 'tp' groups"),
    ],
)
def test_bad_layouts_are_named(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(("tp_only_amax_red", "kind"), [(True, "tp_cp"), (False, "tp_dp_cp")])
def test_reduction_group_selection(tp_only_amax_red: bool, kind: str) -> None:
    groups = {"tp_cp": "tp_cp-group", "tp_dp_cp": "tp_dp_cp-group"}
    assert (
        amax_reduction_group(ProcessGroupCollection(**groups), tp_only_amax_red) == f"{kind}-group"
    )


@pytest.mark.parametrize(("tp_only_amax_red", "missing"), [(True, "tp_cp"), (False, "tp_dp_cp")])
def test_missing_field_raises_value_error_naming_it(tp_only_amax_red: bool, missing: str) -> None:
    present = {"tp": "tp-group", "tp_cp": "tp_cp-group", "tp_dp_cp": "tp_dp_cp-group"}
    del present[missing]
    with pytest.raises(ValueError, match=f"has no '{missing}' group") as caught:
        amax_reduction_group(ProcessGroupCollection(**present), tp_only_amax_red)
    assert f"tp_only_amax_red={tp_only_amax_red}" in str(caught.value)


def test_every_rank_creates_the_same_groups_in_the_same_order() -> None:
    """new_group is collective: differing sequences across ranks would deadlock."""
    layouts = [
        standard_grid(8, tp=2, cp=2, dp=2),
        strided_layer_grid(8),
        standard_grid(8, tp=4, dp=2),
    ]
    sequences = []
    for rank in range(8):
        created: list[tuple[int, ...]] = []

        def record(ranks: list[int], log: list[tuple[int, ...]] = created) -> tuple[int, ...]:
            log.append(tuple(ranks))
            return tuple(ranks)

        registry = GroupRegistry(create=record)
        collections = [build_collection(layout, rank, registry) for layout in layouts]
        assert collections[1].tp_dp_cp == ((0, 2, 4, 6) if rank % 2 == 0 else (1, 3, 5, 7))
        assert collections[0].tp == (rank - rank % 2, rank - rank % 2 + 1)
        sequences.append(created)
    assert all(sequence == sequences[0] for sequence in sequences)
    assert len(sequences[0]) == len(set(sequences[0]))  # each rank set created once
