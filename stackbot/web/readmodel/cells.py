"""Test cells: each test set × shape of an integration run, its job next to main's baseline job
of the run's base commit. Two queries for any number of runs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlmodel import Session

from stackbot.db import dashboard_store
from stackbot.db.models import IntegrationRun
from stackbot.domain.retries import Attempt, NotePart, retry_chain, retry_note
from stackbot.web.readmodel.summaries import JobSummary, TestCell, job_summary


def cells_of_runs(
    session: Session, runs: Sequence[IntegrationRun]
) -> dict[int, tuple[TestCell, ...]]:
    """The cells of each run, by run id, sorted by label (a run without jobs has none)."""
    run_ids = [run.id for run in runs if run.id is not None]
    if not run_ids:
        return {}
    jobs = dashboard_store.job_rows_of_runs(session, run_ids=run_ids)
    base_shas = {run.base_sha for run in runs if run.base_sha}
    baselines: dict[tuple[str, str, str], Any] = {}
    if base_shas:
        for job in dashboard_store.baseline_job_rows(session, commit_shas=base_shas):
            baselines[(job.commit_sha, job.test_set, job.shape)] = job  # newest wins
    by_run: dict[int, dict[str, Any]] = defaultdict(dict)
    for job in jobs:
        if job.step_position is not None:
            continue  # a bisection probe: a prefix of the series, not the run's tree
        by_run[job.integration_run_id or -1][f"{job.test_set} {job.shape}"] = job  # newest wins
    base_of = {run.id: run.base_sha for run in runs}
    notes = _RetryNotes(jobs)
    cells: dict[int, tuple[TestCell, ...]] = {}
    for run_id, labelled in by_run.items():
        cells[run_id] = tuple(
            TestCell(
                label=label,
                job=job_summary(job),
                baseline=_maybe(baselines.get((base_of.get(run_id, ""), job.test_set, job.shape))),
                retry_note=notes.of(job),
            )
            for label, job in sorted(labelled.items())
        )
    return cells


class _RetryNotes:
    """The retry notes of the runs' jobs: every attempt of a run's tree is a job of the run,
    so the chains are read from the rows already loaded."""

    def __init__(self, jobs: Sequence[Any]) -> None:
        self.jobs = {job.id: job for job in jobs}
        self.retry_of = {job.id: job.retry_of_job_id for job in jobs if job.purpose == "retry"}

    def of(self, job: Any) -> tuple[NotePart, ...]:
        if job.purpose != "retry":
            return ()
        chain = [self.jobs[i] for i in retry_chain(job.id, self.retry_of) if i in self.jobs]
        return retry_note(
            [Attempt(j.id, j.status, j.node, j.error, f"/jobs/{j.id}") for j in chain]
        )


def _maybe(job: Any) -> JobSummary | None:
    return job_summary(job) if job is not None else None
