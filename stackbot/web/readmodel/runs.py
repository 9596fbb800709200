"""The run page: one integration run with its steps and test cells."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from stackbot.db import integration_store
from stackbot.db.models import IntegrationRun
from stackbot.services.report_findings import series_findings
from stackbot.web.readmodel.cells import cells_of_runs
from stackbot.web.readmodel.summaries import RunSummary, StepRow, TestCell, run_summary, step_row


def run_steps(session: Session, run_id: int) -> list[StepRow]:
    return [step_row(step) for step in integration_store.steps_of(session, run_id=run_id)]


def run_detail(
    session: Session, run_id: int
) -> tuple[RunSummary, list[StepRow], tuple[TestCell, ...]] | None:
    run = integration_store.get_run(session, run_id=run_id)
    if run is None:
        return None
    cells = cells_of_runs(session, [run])
    return run_summary(run), run_steps(session, run_id), cells.get(run_id, ())


@dataclass(frozen=True)
class FindingRow:
    """One failing test of a run as the test plan classed it (issue 13), for the run page."""

    label: str
    nodeid: str
    failure_class: str
    pr: int | None
    evidence: str


_CLASS_WORDS = {
    "new": "new",
    "pre-existing": "pre-existing (fails on main too)",
    "flaky": "flaky (passed on a rerun)",
    "suspect": "being confirmed",
    "bisecting": "being bisected",
    "quarantined": "quarantined (failed, not counted)",
}


def run_findings(session: Session, run: IntegrationRun) -> list[FindingRow]:
    """The run's findings with their evidence (three queries whatever their number)."""
    rows = []
    for f in series_findings(session, run):
        if f.failure_class in ("flaky", "quarantined") and f.failed_in and f.passed_in:
            evidence = f"failed in job {f.failed_in[0]}, passed in job {f.passed_in[0]}"
        else:
            evidence = "; ".join(f"{role}: job {j}" for j, role in f.roles)
        if f.note:
            evidence += f" ({f.note})"
        word = _CLASS_WORDS.get(f.failure_class, f.failure_class)
        rows.append(FindingRow(f.label, f.nodeid, word, f.pr, evidence))
    return rows
