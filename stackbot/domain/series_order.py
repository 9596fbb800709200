"""Orders over a dependency graph: cycles, topological orders, stacks and series groups.

The graph is given as ``parents[pr]`` (the PRs ``pr`` depends on). Every order puts parents
first and, among PRs free to go next, the smallest number first, so the same input always
gives the same order. Used by :mod:`stackbot.domain.series`; pure.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from stackbot.domain.types import PrNumber

Parents = Mapping[PrNumber, Collection[PrNumber]]


def topological_order(nodes: Iterable[PrNumber], parents: Parents) -> list[PrNumber]:
    """Parents before children, ties by number; parents outside ``nodes`` are ignored.

    On a cycle, the smallest PR still waiting goes next, so the function always terminates
    (callers that care break cycles first with :func:`break_cycles`).
    """
    members = set(nodes)
    waiting = {pr: len(set(parents.get(pr, ())) & members) for pr in members}
    children: dict[PrNumber, list[PrNumber]] = defaultdict(list)
    for pr in members:
        for parent in set(parents.get(pr, ())) & members:
            children[parent].append(pr)
    ready = [pr for pr, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order: list[PrNumber] = []
    placed: set[PrNumber] = set()
    while len(order) < len(members):
        if not ready:
            ready.append(min(pr for pr in members if pr not in placed))
        pr = heapq.heappop(ready)
        if pr in placed:
            continue
        order.append(pr)
        placed.add(pr)
        for child in children[pr]:
            waiting[child] -= 1
            if waiting[child] == 0 and child not in placed:
                heapq.heappush(ready, child)
    return order


def find_cycle(nodes: Iterable[PrNumber], parents: Parents) -> list[PrNumber] | None:
    """One cycle, or None: among the strongly connected components with a cycle, the one
    holding the smallest PR; the shortest cycle through that PR, in dependency order (each
    member depends on the next, the last on the first), starting from that PR."""
    components = [c for c in strongly_connected(nodes, parents) if _has_cycle(c, parents)]
    if not components:
        return None
    component = min(components, key=min)
    start = min(component)
    # Breadth-first from start along dependencies, in number order, back to start.
    came_from: dict[PrNumber, PrNumber] = {}
    frontier = [start]
    while frontier:
        following: list[PrNumber] = []
        for pr in frontier:
            for parent in sorted(set(parents.get(pr, ())) & component):
                if parent == start:
                    return _path_to(pr, start, came_from)
                if parent not in came_from:
                    came_from[parent] = pr
                    following.append(parent)
        frontier = following
    raise AssertionError("a strongly connected component with a cycle has a cycle")


def _path_to(
    last: PrNumber, start: PrNumber, came_from: Mapping[PrNumber, PrNumber]
) -> list[PrNumber]:
    path = [last]
    while path[-1] != start:
        path.append(came_from[path[-1]])
    return path[::-1]


def _has_cycle(component: set[PrNumber], parents: Parents) -> bool:
    if len(component) > 1:
        return True
    (only,) = component
    return only in parents.get(only, ())


def strongly_connected(nodes: Iterable[PrNumber], parents: Parents) -> list[set[PrNumber]]:
    """Tarjan's algorithm, iterative so that long chains do not exhaust the stack."""
    members = set(nodes)
    index: dict[PrNumber, int] = {}
    low: dict[PrNumber, int] = {}
    on_stack: set[PrNumber] = set()
    stack: list[PrNumber] = []
    components: list[set[PrNumber]] = []
    for root in sorted(members):
        if root in index:
            continue
        work = [(root, iter(sorted(set(parents.get(root, ())) & members)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            pr, pending = work[-1]
            parent = next(pending, None)
            if parent is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[pr])
                if low[pr] == index[pr]:
                    component: set[PrNumber] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == pr:
                            break
                    components.append(component)
            elif parent not in index:
                index[parent] = low[parent] = len(index)
                stack.append(parent)
                on_stack.add(parent)
                work.append((parent, iter(sorted(set(parents.get(parent, ())) & members))))
            elif parent in on_stack:
                low[pr] = min(low[pr], index[parent])
    return components


@dataclass(frozen=True)
class LiveOrder:
    """The live PRs in one order, with the cycles found and the edges set aside to break them.

    Only what is linear in the PRs and edges is kept (the order, each PR's parents, positions);
    ancestors and stacks are derived on demand, so a 10,000-PR chain does not hold 50 million
    ancestor entries.
    """

    order: tuple[PrNumber, ...]
    parents: Mapping[PrNumber, frozenset[PrNumber]]  # without the edges set aside
    cycles: tuple[tuple[PrNumber, ...], ...]
    breaks: tuple[tuple[PrNumber, PrNumber], ...]
    position: Mapping[PrNumber, int]

    @classmethod
    def build(cls, live: Iterable[PrNumber], parents: Parents) -> LiveOrder:
        members = set(live)
        acyclic = {pr: set(parents.get(pr, ())) & members for pr in members}
        cycles: list[tuple[PrNumber, ...]] = []
        breaks: list[tuple[PrNumber, PrNumber]] = []
        while (cycle := find_cycle(members, acyclic)) is not None:
            cycles.append(tuple(cycle))
            # The smallest (usually oldest) PR is the likeliest bottom: drop its edge upwards.
            broken = (cycle[0], cycle[1] if len(cycle) > 1 else cycle[0])
            acyclic[broken[0]].discard(broken[1])
            breaks.append(broken)
        order = topological_order(members, acyclic)
        return cls(
            order=tuple(order),
            parents={pr: frozenset(acyclic[pr]) for pr in order},
            cycles=tuple(cycles),
            breaks=tuple(breaks),
            position={pr: place for place, pr in enumerate(order)},
        )

    def ancestors_of(self, starts: Iterable[PrNumber]) -> set[PrNumber]:
        """``starts`` that are live and every live PR they depend on, directly or not."""
        found: set[PrNumber] = set()
        todo = [pr for pr in starts if pr in self.parents]
        while todo:
            pr = todo.pop()
            if pr not in found:
                found.add(pr)
                todo.extend(self.parents[pr] - found)
        return found

    def stack(self, pr: PrNumber, live_parents: Collection[PrNumber]) -> list[PrNumber]:
        """``pr`` after its live ancestors, parents first.

        For a live PR ``live_parents`` is ignored (its own parents are known); a PR that is not
        live gets the ancestors of the live parents it names. Time: the stack's size (log).
        """
        below = self.ancestors_of(self.parents.get(pr, live_parents))
        # The global order restricted to a set closed under ancestors is that set's own
        # smallest-first topological order, so no second sort by dependency is needed.
        return [*sorted(below, key=self.position.__getitem__), pr]

    def order_of(self, members: Iterable[PrNumber]) -> tuple[PrNumber, ...]:
        """The live ``members`` in order, keeping dependencies that pass through non-members.

        Each member depends on the nearest members above it, found through non-members only
        (the same reachability as all its ancestors among the members, so the same order);
        non-members are visited once per call, in the global order.
        """
        chosen = {pr for pr in members if pr in self.parents}
        if not chosen:
            return ()
        # A PR placed before every member has no member among its ancestors: not visited.
        first = min(self.position[pr] for pr in chosen)
        outside: set[PrNumber] = set()
        todo = [p for pr in chosen for p in self.parents[pr] if p not in chosen]
        while todo:
            pr = todo.pop()
            if pr not in outside and self.position[pr] > first:
                outside.add(pr)
                todo.extend(p for p in self.parents[pr] if p not in chosen and p not in outside)
        reach: dict[PrNumber, frozenset[PrNumber]] = {}
        for pr in sorted(outside, key=self.position.__getitem__):
            reach[pr] = self._nearest(pr, chosen, reach)
        through = {pr: self._nearest(pr, chosen, reach) for pr in chosen}
        return tuple(topological_order(chosen, through))

    def _nearest(
        self,
        pr: PrNumber,
        chosen: set[PrNumber],
        reach: Mapping[PrNumber, frozenset[PrNumber]],
    ) -> frozenset[PrNumber]:
        found: set[PrNumber] = set()
        for parent in self.parents[pr]:
            if parent in chosen:
                found.add(parent)
            else:
                found |= reach.get(parent, frozenset())
        return frozenset(found)


class Stacks(Mapping[int, list[PrNumber]]):
    """Every PR's stack, derived when asked for (see :meth:`LiveOrder.stack`).

    Holds the order and each PR's live parents, which are linear in the PRs and edges; a
    materialised ``{pr: stack}`` is quadratic on a long chain.
    """

    def __init__(
        self, ordering: LiveOrder, live_parents: Mapping[PrNumber, Collection[PrNumber]]
    ) -> None:
        self._ordering = ordering
        self._live_parents = live_parents

    def __getitem__(self, pr: int) -> list[PrNumber]:
        if pr not in self._live_parents:
            raise KeyError(pr)
        number = PrNumber(pr)
        return self._ordering.stack(number, self._live_parents[number])

    def __iter__(self) -> Iterator[int]:
        return iter(self._live_parents)

    def __len__(self) -> int:
        return len(self._live_parents)

    def __contains__(self, pr: object) -> bool:
        return pr in self._live_parents

    def __repr__(self) -> str:
        return f"Stacks(<{len(self)} PRs, derived on demand>)"

    def parents_of(self, pr: int) -> list[PrNumber]:
        """``pr``'s live parents, smallest first."""
        return sorted(self._live_parents[PrNumber(pr)])

    def tips(self) -> list[PrNumber]:
        """The PRs that are no PR's live parent, smallest first: their stacks hold every other
        stack, so printing theirs prints each stack once (linear in a chain, not quadratic)."""
        below = {parent for parents in self._live_parents.values() for parent in parents}
        return sorted(pr for pr in self._live_parents if pr not in below)


@dataclass(frozen=True)
class SeriesGroup:
    tracking_issue: PrNumber | None
    root: PrNumber
    prs: tuple[PrNumber, ...]


def series_groups(
    numbers: Sequence[PrNumber],
    pairs: Collection[tuple[PrNumber, PrNumber]],
    tracking: Mapping[PrNumber, PrNumber],
) -> list[SeriesGroup]:
    """Group PRs into series: by tracking issue, else by the edges (child, parent) joining them.

    The rules are those of :mod:`stackbot.domain.series`. Tracked series come first by issue
    number, then root-keyed series by root.
    """
    by_issue: dict[PrNumber, set[PrNumber]] = defaultdict(set)
    for pr in numbers:
        if pr in tracking:
            by_issue[tracking[pr]].add(pr)
    children: dict[PrNumber, set[PrNumber]] = defaultdict(set)
    parents: dict[PrNumber, set[PrNumber]] = defaultdict(set)
    for child, parent in pairs:
        children[parent].add(child)
        parents[child].add(parent)
    untracked_groups: list[set[PrNumber]] = []
    for group in _untracked_components(numbers, pairs, tracking):
        dependents = {tracking[c] for pr in group for c in children[pr] if c in tracking}
        dependencies = {tracking[p] for pr in group for p in parents[pr] if p in tracking}
        joined = dependents or dependencies
        if joined:
            by_issue[min(joined)] |= group
        elif len(group) > 1:
            untracked_groups.append(group)
    tracked = [
        SeriesGroup(issue, _root(members, parents), tuple(sorted(members)))
        for issue, members in sorted(by_issue.items())
    ]
    rooted = [
        SeriesGroup(None, _root(group, parents), tuple(sorted(group))) for group in untracked_groups
    ]
    return tracked + sorted(rooted, key=lambda group: group.root)


def _untracked_components(
    numbers: Sequence[PrNumber],
    pairs: Collection[tuple[PrNumber, PrNumber]],
    tracking: Mapping[PrNumber, PrNumber],
) -> list[set[PrNumber]]:
    untracked = {pr for pr in numbers if pr not in tracking}
    neighbours: dict[PrNumber, set[PrNumber]] = defaultdict(set)
    for child, parent in pairs:
        if child in untracked and parent in untracked:
            neighbours[child].add(parent)
            neighbours[parent].add(child)
    seen: set[PrNumber] = set()
    components: list[set[PrNumber]] = []
    for start in sorted(untracked):
        if start in seen:
            continue
        component = {start}
        frontier = [start]
        while frontier:
            pr = frontier.pop()
            for other in neighbours[pr] - component:
                component.add(other)
                frontier.append(other)
        seen |= component
        components.append(component)
    return components


def _root(members: Collection[PrNumber], parents: Mapping[PrNumber, set[PrNumber]]) -> PrNumber:
    """The smallest member with no parent among the members (the smallest one if all have)."""
    inside = set(members)
    roots = [pr for pr in inside if not parents.get(pr, set()) & inside]
    return min(roots) if roots else min(members)
