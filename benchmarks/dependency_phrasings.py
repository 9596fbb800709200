"""Recall and precision of the series graph's dependency reading on the phrasing table.

    python benchmarks/dependency_phrasings.py                 # this checkout's stackbot
    python benchmarks/dependency_phrasings.py --code /work/main   # another checkout (before)

The tables are ``tests/series/phrasing_table.py`` and ``tests/series/phrasing_round_three.py``
of *this* checkout, loaded by path, so the same cases run against any version of ``stackbot``
(it needs only ``build_series_graph`` and the PR records). In the first table an edge is
#1204 → N from any source; in round three (issue 28) every edge among the case's PRs counts
(a sentence may be about other PRs) and so does every supersession (old, new). A case's
expected edges are what a reader takes from its texts. Prints the cases missed and the false
edges, then the figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

TABLE = Path(__file__).resolve().parent.parent / "tests" / "series" / "phrasing_table.py"
ROUND_THREE = TABLE.with_name("phrasing_round_three.py")


def load_table(path: Path = TABLE) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", help="a checkout whose stackbot package to measure")
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, str(Path(args.code).resolve()))
    else:
        sys.path.insert(0, str(TABLE.parent.parent.parent))
    import stackbot
    from stackbot.domain.series import build_series_graph

    table = load_table()
    measure(build_series_graph, table, "table", table.POSITIVES, table.NEGATIVES)
    measure(build_series_graph, table, "fresh", table.FRESH_POSITIVES, table.FRESH_NEGATIVES)
    three = load_table(ROUND_THREE)
    measure_round_three(build_series_graph, three, "round three", three.POSITIVES, three.NEGATIVES)
    measure_round_three(
        build_series_graph, three, "held out", three.HELD_OUT_POSITIVES, three.HELD_OUT_NEGATIVES
    )
    print(f"stackbot from {Path(stackbot.__file__).resolve().parent}")
    return 0


def measure(
    build_series_graph: Any,
    table: ModuleType,
    name: str,
    positives: tuple[Any, ...],
    negatives: tuple[Any, ...],
) -> None:
    true_pos = false_pos = false_neg = 0
    for kind, cases in (("positive", positives), ("negative", negatives)):
        for item in cases:
            graph = build_series_graph(table.records(item), repo=table.REPO)
            found = {edge.parent for edge in graph.edges if edge.child == table.OWN}
            hits, extra, missed = (
                found & item.expected,
                found - item.expected,
                item.expected - found,
            )
            true_pos += len(hits)
            false_pos += len(extra)
            false_neg += len(missed)
            if extra or missed:
                print(f"  {kind:8} {item.id!r}: missed {sorted(missed)}, false {sorted(extra)}")
    expected = true_pos + false_neg
    recall = true_pos / expected if expected else 1.0
    precision = true_pos / (true_pos + false_pos) if true_pos + false_pos else 1.0
    print(
        f"{name}: {len(positives)} positive and {len(negatives)} negative cases: "
        f"{true_pos} of {expected} edges found, {false_pos} false edges; "
        f"recall {recall:.2f}, precision {precision:.2f}"
    )


def measure_round_three(
    build_series_graph: Any,
    table: ModuleType,
    title: str,
    positives: tuple[Any, ...],
    negatives: tuple[Any, ...],
) -> None:
    """Every edge and every supersession among each case's PRs, by pattern and in all."""
    totals: dict[str, list[int]] = {}  # name -> [found, expected, false]
    for kind, cases in (("positive", positives), ("negative", negatives)):
        for item in cases:
            graph = build_series_graph(table.records(item), repo=table.REPO)
            edges = {(edge.child, edge.parent) for edge in graph.edges}
            replaced = set(graph.superseded.items())
            for what, found, expected in (
                ("edges", edges, item.edges),
                ("supersessions", replaced, item.superseded),
            ):
                for name in (what, f"pattern {item.pattern} {what}"):
                    row = totals.setdefault(name, [0, 0, 0])
                    row[0] += len(found & expected)
                    row[1] += len(expected)
                    row[2] += len(found - expected)
                if found != expected:
                    print(
                        f"  {kind:8} {item.id!r}: {what} missed {sorted(expected - found)}, "
                        f"false {sorted(found - expected)}"
                    )
    print(
        f"{title}: {len(positives)} positive and {len(negatives)} negative "
        "cases (every edge among the PRs, every supersession):"
    )
    for name, (hits, expected, false) in sorted(totals.items(), key=lambda kv: kv[0]):
        if expected or false:
            print(f"  {name}: {hits} of {expected} found, {false} false")


if __name__ == "__main__":
    sys.exit(main())
