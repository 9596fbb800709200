"""A slow, element-by-element statement of the blockwise scale rule, without torch.

It exists to check the vectorised quantizer: fp32 arithmetic is done in Python floats and
rounded to fp32 with ``struct`` (one rounding per operation is exact here: products and
quotients of fp32 values are correctly rounded when computed in double and rounded once more,
since 53 >= 2 * 24 + 2), the power-of-2 step works on the packed bits, and FP8 rounding comes
from the decode table. Keep inputs small: it is pure Python.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from gpu_jobs.reference import fp8

FP32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
# The largest finite value of each input dtype, as an fp32 value (step 3 of the rule).
INPUT_MAX = {"float32": FP32_MAX, "bfloat16": 3.3895313892515355e38, "float16": 65504.0}


def to_fp32(value: float) -> float:
    """``value`` rounded to the nearest fp32 (ties to even), overflowing to ±inf."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def fp32_bits(value: float) -> int:
    return int(struct.unpack("<I", struct.pack("<f", value))[0])


def from_fp32_bits(bits: int) -> float:
    return float(struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0])


def block_scale(
    amax: float, *, fmt: fp8.Fp8Format, power_2_scale: bool, amax_epsilon: float, input_max: float
) -> float:
    """The fp32 scale of a block whose amax (over non-NaN elements) is ``amax``."""
    eps = to_fp32(amax_epsilon)
    if amax < eps:
        amax = eps
    if amax == 0 or math.isinf(amax) or math.isnan(amax):
        return 1.0
    scale = to_fp32(fmt.max_finite / amax)
    if math.isinf(scale):
        scale = input_max
    if power_2_scale:
        scale = from_fp32_bits(fp32_bits(scale) & 0xFF800000)
    return scale


def quantize_element(value: float, scale: float, fmt: fp8.Fp8Format) -> int:
    """The FP8 code of one element: multiply in fp32, clamp, round to nearest even."""
    if math.isnan(value):
        return fmt.nan_code
    scaled = to_fp32(value * scale)
    clamped = min(max(scaled, -fmt.max_finite), fmt.max_finite)
    return fp8.round_to_code(clamped, fmt)


def quantize_blockwise_scalar(
    rows: Sequence[Sequence[float]],
    *,
    block: tuple[int, int],
    fp8_format: str,
    power_2_scale: bool,
    amax_epsilon: float,
    input_dtype: str = "float32",
) -> tuple[list[list[int]], list[list[float]]]:
    """(FP8 codes shaped like ``rows``, scale_inv per block) for values already in fp32."""
    fmt = fp8.fp8_format(fp8_format)
    if input_dtype not in INPUT_MAX:
        raise ValueError(f"input_dtype must be one of {sorted(INPUT_MAX)}; got {input_dtype!r}")
    height = len(rows)
    width = len(rows[0]) if height else 0
    codes = [[0] * width for _ in range(height)]
    row_blocks, col_blocks = -(-height // block[0]), -(-width // block[1])
    scale_inv = [[0.0] * col_blocks for _ in range(row_blocks)]
    for block_row in range(row_blocks):
        row_span = range(block_row * block[0], min(height, (block_row + 1) * block[0]))
        for block_col in range(col_blocks):
            col_span = range(block_col * block[1], min(width, (block_col + 1) * block[1]))
            magnitudes = [abs(rows[r][c]) for r in row_span for c in col_span]
            amax = max((m for m in magnitudes if not math.isnan(m)), default=0.0)
            scale = block_scale(
                amax,
                fmt=fmt,
                power_2_scale=power_2_scale,
                amax_epsilon=amax_epsilon,
                input_max=INPUT_MAX[input_dtype],
            )
            scale_inv[block_row][block_col] = to_fp32(1.0 / scale)
            for r in row_span:
                for c in col_span:
                    codes[r][c] = quantize_element(rows[r][c], scale, fmt)
    return codes, scale_inv
