"""Building PR records for series tests in one line each."""

from __future__ import annotations

from typing import Any

from stackbot.domain.records import CommentRecord, CommitRecord, NativeStack, PrRecord
from stackbot.domain.series import SeriesGraph
from stackbot.domain.types import PrNumber

REPO = "NVIDIA/Megatron-LM"


def pr(
    number: int,
    body: str = "",
    *,
    comments: tuple[str, ...] = (),
    commits: tuple[tuple[str, str, tuple[str, ...]], ...] = (),
    stack: tuple[int, int] | None = None,
    **fields: Any,
) -> PrRecord:
    """A PR; ``stack=(stack_id, position)``, ``commits=((sha, message, parents), ...)``."""
    native = None
    if stack is not None:
        native = NativeStack(
            id=stack[0], number=stack[0], size=None, position=stack[1], base_ref="main", base_sha=""
        )
    return PrRecord(
        number=PrNumber(number),
        body=body,
        stack=native,
        comments=tuple(CommentRecord(author="someone", body=text) for text in comments),
        commits=tuple(CommitRecord(sha, message, parents) for sha, message, parents in commits),
        head_ref=fields.pop("head_ref", f"branch-{number}"),
        **fields,
    )


def edge_set(graph: SeriesGraph) -> set[tuple[int, int, str]]:
    return {(edge.child, edge.parent, edge.source) for edge in graph.edges}


def problem_set(graph: SeriesGraph) -> set[tuple[str, tuple[int, ...]]]:
    return {(problem.kind, tuple(problem.prs)) for problem in graph.problems}
