"""The series pages: the list of every series (the index) and one series with its graph, PRs,
latest series run and conflict matrix."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from stackbot.config import Settings
from stackbot.db import dashboard_store, landing_store
from stackbot.db.models import IntegrationRun
from stackbot.domain.landing_text import LandingView
from stackbot.services import read_batch
from stackbot.services.read_batch import SharedMemo, memo
from stackbot.web.readmodel.cells import cells_of_runs, own_cells_for
from stackbot.web.readmodel.pulls import PullRow, pull_rows
from stackbot.web.readmodel.runs import run_steps
from stackbot.web.readmodel.summaries import (
    RunSummary,
    StepRow,
    TestCell,
    fields_json,
    run_summary,
)


def series_slug(key: str) -> str:
    """URL form of a series key: ``#6307`` → ``6307``, ``root-#8034`` → ``root-8034``."""
    return key.replace("#", "")


def key_from_slug(slug: str) -> str:
    if slug.startswith("root-"):
        return "root-#" + slug.removeprefix("root-")
    return "#" + slug if slug.isdigit() else slug


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
        return fields_json(self)


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
    # each PR's own test files on the series tree (``own:N``), split out of its batched job
    series_own_tests: tuple[TestCell, ...] = ()
    conflict_matrix: dict[str, Any] | None = None
    # (child, parent, source) -> (the exact declaring text, where it was written)
    edge_texts: dict[tuple[int, int, str], tuple[str, str]] = field(default_factory=dict)
    landing: LandingView | None = None  # the series' newest landing, if it was ever asked

    def edge_json(self, child: int, parent: int, source: str) -> dict[str, Any]:
        text, origin = self.edge_texts.get((child, parent, source), ("", ""))
        return {"child": child, "parent": parent, "source": source, "text": text, "origin": origin}

    @property
    def conflict_pairs(self) -> list[tuple[int, int, list[str]]]:
        """Every conflicting pair (a, b, paths), from the conflict matrix: the list the page
        shows instead of an N×N matrix."""
        pairs = (self.conflict_matrix or {}).get("pairs", [])
        return [
            (int(p["a"]), int(p["b"]), [str(c.get("path")) for c in p.get("conflicts", [])])
            for p in pairs
            if "a" in p and "b" in p
        ]

    @property
    def in_series_tree(self) -> set[int]:
        """The PRs the latest series run merged (clean or resolved): its tests are theirs."""
        return {s.pr_number for s in self.series_steps if s.outcome in ("clean", "resolved")}

    @property
    def test_labels(self) -> list[str]:
        """The columns of the PR × (test set, shape) grid."""
        return sorted({cell.label for row in self.pulls for cell in row.tests})

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "repo": self.repo,
            "status": self.series_status,
            "order": self.order,
            "problems": self.problems,
            "pulls": [row.to_json() for row in self.pulls],
            "edges": [self.edge_json(c, p, s) for c, p, s in self.edges],
            "series_run": self.series_run.to_json() if self.series_run else None,
            "series_steps": [step.to_json() for step in self.series_steps],
            "series_tests": [cell.to_json() for cell in self.series_tests],
            "conflict_matrix": self.conflict_matrix,
            "conflict_pairs": [
                {"a": a, "b": b, "paths": paths} for a, b, paths in self.conflict_pairs
            ],
        }


def list_series(session: Session) -> list[SeriesListRow]:
    rows = dashboard_store.series_with_repositories(session)
    series_ids = [s.id for s, _ in rows if s.id is not None]
    members: dict[int, list[int]] = defaultdict(list)
    for member in dashboard_store.members_of_series(session, series_ids=series_ids):
        members[member.series_id].append(member.pr_number)
    states = {
        (pr.repo_id, pr.number): pr
        for pr in dashboard_store.pulls_numbered(
            session, numbers={n for ns in members.values() for n in ns}
        )
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
    runs = dashboard_store.latest_series_runs(session, keys=keys)
    return {(run.repo_id, run.series_key or ""): run for run in runs}


def series_page(
    session: Session,
    key: str,
    repo: str | None = None,
    settings: Settings | None = None,
    shared: SharedMemo | None = None,
) -> SeriesPage | None:
    """The series page (None: no such series). With ``shared``, what is derived from the runs'
    tables only is kept for the next computation (:class:`~stackbot.services.read_batch.SharedMemo`)."""
    with read_batch.batch(session, shared):
        return _series_page(session, key, repo, settings)


def _series_page(
    session: Session, key: str, repo: str | None, settings: Settings | None
) -> SeriesPage | None:
    found = dashboard_store.find_series(session, key=key, repo=repo)
    if found is None:
        return None
    series, repository = found
    numbers = dashboard_store.member_numbers(session, series_id=series.id)
    pulls = pull_rows(session, series.repo_id, numbers, settings)
    edges = dashboard_store.edges_from(session, repo_id=series.repo_id, children=numbers)
    series_run = memo(
        session,
        ("latest series run", series.repo_id, series.key),
        lambda: dashboard_store.latest_series_run(
            session, repo_id=series.repo_id, series_key=series.key
        ),
    )
    steps: tuple[StepRow, ...] = ()
    tests: tuple[TestCell, ...] = ()
    own_tests: tuple[TestCell, ...] = ()
    if series_run is not None and series_run.id is not None:
        run_id = series_run.id
        steps = memo(session, ("run steps", run_id), lambda: tuple(run_steps(session, run_id)))
        cells = memo(session, ("cells", (run_id,)), lambda: cells_of_runs(session, [series_run]))
        tests = cells.get(run_id, ())
        # each PR's row: its part of the tree's batched own-files jobs
        batched = [c for c in tests if c.batched_own]
        wanted = tuple(numbers)
        own_tests = memo(
            session,
            ("own cells", run_id, wanted),
            lambda: own_cells_for(session, run_id, batched, list(wanted)),
        )
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
        edge_texts={(e.child, e.parent, e.source): (e.text or "", e.origin or "") for e in edges},
        series_run=run_summary(series_run) if series_run else None,
        series_steps=steps,
        series_tests=tests,
        series_own_tests=own_tests,
        conflict_matrix=series.conflict_matrix,
        landing=_landing(session, series.repo_id, series.key, repository.default_branch),
    )


def _landing(session: Session, repo_id: int, key: str, base_ref: str) -> LandingView | None:
    row = landing_store.newest_landing(session, repo_id=repo_id, series_key=key)
    return landing_store.landing_view(row, base_ref) if row is not None else None
