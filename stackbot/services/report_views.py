"""Build a PR's :class:`~stackbot.domain.report.PrReportView` from what the database holds.

This is the one place that reads stored integration runs, jobs and approvals for reports;
rendering (pure) and publishing (GitHub writes) take the view from here.

Which data a view shows: the approval of the PR's current head (else the latest earlier one,
to say it does not carry over); the stored dependency edges; the newest stack run of the PR that
used its current head, and the tests of that run; the newest series run of its series; and for
each test job the newest baseline job on the run's base commit with the same test set and shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlmodel import Session, col, select

from gpu_jobs.testsets import own_test_set_pr
from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db import integration_store, jobs_store
from stackbot.db.models import (
    DependencyEdge,
    IntegrationRun,
    IntegrationStep,
    Job,
    PullRequest,
    TestFinding,
)
from stackbot.db.models.jobs import FINISHED_STATES
from stackbot.domain.comparison import Counts, TestOutcomes, compare_with_main
from stackbot.domain.integration import RunKind
from stackbot.domain.report_view import (
    AllowlistView,
    ApprovalView,
    FindingView,
    IntegrationView,
    PrRef,
    PrReportView,
    ReusedFrom,
    StackView,
    StepView,
    TestRow,
)
from stackbot.domain.retries import Attempt, retry_chain
from stackbot.services import read_batch
from stackbot.services.own_tests import own_tests_views
from stackbot.services.read_batch import baselines_on, batch, memo, memo_table
from stackbot.services.test_plan import merged_order


@dataclass(frozen=True)
class _RepoGraph:
    """What every view of one repository reads: its edges and PRs, loaded once per batch."""

    edges: list[DependencyEdge]
    rows: dict[int, PullRequest]


def build_report_views(
    session: Session, settings: Settings, *, repo: str, numbers: Sequence[int]
) -> list[PrReportView]:
    repository = store.get_repository(session, full_name=repo)
    if repository is None or repository.id is None:
        return []
    graph = _RepoGraph(
        store.list_edges(session, repo_id=repository.id),
        {row.number: row for row in store.list_pulls(session, repo_id=repository.id)},
    )
    with batch(session):
        _preload(session, repository.id, [n for n in numbers if n in graph.rows], graph)
        views = [
            build_report_view(session, settings, repo=repo, number=n, graph=graph) for n in numbers
        ]
    return [view for view in views if view is not None]


def _preload(session: Session, repo_id: int, numbers: list[int], graph: _RepoGraph) -> None:
    """Fill the batch's memo for ``numbers`` with a fixed number of queries: their series keys,
    approvals, stack runs (the newest runs of their heads), the jobs and steps of those runs
    and of the series runs, main's baselines and every shown job's per-test results. What is
    not found here (a stack run older than the window) is read per PR as before."""
    table = memo_table(session)
    assert table is not None  # called inside batch()
    keys = store.series_keys_of_prs(session, repo_id=repo_id, numbers=numbers)
    for number, found in keys.items():
        table[("series keys", repo_id, number)] = found
    for number, approvals in store.approvals_of_prs(
        session, repo_id=repo_id, numbers=numbers
    ).items():
        table[("approvals", repo_id, number)] = approvals
    runs: list[IntegrationRun] = []
    window = integration_store.newest_runs_of_targets(
        session, repo_id=repo_id, kind=RunKind.STACK, targets=numbers, limit=20 * len(numbers)
    )
    for number in numbers:
        head = graph.rows[number].head_sha
        match = next(
            (r for r in window if r.target_pr == number and r.heads.get(str(number)) == head),
            None,
        )
        if match is not None:
            table[("stack run", repo_id, number, head)] = match
            runs.append(match)
    for key in sorted({k[0] for k in keys.values() if k}):
        series_run = _latest_run(session, repo_id, kind=RunKind.SERIES, series_key=key)
        table[("series run", repo_id, key)] = series_run
        if series_run is not None:
            runs.append(series_run)
    run_ids = sorted({r.id for r in runs if r.id is not None})
    jobs_by_run: dict[int, list[Job]] = {run_id: [] for run_id in run_ids}
    for job in sorted(jobs_store.jobs_of_runs(session, run_ids=run_ids), key=lambda j: j.id or 0):
        if job.integration_run_id in jobs_by_run:
            jobs_by_run[job.integration_run_id].append(job)
    for run_id, jobs in jobs_by_run.items():
        table[("jobs", run_id)] = jobs
    for run_id, steps in integration_store.steps_of_runs(session, run_ids=run_ids).items():
        table[("steps", run_id)] = steps
    shown = [job for jobs in jobs_by_run.values() for job in jobs]
    for run in runs:
        baselines = memo(
            session,
            ("baselines", run.repo_id, run.base_sha),
            lambda run=run: _baselines(session, run),  # type: ignore[misc]
        )
        shown.extend(baselines.values())
    read_batch.prefetch_results(session, shown)


def build_report_view(
    session: Session,
    settings: Settings,
    *,
    repo: str,
    number: int,
    graph: _RepoGraph | None = None,
) -> PrReportView | None:
    repository = memo(
        session, ("repository", repo), lambda: store.get_repository(session, full_name=repo)
    )
    if repository is None or repository.id is None:
        return None
    repo_id = repository.id
    if graph is None:
        graph = _RepoGraph(
            store.list_edges(session, repo_id=repo_id),
            {row.number: row for row in store.list_pulls(session, repo_id=repo_id)},
        )
    pr = graph.rows.get(number)
    if pr is None:
        return None
    base_url = settings.public_url.rstrip("/")
    keys = memo(
        session,
        ("series keys", repo_id, number),
        lambda: store.series_keys_of(session, repo_id=repo_id, number=number),
    )
    series_key = keys[0] if keys else None
    stack_run = memo(
        session,
        ("stack run", repo_id, number, pr.head_sha),
        lambda: _latest_run(
            session, repo_id, kind=RunKind.STACK, target_pr=number, head=(number, pr.head_sha)
        ),
    )
    series_run = (
        memo(
            session,
            ("series run", repo_id, series_key),
            lambda: _latest_run(session, repo_id, kind=RunKind.SERIES, series_key=series_key),
        )
        if series_key
        else None
    )
    generated = set(settings.generated_files)
    tests, main_sha = _test_rows(session, stack_run, base_url, number) if stack_run else ((), None)
    series_tests, series_main = (
        _test_rows(session, series_run, base_url, number) if series_run else ((), None)
    )
    return PrReportView(
        repo=repo,
        pr=_ref(pr),
        head_sha=pr.head_sha,
        approval=_approval(session, repo_id, pr),
        stack=_stack(session, repo_id, number, series_key, graph),
        stack_integration=_integration(session, stack_run, generated, base_url),
        series_integration=_integration(session, series_run, generated, base_url),
        allowlist=_allowlist(stack_run or series_run, settings),
        tests=tests,
        tested_commit=stack_run.final_commit if stack_run and tests else None,
        main_sha=main_sha or series_main,
        series_tests=series_tests,
        series_tested_commit=series_run.final_commit if series_run and series_tests else None,
        findings=(
            memo(session, ("findings", series_run.id), lambda: series_findings(session, series_run))
            if series_run
            else ()
        ),
        series_run_id=series_run.id if series_run else None,
        url=f"{base_url}/pulls/{number}",
        own_tests=own_tests_views(
            session,
            number,
            [
                (stack_run, "the stack integration"),
                (series_run, f"the series {series_key} integration"),
            ],
        ),
    )


def _ref(pr: PullRequest) -> PrRef:
    state = "merged" if pr.merged else pr.state
    return PrRef(pr.number, pr.title, state, pr.draft, pr.superseded_by)


def _approval(session: Session, repo_id: int, pr: PullRequest) -> ApprovalView:
    approvals = memo(
        session,
        ("approvals", repo_id, pr.number),
        lambda: store.approvals_of(session, repo_id=repo_id, pr_number=pr.number),
    )
    current = next((a for a in approvals if a.sha == pr.head_sha), None)
    if current is not None:
        if current.kind == "trusted":
            return ApprovalView("trusted", by=current.vetter)
        return ApprovalView("approved", by=current.vetter)
    earlier = approvals[-1].sha if approvals else None
    return ApprovalView("waiting", earlier_sha=earlier)


def _stack(
    session: Session, repo_id: int, number: int, series_key: str | None, graph: _RepoGraph
) -> StackView:
    edges, rows = graph.edges, graph.rows
    parents = sorted({e.parent for e in edges if e.child == number})
    children = sorted({e.child for e in edges if e.parent == number})

    def refs(numbers: list[int]) -> tuple[PrRef, ...]:
        return tuple(_ref(rows[n]) if n in rows else PrRef(n, state="unknown") for n in numbers)

    problems: list[str] = []
    every_series = memo(
        session, ("series", repo_id), lambda: store.list_series(session, repo_id=repo_id)
    )
    for series in every_series:
        if series.key == series_key:
            problems = [p["detail"] for p in series.problems if number in p.get("prs", ())]
    return StackView(series_key, refs(parents), refs(children), tuple(problems))


def _latest_run(
    session: Session,
    repo_id: int,
    *,
    kind: RunKind,
    target_pr: int | None = None,
    series_key: str | None = None,
    head: tuple[int, str] | None = None,
) -> IntegrationRun | None:
    for run in integration_store.newest_runs(
        session, repo_id=repo_id, kind=kind, target_pr=target_pr, series_key=series_key, limit=20
    ):
        # A stack run of an older head says nothing about the current one.
        if head is None or run.heads.get(str(head[0])) == head[1]:
            return run
    return None


def series_findings(session: Session, run: IntegrationRun) -> tuple[FindingView, ...]:
    """The series run's failing tests as the test plan classed them, with the PR at each end of
    a bisection's last interval (two queries whatever the number of findings)."""
    assert run.id is not None
    rows = jobs_store.findings_of_run(session, run_id=run.id)
    if not rows:
        return ()
    order = merged_order(integration_store.steps_of(session, run_id=run.id))
    ids = {int(j) for row in rows for j in (row.evidence or {}).get("jobs") or []}
    jobs = session.exec(select(Job).where(col(Job.id).in_(sorted(ids)))).all() if ids else []
    roles = {job.id: _role(job) for job in jobs if job.id is not None}
    return tuple(finding_view(row, order, roles) for row in rows)


def _role(job: Job) -> str:
    if job.purpose == "confirm":
        return "confirming rerun of the series tree"
    if job.purpose == "bisect":
        n = job.step_position or 0
        return f"bisection: the first {n} PR{'' if n == 1 else 's'}"
    if job.purpose == "retry":
        excluded = ", ".join(job.excluded_nodes) or "none"
        return f"retried on another node (excluded: {excluded})"
    if job.purpose == "baseline":
        return "main"
    return "series tree"


def finding_view(
    row: TestFinding, order: Sequence[int], roles: dict[int, str] | None = None
) -> FindingView:
    evidence = row.evidence or {}
    passes_at, fails_at = _int(evidence.get("passes_at")), _int(evidence.get("fails_at"))

    def pr_at(position: int | None) -> int | None:
        if position is None or position < 1 or position > len(order):
            return None
        return order[position - 1]

    def ids(key: str) -> tuple[int, ...]:
        value = evidence.get(key)
        return tuple(int(j) for j in value) if isinstance(value, list) else ()

    return FindingView(
        test_set=row.test_set,
        shape=row.shape,
        nodeid=row.nodeid,
        failure_class=row.failure_class,
        pr=row.pr_number,
        jobs=ids("jobs"),
        passes_at=passes_at,
        fails_at=fails_at,
        passes_pr=pr_at(passes_at),
        fails_pr=pr_at(fails_at),
        note=str(evidence["note"]) if evidence.get("note") else None,
        failed_in=ids("failed_in"),
        passed_in=ids("passed_in"),
        roles=tuple((j, (roles or {}).get(j, "job")) for j in ids("jobs")),
    )


def _integration(
    session: Session, run: IntegrationRun | None, generated: set[str], base_url: str
) -> IntegrationView | None:
    if run is None:
        return None
    key = ("integration view", run.id, frozenset(generated), base_url)
    return memo(session, key, lambda: _integration_view(session, run, generated, base_url))


def _integration_view(
    session: Session, run: IntegrationRun, generated: set[str], base_url: str
) -> IntegrationView:
    assert run.id is not None
    steps = read_batch.steps_of(session, run.id)
    return IntegrationView(
        kind="series" if run.kind == RunKind.SERIES else "stack",
        status=run.status,
        base_ref=run.base_ref,
        base_sha=run.base_sha,
        commit=run.final_commit,
        steps=tuple(_step(step, generated) for step in steps),
        error=run.error,
        url=f"{base_url}/runs/{run.id}",
    )


def _step(step: IntegrationStep, generated: set[str]) -> StepView:
    paths = [str(c.get("path", "")) for c in step.conflicts]
    return StepView(
        pr=step.pr_number,
        outcome=step.outcome,
        conflicting_paths=tuple(p for p in paths if p not in generated),
        conflicts_with=tuple(step.conflicts_with),
        resolved_files=tuple(p for p in paths if p in generated),
        resolution=step.resolution,
        skipped_reason=step.skipped_reason,
    )


def _allowlist(run: IntegrationRun | None, settings: Settings) -> AllowlistView | None:
    """Reads the run's allowlist summary, whichever of the integration's shapes it was
    stored in (``total``/``base_total``/``new`` or ``total_after``/``total_before``/``new_reads``)."""
    data = run.allowlist if run is not None else None
    if not data:
        return None
    path = str(data.get("path") or (settings.generated_files or ["allowlist"])[0])
    return AllowlistView(
        path=path,
        total_before=_int(data.get("total_before", data.get("base_total"))),
        total_after=_int(data.get("total_after", data.get("total"))),
        new_reads=_texts(data.get("new_reads", data.get("new"))),
        stale_dropped=_texts(data.get("stale")),
        unparsed=_texts(data.get("unparsed")),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _texts(value: Any) -> tuple[str, ...]:
    if isinstance(value, dict):  # {path: reason}
        return tuple(sorted(str(key) for key in value))
    if not isinstance(value, list):
        return ()
    return tuple(_entry_text(item) for item in value)


def _entry_text(item: Any) -> str:
    if isinstance(item, dict):  # a tally: {"path", "entry", "count"} or similar
        text = ":".join(str(item[k]) for k in ("path", "entry") if k in item) or str(item)
        count = item.get("count")
        return f"{text} ×{count}" if isinstance(count, int) and count > 1 else text
    return str(item)


# -- tests ------------------------------------------------------------------------------------


def _test_rows(
    session: Session, run: IntegrationRun, base_url: str, number: int | None = None
) -> tuple[tuple[TestRow, ...], str | None]:
    assert run.id is not None
    run_id = run.id
    jobs = read_batch.jobs_of_run(session, run_id)
    common, own_by_pr = memo(session, ("newest jobs", run_id), lambda: _newest_jobs(jobs))
    # a PR's own test files: on that PR only
    newest = {**common, **(own_by_pr.get(number, {}) if number is not None else {})}
    baselines = memo(
        session, ("baselines", run.repo_id, run.base_sha), lambda: _baselines(session, run)
    )
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
    )
