"""The run page: one integration run with its steps and test cells."""

from __future__ import annotations

from sqlmodel import Session

from stackbot.db import integration_store
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
