"""One construction of a series graph, step by step (:func:`stackbot.domain.series.build_series_graph`
calls the steps in order; its module docstring specifies what each step finds)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from stackbot.domain import series_order
from stackbot.domain.dependency_text import Declared, clip, dependency_declarations
from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.references import (
    Reference,
    merged_branches,
    merged_head_refs,
    part_of_refs,
    superseded_by_declarations,
)
from stackbot.domain.series_records import (
    EDGE_SOURCES,
    PROBLEM_KINDS,
    DependencyOverride,
    EdgeSource,
    ExternalRef,
    GraphProblem,
    ProblemKind,
    SeriesInfo,
    StackEdge,
    Supersession,
)
from stackbot.domain.stack_lists import stack_list_parents
from stackbot.domain.types import PrNumber, SeriesKey
from stackbot.errors import BadInput


def index_records(prs: Sequence[PrRecord]) -> dict[PrNumber, PrRecord]:
    records: dict[PrNumber, PrRecord] = {}
    for pr in prs:
        if pr.number in records:
            raise BadInput(f"PR #{pr.number} appears twice; give each PR one record")
        records[pr.number] = pr
    return dict(sorted(records.items()))


def edge_sort_key(edge: StackEdge) -> tuple[int, int, int]:
    return (edge.child, edge.parent, EDGE_SOURCES.index(edge.source))


def _numbers(values: Iterable[int]) -> str:
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


StackIdentity = tuple[str, int]  # ("id", 17) or ("number", 3)

# Stack tools that post the stack list as their own comment on the author's behalf: their
# comments are read for stack lists only.
STACK_TOOL_BOTS = frozenset({"graphite-app[bot]"})


def comment_origin(comment: CommentRecord) -> str:
    where = f"comment {comment.id}" if comment.id is not None else "comment"
    return f"{where} by @{comment.author}"


def authors_texts(pr: PrRecord) -> list[tuple[str, str]]:
    """(origin, text) of what the PR's author wrote: the body, then their own comments."""
    texts = [("body", pr.body)]
    me = pr.author.lower()
    texts += [
        (comment_origin(comment), comment.body)
        for comment in pr.comments
        if me and comment.author.lower() == me
    ]
    return texts


class GraphBuild:
    """One graph construction; build_series_graph calls its steps in order."""

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

    # -- supersession -----------------------------------------------------------------------

    def find_supersession(self) -> None:
        for number, pr in self.records.items():
            if pr.merged:
                continue
            texts = [("body", pr.body)]
            texts += [(comment_origin(comment), comment.body) for comment in pr.comments]
            local = [
                Supersession(number, PrNumber(ref.number), origin, clip(words))
                for origin, text in texts
                for ref, words in superseded_by_declarations(text)
                if ref.is_local(self.repo) and ref.number != number
            ]
            if local:
                self.superseded[number] = local[-1].by
                self.supersessions.append(local[-1])
        for number in self.superseded:
            final = self._follow_supersession(number)
            if final is not None:
                self.final_superseder[number] = final

    def _follow_supersession(self, pr: PrNumber) -> PrNumber | None:
        chain = [pr]
        while chain[-1] in self.superseded:
            following = self.superseded[chain[-1]]
            if following in chain:
                loop = sorted(chain[chain.index(following) :])
                self.problems.add("conflict", loop, f"{_numbers(loop)} supersede each other")
                return None
            chain.append(following)
        return chain[-1]

    # -- declarations -----------------------------------------------------------------------

    def declare_native_stacks(self) -> None:
        stacks: dict[StackIdentity, dict[int, list[PrNumber]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for number, pr in self.records.items():
            identity = _stack_identity(pr)
            if identity is None or pr.stack is None or pr.stack.position is None:
                continue
            stacks[identity][pr.stack.position].append(number)
            self.stack_place[number] = (identity, pr.stack.position)
        for identity, positions in stacks.items():
            kind, value = identity
            name = f"native stack #{value}" if kind == "number" else f"native stack id {value}"
            self._declare_native_stack(name, positions)

    def _declare_native_stack(self, name: str, positions: dict[int, list[PrNumber]]) -> None:
        for position, members in sorted(positions.items()):
            if len(members) > 1:
                self.problems.add(
                    "conflict",
                    members,
                    f"{_numbers(members)} all claim position {position} of {name}",
                )
            below = positions.get(position - 1, [])
            for child in members:
                what = f"position {position} of {name}"
                if position > 1 and not below:
                    self._report_live(
                        child,
                        "missing_parent",
                        [child],
                        f"#{child} is at position {position} of {name}, but no PR given is at "
                        f"position {position - 1}; include that PR",
                    )
                for parent in below:
                    self._declare(child, parent, "native_stack", what, "native stack")

    def declare_base_branches(self) -> None:
        heads: dict[str, list[PrNumber]] = defaultdict(list)
        for number, pr in self.records.items():
            if pr.is_open and not pr.merged and pr.head_ref and self._head_in_repo(pr):
                heads[pr.head_ref].append(number)
        self.open_heads = heads
        for number, pr in self.records.items():
            candidates = [other for other in heads.get(pr.base_ref, []) if other != number]
            if len(candidates) == 1:
                self._declare(number, candidates[0], "base_branch", pr.base_ref, "base ref")
            elif candidates:
                self._report_live(
                    number,
                    "conflict",
                    [number, *candidates],
                    f"#{number} is based on branch {pr.base_ref!r}, the head branch of each of "
                    f"{_numbers(candidates)}; no base_branch edge is drawn",
                )

    def _head_in_repo(self, pr: PrRecord) -> bool:
        if pr.head_repo is None or self.repo is None:
            return True
        return pr.head_repo.lower() == self.repo.lower()

    def declare_from_text(self) -> None:
        for number, pr in self.records.items():
            for origin, text in authors_texts(pr):
                for found in dependency_declarations(text):
                    self._declare_written(number, found, origin)
                for found in stack_list_parents(text, number):
                    self._declare_written(number, found, origin)
            for comment in pr.comments:
                if comment.author.lower() in STACK_TOOL_BOTS:
                    for found in stack_list_parents(comment.body, number):
                        self._declare_written(number, found, comment_origin(comment))
            self._find_tracking_issue(number, pr.body)

    def note_overrides(self, overrides: Sequence[DependencyOverride]) -> None:
        latest = {(o.child, o.parent): o.kind for o in overrides}
        self.denied = {pair for pair, kind in latest.items() if kind == "no_dependency"}

    def _declare_written(self, child: PrNumber, found: Declared, origin: str) -> None:
        denied = found.ref is not None and (child, found.ref.number) in self.denied
        if denied and found.ref is not None and found.ref.is_local(self.repo):
            return
        if found.ref is not None:
            self._declare_ref(child, found.ref, "depends_on", found.text, origin)
            return
        assert found.branch is not None
        owners = [pr for pr in self.open_heads.get(found.branch, []) if pr != child]
        if len(owners) == 1:
            self._declare(child, owners[0], "depends_on", found.text, origin)
        elif owners:
            self._report_live(
                child,
                "conflict",
                [child, *owners],
                f"#{child} names branch {found.branch!r}, the head branch of each of "
                f"{_numbers(owners)}; no edge is drawn",
            )

    def _find_tracking_issue(self, number: PrNumber, body: str) -> None:
        local = (PrNumber(ref.number) for ref in part_of_refs(body) if ref.is_local(self.repo))
        issues = list(dict.fromkeys(local))
        if issues:
            self.tracking[number] = issues[0]
        if len(issues) > 1:
            self._report_live(
                number,
                "conflict",
                [number, *issues],
                f"#{number} says it is part of {_numbers(issues)}; it joins #{issues[0]}'s series",
            )

    def declare_merged_heads(self) -> None:
        by_head_sha: dict[str, list[PrNumber]] = defaultdict(list)
        for number, pr in self.records.items():
            if pr.head_sha:
                by_head_sha[pr.head_sha.lower()].append(number)
            if pr.head_ref:
                self.head_refs[pr.head_ref].append(number)
        for number, pr in self.records.items():
            for commit in pr.commits:
                origin = f"commit {commit.sha[:7]}"
                line = clip(commit.message.split("\n", 1)[0])
                for ref in merged_head_refs(commit.message):
                    self._declare_ref(number, ref, "merged_head", line, origin)
                for parent in self._merged_branch_owners(pr, commit.message):
                    self._declare(number, parent, "merged_head", line, origin)
                for sha in commit.parents[1:]:
                    for parent in by_head_sha.get(sha.lower(), []):
                        what = f"merge commit {commit.sha[:7]} has parent {sha[:7]}"
                        self._declare(number, parent, "merged_head", what, origin)

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

    def _merged_branch_owners(self, pr: PrRecord, message: str) -> list[PrNumber]:
        """The PRs whose head branch a ``Merge branch 'x'`` message names, when unambiguous."""
        found: list[PrNumber] = []
        for branch in merged_branches(message):
            for name in branch.candidate_names:
                if name in (pr.base_ref, pr.head_ref):
                    continue
                owners = list(self.head_refs.get(name, ()))
                if len(owners) > 1:
                    owners = [n for n in owners if self.records[n].is_open]
                if len(owners) == 1:
                    found.append(owners[0])
                    break
        return found

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
        self.edges.add(StackEdge(child, parent, source, text, origin))

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
                    f"#{child}'s body depends on {_numbers(sorted(named[child]))}, but its base "
                    f"branch is the head of {_numbers(sorted(unnamed))}; both edges are kept",
                )

    # -- orders and series ------------------------------------------------------------------

    def live_parents(self) -> dict[PrNumber, set[PrNumber]]:
        """Each PR's live parents (for every PR, live or not); the edges must be final."""
        parents: dict[PrNumber, set[PrNumber]] = {pr: set() for pr in self.records}
        for edge in self.edges:
            if self.is_live(edge.parent):
                parents[edge.child].add(edge.parent)
        return parents

    def order_live_prs(self, live_parents: dict[PrNumber, set[PrNumber]]) -> series_order.LiveOrder:
        live = [pr for pr in self.records if self.is_live(pr)]
        ordering = series_order.LiveOrder.build(live, {pr: live_parents[pr] for pr in live})
        for cycle in ordering.cycles:
            self.problems.add("cycle", cycle, _cycle_detail(cycle))
        return ordering

    def series(self, ordering: series_order.LiveOrder) -> tuple[SeriesInfo, ...]:
        pairs = {(edge.child, edge.parent) for edge in self.edges}
        groups = series_order.series_groups(list(self.records), pairs, self.tracking)
        return tuple(
            SeriesInfo(
                key=_series_key(group),
                tracking_issue=group.tracking_issue,
                root=group.root,
                prs=group.prs,
                order=ordering.order_of(group.prs),
            )
            for group in groups
        )


def _stack_identity(pr: PrRecord) -> StackIdentity | None:
    if pr.stack is None:
        return None
    if pr.stack.id is not None:
        return ("id", pr.stack.id)
    if pr.stack.number is not None:
        return ("number", pr.stack.number)
    return None


def _series_key(group: series_order.SeriesGroup) -> SeriesKey:
    if group.tracking_issue is not None:
        return SeriesKey(f"#{group.tracking_issue}")
    return SeriesKey(f"root-#{group.root}")


def _cycle_detail(cycle: Sequence[PrNumber]) -> str:
    chain = " → ".join(f"#{pr}" for pr in [*cycle, cycle[0]])
    return (
        f"dependency cycle {chain} (each depends on the next); the stacks and orders ignore "
        f"#{cycle[0]}'s dependency on #{cycle[1 % len(cycle)]}"
    )
