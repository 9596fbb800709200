"""What to integrate and what to test when a series changes (pure decisions).

Given the series graph and each PR's state, :func:`plan_series` says which integration runs to
make: a ``stack`` run for every live PR of the series (its stack: the PR and its live parents in
topological order) and one ``series`` run of every live PR in series order.

Integrating is only merging: it runs no code from the PRs, so stackbot integrates every live PR
whether or not it is approved, and reports conflicts early. Testing runs the PRs' code on GPU
nodes, so :func:`untested_reason` allows jobs on a tree only when every PR merged into it is
approved (or trusted) at the head that was merged: a parent's unapproved head blocks its
children's jobs too, because their trees contain its code.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from stackbot.domain.series import SeriesGraph
from stackbot.domain.types import PrNumber


@dataclass(frozen=True)
class PrState:
    number: PrNumber
    head_sha: str
    live: bool  # open, not merged, not superseded
    approved_shas: frozenset[str] = frozenset()

    @property
    def approved(self) -> bool:
        return self.head_sha in self.approved_shas


@dataclass(frozen=True)
class PlannedRun:
    kind: str  # "stack" | "series"
    name: str  # ref-safe run name, e.g. "pr-8035" or "series-6307"
    prs: tuple[PrNumber, ...]  # merge order
    target_pr: PrNumber | None = None
    depends_on: Mapping[PrNumber, tuple[PrNumber, ...]] = field(default_factory=dict)


def series_run_name(series_key: str) -> str:
    return "series-" + series_key.replace("#", "").replace("/", "-")


def plan_series(
    graph: SeriesGraph,
    states: Mapping[int, PrState],
    *,
    series_key: str | None,
    lone_pr: PrNumber | None = None,
) -> list[PlannedRun]:
    """The runs for one series (or, with ``series_key=None``, for one PR in no series)."""
    if series_key is None:
        if lone_pr is None or not _live(states, lone_pr):
            return []
        return [PlannedRun("stack", f"pr-{lone_pr}", (lone_pr,), target_pr=lone_pr)]
    info = next((s for s in graph.series if s.key == series_key), None)
    if info is None:
        return []
    order = tuple(n for n in info.order if _live(states, n))
    parents = {n: tuple(p for p in graph.parents_of(n) if _live(states, p)) for n in order}
    runs = []
    for number in order:
        stack = tuple(n for n in graph.stacks.get(number, [number]) if _live(states, n))
        if not stack or stack[-1] != number:
            stack = (*stack, number)
        runs.append(
            PlannedRun(
                "stack",
                f"pr-{number}",
                stack,
                target_pr=number,
                depends_on={n: parents.get(n, ()) for n in stack},
            )
        )
    if order:
        runs.append(PlannedRun("series", series_run_name(series_key), order, depends_on=parents))
    return runs


def untested_reason(
    merged: Sequence[PrNumber], heads: Mapping[PrNumber, str], states: Mapping[int, PrState]
) -> str | None:
    """Why a tree holding ``merged`` (at ``heads``) may not be tested, or None if it may."""
    waiting = [
        n
        for n in merged
        if (state := states.get(n)) is None or heads.get(n) not in state.approved_shas
    ]
    if not waiting:
        return None
    names = ", ".join(f"#{n}" for n in waiting)
    verb = "is" if len(waiting) == 1 else "are"
    return f"{names} {verb} not approved at the merged head (a vetter comments `/ok to test <sha>`)"


def affected_prs(runs: Collection[PlannedRun]) -> list[PrNumber]:
    """Every PR whose report a set of runs can change."""
    found: set[PrNumber] = set()
    for run in runs:
        found.update(run.prs)
    return sorted(found)


def _live(states: Mapping[int, PrState], number: int) -> bool:
    state = states.get(number)
    return state is not None and state.live
