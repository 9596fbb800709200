"""Test cells: each test set × shape of an integration run, its job next to main's baseline job
of the run's base commit. Two queries for any number of runs. A PR's page and row show, for
the tree's batched own-files job (``own``), a cell ``own:N`` of that PR's files alone
(:func:`own_cells_for`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, replace
from typing import Any

from sqlmodel import Session

from gpu_jobs.testsets import OWN_TEST_SET, own_test_set_name
from stackbot.db import dashboard_store, jobs_store
from stackbot.db.models import IntegrationRun
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.domain.own_tests import restrict_outcomes
from stackbot.domain.retries import Attempt, NotePart, retry_chain, retry_note
from stackbot.services import read_batch
from stackbot.services.own_tests import files_for_pr, run_owners
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


def own_cells_for(
    session: Session, run_id: int, cells: Sequence[TestCell], numbers: Iterable[int]
) -> tuple[TestCell, ...]:
    """``cells`` with each batched own-files cell (``own 2x4``: every PR's own test files on the
    tree) replaced by a cell ``own:N 2x4`` per PR of ``numbers`` whose files it ran: that PR's
    tests alone, here and on main, with the status its files earn."""
    wanted = list(numbers)
    found: list[TestCell] = []
    for cell in cells:
        if cell.job is None or cell.job.test_set != OWN_TEST_SET:
            found.append(cell)
            continue
        job = jobs_store.get_job(session, job_id=cell.job.id)
        base = (
            jobs_store.get_job(session, job_id=cell.baseline.id)
            if cell.baseline is not None
            else None
        )
        if job is None:
            continue
        owners = run_owners(session, run_id)
        for number in wanted:
            files = files_for_pr(job.test_set, job.targets, owners, number)
            if not files:
                continue
            name = own_test_set_name(number)
            summary = replace(cell.job, test_set=name)
            here = read_batch.outcomes_of(session, job) if job.status in FINISHED_STATES else None
            if here is not None:
                part = restrict_outcomes(here, files)
                summary = replace(summary, status=part.status, counts=_counts(part.counts))
            main = None
            if (
                base is not None
                and cell.baseline is not None
                and set(files) & set(base.targets or ())
            ):
                main = replace(cell.baseline, test_set=name)
                there = read_batch.outcomes_of(session, base)
                if there is not None:
                    part = restrict_outcomes(there, files)
                    main = replace(main, status=part.status, counts=_counts(part.counts))
            found.append(
                replace(cell, label=f"{name} {cell.job.shape}", job=summary, baseline=main)
            )
    return tuple(sorted(found, key=lambda cell: cell.label))


def _counts(counts: Any) -> dict[str, int]:
    return {name: value for name, value in asdict(counts).items() if value}


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
