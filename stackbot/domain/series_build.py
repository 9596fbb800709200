"""One construction of a series graph, step by step (:func:`stackbot.domain.series.build_series_graph`
calls the steps in order; its module docstring specifies what each step finds): the steps that
read the records for declared dependencies (supersession, native stacks, base branches, the
author's text, merged heads) and those that order the live PRs and group them into series. What
a declaration becomes is :class:`~stackbot.domain.series_edges.EdgeRules`'s."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from stackbot.domain import series_order
from stackbot.domain.dependency_text import Declared, clip, dependency_declarations
from stackbot.domain.records import CommentRecord, PrRecord
from stackbot.domain.references import (
    Reference,
    merged_branches,
    merged_head_refs,
    part_of_refs,
)
from stackbot.domain.series_edges import EdgeRules, StackIdentity, numbers_text
from stackbot.domain.series_records import (
    EDGE_SOURCES,
    SeriesInfo,
    StackEdge,
    Suggestion,
    Supersession,
)
from stackbot.domain.stack_lists import stack_list_edges, stack_list_parents
from stackbot.domain.supersession_text import predecessor_declarations, successor_declarations
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


# Stack tools that post the stack list as their own comment on the author's behalf: their
# comments are read for stack lists only.
STACK_TOOL_BOTS = frozenset({"graphite-app[bot]"})


def comment_origin(comment: CommentRecord) -> str:
    kind = "review" if comment.kind == "review" else "comment"
    where = f"{kind} {comment.id}" if comment.id is not None else kind
    return f"{where} by @{comment.author}"


# GitHub's author_associations of people who maintain the repository (OWNER, MEMBER: of the
# organisation; COLLABORATOR: given access to the repository). Their dependency sentences in
# comments and reviews count; anyone else's are suggestions.
MAINTAINER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


def others_comments(pr: PrRecord) -> list[tuple[CommentRecord, bool]]:
    """The comments and reviews on ``pr`` by others than its author and the stack-tool bots,
    each with whether its author is a maintainer."""
    me = pr.author.lower()
    return [
        (comment, comment.author_association.upper() in MAINTAINER_ASSOCIATIONS)
        for comment in pr.comments
        if comment.author.lower() != me and comment.author.lower() not in STACK_TOOL_BOTS
    ]


def authors_texts(pr: PrRecord) -> list[tuple[str, str]]:
    """(origin, text) of what the PR's author wrote: the title, the body, then their own
    comments and reviews."""
    texts = [("title", pr.title), ("body", pr.body)]
    me = pr.author.lower()
    texts += [
        (comment_origin(comment), comment.body)
        for comment in pr.comments
        if me and comment.author.lower() == me
    ]
    return texts


def latest_statements(found: list[tuple[Declared, str]]) -> list[tuple[Declared, str]]:
    """A PR's declarations, less those a later ``now depends on`` replaces: that statement (and
    any written in the same words) wins over what the PR said of itself before it."""
    latest = None
    for index, (declared, _) in enumerate(found):
        if declared.replaces_earlier and declared.child is None:
            latest = index
    if latest is None:
        return found
    words = found[latest][0].text
    return [
        (declared, origin)
        for index, (declared, origin) in enumerate(found)
        if index >= latest
        or declared.text == words
        or declared.child is not None
        or declared.on_self
    ]


class GraphBuild(EdgeRules):
    """One graph construction: the steps that find the declarations, then those that order and
    group the live PRs; build_series_graph calls them in order."""

    # -- supersession -----------------------------------------------------------------------

    def find_supersession(self) -> None:
        """The old PR's word (its body and any comment: who closes it is often a maintainer),
        else the new PR's author's ("Supersedes #N")."""
        written: dict[PrNumber, Supersession] = {}
        for number, pr in self.records.items():
            for origin, text in authors_texts(pr):
                for ref, words in predecessor_declarations(text):
                    old = PrNumber(ref.number)
                    if self._replaceable(ref, number):
                        written[old] = Supersession(
                            old, number, f"{origin} of #{number}", clip(words)
                        )
        for number, pr in self.records.items():
            if pr.merged:
                continue
            texts = [("body", pr.body)]
            texts += [(comment_origin(comment), comment.body) for comment in pr.comments]
            local = [
                Supersession(number, PrNumber(ref.number), origin, clip(words))
                for origin, text in texts
                for ref, words in successor_declarations(text)
                if ref.is_local(self.repo) and ref.number != number
            ]
            if local:
                written[number] = local[-1]
        for number, found in sorted(written.items()):
            self.superseded[number] = found.by
            self.supersessions.append(found)
        for number in self.superseded:
            final = self._follow_supersession(number)
            if final is not None:
                self.final_superseder[number] = final

    def _replaceable(self, ref: Reference, by: PrNumber) -> bool:
        old = PrNumber(ref.number)
        return (
            ref.is_local(self.repo)
            and old != by
            and old in self.records
            and not self.records[old].merged
        )

    def _follow_supersession(self, pr: PrNumber) -> PrNumber | None:
        chain = [pr]
        while chain[-1] in self.superseded:
            following = self.superseded[chain[-1]]
            if following in chain:
                loop = sorted(chain[chain.index(following) :])
                self.problems.add("conflict", loop, f"{numbers_text(loop)} supersede each other")
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
                    f"{numbers_text(members)} all claim position {position} of {name}",
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
                    f"{numbers_text(candidates)}; no base_branch edge is drawn",
                )

    def _head_in_repo(self, pr: PrRecord) -> bool:
        if pr.head_repo is None or self.repo is None:
            return True
        return pr.head_repo.lower() == self.repo.lower()

    def declare_from_text(self) -> None:
        about_others: list[tuple[PrNumber, Declared, str]] = []
        for number, pr in self.records.items():
            own: list[tuple[Declared, str]] = []
            for origin, text in authors_texts(pr):
                own += [(found, origin) for found in dependency_declarations(text)]
                own += [(found, origin) for found in stack_list_edges(text, number)]
            for comment in pr.comments:
                if comment.author.lower() in STACK_TOOL_BOTS:
                    origin = comment_origin(comment)
                    own += [(found, origin) for found in stack_list_parents(comment.body, number)]
            for comment, maintainer in others_comments(pr):
                said = [
                    (found, comment_origin(comment))
                    for found in dependency_declarations(comment.body)
                ]
                if maintainer:
                    own += said
                else:
                    self._suggest(number, comment.author, said)
            for found, origin in latest_statements(own):
                if found.child is None and not found.on_self:
                    self._declare_written(number, found, origin)
                else:
                    about_others.append((number, found, origin))
            self._find_tracking_issue(number, pr.body)
        # What a PR's text says about other PRs comes after every PR's own word.
        for writer, found, origin in about_others:
            self._declare_about(writer, found, origin)

    def _suggest(self, number: PrNumber, author: str, said: list[tuple[Declared, str]]) -> None:
        """A dependency sentence by someone who may not declare one: kept to be shown."""
        for found, origin in said:
            child, parent = number, None
            if found.child is not None and found.child.is_local(self.repo):
                child = PrNumber(found.child.number)
            if found.on_self:
                parent = number
            elif found.ref is not None and found.ref.is_local(self.repo):
                parent = PrNumber(found.ref.number)
            if parent is not None and parent != child:
                self.suggestions.append(Suggestion(child, parent, found.text, origin, author))

    def _declare_about(self, writer: PrNumber, found: Declared, origin: str) -> None:
        """An edge a PR's text declares between other PRs, or from another PR to it: "since #A
        depends on #B" (A → B), "#M is blocked on this" (M → writer), a merge-order story, an
        entry of a stack list that describes the whole stack (only for a PR whose own text,
        base branch or stack declare no parent)."""
        child = writer
        if found.child is not None:
            if not found.child.is_local(self.repo) or found.child.number not in self.records:
                return
            child = PrNumber(found.child.number)
        if found.on_self:
            if child != writer and (child, writer) not in self.denied:
                self._declare(child, writer, "depends_on", found.text, f"{origin} of #{writer}")
            return
        if child == writer:
            self._declare_written(writer, found, origin)
            return
        if found.kind == "stack list" and any(edge.child == child for edge in self.edges):
            return  # its own text or base branch says where it stands
        self._declare_written(child, found, f"{origin} of #{writer}")

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
                f"{numbers_text(owners)}; no edge is drawn",
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
                f"#{number} says it is part of {numbers_text(issues)}; "
                f"it joins #{issues[0]}'s series",
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
