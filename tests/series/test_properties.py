"""Property-based tests: orders and cycle detection on arbitrary dependency graphs.

Graphs are written into PR bodies as ``Depends on`` lists, so the parser is exercised too. The
checks are independent of the implementation: ancestors by plain search, acyclicity by
repeatedly removing PRs that depend on nothing left, and "ties by number" as the greedy rule
(each next PR is the smallest one whose parents are all placed).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from stackbot.domain.records import PrRecord
from stackbot.domain.series import SeriesGraph, build_series_graph
from stackbot.domain.types import PrNumber
from tests.series.helpers import pr

Graph = dict[int, set[int]]  # PR -> the PRs it depends on


@st.composite
def graphs(draw: st.DrawFn, *, acyclic: bool) -> Graph:
    numbers = draw(st.lists(st.integers(1, 300), min_size=1, max_size=12, unique=True))
    parents: Graph = {n: set() for n in numbers}
    for _ in range(draw(st.integers(0, 3 * len(numbers)))):
        child, parent = draw(st.sampled_from(numbers)), draw(st.sampled_from(numbers))
        # For a DAG, a PR depends only on PRs listed before it (in a shuffled order).
        if child != parent and (not acyclic or numbers.index(parent) < numbers.index(child)):
            parents[child].add(parent)
    return parents


def records(parents: Graph, states: Mapping[int, str] | None = None) -> list[PrRecord]:
    result = []
    for number, deps in parents.items():
        body = "Depends on " + ", ".join(f"#{d}" for d in sorted(deps)) + "." if deps else ""
        state = (states or {}).get(number, "open")
        result.append(
            pr(
                number,
                body,
                state="open" if state == "open" else "closed",
                merged=state == "merged",
            )
        )
    return result


def ancestors(parents: Mapping[int, Collection[int]], pr_number: int) -> set[int]:
    found: set[int] = set()
    todo = list(parents.get(pr_number, ()))
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(parents.get(current, ()))
    return found


def is_acyclic(parents: Mapping[int, Collection[int]]) -> bool:
    remaining = {n: set(ps) for n, ps in parents.items()}
    while remaining:
        free = [n for n, ps in remaining.items() if not ps & remaining.keys()]
        if not free:
            return False
        for n in free:
            del remaining[n]
    return True


def assert_greedy_order(order: Iterable[int], parents: Mapping[int, Collection[int]]) -> None:
    """``order`` is a topological order of its members that always takes the smallest ready PR."""
    members = list(order)
    assert len(set(members)) == len(members)
    placed: set[int] = set()
    for number in members:
        ready = {
            n
            for n in members
            if n not in placed and set(parents.get(n, ())) & set(members) <= placed
        }
        assert number == min(ready)
        placed.add(number)


def without_breaks(parents: Graph, graph: SeriesGraph) -> Graph:
    kept = {n: set(ps) for n, ps in parents.items()}
    for child, parent in graph.cycle_breaks:
        kept[child].discard(parent)
    return kept


@given(graphs(acyclic=True))
def test_acyclic_graphs_order_parents_first_and_ties_by_number(parents: Graph) -> None:
    graph = build_series_graph(records(parents))
    assert graph.problems == ()
    assert graph.cycle_breaks == ()
    assert {(e.child, e.parent) for e in graph.edges} == {
        (c, p) for c, ps in parents.items() for p in ps
    }
    for number, stack in graph.stacks.items():
        assert stack[-1] == number
        assert set(stack) == ancestors(parents, number) | {number}
        assert_greedy_order(stack, parents)
    for series in graph.series:
        assert series.key == f"root-#{series.root}"
        assert series.order == series.prs or sorted(series.order) == list(series.prs)
        assert_greedy_order(series.order, parents)
        assert not parents[series.root] & set(series.prs)


@given(graphs(acyclic=False))
def test_cycles_are_found_exactly_when_present_and_broken(parents: Graph) -> None:
    graph = build_series_graph(records(parents))
    cycles = [p.prs for p in graph.problems if p.kind == "cycle"]
    assert bool(cycles) == (not is_acyclic(parents))
    for cycle in cycles:
        assert len(set(cycle)) == len(cycle) >= 2
        assert cycle[0] == min(cycle)
        for here, following in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            assert following in parents[here], f"{here} does not depend on {following}"
    # Each cycle is broken at its smallest member's edge to the next member.
    assert sorted(graph.cycle_breaks) == sorted((cycle[0], cycle[1]) for cycle in cycles)
    kept = without_breaks(parents, graph)
    assert is_acyclic(kept)
    for number, stack in graph.stacks.items():
        assert stack[-1] == number
        assert set(stack) == ancestors(kept, number) | {number}
        assert_greedy_order(stack, kept)


@given(graphs(acyclic=False), st.randoms(use_true_random=False))
def test_the_graph_does_not_depend_on_record_order(parents: Graph, rng: random.Random) -> None:
    listed = records(parents)
    shuffled = list(listed)
    rng.shuffle(shuffled)
    assert build_series_graph(shuffled).to_json() == build_series_graph(listed).to_json()


@settings(max_examples=60)
@given(graphs(acyclic=True), st.data())
def test_only_live_prs_are_stacked(parents: Graph, data: st.DataObject) -> None:
    states = {n: data.draw(st.sampled_from(["open", "open", "closed", "merged"])) for n in parents}
    graph = build_series_graph(records(parents, states))
    live = {n for n, state in states.items() if state == "open"}
    live_parents = {n: ps & live for n, ps in parents.items()}
    for number, stack in graph.stacks.items():
        below = set(stack[:-1])
        assert below <= live
        if number in live:
            assert below == ancestors(live_parents, number)
    expected_closed = {
        ("closed_parent", (PrNumber(c), PrNumber(p)))
        for c, ps in parents.items()
        for p in ps
        if c in live and states[p] == "closed"
    }
    assert {(p.kind, p.prs) for p in graph.problems} == expected_closed
    for series in graph.series:
        assert set(series.order) == set(series.prs) & live
