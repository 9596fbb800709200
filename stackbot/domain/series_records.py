"""The records of a series graph: edges and where they come from, problems, series.

Built by :func:`stackbot.domain.series.build_series_graph`, whose docstring is the
specification.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
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
    # Keyed by every PR given; derived on demand (series_order.Stacks), a mapping like a dict.
    stacks: Mapping[int, list[PrNumber]]
    problems: tuple[GraphProblem, ...]
    external: tuple[ExternalRef, ...]
    superseded: dict[int, PrNumber]  # PR -> the PR its text says supersedes it
    # Edges (child, parent) set aside to break cycles; they stay in ``edges``.
    cycle_breaks: tuple[tuple[PrNumber, PrNumber], ...] = ()

    def series_of(self, pr: int) -> SeriesInfo | None:
        return self._series_by_pr.get(pr)

    def parents_of(self, pr: int) -> tuple[PrNumber, ...]:
        return self._neighbours[0].get(pr, ())

    def children_of(self, pr: int) -> tuple[PrNumber, ...]:
        return self._neighbours[1].get(pr, ())

    # Indexes built once on first use (linear in the edges and members), so that asking for
    # every PR's parents is linear too, not edges x PRs.
    @cached_property
    def _series_by_pr(self) -> dict[int, SeriesInfo]:
        found: dict[int, SeriesInfo] = {}
        for info in self.series:
            for pr in info.prs:
                found.setdefault(pr, info)
        return found

    @cached_property
    def _neighbours(
        self,
    ) -> tuple[dict[int, tuple[PrNumber, ...]], dict[int, tuple[PrNumber, ...]]]:
        parents: dict[int, set[PrNumber]] = {}
        children: dict[int, set[PrNumber]] = {}
        for edge in self.edges:
            parents.setdefault(edge.child, set()).add(edge.parent)
            children.setdefault(edge.parent, set()).add(edge.child)
        return (
            {pr: tuple(sorted(found)) for pr, found in parents.items()},
            {pr: tuple(sorted(found)) for pr, found in children.items()},
        )

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
