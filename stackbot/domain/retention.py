"""What maintenance may remove, and what it must keep (pure).

Kept whatever its age:

- the refs of a run name whose newest run is what a report shows now: a ``stack`` run of an
  open PR, a ``series`` run of a series with an open PR;
- the refs of a run name whose runs have an unfinished job (and, through keep refs, the commit
  of every unfinished job);
- the output of unfinished jobs, of the jobs of the runs above (and the original jobs whose
  outcome they reuse), and of the baseline jobs on those runs' base commits;
- ``refs/stackbot/pushed/…`` (the lease records of pushed branches), branches, PR heads, tags.

Removed once older than the retention: the other run refs (age: the newest run of that name,
else when the ref file was written; refs whose age cannot be told are kept), and the other jobs'
output directories (age: when the job finished; a directory no job row knows: its mtime).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class RunFact:
    """One integration run, as retention sees it."""

    id: int
    repo_id: int
    kind: str  # stack | series
    ref_name: str | None  # refs/stackbot/<kind>/<name>/head
    series_key: str | None
    target_pr: int | None
    base_sha: str
    created_at: datetime


@dataclass(frozen=True)
class JobFact:
    id: int
    repo_id: int
    run_id: int | None
    kind: str  # integration | baseline
    commit_sha: str
    finished: bool
    finished_at: datetime | None
    reused_from: int | None


@dataclass(frozen=True)
class Keep:
    """What the current reports and the unfinished jobs need."""

    ref_prefixes: frozenset[tuple[int, str]]  # (repo id, refs/stackbot/<kind>/<name>/)
    job_ids: frozenset[int]
    # repo id -> {keep ref name: commit} for every unfinished job
    job_commits: Mapping[int, Mapping[str, str]]
    newest_run_of: Mapping[tuple[int, str], datetime]  # (repo id, prefix) -> newest run


def prefix_of(ref_name: str) -> str:
    """``refs/stackbot/series/series-6307/head`` → ``refs/stackbot/series/series-6307/``."""
    return ref_name.rsplit("/", 1)[0] + "/"


def decide_keep(
    runs: Iterable[RunFact],
    jobs: Iterable[JobFact],
    *,
    open_prs: Mapping[int, frozenset[int]],
    series_with_open_prs: Mapping[int, frozenset[str]],
) -> Keep:
    """``open_prs`` and ``series_with_open_prs`` are per repository id."""
    newest: dict[tuple[int, str], RunFact] = {}
    run_prefix: dict[int, tuple[int, str]] = {}
    for run in runs:
        if not run.ref_name:
            continue
        key = run_prefix[run.id] = (run.repo_id, prefix_of(run.ref_name))
        if key not in newest or (run.created_at, run.id) > (
            newest[key].created_at,
            newest[key].id,
        ):
            newest[key] = run
    shown = {key: run for key, run in newest.items() if _shown(run, open_prs, series_with_open_prs)}
    all_jobs = list(jobs)
    live_prefixes = set(shown) | {
        run_prefix[job.run_id]
        for job in all_jobs
        if not job.finished and job.run_id is not None and job.run_id in run_prefix
    }
    shown_run_ids = {run.id for run in shown.values()}
    base_commits = {(run.repo_id, run.base_sha) for run in shown.values()}
    keep_jobs = {
        job.id
        for job in all_jobs
        if not job.finished
        or job.run_id in shown_run_ids
        or (job.kind == "baseline" and (job.repo_id, job.commit_sha) in base_commits)
    }
    keep_jobs |= {
        job.reused_from for job in all_jobs if job.id in keep_jobs and job.reused_from is not None
    }
    commits: dict[int, dict[str, str]] = {}
    for job in all_jobs:
        if not job.finished and len(job.commit_sha) == 40:
            commits.setdefault(job.repo_id, {})[f"job-{job.id}"] = job.commit_sha
    return Keep(
        ref_prefixes=frozenset(live_prefixes),
        job_ids=frozenset(keep_jobs),
        job_commits=commits,
        newest_run_of={key: run.created_at for key, run in newest.items()},
    )


def _shown(
    run: RunFact,
    open_prs: Mapping[int, frozenset[int]],
    series_with_open_prs: Mapping[int, frozenset[str]],
) -> bool:
    if run.kind == "series":
        return run.series_key in series_with_open_prs.get(run.repo_id, frozenset())
    return run.target_pr in open_prs.get(run.repo_id, frozenset())


def expired(written_at: float | None, *, now: float, retention_days: float) -> bool:
    """Whether something last written at ``written_at`` (epoch seconds; None: unknown, kept)
    is past the retention."""
    return written_at is not None and now - written_at > retention_days * 86400.0


def human_bytes(value: int | None) -> str:
    """``1.5 GiB``; ``—`` for a figure not measured."""
    if value is None:
        return "—"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
