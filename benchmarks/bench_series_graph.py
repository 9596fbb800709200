"""How fast is the series graph, relative to reading the text it is built from?

Baseline, in the same run: running the reference parsers (``Depends on``, ``Part of``,
``Superseded by``, merge wording) over every body, comment and commit message once, which any
graph builder must do. The figure is the ratio build_series_graph / baseline per shape and size;
a ratio that grows with the size means the graph work is super-linear.

    python benchmarks/bench_series_graph.py [--repeat 5] [--sizes 100,1000,3000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from functools import partial

from stackbot.domain.records import CommentRecord, CommitRecord, PrRecord
from stackbot.domain.references import (
    depends_on_refs,
    merged_branches,
    merged_head_refs,
    part_of_refs,
    superseded_by_refs,
)
from stackbot.domain.series import build_series_graph
from stackbot.domain.types import PrNumber


def series_records(size: int, shape: str, rng: random.Random) -> list[PrRecord]:
    """``chain``: each PR depends on the one before; ``wide``: on two of the 20 before it."""
    records = []
    for number in range(1, size + 1):
        if shape == "chain":
            parents = [number - 1] if number > 1 else []
        else:
            parents = rng.sample(range(max(1, number - 20), number), min(2, number - 1))
        body = "Why. Some prose about the change.\n\n"
        if parents:
            body += "Depends on " + " and ".join(f"#{p}" for p in parents) + ", which adds it.\n"
        body += f"Part of #{100000 + number // 50}."
        records.append(
            PrRecord(
                number=PrNumber(number),
                head_ref=f"branch-{number}",
                head_sha=f"{number:040x}",
                body=body,
                comments=(CommentRecord("reviewer", "/ok to test abcdef1"),),
                commits=(
                    CommitRecord(
                        f"{number:039x}a", "Merge branch 'main' into x", ("0" * 40, "1" * 40)
                    ),
                    CommitRecord(
                        f"{number:039x}b", f"Merge NVIDIA#{max(1, number - 1)}'s head", ()
                    ),
                ),
            )
        )
    return records


def read_text(records: list[PrRecord]) -> None:
    for pr in records:
        depends_on_refs(pr.body)
        part_of_refs(pr.body)
        superseded_by_refs(pr.body)
        for comment in pr.comments:
            superseded_by_refs(comment.body)
        for commit in pr.commits:
            merged_head_refs(commit.message)
            merged_branches(commit.message)


def timed(run: Callable[[], object], repeat: int) -> float:
    run()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes", default="100,1000,3000")
    args = parser.parse_args()
    rng = random.Random(7)
    print(f"{'shape':6} {'PRs':>6} {'text s':>8} {'graph s':>8} {'ratio':>6}")
    for shape in ("wide", "chain"):
        for size in (int(value) for value in args.sizes.split(",")):
            records = series_records(size, shape, rng)
            baseline = timed(partial(read_text, records), args.repeat)
            graph = timed(
                partial(build_series_graph, records, repo="NVIDIA/Megatron-LM"), args.repeat
            )
            print(f"{shape:6} {size:>6} {baseline:8.3f} {graph:8.3f} {graph / baseline:6.1f}")


if __name__ == "__main__":
    main()
