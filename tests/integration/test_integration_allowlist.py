"""The allowlist through real merges: conflicts confined to it are resolved by regeneration,
duplicates in one scope are a multiset union pruned to the tree, and the files match goldens."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackbot.adapters.git import GitMirror, GitRepository
from stackbot.domain.allowlist import Generation
from stackbot.domain.integration import (
    AllowlistChange,
    AllowlistReport,
    Conflict,
    IntegrationRunResult,
    IntegrationStepResult,
    RunKind,
    RunStatus,
    StepOutcome,
)
from stackbot.domain.types import PrNumber
from stackbot.services.integration import RunRequest, run_integration
from stackbot.services.tree_allowlist import TreeAllowlist
from tests.integration.conftest import MirrorOf
from tests.integration.megatron import ALLOWLIST, CHECKER, CP, DP, PP, TP, allowlist, entry, module
from tests.integration.repo_builder import RepoBuilder

GOLDEN = Path(__file__).parent / "golden"
A, B = "megatron/core/a.py", "megatron/core/b.py"


def run(
    mirror: GitMirror,
    prs: list[tuple[int, str]],
    *,
    kind: RunKind = RunKind.SERIES,
    checker_command: str | None = None,
) -> IntegrationRunResult:
    request = RunRequest(
        base_ref="main",
        prs=[(PrNumber(n), ref) for n, ref in prs],
        kind=kind,
        name="t",
        checker_command=checker_command,
    )
    return run_integration(mirror, request)


def change_of(step: IntegrationStepResult) -> AllowlistChange:
    assert step.allowlist is not None
    return step.allowlist


def commit_message(repo: RepoBuilder, mirror: GitMirror, step: IntegrationStepResult) -> str:
    assert step.commit is not None
    return repo.git("--git-dir", str(mirror.git_dir), "log", "-1", "--format=%B", step.commit)


def report_of(result: IntegrationRunResult) -> AllowlistReport:
    assert result.allowlist is not None
    return result.allowlist


def final_allowlist(mirror: GitMirror, tree: str) -> bytes:
    blob = mirror.blob_at(tree, ALLOWLIST)
    assert blob is not None
    return mirror.read_blob(blob)


@pytest.fixture
def megatron(builder: RepoBuilder) -> RepoBuilder:
    """megatron/core with four reads in two files, an exempt parallel_state.py, a checker
    script and the allowlist the checker writes for them."""
    builder.commit(
        "base",
        {
            A: module({"f1": [TP, TP], "f2": [DP]}),
            B: module({"g": [PP]}),
            "megatron/core/parallel_state.py": module({"get_x": [TP]}),
            CHECKER: "# checker, version 1\n",
            ALLOWLIST: allowlist(
                {A: [entry("f1", TP), entry("f1", TP), entry("f2", DP)], B: [entry("g", PP)]}
            ),
        },
    )
    return builder


def _add_f3(repo: RepoBuilder) -> None:
    repo.pr_branch(
        "add-f3",
        {
            A: module({"f1": [TP, TP], "f2": [DP], "f3": [CP]}),
            ALLOWLIST: allowlist(
                {
                    A: [entry("f1", TP), entry("f1", TP), entry("f2", DP), entry("f3", CP)],
                    B: [entry("g", PP)],
                }
            ),
        },
    )


def _drop_g(repo: RepoBuilder) -> None:
    repo.pr_branch(
        "drop-g",
        {
            B: module({"g": []}),
            ALLOWLIST: allowlist({A: [entry("f1", TP), entry("f1", TP), entry("f2", DP)]}),
        },
    )


def _third_tp_in_f1(repo: RepoBuilder) -> None:
    repo.pr_branch(
        "third-tp",
        {
            A: module({"f1": [TP, TP, TP], "f2": [DP]}),
            ALLOWLIST: allowlist(
                {A: [entry("f1", TP)] * 3 + [entry("f2", DP)], B: [entry("g", PP)]},
            ),
        },
    )


def test_conflicts_confined_to_the_allowlist_are_resolved(
    megatron: RepoBuilder, mirror_of: MirrorOf
) -> None:
    _add_f3(megatron)
    _drop_g(megatron)
    _third_tp_in_f1(megatron)
    mirror = mirror_of(megatron)
    result = run(mirror, [(11, "add-f3"), (12, "drop-g"), (13, "third-tp")])
    assert result.status is RunStatus.RESOLVED
    first, second, third = result.steps
    assert first.outcome is StepOutcome.CLEAN
    assert second.outcome is StepOutcome.RESOLVED
    assert second.conflicts == (Conflict(ALLOWLIST, "contents"),)
    assert second.resolution == (
        f"{ALLOWLIST} conflicted with #11 (merged earlier in this run); regenerated on the merged "
        "tree: total 5 → 4, 1 stale entry dropped, no new reads."
    )
    assert change_of(second).stale == (f"{B}: g:accessor:parallel_state.{PP}",)
    message = commit_message(megatron, mirror, second)
    assert second.resolution in message
    # Duplicates in one scope: both sides list f1's TP read (2 and 3 times), the tree has 3.
    assert third.outcome is StepOutcome.RESOLVED
    assert change_of(third).total_after == 5
    # #13 branched before #12 dropped g's read: its entry is stale now.
    assert change_of(third).new_reads == ()
    assert change_of(third).stale == (f"{B}: g:accessor:parallel_state.{PP}",)
    data = final_allowlist(mirror, result.final_tree)
    assert data == (GOLDEN / "resolved_series.json").read_bytes()
    report = report_of(result)
    assert report.ok and report.total == 5 and report.base_total == 4 and report.delta == 1


def test_union_then_prune_within_one_scope(megatron: RepoBuilder, mirror_of: MirrorOf) -> None:
    """Each side adds one more TP read to f1 at a different place and lists it (3 each); the
    merged tree reads it 4 times: the union caps it at 3, and the fourth is a new read."""
    base_a = module({"f1": [TP, TP], "f2": [DP]})
    f1_head = f"def f1():\n    parallel_state.{TP}()\n    parallel_state.{TP}()\n"
    assert f1_head in base_a
    top = f"def f1():\n    x = parallel_state.{TP}()\n    parallel_state.{TP}()\n    parallel_state.{TP}()\n"
    bottom = f1_head + f"    y = parallel_state.{TP}()\n"
    three = allowlist({A: [entry("f1", TP)] * 3 + [entry("f2", DP)], B: [entry("g", PP)]})
    megatron.pr_branch("tp-top", {A: base_a.replace(f1_head, top), ALLOWLIST: three})
    # The same entries, but a hand-edited total: the files still conflict on "total".
    megatron.pr_branch(
        "tp-bottom",
        {A: base_a.replace(f1_head, bottom), ALLOWLIST: three.replace('"total": 5', '"total": 6')},
    )
    mirror = mirror_of(megatron)
    result = run(mirror, [(21, "tp-top"), (22, "tp-bottom")])
    second = result.steps[1]
    assert second.outcome is StepOutcome.RESOLVED
    # One read beyond the union; the four lines are where f1 reads it.
    assert change_of(second).new_reads == (
        f"{A}: f1:accessor:parallel_state.{TP} (line 4, 5, 6, 7)",
    )
    assert change_of(second).total_before == 5
    assert change_of(second).total_after == 5
    assert second.resolution is not None and "new read to review" in second.resolution
    data = final_allowlist(mirror, result.final_tree)
    assert data.count(entry("f1", TP).encode()) == 3
    report = report_of(result)
    assert not report.ok
    assert report.new_reads == change_of(second).new_reads
    assert result.status is RunStatus.RESOLVED


def test_allowlist_mixed_with_a_real_conflict_is_not_resolved(
    megatron: RepoBuilder, mirror_of: MirrorOf
) -> None:
    _third_tp_in_f1(megatron)
    megatron.pr_branch(
        "f1-changed",
        {
            A: module({"f1": [DP], "f2": [DP]}),
            ALLOWLIST: allowlist({A: [entry("f1", DP), entry("f2", DP)], B: [entry("g", PP)]}),
        },
    )
    mirror = mirror_of(megatron)
    result = run(mirror, [(13, "third-tp"), (31, "f1-changed")], kind=RunKind.STACK)
    step = result.steps[1]
    assert step.outcome is StepOutcome.CONFLICT
    assert set(step.conflicts) == {Conflict(A, "contents"), Conflict(ALLOWLIST, "contents")}
    assert step.resolution is None and step.commit is None


def test_clean_merge_whose_total_drifts_is_regenerated(
    megatron: RepoBuilder, mirror_of: MirrorOf
) -> None:
    base_entries = {A: [entry("f1", TP), entry("f1", TP), entry("f2", DP)], B: [entry("g", PP)]}
    megatron.pr_branch(
        "first-file",
        {
            "megatron/core/aa.py": module({"h": [CP]}),
            ALLOWLIST: allowlist({**base_entries, "megatron/core/aa.py": [entry("h", CP)]}),
        },
    )
    megatron.pr_branch(
        "last-file",
        {
            "megatron/core/zz.py": module({"k": [CP]}),
            ALLOWLIST: allowlist({**base_entries, "megatron/core/zz.py": [entry("k", CP)]}),
        },
    )
    mirror = mirror_of(megatron)
    result = run(mirror, [(41, "first-file"), (42, "last-file")])
    step = result.steps[1]
    assert step.outcome is StepOutcome.CLEAN  # git merged the file: both sides wrote "total": 5
    assert (
        change_of(step).rewritten
        and change_of(step).total_before == 5
        and change_of(step).total_after == 6
    )
    message = commit_message(megatron, mirror, step)
    assert (
        f"{ALLOWLIST} merged without conflict but did not match the merged tree; regenerated: total 5 → 6"
        in message
    )
    assert (
        final_allowlist(mirror, result.final_tree)
        == (GOLDEN / "drift_regenerated.json").read_bytes()
    )


def test_a_file_that_does_not_parse_is_reported_not_fatal(
    megatron: RepoBuilder, mirror_of: MirrorOf
) -> None:
    _add_f3(megatron)
    megatron.pr_branch("broken", {"megatron/core/broken.py": "def broken(:\n    pass\n"})
    mirror = mirror_of(megatron)
    result = run(mirror, [(11, "add-f3"), (51, "broken")])
    step = result.steps[1]
    assert step.outcome is StepOutcome.CLEAN
    assert len(change_of(step).unparsed) == 1 and change_of(step).unparsed[0].startswith(
        "megatron/core/broken.py: line 1"
    )
    report = report_of(result)
    assert not report.ok and report.unparsed == change_of(step).unparsed
    assert report.total == 5


def test_comment_follows_the_checker_the_merged_tree_keeps(
    megatron: RepoBuilder, mirror_of: MirrorOf
) -> None:
    base_entries = {A: [entry("f1", TP), entry("f1", TP), entry("f2", DP)], B: [entry("g", PP)]}
    megatron.pr_branch(
        "new-checker",
        {
            CHECKER: "# checker, version 2\n",
            ALLOWLIST: allowlist(base_entries, comment="Written by checker v2."),
        },
    )
    _drop_g(megatron)
    mirror = mirror_of(megatron)
    result = run(mirror, [(61, "drop-g"), (62, "new-checker")])
    assert b'"_comment": "Written by checker v2."' in final_allowlist(mirror, result.final_tree)
    reverse = run(mirror, [(62, "new-checker"), (61, "drop-g")])
    assert b'"_comment": "Written by checker v2."' in final_allowlist(mirror, reverse.final_tree)


def test_first_generation_file_is_regenerated_from_the_tree(
    builder: RepoBuilder, mirror_of: MirrorOf
) -> None:
    builder.commit(
        "base",
        {
            A: module({"f1": [TP]}),
            ALLOWLIST: allowlist({A: [f"4:accessor:parallel_state.{TP}"]}),
        },
    )
    builder.pr_branch("shift", {A: "# a comment pushes the read down\n" + module({"f1": [TP]})})
    builder.pr_branch("other", {"README": "hi\n"})
    mirror = mirror_of(builder)
    result = run(mirror, [(71, "other"), (72, "shift")])
    step = result.steps[1]
    assert (
        change_of(step).rewritten
        and change_of(step).new_reads == ()
        and change_of(step).stale == ()
    )
    assert b'"5:accessor:parallel_state.' in final_allowlist(mirror, result.final_tree)
    assert report_of(result).format == "line" and report_of(result).ok


CHECKER_SCRIPT = '''\
"""A repository checker for the tests: the current generation's check, run on the worktree."""
import collections, json, pathlib, sys
from stackbot.domain.allowlist import scan_current
root = pathlib.Path("megatron/core")
found = {}
for path in sorted(root.rglob("*.py")):
    name = path.as_posix()
    if name in ("megatron/core/parallel_state.py", "megatron/core/process_groups_config.py"):
        continue
    entries = scan_current(name, path.read_bytes()).entries
    if entries:
        found[name] = collections.Counter(entries)
listed = json.loads(pathlib.Path("tools/process_group_usage_allowlist.json").read_text())
allowed = {p: collections.Counter(e) for p, e in listed["allowed"].items()}
bad = found != allowed or listed["total"] != sum(len(e) for e in listed["allowed"].values())
print("allowlist out of date" if bad else "allowlist ok")
sys.exit(1 if bad else 0)
'''


def test_repository_checker_mode_agrees_and_disagrees(
    megatron: RepoBuilder, mirror_of: MirrorOf
) -> None:
    megatron.commit("real checker", {CHECKER: CHECKER_SCRIPT})
    _add_f3(megatron)
    _drop_g(megatron)
    mirror = mirror_of(megatron)
    command = f"{sys.executable} {CHECKER}"
    agreed = run(mirror, [(11, "add-f3"), (12, "drop-g")], checker_command=command)
    assert report_of(agreed).ok
    assert (
        report_of(agreed).checker
        == "repository checker agrees: it accepts the file, stackbot accepts it"
    )
    refusing = run(
        mirror,
        [(11, "add-f3"), (12, "drop-g")],
        checker_command=f"{sys.executable} -c 'raise SystemExit(3)'",
    )
    assert report_of(refusing).checker == (
        "repository checker DISAGREES: it rejects (exit 3) the file, stackbot accepts it"
    )


def test_incremental_scan_matches_a_full_scan(megatron: RepoBuilder, mirror_of: MirrorOf) -> None:
    """A run scans each merged tree from the previous one's scan plus what changed; a file
    added, one removed and one edited must leave it equal to a scan from scratch."""
    megatron.pr_branch("adds", {"megatron/core/sub/new.py": module({"n": [CP]})})
    megatron.pr_branch("removes", {B: None})
    _add_f3(megatron)
    mirror = mirror_of(megatron)
    tracker = TreeAllowlist(mirror)
    request = RunRequest(
        base_ref="main",
        prs=[(PrNumber(1), "adds"), (PrNumber(2), "removes"), (PrNumber(3), "add-f3")],
    )
    result = run_integration(mirror, request, allowlist=tracker)
    incremental = tracker.scan(result.final_tree, Generation.SCOPE)
    fresh = TreeAllowlist(GitRepository(mirror.git_dir)).scan(result.final_tree, Generation.SCOPE)
    assert incremental.outcomes == fresh.outcomes
    assert list(incremental.outcomes) == sorted(fresh.outcomes)
    assert "megatron/core/sub/new.py" in incremental.outcomes and B not in incremental.outcomes
