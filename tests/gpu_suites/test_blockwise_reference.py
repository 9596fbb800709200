"""The vectorised blockwise quantizer against the scalar statement of DESIGN.md's rule."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_jobs.reference import fp8
from gpu_jobs.reference.blockwise import (
    BlockwiseRecipe,
    dequantize_blockwise,
    per_element,
    quantize_blockwise,
)
from gpu_jobs.reference.blockwise_check import adversarial_matrix, cross_check_blockwise
from gpu_jobs.reference.blockwise_scalar import FP32_MAX, block_scale, to_fp32

ROW, SQUARE = (1, 128), (128, 128)
FORMATS = ["e4m3", "e5m2"]


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["f32", "bf16", "f16"]
)
@pytest.mark.parametrize(
    "shape", [(3, 130), (129, 257), (1, 1), (130, 3)], ids=["3x130", "129x257", "1x1", "130x3"]
)
@pytest.mark.parametrize("block", [ROW, SQUARE], ids=["1x128", "128x128"])
@pytest.mark.parametrize("fp8_format", FORMATS)
@pytest.mark.parametrize(
    ("power_2_scale", "amax_epsilon"), [(True, 1e-12), (False, 0.0)], ids=["pow2-eps", "fp32"]
)
def test_vectorised_matches_scalar_rule_on_adversarial_input(
    dtype: torch.dtype,
    shape: tuple[int, int],
    block: tuple[int, int],
    fp8_format: str,
    power_2_scale: bool,
    amax_epsilon: float,
) -> None:
    x = adversarial_matrix(*shape, seed=hash((shape, block)) % 1000, dtype=dtype)
    problems = cross_check_blockwise(
        x,
        block=block,
        fp8_format=fp8_format,
        power_2_scale=power_2_scale,
        amax_epsilon=amax_epsilon,
    )
    assert problems == []


fp32_values = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from([0.0, -0.0, 1e-12, 1e-45, FP32_MAX, -FP32_MAX, 448.0, 57344.0]),
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 3),
    cols=st.integers(1, 260),
    data=st.data(),
    block=st.sampled_from([ROW, SQUARE]),
    fp8_format=st.sampled_from(FORMATS),
    power_2_scale=st.booleans(),
    amax_epsilon=st.sampled_from([0.0, 1e-12, 1e-3]),
)
def test_vectorised_matches_scalar_rule_on_generated_input(
    rows: int,
    cols: int,
    data: st.DataObject,
    block: tuple[int, int],
    fp8_format: str,
    power_2_scale: bool,
    amax_epsilon: float,
) -> None:
    values = data.draw(st.lists(fp32_values, min_size=rows * cols, max_size=rows * cols))
    x = torch.tensor(values, dtype=torch.float32).reshape(rows, cols)
    problems = cross_check_blockwise(
        x,
        block=block,
        fp8_format=fp8_format,
        power_2_scale=power_2_scale,
        amax_epsilon=amax_epsilon,
    )
    assert problems == []


@pytest.mark.parametrize(("fp8_format", "exponent"), [("e4m3", 48), ("e5m2", 55)])
@pytest.mark.parametrize("block", [ROW, SQUARE], ids=["1x128", "128x128"])
def test_all_zero_blocks_get_2_to_the_48_or_55(
    fp8_format: str, exponent: int, block: tuple[int, int]
) -> None:
    x = torch.zeros(130, 300)
    x[129, 290] = 5.0  # one non-zero element, in an edge block
    q, scale_inv = quantize_blockwise(
        x, block=block, fp8_format=fp8_format, power_2_scale=True, amax_epsilon=1e-12
    )
    assert scale_inv[0, 0].item() == 2.0**-exponent
    assert 1.0 / scale_inv[0, 0].item() == 2.0**exponent
    assert torch.isfinite(q.float()).all() and torch.isfinite(scale_inv).all()
    assert q.float()[129, 290].item() == 5.0 * (1.0 / scale_inv[-1, -1].item())


def test_all_zero_block_without_epsilon_keeps_scale_1() -> None:
    _, scale_inv = quantize_blockwise(torch.zeros(2, 128), amax_epsilon=0.0)
    assert scale_inv.tolist() == [[1.0], [1.0]]


@pytest.mark.parametrize("fp8_format", FORMATS)
@pytest.mark.parametrize("power_2_scale", [True, False])
def test_epsilon_leaves_non_zero_blocks_unchanged(fp8_format: str, power_2_scale: bool) -> None:
    x = torch.randn(200, 300, generator=torch.Generator().manual_seed(1)) * 1e-6
    plain = quantize_blockwise(
        x, fp8_format=fp8_format, power_2_scale=power_2_scale, amax_epsilon=0.0
    )
    floored = quantize_blockwise(
        x, fp8_format=fp8_format, power_2_scale=power_2_scale, amax_epsilon=1e-12
    )
    assert torch.equal(plain[0].view(torch.uint8), floored[0].view(torch.uint8))
    assert torch.equal(plain[1], floored[1])


def test_nan_elements_are_ignored_and_stay_nan() -> None:
    x = torch.tensor([[math.nan, 2.0, -1.0, math.nan] + [0.5] * 124])
    q, scale_inv = quantize_blockwise(x, fp8_format="e4m3", power_2_scale=False)
    assert scale_inv.item() == to_fp32(1.0 / to_fp32(448.0 / 2.0))
    decoded = q.float()[0]
    assert math.isnan(decoded[0].item()) and math.isnan(decoded[3].item())
    assert decoded[1].item() == 448.0


def test_block_of_nan_only_counts_as_amax_0() -> None:
    nan_block = torch.full((1, 128), math.nan)
    # amax over no elements is 0: floored to eps it gets eps's scale, like an all-zero block.
    q, scale_inv = quantize_blockwise(nan_block, amax_epsilon=1e-12)
    assert scale_inv.item() == 2.0**-48
    assert torch.isnan(q.float()).all()
    assert quantize_blockwise(nan_block, amax_epsilon=0.0)[1].item() == 1.0


@pytest.mark.parametrize(("fp8_format", "fmax"), [("e4m3", 448.0), ("e5m2", 57344.0)])
def test_inf_saturates_and_its_block_keeps_scale_1(fp8_format: str, fmax: float) -> None:
    x = torch.tensor([[math.inf, -math.inf, 1e9, -1e9, 3.0] + [0.0] * 123])
    q, scale_inv = quantize_blockwise(x, fp8_format=fp8_format)
    assert scale_inv.item() == 1.0
    assert q.float()[0, :5].tolist() == [fmax, -fmax, fmax, -fmax, 3.0]


@pytest.mark.parametrize(
    ("dtype", "largest"),
    [(torch.float32, FP32_MAX), (torch.bfloat16, 3.3895313892515355e38), (torch.float16, 65504.0)],
)
def test_infinite_scale_becomes_the_input_dtypes_largest_value(
    dtype: torch.dtype, largest: float
) -> None:
    # 448 / amax overflows fp32 only for tiny amaxes; fp16 cannot hold one, so use the rule itself.
    fmt = fp8.E4M3
    assert (
        block_scale(1e-44, fmt=fmt, power_2_scale=False, amax_epsilon=0.0, input_max=largest)
        == largest
    )
    if dtype != torch.float16:
        x = torch.full((1, 128), 1e-40).to(dtype)
        _, scale_inv = quantize_blockwise(x, power_2_scale=False, amax_epsilon=0.0)
        assert scale_inv.item() == to_fp32(1.0 / largest)
        assert scale_inv.item() < 1.1754943508222875e-38  # subnormal, and kept


@pytest.mark.parametrize(("fp8_format", "bound"), [("e4m3", 2.0**-4), ("e5m2", 2.0**-3)])
def test_dequantization_error_within_half_an_fp8_ulp(fp8_format: str, bound: float) -> None:
    """Power-of-2 scales make scaling exact, so the only error is FP8's rounding: half an ulp,
    2^-(mantissa bits + 1) relative, for elements that land in FP8's normal range."""
    fmt = fp8.fp8_format(fp8_format)
    x = torch.randn(256, 384, generator=torch.Generator().manual_seed(2))
    q, scale_inv = quantize_blockwise(x, block=SQUARE, fp8_format=fp8_format, power_2_scale=True)
    restored = dequantize_blockwise(q, scale_inv, block=SQUARE)
    scale = 1.0 / per_element(scale_inv, (256, 384), block=SQUARE)
    normal = (x * scale).abs() >= fmt.min_normal
    relative = ((restored - x).abs() / x.abs())[normal]
    assert relative.max().item() <= bound
    assert relative.max().item() > bound / 4  # the bound is tight, not vacuous


def test_scale_inv_shapes() -> None:
    x = torch.ones(129, 257)
    assert quantize_blockwise(x, block=ROW)[1].shape == (129, 3)
    assert quantize_blockwise(x, block=SQUARE)[1].shape == (2, 3)
    assert quantize_blockwise(x, block=SQUARE)[0].shape == (129, 257)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"x": torch.ones(2, 3, 4)}, "x must be 2-D"),
        ({"x": torch.ones(2, 3, dtype=torch.float64)}, "x must be one of"),
        ({"block": (2, 128)}, r"block must be one of \[\(1, 128\), \(128, 128\)\]"),
        ({"fp8_format": "e4m4"}, "fp8_format must be one of"),
        ({"amax_epsilon": -1.0}, "amax_epsilon must be a finite number >= 0"),
        ({"amax_epsilon": math.nan}, "amax_epsilon must be a finite number >= 0"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"x": torch.ones(2, 3), **kwargs}
    with pytest.raises(ValueError, match=message):
        quantize_blockwise(**arguments)  # type: ignore[arg-type]


def test_recipe_defaults() -> None:
    hybrid = BlockwiseRecipe()
    assert hybrid.fp8_format == "HYBRID"
    assert (hybrid.params("input").block, hybrid.params("input").fp8_format) == (ROW, "e4m3")
    assert (hybrid.params("weight").block, hybrid.params("weight").fp8_format) == (SQUARE, "e4m3")
    assert (hybrid.params("grad").block, hybrid.params("grad").fp8_format) == (ROW, "e5m2")
    assert BlockwiseRecipe(fp8_format="E4M3").params("grad").fp8_format == "e4m3"
    with pytest.raises(ValueError, match="role must be"):
        hybrid.params("bias")  # type: ignore[arg-type]


def test_to_fp32_rounds_like_ieee() -> None:
    assert to_fp32(1.0 + 2.0**-24) == 1.0  # tie to even
    assert to_fp32(1.0 + 3 * 2.0**-24) == 1.0 + 2.0**-22
    assert to_fp32(1e39) == math.inf and to_fp32(-1e39) == -math.inf
    assert to_fp32(1e-46) == 0.0
