"""Test cells: each test set × shape of an integration run, its job next to main's baseline job
of the run's base commit. Two queries for any number of runs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlmodel import Session

from stackbot.db import dashboard_store
from stackbot.db.models import IntegrationRun
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
        by_run[job.integration_run_id or -1][f"{job.test_set} {job.shape}"] = job  # newest wins
    base_of = {run.id: run.base_sha for run in runs}
    cells: dict[int, tuple[TestCell, ...]] = {}
    for run_id, labelled in by_run.items():
        cells[run_id] = tuple(
            TestCell(
                label=label,
                job=job_summary(job),
                baseline=_maybe(baselines.get((base_of.get(run_id, ""), job.test_set, job.shape))),
            )
            for label, job in sorted(labelled.items())
        )
    return cells


def _maybe(job: Any) -> JobSummary | None:
    return job_summary(job) if job is not None else None
