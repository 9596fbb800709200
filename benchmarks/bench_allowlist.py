"""Allowlist scanning: a full scan of a Megatron-sized tree vs an incremental rescan.

Builds an in-memory ``megatron/core`` tree of ~3,000 synthetic modules (imports, classes,
nested functions, comprehensions, a few reads each), scans it cold, changes 40 files and scans
again with the warm cache. The cold scan is the baseline of the same run; the figure is the
ratio (goal: at least 10x). Run: ``python benchmarks/bench_allowlist.py [--files N]``.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
import time

from stackbot.domain.allowlist import Generation, MemoryScanCache, TreeScan, scan_tree

ACCESSORS = [
    "get_tensor_model_parallel_group",
    "get_data_parallel_rank",
    "get_pipeline_model_parallel_world_size",
    "get_context_parallel_group",
    "get_expert_model_parallel_group",
    "get_data_parallel_group_gloo",
]


def synthetic_module(rng: random.Random, n: int, revision: int = 0) -> bytes:
    """~100 lines of Megatron-flavoured code; ``revision`` changes its content."""
    lines = [
        f'"""Module {n}, revision {revision}."""',
        "import torch",
        "from megatron.core import parallel_state as ps",
        "from .process_groups_config import ProcessGroupCollection",
        "",
    ]
    for c in range(rng.randint(1, 3)):
        lines += [f"class Layer{n}_{c}(torch.nn.Module):", "    def __init__(self, config):"]
        lines += ["        super().__init__()", "        self.config = config"]
        for m in range(rng.randint(2, 5)):
            accessor = rng.choice(ACCESSORS)
            lines += [
                f"    def method_{m}(self, x, scale={m}):",
                "        y = [v * scale for v in x if v is not None]",
                f"        group = ps.{accessor}() if self.config.flag else None",
                "        fn = lambda t: torch.relu(t) + scale",
                "        for i, v in enumerate(y):",
                "            with torch.no_grad():",
                "                v = fn(v) * i",
                "        def inner(z):",
                "            return {k: z[k] for k in sorted(z)}",
                "        return inner({'a': y, 'group': group})",
            ]
    lines += [
        "def build(config):",
        "    pgs = ProcessGroupCollection.use_mpu_process_groups()",
        "    return [Layer for _ in range(config.layers)], pgs",
        f"VERSION = {revision}",
    ]
    return ("\n".join(lines) + "\n").encode()


def blob_sha(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def make_tree(files: int, seed: int = 6307) -> tuple[dict[str, str], dict[str, bytes]]:
    rng = random.Random(seed)
    store: dict[str, bytes] = {}
    tree: dict[str, str] = {}
    for n in range(files):
        content = synthetic_module(rng, n)
        path = f"megatron/core/pkg{n % 40:02}/module_{n:04}.py"
        store[blob_sha(content)] = content
        tree[path] = blob_sha(content)
    return tree, store


def change_files(tree: dict[str, str], store: dict[str, bytes], count: int) -> dict[str, str]:
    rng = random.Random(8034)
    changed = dict(tree)
    for path in rng.sample(sorted(tree), count):
        content = synthetic_module(rng, int(path[-7:-3]), revision=1)
        store[blob_sha(content)] = content
        changed[path] = blob_sha(content)
    return changed


def timed_scan(
    blobs: dict[str, str], store: dict[str, bytes], cache: MemoryScanCache
) -> tuple[float, TreeScan]:
    start = time.perf_counter()
    result = scan_tree(blobs, store.__getitem__, Generation.SCOPE, cache)
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--changed", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    print(f"building a synthetic tree of {args.files} files...", flush=True)
    tree, store = make_tree(args.files)
    changed = change_files(tree, store, args.changed)
    full_times: list[float] = []
    incremental_times: list[float] = []
    for round_ in range(1, args.repeat + 1):
        cache = MemoryScanCache()
        full_seconds, _ = timed_scan(tree, store, cache)
        incremental_seconds, rescan = timed_scan(changed, store, cache)
        full_times.append(full_seconds)
        incremental_times.append(incremental_seconds)
        parsed = rescan.parsed
        print(
            f"round {round_}/{args.repeat}: full {full_seconds:.3f}s, "
            f"incremental {incremental_seconds:.4f}s ({parsed} files parsed)",
            flush=True,
        )
        if parsed != args.changed:
            print(f"FAIL: the incremental scan parsed {parsed} files, not {args.changed}")
            return 1
    full = statistics.median(full_times)
    incremental = statistics.median(incremental_times)
    ratio = full / incremental
    print(f"full scan of {args.files} files: {full:.3f}s (median of {args.repeat})")
    print(f"incremental rescan after {args.changed} changed files: {incremental:.4f}s")
    print(f"ratio full/incremental: {ratio:.1f}x (goal >= 10x)")
    return 0 if ratio >= 10 else 1


if __name__ == "__main__":
    sys.exit(main())
