"""Stacks and series orders derived on demand equal the ones the graph used to materialise.

``MaterialisedOrder`` is the previous implementation, kept here verbatim as the reference: it
stored every live PR's ancestors as a set (quadratic on a long chain) and built every stack up
front. The graph now keeps only parents and the order; these properties check that nothing a
caller reads changed, on arbitrary graphs with cycles, closed, merged and superseded PRs, and
tracking issues (whose series depend on each other through non-members).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from stackbot.domain.records import PrRecord
from stackbot.domain.series import build_series_graph
from stackbot.domain.series_build import GraphBuild, index_records
from stackbot.domain.series_order import Parents, topological_order
from stackbot.domain.types import PrNumber
from tests.series.helpers import REPO, pr


@dataclass(frozen=True)
class MaterialisedOrder:
    """The LiveOrder of before stacks were derived on demand (the cycle breaking is shared)."""

    order: tuple[PrNumber, ...]
    ancestors: Mapping[PrNumber, frozenset[PrNumber]]
    position: Mapping[PrNumber, int]

    @classmethod
    def build(cls, order: Iterable[PrNumber], acyclic: Parents) -> MaterialisedOrder:
        ordered = tuple(order)
        ancestors: dict[PrNumber, frozenset[PrNumber]] = {}
        for number in ordered:
            found: set[PrNumber] = set()
            for parent in acyclic[number]:
                found.add(parent)
                found |= ancestors[parent]
            ancestors[number] = frozenset(found)
        return cls(ordered, ancestors, {n: place for place, n in enumerate(ordered)})

    def stack(self, number: PrNumber, live_parents: Collection[PrNumber]) -> list[PrNumber]:
        if number in self.ancestors:
            below: set[PrNumber] = set(self.ancestors[number])
        else:
            below = set(live_parents)
            for parent in live_parents:
                below |= self.ancestors.get(parent, frozenset())
        return [*sorted(below, key=self.position.__getitem__), number]

    def order_of(self, members: Iterable[PrNumber]) -> tuple[PrNumber, ...]:
        chosen = {n for n in members if n in self.ancestors}
        through = {n: self.ancestors[n] & chosen for n in chosen}
        return tuple(topological_order(chosen, through))


@st.composite
def repositories(draw: st.DrawFn) -> list[PrRecord]:
    numbers = draw(st.lists(st.integers(1, 60), min_size=1, max_size=14, unique=True))
    result = []
    for number in numbers:
        parents = draw(st.lists(st.sampled_from(numbers), max_size=3, unique=True))
        lines = [f"Depends on #{p}." for p in parents]
        if draw(st.integers(0, 3)) == 0:
            lines.append(f"Part of #{draw(st.sampled_from([900, 901]))}.")
        if draw(st.integers(0, 7)) == 0:
            lines.append(f"Superseded by #{draw(st.sampled_from(numbers))}.")
        state = draw(st.sampled_from(["open", "open", "open", "closed", "merged"]))
        result.append(
            pr(
                number,
                "\n".join(lines),
                state="open" if state == "open" else "closed",
                merged=state == "merged",
            )
        )
    return result


def materialised(
    records: list[PrRecord],
) -> tuple[dict[int, list[PrNumber]], list[tuple[int, ...]]]:
    build = GraphBuild(index_records(records), REPO)
    build.find_supersession()
    build.declare_native_stacks()
    build.declare_base_branches()
    build.declare_from_text()
    build.declare_merged_heads()
    build.report_base_branch_conflicts()
    live_parents = build.live_parents()
    ordering = build.order_live_prs(live_parents)
    old = MaterialisedOrder.build(ordering.order, ordering.parents)
    stacks = {n: old.stack(n, live_parents[n]) for n in build.records}
    orders = [old.order_of(info.prs) for info in build.series(ordering)]
    return stacks, orders


@settings(max_examples=300)
@given(repositories())
def test_stacks_and_orders_on_demand_equal_the_materialised_ones(records: list[PrRecord]) -> None:
    graph = build_series_graph(records, repo=REPO)
    stacks, orders = materialised(records)
    assert list(graph.stacks) == list(stacks)
    assert {n: graph.stacks[n] for n in graph.stacks} == stacks
    assert graph.stacks == stacks
    assert [info.order for info in graph.series] == orders
    assert all(graph.stacks.get(n) is None for n in (0, 61, 1000))


@settings(max_examples=100)
@given(repositories())
def test_the_indexes_answer_as_a_scan_of_the_edges(records: list[PrRecord]) -> None:
    graph = build_series_graph(records, repo=REPO)
    for record in records:
        n = record.number
        assert graph.parents_of(n) == tuple(sorted({e.parent for e in graph.edges if e.child == n}))
        assert graph.children_of(n) == tuple(
            sorted({e.child for e in graph.edges if e.parent == n})
        )
        assert graph.series_of(n) == next((s for s in graph.series if n in s.prs), None)


def test_a_long_chain_keeps_memory_linear() -> None:
    """3,000 PRs in one chain: the materialised ancestors alone held 4.5 million entries
    (~250 MB); what the graph keeps now is a few MB. Memory, not time, so not flaky."""
    records = [
        pr(n, f"Depends on #{n - 1}." if n > 1 else "", head_ref=f"b{n}") for n in range(1, 3001)
    ]
    tracemalloc.start()
    try:
        graph = build_series_graph(records, repo=REPO)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"building the graph peaked at {peak / 2**20:.0f} MiB"
    assert graph.stacks[3000] == list(range(1, 3001))
    assert graph.series[0].order == tuple(range(1, 3001))
