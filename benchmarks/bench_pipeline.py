"""Push-to-report latency for a long series with results cached, against a one-PR baseline.

On the GitHub stand-in with stackbot (app, embedded worker, local executor) in this process:
a chain of N PRs (default 50; PR i is based on PR i-1's branch, all by a trusted author,
``Part of #100``) plus one lone PR, every tree tested once (a 1x1 test set, real torchrun) so
results are cached. Then a ``synchronize`` of the middle PR whose new head has the same tree
(a reworded commit), and the time until every affected PR's sticky comment is updated and the
new head's check run is completed. The baseline is the same push on the lone PR, in the same
run. Goal: under 5 s for the 50-PR series.

    python benchmarks/bench_pipeline.py [--prs 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from textwrap import dedent

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.harness import REPO, World, running_world

TEST_SETS = dedent("""
    schema_version = "1.0"

    [test_sets.tiny]
    shapes = ["1x1"]
    timeout_s = 300
    megatron_targets = ["tests/test_quick.py"]
""")


def build(world: World, prs: int, first: int) -> list[int]:
    c = world.control
    numbers = []
    base = "main"
    for i in range(prs):
        number = first + i
        branch = f"chain-{number}"
        c.open_pull(
            REPO,
            author="alice",
            head=branch,
            base=base,
            title=f"Step {i}",
            body="Part of #100.",
            number=number,
            files={f"pkg/mod_{i}.py": f"VALUE = {i}\n"},
        )
        numbers.append(number)
        base = branch
    return numbers


def push_and_wait(world: World, number: int, watched: list[int], timeout_s: float = 120) -> float:
    """Push a same-tree commit to ``number``; seconds until every watched PR's sticky comment
    was edited after the push and the new head's check runs are completed."""
    c = world.control
    branch = c.pull(REPO, number).head_ref
    before = time.time()
    started = time.perf_counter()
    c.commit(REPO, branch, {}, message=f"Reword {time.time()}", author="alice")
    head = c.pull(REPO, number).head_sha
    deadline = started + timeout_s
    while time.perf_counter() < deadline:
        stale = [
            n
            for n in watched
            if not any(
                "stackbot:report" in com.body and com.updated_at >= before
                for com in c.comments(REPO, n)
            )
        ]
        checks = [r for r in c.check_runs(REPO, head) if r.name.startswith("stackbot")]
        if not stale and checks and all(r.status == "completed" for r in checks):
            return time.perf_counter() - started
        time.sleep(0.02)
    raise TimeoutError(f"reports not updated within {timeout_s} s: still stale {stale[:5]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        (tmp / "tiny.toml").write_text(TEST_SETS)
        # The stand-in has no content-creation limit; GitHub's (80 writes a minute, 500 an
        # hour, which the pacer enforces by default) would make this a benchmark of waiting.
        with running_world(
            tmp,
            test_sets_file=tmp / "tiny.toml",
            default_test_sets=["tiny"],
            github_writes_per_minute=10**6,
            github_writes_per_hour=10**6,
        ) as world:
            t0 = time.perf_counter()
            chain = build(world, args.prs, first=1000)
            lone = build(world, 1, first=5000)
            world.settle(timeout_s=1800)
            jobs = world.jobs()
            print(
                f"setup: {args.prs}-PR chain + 1 lone PR, {len(jobs)} jobs "
                f"({sum(1 for j in jobs if j.reused_from_job_id is None)} run), "
                f"{time.perf_counter() - t0:.0f} s"
            )
            middle = chain[len(chain) // 2]
            series, single = [], []
            for _ in range(args.repeat):
                single.append(push_and_wait(world, lone[0], lone))
                world.settle()
                series.append(push_and_wait(world, middle, chain))
                world.settle()
            base = statistics.median(single)
            median = statistics.median(series)
            print(f"baseline, push to a lone PR → its report:      median {base:.2f} s {single}")
            print(
                f"push to #{middle} (middle of {args.prs}) → {len(chain)} reports: "
                f"median {median:.2f} s {[round(x, 2) for x in series]}"
            )
            print(
                f"ratio {median / base:.1f}× the lone PR; goal under 5 s: "
                f"{'met' if median < 5 else 'MISSED'}"
            )


if __name__ == "__main__":
    main()
