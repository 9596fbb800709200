"""The pull request page, and the table of PRs (with their stack runs and test cells) that it
shares with the series page."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db import dashboard_store, github_store
from stackbot.domain.report_view import PrReportView
from stackbot.domain.verdict import Verdict, decide, row_state
from stackbot.services.read_batch import memo
from stackbot.services.report_views import build_report_views
from stackbot.web.readmodel.cells import cells_of_runs, own_cells_for
from stackbot.web.readmodel.runs import run_steps
from stackbot.web.readmodel.summaries import RunSummary, TestCell, iso, run_summary

T = TypeVar("T")


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
    # The PR's verdict, decided by stackbot.domain.verdict from the same view its comment and
    # check runs are rendered from (None only for a PR whose repository has no stored graph).
    verdict: Verdict | None = None

    @property
    def tests_by_label(self) -> dict[str, TestCell]:
        """The test cells by label (the first of a label, as the series grid shows them)."""
        found: dict[str, TestCell] = {}
        for cell in self.tests:
            found.setdefault(cell.label, cell)
        return found

    @property
    def display_state(self) -> str:
        if self.merged:
            return "merged"
        if self.superseded_by:
            return "superseded"
        if self.state != "open":
            return "closed"
        if self.verdict is not None:
            return self.verdict.kind.slug
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
            "verdict": self.verdict.to_json() if self.verdict else None,
        }


def pull_rows(
    session: Session, repo_id: int, numbers: Iterable[int], settings: Settings | None = None
) -> list[PullRow]:
    """The rows of these PRs in the order given (PRs not stored are left out), each with the
    verdict its comment shows (the report views are built per PR: a few queries each)."""
    numbers = list(numbers)
    views = _report_views(session, repo_id, numbers, settings)
    prs = {
        pr.number: pr
        for pr in dashboard_store.pull_table_rows(session, repo_id=repo_id, numbers=numbers)
    }
    approvals: dict[tuple[int, str], str] = {
        (a.pr_number, a.sha): a.vetter
        for a in dashboard_store.approval_vetters(session, repo_id=repo_id, pr_numbers=numbers)
    }
    runs = memo(
        session,
        ("latest stack runs", repo_id, tuple(numbers)),
        lambda: {
            run.target_pr: run
            for run in dashboard_store.latest_stack_runs(
                session, repo_id=repo_id, target_prs=numbers
            )
        },
    )
    run_ids = tuple(sorted(run.id for run in runs.values() if run.id is not None))
    cells_by_run = memo(
        session, ("cells", run_ids), lambda: cells_of_runs(session, list(runs.values()))
    )
    rows = []
    for number in numbers:
        pr = prs.get(number)
        if pr is None:
            continue
        run = runs.get(number)
        view = views.get(number)
        cells = (
            _row_cells(session, run.id, cells_by_run.get(run.id, ()), number, view)
            if run and run.id is not None
            else ()
        )
        fields = (
            pr.number,
            pr.title,
            pr.author,
            pr.state,
            pr.draft,
            pr.merged,
            pr.head_sha,
            pr.superseded_by,
            approvals.get((pr.number, pr.head_sha)),
        )
        summary = _summary(session, run) if run else None
        verdict = _decided(view) if view is not None else None
        rows.append(
            memo(
                session,
                ("pull row", fields, Same(summary), Same(cells), Same(verdict)),
                # fields are PullRow's first fields, in its order
                partial(PullRow, *fields, stack_run=summary, tests=cells, verdict=verdict),
            )
        )
    return rows


class Same:
    """A value in a memo key that equals only itself: a row's parts kept across builds (run
    summaries, cells, verdicts) are the same objects while their inputs stand still, and
    comparing them by content would cost what keeping the row saves. The key holds the value,
    so no other object can take its identity while the key is kept."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Same) and other.value is self.value


def _decided(view: PrReportView) -> Verdict:
    """``decide(view)``, once per view: a view kept across builds (its inputs unchanged:
    report_views.build_report_view) keeps its verdict."""
    return _once(view, "_stackbot_verdict", decide)


def _once(view: PrReportView, name: str, compute: Callable[[PrReportView], T]) -> T:
    """``compute(view)``, kept on the view under ``name`` (views are frozen and kept across
    builds while their inputs stand still, so what is derived from them is too)."""
    found: T | None = view.__dict__.get(name)
    if found is None:
        found = compute(view)
        object.__setattr__(view, name, found)
    return found


def _summary(session: Session, run: Any) -> RunSummary:
    """The run's summary, one per run while the runs' tables stand still (a shared memo keeps
    it, with the key its page pieces are kept under: stackbot/web/fragments.py)."""
    return memo(session, ("run summary", run.id), lambda: run_summary(run))


def _report_views(
    session: Session, repo_id: int, numbers: list[int], settings: Settings | None
) -> dict[int, PrReportView]:
    repository = dashboard_store.repository_by_id(session, repo_id=repo_id)
    if repository is None:
        return {}
    # Links relative to the dashboard itself (the comments' links use public_url).
    local = (settings or Settings.model_construct()).model_copy(update={"public_url": ""})
    views = build_report_views(session, local, repo=repository.full_name, numbers=numbers)
    return {view.pr.number: view for view in views}


def _row_cells(
    session: Session,
    run_id: int,
    run_cells: tuple[TestCell, ...],
    number: int,
    view: PrReportView | None,
) -> tuple[TestCell, ...]:
    """The PR's cells of its stack run, each coloured as the verdict colours its test row
    (failures main has too: amber). Derived from the runs' tables and the rows' states only, so
    kept with the runs' tables under those states: the same cell objects build after build,
    whose keys as page pieces are computed once (stackbot/web/fragments.py)."""
    states = _row_states(view) if view is not None else None
    return memo(
        session,
        ("row cells", run_id, number, states),
        lambda: _with_row_states(
            own_cells_for(session, run_id, run_cells, [number]),
            dict(states) if states is not None else None,
        ),
    )


def _row_states(view: PrReportView) -> tuple[tuple[str, str], ...]:
    """Each test row's label and state, once per view (as its verdict: :func:`_decided`)."""
    return _once(
        view,
        "_stackbot_row_states",
        lambda v: tuple({row.label: row_state(row) for row in v.tests}.items()),
    )


def _with_row_states(
    cells: tuple[TestCell, ...], states: dict[str, str] | None
) -> tuple[TestCell, ...]:
    if states is None:
        return cells
    return tuple(
        replace(cell, verdict_state=states[cell.label]) if cell.label in states else cell
        for cell in cells
    )


def pull_detail(
    session: Session, number: int, repo: str | None = None, settings: Settings | None = None
) -> dict[str, Any] | None:
    found = dashboard_store.find_pull(session, number=number, repo=repo)
    if found is None:
        return None
    pr, repository = found
    repo_id = pr.repo_id
    row = pull_rows(session, repo_id, [number], settings)[0]
    parents = dashboard_store.parent_edges(session, repo_id=repo_id, number=number)
    children = dashboard_store.child_edges(session, repo_id=repo_id, number=number)
    runs = dashboard_store.runs_targeting(session, repo_id=repo_id, pr_number=number, limit=20)
    series = dashboard_store.series_of_pull(session, repo_id=repo_id, number=number)
    # Newest first.
    approvals = github_store.approvals_of(session, repo_id=repo_id, pr_number=number)[::-1]
    # The latest series run's tests when its tree holds this PR (series-first testing tests
    # the series tree; the PR's own stack may have run nothing).
    series_run = (
        dashboard_store.latest_series_run(session, repo_id=repo_id, series_key=series.key)
        if series is not None
        else None
    )
    series_tests: tuple[TestCell, ...] = ()
    series_step: str | None = None  # what the series run did with this PR, in words
    if series_run is not None and series_run.id is not None:
        steps = run_steps(session, series_run.id)
        merged = {step.pr_number for step in steps if step.outcome in ("clean", "resolved")}
        series_step = _series_step_words(steps, number)
        if number in merged:
            cells = cells_of_runs(session, [series_run]).get(series_run.id, ())
            series_tests = tuple(
                cell
                # this PR's part of the tree's own-files jobs; another PR's: on its page
                for cell in own_cells_for(session, series_run.id, cells, [number])
                if cell.own_pr in (None, number)
            )
    return {
        "repo": repository.full_name,
        "pull": row,
        "body": pr.body or "",
        "base_ref": pr.base_ref,
        "head_ref": pr.head_ref,
        # (number, source): the page says the source in words and keeps it in data-source
        "parents": sorted({(e.parent, e.source) for e in parents}),
        "children": sorted({(e.child, e.source) for e in children}),
        # Each edge with the exact words that declared it and where they were written.
        "parent_edges": [
            {"parent": e.parent, "source": e.source, "text": e.text or "", "origin": e.origin or ""}
            for e in sorted(parents, key=lambda e: (e.parent, e.source))
        ],
        "runs": [run_summary(run) for run in runs],
        "series": series,
        "series_run": run_summary(series_run) if series_tests and series_run else None,
        "latest_series_run": run_summary(series_run) if series_run else None,
        "series_tests": series_tests,
        # The latest series run and what it did with this PR, linked even when it left the PR
        # out (a conflict there is what the verdict is about).
        "series_link": (
            {"run": run_summary(series_run), "words": series_step}
            if series_run is not None and series_step
            else None
        ),
        "no_tests": _no_tests_words(row, pr.head_sha, bool(series_tests)),
        "approval_words": _approval_words(approvals, pr.head_sha),
        # a pill does not wrap: one or two words; the sentence beside it does
        "approval_pill": _approval_pill(approvals, pr.head_sha),
        "approvals": [
            {
                "sha": a.sha,
                "vetter": a.vetter,
                "kind": a.kind,
                "created_at": iso(a.created_at),
                # "trusted 1a2b3c4 by connor-xy" read as an approval; it is none
                "words": (
                    f"{a.sha[:7]}: tested without approval (trusted author)"
                    if a.kind == "trusted"
                    else f"{a.sha[:7]}: approved by {a.vetter}"
                ),
            }
            for a in approvals
        ],
    }


def _series_step_words(steps: Iterable[Any], number: int) -> str | None:
    """``merged (clean)``, ``left out: conflicts with #8035 in `a.py```; None when the run
    does not hold the PR at all."""
    step = next((s for s in steps if s.pr_number == number), None)
    if step is None:
        return None
    if step.outcome in ("clean", "resolved"):
        return f"this PR merged ({step.outcome})"
    if step.outcome == "conflict":
        paths = ", ".join(str(c.get("path", "")) for c in step.conflicts[:2])
        others = ", ".join(f"#{n}" for n in step.conflicts_with)
        text = "this PR was left out: it conflicts"
        text += f" with {others}" if others else ""
        return text + (f" in {paths}" if paths else "")
    if step.outcome == "skipped":
        return f"this PR was left out: {step.skipped_reason or 'skipped'}"
    return f"this PR: {step.outcome}"


def _no_tests_words(row: PullRow, head_sha: str, series_tested: bool) -> str:
    """What the page says where this PR's stack has no test jobs: what they wait for."""
    if series_tested:
        return "No jobs of its own: the series tree below holds this PR and was tested instead."
    if row.state != "open":
        return "No jobs: stackbot no longer tests this PR."
    if row.approval is None:
        return (
            f"Not tested yet: {head_sha[:7]} waits for a vetter to comment "
            f"/ok to test {head_sha[:7]}."
        )
    stack_run = row.stack_run
    if stack_run is not None and stack_run.status == "conflict":
        return (
            f"No jobs: its stack did not merge (run {stack_run.id}), so there is no tree to test."
        )
    verdict = row.verdict
    if verdict is not None and verdict.kind.slug in ("conflict", "blocked"):
        return f"No jobs: nothing is tested while this PR is in {verdict.label} (see above)."
    return "No jobs yet: integrating, then the test jobs are created."


def _approval_pill(approvals: Iterable[Any], head_sha: str) -> str:
    current = next((a for a in approvals if a.sha == head_sha), None)
    if current is None:
        return "waiting"
    return "trusted author" if current.kind == "trusted" else "approved"


def _approval_words(approvals: Iterable[Any], head_sha: str) -> str:
    """The current head's approval in words (``approvals`` newest first): who approved it, or
    that its author is trusted (no approval needed), or what it waits for."""
    current = next((a for a in approvals if a.sha == head_sha), None)
    if current is None:
        return f"waiting for a vetter to comment /ok to test {head_sha[:7]}"
    if current.kind == "trusted":
        return f"trusted author {current.vetter}: tested without waiting for a vetter"
    return f"approved for testing by {current.vetter}"
