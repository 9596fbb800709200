"""The flaky findings of a series with their evidence jobs (issue 13 point 3): three queries,
whatever the number of runs, findings or jobs."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select as select_columns
from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun, Job, TestFinding
from stackbot.domain.flaky import FlakyFindingFacts, FlakyTest, JobFacts, flaky_tests

# A flake of a quarantined test is classed ``quarantined``: the same event, listed too.
FLAKY_CLASSES = ("flaky", "quarantined")


def series_flaky_tests(session: Session, *, repo_id: int, series_key: str) -> list[FlakyTest]:
    """Every test a run of the series found flaky, grouped per test across runs."""
    rows = session.exec(
        select(TestFinding, IntegrationRun.kind, IntegrationRun.target_pr)
        .join(IntegrationRun, col(TestFinding.run_id) == col(IntegrationRun.id))
        .where(col(IntegrationRun.repo_id) == repo_id)
        .where(col(IntegrationRun.series_key) == series_key)
        .where(col(TestFinding.failure_class).in_(FLAKY_CLASSES))
    ).all()
    findings = [
        FlakyFindingFacts(
            run_id=row.run_id,
            run_kind=kind,
            target_pr=target_pr,
            test_set=row.test_set,
            shape=row.shape,
            nodeid=row.nodeid,
            failed_in=_ids((row.evidence or {}).get("failed_in")),
            passed_in=_ids((row.evidence or {}).get("passed_in")),
        )
        for row, kind, target_pr in rows
    ]
    evidence = {j for f in findings for j in (*f.failed_in[-1:], *f.passed_in[-1:])}
    jobs = _jobs(session, evidence)
    sources = {j.reused_from_job_id for j in jobs.values() if j.reused_from_job_id} - set(jobs)
    jobs.update(_jobs(session, sources))
    return flaky_tests(findings, jobs)


def _ids(value: object) -> tuple[int, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(int(j) for j in value if isinstance(j, int) or str(j).isdigit())


def _jobs(session: Session, ids: Iterable[int | None]) -> dict[int, JobFacts]:
    wanted = sorted(i for i in ids if i is not None)
    if not wanted:
        return {}
    rows = session.execute(
        select_columns(
            col(Job.id),
            col(Job.integration_run_id),
            col(Job.tree_sha),
            col(Job.status),
            col(Job.node),
            col(Job.finished_at),
            col(Job.reused_from_job_id),
        ).where(col(Job.id).in_(wanted))
    ).all()
    return {row[0]: JobFacts(*row) for row in rows if row[0] is not None}
