"""The records of a series graph: edges and where they come from, problems, series.

Built by :func:`stackbot.domain.series.build_series_graph`, whose docstring is the
specification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from stackbot.domain.types import PrNumber, SeriesKey

EdgeSource = Literal["native_stack", "base_branch", "depends_on", "merged_head"]
ProblemKind = Literal["cycle", "missing_parent", "closed_parent", "superseded_parent", "conflict"]
EDGE_SOURCES: tuple[EdgeSource, ...] = ("native_stack", "base_branch", "depends_on", "merged_head")
PROBLEM_KINDS: tuple[ProblemKind, ...] = (
    "cycle",
    "missing_parent",
    "closed_parent",
    "superseded_parent",
    "conflict",
)


@dataclass(frozen=True, order=True)
class StackEdge:
    child: PrNumber
    parent: PrNumber
    source: EdgeSource


@dataclass(frozen=True)
class GraphProblem:
    kind: ProblemKind
    prs: tuple[PrNumber, ...]
    detail: str


@dataclass(frozen=True, order=True)
class ExternalRef:
    child: PrNumber
    ref: str  # "owner/name#N" (or "owner#N") as normalised by Reference.text


@dataclass(frozen=True)
class SeriesInfo:
    key: SeriesKey
    tracking_issue: PrNumber | None
    root: PrNumber
    prs: tuple[PrNumber, ...]  # every member, by number
    order: tuple[PrNumber, ...]  # the live members, parents first


@dataclass(frozen=True)
class SeriesGraph:
    edges: tuple[StackEdge, ...]
    series: tuple[SeriesInfo, ...]
    stacks: dict[int, list[PrNumber]]  # keyed by every PR given
    problems: tuple[GraphProblem, ...]
    external: tuple[ExternalRef, ...]
    superseded: dict[int, PrNumber]  # PR -> the PR its text says supersedes it
    # Edges (child, parent) set aside to break cycles; they stay in ``edges``.
    cycle_breaks: tuple[tuple[PrNumber, PrNumber], ...] = ()

    def series_of(self, pr: int) -> SeriesInfo | None:
        return next((info for info in self.series if pr in info.prs), None)

    def parents_of(self, pr: int) -> tuple[PrNumber, ...]:
        return tuple(sorted({edge.parent for edge in self.edges if edge.child == pr}))

    def children_of(self, pr: int) -> tuple[PrNumber, ...]:
        return tuple(sorted({edge.child for edge in self.edges if edge.parent == pr}))

    def to_json(self) -> dict[str, Any]:
        return {
            "series": [
                {"key": info.key, "prs": list(info.prs), "order": list(info.order)}
                for info in self.series
            ],
            "edges": [
                {"child": edge.child, "parent": edge.parent, "source": edge.source}
                for edge in self.edges
            ],
            "stacks": {str(pr): list(stack) for pr, stack in sorted(self.stacks.items())},
            "problems": [
                {"kind": problem.kind, "prs": list(problem.prs), "detail": problem.detail}
                for problem in self.problems
            ],
            "external": [{"child": ref.child, "ref": ref.ref} for ref in self.external],
        }
