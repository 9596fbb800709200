"""A run's test rows for a PR's report: the newest job per test set and shape on the run's
tree, its outcomes compared with the newest finished baseline of the same configuration on the
run's base commit, and its retry chain. The tree's own-files jobs (one per shape, every PR's
files batched) give each PR the row ``own:N`` of its own files alone, split out by file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlmodel import Session

from gpu_jobs.testsets import is_own_test_set, own_test_set_name
from stackbot.db import jobs_store
from stackbot.db.models import IntegrationRun, Job
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.domain.comparison import Counts, TestOutcomes, compare_with_main
from stackbot.domain.own_tests import OwnFile, restrict_outcomes
from stackbot.domain.report_view import ReusedFrom, TestRow
from stackbot.domain.retries import Attempt, retry_chain
from stackbot.services import read_batch
from stackbot.services.own_tests import files_for_pr, run_owners
from stackbot.services.read_batch import memo


def run_test_rows(
    session: Session, run: IntegrationRun, base_url: str, number: int | None = None
) -> tuple[tuple[TestRow, ...], str | None]:
    """The run's test rows as PR ``number`` sees them (with its own test files' jobs), and
    main's commit they are compared with (None when there is no row)."""
    assert run.id is not None
    run_id = run.id
    jobs = read_batch.jobs_of_run(session, run_id)
    return memo(
        session,
        ("test rows", run_id, base_url, number),
        lambda: _test_rows(session, run, base_url, jobs, number),
    )


def _test_rows(
    session: Session,
    run: IntegrationRun,
    base_url: str,
    jobs: Sequence[Job],
    number: int | None,
) -> tuple[tuple[TestRow, ...], str | None]:
    assert run.id is not None
    run_id = run.id
    common, own = memo(session, ("newest jobs", run_id), lambda: _newest_jobs(jobs))
    baselines = run_baselines(session, run)
    read_batch.prefetch_results(session, [*common.values(), *baselines.values()])
    links = memo(session, ("retry links", run_id), lambda: _RetryLinks.of(jobs))
    rows = [
        replace(
            _row(session, job, baselines.get(label), base_url),
            attempts=links.attempts(job, base_url),
        )
        for label, job in sorted(common.items())
    ]
    if number is not None:
        rows += _own_rows(session, run, own, number, base_url, links)
    rows.sort(key=lambda row: row.label)
    return tuple(rows), (run.base_sha or None) if rows else None


def _own_rows(
    session: Session,
    run: IntegrationRun,
    own: dict[tuple[str, str], Job],
    number: int,
    base_url: str,
    links: _RetryLinks,
) -> list[TestRow]:
    """PR ``number``'s own test files on the run's tree, one row ``own:N`` per shape: the
    tree's own-files job of that shape, its outcomes and main's cut down to the PR's files."""
    assert run.id is not None
    owners = run_owners(session, run.id)
    mine: dict[str, tuple[Job, tuple[str, ...]]] = {}
    for (_, shape), job in sorted(own.items(), key=lambda item: item[1].id or 0):
        files = files_for_pr(job.test_set, job.targets, owners, number)
        if files:
            mine[shape] = (job, files)  # the newest job of the shape holding the PR's files
    on_main = _on_main_files(session, run, number)
    baselines = _own_baselines(session, run)
    read_batch.prefetch_results(
        session,
        [job for job, _ in mine.values()] + [b for b in baselines if b.status in FINISHED_STATES],
    )
    rows = []
    for shape, (job, files) in sorted(mine.items()):
        main_files = [f for f in files if f in on_main]
        baseline = next(
            (
                b
                for b in reversed(baselines)
                if b.shape == shape
                and b.status in FINISHED_STATES
                and set(main_files) <= set(b.targets or ())
            ),
            None,
        )
        row = _row(
            session, job, baseline if main_files else None, base_url, not main_files, files=files
        )
        rows.append(
            replace(row, test_set=own_test_set_name(number), attempts=links.attempts(job, base_url))
        )
    return rows


def _on_main_files(session: Session, run: IntegrationRun, number: int) -> set[str]:
    """The PR's own test files that main has (a baseline runs those)."""
    assert run.id is not None
    for step in read_batch.steps_of(session, run.id):
        if step.pr_number == number and step.own_test_files:
            return {f.path for f in map(OwnFile.from_json, step.own_test_files) if f.on_main}
    return set()


def _own_baselines(session: Session, run: IntegrationRun) -> list[Job]:
    """Main's own-files jobs on the run's base commit, oldest first."""
    if not run.base_sha:
        return []
    return [
        job
        for job in read_batch.baselines_on(session, run.repo_id, run.base_sha)
        if is_own_test_set(job.test_set)
    ]


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
) -> tuple[dict[tuple[str, str], Job], dict[tuple[str, str], Job]]:
    """A run's newest job per (test set, shape) on the run's own tree: the configured sets',
    and apart the own-files jobs (``own``; ``own:N`` stored before batching), which each PR
    reads for its own files. A bisection probe tests a prefix of the series, another tree: it
    is never the row (its result is the findings' evidence)."""
    common: dict[tuple[str, str], Job] = {}
    own: dict[tuple[str, str], Job] = {}
    for job in jobs:
        if job.step_position is not None:
            continue
        target = own if is_own_test_set(job.test_set) else common
        target[(job.test_set, job.shape)] = job
    return common, own


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


def _row(
    session: Session,
    job: Job,
    baseline: Job | None,
    base_url: str,
    none_on_main: bool = False,
    *,
    files: Sequence[str] | None = None,
) -> TestRow:
    """The row of ``job``; ``files``: only these own test files' tests, here and on main (a
    PR's part of a batched own-files job), the status the part earns."""
    comparison = None
    status = job.status
    if job.status in FINISHED_STATES:
        here = read_batch.outcomes_of(session, job)
        if here is not None:
            main = read_batch.outcomes_of(session, baseline) if baseline is not None else None
            if files is not None:
                here = restrict_outcomes(here, files)
                main = restrict_outcomes(main, files) if main is not None else None
                status = here.status
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
        status=status,
        comparison=comparison,
        reused_from=reused,
        url=f"{base_url}/jobs/{job.id}",
        error=(job.error or "").strip().splitlines()[-1][:200] if job.error else None,
        missing_targets=tuple(t for t in _missing_targets(job) if files is None or t in files),
        error_of=str((job.result or {}).get("error_of") or ""),
    )


def _missing_targets(job: Job) -> tuple[str, ...]:
    """The targets the job's tree lacked, as its node runner recorded them in its result."""
    found = (job.result or {}).get("missing_targets")
    if not isinstance(found, list):
        return ()
    return tuple(str(target) for target in found if isinstance(target, str))
