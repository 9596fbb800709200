"""The two FP8 formats of the blockwise recipe, decoded from their bit layout.

PyTorch's fp32 → FP8 casts disagree across devices (CPU saturates E4M3 overflow, CUDA turns it
into NaN), so the tests need a ruler that does not come from torch: every one of the 256 codes
decoded by the format's definition, and round-to-nearest-even found by searching that table.
This module is pure Python (no torch) so the scalar reference can use it too.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from typing import Literal

FormatName = Literal["e4m3", "e5m2"]


@dataclass(frozen=True)
class Fp8Format:
    """One FP8 format: sign bit, then exponent and mantissa fields."""

    name: FormatName
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_finite: float
    # E4M3 ("fn") has no infinities and a single NaN mantissa; E5M2 follows IEEE.
    has_inf: bool
    torch_dtype_name: str
    nan_code: int

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, 1 - self.bias - self.mantissa_bits)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, 1 - self.bias)

    @property
    def half_ulp_relative(self) -> float:
        """Largest relative rounding error for a value in the normal range."""
        return math.ldexp(1.0, -(self.mantissa_bits + 1))


E4M3 = Fp8Format(
    name="e4m3",
    exponent_bits=4,
    mantissa_bits=3,
    bias=7,
    max_finite=448.0,
    has_inf=False,
    torch_dtype_name="float8_e4m3fn",
    nan_code=0x7F,
)
E5M2 = Fp8Format(
    name="e5m2",
    exponent_bits=5,
    mantissa_bits=2,
    bias=15,
    max_finite=57344.0,
    has_inf=True,
    torch_dtype_name="float8_e5m2",
    nan_code=0x7F,
)
FORMATS: dict[str, Fp8Format] = {"e4m3": E4M3, "e5m2": E5M2}


def fp8_format(name: str) -> Fp8Format:
    """The format called ``name`` (``e4m3`` or ``e5m2``, any case)."""
    found = FORMATS.get(name.lower()) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"fp8_format must be one of {sorted(FORMATS)}; got {name!r}")
    return found


def decode(code: int, fmt: Fp8Format) -> float:
    """The value of one FP8 code, by the format's definition."""
    if not 0 <= code <= 0xFF:
        raise ValueError(f"an FP8 code is a byte (0..255); got {code}")
    sign = -1.0 if code & 0x80 else 1.0
    exponent = (code >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    mantissa = code & ((1 << fmt.mantissa_bits) - 1)
    top_exponent = (1 << fmt.exponent_bits) - 1
    if exponent == top_exponent:
        if fmt.has_inf:
            return sign * math.inf if mantissa == 0 else math.nan
        if mantissa == (1 << fmt.mantissa_bits) - 1:
            return math.nan
    if exponent == 0:
        return sign * math.ldexp(mantissa, 1 - fmt.bias - fmt.mantissa_bits)
    significand = (1 << fmt.mantissa_bits) + mantissa
    return sign * math.ldexp(significand, exponent - fmt.bias - fmt.mantissa_bits)


@functools.cache
def decode_table(fmt: Fp8Format) -> tuple[float, ...]:
    """All 256 codes decoded, indexed by code."""
    return tuple(decode(code, fmt) for code in range(256))


@functools.cache
def _non_negative_finite(fmt: Fp8Format) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Non-negative finite values in increasing order, with their codes."""
    table = decode_table(fmt)
    pairs = sorted((table[code], code) for code in range(0x80) if math.isfinite(table[code]))
    return tuple(value for value, _ in pairs), tuple(code for _, code in pairs)


def round_to_code(value: float, fmt: Fp8Format) -> int:
    """The FP8 code nearest to ``value`` (ties to the even code), NaN to the NaN code.

    The value must already lie within ±max_finite: the recipe clamps before casting, and what
    a cast does beyond that is exactly where devices disagree.
    """
    if math.isnan(value):
        return fmt.nan_code
    magnitude = abs(value)
    if magnitude > fmt.max_finite:
        raise ValueError(
            f"{value!r} is beyond ±{fmt.max_finite}: clamp before rounding to {fmt.name}"
        )
    values, codes = _non_negative_finite(fmt)
    above = bisect.bisect_left(values, magnitude)
    if values[above] == magnitude:
        code = codes[above]
    else:
        below = above - 1
        gap_below = magnitude - values[below]
        gap_above = values[above] - magnitude
        if gap_below == gap_above:
            # The code's last bit is the mantissa's last bit, so "even code" is "even mantissa".
            code = codes[below] if codes[below] % 2 == 0 else codes[above]
        else:
            code = codes[below] if gap_below < gap_above else codes[above]
    sign_bit = 0x80 if math.copysign(1.0, value) < 0 else 0
    return sign_bit | code


def same_code(left: int, right: int, fmt: Fp8Format) -> bool:
    """Whether two codes mean the same thing (any two NaN codes do)."""
    table = decode_table(fmt)
    if math.isnan(table[left]) or math.isnan(table[right]):
        return math.isnan(table[left]) and math.isnan(table[right])
    return left == right
