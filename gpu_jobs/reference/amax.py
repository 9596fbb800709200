"""Reference for the amax reduction group (Megatron-LM PRs #8034/#8035).

FP8/FP4 autocast reduces amaxes over the *owner's* process-group collection: ``tp_cp`` when
``tp_only_amax_red`` is set, else ``tp_dp_cp``. A layer whose TP×DP×CP ranks are [0, 2] on 4
ranks must reduce over [0, 2], not over the global model-parallel group [0, 1].

A :class:`GridLayout` says, without torch.distributed, which ranks form each group kind; a
:class:`ProcessGroupCollection` holds one rank's real process groups built from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.distributed as dist

GROUP_KINDS: tuple[str, ...] = ("tp", "cp", "dp", "pp", "tp_cp", "tp_dp_cp")
Ranks = tuple[int, ...]


@dataclass(frozen=True)
class GridLayout:
    """For each group kind, the groups (rank tuples) that partition the world."""

    world_size: int
    groups: Mapping[str, tuple[Ranks, ...]]

    def members(self, kind: str, rank: int) -> Ranks:
        """The ranks of ``rank``'s group of ``kind``."""
        if kind not in self.groups:
            raise ValueError(f"grid has no {kind!r} groups; it has {sorted(self.groups)}")
        for ranks in self.groups[kind]:
            if rank in ranks:
                return ranks
        raise ValueError(f"rank {rank} is in no {kind!r} group of a {self.world_size}-rank grid")


def standard_grid(
    world_size: int, *, tp: int = 1, cp: int = 1, dp: int = 1, pp: int = 1
) -> GridLayout:
    """Megatron's rank order (TP fastest, then CP, DP, PP): rank = t + tp·(c + cp·(d + dp·p))."""
    sizes = {"tp": tp, "cp": cp, "dp": dp, "pp": pp}
    for name, size in sizes.items():
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"{name} size must be a positive integer; got {size!r}")
    if tp * cp * dp * pp != world_size:
        raise ValueError(
            f"tp·cp·dp·pp = {tp}·{cp}·{dp}·{pp} = {tp * cp * dp * pp} must equal the world size {world_size}"
        )

    def rank_of(t: int, c: int, d: int, p: int) -> int:
        return t + tp * (c + cp * (d + dp * p))

    coords = [
        (t, c, d, p) for p in range(pp) for d in range(dp) for c in range(cp) for t in range(tp)
    ]
    # Each kind varies some coordinates inside a group and fixes the others.
    varying = {
        "tp": (True, False, False, False),
        "cp": (False, True, False, False),
        "dp": (False, False, True, False),
        "pp": (False, False, False, True),
        "tp_cp": (True, True, False, False),
        "tp_dp_cp": (True, True, True, False),
    }
    groups: dict[str, tuple[Ranks, ...]] = {}
    for kind, varies in varying.items():
        by_key: dict[tuple[int, ...], list[int]] = {}
        for coord in coords:
            key = tuple(value for value, free in zip(coord, varies, strict=True) if not free)
            by_key.setdefault(key, []).append(rank_of(*coord))
        groups[kind] = tuple(sorted(tuple(sorted(ranks)) for ranks in by_key.values()))
    return GridLayout(world_size=world_size, groups=groups)


def custom_grid(world_size: int, groups: Mapping[str, Sequence[Sequence[int]]]) -> GridLayout:
    """A grid given group by group; each kind must partition ranks 0..world_size-1."""
    if world_size < 1:
        raise ValueError(f"world size must be >= 1; got {world_size}")
    checked: dict[str, tuple[Ranks, ...]] = {}
    for kind, kind_groups in groups.items():
        if kind not in GROUP_KINDS:
            raise ValueError(f"unknown group kind {kind!r}; kinds are {list(GROUP_KINDS)}")
        flat = [rank for ranks in kind_groups for rank in ranks]
        if sorted(flat) != list(range(world_size)):
            raise ValueError(
                f"{kind!r} groups {[list(r) for r in kind_groups]} must hold each rank "
                f"0..{world_size - 1} exactly once"
            )
        checked[kind] = tuple(sorted(tuple(sorted(ranks)) for ranks in kind_groups))
    return GridLayout(world_size=world_size, groups=checked)


def strided_layer_grid(world_size: int) -> GridLayout:
    """A layer living on every other rank: one instance on the even ranks, one on the odd.

    On 4 ranks its TP×DP×CP groups are [0, 2] and [1, 3] (TP 1, DP 2); on 8 ranks TP is 2
    ([0, 2], [4, 6], ...) and TP×DP×CP is [0, 2, 4, 6] and [1, 3, 5, 7].
    """
    if world_size < 4 or world_size % 2:
        raise ValueError(f"the strided layer needs an even world size >= 4; got {world_size}")
    instances = [list(range(parity, world_size, 2)) for parity in (0, 1)]
    tp = 2 if world_size >= 8 else 1
    tp_groups = [inst[i : i + tp] for inst in instances for i in range(0, len(inst), tp)]
    dp_groups = [inst[t::tp] for inst in instances for t in range(tp)]
    singletons = [[rank] for rank in range(world_size)]
    return custom_grid(
        world_size,
        {
            "tp": tp_groups,
            "cp": singletons,
            "dp": dp_groups,
            "tp_cp": tp_groups,
            "tp_dp_cp": instances,
        },
    )


@dataclass(frozen=True)
class ProcessGroupCollection:
    """One rank's process groups by kind; a layer may own a collection without some kinds."""

    tp: Any = None
    cp: Any = None
    dp: Any = None
    pp: Any = None
    tp_cp: Any = None
    tp_dp_cp: Any = None


class GroupRegistry:
    """Creates each distinct rank set's process group once.

    ``torch.distributed.new_group`` must be called by every rank for every group in the same
    order; callers guarantee that by asking for the same layouts in the same order on all ranks.
    """

    def __init__(self, create: Callable[[list[int]], Any] | None = None) -> None:
        self._create = create or (lambda ranks: dist.new_group(ranks=ranks))
        self._groups: dict[Ranks, Any] = {}

    def group(self, ranks: Ranks) -> Any:
        if ranks not in self._groups:
            self._groups[ranks] = self._create(list(ranks))
        return self._groups[ranks]


def build_collection(
    layout: GridLayout, rank: int, registry: GroupRegistry
) -> ProcessGroupCollection:
    """``rank``'s collection; creates every group of the layout, in a fixed order, on all ranks."""
    mine: dict[str, Any] = {}
    for kind in GROUP_KINDS:
        for ranks in layout.groups.get(kind, ()):
            group = registry.group(ranks)
            if rank in ranks:
                mine[kind] = group
    return ProcessGroupCollection(**mine)


def amax_reduction_group(collection: ProcessGroupCollection, tp_only_amax_red: bool) -> Any:
    """``tp_cp`` when ``tp_only_amax_red``, else ``tp_dp_cp``; ValueError naming a missing field."""
    kind = "tp_cp" if tp_only_amax_red else "tp_dp_cp"
    group = getattr(collection, kind)
    if group is None:
        present = [f.name for f in fields(collection) if getattr(collection, f.name) is not None]
        raise ValueError(
            f"process-group collection has no {kind!r} group, needed to reduce amaxes with "
            f"tp_only_amax_red={tp_only_amax_red} (it has {present})"
        )
    return group


@dataclass
class DelayedScalingState:
    """Delayed scaling of ``n`` tensors: an amax history (newest row first) and their scales."""

    amax_history: torch.Tensor
    scale: torch.Tensor
    fp8_max: float = 448.0

    @classmethod
    def fresh(
        cls, n: int, *, history_len: int, device: torch.device, fp8_max: float = 448.0
    ) -> DelayedScalingState:
        history = torch.zeros(history_len, n, dtype=torch.float32, device=device)
        return cls(
            amax_history=history,
            scale=torch.ones(n, dtype=torch.float32, device=device),
            fp8_max=fp8_max,
        )


def delayed_scaling_step(
    state: DelayedScalingState, local_amax: torch.Tensor, group: Any
) -> torch.Tensor:
    """Record this step's amaxes reduced (MAX) over ``group`` and update the scales.

    Returns the reduced amaxes. Every rank of ``group`` ends the step with the same history
    and scales, which is the point of reducing over the right group.
    """
    reduced = local_amax.to(torch.float32).clone()
    dist.all_reduce(reduced, op=dist.ReduceOp.MAX, group=group)
    state.amax_history = torch.roll(state.amax_history, shifts=1, dims=0)
    state.amax_history[0] = reduced
    amax = state.amax_history.amax(dim=0)
    usable = (amax > 0) & torch.isfinite(amax)
    state.scale = torch.where(usable, state.fp8_max / amax, state.scale)
    return reduced
