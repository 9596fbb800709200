"""Layout of a series' dependency graph for the dashboard's SVG drawing.

Layered left to right: a PR's column is the length of the longest dependency chain below it
(roots in column 0), rows follow the series order. Cycles (reported elsewhere as problems) are
cut by ignoring the edges that close them, so the layout always terminates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

NODE_WIDTH = 150
NODE_HEIGHT = 44
COLUMN_GAP = 70
ROW_GAP = 18
MARGIN = 16


@dataclass(frozen=True)
class GraphNode:
    number: int
    title: str
    state: str  # css class: open, approved, clean, conflict, passed, failed, merged, closed, ...


@dataclass(frozen=True)
class GraphEdge:
    child: int
    parent: int
    source: str
    title: str = ""  # the edge's tooltip: where it comes from and the words that declared it


@dataclass(frozen=True)
class PlacedNode:
    node: GraphNode
    x: int
    y: int
    width: int = NODE_WIDTH
    height: int = NODE_HEIGHT

    @property
    def short_title(self) -> str:
        return self.node.title if len(self.node.title) <= 22 else self.node.title[:21] + "…"


@dataclass(frozen=True)
class PlacedEdge:
    edge: GraphEdge
    x1: int
    y1: int
    x2: int
    y2: int

    @property
    def label_x(self) -> int:
        return (self.x1 + self.x2) // 2

    @property
    def label_y(self) -> int:
        return (self.y1 + self.y2) // 2 - 4


@dataclass(frozen=True)
class GraphLayout:
    nodes: tuple[PlacedNode, ...]
    edges: tuple[PlacedEdge, ...]
    width: int
    height: int


def layout_graph(nodes: Sequence[GraphNode], edges: Sequence[GraphEdge]) -> GraphLayout:
    """Place ``nodes`` (in series order) in columns by dependency depth."""
    order = {node.number: index for index, node in enumerate(nodes)}
    parents: dict[int, list[int]] = defaultdict(list)
    for edge in edges:
        if edge.child in order and edge.parent in order and edge.child != edge.parent:
            parents[edge.child].append(edge.parent)
    column = _columns(list(order), parents)
    rows: dict[int, int] = defaultdict(int)
    placed: dict[int, PlacedNode] = {}
    for node in nodes:
        col = column[node.number]
        row = rows[col]
        rows[col] += 1
        placed[node.number] = PlacedNode(
            node=node,
            x=MARGIN + col * (NODE_WIDTH + COLUMN_GAP),
            y=MARGIN + row * (NODE_HEIGHT + ROW_GAP),
        )
    placed_edges = tuple(
        PlacedEdge(
            edge=edge,
            x1=placed[edge.parent].x + NODE_WIDTH,
            y1=placed[edge.parent].y + NODE_HEIGHT // 2,
            x2=placed[edge.child].x,
            y2=placed[edge.child].y + NODE_HEIGHT // 2,
        )
        for edge in edges
        if edge.child in placed and edge.parent in placed and edge.child != edge.parent
    )
    columns = (max(column.values()) + 1) if column else 1
    tallest = max(rows.values()) if rows else 1
    return GraphLayout(
        nodes=tuple(placed[node.number] for node in nodes),
        edges=placed_edges,
        width=2 * MARGIN + columns * NODE_WIDTH + (columns - 1) * COLUMN_GAP,
        height=2 * MARGIN + tallest * NODE_HEIGHT + (tallest - 1) * ROW_GAP,
    )


def _columns(numbers: list[int], parents: dict[int, list[int]]) -> dict[int, int]:
    """Longest-path depth of every node, ignoring edges that would close a cycle."""
    depth: dict[int, int] = {}
    visiting: set[int] = set()

    def visit(number: int) -> int:
        if number in depth:
            return depth[number]
        visiting.add(number)
        best = 0
        for parent in parents.get(number, ()):
            if parent in visiting:
                continue  # a cycle: drawn, but not used for placement
            best = max(best, visit(parent) + 1)
        visiting.discard(number)
        depth[number] = best
        return best

    for number in numbers:
        visit(number)
    return depth


def dependency_depths(numbers: Sequence[int], edges: Sequence[GraphEdge]) -> dict[int, int]:
    """How deep each PR sits in its stack (roots 0): the indentation of the stack-order list."""
    known = set(numbers)
    parents: dict[int, list[int]] = defaultdict(list)
    for edge in edges:
        if edge.child in known and edge.parent in known and edge.child != edge.parent:
            parents[edge.child].append(edge.parent)
    return _columns(list(numbers), parents)


EDGE_WORDS = {
    "native_stack": "stacked on",
    "base_branch": "base branch",
    "depends_on": "“Depends on”",
    "merged_head": "merges the head of",
    "override": "set by /stackbot depends-on",
}


def edge_words(source: str) -> str:
    """An edge's source as a reader says it: ``base_branch`` → ``base branch``."""
    return EDGE_WORDS.get(source, source.replace("_", " "))


PROBLEM_WORDS = {
    "cycle": "dependency cycle",
    "missing_parent": "parent not found",
    "closed_parent": "parent closed",
    "superseded_parent": "parent superseded",
    "conflict": "conflict",
}


def problem_words(kind: str) -> str:
    """A series problem's kind as a reader says it: ``missing_parent`` → ``parent not found``."""
    return PROBLEM_WORDS.get(kind, kind.replace("_", " "))


PURPOSE_WORDS = {
    "tree": "testing trees",
    "confirm": "confirming reruns",
    "bisect": "bisecting",
    "retry": "infra retries",
    "baseline": "main's baselines",
}


def purpose_words(purpose: str) -> str:
    """Why jobs ran, as a reader says it: ``tree`` → ``testing trees``."""
    return PURPOSE_WORDS.get(purpose, purpose.replace("_", " "))


def stack_order(numbers: Sequence[int], edges: Sequence[GraphEdge]) -> list[tuple[int, int]]:
    """The PRs as an indented tree, each ``(number, depth)``: every PR right under the parent
    that sets its depth (its deepest parent; the later one in series order on a tie), after
    that parent's earlier children, so a PR is never drawn indented under a PR it does not
    depend on. Roots and the children of one PR keep the series order."""
    depths = dependency_depths(numbers, edges)
    position = {number: index for index, number in enumerate(numbers)}
    parents: dict[int, set[int]] = defaultdict(set)
    for edge in edges:
        if edge.child in position and edge.parent in position and edge.child != edge.parent:
            parents[edge.child].add(edge.parent)
    children: dict[int, list[int]] = defaultdict(list)
    roots = []
    for number in numbers:
        above = [p for p in parents.get(number, ()) if depths[p] == depths[number] - 1]
        if depths[number] == 0 or not above:
            roots.append(number)
        else:
            children[max(above, key=position.__getitem__)].append(number)
    order: list[tuple[int, int]] = []
    seen: set[int] = set()

    def visit(number: int) -> None:
        if number in seen:
            return
        seen.add(number)
        order.append((number, depths[number]))
        for child in children.get(number, ()):
            visit(child)

    for root in roots:
        visit(root)
    return order
