"""Flaky tests of a series across its runs (issue 13 point 3), pure.

The test plan classes a failing test ``flaky`` when it failed on a run's tree and passed on the
rerun of the same tree; the finding keeps both jobs (``failed_in``, ``passed_in``). Runs with
identical trees share one pair of jobs (the later runs hold reused copies), so one flaky event
is counted once, by the jobs that actually ran, with every run that reported it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class FlakyFindingFacts:
    """One stored ``flaky`` finding with the run it is about."""

    run_id: int
    run_kind: str
    target_pr: int | None
    test_set: str
    shape: str
    nodeid: str
    failed_in: tuple[int, ...]
    passed_in: tuple[int, ...]


@dataclass(frozen=True)
class JobFacts:
    id: int
    integration_run_id: int | None
    tree_sha: str
    status: str
    node: str | None
    finished_at: datetime | None
    reused_from_job_id: int | None


@dataclass(frozen=True)
class ReportingRun:
    id: int
    kind: str
    target_pr: int | None


@dataclass(frozen=True)
class FlakyEvent:
    """One flaky failure: the job it failed in and the rerun of the same tree it passed in
    (the jobs that ran, not reused copies), and the runs that reported it."""

    test_set: str
    shape: str
    tree_sha: str | None
    failed_job: int | None
    passed_job: int | None
    failed_run: int | None  # the run the failing job was made for
    passed_run: int | None
    failed_node: str | None
    passed_node: str | None
    failed_at: datetime | None  # when the failing job finished
    runs: tuple[ReportingRun, ...]

    @property
    def label(self) -> str:
        return f"{self.test_set} {self.shape}"


@dataclass(frozen=True)
class FlakyTest:
    nodeid: str
    events: tuple[FlakyEvent, ...]

    @property
    def times(self) -> int:
        return len(self.events)

    @property
    def configs(self) -> tuple[str, ...]:
        return tuple(sorted({e.label for e in self.events}))

    @property
    def trees(self) -> tuple[str, ...]:
        return tuple(sorted({e.tree_sha for e in self.events if e.tree_sha}))


def flaky_tests(findings: list[FlakyFindingFacts], jobs: dict[int, JobFacts]) -> list[FlakyTest]:
    """Each test that was flaky in the series, most often flaky first, with its events oldest
    first. ``jobs`` holds the findings' evidence jobs and the originals of reused copies."""

    def original(job_id: int | None) -> JobFacts | None:
        job = jobs.get(job_id) if job_id is not None else None
        if job is not None and job.reused_from_job_id is not None:
            return jobs.get(job.reused_from_job_id, job)
        return job

    events: dict[tuple[object, ...], tuple[FlakyFindingFacts, list[ReportingRun]]] = {}
    for finding in sorted(findings, key=lambda f: (f.run_id, f.test_set, f.shape, f.nodeid)):
        failed = original(finding.failed_in[-1] if finding.failed_in else None)
        passed = original(finding.passed_in[-1] if finding.passed_in else None)
        key: tuple[object, ...] = (
            finding.nodeid,
            finding.test_set,
            finding.shape,
            failed.id if failed else ("run", finding.run_id),
            passed.id if passed else ("run", finding.run_id),
        )
        run = ReportingRun(finding.run_id, finding.run_kind, finding.target_pr)
        events.setdefault(key, (finding, []))[1].append(run)
    by_test: dict[str, list[FlakyEvent]] = {}
    for finding, runs in events.values():
        failed = original(finding.failed_in[-1] if finding.failed_in else None)
        passed = original(finding.passed_in[-1] if finding.passed_in else None)
        either = failed or passed
        by_test.setdefault(finding.nodeid, []).append(
            FlakyEvent(
                test_set=finding.test_set,
                shape=finding.shape,
                tree_sha=either.tree_sha if either else None,
                failed_job=failed.id if failed else None,
                passed_job=passed.id if passed else None,
                failed_run=failed.integration_run_id if failed else None,
                passed_run=passed.integration_run_id if passed else None,
                failed_node=failed.node if failed else None,
                passed_node=passed.node if passed else None,
                failed_at=failed.finished_at if failed else None,
                runs=tuple(runs),
            )
        )
    tests = [
        FlakyTest(nodeid, tuple(sorted(found, key=lambda e: (e.failed_job or 0, e.label))))
        for nodeid, found in by_test.items()
    ]
    return sorted(tests, key=lambda t: (-t.times, t.nodeid))
