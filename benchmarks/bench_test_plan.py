"""GPU cost of testing a long series under each test plan policy (issue 13).

The real planner, job creation, reuse, queue order and ``poll_jobs`` tasks on a real database;
the executor replaced by a timing model (``benchmarks/plan_sim.py``): amax-group 1x4 takes 10
simulated minutes, amax-group 2x4 15, blockwise-recipe 1x4 5, on a pool of 8 nodes of 4 GPUs.
A linear series of N PRs is numbered 1..N in series order; ``--fail-at K`` makes one test fail
from layer K upward, ``--flaky-at K`` one that fails once at layer K and passes on a rerun;
``--push K`` pushes to PR K after the first round and measures the second round alone.
Each PR adds one own test file (``--own-test-minutes M`` of simulated time per file and job,
10 by default; 0 for none), run as stackbot runs PRs' own test files.
``--land`` then squash-merges PR 1 into main (main otherwise unchanged) and measures what the
PRs above it cost again: the carry-over figure, 0 when nothing already tested is re-run.

    python benchmarks/bench_test_plan.py --prs 50 [--fail-at K]... [--flaky-at K]...
        [--policy every-stack|series-first|both] [--push K] [--land] [--own-test-minutes M]
        [--database postgresql] [--json]

With ``--json`` it prints one JSON object per line and per policy: ``policy``, ``prs``,
``jobs`` (jobs that ran, main's baselines included), ``gpu_hours``, ``wall_s`` (simulated time
until every PR's report is final), ``attributed`` (each injected failure's layer → the PR it was
attributed to; a flaky one → null), and ``extra_jobs`` (confirmations, bisection steps and
retries), ``own_test_jobs`` (jobs that ran PRs' own test files), and with ``--land``
``carry_over_jobs`` (jobs run for the open PRs' trees after PR 1 landed) and
``carry_over_main_jobs`` (main's own new baseline jobs on its new commit). Without it, a table
and the ratio of GPU-hours between the policies.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.plan_sim import Injected, Simulation
from gpu_jobs.testsets import is_own_test_set
from stackbot.config import load_settings
from stackbot.db import migrate
from stackbot.db.engine import make_engine


def _database(kind: str, tmp: Path, name: str, stack: ExitStack) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp / (name + '.db')}"
    from tests.support import postgres

    return stack.enter_context(postgres.fresh_database("stackbot_bench"))


def measure(policy: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    with ExitStack() as stack:
        return _measure(policy, args, tmp, _database(args.database, tmp, policy, stack))


def _measure(policy: str, args: argparse.Namespace, tmp: Path, url: str) -> dict[str, Any]:
    migrate.upgrade(url)
    engine = make_engine(url)
    settings = load_settings(
        data_dir=tmp / policy,
        test_plan_policy=policy,
        max_running_jobs_per_series=args.max_running,
    )
    sim = Simulation(
        engine,
        settings,
        prs=args.prs,
        injected=Injected(fail_at=args.fail_at, flaky_at=args.flaky_at),
        nodes=args.nodes,
        own_test_minutes=args.own_test_minutes if args.own_test_minutes > 0 else None,
    )
    pushed = sim.push()
    sim.drive()
    if args.push is not None:  # measure only what the push costs
        before_jobs, before_hours, before_time = len(sim.executor.jobs), sim.gpu_hours(), sim.now
        pushed = sim.push(args.push)
        sim.drive()
        jobs, hours = len(sim.executor.jobs) - before_jobs, sim.gpu_hours() - before_hours
        wall = sim.now - before_time
    else:
        jobs, hours, wall = len(sim.executor.jobs), sim.gpu_hours(), sim.now
    originals = sim.originals()
    extra = sum(1 for j in originals if j.purpose in ("confirm", "bisect", "retry"))
    own_jobs = sum(1 for j in originals if is_own_test_set(j.test_set))
    landed: dict[str, int] = {}
    if args.land:
        before = {j.id for j in sim.originals()}
        sim.land(1)
        sim.drive()
        after = [j for j in sim.originals() if j.id not in before]
        landed = {
            "carry_over_jobs": sum(1 for j in after if j.kind != "baseline"),
            "carry_over_main_jobs": sum(1 for j in after if j.kind == "baseline"),
        }
    engine.dispose()
    return {
        **landed,
        "own_test_jobs": own_jobs,
        "policy": policy,
        "prs": args.prs,
        "jobs": jobs,
        "gpu_hours": round(hours, 3),
        "wall_s": round(wall, 1),
        "attributed": sim.attributed(pushed.series_run),
        "extra_jobs": extra,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prs", type=int, default=50)
    parser.add_argument("--fail-at", type=int, action="append", default=[])
    parser.add_argument("--flaky-at", type=int, action="append", default=[])
    parser.add_argument("--policy", choices=["every-stack", "series-first", "both"], default="both")
    parser.add_argument("--push", type=int, default=None, help="then push to this PR")
    parser.add_argument(
        "--own-test-minutes",
        type=float,
        default=10.0,
        help="simulated minutes per own test file and job (one file per PR; 0: none)",
    )
    parser.add_argument(
        "--land", action="store_true", help="then squash-merge PR 1 and count the jobs re-run"
    )
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--max-running", type=int, default=0, help="jobs per series (0: any)")
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for layer in [*args.fail_at, *args.flaky_at]:
        if not 1 <= layer <= args.prs:
            parser.error(f"layer {layer} is not in 1..{args.prs} (--prs {args.prs})")
    if args.push is not None and not 1 <= args.push <= args.prs:
        parser.error(f"--push {args.push} is not in 1..{args.prs}")
    policies = ["every-stack", "series-first"] if args.policy == "both" else [args.policy]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-test-plan-") as tmp:
        for policy in policies:
            if not args.json:
                print(f"simulating {policy} on {args.prs} PRs ...", file=sys.stderr, flush=True)
            results.append(measure(policy, args, Path(tmp)))
    if args.json:
        for result in results:
            print(json.dumps(result, sort_keys=True))
        return 0
    bound = math.ceil(math.log2(max(2, args.prs))) + 1
    print(
        f"{'policy':<13} {'jobs':>6} {'own':>5} {'GPU-hours':>10} {'wall':>10}"
        "  attributed (layer → PR)"
    )
    for r in results:
        wall = f"{r['wall_s'] / 3600:.2f} h"
        print(
            f"{r['policy']:<13} {r['jobs']:>6} {r['own_test_jobs']:>5} {r['gpu_hours']:>10.2f}"
            f" {wall:>10}  {r['attributed']}"
        )
        if "carry_over_jobs" in r:
            print(
                f"  after PR 1 landed: {r['carry_over_jobs']} job(s) for the open PRs' trees,"
                f" {r['carry_over_main_jobs']} for main's new commit"
            )
    if len(results) == 2 and results[1]["gpu_hours"]:
        ratio = results[0]["gpu_hours"] / results[1]["gpu_hours"]
        print(f"every-stack / series-first GPU-hours: {ratio:.1f}x (goal: >= 10x on a green push)")
    print(f"extra jobs per failing configuration allowed: {bound} (ceil(log2 {args.prs}) + 1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
