"""What one read of many PR views shares, read once: a memo that lives in the SQLAlchemy
session for the duration of a batch (see :func:`stackbot.services.report_views.build_report_views`).
Outside a batch every lookup reads the database, so a session that writes between two reports
never sees a stale value.

A batch may also be given a :class:`SharedMemo` (the dashboard's): what is derived only from
the integration runs, their steps, jobs, test results and findings (:data:`RUN_TABLES`; the
memo keys of :data:`RUN_KEYS`) is then kept across batches while those tables' own read clocks
(:func:`stackbot.db.read_clock.table_ticks`) stand still. A write to a PR, an approval or an
edge recomputes the verdicts, not 5,000 jobs' rows; a write to a job recomputes everything."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlmodel import Session

from stackbot.db import integration_store, jobs_store, read_clock
from stackbot.db.models import IntegrationStep, Job
from stackbot.domain.comparison import TestOutcomes
from stackbot.domain.job_outcomes import job_outcomes

T = TypeVar("T")
MEMO = "stackbot.report_views.batch"
SHARED = "stackbot.report_views.shared"

#: The tables the values of :data:`RUN_KEYS` are derived from, and only these.
RUN_TABLES = ("integration_runs", "integration_steps", "jobs", "test_results", "test_findings")
#: The kinds of memo keys (a key's first item) whose values read nothing but :data:`RUN_TABLES`
#: (and what the key itself holds: a run id, a PR's number and head, the settings used).
RUN_KEYS = frozenset(
    {
        "stack run",  # the newest stack run of (PR, head)
        "series run",  # the newest run of a series key
        "jobs",
        "steps",
        "results",
        "outcomes",
        "job",
        "baselines",
        "baselines on",
        "newest jobs",
        "retry links",
        "test rows",
        "integration view",
        "findings",
        "merged steps",
        "tree jobs by set",
        "latest stack runs",
        "cells",
        "row cells",  # a PR's cells of its stack run, under its rows' states (in the key)
        "report view",  # a PR's view: what is not derived from the runs' tables is its key
        "run summary",
        "pull row",  # a PR's row of the PR table: its fields and its kept parts are its key
        "run steps",
        "latest series run",
    }
)


class SharedMemo:
    """The values of :data:`RUN_KEYS`, kept across batches while the clocks of
    :data:`RUN_TABLES` read the same ticks as when they were computed.

    Why it is exact: a batch reads the clocks before it reads any row; a value computed in a
    batch that read ticks ``t`` holds every change committed before that read. A later batch
    that reads the same ``t`` uses it: a change to those tables committed in between would have
    moved a clock. Values are immutable once kept (rows already loaded, tuples, frozen views);
    a batch that read older ticks than the kept ones gets a memo of its own."""

    def __init__(self, max_values: int = 500_000) -> None:
        self._lock = threading.Lock()
        self._ticks: tuple[int, ...] | None = None
        self._values: dict[tuple[Any, ...], Any] = {}
        self._max_values = max_values
        self.resets = 0

    def values_at(self, session: Session) -> dict[tuple[Any, ...], Any]:
        """The kept values valid at the clocks' ticks now (an empty dict to fill when they
        moved; a private one when they read older than the kept ones or cannot be read)."""
        ticks = read_clock.table_ticks(session, RUN_TABLES)
        if ticks is None:
            return {}
        with self._lock:
            if ticks == self._ticks and len(self._values) < self._max_values:
                return self._values
            if self._ticks is not None and any(
                new < old for new, old in zip(ticks, self._ticks, strict=True)
            ):
                return {}  # a reader behind the kept values: they may hold what it must not
            self._ticks, self._values = ticks, {}
            self.resets += 1
            return self._values


@contextmanager
def batch(session: Session, shared: SharedMemo | None = None) -> Iterator[None]:
    """While building the views of many PRs in one read, what they share (the series run, its
    jobs and their results, main's baselines, the series list) is read once; with ``shared``,
    what is derived from the runs' tables only is also kept for later batches."""
    if MEMO in session.info:
        yield
        return
    session.info[MEMO] = {}
    if shared is not None:
        session.info[SHARED] = shared.values_at(session)
    try:
        yield
    finally:
        session.info.pop(MEMO, None)
        session.info.pop(SHARED, None)


def memo(session: Session, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
    """``compute()``, or in a batch the value already computed for ``key``."""
    info = session.info
    found: dict[tuple[Any, ...], Any] | None = info.get(MEMO)
    if found is None:
        return compute()
    if key[0] in RUN_KEYS:
        kept: dict[tuple[Any, ...], Any] | None = info.get(SHARED)
        if kept is not None:
            found = kept
    # one lookup, not two: a key holding a PR's view parts is hashed field by field
    value = found.get(key, _MISSING)
    if value is _MISSING:
        value = found[key] = compute()
    return value  # type: ignore[no-any-return]


_MISSING = object()


def memo_table(session: Session, kind: str = "") -> dict[tuple[Any, ...], Any] | None:
    """The memo that keys of ``kind`` are kept in (None outside a batch), for preloading it."""
    if kind in RUN_KEYS:
        kept: dict[tuple[Any, ...], Any] | None = session.info.get(SHARED)
        if kept is not None:
            return kept
    found: dict[tuple[Any, ...], Any] | None = session.info.get(MEMO)
    return found


def steps_of(session: Session, run_id: int) -> list[IntegrationStep]:
    return memo(
        session, ("steps", run_id), lambda: integration_store.steps_of(session, run_id=run_id)
    )


def jobs_of_run(session: Session, run_id: int) -> list[Job]:
    return memo(session, ("jobs", run_id), lambda: jobs_store.jobs_of_run(session, run_id=run_id))


def baselines_on(session: Session, repo_id: int, commit_sha: str) -> Sequence[Job]:
    return memo(
        session,
        ("baselines on", repo_id, commit_sha),
        lambda: jobs_store.baselines_on(session, repo_id=repo_id, commit_sha=commit_sha),
    )


def outcomes_of(session: Session, job: Job) -> TestOutcomes | None:
    """What the job's tests did (:func:`stackbot.domain.job_outcomes.job_outcomes` of its row),
    read once per batch; its per-test rows are read only when its result cannot be."""
    if job.id is None:
        return job_outcomes(job.status, job.result, job.counts, dict)
    job_id = job.id

    def stored_tests() -> dict[str, str]:
        rows = memo(
            session, ("results", job_id), lambda: jobs_store.results_of_job(session, job_id=job_id)
        )
        return {row.nodeid: row.outcome for row in rows}

    return memo(
        session,
        ("outcomes", job_id),
        lambda: job_outcomes(job.status, job.result, job.counts, stored_tests),
    )


def prefetch_results(session: Session, jobs: Sequence[Job]) -> None:
    """In a batch, the per-test rows of every job about to be shown, in one query."""
    table = memo_table(session, "results")
    if table is None:
        return
    wanted = [j.id for j in jobs if j.id is not None and ("results", j.id) not in table]
    if wanted:
        for job_id, rows in jobs_store.results_of_jobs(session, job_ids=wanted).items():
            table[("results", job_id)] = rows
