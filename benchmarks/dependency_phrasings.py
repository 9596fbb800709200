"""Recall and precision of the series graph's dependency reading on the phrasing table.

    python benchmarks/dependency_phrasings.py                 # this checkout's stackbot
    python benchmarks/dependency_phrasings.py --code /work/main   # another checkout (before)

The table is ``tests/series/phrasing_table.py`` of *this* checkout, loaded by path, so the same
cases run against any version of ``stackbot`` (it needs only ``build_series_graph`` and the PR
records). An edge is #1204 → N from any source; a case's expected edges are what a reader
takes from its text. Prints the cases missed and the false edges, then the figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

TABLE = Path(__file__).resolve().parent.parent / "tests" / "series" / "phrasing_table.py"


def load_table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("phrasing_table", TABLE)
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


if __name__ == "__main__":
    sys.exit(main())
