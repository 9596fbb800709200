"""Integration runs on real repositories: clean stacks, conflicts, stack and series policy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from stackbot.adapters.git import GitMirror, UnknownRef
from stackbot.domain.integration import (
    Conflict,
    IntegrationRunResult,
    RunKind,
    RunStatus,
    StepOutcome,
)
from stackbot.domain.types import PrNumber
from stackbot.errors import BadInput
from stackbot.services.integration import RunRequest, run_integration
from tests.integration.conftest import MirrorOf
from tests.integration.repo_builder import RepoBuilder


def integrate(
    mirror: GitMirror,
    prs: Sequence[tuple[int, str]],
    *,
    kind: RunKind = RunKind.SERIES,
    depends: Mapping[int, Sequence[int]] | None = None,
    generated: Sequence[str] = ("tools/process_group_usage_allowlist.json",),
) -> IntegrationRunResult:
    request = RunRequest(
        base_ref="main",
        prs=[(PrNumber(n), ref) for n, ref in prs],
        kind=kind,
        name="t",
        depends_on={PrNumber(k): [PrNumber(p) for p in v] for k, v in (depends or {}).items()},
        generated_files=generated,
    )
    return run_integration(mirror, request)


@pytest.fixture
def repo(builder: RepoBuilder) -> RepoBuilder:
    builder.commit(
        "base", {"a.txt": "1\n2\n3\n", "b.txt": "x\n", "c.txt": "c\n", "docs/old.md": "old\n"}
    )
    return builder


def test_clean_stack_merges_every_pr_with_two_parent_commits(
    repo: RepoBuilder, mirror_of: MirrorOf
) -> None:
    repo.pr_branch("p1", {"a.txt": "1\n2\n3\n4\n"})
    repo.branch("p2", "p1")
    repo.commit("p2", {"new/file.txt": "n\n"})
    repo.checkout("main")
    repo.commit("main moves on", {"c.txt": "c2\n"})
    mirror = mirror_of(repo)
    run = integrate(mirror, [(1, "p1"), (2, "p2")], kind=RunKind.STACK)
    assert run.status is RunStatus.CLEAN
    assert [s.outcome for s in run.steps] == [StepOutcome.CLEAN, StepOutcome.CLEAN]
    final = mirror.ls_tree(run.final_tree)
    assert set(final) == {"a.txt", "b.txt", "c.txt", "docs/old.md", "new/file.txt"}
    assert mirror.read_blob(final["c.txt"]) == b"c2\n"
    first, second = run.steps
    assert first.commit is not None and second.commit is not None
    parents = repo.git(
        "--git-dir", str(mirror.git_dir), "log", "-1", "--format=%P", second.commit
    ).split()
    assert parents == [first.commit, mirror.rev_parse("p2")]
    assert run.ref_name == "refs/stackbot/stack/t/head"
    refs = mirror.list_refs("refs/stackbot/stack/t/")
    assert refs["refs/stackbot/stack/t/head"] == run.final_commit
    first_parents = repo.git(
        "--git-dir", str(mirror.git_dir), "rev-list", "--first-parent", run.final_commit
    )
    assert first_parents.split()[:2] == [second.commit, first.commit]
    assert refs["refs/stackbot/stack/t/base"] == mirror.rev_parse("main")
    message = repo.git("--git-dir", str(mirror.git_dir), "log", "-1", "--format=%B", second.commit)
    assert "Stackbot-PR: #2" in message and f"Stackbot-Head: {mirror.rev_parse('p2')}" in message
    # The same run again gives the same commits: dates come from the parents, not the clock.
    again = integrate(mirror, [(1, "p1"), (2, "p2")], kind=RunKind.STACK)
    assert again.final_commit == run.final_commit


def test_stack_stops_at_a_text_conflict_and_names_the_earlier_pr(
    repo: RepoBuilder, mirror_of: MirrorOf
) -> None:
    repo.pr_branch("p1", {"a.txt": "1\nONE\n3\n"})
    repo.pr_branch("p2", {"a.txt": "1\nTWO\n3\n"})
    repo.pr_branch("p3", {"b.txt": "y\n"})
    mirror = mirror_of(repo)
    run = integrate(mirror, [(1, "p1"), (2, "p2"), (3, "p3")], kind=RunKind.STACK)
    assert run.status is RunStatus.CONFLICT
    one, two, three = run.steps
    assert one.outcome is StepOutcome.CLEAN
    assert two.outcome is StepOutcome.CONFLICT
    assert two.conflicts == (Conflict("a.txt", "contents"),)
    assert two.conflicts_with == (PrNumber(1),)
    assert two.commit is None
    assert any("Merge conflict in a.txt" in m for m in two.messages)
    assert three.outcome is StepOutcome.SKIPPED
    assert three.skipped_reason == "not attempted: the stack run stopped at #2's conflict"
    assert run.final_commit == one.commit


def test_rename_delete_and_modify_delete_conflicts(repo: RepoBuilder, mirror_of: MirrorOf) -> None:
    repo.branch("mover")
    repo.rename("docs/old.md", "docs/new.md")
    repo.commit("move")
    repo.checkout("main")
    repo.pr_branch("deleter", {"docs/old.md": None, "b.txt": None})
    repo.pr_branch("editor", {"b.txt": "edited\n"})
    mirror = mirror_of(repo)
    run = integrate(mirror, [(1, "mover"), (2, "deleter"), (3, "editor")])
    assert run.steps[1].outcome is StepOutcome.CONFLICT
    assert run.steps[1].conflicts == (Conflict("docs/new.md", "rename/delete"),)
    assert run.steps[1].conflicts_with == (PrNumber(1),)
    # #2 was skipped over, so #3 meets no deletion of b.txt.
    assert run.steps[2].outcome is StepOutcome.CLEAN

    other = integrate(mirror, [(2, "deleter"), (3, "editor")])
    assert other.steps[1].conflicts == (Conflict("b.txt", "modify/delete"),)


def test_series_skips_a_conflicting_pr_and_its_dependents(
    repo: RepoBuilder, mirror_of: MirrorOf
) -> None:
    repo.pr_branch("p1", {"a.txt": "1\nONE\n3\n"})
    repo.pr_branch("p2", {"a.txt": "1\nTWO\n3\n"})
    repo.branch("p3", "p2")
    repo.commit("p3 on p2", {"p3.txt": "3\n"})
    repo.branch("p4", "p3")
    repo.commit("p4 on p3", {"p4.txt": "4\n"})
    repo.checkout("main")
    repo.pr_branch("p5", {"b.txt": "five\n"})
    mirror = mirror_of(repo)
    run = integrate(
        mirror, [(1, "p1"), (2, "p2"), (3, "p3"), (4, "p4"), (5, "p5")], depends={3: [2], 4: [3]}
    )
    outcomes = {s.pr: s.outcome for s in run.steps}
    assert outcomes == {1: "clean", 2: "conflict", 3: "skipped", 4: "skipped", 5: "clean"}
    assert run.steps[2].skipped_reason == "depends on #2, which conflicts"
    assert run.steps[3].skipped_reason == "depends on #3, which was skipped because #2 conflicts"
    assert run.merged == (1, 5)
    assert run.status is RunStatus.CONFLICT
    final = mirror.ls_tree(run.final_tree)
    assert "p3.txt" not in final and mirror.read_blob(final["b.txt"]) == b"five\n"
    document = run.to_json()
    assert document["status"] == "conflict"
    assert document["steps"][1]["conflicts"] == [{"path": "a.txt", "type": "contents"}]


def test_other_generated_files_take_the_prs_version(repo: RepoBuilder, mirror_of: MirrorOf) -> None:
    repo.commit("lock", {"deps.lock": "v1\n"})
    repo.pr_branch("p1", {"deps.lock": "v2\n"})
    repo.pr_branch("p2", {"deps.lock": "v3\n"})
    mirror = mirror_of(repo)
    run = integrate(mirror, [(1, "p1"), (2, "p2")], generated=["deps.lock"])
    step = run.steps[1]
    assert step.outcome is StepOutcome.RESOLVED
    assert step.resolution is not None
    assert step.resolution.startswith(
        "deps.lock conflicted with #1 (merged earlier in this run); took #2's version"
    )
    assert mirror.read_blob(mirror.ls_tree(run.final_tree)["deps.lock"]) == b"v3\n"


def test_unknown_refs_fail_before_anything_is_written(
    repo: RepoBuilder, mirror_of: MirrorOf
) -> None:
    repo.pr_branch("p1", {"a.txt": "x\n"})
    mirror = mirror_of(repo)
    with pytest.raises(UnknownRef, match="nope"):
        integrate(mirror, [(1, "p1"), (2, "nope")])
    assert mirror.list_refs("refs/stackbot/") == {}
    with pytest.raises(BadInput, match="more than once"):
        integrate(mirror, [(1, "p1"), (1, "p1")])
