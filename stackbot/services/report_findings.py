"""The series run's failing tests as the test plan classed them (:class:`TestFinding` rows),
read into :class:`~stackbot.domain.report_view.FindingView` for the comment, the check runs and
the dashboard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlmodel import Session, col, select

from gpu_jobs.testsets import OWN_TEST_SET, own_test_set_name
from stackbot.db import integration_store, jobs_store
from stackbot.db.models import IntegrationRun, Job, TestFinding
from stackbot.domain.own_tests import file_of
from stackbot.domain.report_view import FindingView
from stackbot.services.own_tests import owners_of_steps
from stackbot.services.test_plan import merged_order


def series_findings(session: Session, run: IntegrationRun) -> tuple[FindingView, ...]:
    """The series run's failing tests as the test plan classed them, with the PR at each end of
    a bisection's last interval (two queries whatever the number of findings)."""
    assert run.id is not None
    rows = jobs_store.findings_of_run(session, run_id=run.id)
    if not rows:
        return ()
    steps = integration_store.steps_of(session, run_id=run.id)
    order = merged_order(steps)
    owners = owners_of_steps(steps)
    ids = {int(j) for row in rows for j in (row.evidence or {}).get("jobs") or []}
    jobs = session.exec(select(Job).where(col(Job.id).in_(sorted(ids)))).all() if ids else []
    roles = {job.id: _role(job) for job in jobs if job.id is not None}
    return tuple(_owned(finding_view(row, order, roles), owners) for row in rows)


def _owned(view: FindingView, owners: Mapping[str, Sequence[int]]) -> FindingView:
    """A failing test of the batched own-files job, named as its file's PR's own test files
    (``own:N``, as that PR's row and check run are): the PR it was attributed to when that PR
    owns the file, else the file's first owner."""
    if view.test_set != OWN_TEST_SET:
        return view
    prs = owners.get(file_of(view.nodeid), ())
    if not prs:
        return view
    pr = view.pr if view.pr is not None and view.pr in prs else prs[0]
    return replace(view, test_set=own_test_set_name(pr))


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


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
