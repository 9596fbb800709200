"""The FP8 decode table and nearest-even rounding, and torch's CPU casts checked against them."""

from __future__ import annotations

import math

import pytest
import torch

from gpu_jobs.reference import fp8
from gpu_jobs.reference.blockwise_check import fp8_cast_mismatches, rounding_probe_values


def test_e4m3_table_by_definition() -> None:
    table = fp8.decode_table(fp8.E4M3)
    assert table[0x7E] == 448.0 == max(v for v in table if not math.isnan(v))
    assert table[0x01] == 2.0**-9 == fp8.E4M3.min_subnormal
    assert table[0x08] == 2.0**-6 == fp8.E4M3.min_normal
    assert table[0x38] == 1.0
    assert math.copysign(1.0, table[0x80]) == -1.0 and table[0x80] == 0.0
    assert [code for code in range(256) if math.isnan(table[code])] == [0x7F, 0xFF]
    assert not any(math.isinf(v) for v in table)


def test_e5m2_table_by_definition() -> None:
    table = fp8.decode_table(fp8.E5M2)
    assert table[0x7B] == 57344.0
    assert table[0x7C] == math.inf and table[0xFC] == -math.inf
    assert table[0x01] == 2.0**-16 == fp8.E5M2.min_subnormal
    assert table[0x3C] == 1.0
    assert [code for code in range(256) if math.isnan(table[code])] == [
        0x7D,
        0x7E,
        0x7F,
        0xFD,
        0xFE,
        0xFF,
    ]


@pytest.mark.parametrize("fmt", [fp8.E4M3, fp8.E5M2], ids=["e4m3", "e5m2"])
def test_table_agrees_with_torch_decoding_every_code(fmt: fp8.Fp8Format) -> None:
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    decoded = codes.view(getattr(torch, fmt.torch_dtype_name)).to(torch.float64).tolist()
    for code, (mine, theirs) in enumerate(zip(fp8.decode_table(fmt), decoded, strict=True)):
        assert (math.isnan(mine) and math.isnan(theirs)) or mine == theirs, hex(code)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (1.0625, 0x38),  # tie between 1.0 (even) and 1.125 -> 1.0
        (1.1875, 0x3A),  # tie between 1.125 and 1.25 (even) -> 1.25
        (1.07, 0x39),
        (2.0**-10, 0x00),  # half the smallest subnormal: tie to zero
        (-(2.0**-10) * 1.0001, 0x81),
        (-(2.0**-11), 0x80),  # negative underflow keeps the sign
        (2.0**-9 * 1.5, 0x02),  # tie between subnormals 1 and 2 -> 2
        (0.015625 - 2.0**-10, 0x08),  # tie between the largest subnormal and the smallest normal
        (448.0, 0x7E),
        (-440.0, 0xFE),  # tie between 416 and 448 -> 448 (0x7E is even)
        (math.nan, 0x7F),
    ],
)
def test_e4m3_round_to_nearest_even(value: float, code: int) -> None:
    assert fp8.round_to_code(value, fp8.E4M3) == code


def test_rounding_refuses_values_beyond_max() -> None:
    with pytest.raises(ValueError, match="clamp before rounding"):
        fp8.round_to_code(449.0, fp8.E4M3)
    with pytest.raises(ValueError, match="clamp before rounding"):
        fp8.round_to_code(-math.inf, fp8.E5M2)


def test_unknown_format_is_named() -> None:
    with pytest.raises(
        ValueError, match=r"fp8_format must be one of \['e4m3', 'e5m2'\]; got 'e3m4'"
    ):
        fp8.fp8_format("e3m4")


@pytest.mark.parametrize("fmt", [fp8.E4M3, fp8.E5M2], ids=["e4m3", "e5m2"])
def test_torch_cpu_cast_is_nearest_even_on_probes(fmt: fp8.Fp8Format) -> None:
    probes = rounding_probe_values(fmt)
    assert len(probes) > 900  # every value, every midpoint and its neighbours, both signs
    assert fp8_cast_mismatches(probes, fmt, torch.device("cpu")) == []


def test_cast_check_reports_a_wrong_cast() -> None:
    """The checker is not vacuous: E5M2 values are not all E4M3 values."""
    values = [v for v in rounding_probe_values(fp8.E5M2) if abs(v) <= 448.0]
    problems = fp8_cast_mismatches(values, fp8.E5M2, torch.device("cpu"))
    assert problems == []
    wrong_fmt = fp8.Fp8Format(**{**fp8.E5M2.__dict__, "torch_dtype_name": "float8_e4m3fn"})
    assert fp8_cast_mismatches(values, wrong_fmt, torch.device("cpu"))
