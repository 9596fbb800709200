"""What the dashboard and the JSON API show, read from the database in a few queries.

Every page is built from one of these functions; the HTML templates and the ``/api/`` routes
render the same dataclasses, so the two never disagree. Queries are batched per page (no query
per row) so a 60-PR series with hundreds of jobs stays fast.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as select_columns
from sqlmodel import Session, col, select

from stackbot.db.models import (
    Approval,
    DependencyEdge,
    IntegrationRun,
    IntegrationStep,
    Job,
    PullRequest,
    Repository,
    Series,
    SeriesMember,
    Task,
    TestResult,
)
from stackbot.web.joblogs import read_log

FINISHED_JOB_STATES = frozenset({"passed", "failed", "error", "timeout", "infra", "cancelled"})


def series_slug(key: str) -> str:
    """URL form of a series key: ``#6307`` → ``6307``, ``root-#8034`` → ``root-8034``."""
    return key.replace("#", "")


def key_from_slug(slug: str) -> str:
    if slug.startswith("root-"):
        return "root-#" + slug.removeprefix("root-")
    return "#" + slug if slug.isdigit() else slug


@dataclass(frozen=True)
class JobSummary:
    id: int
    test_set: str
    shape: str
    status: str
    counts: dict[str, int]
    kind: str
    tree_sha: str
    commit_sha: str
    integration_run_id: int | None
    reused_from_job_id: int | None
    node: str | None
    executor: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    out_dir: str | None
    error: str | None

    @property
    def label(self) -> str:
        return f"{self.test_set} {self.shape}"

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def passed(self) -> int:
        return int(self.counts.get("passed", 0))

    @property
    def not_passed(self) -> int:
        return sum(int(v) for k, v in self.counts.items() if k in ("failed", "error"))

    @property
    def counts_text(self) -> str:
        if self.status not in FINISHED_JOB_STATES:
            return self.status
        parts = [
            f"{self.counts.get(k, 0)} {k}"
            for k in ("passed", "failed", "error")
            if self.counts.get(k)
        ]
        return ", ".join(parts) if parts else f"{self.status}, no tests"

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self, {"duration_s": self.duration_s})


@dataclass(frozen=True)
class TestCell:
    """One test set × shape of a PR: the integration's job next to main's."""

    __test__ = False

    label: str
    job: JobSummary | None
    baseline: JobSummary | None

    @property
    def text(self) -> str:
        ours = self.job.counts_text if self.job else "not run"
        main = self.baseline.counts_text if self.baseline else "not run"
        return f"{ours} · main: {main}"

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "job": self.job.to_json() if self.job else None,
            "baseline": self.baseline.to_json() if self.baseline else None,
        }

    @property
    def state(self) -> str:
        if self.job is None:
            return "none"
        if self.job.status in FINISHED_JOB_STATES:
            return "passed" if self.job.status == "passed" else "failed"
        return "running"


@dataclass(frozen=True)
class RunSummary:
    id: int
    kind: str
    status: str
    series_key: str | None
    target_pr: int | None
    base_ref: str
    base_sha: str
    final_tree: str | None
    final_commit: str | None
    heads: dict[str, str]
    allowlist: dict[str, Any] | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)


@dataclass(frozen=True)
class PullRow:
    number: int
    title: str
    author: str
    state: str
    draft: bool
    merged: bool
    head_sha: str
    superseded_by: int | None
    approval: str | None  # who approved the current head, or None
    stack_run: RunSummary | None
    tests: tuple[TestCell, ...]

    @property
    def display_state(self) -> str:
        if self.merged:
            return "merged"
        if self.superseded_by:
            return "superseded"
        if self.state != "open":
            return "closed"
        if self.stack_run and self.stack_run.status == "conflict":
            return "conflict"
        if any(cell.state == "failed" for cell in self.tests):
            return "failed"
        if self.tests and all(cell.state == "passed" for cell in self.tests):
            return "passed"
        if self.approval is None:
            return "waiting"
        return "draft" if self.draft else "open"

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "author": self.author,
            "state": self.state,
            "display_state": self.display_state,
            "draft": self.draft,
            "merged": self.merged,
            "head_sha": self.head_sha,
            "superseded_by": self.superseded_by,
            "approval": self.approval,
            "stack_run": self.stack_run.to_json() if self.stack_run else None,
            "tests": [cell.to_json() for cell in self.tests],
        }


@dataclass(frozen=True)
class StepRow:
    position: int
    pr_number: int
    head_sha: str
    outcome: str
    tree: str | None
    commit: str | None
    conflicts: list[dict[str, Any]]
    conflicts_with: list[int]
    resolution: str | None
    skipped_reason: str | None
    messages: str | None

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)


@dataclass(frozen=True)
class SeriesListRow:
    key: str
    slug: str
    repo: str
    pr_count: int
    open_count: int
    problems: int
    status: str
    updated_at: datetime
    latest_run_status: str | None

    def to_json(self) -> dict[str, Any]:
        return _fields_json(self)


@dataclass(frozen=True)
class SeriesPage:
    key: str
    slug: str
    repo: str
    series_status: str
    order: list[int]
    problems: list[dict[str, Any]]
    pulls: tuple[PullRow, ...]
    edges: tuple[tuple[int, int, str], ...]
    series_run: RunSummary | None
    series_steps: tuple[StepRow, ...]
    series_tests: tuple[TestCell, ...]
    conflict_matrix: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "repo": self.repo,
            "status": self.series_status,
            "order": self.order,
            "problems": self.problems,
            "pulls": [row.to_json() for row in self.pulls],
            "edges": [{"child": c, "parent": p, "source": s} for c, p, s in self.edges],
            "series_run": self.series_run.to_json() if self.series_run else None,
            "series_steps": [step.to_json() for step in self.series_steps],
            "series_tests": [cell.to_json() for cell in self.series_tests],
            "conflict_matrix": self.conflict_matrix,
        }


@dataclass(frozen=True)
class TaskCounts:
    by_status: dict[str, int] = field(default_factory=dict)
    dead: tuple[dict[str, Any], ...] = ()


# -- queries --------------------------------------------------------------------------------


def list_series(session: Session) -> list[SeriesListRow]:
    rows = session.exec(select(Series, Repository).join(Repository)).all()
    series_ids = [s.id for s, _ in rows if s.id is not None]
    members: dict[int, list[int]] = defaultdict(list)
    for member in session.exec(
        select(SeriesMember).where(col(SeriesMember.series_id).in_(series_ids))
    ).all():
        members[member.series_id].append(member.pr_number)
    states = {
        (pr.repo_id, pr.number): pr
        for pr in session.exec(
            select(PullRequest).where(
                col(PullRequest.number).in_({n for ns in members.values() for n in ns})
            )
        ).all()
    }
    latest_runs = _latest_series_runs(session, [s.key for s, _ in rows])
    result = []
    for series, repo in rows:
        numbers = members.get(series.id or -1, [])
        open_count = sum(
            1
            for n in numbers
            if (pr := states.get((series.repo_id, n))) is not None and pr.state == "open"
        )
        run = latest_runs.get((series.repo_id, series.key))
        result.append(
            SeriesListRow(
                key=series.key,
                slug=series_slug(series.key),
                repo=repo.full_name,
                pr_count=len(numbers),
                open_count=open_count,
                problems=len(series.problems),
                status="active" if open_count else "closed",
                updated_at=series.updated_at,
                latest_run_status=run.status if run else None,
            )
        )
    result.sort(key=lambda row: (row.repo, row.key))
    return result


def _latest_series_runs(
    session: Session, keys: Sequence[str]
) -> dict[tuple[int, str], IntegrationRun]:
    if not keys:
        return {}
    newest = (
        select(func.max(IntegrationRun.id))
        .where(IntegrationRun.kind == "series", col(IntegrationRun.series_key).in_(keys))
        .group_by(col(IntegrationRun.repo_id), col(IntegrationRun.series_key))
    )
    runs = session.exec(select(IntegrationRun).where(col(IntegrationRun.id).in_(newest))).all()
    return {(run.repo_id, run.series_key or ""): run for run in runs}


def series_page(session: Session, key: str, repo: str | None = None) -> SeriesPage | None:
    query = select(Series, Repository).join(Repository).where(Series.key == key)
    if repo:
        query = query.where(Repository.full_name == repo)
    found = session.exec(query).first()
    if found is None:
        return None
    series, repository = found
    members = session.exec(
        select(SeriesMember)
        .where(SeriesMember.series_id == series.id)
        .order_by(col(SeriesMember.position))
    ).all()
    numbers = [m.pr_number for m in members]
    pulls = pull_rows(session, series.repo_id, numbers)
    edges = session.exec(
        select(DependencyEdge).where(
            DependencyEdge.repo_id == series.repo_id, col(DependencyEdge.child).in_(numbers)
        )
    ).all()
    series_run = session.exec(
        select(IntegrationRun)
        .where(
            IntegrationRun.repo_id == series.repo_id,
            IntegrationRun.kind == "series",
            IntegrationRun.series_key == series.key,
        )
        .order_by(col(IntegrationRun.id).desc())
    ).first()
    steps: tuple[StepRow, ...] = ()
    tests: tuple[TestCell, ...] = ()
    if series_run is not None and series_run.id is not None:
        steps = tuple(run_steps(session, series_run.id))
        cells = _test_cells(session, [series_run])
        tests = cells.get(series_run.id, ())
    return SeriesPage(
        key=series.key,
        slug=series_slug(series.key),
        repo=repository.full_name,
        series_status="active"
        if any(row.state == "open" and not row.merged for row in pulls)
        else "closed",
        order=list(series.order),
        problems=list(series.problems),
        pulls=tuple(pulls),
        edges=tuple((e.child, e.parent, e.source) for e in edges),
        series_run=_run_summary(series_run) if series_run else None,
        series_steps=steps,
        series_tests=tests,
        conflict_matrix=series.conflict_matrix,
    )


def pull_rows(session: Session, repo_id: int, numbers: Iterable[int]) -> list[PullRow]:
    numbers = list(numbers)
    # Only the columns the table shows: a PR's body, commits and comments can be large.
    prs = {
        pr.number: pr
        for pr in session.execute(
            select_columns(
                col(PullRequest.number),
                col(PullRequest.title),
                col(PullRequest.author),
                col(PullRequest.state),
                col(PullRequest.draft),
                col(PullRequest.merged),
                col(PullRequest.head_sha),
                col(PullRequest.superseded_by),
            ).where(col(PullRequest.repo_id) == repo_id, col(PullRequest.number).in_(numbers))
        ).all()
    }
    approvals: dict[tuple[int, str], str] = {
        (a.pr_number, a.sha): a.vetter
        for a in session.execute(
            select_columns(col(Approval.pr_number), col(Approval.sha), col(Approval.vetter)).where(
                col(Approval.repo_id) == repo_id, col(Approval.pr_number).in_(numbers)
            )
        ).all()
    }
    newest = (
        select(func.max(IntegrationRun.id))
        .where(
            IntegrationRun.repo_id == repo_id,
            IntegrationRun.kind == "stack",
            col(IntegrationRun.target_pr).in_(numbers),
        )
        .group_by(col(IntegrationRun.target_pr))
    )
    runs = {
        run.target_pr: run
        for run in session.exec(
            select(IntegrationRun).where(col(IntegrationRun.id).in_(newest))
        ).all()
    }
    cells = _test_cells(session, list(runs.values()))
    rows = []
    for number in numbers:
        pr = prs.get(number)
        if pr is None:
            continue
        run = runs.get(number)
        rows.append(
            PullRow(
                number=pr.number,
                title=pr.title,
                author=pr.author,
                state=pr.state,
                draft=pr.draft,
                merged=pr.merged,
                head_sha=pr.head_sha,
                superseded_by=pr.superseded_by,
                approval=approvals.get((pr.number, pr.head_sha)),
                stack_run=_run_summary(run) if run else None,
                tests=cells.get(run.id, ()) if run and run.id is not None else (),
            )
        )
    return rows


# What a job summary needs: everything but the (large) result JSON.
_JOB_COLUMNS: tuple[Any, ...] = (
    Job.id,
    Job.test_set,
    Job.shape,
    Job.status,
    Job.counts,
    Job.kind,
    Job.tree_sha,
    Job.commit_sha,
    Job.integration_run_id,
    Job.reused_from_job_id,
    Job.node,
    Job.executor,
    Job.created_at,
    Job.started_at,
    Job.finished_at,
    Job.out_dir,
    Job.error,
)


def _test_cells(session: Session, runs: Sequence[Any]) -> dict[int, tuple[TestCell, ...]]:
    run_ids = [run.id for run in runs if run.id is not None]
    if not run_ids:
        return {}
    jobs = session.execute(
        select_columns(*_JOB_COLUMNS)
        .where(col(Job.integration_run_id).in_(run_ids))
        .order_by(col(Job.id))
    ).all()
    base_shas = {run.base_sha for run in runs if run.base_sha}
    baselines: dict[tuple[str, str, str], Any] = {}
    if base_shas:
        for job in session.execute(
            select_columns(*_JOB_COLUMNS)
            .where(col(Job.kind) == "baseline", col(Job.commit_sha).in_(base_shas))
            .order_by(col(Job.id))
        ).all():
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


def job_summary(job: Any) -> JobSummary:
    """A summary of a ``Job`` row or of a row of :data:`_JOB_COLUMNS`."""
    return JobSummary(
        id=job.id or 0,
        test_set=job.test_set,
        shape=job.shape,
        status=job.status,
        counts=dict(job.counts or {}),
        kind=job.kind,
        tree_sha=job.tree_sha,
        commit_sha=job.commit_sha,
        integration_run_id=job.integration_run_id,
        reused_from_job_id=job.reused_from_job_id,
        node=job.node,
        executor=job.executor,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        out_dir=job.out_dir,
        error=job.error,
    )


@dataclass(frozen=True)
class JobDetail:
    """A job with its per-test results and log; a reused job shows its original's."""

    summary: JobSummary
    result: dict[str, Any] | None
    tests: tuple[TestResult, ...]
    log: str

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
    job = session.get(Job, job_id)
    if job is None:
        return None
    source = job.reused_from_job_id or job_id
    tests = session.exec(
        select(TestResult).where(TestResult.job_id == source).order_by(col(TestResult.nodeid))
    ).all()
    original = session.get(Job, source)
    log = read_log(original.out_dir if original else job.out_dir)
    return JobDetail(job_summary(job), job.result, tuple(tests), log)


def _run_summary(run: IntegrationRun) -> RunSummary:
    return RunSummary(
        id=run.id or 0,
        kind=run.kind,
        status=run.status,
        series_key=run.series_key,
        target_pr=run.target_pr,
        base_ref=run.base_ref,
        base_sha=run.base_sha,
        final_tree=run.final_tree,
        final_commit=run.final_commit,
        heads=dict(run.heads or {}),
        allowlist=run.allowlist,
        error=run.error,
        created_at=run.created_at,
        finished_at=run.finished_at,
    )


def run_steps(session: Session, run_id: int) -> list[StepRow]:
    steps = session.exec(
        select(IntegrationStep)
        .where(IntegrationStep.run_id == run_id)
        .order_by(col(IntegrationStep.position))
    ).all()
    return [
        StepRow(
            position=s.position,
            pr_number=s.pr_number,
            head_sha=s.head_sha,
            outcome=s.outcome,
            tree=s.tree,
            commit=s.commit,
            conflicts=list(s.conflicts),
            conflicts_with=list(s.conflicts_with),
            resolution=s.resolution,
            skipped_reason=s.skipped_reason,
            messages=s.messages,
        )
        for s in steps
    ]


def run_detail(
    session: Session, run_id: int
) -> tuple[RunSummary, list[StepRow], tuple[TestCell, ...]] | None:
    run = session.get(IntegrationRun, run_id)
    if run is None:
        return None
    cells = _test_cells(session, [run])
    return _run_summary(run), run_steps(session, run_id), cells.get(run_id, ())


def pull_detail(session: Session, number: int, repo: str | None = None) -> dict[str, Any] | None:
    query = select(PullRequest, Repository).join(Repository).where(PullRequest.number == number)
    if repo:
        query = query.where(Repository.full_name == repo)
    found = session.exec(query).first()
    if found is None:
        return None
    pr, repository = found
    row = pull_rows(session, pr.repo_id, [number])[0]
    parents = session.exec(
        select(DependencyEdge).where(
            DependencyEdge.repo_id == pr.repo_id, DependencyEdge.child == number
        )
    ).all()
    children = session.exec(
        select(DependencyEdge).where(
            DependencyEdge.repo_id == pr.repo_id, DependencyEdge.parent == number
        )
    ).all()
    runs = session.exec(
        select(IntegrationRun)
        .where(IntegrationRun.repo_id == pr.repo_id, IntegrationRun.target_pr == number)
        .order_by(col(IntegrationRun.id).desc())
        .limit(20)
    ).all()
    series = session.exec(
        select(Series)
        .join(SeriesMember, col(SeriesMember.series_id) == col(Series.id))
        .where(Series.repo_id == pr.repo_id, SeriesMember.pr_number == number)
    ).first()
    approvals = session.exec(
        select(Approval)
        .where(Approval.repo_id == pr.repo_id, Approval.pr_number == number)
        .order_by(col(Approval.id).desc())
    ).all()
    return {
        "repo": repository.full_name,
        "pull": row,
        "body": pr.body or "",
        "base_ref": pr.base_ref,
        "head_ref": pr.head_ref,
        "parents": sorted({(e.parent, e.source) for e in parents}),
        "children": sorted({(e.child, e.source) for e in children}),
        "runs": [_run_summary(run) for run in runs],
        "series": series,
        "approvals": [
            {"sha": a.sha, "vetter": a.vetter, "kind": a.kind, "created_at": _iso(a.created_at)}
            for a in approvals
        ],
    }


def list_jobs(session: Session, *, limit: int = 200) -> dict[str, list[JobSummary]]:
    jobs = session.exec(select(Job).order_by(col(Job.id).desc()).limit(limit)).all()
    groups: dict[str, list[JobSummary]] = {"queued": [], "running": [], "finished": []}
    for job in jobs:
        summary = job_summary(job)
        if job.status in FINISHED_JOB_STATES:
            groups["finished"].append(summary)
        elif job.status == "running":
            groups["running"].append(summary)
        else:
            groups["queued"].append(summary)
    return groups


def task_counts(session: Session) -> TaskCounts:
    counts = {
        status: count
        for status, count in session.exec(
            select(Task.status, func.count()).group_by(col(Task.status))
        ).all()
    }
    dead = session.exec(
        select(Task).where(Task.status == "dead").order_by(col(Task.id).desc()).limit(20)
    ).all()
    return TaskCounts(
        by_status=counts,
        dead=tuple(
            {"id": t.id, "kind": t.kind, "attempts": t.attempts, "error": t.last_error or ""}
            for t in dead
        ),
    )


def change_token(session: Session) -> str:
    """Changes whenever anything the dashboard shows changes (cheap: a few max() queries)."""
    parts = [
        session.exec(select(func.max(Task.updated_at))).one(),
        session.exec(select(func.max(Job.id))).one(),
        session.exec(select(func.max(Job.finished_at))).one(),
        session.exec(select(func.max(Job.started_at))).one(),
        session.exec(select(func.max(IntegrationRun.id))).one(),
        session.exec(select(func.max(Series.updated_at))).one(),
        session.exec(select(func.max(PullRequest.synced_at))).one(),
    ]
    return "|".join(str(part) for part in parts)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _fields_json(row: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A frozen dataclass's fields as JSON (datetimes in ISO 8601), plus ``extra``."""
    data = {
        f.name: _iso(value) if isinstance(value := getattr(row, f.name), datetime) else value
        for f in fields(row)
    }
    return {**data, **(extra or {})}
