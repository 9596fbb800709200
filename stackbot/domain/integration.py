"""Integration runs as pure values: the plan, the policy decisions and the results.

The service merges; this module decides. A step whose conflicts all sit in generated files is
*resolved* (the files are regenerated, not merged). A ``stack`` run stops at the first real
conflict; a ``series`` run skips the conflicting PR and every PR that depends on it, and goes
on with the rest.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from stackbot.domain.types import PrNumber, Sha, TreeSha


class RunKind(StrEnum):
    STACK = "stack"
    SERIES = "series"
    GATE = "gate"  # a landing's tree: main + the landings ahead of it in the gate + its PRs


class StepOutcome(StrEnum):
    CLEAN = "clean"
    RESOLVED = "resolved"
    CONFLICT = "conflict"
    SKIPPED = "skipped"


class RunStatus(StrEnum):
    CLEAN = "clean"
    RESOLVED = "resolved"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Conflict:
    """One conflicted path of a merge; ``kind`` is git's conflict type (``contents``,
    ``modify/delete``, ``rename/delete``, ...)."""

    path: str
    kind: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "type": self.kind}


@dataclass(frozen=True)
class PlannedPr:
    """One PR of a run, in merge order; ``parents`` are the PRs it depends on."""

    number: PrNumber
    head: Sha
    parents: tuple[PrNumber, ...] = ()


def split_conflicts(
    conflicts: Iterable[Conflict], generated: Collection[str]
) -> tuple[tuple[Conflict, ...], tuple[Conflict, ...]]:
    """(real conflicts, conflicts in generated files)."""
    real: list[Conflict] = []
    regenerated: list[Conflict] = []
    for conflict in conflicts:
        (regenerated if conflict.path in generated else real).append(conflict)
    return tuple(real), tuple(regenerated)


def step_outcome(conflicts: Collection[Conflict], generated: Collection[str]) -> StepOutcome:
    if not conflicts:
        return StepOutcome.CLEAN
    real, _ = split_conflicts(conflicts, generated)
    return StepOutcome.CONFLICT if real else StepOutcome.RESOLVED


class RunPolicy:
    """Which PRs of a run are still attempted, given what happened to the earlier ones."""

    def __init__(self, kind: RunKind) -> None:
        self.kind = kind
        self._stopped_by: PrNumber | None = None
        # PR -> the conflicting PR that keeps it out of the run (itself when it conflicts).
        self._blocked: dict[PrNumber, PrNumber] = {}

    def skip_reason(self, pr: PlannedPr) -> str | None:
        if self._stopped_by is not None:
            return f"not attempted: the stack run stopped at #{self._stopped_by}'s conflict"
        for parent in pr.parents:
            cause = self._blocked.get(parent)
            if cause == parent:
                return f"depends on #{parent}, which conflicts"
            if cause is not None:
                return f"depends on #{parent}, which was skipped because #{cause} conflicts"
        return None

    def record(self, pr: PlannedPr, outcome: StepOutcome) -> None:
        if outcome is StepOutcome.CONFLICT:
            self._blocked[pr.number] = pr.number
            if self.kind is RunKind.STACK:
                self._stopped_by = pr.number
        elif outcome is StepOutcome.SKIPPED:
            causes = [self._blocked[p] for p in pr.parents if p in self._blocked]
            self._blocked[pr.number] = causes[0] if causes else pr.number


@dataclass(frozen=True)
class AllowlistChange:
    """What rewriting the allowlist did to one tree. Reads and entries are written
    ``path: KEY:KIND:DETAIL``."""

    path: str
    total_before: int | None  # the total the merge's first parent recorded
    total_after: int
    new_reads: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    unparsed: tuple[str, ...] = ()
    rewritten: bool = False  # the merged tree's file differed from the regenerated one

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "total_before": self.total_before,
            "total_after": self.total_after,
            "new_reads": list(self.new_reads),
            "stale": list(self.stale),
            "unparsed": list(self.unparsed),
            "rewritten": self.rewritten,
        }


def describe_allowlist_change(change: AllowlistChange) -> str:
    """``total 195 → 194, 1 stale entry dropped, no new reads``."""
    if change.total_before is None or change.total_before == change.total_after:
        total = f"total {change.total_after}, unchanged"
    else:
        total = f"total {change.total_before} → {change.total_after}"
    stale = _count(len(change.stale), "stale entry dropped", "stale entries dropped")
    new = _count(len(change.new_reads), "new read to review", "new reads to review")
    parts = [total, stale or "no stale entries", new or "no new reads"]
    if change.unparsed:
        parts.append(
            _count(len(change.unparsed), "file that does not parse", "files that do not parse")
        )
    return ", ".join(parts)


def _count(n: int, one: str, many: str) -> str:
    if n == 0:
        return ""
    return f"1 {one}" if n == 1 else f"{n} {many}"


@dataclass(frozen=True)
class GeneratedResolution:
    """How one generated file's conflict was resolved."""

    path: str
    conflicted_with: tuple[PrNumber, ...]  # earlier PRs of the run that changed the path
    action: str  # e.g. "regenerated on the merged tree: total 195 → 194, ..."

    def sentence(self) -> str:
        if self.conflicted_with:
            names = _join_and([f"#{n}" for n in self.conflicted_with])
            who = f"{names} (merged earlier in this run)"
        else:
            who = "changes on the base since this PR branched"
        return f"{self.path} conflicted with {who}; {self.action}."


def _join_and(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def partners_of(
    conflicts: Iterable[Conflict], touched_by: Mapping[str, Sequence[PrNumber]]
) -> tuple[PrNumber, ...]:
    """The earlier PRs of the run that changed any of the conflicted paths, in run order."""
    seen: dict[PrNumber, None] = {}
    for conflict in conflicts:
        for pr in touched_by.get(conflict.path, ()):
            seen.setdefault(pr, None)
    return tuple(seen)


def merge_commit_message(
    *,
    pr: PrNumber,
    head: Sha,
    resolutions: Sequence[GeneratedResolution],
    allowlist: AllowlistChange | None,
) -> str:
    """The integration merge commit's message: the resolutions in plain words, then trailers.

    It names no run on purpose: the same merge of the same commits is the same commit in every
    run (commits are dated by their parents), so a stack run and the series run share their
    common steps, and identical trees come with identical commits."""
    lines = [f"Merge #{pr} ({head[:7]})", ""]
    body = [r.sentence() for r in resolutions]
    resolved_paths = {r.path for r in resolutions}
    if allowlist is not None and allowlist.rewritten and allowlist.path not in resolved_paths:
        body.append(
            f"{allowlist.path} merged without conflict but did not match the merged tree; "
            f"regenerated: {describe_allowlist_change(allowlist)}."
        )
    if body:
        lines.extend([*body, ""])
    lines.extend([f"Stackbot-PR: #{pr}", f"Stackbot-Head: {head}"])
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class IntegrationStepResult:
    position: int
    pr: PrNumber
    head_sha: Sha
    outcome: StepOutcome
    tree: TreeSha | None = None
    commit: Sha | None = None
    conflicts: tuple[Conflict, ...] = ()
    conflicts_with: tuple[PrNumber, ...] = ()
    messages: tuple[str, ...] = ()
    resolution: str | None = None
    skipped_reason: str | None = None
    allowlist: AllowlistChange | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "pr": self.pr,
            "head_sha": self.head_sha,
            "outcome": self.outcome.value,
            "tree": self.tree,
            "commit": self.commit,
            "conflicts": [c.to_json() for c in self.conflicts],
            "conflicts_with": list(self.conflicts_with),
            "messages": list(self.messages),
            "resolution": self.resolution,
            "skipped_reason": self.skipped_reason,
            "allowlist": self.allowlist.to_json() if self.allowlist else None,
        }


@dataclass(frozen=True)
class AllowlistReport:
    """The allowlist check on a run's final tree, against the base's file."""

    path: str
    format: str  # scope | line
    total: int  # the file's recorded total
    entries: int  # how many entries it lists
    base_total: int | None
    ok: bool
    new_reads: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    unparsed: tuple[str, ...] = ()
    checker: str | None = None  # the repository checker's verdict, when that mode is on

    @property
    def delta(self) -> int | None:
        return None if self.base_total is None else self.total - self.base_total

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "total": self.total,
            "entries": self.entries,
            "base_total": self.base_total,
            "delta": self.delta,
            "ok": self.ok,
            "new": list(self.new_reads),
            "stale": list(self.stale),
            "unparsed": list(self.unparsed),
            "checker": self.checker,
        }


@dataclass(frozen=True)
class IntegrationRunResult:
    kind: RunKind
    name: str
    base_ref: str
    base_sha: Sha
    steps: tuple[IntegrationStepResult, ...]
    final_tree: TreeSha
    final_commit: Sha
    ref_name: str | None = None
    allowlist: AllowlistReport | None = None
    pushed_to: str | None = None
    heads: Mapping[PrNumber, Sha] = field(default_factory=dict)

    @property
    def status(self) -> RunStatus:
        outcomes = {step.outcome for step in self.steps}
        if outcomes & {StepOutcome.CONFLICT, StepOutcome.SKIPPED}:
            return RunStatus.CONFLICT
        if StepOutcome.RESOLVED in outcomes:
            return RunStatus.RESOLVED
        return RunStatus.CLEAN

    @property
    def merged(self) -> tuple[PrNumber, ...]:
        return tuple(
            s.pr for s in self.steps if s.outcome in (StepOutcome.CLEAN, StepOutcome.RESOLVED)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "name": self.name,
            "status": self.status.value,
            "base_ref": self.base_ref,
            "base_sha": self.base_sha,
            "final_tree": self.final_tree,
            "final_commit": self.final_commit,
            "ref": self.ref_name,
            "pushed_to": self.pushed_to,
            "heads": {str(pr): sha for pr, sha in self.heads.items()},
            "merged": list(self.merged),
            "steps": [step.to_json() for step in self.steps],
            "allowlist": self.allowlist.to_json() if self.allowlist else None,
        }
