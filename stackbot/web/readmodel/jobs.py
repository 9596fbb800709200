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
class Tested:
    """Whose tree a job tested: main (a baseline), one PR's stack, or a series."""

    text: str  # "#8035's stack (#8034, #8035)", "main 42ddc87", "series #6307 (4 PRs)"
    prs: tuple[int, ...]  # every PR in the tree
    whose: str = ""  # the tree without its PRs: "series #6307", "#8035's stack"

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "prs": list(self.prs)}


def tested_by(session: Session, jobs: list[JobSummary]) -> dict[int, Tested]:
    """What each job tested, in two queries for all of them."""
    runs = {
        run.id: run
        for run in dashboard_store.runs_by_ids(
            session, run_ids={j.integration_run_id for j in jobs if j.integration_run_id}
        )
    }
    # The PRs a series tree holds are those its run merged, not every head it read: a PR the
    # series left out (a conflict) was not tested by its jobs. A stack's jobs exist only when
    # its whole stack merged, so its heads are its tree.
    series_runs = {run_id for run_id, run in runs.items() if run_id and run.kind == "series"}
    merged = dashboard_store.merged_steps_of_runs(session, run_ids=series_runs)
    found: dict[int, Tested] = {}
    for job in jobs:
        run = runs.get(job.integration_run_id) if job.integration_run_id else None
        if job.kind == "baseline" or run is None:
            found[job.id] = Tested(f"main {job.commit_sha[:7]}", ())
            continue
        in_tree = merged.get(run.id or 0) or sorted(int(n) for n in (run.heads or {}))
        if job.step_position is not None:  # a bisect job: a prefix of the series order
            in_tree = in_tree[: job.step_position]
        prs = tuple(sorted(in_tree))
        listed = ", ".join(f"#{n}" for n in prs)
        if run.kind == "series":
            prefix = "the first PRs of " if job.step_position is not None else ""
            whose = f"{prefix}series {run.series_key}"
        else:
            whose = f"#{run.target_pr}'s stack"
        found[job.id] = Tested(f"{whose} ({listed})", prs, whose)
    return found


def node_names(node: str | None) -> str:
    """The nodes the executor reported, once each with a count: ``vm, vm`` → ``vm ×2``."""
    if not node:
        return "—"
    names = [name.strip() for name in node.split(",") if name.strip()]
    counts = {name: names.count(name) for name in dict.fromkeys(names)}
    return ", ".join(f"{name} ×{count}" if count > 1 else name for name, count in counts.items())


@dataclass(frozen=True)
class ResultKey:
    """What decides a job's result (issue 24): it is reused only where all of these match."""

    tree: str
    test_set_definition: str  # the configuration hash: targets, markers, conventions, env, image
    shape: str
    # What the nodes reported running the tests with; None until the job finished (or for a
    # result from before runners reported it).
    runner_environment: dict[str, str] | None
    digest: str | None  # sha256 of the four; None while the environment is not known

    @property
    def environment_text(self) -> str:
        env = self.runner_environment
        if not env:
            return "not reported yet"
        names = {"python": "Python", "torch": "torch", "cuda": "CUDA", "image": "image"}
        return ", ".join(f"{names.get(k, k)} {v}" for k, v in sorted(env.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "tree": self.tree,
            "test_set_definition": self.test_set_definition,
            "shape": self.shape,
            "runner_environment": self.runner_environment,
            "digest": self.digest,
        }


@dataclass(frozen=True)
class JobDetail:
    """A job with its per-test results and log; a reused job shows its original's."""

    summary: JobSummary
    result: dict[str, Any] | None
    tests: tuple[TestResult, ...]
    log: str
    tested: Tested | None = None
    key: ResultKey | None = None

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
            "tested": self.tested.to_json() if self.tested else None,
            "result_key": self.key.to_json() if self.key else None,
        }


def job_detail(session: Session, job_id: int) -> JobDetail | None:
    job = jobs_store.get_job(session, job_id=job_id)
    if job is None:
        return None
    source = job.reused_from_job_id or job_id
    tests = jobs_store.results_of_job(session, job_id=source)
    original = jobs_store.get_job(session, job_id=source)
    log = read_log(original.out_dir if original else job.out_dir)
    summary = job_summary(job)
    tested = tested_by(session, [summary]).get(summary.id)
    env = dict(job.runner_env) if job.runner_env else None
    key = ResultKey(job.tree_sha, job.config_hash, job.shape, env, job.result_key)
    return JobDetail(summary, job.result, tuple(tests), log, tested, key)


def list_jobs(
    session: Session,
    *,
    limit: int = 200,
    pr: int | None = None,
    test_set: str | None = None,
) -> dict[str, list[JobSummary]]:
    """Queued, running and finished jobs, newest first; ``pr`` keeps the jobs whose tree holds
    that PR, ``test_set`` those of that test set."""
    groups: dict[str, list[JobSummary]] = {"queued": [], "running": [], "finished": []}
    summaries = [job_summary(job) for job in dashboard_store.newest_jobs(session, limit=limit)]
    if test_set:
        summaries = [job for job in summaries if job.test_set == test_set]
    if pr is not None:
        tested = tested_by(session, summaries)
        summaries = [job for job in summaries if pr in tested[job.id].prs]
    for summary in summaries:
        job = summary
        if job.status in FINISHED_JOB_STATES:
            groups["finished"].append(summary)
        elif job.status == "running":
            groups["running"].append(summary)
        else:
            groups["queued"].append(summary)
    return groups
