"""blockwise-recipe: the reference blockwise FP8 quantizer on this rank's device.

Runs fully as plain single-process pytest; under torchrun every rank also checks that all
ranks produced the same bytes.
"""

from __future__ import annotations

import math

import pytest
import torch

from gpu_jobs.reference import fp8
from gpu_jobs.reference.blockwise import (
    BLOCKS,
    Block,
    BlockwiseRecipe,
    dequantize_blockwise,
    per_element,
    quantize_blockwise,
    scale_inv_shape,
)
from gpu_jobs.reference.blockwise_check import (
    adversarial_matrix,
    cross_check_blockwise,
    fp8_cast_mismatches,
    rounding_probe_values,
)
from gpu_jobs.suites.world import World

BLOCK_IDS = ["1x128", "128x128"]
FORMATS = ["e4m3", "e5m2"]
ZERO_BLOCK_SCALE_EXPONENT = {"e4m3": 48, "e5m2": 55}


def _decoded(q: torch.Tensor) -> torch.Tensor:
    return q.to(torch.float32)


def _randn(rows: int, cols: int, seed: int, device: torch.device) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=generator).to(device)


@pytest.mark.parametrize("fp8_format", FORMATS)
@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_all_zero_blocks_get_a_finite_power_of_2_scale(
    world: World, block: Block, fp8_format: str
) -> None:
    x = _randn(300, 520, seed=1, device=world.device)
    x[:128, :128] = 0.0  # one all-zero block of either shape
    x[256:, :] = 0.0  # an all-zero edge strip
    q, scale_inv = quantize_blockwise(
        x, block=block, fp8_format=fp8_format, power_2_scale=True, amax_epsilon=1e-12
    )
    want = 2.0 ** -ZERO_BLOCK_SCALE_EXPONENT[fp8_format]
    zero_blocks = [(0, 0), (scale_inv.shape[0] - 1, 0)]
    problems = [
        f"scale_inv{index} = {scale_inv[index].item()!r}, want 2^-{ZERO_BLOCK_SCALE_EXPONENT[fp8_format]}"
        for index in zero_blocks
        if scale_inv[index].item() != want
    ]
    if not torch.isfinite(_decoded(q)).all() or not torch.isfinite(scale_inv).all():
        problems.append("NaN or inf in q or scale_inv for finite input")
    if (_decoded(q)[:128, :128] != 0).any():
        problems.append("an all-zero block did not quantize to zeros")
    world.settle(not problems, "; ".join(problems))


@pytest.mark.parametrize("power_2_scale", [True, False], ids=["pow2", "fp32"])
@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_epsilon_leaves_non_zero_blocks_unchanged(
    world: World, block: Block, power_2_scale: bool
) -> None:
    x = _randn(257, 385, seed=2, device=world.device) * 1e-3
    results = [
        quantize_blockwise(
            x, block=block, fp8_format="e4m3", power_2_scale=power_2_scale, amax_epsilon=eps
        )
        for eps in (0.0, 1e-12)
    ]
    (q0, s0), (q1, s1) = results
    same = torch.equal(q0.view(torch.uint8), q1.view(torch.uint8)) and torch.equal(s0, s1)
    world.settle(same, "amax_epsilon=1e-12 changed blocks whose amax is far above it")


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_nan_elements_are_ignored_by_amax(world: World, block: Block) -> None:
    x = _randn(130, 260, seed=3, device=world.device)
    holes = torch.zeros_like(x, dtype=torch.bool)
    holes[::7, ::5] = True
    with_nan = torch.where(holes, torch.full_like(x, math.nan), x)
    without = torch.where(holes, torch.zeros_like(x), x)
    q_nan, s_nan = quantize_blockwise(with_nan, block=block, power_2_scale=True)
    q_zero, s_zero = quantize_blockwise(without, block=block, power_2_scale=True)
    problems = []
    if not torch.equal(s_nan, s_zero):
        problems.append("NaN elements changed the block scales")
    if not torch.isnan(_decoded(q_nan)[holes]).all():
        problems.append("a NaN element did not stay NaN")
    if not torch.equal(q_nan.view(torch.uint8)[~holes], q_zero.view(torch.uint8)[~holes]):
        problems.append("NaN elements changed their neighbours' codes")
    world.settle(not problems, "; ".join(problems))


@pytest.mark.parametrize("fp8_format", FORMATS)
def test_saturates_at_fp8_max(world: World, fp8_format: str) -> None:
    fmax = fp8.fp8_format(fp8_format).max_finite
    x = torch.tensor([[math.inf, -math.inf, 1e30, -1e30, 1.0, math.nan] * 22], device=world.device)
    q, scale_inv = quantize_blockwise(x, fp8_format=fp8_format, power_2_scale=True)
    got = _decoded(q)[0, :5].tolist()
    want = [fmax, -fmax, fmax, -fmax, 1.0]
    problems = (
        [] if got == want else [f"got {got}, want {want} (a block holding inf keeps scale 1)"]
    )
    if scale_inv[0, 0].item() != 1.0:
        problems.append(f"scale_inv {scale_inv[0, 0].item()}, want 1 for a block whose amax is inf")
    world.settle(not problems, "; ".join(problems))


@pytest.mark.parametrize("power_2_scale", [True, False], ids=["pow2", "fp32"])
@pytest.mark.parametrize("fp8_format", FORMATS)
@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_dequantization_error_within_format_bound(
    world: World, block: Block, fp8_format: str, power_2_scale: bool
) -> None:
    """Normal-range elements: |x̂ - x| <= (2^-(mantissa bits + 1) + 2^-21)·|x|.

    2^-(m+1) is FP8's half ulp (2^-4 for E4M3, 2^-3 for E5M2); 2^-21 covers the three fp32
    roundings (x·scale, 1/scale, q·scale_inv; exact with power-of-2 scales). Elements that
    scale into FP8's subnormal range are off by at most half a subnormal step, times scale_inv.
    """
    fmt = fp8.fp8_format(fp8_format)
    x = _randn(300, 700, seed=4, device=world.device) * torch.exp2(
        torch.linspace(-20, 20, 700, device=world.device)
    )
    q, scale_inv = quantize_blockwise(
        x, block=block, fp8_format=fp8_format, power_2_scale=power_2_scale
    )
    restored = dequantize_blockwise(q, scale_inv, block=block)
    per_element_scale_inv = per_element(scale_inv, (x.shape[0], x.shape[1]), block=block)
    error = (restored - x).abs()
    normal = x.abs() >= fmt.min_normal * per_element_scale_inv
    bound = torch.where(
        normal,
        (fmt.half_ulp_relative + 2.0**-21) * x.abs(),
        fmt.min_subnormal / 2 * per_element_scale_inv * (1 + 2.0**-21),
    )
    worst = (error / bound.clamp_min(torch.finfo(torch.float32).tiny)).max().item()
    world.settle(bool((error <= bound).all()), f"dequantization error up to {worst:.3f}× the bound")


@pytest.mark.parametrize(
    ("dtype", "shape", "block", "fp8_format", "power_2_scale", "amax_epsilon"),
    [
        (torch.float32, (3, 130), (1, 128), "e4m3", True, 1e-12),
        (torch.float32, (3, 130), (128, 128), "e5m2", False, 0.0),
        (torch.float32, (129, 257), (128, 128), "e4m3", True, 0.0),
        (torch.float32, (129, 257), (1, 128), "e5m2", True, 1e-12),
        (torch.bfloat16, (5, 300), (1, 128), "e4m3", False, 0.0),
        (torch.float16, (131, 129), (128, 128), "e5m2", True, 1e-12),
    ],
    ids=[
        "f32-3x130",
        "f32-3x130-sq",
        "f32-129x257-sq",
        "f32-129x257",
        "bf16-5x300",
        "f16-131x129-sq",
    ],
)
def test_matches_the_scalar_rule_element_by_element(
    world: World,
    dtype: torch.dtype,
    shape: tuple[int, int],
    block: Block,
    fp8_format: str,
    power_2_scale: bool,
    amax_epsilon: float,
) -> None:
    x = adversarial_matrix(*shape, seed=5, dtype=dtype).to(world.device)
    problems = cross_check_blockwise(
        x,
        block=block,
        fp8_format=fp8_format,
        power_2_scale=power_2_scale,
        amax_epsilon=amax_epsilon,
    )
    world.settle(not problems, "; ".join(problems))


@pytest.mark.parametrize("fp8_format", FORMATS)
def test_device_cast_rounds_to_nearest_even(world: World, fp8_format: str) -> None:
    fmt = fp8.fp8_format(fp8_format)
    problems = fp8_cast_mismatches(rounding_probe_values(fmt), fmt, world.device)
    world.settle(not problems, "; ".join(problems))


@pytest.mark.parametrize("block", BLOCKS, ids=BLOCK_IDS)
def test_bit_exact_across_runs_and_ranks(world: World, block: Block) -> None:
    rows, cols = (1000, 1100) if world.device.type == "cpu" else (2100, 4200)
    x = adversarial_matrix(rows, cols, seed=6).to(world.device)
    first = quantize_blockwise(
        x, block=block, fp8_format="e4m3", power_2_scale=False, amax_epsilon=1e-12
    )
    second = quantize_blockwise(
        x, block=block, fp8_format="e4m3", power_2_scale=False, amax_epsilon=1e-12
    )
    q_bytes, scale_bits = first[0].view(torch.uint8), first[1].view(torch.int32)
    problems = []
    if not (
        torch.equal(q_bytes, second[0].view(torch.uint8))
        and torch.equal(scale_bits, second[1].view(torch.int32))
    ):
        problems.append("two runs on this rank differ")
    if tuple(first[1].shape) != scale_inv_shape((rows, cols), block):
        problems.append(f"scale_inv shape {tuple(first[1].shape)}")
    all_q, all_scales = world.gather(q_bytes), world.gather(scale_bits)
    differing = [
        rank
        for rank in range(world.world_size)
        if not (torch.equal(all_q[rank], all_q[0]) and torch.equal(all_scales[rank], all_scales[0]))
    ]
    if differing:
        problems.append(f"ranks {differing} differ from rank 0")
    world.settle(not problems, "; ".join(problems))


def test_recipe_defaults(world: World) -> None:
    hybrid, e4m3 = BlockwiseRecipe(fp8_format="HYBRID"), BlockwiseRecipe(fp8_format="E4M3")
    got = {
        (recipe.fp8_format, role): (params.block, params.fp8_format)
        for recipe in (hybrid, e4m3)
        for role in ("input", "weight", "grad")
        for params in [recipe.params(role)]
    }
    want = {
        ("HYBRID", "input"): ((1, 128), "e4m3"),
        ("HYBRID", "weight"): ((128, 128), "e4m3"),
        ("HYBRID", "grad"): ((1, 128), "e5m2"),
        ("E4M3", "input"): ((1, 128), "e4m3"),
        ("E4M3", "weight"): ((128, 128), "e4m3"),
        ("E4M3", "grad"): ((1, 128), "e4m3"),
    }
    world.settle(got == want, f"recipe parameters {got}")
