"""Build a PR's :class:`~stackbot.domain.report_view.PrReportView` from what the database holds.

This is the one place that reads stored integration runs, jobs and approvals for reports (a
run's test rows are :mod:`stackbot.services.report_rows`', its findings
:mod:`stackbot.services.report_findings`'); rendering (pure) and publishing (GitHub writes)
take the view from here.

Which data a view shows: the approval of the PR's current head (else the latest earlier one,
to say it does not carry over); the stored dependency edges; the newest stack run of the PR that
used its current head, and the tests of that run; the newest series run of its series; and for
each test job the newest baseline job on the run's base commit with the same test set and shape.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db import github_store as store
from stackbot.db import integration_store, jobs_store
from stackbot.db.models import (
    IntegrationRun,
    IntegrationStep,
    Job,
)
from stackbot.domain.integration import RunKind
from stackbot.domain.report_view import (
    AllowlistView,
    ApprovalView,
    IntegrationView,
    PrRef,
    PrReportView,
    StackView,
    StepView,
)
from stackbot.services import read_batch
from stackbot.services.own_tests import own_tests_views
from stackbot.services.read_batch import batch, memo, memo_table
from stackbot.services.report_findings import series_findings
from stackbot.services.report_rows import run_baselines, run_test_rows


@dataclass(frozen=True)
class _RepoGraph:
    """What every view of one repository reads: its edges and PRs, loaded once per batch."""

    edges: Sequence[Any]  # rows of child and parent (store.edge_pairs)
    rows: dict[int, Any]  # PR rows of store.pull_heads (number, title, state, head_sha, ...)
    # Each PR's parents and children, indexed once: a view per PR of a 500-PR series must
    # not scan every edge twice (that was a quarter of the series page's time).
    parents: dict[int, set[int]] = field(init=False, default_factory=dict)
    children: dict[int, set[int]] = field(init=False, default_factory=dict)
    # Every PR's ancestors, computed once for the graph (:meth:`ancestors`).
    _ancestors: dict[int, tuple[int, ...]] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        parents: dict[int, set[int]] = defaultdict(set)
        children: dict[int, set[int]] = defaultdict(set)
        for edge in self.edges:
            parents[edge.child].add(edge.parent)
            children[edge.parent].add(edge.child)
        object.__setattr__(self, "parents", dict(parents))
        object.__setattr__(self, "children", dict(children))

    def ancestors(self, number: int) -> tuple[int, ...]:
        """Every PR ``number`` depends on, directly or not. Walked once per PR, the ancestors
        of a 500-PR chain were a fifth of its series page's time; here an acyclic graph's are
        each the union of their parents' (in topological order), and a graph with a cycle is
        walked PR by PR (:func:`_ancestors`)."""
        if self._ancestors is None:
            pairs = frozenset((edge.child, edge.parent) for edge in self.edges)
            object.__setattr__(self, "_ancestors", _graph_ancestors(pairs))
        assert self._ancestors is not None
        found = self._ancestors.get(number)
        return found if found is not None else _ancestors(self.parents, number)


def build_report_views(
    session: Session,
    settings: Settings,
    *,
    repo: str,
    numbers: Sequence[int],
    shared: read_batch.SharedMemo | None = None,
) -> list[PrReportView]:
    """The views of many PRs of one repository, reading what they share once (a batch; with
    ``shared``, what the runs' tables give is kept for later batches: :mod:`read_batch`)."""
    with batch(session, shared):
        repository = store.get_repository(session, full_name=repo)
        if repository is None or repository.id is None:
            return []
        graph = _RepoGraph(
            store.edge_pairs(session, repo_id=repository.id),
            {row.number: row for row in store.pull_heads(session, repo_id=repository.id)},
        )
        _preload(session, repository.id, [n for n in numbers if n in graph.rows], graph)
        views = [
            build_report_view(session, settings, repo=repo, number=n, graph=graph) for n in numbers
        ]
    return [view for view in views if view is not None]


def _preload(session: Session, repo_id: int, numbers: list[int], graph: _RepoGraph) -> None:
    """Fill the batch's memo for ``numbers`` with a fixed number of queries: their series keys,
    approvals, stack runs (the newest runs of their heads), the jobs and steps of those runs
    and of the series runs, main's baselines and every shown job's per-test results. What is
    not found here (a stack run older than the window) is read per PR as before; what a shared
    memo already holds is not read again."""
    table = memo_table(session)
    assert table is not None  # called inside batch()
    keys = store.series_keys_of_prs(session, repo_id=repo_id, numbers=numbers)
    for number, found in keys.items():
        table[("series keys", repo_id, number)] = found
    for number, approvals in store.approval_rows_of_prs(
        session, repo_id=repo_id, numbers=numbers
    ).items():
        table[("approvals", repo_id, number)] = approvals
    stacks = memo_table(session, "stack run")
    assert stacks is not None
    runs: list[IntegrationRun] = []
    missing: list[int] = []
    for number in numbers:
        stack_key = ("stack run", repo_id, number, graph.rows[number].head_sha)
        if stack_key in stacks:
            if stacks[stack_key] is not None:
                runs.append(stacks[stack_key])
        else:
            missing.append(number)
    window = integration_store.newest_runs_of_targets(
        session, repo_id=repo_id, kind=RunKind.STACK, targets=missing, limit=20 * len(missing)
    )
    by_target: dict[int | None, list[IntegrationRun]] = defaultdict(list)
    for found_run in window:
        by_target[found_run.target_pr].append(found_run)
    for number in missing:
        head = graph.rows[number].head_sha
        match = next(
            (r for r in by_target.get(number, ()) if r.heads.get(str(number)) == head),
            None,
        )
        if match is not None:
            stacks[("stack run", repo_id, number, head)] = match
            runs.append(match)
    for series_key in sorted({k[0] for k in keys.values() if k}):
        series_run = _series_run(session, repo_id, series_key)
        if series_run is not None:
            runs.append(series_run)
    kept = memo_table(session, "jobs")
    assert kept is not None
    run_ids = sorted({r.id for r in runs if r.id is not None and ("jobs", r.id) not in kept})
    jobs_by_run: dict[int, list[Job]] = {run_id: [] for run_id in run_ids}
    for job in sorted(jobs_store.jobs_of_runs(session, run_ids=run_ids), key=lambda j: j.id or 0):
        if job.integration_run_id in jobs_by_run:
            jobs_by_run[job.integration_run_id].append(job)
    for run_id, jobs in jobs_by_run.items():
        kept[("jobs", run_id)] = jobs
    step_ids = sorted({r.id for r in runs if r.id is not None and ("steps", r.id) not in kept})
    for run_id, steps in integration_store.steps_of_runs(session, run_ids=step_ids).items():
        kept[("steps", run_id)] = steps
    shown = [job for jobs in jobs_by_run.values() for job in jobs]
    for run in runs:
        shown.extend(run_baselines(session, run).values())
    read_batch.prefetch_results(session, shown)


def build_report_view(
    session: Session,
    settings: Settings,
    *,
    repo: str,
    number: int,
    graph: _RepoGraph | None = None,
) -> PrReportView | None:
    """One PR's report view from the stored state (None for a PR or repository not stored)."""
    repository = memo(
        session, ("repository", repo), lambda: store.get_repository(session, full_name=repo)
    )
    if repository is None or repository.id is None:
        return None
    repo_id = repository.id
    if graph is None:
        graph = _RepoGraph(
            store.edge_pairs(session, repo_id=repo_id),
            {row.number: row for row in store.pull_heads(session, repo_id=repo_id)},
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
    ref = _ref(pr)
    approval = _approval(session, repo_id, pr)
    stack = _stack(session, repo_id, number, series_key, graph)
    # Everything else the view holds is derived from the runs' tables (and this key): kept
    # with them while they stand still (read_batch.SharedMemo), so a write to one PR, an
    # approval or an edge builds again only the views whose own inputs changed.
    key = (
        "report view",
        repo,
        ref,
        pr.head_sha,
        approval,
        stack,
        base_url,
        tuple(settings.generated_files),
    )
    return memo(
        session,
        key,
        lambda: _report_view(
            session, settings, repo, number, pr.head_sha, ref, approval, stack, base_url
        ),
    )


def _report_view(
    session: Session,
    settings: Settings,
    repo: str,
    number: int,
    head_sha: str,
    ref: PrRef,
    approval: ApprovalView,
    stack: StackView,
    base_url: str,
) -> PrReportView:
    repository = memo(
        session, ("repository", repo), lambda: store.get_repository(session, full_name=repo)
    )
    assert repository is not None and repository.id is not None
    repo_id = repository.id
    series_key = stack.series_key
    stack_run = memo(
        session,
        ("stack run", repo_id, number, head_sha),
        lambda: _latest_run(
            session, repo_id, kind=RunKind.STACK, target_pr=number, head=(number, head_sha)
        ),
    )
    series_run = _series_run(session, repo_id, series_key) if series_key else None
    generated = set(settings.generated_files)
    tests, main_sha = (
        run_test_rows(session, stack_run, base_url, number) if stack_run else ((), None)
    )
    series_tests, series_main = (
        run_test_rows(session, series_run, base_url, number) if series_run else ((), None)
    )
    return PrReportView(
        repo=repo,
        pr=ref,
        head_sha=head_sha,
        approval=approval,
        stack=stack,
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
        dashboard=base_url,
        own_tests=own_tests_views(
            session,
            number,
            [
                (stack_run, "the stack integration"),
                (series_run, f"the series {series_key} integration"),
            ],
        ),
    )


def _ref(pr: Any) -> PrRef:
    state = "merged" if pr.merged else pr.state
    return PrRef(pr.number, pr.title, state, pr.draft, pr.superseded_by)


def _approval(session: Session, repo_id: int, pr: Any) -> ApprovalView:
    approvals = memo(
        session,
        ("approvals", repo_id, pr.number),
        lambda: store.approvals_of(session, repo_id=repo_id, pr_number=pr.number),
    )
    current = next((a for a in approvals if a.sha == pr.head_sha), None)
    if current is not None:
        if current.kind == "trusted":
            return ApprovalView("trusted", by=current.vetter)
        return ApprovalView("approved", by=current.vetter, carried_from=current.carried_from)
    earlier = approvals[-1].sha if approvals else None
    return ApprovalView("waiting", earlier_sha=earlier)


def _stack(
    session: Session, repo_id: int, number: int, series_key: str | None, graph: _RepoGraph
) -> StackView:
    rows = graph.rows
    parents = sorted(graph.parents.get(number, ()))
    children = sorted(graph.children.get(number, ()))

    def refs(numbers: list[int]) -> tuple[PrRef, ...]:
        return tuple(_ref(rows[n]) if n in rows else PrRef(n, state="unknown") for n in numbers)

    problems = memo(
        session, ("problems", repo_id, series_key), lambda: _problems(session, repo_id, series_key)
    )
    return StackView(
        series_key,
        refs(parents),
        refs(children),
        problems.get(number, ()),
        graph.ancestors(number),
    )


def _problems(session: Session, repo_id: int, series_key: str | None) -> dict[int, tuple[str, ...]]:
    """The series' dependency problems by PR: the words of each problem that names the PR."""
    found: dict[int, list[str]] = defaultdict(list)
    for series in store.list_series(session, repo_id=repo_id):
        if series.key == series_key:
            found.clear()
            for problem in series.problems:
                for number in dict.fromkeys(problem.get("prs", ())):
                    found[number].append(problem["detail"])
    return {number: tuple(details) for number, details in found.items()}


@lru_cache(maxsize=8)
def _graph_ancestors(pairs: frozenset[tuple[int, int]]) -> dict[int, tuple[int, ...]]:
    """:func:`_all_ancestors` of the graph of these (child, parent) edges, kept for the next
    build: a 500-PR chain's ancestors are 125,000 numbers, and its edges change rarely.
    (Read only: the dict is shared.)"""
    parents: dict[int, set[int]] = defaultdict(set)
    children: dict[int, set[int]] = defaultdict(set)
    for child, parent in pairs:
        parents[child].add(parent)
        children[parent].add(child)
    return _all_ancestors(dict(parents), dict(children))


def _all_ancestors(
    parents: dict[int, set[int]], children: dict[int, set[int]]
) -> dict[int, tuple[int, ...]]:
    """Every PR's ancestors in a graph without a cycle (Kahn's order: a PR after all its
    parents); an empty dict when the graph has a cycle."""
    nodes = set(parents) | set(children)
    waiting = {n: len(parents.get(n, ())) for n in nodes}
    ready = [n for n, count in waiting.items() if count == 0]
    sets: dict[int, frozenset[int]] = {}
    while ready:
        n = ready.pop()
        above = parents.get(n, ())
        sets[n] = frozenset(above).union(*(sets[p] for p in above))
        for child in children.get(n, ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if len(sets) < len(nodes):
        return {}  # a cycle: walked PR by PR
    return {n: tuple(sorted(found)) for n, found in sets.items()}


def _ancestors(parents: dict[int, set[int]], number: int) -> tuple[int, ...]:
    """Every PR ``number`` depends on, directly or not (a cycle is walked once)."""
    seen: set[int] = set()
    todo = [number]
    while todo:
        for parent in parents.get(todo.pop(), ()):
            if parent not in seen and parent != number:
                seen.add(parent)
                todo.append(parent)
    return tuple(sorted(seen))


def _series_run(session: Session, repo_id: int, key: str) -> IntegrationRun | None:
    return memo(
        session,
        ("series run", repo_id, key),
        lambda: _latest_run(session, repo_id, kind=RunKind.SERIES, series_key=key),
    )


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
