"""The jobs pages: the queue of jobs (queued, running, finished) and one job in detail."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from stackbot.db import dashboard_store, jobs_store
from stackbot.db.models import TestResult
from stackbot.web.joblogs import read_log
from stackbot.web.readmodel.summaries import FINISHED_JOB_STATES, JobSummary, job_summary


@dataclass(frozen=True)
class JobDetail:
    """A job with its per-test results and log; a reused job shows its original's."""

    summary: JobSummary
    result: dict[str, Any] | None
    tests: tuple[TestResult, ...]
    log: str

    @property
    def cause(self) -> str:
        """The lines of a rank's output naming what stopped the job (gpu_jobs' ``cause``)."""
        cause = (self.result or {}).get("cause")
        return cause if isinstance(cause, str) else ""

    def to_json(self) -> dict[str, Any]:
        return {
            **self.summary.to_json(),
            "result": self.result,
            "tests": [
                {
                    "nodeid": t.nodeid,
                    "outcome": t.outcome,
                    "duration_s": t.duration_s,
                    "failed_ranks": t.failed_ranks,
                }
                for t in self.tests
            ],
            "log": self.log,
        }


def job_detail(session: Session, job_id: int) -> JobDetail | None:
    job = jobs_store.get_job(session, job_id=job_id)
    if job is None:
        return None
    source = job.reused_from_job_id or job_id
    tests = jobs_store.results_of_job(session, job_id=source)
    original = jobs_store.get_job(session, job_id=source)
    log = read_log(original.out_dir if original else job.out_dir)
    return JobDetail(job_summary(job), job.result, tuple(tests), log)


def list_jobs(session: Session, *, limit: int = 200) -> dict[str, list[JobSummary]]:
    groups: dict[str, list[JobSummary]] = {"queued": [], "running": [], "finished": []}
    for job in dashboard_store.newest_jobs(session, limit=limit):
        summary = job_summary(job)
        if job.status in FINISHED_JOB_STATES:
            groups["finished"].append(summary)
        elif job.status == "running":
            groups["running"].append(summary)
        else:
            groups["queued"].append(summary)
    return groups
