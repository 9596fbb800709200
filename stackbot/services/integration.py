"""Run an integration: a base ref plus PR heads merged one at a time, without a checkout.

Each step is ``git merge-tree --write-tree`` of the run so far and the PR head, then (when the
tree has one) the allowlist regenerated on the merged tree, then a merge commit with both
parents (written by the adapter in-process, byte for byte what ``git commit-tree`` writes). The domain (``stackbot.domain.integration``) decides what a conflict means; this module
fetches the inputs and applies the decisions. The run's commits are kept under
``refs/stackbot/<kind>/<name>/`` in the mirror and pushed, lease-protected, when asked.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from stackbot.adapters.git import GitRepository, PushUpdate
from stackbot.config import DEFAULT_ALLOWLIST_PATH
from stackbot.domain.integration import (
    Conflict,
    GeneratedResolution,
    IntegrationRunResult,
    IntegrationStepResult,
    PlannedPr,
    RunKind,
    RunPolicy,
    StepOutcome,
    describe_allowlist_change,
    merge_commit_message,
    partners_of,
    split_conflicts,
    step_outcome,
)
from stackbot.domain.types import PrNumber, Sha, TreeSha
from stackbot.errors import BadInput
from stackbot.services.tree_allowlist import TreeAllowlist, run_repo_checker

Progress = Callable[[str], None]
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class PushTarget:
    remote: str  # a remote name of the mirror ("origin") or a URL
    branch: str


@dataclass(frozen=True)
class RunRequest:
    base_ref: str
    prs: Sequence[tuple[PrNumber, str]]  # (PR, head ref or SHA) in merge order
    kind: RunKind = RunKind.SERIES
    name: str = "adhoc"
    # PR -> the PRs it depends on; a series run skips the dependents of a conflicting PR.
    depends_on: Mapping[PrNumber, Sequence[PrNumber]] = field(default_factory=dict)
    generated_files: Sequence[str] = (DEFAULT_ALLOWLIST_PATH,)
    checker_command: str | None = None


def ref_prefix(kind: RunKind, name: str) -> str:
    return f"refs/stackbot/{kind.value}/{name}/"


class StepMemo:
    """Merge steps already made, by (commit so far, PR head, PR, generated files).

    A merge's result depends only on those (commits are dated by their parents and their
    messages name no run), so a stack run repeats nothing the series run (or another stack
    sharing its bottom) already did in this process. Bounded: the oldest entries go first."""

    def __init__(self, capacity: int = 20_000) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple[object, ...], _Memo] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[object, ...]) -> _Memo | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return found

    def put(self, key: tuple[object, ...], value: _Memo) -> None:
        self._entries[key] = value
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


_Memo = tuple[IntegrationStepResult, Sha, TreeSha, dict[str, list[PrNumber]]]


def _copy(touched: dict[str, list[PrNumber]]) -> dict[str, list[PrNumber]]:
    return {path: list(prs) for path, prs in touched.items()}


def run_integration(
    repo: GitRepository,
    request: RunRequest,
    *,
    allowlist: TreeAllowlist | None = None,
    progress: Progress | None = None,
    memo: StepMemo | None = None,
) -> IntegrationRunResult:
    """Merge the request's PRs onto its base and return the run. Every ref is resolved before
    anything is merged, so a bad ref fails the run (BadInput) before it writes anything."""
    _check_request(request)
    base, *heads = repo.rev_parse_many([request.base_ref, *(ref for _, ref in request.prs)])
    plan = [
        PlannedPr(n, head, tuple(request.depends_on.get(n, ())))
        for (n, _), head in zip(request.prs, heads, strict=True)
    ]
    tracker = allowlist or TreeAllowlist(repo)
    steps = _IntegrationSteps(repo, request, tracker, base, progress or (lambda _: None), memo)
    results = tuple(steps.run(position, pr) for position, pr in enumerate(plan, start=1))
    report = tracker.report(steps.tree, repo.tree_of(base))
    if report is not None and request.checker_command:
        verdict = run_repo_checker(repo, steps.commit, request.checker_command, path=tracker.path)
        report = replace(report, checker=verdict.describe(report.ok))
    ref_name = _write_refs(repo, request, base, steps.commit)
    return IntegrationRunResult(
        kind=request.kind,
        name=request.name,
        base_ref=request.base_ref,
        base_sha=base,
        steps=results,
        final_tree=steps.tree,
        final_commit=steps.commit,
        ref_name=ref_name,
        allowlist=report,
        heads={pr.number: pr.head for pr in plan},
    )


def _check_request(request: RunRequest) -> None:
    if not request.prs:
        raise BadInput("an integration run needs at least one PR head")
    if not _RUN_NAME.match(request.name):
        raise BadInput(f"run name {request.name!r} must be letters, digits, '.', '_' or '-'")
    numbers = [n for n, _ in request.prs]
    duplicates = sorted({n for n in numbers if numbers.count(n) > 1})
    if duplicates:
        raise BadInput(f"PR {', '.join(f'#{n}' for n in duplicates)} is given more than once")


class _IntegrationSteps:
    """The state of a run between steps: the commit so far and who touched which path."""

    def __init__(
        self,
        repo: GitRepository,
        request: RunRequest,
        allowlist: TreeAllowlist,
        base: Sha,
        progress: Progress,
        memo: StepMemo | None = None,
    ) -> None:
        self.memo = memo
        self.repo = repo
        self.request = request
        self.allowlist = allowlist
        self.progress = progress
        self.generated = frozenset(request.generated_files)
        self.policy = RunPolicy(request.kind)
        self.commit: Sha = base
        self.tree: TreeSha = repo.tree_of(base)
        self.touched_by: dict[str, list[PrNumber]] = {}
        self.total = len(request.prs)

    def run(self, position: int, pr: PlannedPr) -> IntegrationStepResult:
        reason = self.policy.skip_reason(pr)
        if reason is not None:
            step = IntegrationStepResult(
                position, pr.number, pr.head, StepOutcome.SKIPPED, skipped_reason=reason
            )
        else:
            step = self._merge(position, pr)
        self.policy.record(pr, step.outcome)
        self.progress(
            f"[{position}/{self.total}] #{pr.number} ({pr.head[:7]}): {step.outcome.value}"
        )
        return step

    def _merge(self, position: int, pr: PlannedPr) -> IntegrationStepResult:
        key = (self.commit, pr.head, pr.number, self.generated)
        memo = self.memo.get(key) if self.memo is not None else None
        if memo is not None:
            step, commit, tree, touched = memo
            self.commit, self.tree, self.touched_by = commit, tree, _copy(touched)
            return replace(step, position=position)
        step = self._merge_now(position, pr)
        if self.memo is not None:
            self.memo.put(key, (step, self.commit, self.tree, _copy(self.touched_by)))
        return step

    def _merge_now(self, position: int, pr: PlannedPr) -> IntegrationStepResult:
        merged = self.repo.merge_tree(self.commit, pr.head)
        outcome = step_outcome(merged.conflicts, self.generated)
        partners = partners_of(merged.conflicts, self.touched_by)
        if outcome is StepOutcome.CONFLICT:
            return IntegrationStepResult(
                position,
                pr.number,
                pr.head,
                outcome,
                conflicts=merged.conflicts,
                conflicts_with=partners,
                messages=merged.messages,
            )
        head_tree = self.repo.tree_of(pr.head)
        tree, resolutions = self._take_theirs(merged.tree, head_tree, pr, merged.conflicts)
        rewrite = self.allowlist.rewrite_merge(tree, self.tree, head_tree)
        change = rewrite.change if rewrite else None
        if rewrite is not None:
            tree = rewrite.tree
            if any(c.path == self.allowlist.path for c in merged.conflicts):
                partners_here = partners_of(
                    [c for c in merged.conflicts if c.path == self.allowlist.path], self.touched_by
                )
                action = (
                    f"regenerated on the merged tree: {describe_allowlist_change(rewrite.change)}"
                )
                resolutions.append(GeneratedResolution(self.allowlist.path, partners_here, action))
        message = merge_commit_message(
            pr=pr.number,
            head=pr.head,
            resolutions=resolutions,
            allowlist=change,
        )
        commit = self.repo.commit_tree(tree, [self.commit, pr.head], message)
        for path in self.repo.changed_paths(self.tree, merged.tree):
            self.touched_by.setdefault(path, []).append(pr.number)
        self.commit, self.tree = commit, tree
        resolution = " ".join(r.sentence() for r in resolutions) or None
        return IntegrationStepResult(
            position,
            pr.number,
            pr.head,
            outcome,
            tree=tree,
            commit=commit,
            conflicts=merged.conflicts,
            conflicts_with=partners,
            messages=merged.messages,
            resolution=resolution,
            allowlist=change,
        )

    def _take_theirs(
        self, tree: TreeSha, head_tree: TreeSha, pr: PlannedPr, conflicts: Sequence[Conflict]
    ) -> tuple[TreeSha, list[GeneratedResolution]]:
        """Generated files stackbot cannot regenerate (anything but the allowlist) take the
        PR's version, and the message says so."""
        _, generated = split_conflicts(conflicts, self.generated)
        others = [c for c in generated if c.path != self.allowlist.path]
        if not others:
            return tree, []
        files: dict[str, bytes | None] = {}
        resolutions = []
        for conflict in others:
            blob = self.repo.blob_at(head_tree, conflict.path)
            files[conflict.path] = None if blob is None else self.repo.read_blob(blob)
            action = f"took #{pr.number}'s version, since stackbot has no generator for it; regenerate it on the merged tree"
            resolutions.append(
                GeneratedResolution(conflict.path, partners_of([conflict], self.touched_by), action)
            )
        return self.repo.replace_paths(tree, files), resolutions


def _write_refs(repo: GitRepository, request: RunRequest, base: Sha, final: Sha) -> str:
    """``<prefix>head`` (the final commit) and ``<prefix>base``. Each step's commit is a
    first parent of the next, so the head keeps them all; the result lists them."""
    prefix = ref_prefix(request.kind, request.name)
    repo.update_refs({f"{prefix}head": final, f"{prefix}base": base})
    return f"{prefix}head"


def push_run(
    repo: GitRepository, result: IntegrationRunResult, target: PushTarget
) -> IntegrationRunResult:
    """Push the run's head to ``target``; the lease is what this mirror last pushed to that
    branch (nothing: the branch must not exist yet), so a branch someone else moved since is
    never overwritten (:class:`PushRejected`)."""
    if result.ref_name is None:
        raise BadInput(f"run {result.name} has no ref to push")
    digest = hashlib.sha256(target.remote.encode()).hexdigest()[:12]
    record = f"refs/stackbot/pushed/{digest}/{target.branch}"
    expected = repo.try_rev_parse(record)
    repo.push(target.remote, [PushUpdate(result.ref_name, target.branch, expected)])
    repo.update_refs({record: result.final_commit})
    return replace(result, pushed_to=f"{target.remote} {target.branch}")
