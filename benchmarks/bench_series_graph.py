"""How fast is the series graph, relative to reading the text it is built from?

Baseline, in the same run: running the reference parsers (``Depends on``, ``Part of``,
``Superseded by``, merge wording) over every body, comment and commit message once, which any
graph builder must do. The figure is the ratio build_series_graph / baseline per shape and size;
a ratio that grows with the size means the graph work is super-linear.

Then issue 16's goals, on the server path (what a sync does with the graph: build it, the
series rows it stores, every PR's parents; a stack is derived only when asked for): 3,000 open
PRs in 100 series of 30 in < 1 s, a 10,000-PR chain in < 10 s and < 1 GB (peak traced memory of
the Python heap, measured in a second pass under tracemalloc).

    python benchmarks/bench_series_graph.py [--repeat 5] [--sizes 100,1000,3000] [--chain 10000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc
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
from stackbot.services.sync import series_data


def series_records(size: int, shape: str, rng: random.Random) -> list[PrRecord]:
    """``chain``: each PR depends on the one before; ``wide``: on two of the 20 before it;
    ``series30``: chains of 30 (100 series for 3,000 PRs), each with its tracking issue."""
    records = []
    for number in range(1, size + 1):
        if shape == "chain":
            parents = [number - 1] if number > 1 else []
        elif shape == "series30":
            parents = [number - 1] if number % 30 != 1 else []
        else:
            parents = rng.sample(range(max(1, number - 20), number), min(2, number - 1))
        body = "Why. Some prose about the change.\n\n"
        if parents:
            body += "Depends on " + " and ".join(f"#{p}" for p in parents) + ", which adds it.\n"
        # The parent's head merged in (series30: within the series, so series stay apart).
        merged = parents[0] if shape == "series30" and parents else max(1, number - 1)
        group = (number - 1) // 30 if shape == "series30" else number // 50
        body += f"Part of #{100000 + group}."
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
                    CommitRecord(f"{number:039x}b", f"Merge NVIDIA#{merged}'s head", ()),
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


def server_path(records: list[PrRecord]) -> None:
    """What a sync does with a rebuilt graph, without the database writes."""
    graph = build_series_graph(records, repo="NVIDIA/Megatron-LM")
    series_data(graph)
    for record in records:
        graph.parents_of(record.number)


def peak_mib(run: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


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
    parser.add_argument("--chain", type=int, default=10000, help="PRs in the long chain")
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
    print()
    print(f"{'server path':24} {'text s':>8} {'graph s':>8} {'ratio':>6} {'peak MiB':>9}  goal")
    goals = [("series30", 3000, "< 1 s"), ("chain", args.chain, "< 10 s, < 1024 MiB")]
    for shape, size, goal in goals:
        records = series_records(size, shape, rng)
        baseline = timed(partial(read_text, records), 1)
        seconds = timed(partial(server_path, records), 1)
        peak = peak_mib(partial(server_path, records))
        label = f"{shape} {size}" if shape == "chain" else f"{size // 30} series of 30"
        print(
            f"{label:24} {baseline:8.3f} {seconds:8.3f} {seconds / baseline:6.1f} "
            f"{peak:9.0f}  {goal}"
        )


if __name__ == "__main__":
    main()
