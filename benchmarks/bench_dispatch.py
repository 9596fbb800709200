"""Dispatch overhead of the executors, and each reference suite's wall time by shape.

Dispatch = from ``submit()`` until the first rank's pytest is running (the moment the rank
plugin writes ``progress/rank-N.started``). Baselines, measured in the same run: a bare
``python -c 'import torch'``, and a bare torchrun of the same 4 ranks launched directly (the
same marker). Figures are medians of ``--repeat`` runs and are reported as ratios to the bare
torchrun, never as absolute thresholds.

    python benchmarks/bench_dispatch.py                # dispatch, local and Slurm
    python benchmarks/bench_dispatch.py --suites       # also the suites' wall time by shape
    python benchmarks/bench_dispatch.py --no-slurm     # without starting Slurm

Slurm is started the way the tests start it (tests/support/slurm.py) and stopped again if this
run started it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_jobs.executors import (  # noqa: E402
    Executor,
    LocalExecutor,
    LocalExecutorConfig,
    SlurmExecutor,
    SlurmExecutorConfig,
    wait_for,
)
from gpu_jobs.launch import launch_env  # noqa: E402
from gpu_jobs.spec import JobSpec, LauncherOptions, Shape  # noqa: E402
from gpu_jobs.testsets import get_test_set  # noqa: E402

PASSING = "def test_one():\n    pass\n"


def say(message: str) -> None:
    print(f"[bench] {message}", flush=True)


def first_marker(phase_dir: Path, since: float, timeout_s: float = 300) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(phase_dir.glob("progress/rank-*.started")):
            return time.monotonic() - since
        time.sleep(0.005)
    raise TimeoutError(f"no rank started under {phase_dir}")


def bare_import_torch() -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.monotonic() - start


def bare_torchrun(work: Path) -> float:
    phase = work / "phase"
    env = launch_env(os.environ, {"GPU_JOBS_PHASE_DIR": str(phase)}, cpu=True)
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=4",
        "-m",
        "pytest",
        "-q",
        "-p",
        "gpu_jobs.pytest_rank_plugin",
        "-p",
        "no:cacheprovider",
        "test_passing.py",
    ]
    start = time.monotonic()
    process = subprocess.Popen(
        argv, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    took = first_marker(phase, start)
    process.wait()
    return took


def dispatch(executor: Executor, spec: JobSpec, out_dir: Path) -> tuple[float, str]:
    start = time.monotonic()
    handle = executor.submit(spec, out_dir)
    took = first_marker(out_dir / "tests", start)
    result = wait_for(executor, handle, timeout_s=300, poll_s=0.2)
    return took, result.status


def median_of(label: str, repeat: int, measure: Callable[[int], float]) -> float:
    samples = []
    for index in range(repeat):
        samples.append(measure(index))
        say(f"{label} #{index + 1}: {samples[-1]:.2f}s")
    return statistics.median(samples)


def throwaway_spec(tree: Path, job_id: str) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        test_set="bench",
        targets=("test_passing.py",),
        shape=Shape(1, 4),
        checkout=str(tree),
        node_check=False,
        launcher=LauncherOptions(device="cpu"),
    )


def bench_dispatch(work: Path, repeat: int, with_slurm: bool) -> dict[str, float]:
    tree = work / "tree"
    tree.mkdir()
    (tree / "test_passing.py").write_text(PASSING)
    figures: dict[str, float] = {}
    figures["import_torch_s"] = median_of(
        "bare import torch", repeat, lambda i: bare_import_torch()
    )

    def bare(i: int) -> float:
        run = work / f"bare{i}"
        run.mkdir()
        (run / "test_passing.py").write_text(PASSING)
        return bare_torchrun(run)

    figures["bare_torchrun_s"] = median_of("bare torchrun to first rank", repeat, bare)
    local = LocalExecutor(LocalExecutorConfig(state_dir=work / "pool"))

    def local_once(i: int) -> float:
        took, status = dispatch(local, throwaway_spec(tree, f"local{i}"), work / f"local{i}")
        assert status == "passed", status
        return took

    figures["local_s"] = median_of("local executor submit to first rank", repeat, local_once)
    if with_slurm:
        from tests.support import slurm

        started = slurm.start()
        try:
            shared = work / "shared"
            shared.mkdir()
            executor = SlurmExecutor(
                SlurmExecutorConfig(python=sys.executable, cpus_per_task=1, shared_dir=shared)
            )

            def slurm_once(i: int) -> float:
                spec = throwaway_spec(tree, f"slurm{i}")
                took, status = dispatch(executor, spec, shared / f"slurm{i}")
                assert status == "passed", status
                return took

            figures["slurm_s"] = median_of(
                "slurm executor submit to first rank", repeat, slurm_once
            )
        finally:
            slurm.stop(started)
    return figures


def bench_suites(work: Path) -> list[dict[str, object]]:
    rows = []
    local = LocalExecutor(LocalExecutorConfig(state_dir=work / "pool-suites"))
    for name, shape in (("amax-group", "1x4"), ("amax-group", "2x4"), ("blockwise-recipe", "1x4")):
        spec = get_test_set(name).job_spec(job_id=f"{name}-{shape}", shape=shape, reference=True)
        start = time.monotonic()
        result = wait_for(local, local.submit(spec, work / spec.job_id), timeout_s=600)
        wall = time.monotonic() - start
        row = {
            "test_set": name,
            "shape": shape,
            "status": result.status,
            "tests": result.counts.total,
            "wall_s": round(wall, 1),
            "node_check_s": round(result.durations.node_check_s, 1),
            "tests_s": round(result.durations.tests_s, 1),
        }
        say(f"suite {name} {shape}: {row}")
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-slurm", action="store_true")
    parser.add_argument("--suites", action="store_true", help="also time the reference suites")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-dispatch-") as tmp:
        work = Path(tmp)
        figures = bench_dispatch(work, args.repeat, not args.no_slurm)
        report: dict[str, object] = {"dispatch": figures, "cpus": os.cpu_count()}
        bare = figures["bare_torchrun_s"]
        ratios = {k.removesuffix("_s"): round(v / bare, 2) for k, v in figures.items()}
        report["ratio_to_bare_torchrun"] = ratios
        if args.suites:
            report["suites"] = bench_suites(work)
    print(json.dumps(report, indent=2))
    print("\nsubmit -> first rank running (median), as a multiple of a bare torchrun:")
    for key, ratio in ratios.items():
        print(f"  {key:<16} {figures[key + '_s']:6.2f}s  x{ratio}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
