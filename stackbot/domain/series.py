"""The series graph: which PR depends on which, the stack of each PR, and the series order.

Pure: :func:`build_series_graph` reads :class:`~stackbot.domain.records.PrRecord` values and
returns a :class:`SeriesGraph`; nothing here does I/O.

Edges (child depends on parent) and where they come from:

- ``native_stack``: GitHub's native stacked PRs. PRs whose ``stack`` objects share an ``id``
  (else a ``number``) form one stack; the PR at position p depends on the one at p - 1. This
  source wins: another source that makes a stacked PR depend on a PR not below it in the same
  stack loses its edge, and a ``conflict`` is reported (a merged PR agrees with any stack: its
  code is in the base). A stack object with neither id nor
  number cannot be matched with its neighbours and adds nothing.
- ``base_branch``: the child's base ref is the head ref of another open PR whose head lives in
  the repository (``head_repo`` unknown, or equal to the configured repository).
- ``depends_on``: what the PR's author wrote in the body or in their own comments (comments by
  anyone else never count; a stack tool's bot comment, ``graphite-app[bot]``, counts for its
  stack list only): dependency phrases (:mod:`stackbot.domain.dependency_text`) and stack lists
  (:mod:`stackbot.domain.stack_lists`). A branch name stands for the one open PR whose head it
  is (in the repository); several such PRs are a ``conflict`` and no edge.
- ``merged_head``: a commit message merging another PR (``Merge NVIDIA#8035's head``,
  ``Merge #8035``, ``Merge branch '<its head ref>'``), or a merge commit whose non-first parent
  is another PR's current head SHA. A branch merge of the child's own base or head ref, or of a
  branch several PRs share, names nothing.

- ``override``: ``/stackbot depends-on #N`` (the ``overrides`` given, oldest first; the latest
  for a (child, parent) pair is the one applied). ``/stackbot no-dependency #N`` removes the
  ``depends_on`` edge to N (and no text edge to N is drawn); a ``native_stack``, ``base_branch``
  or ``merged_head`` edge to N holds N's commits, so it stays and a ``conflict`` says so.

One edge is kept per (child, parent, source), so agreeing sources show up side by side. Each
edge keeps the exact text that declared it (the first declaration) and where it was written
(``body``, ``comment 123 by @alice``, ``commit 1a2b3c4``, ``base ref``, ``native stack``, the
override's command).
References to the PR itself are ignored. References to other repositories (``depends_on`` and
``merged_head``) are listed in ``external`` and are not problems.

Supersession: ``Superseded by #N`` in the body or any comment (``supersessions`` keeps where
and the words) marks the PR superseded by N (the
last one written wins; a merged PR is never superseded, its code is in the base). Edges to it
are redirected to its superseder, following chains; PRs that supersede each other in a loop are
a ``conflict`` and are not redirected. A ``Superseded by`` another repository's PR is ignored.

Series: ``Part of #N`` makes tracking issue N the series key, ``"#N"`` (a second, different
``Part of`` is a ``conflict``; the first wins). PRs without a tracking issue that are joined by
edges to each other form a group. A group joined by an edge to a tracked PR joins that PR's
series (the series of PRs depending on the group first, then of PRs it depends on; the
smallest issue number among several). Any other group of two or more is a series keyed by its
root PR, ``"root-#N"``: the smallest-numbered member with no parent in the group. A PR linked to
nothing and tracking nothing is in no series. A series lists all its PRs, whatever their state;
its ``order`` holds only the live ones, which are what a series integration run merges.

Live PRs are open, unmerged and not superseded. Stacks and orders are built from live PRs
only: merged parents leave the stacks silently (their code is in the base), closed unmerged
parents leave them with a ``closed_parent`` problem. Orders are topological (parents first),
ties broken by the smaller PR number. Cycles among live PRs are reported with their members in
cycle order (each depends on the next, starting from the smallest number) and broken by setting
aside the smallest member's edge to the next member, so stacks are still produced.

Problems about a PR's parents are reported for live PRs only: a closed PR's declarations no
longer matter.
Each lists the PRs it involves: ``missing_parent``, ``closed_parent`` and ``superseded_parent``
the child then the parent (a native stack position without a record lists the child alone);
``cycle`` its members; ``conflict`` the PR then the PRs it names. Conflicts are: a stacked PR
depending on a PR not below it in its stack; a body naming parents while the base branch is
another open PR's head that it does not name (both edges are kept); two PRs at one position of a
native stack; several open PRs with the branch the child is based on; several tracking issues.
"""

from __future__ import annotations

from collections.abc import Sequence

from stackbot.domain.records import PrRecord
from stackbot.domain.series_build import GraphBuild, edge_sort_key, index_records
from stackbot.domain.series_order import Stacks
from stackbot.domain.series_records import (
    EDGE_SOURCES,
    PROBLEM_KINDS,
    DependencyOverride,
    EdgeSource,
    ExternalRef,
    GraphProblem,
    ProblemKind,
    SeriesGraph,
    SeriesInfo,
    StackEdge,
)

__all__ = [
    "EDGE_SOURCES",
    "PROBLEM_KINDS",
    "DependencyOverride",
    "EdgeSource",
    "ExternalRef",
    "GraphProblem",
    "ProblemKind",
    "SeriesGraph",
    "SeriesInfo",
    "StackEdge",
    "build_series_graph",
]


def build_series_graph(
    prs: Sequence[PrRecord],
    *,
    repo: str | None = None,
    overrides: Sequence[DependencyOverride] = (),
) -> SeriesGraph:
    """The series graph of ``prs``; ``repo`` (``owner/name``) decides which references are local;
    ``overrides`` (oldest first) are the ``/stackbot depends-on`` / ``no-dependency`` commands.

    Raises :class:`BadInput` when two records have the same number.
    """
    build = GraphBuild(index_records(prs), repo)
    build.note_overrides(overrides)
    build.find_supersession()
    build.declare_native_stacks()
    build.declare_base_branches()
    build.declare_from_text()
    build.declare_merged_heads()
    build.apply_overrides(overrides)
    build.report_base_branch_conflicts()
    live_parents = build.live_parents()
    ordering = build.order_live_prs(live_parents)
    return SeriesGraph(
        edges=tuple(sorted(build.edges, key=edge_sort_key)),
        series=build.series(ordering),
        stacks=Stacks(ordering, live_parents),
        problems=build.problems.sorted(),
        external=tuple(sorted(build.external)),
        superseded=dict(sorted(build.superseded.items())),
        cycle_breaks=ordering.breaks,
        supersessions=tuple(sorted(build.supersessions, key=lambda item: item.pr)),
        overrides=tuple(overrides),
        suggestions=tuple(build.suggestions),
    )
