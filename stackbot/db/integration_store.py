"""Integration runs in the database: save a run with its steps, load it back as the domain value."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun, IntegrationStep
from stackbot.db.models._columns import utcnow
from stackbot.domain.integration import (
    AllowlistChange,
    AllowlistReport,
    Conflict,
    IntegrationRunResult,
    IntegrationStepResult,
    RunKind,
    StepOutcome,
)
from stackbot.domain.types import PrNumber, Sha, TreeSha


def save_run(
    session: Session,
    repo_id: int,
    result: IntegrationRunResult,
    *,
    series_key: str | None = None,
    target_pr: int | None = None,
) -> IntegrationRun:
    """Store a finished run and its steps; returns the run row (flushed, so it has an id)."""
    run = IntegrationRun(
        repo_id=repo_id,
        kind=result.kind.value,
        name=result.name,
        series_key=series_key,
        target_pr=target_pr,
        base_ref=result.base_ref,
        base_sha=result.base_sha,
        status=result.status.value,
        final_tree=result.final_tree,
        final_commit=result.final_commit,
        ref_name=result.ref_name,
        pushed_to=result.pushed_to,
        heads={str(pr): sha for pr, sha in result.heads.items()},
        allowlist=result.allowlist.to_json() if result.allowlist else None,
        finished_at=utcnow(),
    )
    session.add(run)
    session.flush()
    assert run.id is not None
    for step in result.steps:
        session.add(_step_row(run.id, step))
    session.flush()
    return run


def _step_row(run_id: int, step: IntegrationStepResult) -> IntegrationStep:
    return IntegrationStep(
        run_id=run_id,
        position=step.position,
        pr_number=step.pr,
        head_sha=step.head_sha,
        outcome=step.outcome.value,
        tree=step.tree,
        commit=step.commit,
        conflicts=[c.to_json() for c in step.conflicts],
        conflicts_with=list(step.conflicts_with),
        # JSON inside the text column: git's messages may span lines.
        messages=json.dumps(list(step.messages)),
        resolution=step.resolution,
        skipped_reason=step.skipped_reason,
        allowlist=step.allowlist.to_json() if step.allowlist else None,
    )


def load_run(session: Session, run_id: int) -> IntegrationRunResult | None:
    run = session.get(IntegrationRun, run_id)
    if run is None:
        return None
    rows = session.exec(
        select(IntegrationStep)
        .where(IntegrationStep.run_id == run_id)
        .order_by(col(IntegrationStep.position))
    ).all()
    return IntegrationRunResult(
        kind=RunKind(run.kind),
        name=run.name,
        base_ref=run.base_ref,
        base_sha=Sha(run.base_sha),
        steps=tuple(_step_result(row) for row in rows),
        final_tree=TreeSha(run.final_tree or ""),
        final_commit=Sha(run.final_commit or ""),
        ref_name=run.ref_name,
        allowlist=_report(run.allowlist),
        pushed_to=run.pushed_to,
        heads={PrNumber(int(pr)): Sha(sha) for pr, sha in run.heads.items()},
    )


def _step_result(row: IntegrationStep) -> IntegrationStepResult:
    return IntegrationStepResult(
        position=row.position,
        pr=PrNumber(row.pr_number),
        head_sha=Sha(row.head_sha),
        outcome=StepOutcome(row.outcome),
        tree=TreeSha(row.tree) if row.tree else None,
        commit=Sha(row.commit) if row.commit else None,
        conflicts=tuple(Conflict(str(c["path"]), str(c["type"])) for c in row.conflicts),
        conflicts_with=tuple(PrNumber(n) for n in row.conflicts_with),
        messages=tuple(json.loads(row.messages)) if row.messages else (),
        resolution=row.resolution,
        skipped_reason=row.skipped_reason,
        allowlist=_change(row.allowlist),
    )


def _change(data: dict[str, Any] | None) -> AllowlistChange | None:
    if not data:
        return None
    return AllowlistChange(
        path=data["path"],
        total_before=data["total_before"],
        total_after=data["total_after"],
        new_reads=tuple(data["new_reads"]),
        stale=tuple(data["stale"]),
        unparsed=tuple(data["unparsed"]),
        rewritten=bool(data["rewritten"]),
    )


def _report(data: dict[str, Any] | None) -> AllowlistReport | None:
    if not data:
        return None
    return AllowlistReport(
        path=data["path"],
        format=data["format"],
        total=data["total"],
        entries=data["entries"],
        base_total=data["base_total"],
        ok=bool(data["ok"]),
        new_reads=tuple(data["new"]),
        stale=tuple(data["stale"]),
        unparsed=tuple(data["unparsed"]),
        checker=data.get("checker"),
    )


# -- queries the pipeline asks by name --------------------------------------------------------


def get_run(session: Session, *, run_id: int) -> IntegrationRun | None:
    return session.get(IntegrationRun, run_id)


def recent_runs(
    session: Session, *, repo_id: int, kind: RunKind, base_sha: str, name: str, limit: int = 5
) -> list[IntegrationRun]:
    """The newest runs of this kind and name on this base commit, newest first."""
    statement = select(IntegrationRun).where(
        IntegrationRun.repo_id == repo_id,
        IntegrationRun.kind == kind.value,
        IntegrationRun.base_sha == base_sha,
        IntegrationRun.name == name,
    )
    return list(session.exec(statement.order_by(col(IntegrationRun.id).desc()).limit(limit)))


def newest_runs(
    session: Session,
    *,
    repo_id: int,
    kind: str,
    target_pr: int | None = None,
    series_key: str | None = None,
    limit: int = 20,
) -> list[IntegrationRun]:
    """The newest runs of a kind, for one target PR and/or series when given, newest first."""
    statement = select(IntegrationRun).where(
        IntegrationRun.repo_id == repo_id, IntegrationRun.kind == kind
    )
    if target_pr is not None:
        statement = statement.where(IntegrationRun.target_pr == target_pr)
    if series_key is not None:
        statement = statement.where(IntegrationRun.series_key == series_key)
    return list(session.exec(statement.order_by(col(IntegrationRun.id).desc()).limit(limit)))


def newest_runs_of_targets(
    session: Session, *, repo_id: int, kind: str, targets: Sequence[int], limit: int
) -> list[IntegrationRun]:
    """The newest ``limit`` runs of a kind made for any of ``targets``, newest first."""
    if not targets:
        return []
    statement = select(IntegrationRun).where(
        IntegrationRun.repo_id == repo_id,
        IntegrationRun.kind == kind,
        col(IntegrationRun.target_pr).in_(sorted(set(targets))),
    )
    return list(session.exec(statement.order_by(col(IntegrationRun.id).desc()).limit(limit)))


def latest_stack_run(session: Session, *, repo_id: int, target_pr: int) -> IntegrationRun | None:
    """The newest stack run made for PR ``target_pr``."""
    return session.exec(
        select(IntegrationRun)
        .where(
            IntegrationRun.repo_id == repo_id,
            IntegrationRun.kind == RunKind.STACK.value,
            IntegrationRun.target_pr == target_pr,
        )
        .order_by(col(IntegrationRun.id).desc())
    ).first()


def steps_of_runs(session: Session, *, run_ids: Sequence[int]) -> dict[int, list[IntegrationStep]]:
    """:func:`steps_of` for several runs in one query (every asked run is a key)."""
    found: dict[int, list[IntegrationStep]] = {run_id: [] for run_id in run_ids}
    if not found:
        return found
    statement = (
        select(IntegrationStep)
        .where(col(IntegrationStep.run_id).in_(sorted(found)))
        .order_by(col(IntegrationStep.run_id), col(IntegrationStep.position))
    )
    for step in session.exec(statement):
        found[step.run_id].append(step)
    return found


def steps_of(session: Session, *, run_id: int) -> list[IntegrationStep]:
    """The run's steps in merge order."""
    return list(
        session.exec(
            select(IntegrationStep)
            .where(IntegrationStep.run_id == run_id)
            .order_by(col(IntegrationStep.position))
        )
    )
