"""Which tree a PR's test results come from, and whether that tree is the one the PR would land
in (issue 24).

A PR's results are those of one tested tree: its own stack's integration (main + its ancestors
+ itself) when that was tested, else the series integration that holds it (series-first
testing). The series tree is the PR's own landing tree only when it holds exactly the PR's
stack on the same base (the top PR of a linear series); for any PR below it the series tree
also holds PRs above it, so its results say "passes as part of the series tree", never "ready
to land alone". Check runs, the verdict and the comment name the tree with these words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from stackbot.domain.report_view import IntegrationView, PrReportView, TestRow

_MERGED = frozenset({"clean", "resolved"})


@dataclass(frozen=True)
class TestedTree:
    """The tree a PR's test rows ran on."""

    __test__ = False  # not a pytest class

    kind: Literal["stack", "series"]
    commit: str  # the integration commit the jobs ran on ("" when not known)
    base_ref: str
    base_sha: str
    prs: tuple[int, ...]  # the PRs the tree holds, in merge order
    rows: tuple[TestRow, ...]
    series_key: str | None = None
    url: str | None = None

    def others(self, number: int) -> tuple[int, ...]:
        return tuple(n for n in self.prs if n != number)

    def describe(self) -> str:
        """``the series integration `c0ffee1` with #8034, #8035, #8748 on main `abc1234```."""
        what = "the series integration" if self.kind == "series" else "the stack integration"
        commit = f" `{self.commit[:7]}`" if self.commit else ""
        prs = ", ".join(f"#{n}" for n in self.prs)
        return f"{what}{commit} with {prs} on {self.base_ref} `{self.base_sha[:7]}`"


def merged_prs(run: IntegrationView | None) -> tuple[int, ...]:
    if run is None:
        return ()
    return tuple(step.pr for step in run.steps if step.outcome in _MERGED)


def tested_tree(view: PrReportView) -> TestedTree | None:
    """The tree the PR's verdict and test check runs are decided on: the stack's when its
    tests exist, else the series' when the series tree holds the PR; None before any test."""
    number = view.pr.number
    stack, series = view.stack_integration, view.series_integration
    if view.tests and stack is not None:
        commit = view.tested_commit or stack.commit or ""
        return TestedTree(
            "stack",
            commit,
            stack.base_ref,
            stack.base_sha,
            merged_prs(stack),
            view.tests,
            view.stack.series_key,
            stack.url,
        )
    if view.series_tests and series is not None and number in merged_prs(series):
        commit = view.series_tested_commit or series.commit or ""
        return TestedTree(
            "series",
            commit,
            series.base_ref,
            series.base_sha,
            merged_prs(series),
            view.series_tests,
            view.stack.series_key,
            series.url,
        )
    return None


def own_stack(view: PrReportView) -> tuple[int, ...]:
    """The PRs of the tree this PR would land in: its stack integration's (main + its ancestors
    + itself), else the PR alone when no stack run is known."""
    merged = merged_prs(view.stack_integration)
    return merged if view.pr.number in merged else (view.pr.number,)


def is_landing_tree(view: PrReportView, tree: TestedTree) -> bool:
    """Whether ``tree`` is the tree this PR would land in: its own stack's, or a series tree
    holding exactly its stack on the same base."""
    if tree.kind == "stack":
        return True
    stack = view.stack_integration
    if stack is not None and stack.base_sha and stack.base_sha != tree.base_sha:
        return False
    return set(tree.prs) == set(own_stack(view))


def landing_tree_words(view: PrReportView) -> str:
    """``main + #8034`` / ``main + #8034, #8035``: the tree this PR would land in."""
    base = view.stack_integration.base_ref if view.stack_integration else "main"
    return f"{base} + " + ", ".join(f"#{n}" for n in own_stack(view))
