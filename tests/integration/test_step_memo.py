"""Merge steps are shared between runs: the same merge of the same commits is the same commit,
so a stack run after the series run repeats no merge, and its results equal a fresh run's."""

from __future__ import annotations

from stackbot.domain.integration import RunKind, StepOutcome
from stackbot.domain.types import PrNumber
from stackbot.services.integration import RunRequest, StepMemo, run_integration
from tests.integration.conftest import MirrorOf
from tests.integration.repo_builder import RepoBuilder


def _request(kind: RunKind, name: str, prs: list[tuple[int, str]]) -> RunRequest:
    return RunRequest(
        base_ref="main", prs=[(PrNumber(n), ref) for n, ref in prs], kind=kind, name=name
    )


def test_stack_runs_reuse_the_series_runs_steps(builder: RepoBuilder, mirror_of: MirrorOf) -> None:
    builder.commit("base", {"a.txt": "1\n", "b.txt": "1\n", "c.txt": "1\n"})
    builder.pr_branch("p1", {"a.txt": "2\n"})
    builder.branch("p2", "p1")
    builder.commit("p2", {"b.txt": "2\n"})
    builder.branch("p3", "p2")
    builder.commit("p3", {"c.txt": "2\n"})
    builder.checkout("main")
    mirror = mirror_of(builder)
    memo = StepMemo()
    chain = [(1, "p1"), (2, "p2"), (3, "p3")]
    series = run_integration(mirror, _request(RunKind.SERIES, "s", chain), memo=memo)
    misses = memo.misses
    stack = run_integration(mirror, _request(RunKind.STACK, "pr-3", chain), memo=memo)
    assert memo.misses == misses  # every step of the stack was already merged
    assert memo.hits == 3
    assert [s.commit for s in stack.steps] == [s.commit for s in series.steps]
    assert stack.final_tree == series.final_tree
    assert all(s.outcome is StepOutcome.CLEAN for s in stack.steps)
    # and a run without the memo makes exactly the same commits
    fresh = run_integration(mirror, _request(RunKind.STACK, "pr-3b", chain))
    assert [s.commit for s in fresh.steps] == [s.commit for s in stack.steps]
    # a prefix is shared too
    two = run_integration(mirror, _request(RunKind.STACK, "pr-2", chain[:2]), memo=memo)
    assert two.final_commit == series.steps[1].commit
