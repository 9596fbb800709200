"""A series graph's edges: the state one construction accumulates (:class:`EdgeRules`), the
rules that turn each declared dependency into an edge or a problem, and the overrides applied
after every declaration is read (:mod:`stackbot.domain.series` specifies the rules).

:class:`~stackbot.domain.series_build.GraphBuild` adds the steps that find the declarations.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from stackbot.domain.records import PrRecord
from stackbot.domain.references import Reference
from stackbot.domain.series_records import (
    PROBLEM_KINDS,
    DependencyOverride,
    EdgeSource,
    ExternalRef,
    GraphProblem,
    ProblemKind,
    StackEdge,
    Suggestion,
    Supersession,
)
from stackbot.domain.types import PrNumber


def numbers_text(values: Iterable[int]) -> str:
    """``#1, #2``: PR numbers as a problem's detail lists them."""
    return ", ".join(f"#{value}" for value in values)


class _ProblemLog:
    """Problems found so far; the same kind over the same PRs is reported once."""

    def __init__(self) -> None:
        self._found: dict[tuple[ProblemKind, tuple[PrNumber, ...]], str] = {}

    def add(self, kind: ProblemKind, prs: Iterable[int], detail: str) -> None:
        self._found.setdefault((kind, tuple(PrNumber(pr) for pr in prs)), detail)

    def sorted(self) -> tuple[GraphProblem, ...]:
        keys = sorted(self._found, key=lambda key: (PROBLEM_KINDS.index(key[0]), key[1]))
        return tuple(GraphProblem(kind, prs, self._found[(kind, prs)]) for kind, prs in keys)


_WRITTEN = re.compile(
    r"(?P<field>title|body|comment|review)(?: \d+)?(?: by @(?P<who>\S+))?(?: of #(?P<pr>\d+))?$"
)
_BY = re.compile(r"\bby @(\S+)")

StackIdentity = tuple[str, int]  # ("id", 17) or ("number", 3)


class EdgeRules:
    """What one graph construction has found so far, and the rules that turn a declared
    dependency into an edge or into the problem it reveals (:meth:`_declare`); the steps that
    find the declarations are :class:`~stackbot.domain.series_build.GraphBuild`'s."""

    def __init__(self, records: dict[PrNumber, PrRecord], repo: str | None) -> None:
        self.records = records
        self.repo = repo
        self.problems = _ProblemLog()
        self.external: set[ExternalRef] = set()
        self.superseded: dict[PrNumber, PrNumber] = {}
        self.final_superseder: dict[PrNumber, PrNumber] = {}
        self.tracking: dict[PrNumber, PrNumber] = {}
        self.edges: set[StackEdge] = set()
        self.stack_place: dict[PrNumber, tuple[StackIdentity, int]] = {}
        self.head_refs: dict[str, list[PrNumber]] = defaultdict(list)
        self.open_heads: dict[str, list[PrNumber]] = defaultdict(list)
        # (child, parent) pairs whose latest override is no-dependency: text edges skip them.
        self.denied: set[tuple[int, int]] = set()
        self.supersessions: list[Supersession] = []
        self.suggestions: list[Suggestion] = []

    def is_live(self, pr: PrNumber) -> bool:
        record = self.records.get(pr)
        return (
            record is not None
            and record.is_open
            and not record.merged
            and pr not in self.superseded
        )

    def _report_live(
        self, child: PrNumber, kind: ProblemKind, prs: Sequence[int], detail: str
    ) -> None:
        if self.is_live(child):
            self.problems.add(kind, prs, detail)

    def note_overrides(self, overrides: Sequence[DependencyOverride]) -> None:
        latest = {(o.child, o.parent): o.kind for o in overrides}
        self.denied = {pair for pair, kind in latest.items() if kind == "no_dependency"}

    def apply_overrides(self, overrides: Sequence[DependencyOverride]) -> None:
        """Overrides beat what was read from text: ``depends-on`` adds an edge, ``no-dependency``
        removes the text's edges. Edges GitHub's structure makes (a native stack, a base branch,
        a merged head) hold the parent's commits and stay, with a ``conflict`` reported."""
        latest = {(o.child, o.parent): o for o in overrides}  # a later one replaces an earlier
        for override in latest.values():
            if override.child not in self.records:
                continue
            if override.kind == "depends_on":
                self._declare(
                    override.child, override.parent, "override", override.text, override.origin
                )
                continue
            targets = {override.parent, self.final_superseder.get(override.parent, override.parent)}
            mine = {e for e in self.edges if e.child == override.child and e.parent in targets}
            self.edges -= {e for e in mine if e.source in ("depends_on", "override")}
            kept = sorted({e.source for e in mine} - {"depends_on", "override"})
            if kept:
                self._report_live(
                    override.child,
                    "conflict",
                    [override.child, override.parent],
                    f"#{override.child} says it does not depend on #{override.parent} "
                    f"({override.origin}), but its {' and '.join(kept)} edge holds "
                    f"#{override.parent}'s commits; that edge is kept",
                )

    def _declare_ref(
        self, child: PrNumber, ref: Reference, source: EdgeSource, text: str, origin: str
    ) -> None:
        if ref.is_local(self.repo):
            self._declare(child, PrNumber(ref.number), source, text, origin)
        else:
            self.external.add(ExternalRef(child, ref.text))

    def _declare(
        self, child: PrNumber, target: PrNumber, source: EdgeSource, text: str, origin: str
    ) -> None:
        """Turn one declared dependency into an edge, or into the problem it reveals."""
        parent = self.final_superseder.get(target, target)
        if parent != target and parent != child:
            self._report_live(
                child,
                "superseded_parent",
                [child, target],
                f"#{child} depends on #{target} ({source}), which is superseded by #{parent}; "
                f"the edge now points at #{parent}",
            )
        if parent == child:
            return
        if parent not in self.records:
            self._report_live(
                child,
                "missing_parent",
                [child, parent],
                f"#{child} depends on #{parent} ({source}), which is not among the PRs given",
            )
            return
        merged = self.records[parent].merged  # in the base already: agrees with any stack
        if source != "native_stack" and not merged and not self._below_in_stack(child, parent):
            self._report_live(
                child,
                "conflict",
                [child, parent],
                f"#{child} depends on #{parent} ({source}), which is not below it in its native "
                "stack; the native stack wins and this edge is dropped",
            )
            return
        record = self.records[parent]
        if not record.is_open and not record.merged:
            self._report_live(
                child,
                "closed_parent",
                [child, parent],
                f"#{child} depends on #{parent} ({source}), which was closed without merging; "
                f"it is left out of #{child}'s stack",
            )
        author, written_in = self.declarer(child, source, origin)
        self.edges.add(StackEdge(child, parent, source, text, origin, author, written_in))

    def declarer(self, child: PrNumber, source: EdgeSource, origin: str) -> tuple[str, str]:
        """Who wrote a declaration and in which field, from where it was found (``origin``:
        ``body``, ``comment 5 by @bob``, ``title of #12``, ``commit 1a2b3c4``, ...)."""
        written = _WRITTEN.match(origin)
        if written is not None:
            pr = PrNumber(int(written["pr"])) if written["pr"] else child
            record = self.records.get(pr)
            author = written["who"] or (record.author if record is not None else "")
            return author, written["field"]
        record = self.records.get(child)
        if source == "override":
            by = _BY.search(origin)
            return (by.group(1) if by else ""), "comment"
        if source == "base_branch":
            return (record.author if record is not None else ""), "base ref"
        if source == "merged_head" and record is not None:
            sha = origin.removeprefix("commit ")
            authors = [c.author for c in record.commits if c.sha.startswith(sha) and c.author]
            return (authors[0] if authors else ""), "commit"
        return "", source.replace("_", " ")

    def _below_in_stack(self, child: PrNumber, parent: PrNumber) -> bool:
        if child not in self.stack_place:
            return True
        stack, position = self.stack_place[child]
        parent_place = self.stack_place.get(parent)
        return parent_place is not None and parent_place[0] == stack and parent_place[1] < position

    def report_base_branch_conflicts(self) -> None:
        named: dict[PrNumber, set[PrNumber]] = defaultdict(set)
        based: dict[PrNumber, set[PrNumber]] = defaultdict(set)
        for edge in self.edges:
            if edge.source in ("depends_on", "override"):
                named[edge.child].add(edge.parent)
            elif edge.source == "base_branch":
                based[edge.child].add(edge.parent)
        for child, bases in based.items():
            unnamed = bases - named[child]
            if named[child] and unnamed:
                self._report_live(
                    child,
                    "conflict",
                    [child, *sorted(named[child] | unnamed)],
                    f"#{child}'s body depends on {numbers_text(sorted(named[child]))}, "
                    f"but its base branch is the head of {numbers_text(sorted(unnamed))}; "
                    "both edges are kept",
                )
