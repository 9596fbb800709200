"""Reference blockwise FP8 quantizer (Transformer Engine's ``Float8BlockScaling`` recipe).

The scale rule, per block, in this order (DESIGN.md, "Blockwise FP8 recipe"):

1. amax = largest |x| over the block's non-NaN elements (0 if none); if amax < eps, amax = eps;
2. amax 0, +inf or NaN → scale 1, stop;
3. scale = fp8_max / amax in fp32; only an infinite result becomes the input dtype's largest
   finite value;
4. power-of-2 scales: the scale's fp32 bits ANDed with 0xFF800000.

``scale_inv = 1 / scale`` (fp32, kept even when subnormal). Elements are multiplied by the
scale in fp32 and clamped to ±fp8_max *before* the cast, because torch's casts of overflowing
values differ by device. Vectorised over blocks: edge blocks are padded with NaN, which the
amax ignores, and the padding is cut away again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from gpu_jobs.reference import fp8
from gpu_jobs.reference.fp8 import Fp8Format

Block = tuple[int, int]
ROW_BLOCK: Block = (1, 128)
SQUARE_BLOCK: Block = (128, 128)
BLOCKS: tuple[Block, ...] = (ROW_BLOCK, SQUARE_BLOCK)
INPUT_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16, torch.float16)
POWER_2_MASK = -0x800000  # 0xFF800000 as a signed int32: keeps sign and exponent bits.


@dataclass(frozen=True)
class BlockQuantParams:
    """How one tensor role is quantized."""

    block: Block
    fp8_format: Literal["e4m3", "e5m2"]
    power_2_scale: bool
    amax_epsilon: float


@dataclass(frozen=True)
class BlockwiseRecipe:
    """Recipe defaults: 1×128 blocks for activations and gradients, 128×128 for weights.

    ``fp8_format`` is the recipe's: ``E4M3`` everywhere, or ``HYBRID`` (E4M3 forward, E5M2
    for gradients).
    """

    fp8_format: Literal["E4M3", "HYBRID"] = "HYBRID"
    power_2_scale: bool = True
    amax_epsilon: float = 0.0

    def params(self, role: Literal["input", "weight", "grad"]) -> BlockQuantParams:
        if role not in ("input", "weight", "grad"):
            raise ValueError(f"role must be 'input', 'weight' or 'grad'; got {role!r}")
        if self.fp8_format not in ("E4M3", "HYBRID"):
            raise ValueError(f"fp8_format must be 'E4M3' or 'HYBRID'; got {self.fp8_format!r}")
        block = SQUARE_BLOCK if role == "weight" else ROW_BLOCK
        hybrid_grad = role == "grad" and self.fp8_format == "HYBRID"
        return BlockQuantParams(
            block=block,
            fp8_format="e5m2" if hybrid_grad else "e4m3",
            power_2_scale=self.power_2_scale,
            amax_epsilon=self.amax_epsilon,
        )


def scale_inv_shape(shape: tuple[int, int], block: Block) -> tuple[int, int]:
    """(ceil(rows / block rows), ceil(cols / block cols)): one scale_inv per block."""
    rows, cols = shape
    return -(-rows // block[0]), -(-cols // block[1])


@torch.no_grad()
def quantize_blockwise(
    x: torch.Tensor,
    *,
    block: Block = ROW_BLOCK,
    fp8_format: str = "e4m3",
    power_2_scale: bool = True,
    amax_epsilon: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize a 2-D tensor: (FP8 tensor shaped like ``x``, fp32 scale_inv per block)."""
    fmt = fp8.fp8_format(fp8_format)
    _check_input(x, block, amax_epsilon)
    blocks = _as_blocks(x.to(torch.float32), block)
    amax = _block_amax(blocks)
    scale = block_scales(
        amax,
        fmt=fmt,
        power_2_scale=power_2_scale,
        amax_epsilon=amax_epsilon,
        input_max=torch.finfo(x.dtype).max,
    )
    clamped = (blocks * scale[:, None, :, None]).clamp_(-fmt.max_finite, fmt.max_finite)
    fp8_dtype = getattr(torch, fmt.torch_dtype_name)
    padded = clamped.to(fp8_dtype).reshape(amax.shape[0] * block[0], amax.shape[1] * block[1])
    rows, cols = x.shape
    q = padded[:rows, :cols].contiguous()
    scale_inv = torch.ones_like(scale) / scale
    return q, scale_inv


def dequantize_blockwise(q: torch.Tensor, scale_inv: torch.Tensor, *, block: Block) -> torch.Tensor:
    """fp32 values ``q * scale_inv`` of each block."""
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {list(BLOCKS)}; got {block!r}")
    if q.dim() != 2:
        raise ValueError(f"q must be 2-D (rows, cols); got shape {tuple(q.shape)}")
    expected = scale_inv_shape((q.shape[0], q.shape[1]), block)
    if tuple(scale_inv.shape) != expected:
        raise ValueError(
            f"scale_inv must have shape {expected} for q of shape {tuple(q.shape)} "
            f"and block {block}; got {tuple(scale_inv.shape)}"
        )
    return q.to(torch.float32) * per_element(scale_inv, (q.shape[0], q.shape[1]), block=block)


def per_element(
    block_values: torch.Tensor, shape: tuple[int, int], *, block: Block
) -> torch.Tensor:
    """One value per block spread over the block's elements: a (rows, cols) fp32 tensor."""
    rows, cols = shape
    spread = block_values.to(torch.float32).repeat_interleave(block[0], dim=0)
    return spread.repeat_interleave(block[1], dim=1)[:rows, :cols]


def block_scales(
    amax: torch.Tensor,
    *,
    fmt: Fp8Format,
    power_2_scale: bool,
    amax_epsilon: float,
    input_max: float,
) -> torch.Tensor:
    """Steps 1-4 of the scale rule on a tensor of block amaxes (fp32)."""
    eps = torch.tensor(amax_epsilon, dtype=torch.float32, device=amax.device)
    amax = torch.where(amax < eps, eps, amax)
    scale = torch.tensor(fmt.max_finite, dtype=torch.float32, device=amax.device) / amax
    largest = torch.tensor(input_max, dtype=torch.float32, device=amax.device)
    scale = torch.where(torch.isinf(scale), largest, scale)
    if power_2_scale:
        scale = (scale.view(torch.int32) & POWER_2_MASK).view(torch.float32)
    degenerate = (amax == 0) | ~torch.isfinite(amax)
    return torch.where(degenerate, torch.ones_like(scale), scale)


def _check_input(x: torch.Tensor, block: Block, amax_epsilon: float) -> None:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"x must be a torch.Tensor; got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (rows, cols); got shape {tuple(x.shape)}")
    if x.dtype not in INPUT_DTYPES:
        names = ", ".join(str(dtype) for dtype in INPUT_DTYPES)
        raise ValueError(f"x must be one of {names}; got {x.dtype}")
    if tuple(block) not in BLOCKS:
        raise ValueError(f"block must be one of {list(BLOCKS)}; got {block!r}")
    if not isinstance(amax_epsilon, (int, float)) or not (
        math.isfinite(amax_epsilon) and amax_epsilon >= 0
    ):
        raise ValueError(f"amax_epsilon must be a finite number >= 0; got {amax_epsilon!r}")


def _as_blocks(x: torch.Tensor, block: Block) -> torch.Tensor:
    """View (or NaN-padded copy) of ``x`` shaped (row blocks, block rows, col blocks, block cols)."""
    rows, cols = x.shape
    row_blocks, col_blocks = scale_inv_shape((rows, cols), block)
    padded_rows, padded_cols = row_blocks * block[0], col_blocks * block[1]
    if (padded_rows, padded_cols) != (rows, cols):
        padded = torch.full((padded_rows, padded_cols), math.nan, dtype=x.dtype, device=x.device)
        padded[:rows, :cols] = x
        x = padded
    return x.reshape(row_blocks, block[0], col_blocks, block[1])


def _block_amax(blocks: torch.Tensor) -> torch.Tensor:
    """Largest |x| per block over non-NaN elements; 0 for a block of NaNs only."""
    magnitude = blocks.abs()
    magnitude.masked_fill_(torch.isnan(magnitude), 0.0)
    return magnitude.amax(dim=(1, 3))
