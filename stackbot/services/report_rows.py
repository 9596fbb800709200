"""A run's test rows for a PR's report: the newest job per test set and shape on the run's
tree (a PR's own test files on that PR only), its outcomes compared with the newest finished
baseline of the same configuration on the run's base commit, and its retry chain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlmodel import Session

from gpu_jobs.testsets import own_test_set_pr
from stackbot.db import jobs_store
from stackbot.db.models import IntegrationRun, Job
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.domain.comparison import Counts, TestOutcomes, compare_with_main
from stackbot.domain.report_view import ReusedFrom, TestRow
from stackbot.domain.retries import Attempt, retry_chain
from stackbot.services import read_batch
from stackbot.services.read_batch import baselines_on, memo


def run_test_rows(
    session: Session, run: IntegrationRun, base_url: str, number: int | None = None
) -> tuple[tuple[TestRow, ...], str | None]:
    """The run's test rows as PR ``number`` sees them (with its own test files' jobs), and
    main's commit they are compared with (None when there is no row)."""
    assert run.id is not None
    run_id = run.id
    jobs = read_batch.jobs_of_run(session, run_id)
    common, own_by_pr = memo(session, ("newest jobs", run_id), lambda: _newest_jobs(jobs))
    # a PR's own test files: on that PR only; every other PR sees the same rows
    own = number if number is not None and number in own_by_pr else None
    newest = {**common, **own_by_pr[own]} if own is not None else common
    return memo(
        session,
        ("test rows", run_id, base_url, own),
        lambda: _test_rows(session, run, base_url, jobs, newest),
    )


def _test_rows(
    session: Session,
    run: IntegrationRun,
    base_url: str,
    jobs: Sequence[Job],
    newest: dict[tuple[str, str], Job],
) -> tuple[tuple[TestRow, ...], str | None]:
    assert run.id is not None
    run_id = run.id
    baselines = run_baselines(session, run)
    read_batch.prefetch_results(session, [*newest.values(), *baselines.values()])
    links = memo(session, ("retry links", run_id), lambda: _RetryLinks.of(jobs))
    rows = tuple(
        replace(
            _row(session, job, baselines.get(label), base_url, _none_on_main(session, run, job)),
            attempts=links.attempts(job, base_url),
        )
        for label, job in sorted(newest.items())
    )
    return rows, (run.base_sha or None) if rows else None


@dataclass(frozen=True)
class _RetryLinks:
    """A run's jobs by id and which job each retry retries: every attempt of a run's tree is a
    job of the run, so a row's retry chain is read without a query."""

    jobs: dict[int, Job]
    retry_of: dict[int, int | None]

    @classmethod
    def of(cls, jobs: Sequence[Job]) -> _RetryLinks:
        by_id = {job.id: job for job in jobs if job.id is not None}
        return cls(by_id, {i: j.retry_of_job_id for i, j in by_id.items() if j.purpose == "retry"})

    def attempts(self, job: Job, base_url: str) -> tuple[Attempt, ...]:
        """A retry's attempts, oldest first, ending with it; empty for a job that retries
        nothing."""
        if job.purpose != "retry" or job.id is None:
            return ()
        chain = [self.jobs[i] for i in retry_chain(job.id, self.retry_of) if i in self.jobs]
        return tuple(
            Attempt(j.id or 0, j.status, j.node, j.error, f"{base_url}/jobs/{j.id}") for j in chain
        )


def _newest_jobs(
    jobs: Sequence[Job],
) -> tuple[dict[tuple[str, str], Job], dict[int, dict[tuple[str, str], Job]]]:
    """A run's newest job per (test set, shape) on the run's own tree: the configured sets',
    and each PR's own test files' (``own:N``) by PR. A bisection probe tests a prefix of the
    series, another tree: it is never the row (its result is the findings' evidence)."""
    common: dict[tuple[str, str], Job] = {}
    own_by_pr: dict[int, dict[tuple[str, str], Job]] = {}
    for job in jobs:
        if job.step_position is not None:
            continue
        own = own_test_set_pr(job.test_set)
        target = common if own is None else own_by_pr.setdefault(own, {})
        target[(job.test_set, job.shape)] = job
    return common, own_by_pr


def run_baselines(session: Session, run: IntegrationRun) -> dict[tuple[str, str], Job]:
    """Main's newest finished job per (test set, shape) on the run's base commit."""
    return memo(session, ("baselines", run.repo_id, run.base_sha), lambda: _baselines(session, run))


def _baselines(session: Session, run: IntegrationRun) -> dict[tuple[str, str], Job]:
    if not run.base_sha:
        return {}
    found: dict[tuple[str, str], Job] = {}
    for job in jobs_store.finished_baselines(session, repo_id=run.repo_id, commit_sha=run.base_sha):
        found[(job.test_set, job.shape)] = job  # the newest wins
    return found


def _none_on_main(session: Session, run: IntegrationRun, job: Job) -> bool:
    """Whether ``job`` runs a PR's own test files of which main has none (no baseline is made:
    main's side is empty, not pending)."""
    if own_test_set_pr(job.test_set) is None:
        return False
    baselines = baselines_on(session, run.repo_id, run.base_sha)
    return not any((b.test_set, b.shape) == (job.test_set, job.shape) for b in baselines)


def _row(
    session: Session, job: Job, baseline: Job | None, base_url: str, none_on_main: bool = False
) -> TestRow:
    comparison = None
    if job.status in FINISHED_STATES:
        here = read_batch.outcomes_of(session, job)
        if here is not None:
            main = read_batch.outcomes_of(session, baseline) if baseline is not None else None
            if none_on_main:
                main = TestOutcomes("passed", Counts(), {})
            comparison = compare_with_main(here, main)
    reused = None
    if job.reused_from_job_id is not None:
        source_id = job.reused_from_job_id
        source = memo(
            session, ("job", source_id), lambda: jobs_store.get_job(session, job_id=source_id)
        )
        reused = ReusedFrom(source.integration_run_id if source else None, job.reused_from_job_id)
    return TestRow(
        test_set=job.test_set,
        shape=job.shape,
        status=job.status,
        comparison=comparison,
        reused_from=reused,
        url=f"{base_url}/jobs/{job.id}",
        error=(job.error or "").strip().splitlines()[-1][:200] if job.error else None,
        missing_targets=_missing_targets(job),
        error_of=str((job.result or {}).get("error_of") or ""),
    )


def _missing_targets(job: Job) -> tuple[str, ...]:
    """The targets the job's tree lacked, as its node runner recorded them in its result."""
    found = (job.result or {}).get("missing_targets")
    if not isinstance(found, list):
        return ()
    return tuple(str(target) for target in found if isinstance(target, str))
