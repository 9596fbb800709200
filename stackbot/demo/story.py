"""What the demo's terminal tells while stackbot works: the story's events in its own words
("#8050 conflicts with #8035 in transformer_layer.py: left out of the series run", "the
allowlist conflict of #8035 resolved: regenerated on the merged tree", "stackbot refused
contributor-z's `/ok to test` on #8748"), never internal task names, each said once.

:class:`Story` compares what it is shown (finished integration runs with their steps,
approvals, stackbot's replies, finished jobs) with what it has already told; the runner reads
those from the database and the stand-in once a second. Then :func:`pr_summary` gives each PR's
one line (its verdict and its failures counted) before the comments are printed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackbot.domain.report import MARKER
from stackbot.domain.report_view import test_set_words

_UNFINISHED = frozenset({"pending", "running"})
_FINISHED_JOBS = frozenset({"passed", "failed", "error", "timeout", "infra", "cancelled"})
# What a busy queue is doing, in the story's words (unknown kinds: "other work").
TASK_WORDS = {
    "process_delivery": "reading GitHub's events",
    "sync_pull": "reading the PRs",
    "check_base": "checking base branches",
    "integrate": "integrating",
    "conflict_matrix": "looking for conflicts between PRs",
    "retest": "retesting",
    "retarget_children": "retargeting PRs",
    "restack_pr": "restacking a PR",
    "port_pr": "porting a PR",
    "base_moved": "following main",
    "pr_command": "answering commands",
    "poll_jobs": "watching the test jobs",
    "report": "posting reports",
    "reconcile": "catching up with GitHub",
    "maintenance": "maintenance",
}


def busy_words(kinds: Iterable[str]) -> str:
    """``integrating, posting reports`` for the busy tasks' kinds, each named once, in the
    order of the pipeline (at most three, then "…")."""
    order = {kind: n for n, kind in enumerate(TASK_WORDS)}
    known = sorted(set(kinds), key=lambda kind: order.get(kind, len(order)))
    words = list(dict.fromkeys(TASK_WORDS.get(kind, "other work") for kind in known))
    return ", ".join(words[:3]) + (", …" if len(words) > 3 else "")


@dataclass(frozen=True)
class StepFacts:
    pr: int
    outcome: str
    conflicting_paths: tuple[str, ...] = ()
    conflicts_with: tuple[int, ...] = ()
    resolved_files: tuple[str, ...] = ()
    skipped_reason: str | None = None


@dataclass(frozen=True)
class RunFacts:
    id: int
    kind: str  # stack | series
    status: str
    base_ref: str
    target_pr: int | None = None
    series_key: str | None = None
    steps: tuple[StepFacts, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class JobFacts:
    id: int
    test_set: str
    shape: str
    status: str
    tree: str  # "the series #6307", "main 63ba2b7 (baseline)", ...
    counts: Mapping[str, int] = field(default_factory=dict)
    reused: bool = False


class Story:
    """Tells each event once, in the order it is first seen."""

    def __init__(self) -> None:
        self.told: set[tuple[Any, ...]] = set()
        self.resolved: dict[int, bool] = {}

    def _new(self, key: tuple[Any, ...]) -> bool:
        if key in self.told:
            return False
        self.told.add(key)
        return True

    def update(
        self,
        *,
        runs: Sequence[RunFacts] = (),
        approvals: Sequence[tuple[int, str, str, str]] = (),  # (pr, sha, who, kind)
        replies: Sequence[tuple[int, int, str]] = (),  # (pr, comment id, body)
        jobs: Sequence[JobFacts] = (),
    ) -> list[str]:
        lines: list[str] = []
        for pr, sha, who, kind in approvals:
            if self._new(("approval", pr, sha)):
                if kind == "trusted":
                    lines.append(
                        f"#{pr} is by {who}, a trusted author: {sha[:7]} is tested without "
                        f"waiting for a vetter"
                    )
                else:
                    lines.append(f"{who} approved #{pr} at {sha[:7]} for testing")
        for pr, comment_id, body in replies:
            if self._new(("reply", comment_id)):
                lines.append(f"stackbot answered on #{pr}: {_first_sentence(body)}")
        for run in runs:
            if run.status not in _UNFINISHED and self._new(("run", run.id)):
                lines.extend(_run_lines(run, self.resolved))
        for job in jobs:
            if job.status in _FINISHED_JOBS and self._new(("job", job.id)):
                lines.append(_job_line(job))
        return lines


def _first_sentence(body: str) -> str:
    text = " ".join(body.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _run_lines(run: RunFacts, resolved: dict[int, bool]) -> list[str]:
    """The run's outcome, and what its steps found (a PR's regenerated allowlist is told the
    first time only: every later run of its stack resolves it the same way)."""
    if run.kind == "series":
        what = f"the series {run.series_key or ''}".rstrip()
    else:
        what = f"#{run.target_pr}'s stack"
    count = len(run.steps)
    head = f"integrated {what} ({count} PR{'' if count == 1 else 's'}) onto {run.base_ref}"
    if run.status == "error":
        return [f"{head}: failed ({run.error or 'no reason recorded'})"]
    lines = [f"{head}: {_STATUS_WORDS.get(run.status, run.status)}"]
    for step in run.steps:
        if step.outcome == "resolved" and step.resolved_files and not resolved.get(step.pr):
            resolved[step.pr] = True
            files = ", ".join(step.resolved_files)
            lines.append(
                f"  the conflict of #{step.pr} in the generated {files} was resolved: "
                "stackbot regenerated it on the merged tree"
            )
        elif step.outcome == "conflict":
            paths = ", ".join(step.conflicting_paths[:2]) or "its files"
            others = ", ".join(f"#{n}" for n in step.conflicts_with)
            against = f" with {others}" if others else f" with {run.base_ref}"
            left = ": left out of the series run" if run.kind == "series" else ""
            lines.append(f"  #{step.pr} conflicts{against} in {paths}{left}")
        elif step.outcome == "skipped":
            lines.append(f"  #{step.pr} left out: {step.skipped_reason or 'skipped'}")
    return lines


_STATUS_WORDS = {
    "clean": "merges cleanly",
    "resolved": "merges, with a generated file regenerated",
    "conflict": "a conflict was found",
}


def _job_line(job: JobFacts) -> str:
    what = f"{test_set_words(job.test_set)} {job.shape} on {job.tree}"
    order = ("passed", "failed", "error", "skipped")
    counts = ", ".join(f"{job.counts[word]} {word}" for word in order if job.counts.get(word))
    reused = " (result reused from an identical tree)" if job.reused else ""
    # the tests' counts say what a "failed" job did (main's baseline fails 2 tests on purpose)
    said = counts if counts and job.status in ("passed", "failed") else job.status
    return f"tested {what}: {said}{reused}"


def pr_summary(number: int, comment: str) -> str:
    """One line for a PR from its sticky comment: its verdict and its failures counted, as
    plain text (no Markdown markers)."""
    lines = [line for line in comment.replace(MARKER, "").strip().splitlines() if line]
    head = lines[:2] if len(lines) > 1 and not lines[1].startswith("<sub>") else lines[:1]
    text = " · ".join(head)
    for mark in ("**", "`"):
        text = text.replace(mark, "")
    return f"#{number}: {text}"
