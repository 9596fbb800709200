"""How fast is the reference blockwise quantizer, relative to the least it could cost?

Baseline, in the same run on the same device: one pass that reads the tensor for its amax and
one fp32 → FP8 cast (no blocks, no scales) — the memory traffic any quantizer needs. The
figure is the ratio quantize_blockwise / baseline, per shape and block. Also the scalar
reference's cost per element, to show why it is kept to small inputs.

    python benchmarks/bench_blockwise_quantizer.py [--device cuda] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from gpu_jobs.reference.blockwise import quantize_blockwise
from gpu_jobs.reference.blockwise_check import adversarial_matrix
from gpu_jobs.reference.blockwise_scalar import quantize_blockwise_scalar


def timed(run: Callable[[], object], device: torch.device, repeat: int) -> float:
    run()  # warm-up: allocator, kernels
    samples = []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    shapes = [(1024, 1024), (4096, 4096), (4095, 4097)]
    if device.type == "cuda":
        shapes.append((16384, 16384))
    print(f"device {device}, median of {args.repeat}")
    print(f"{'shape':>14} {'block':>8} {'baseline ms':>12} {'quantize ms':>12} {'ratio':>7}")
    for shape in shapes:
        x = torch.randn(*shape, device=device)

        def baseline(x: torch.Tensor = x) -> object:
            return x.abs().amax(), x.clamp(-448, 448).to(torch.float8_e4m3fn)

        base = timed(baseline, device, args.repeat)
        for block in ((1, 128), (128, 128)):
            cost = timed(
                lambda x=x, block=block: quantize_blockwise(x, block=block), device, args.repeat
            )
            label = f"{block[0]}x{block[1]}"
            print(
                f"{shape[0]:>6}x{shape[1]:<7} {label:>8} {base * 1e3:12.2f} {cost * 1e3:12.2f} {cost / base:7.2f}"
            )
    small = adversarial_matrix(64, 256, seed=0)
    vector = timed(lambda: quantize_blockwise(small), torch.device("cpu"), args.repeat)
    scalar = timed(
        lambda: quantize_blockwise_scalar(
            small.tolist(), block=(1, 128), fp8_format="e4m3", power_2_scale=True, amax_epsilon=0.0
        ),
        torch.device("cpu"),
        args.repeat,
    )
    print(f"scalar reference on 64x256 (CPU): {scalar / vector:.0f}x the vectorised quantizer")


if __name__ == "__main__":
    main()
