"""The rows every page shares: a job, a test cell, an integration run and one of its steps,
each rendered by the HTML templates and as JSON by the API from the same dataclass."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from functools import cached_property
from typing import Any

from gpu_jobs.testsets import OWN_TEST_SET, own_test_set_pr
from stackbot.db.models import IntegrationRun, IntegrationStep
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.domain.retries import NotePart, note_text

FINISHED_JOB_STATES = FINISHED_STATES


@dataclass(frozen=True)
class JobSummary:
    id: int
    test_set: str
    shape: str
    status: str
    counts: dict[str, int]
    kind: str
    tree_sha: str
    commit_sha: str
    integration_run_id: int | None
    reused_from_job_id: int | None
    node: str | None
    executor: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    out_dir: str | None
    error: str | None
    # a bisect job's tree holds the first step_position PRs its series run merged
    step_position: int | None = None

    @property
    def label(self) -> str:
        return f"{self.test_set} {self.shape}"

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def passed(self) -> int:
        return int(self.counts.get("passed", 0))

    @property
    def not_passed(self) -> int:
        return sum(int(v) for k, v in self.counts.items() if k in ("failed", "error"))

    @cached_property  # read several times per cell of a 500-PR page; the fields never change
    def counts_text(self) -> str:
        if self.status not in FINISHED_JOB_STATES:
            return self.status
        parts = [
            f"{self.counts.get(k, 0)} {k}"
            for k in ("passed", "failed", "error")
            if self.counts.get(k)
        ]
        return ", ".join(parts) if parts else f"{self.status}, no tests"

    def to_json(self) -> dict[str, Any]:
        data = fields_json(self, {"duration_s": self.duration_s})
        del data["out_dir"]  # a path on the server: read for the log, never shown
        return data


@dataclass(frozen=True)
class TestCell:
    """One test set × shape of a PR: the integration's job next to main's."""

    __test__ = False

    label: str
    job: JobSummary | None
    baseline: JobSummary | None
    # The verdict's word for this row on a PR (stackbot.domain.verdict.row_state), when known.
    verdict_state: str | None = None
    # When the job retries infra failures: what the earlier attempts were, as the PR's
    # comment says it (stackbot.domain.retries.retry_note), each machine linking its job.
    retry_note: tuple[NotePart, ...] = ()

    @property
    def own_pr(self) -> int | None:
        """The PR whose own test files this cell shows (``own:N``: its part of the tree's
        batched own-files job), else None."""
        return own_test_set_pr(self.job.test_set) if self.job else None

    @property
    def batched_own(self) -> bool:
        """Whether this is the tree's batched job of every PR's own test files (``own``)."""
        return self.job is not None and self.job.test_set == OWN_TEST_SET

    @property
    def main_text(self) -> str:
        if self.baseline:
            return self.baseline.counts_text
        # A PR's own files with no baseline: main has none of them (no baseline is made).
        return "new files" if self.own_pr is not None or self.batched_own else "not run"

    @property
    def text(self) -> str:
        ours = self.job.counts_text if self.job else "not run"
        return f"{ours} · main: {self.main_text}"

    @property
    def note(self) -> str:
        """The retry note as plain text (empty for a first attempt)."""
        return note_text(self.retry_note)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "job": self.job.to_json() if self.job else None,
            "baseline": self.baseline.to_json() if self.baseline else None,
            "state": self.state,
            "retry_note": self.note or None,
        }

    @property
    def state(self) -> str:
        if self.verdict_state is not None:
            return self.verdict_state
        if self.job is None:
            return "none"
        if self.job.status in FINISHED_JOB_STATES:
            return "passed" if self.job.status == "passed" else "failed"
        return "running"


@dataclass(frozen=True)
class RunSummary:
    id: int
    kind: str
    status: str
    series_key: str | None
    target_pr: int | None
    base_ref: str
    base_sha: str
    final_tree: str | None
    final_commit: str | None
    heads: dict[str, str]
    allowlist: dict[str, Any] | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@dataclass(frozen=True)
class StepRow:
    position: int
    pr_number: int
    head_sha: str
    outcome: str
    tree: str | None
    commit: str | None
    conflicts: list[dict[str, Any]]
    conflicts_with: list[int]
    resolution: str | None
    skipped_reason: str | None
    messages: str | None

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


def job_summary(job: Any) -> JobSummary:
    """A summary of a ``Job`` row or of a row of the store's job columns (all but the result)."""
    return JobSummary(
        id=job.id or 0,
        test_set=job.test_set,
        shape=job.shape,
        status=job.status,
        counts=dict(job.counts or {}),
        kind=job.kind,
        tree_sha=job.tree_sha,
        commit_sha=job.commit_sha,
        integration_run_id=job.integration_run_id,
        reused_from_job_id=job.reused_from_job_id,
        node=job.node,
        executor=job.executor,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        out_dir=job.out_dir,
        error=job.error,
        step_position=getattr(job, "step_position", None),
    )


def run_summary(run: IntegrationRun) -> RunSummary:
    return RunSummary(
        id=run.id or 0,
        kind=run.kind,
        status=run.status,
        series_key=run.series_key,
        target_pr=run.target_pr,
        base_ref=run.base_ref,
        base_sha=run.base_sha,
        final_tree=run.final_tree,
        final_commit=run.final_commit,
        heads=dict(run.heads or {}),
        allowlist=run.allowlist,
        error=run.error,
        created_at=run.created_at,
        finished_at=run.finished_at,
    )


def step_row(step: IntegrationStep) -> StepRow:
    return StepRow(
        position=step.position,
        pr_number=step.pr_number,
        head_sha=step.head_sha,
        outcome=step.outcome,
        tree=step.tree,
        commit=step.commit,
        conflicts=list(step.conflicts),
        conflicts_with=list(step.conflicts_with),
        resolution=step.resolution,
        skipped_reason=step.skipped_reason,
        messages=step.messages,
    )


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def fields_json(row: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A frozen dataclass's fields as JSON (datetimes in ISO 8601), plus ``extra``."""
    data = {
        f.name: iso(value) if isinstance(value := getattr(row, f.name), datetime) else value
        for f in fields(row)
    }
    return {**data, **(extra or {})}
