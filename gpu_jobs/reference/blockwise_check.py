"""Cross-checks of the vectorised quantizer and of torch's FP8 casts against the scalar rule.

Shared by the suites (which run them on the GPU) and by stackbot's own tests (on CPU). Each
check returns a list of mismatch descriptions: empty means the two agree bit for bit.
"""

from __future__ import annotations

import itertools
import math
import struct

import torch

from gpu_jobs.reference import fp8
from gpu_jobs.reference.blockwise import Block, quantize_blockwise
from gpu_jobs.reference.blockwise_scalar import fp32_bits, from_fp32_bits, quantize_blockwise_scalar

# Values chosen to hit every branch of the scale rule and of the cast.
SPECIAL_VALUES: tuple[float, ...] = (
    0.0,
    -0.0,
    1e-12,
    -3e-13,
    1e-40,  # fp32 subnormal
    -1.401298464324817e-45,  # smallest fp32 subnormal
    3.4028234663852886e38,  # fp32 max
    -3.0e38,
    1.0e38,
    math.inf,
    -math.inf,
    math.nan,
    448.0,
    -57344.0,
    0.0009765625,  # 2^-10: an E4M3 subnormal after scale 1
)
MAX_REPORTED = 10


def adversarial_matrix(
    rows: int, cols: int, *, seed: int, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """A CPU matrix of mixed-sign normals with special values scattered over it.

    Some rows are made entirely of zeros, of subnormals or of NaN, so that whole blocks take
    the degenerate branches of the rule. Deterministic in ``seed`` on every machine.
    """
    generator = torch.Generator().manual_seed(seed)
    magnitudes = torch.exp2(torch.randint(-30, 30, (rows, cols), generator=generator).float())
    x = torch.randn(rows, cols, generator=generator) * magnitudes
    specials = torch.tensor(SPECIAL_VALUES, dtype=torch.float32)
    picks = torch.rand(rows, cols, generator=generator) < 0.15
    which = torch.randint(0, len(SPECIAL_VALUES), (rows, cols), generator=generator)
    x = torch.where(picks, specials[which], x)
    if rows > 1:
        x[1] = 0.0
    if rows > 2:
        x[2] = torch.where(torch.arange(cols) % 2 == 0, 1e-40, -3e-41)
    if rows > 4:
        x[4] = math.nan
    return x.to(dtype)


def cross_check_blockwise(
    x: torch.Tensor,
    *,
    block: Block,
    fp8_format: str,
    power_2_scale: bool,
    amax_epsilon: float,
) -> list[str]:
    """Mismatches between ``quantize_blockwise`` (on x's device) and the scalar reference."""
    fmt = fp8.fp8_format(fp8_format)
    q, scale_inv = quantize_blockwise(
        x,
        block=block,
        fp8_format=fp8_format,
        power_2_scale=power_2_scale,
        amax_epsilon=amax_epsilon,
    )
    want_codes, want_scale_inv = quantize_blockwise_scalar(
        x.float().cpu().tolist(),
        block=block,
        fp8_format=fp8_format,
        power_2_scale=power_2_scale,
        amax_epsilon=amax_epsilon,
        input_dtype=str(x.dtype).removeprefix("torch."),
    )
    got_codes = q.view(torch.uint8).cpu().tolist()
    got_scale_inv = scale_inv.cpu().tolist()
    problems: list[str] = []
    if len(got_scale_inv) != len(want_scale_inv) or any(
        len(g) != len(w) for g, w in zip(got_scale_inv, want_scale_inv, strict=False)
    ):
        return [
            f"scale_inv shape {tuple(scale_inv.shape)}, scalar reference has {len(want_scale_inv)} rows"
        ]
    for r, (got_row, want_row) in enumerate(zip(got_scale_inv, want_scale_inv, strict=True)):
        for c, (got, want) in enumerate(zip(got_row, want_row, strict=True)):
            if fp32_bits(got) != fp32_bits(want):
                problems.append(f"scale_inv[{r}][{c}] = {got!r}, rule gives {want!r}")
    values = x.float().cpu().tolist()
    for r, (got_code_row, want_code_row) in enumerate(zip(got_codes, want_codes, strict=True)):
        for c, (code, rule) in enumerate(zip(got_code_row, want_code_row, strict=True)):
            if not fp8.same_code(code, rule, fmt):
                problems.append(
                    f"q[{r}][{c}] of x={values[r][c]!r}: code {code:#04x} "
                    f"({fp8.decode(code, fmt)!r}), rule gives {rule:#04x} ({fp8.decode(rule, fmt)!r})"
                )
    return _first(problems)


def rounding_probe_values(fmt: fp8.Fp8Format) -> list[float]:
    """fp32 values that test a cast's rounding: every FP8 value, every midpoint between two
    neighbours (ties go to even), and the fp32 neighbours of each midpoint."""
    table = fp8.decode_table(fmt)
    finite = sorted({v for v in table if math.isfinite(v) and v >= 0})
    probes = set(finite)
    for low, high in itertools.pairwise(finite):
        middle = (low + high) / 2  # exact in fp32: needs one bit more than FP8 has
        bits = fp32_bits(middle)
        probes.update((middle, from_fp32_bits(bits - 1), from_fp32_bits(bits + 1)))
    probes.add(finite[1] / 4)  # below half the smallest subnormal: rounds to zero
    return sorted(probes | {-v for v in probes})


def fp8_cast_mismatches(values: list[float], fmt: fp8.Fp8Format, device: torch.device) -> list[str]:
    """Where torch's fp32 → FP8 cast on ``device`` differs from nearest-even by the table.

    Values must be finite and within ±max_finite: beyond that devices legitimately differ and
    the recipe clamps first.
    """
    dtype = getattr(torch, fmt.torch_dtype_name)
    tensor = torch.tensor(values, dtype=torch.float32, device=device)
    got = tensor.to(dtype).view(torch.uint8).cpu().tolist()
    problems = []
    for value, code in zip(values, got, strict=True):
        want = fp8.round_to_code(value, fmt)
        if not fp8.same_code(code, want, fmt):
            problems.append(
                f"{fmt.name} cast of {value!r} ({_hex32(value)}) gave {code:#04x}, want {want:#04x}"
            )
    return _first(problems)


def _hex32(value: float) -> str:
    return "0x" + struct.pack(">f", value).hex()


def _first(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_REPORTED:
        return problems
    return [*problems[:MAX_REPORTED], f"... and {len(problems) - MAX_REPORTED} more"]
