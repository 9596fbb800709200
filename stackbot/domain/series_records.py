"""The records of a series graph: edges and where they come from, problems, series.

Built by :func:`stackbot.domain.series.build_series_graph`, whose docstring is the
specification.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from stackbot.domain.series_order import Stacks
from stackbot.domain.types import PrNumber, SeriesKey

EdgeSource = Literal["native_stack", "base_branch", "depends_on", "merged_head", "override"]
OverrideKind = Literal["depends_on", "no_dependency"]
ProblemKind = Literal["cycle", "missing_parent", "closed_parent", "superseded_parent", "conflict"]
EDGE_SOURCES: tuple[EdgeSource, ...] = (
    "native_stack",
    "base_branch",
    "depends_on",
    "merged_head",
    "override",
)
PROBLEM_KINDS: tuple[ProblemKind, ...] = (
    "cycle",
    "missing_parent",
    "closed_parent",
    "superseded_parent",
    "conflict",
)


@dataclass(frozen=True, order=True)
class StackEdge:
    """Child depends on parent. One edge per (child, parent, source): ``text`` and ``origin``
    (where the first declaration was found) do not take part in equality."""

    child: PrNumber
    parent: PrNumber
    source: EdgeSource
    # The exact words that declared it ("Stacked on top of #12"), or what GitHub said
    # (the base branch's name, a merge commit's line).
    text: str = field(default="", compare=False)
    # Where: "body", "comment 123 by @alice", "commit 1a2b3c4", "base ref", "native stack id 7",
    # "/stackbot depends-on by @alice (comment 55)".
    origin: str = field(default="", compare=False)
    # Who wrote the declaring text (a GitHub login; "" when nobody did: a native stack) and in
    # which field: "title", "body", "comment", "review", "base ref", "native stack", "commit".
    author: str = field(default="", compare=False)
    written_in: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "child": self.child,
            "parent": self.parent,
            "source": self.source,
            "text": self.text,
            "origin": self.origin,
            "author": self.author,
            "field": self.written_in,
        }


@dataclass(frozen=True)
class DependencyOverride:
    """``/stackbot depends-on #N`` or ``/stackbot no-dependency #N`` on PR ``child``, by its
    author or a vetter; the latest one for a (child, parent) pair is the one kept."""

    child: PrNumber
    parent: PrNumber
    kind: OverrideKind
    by: str = ""
    comment_id: int | None = None
    text: str = ""

    @property
    def origin(self) -> str:
        command = "depends-on" if self.kind == "depends_on" else "no-dependency"
        where = f" (comment {self.comment_id})" if self.comment_id is not None else ""
        return f"/stackbot {command} by @{self.by}{where}"

    def to_json(self) -> dict[str, Any]:
        return {
            "child": self.child,
            "parent": self.parent,
            "kind": self.kind,
            "by": self.by,
            "comment_id": self.comment_id,
            "text": self.text,
        }


@dataclass(frozen=True)
class Supersession:
    pr: PrNumber
    by: PrNumber
    origin: str  # "body" or "comment 123 by @alice"
    text: str


@dataclass(frozen=True)
class Suggestion:
    """A dependency sentence by someone who is neither the PR's author nor a maintainer: shown,
    never acted on."""

    child: PrNumber
    parent: PrNumber
    text: str
    origin: str  # "comment 5 by @carol"
    author: str

    def to_json(self) -> dict[str, Any]:
        return {
            "child": self.child,
            "parent": self.parent,
            "text": self.text,
            "origin": self.origin,
            "author": self.author,
        }


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
    # Where each supersession was written (same keys as ``superseded``).
    supersessions: tuple[Supersession, ...] = ()
    # The overrides given, applied or not.
    overrides: tuple[DependencyOverride, ...] = ()
    # Dependency sentences by people who may not declare them (neither author nor maintainer).
    suggestions: tuple[Suggestion, ...] = ()

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

    def live_parents(self) -> list[tuple[int, list[PrNumber]]]:
        """Each PR's live parents (those its stack holds), by PR."""
        if isinstance(self.stacks, Stacks):
            stacks = self.stacks
            return [(pr, stacks.parents_of(pr)) for pr in sorted(stacks)]
        return [
            (pr, sorted(set(stack[:-1]) & set(self.parents_of(pr))))
            for pr, stack in sorted(self.stacks.items())
        ]

    def stack_tips(self) -> list[int]:
        """The PRs whose stacks hold all the others' (every PR when the stacks are a plain
        mapping)."""
        if isinstance(self.stacks, Stacks):
            return list(self.stacks.tips())
        return sorted(self.stacks)

    def to_json(self) -> dict[str, Any]:
        """The graph as ``stackbot series graph --json`` prints it: each PR's live parents and
        each stack once (the stacks of the PRs no other PR depends on), linear in the graph."""
        return {
            "series": [
                {"key": info.key, "prs": list(info.prs), "order": list(info.order)}
                for info in self.series
            ],
            "edges": [edge.to_json() for edge in self.edges],
            "parents": {str(pr): parents for pr, parents in self.live_parents()},
            "stacks": {str(pr): list(self.stacks[pr]) for pr in self.stack_tips()},
            "problems": [
                {"kind": problem.kind, "prs": list(problem.prs), "detail": problem.detail}
                for problem in self.problems
            ],
            "external": [{"child": ref.child, "ref": ref.ref} for ref in self.external],
            "superseded": [
                {"pr": item.pr, "by": item.by, "source": item.origin, "text": item.text}
                for item in self.supersessions
            ],
            "overrides": [override.to_json() for override in self.overrides],
            "suggestions": [suggestion.to_json() for suggestion in self.suggestions],
        }
