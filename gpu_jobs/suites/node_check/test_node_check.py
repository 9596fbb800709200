"""node-check: can these ranks talk to each other and cast FP8 on their devices?

The runner runs this before the real targets; when it fails the job is ``infra`` (a broken
node, fabric or install), not a test failure. It takes a couple of seconds. Messages start
with ``infra:`` and name what to look at.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from gpu_jobs.reference import fp8
from gpu_jobs.reference.amax import GroupRegistry
from gpu_jobs.reference.blockwise import quantize_blockwise
from gpu_jobs.reference.blockwise_check import fp8_cast_mismatches
from gpu_jobs.suites.world import World


def test_launch_environment_matches_the_process_group(world: World) -> None:
    problems = []
    if dist.get_world_size() != int(os.environ.get("WORLD_SIZE", "1")):
        problems.append(
            f"process group has {dist.get_world_size()} ranks, WORLD_SIZE says otherwise"
        )
    if dist.get_rank() != int(os.environ.get("RANK", "0")):
        problems.append(
            f"process-group rank {dist.get_rank()} is not RANK={os.environ.get('RANK')}"
        )
    if world.backend == "nccl" and torch.cuda.device_count() <= world.local_rank:
        problems.append(
            f"LOCAL_RANK {world.local_rank} but only {torch.cuda.device_count()} GPU(s) visible: "
            "check CUDA_VISIBLE_DEVICES and --nproc-per-node"
        )
    try:
        probe = torch.arange(4, dtype=torch.float32, device=world.device) * 2
        if probe.sum().item() != 12.0:
            problems.append(f"arithmetic on {world.device} is wrong")
    except RuntimeError as error:
        problems.append(f"cannot compute on {world.device}: {error}")
    world.settle(not problems, "infra: " + "; ".join(problems))


def test_world_all_reduce(world: World) -> None:
    value = torch.tensor([float(world.rank + 1)], device=world.device)
    dist.all_reduce(value)
    want = world.world_size * (world.world_size + 1) / 2
    world.settle(
        value.item() == want,
        f"infra: all-reduce over all {world.world_size} ranks ({world.backend}) gave {value.item()}, "
        f"want {want}: check the interconnect and the {world.backend.upper()} install",
    )


def test_node_and_cross_node_subgroup_all_reduce(
    world: World, group_registry: GroupRegistry
) -> None:
    """Each node's ranks, then the ranks holding the same local index on every node."""
    per_node = world.local_world_size
    nodes = -(-world.world_size // per_node)
    node_groups = [
        tuple(range(n * per_node, min((n + 1) * per_node, world.world_size))) for n in range(nodes)
    ]
    cross_groups = [tuple(range(i, world.world_size, per_node)) for i in range(per_node)]
    problems = []
    for label, groups in (("intra-node", node_groups), ("cross-node", cross_groups)):
        mine = next(ranks for ranks in groups if world.rank in ranks)
        created = [group_registry.group(ranks) for ranks in groups]
        value = torch.tensor([float(world.rank + 1)], device=world.device)
        dist.all_reduce(value, group=created[groups.index(mine)])
        want = float(sum(rank + 1 for rank in mine))
        if value.item() != want:
            problems.append(
                f"{label} all-reduce over ranks {list(mine)} gave {value.item()}, want {want}"
            )
    world.settle(not problems, "infra: " + "; ".join(problems))


def test_fp8_cast_round_trip_on_device(world: World) -> None:
    problems = []
    for fmt in (fp8.E4M3, fp8.E5M2):
        values = [v for v in fp8.decode_table(fmt) if v == v and abs(v) != float("inf")]
        problems += fp8_cast_mismatches(values, fmt, world.device)
    x = torch.linspace(-3.0, 3.0, 256 * 130, device=world.device).reshape(256, 130)
    q, _ = quantize_blockwise(x, block=(1, 128), fp8_format="e4m3", power_2_scale=True)
    codes = world.gather(q.view(torch.uint8))
    if any(not torch.equal(codes[rank], codes[0]) for rank in range(world.world_size)):
        problems.append("ranks quantized the same tensor to different bytes")
    if not torch.isfinite(q.to(torch.float32)).all():
        problems.append("FP8 quantization produced NaN or inf from finite input")
    world.settle(not problems, f"infra: FP8 on {world.device}: " + "; ".join(problems))
