"""Landings (``/stackbot land``) and the evidence a landing needs: the tested run of a tree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlmodel import Session, col, select

from stackbot.db.models import IntegrationRun, IntegrationStep, Job, Landing, TestFinding
from stackbot.db.models._columns import utcnow
from stackbot.domain.landing import LandingEntry, LandingState
from stackbot.domain.landing_text import LandingView

ACTIVE = (LandingState.WAITING.value, LandingState.MERGING.value)


def get_landing(session: Session, *, landing_id: int) -> Landing | None:
    return session.get(Landing, landing_id)


def lock_landing(session: Session, *, landing_id: int) -> Landing | None:
    """The landing, locked for this transaction (PostgreSQL; SQLite's writer lock suffices)."""
    return session.exec(select(Landing).where(Landing.id == landing_id).with_for_update()).first()


def landing_of_comment(session: Session, *, repo_id: int, comment_id: int) -> Landing | None:
    return session.exec(
        select(Landing).where(Landing.repo_id == repo_id, Landing.comment_id == comment_id)
    ).first()


def active_landing(session: Session, *, repo_id: int, series_key: str) -> Landing | None:
    return session.exec(
        select(Landing)
        .where(
            Landing.repo_id == repo_id,
            Landing.series_key == series_key,
            col(Landing.state).in_(ACTIVE),
        )
        .order_by(col(Landing.id))
    ).first()


def active_landings_of_repo(session: Session, *, repo_id: int) -> list[Landing]:
    """The repository's gate: its waiting and merging landings, oldest first."""
    return list(
        session.exec(
            select(Landing)
            .where(Landing.repo_id == repo_id, col(Landing.state).in_(ACTIVE))
            .order_by(col(Landing.id))
        )
    )


def merging_landings_of_repo(
    session: Session, *, repo_id: int, since: datetime, except_method: str
) -> list[Landing]:
    """The repository's landings merging now (main moves under them, one PR at a time), last
    written at ``since`` or later, other than those landing with ``except_method``."""
    return list(
        session.exec(
            select(Landing).where(
                Landing.repo_id == repo_id,
                Landing.state == LandingState.MERGING.value,
                Landing.merge_method != except_method,
                col(Landing.updated_at) >= since,
            )
        )
    )


def newest_landing(session: Session, *, repo_id: int, series_key: str) -> Landing | None:
    return session.exec(
        select(Landing)
        .where(Landing.repo_id == repo_id, Landing.series_key == series_key)
        .order_by(col(Landing.id).desc())
    ).first()


def landing_view(row: Landing, base_ref: str) -> LandingView:
    """What the comments and the series page show of a landing."""
    assert row.id is not None
    return LandingView(
        id=row.id,
        state=LandingState(row.state),
        entries=tuple(entries_of(row)),
        merge_method=row.merge_method,
        requested_by=row.requested_by,
        base_ref=base_ref,
        up_to=row.up_to,
        waiting_for=row.waiting_for,
        reason=row.reason,
        main_sha=row.main_sha,
        tested_tree=row.tested_tree,
        landed_tree=row.landed_tree,
    )


def all_landings(session: Session) -> list[Landing]:
    return list(session.exec(select(Landing)))


def landings_of_repo(session: Session, *, repo_id: int) -> list[Landing]:
    return list(
        session.exec(select(Landing).where(Landing.repo_id == repo_id).order_by(col(Landing.id)))
    )


def add_landing(
    session: Session,
    *,
    repo_id: int,
    series_key: str,
    up_to: int | None,
    requested_on: int,
    requested_by: str,
    comment_id: int,
    merge_method: str,
    entries: Sequence[LandingEntry],
) -> Landing:
    row = Landing(
        repo_id=repo_id,
        series_key=series_key,
        up_to=up_to,
        requested_on=requested_on,
        requested_by=requested_by,
        comment_id=comment_id,
        merge_method=merge_method,
        entries=[e.to_json() for e in entries],
    )
    session.add(row)
    session.flush()
    return row


def save_landing(
    session: Session,
    row: Landing,
    *,
    state: LandingState | None = None,
    entries: Sequence[LandingEntry] | None = None,
    **fields: object,
) -> None:
    """Write what changed; a finished state stamps ``finished_at``."""
    if state is not None:
        row.state = state.value
        if not state.active and row.finished_at is None:
            row.finished_at = utcnow()
    if entries is not None:
        row.entries = [e.to_json() for e in entries]
    for name, value in fields.items():
        setattr(row, name, value)
    row.updated_at = utcnow()
    session.add(row)


def entries_of(row: Landing) -> list[LandingEntry]:
    return [LandingEntry.from_json(e) for e in row.entries]


# -- the tested run of a tree -----------------------------------------------------------------


def runs_with_tree(session: Session, *, repo_id: int, tree: str) -> list[IntegrationRun]:
    """The repository's newest integration runs whose final tree is ``tree``."""
    query = (
        select(IntegrationRun)
        .where(IntegrationRun.repo_id == repo_id, IntegrationRun.final_tree == tree)
        .order_by(col(IntegrationRun.id).desc())
        .limit(20)
    )
    return list(session.exec(query))


def newest_matching_run(
    session: Session,
    *,
    repo_id: int,
    kind: str,
    series_key: str | None,
    target_pr: int | None,
    base_sha: str,
    heads: Mapping[int, str],
) -> IntegrationRun | None:
    """The newest run of ``kind`` (a series run of ``series_key``, the stack run of
    ``target_pr``, or a gate run: any run of exactly these PRs in this order) made on
    ``base_sha`` with exactly these PR heads."""
    query = select(IntegrationRun).where(
        IntegrationRun.repo_id == repo_id,
        IntegrationRun.kind == kind,
        IntegrationRun.base_sha == base_sha,
    )
    if kind == "series":
        query = query.where(IntegrationRun.series_key == series_key)
    elif kind == "stack":
        query = query.where(IntegrationRun.target_pr == target_pr)
    wanted = {str(n): sha for n, sha in heads.items()}
    for run in session.exec(query.order_by(col(IntegrationRun.id).desc()).limit(20)):
        held = dict(run.heads or {})
        if held == wanted:
            return run
        if kind != "series" or run.id is None:
            continue
        # A series run also merged PRs that are not landed because it left them out of its
        # tree (a conflict): its tree is still exactly main + these heads.
        extra = set(held) - set(wanted)
        if {n: held.get(n) for n in wanted} == wanted and extra <= {
            str(n) for n in left_out_of_run(session, run_id=run.id)
        }:
            return run
    return None


def has_series_run(session: Session, *, repo_id: int, series_key: str, base_sha: str) -> bool:
    """Whether series ``series_key`` was integrated on ``base_sha`` (with any heads)."""
    return (
        session.exec(
            select(IntegrationRun.id).where(
                IntegrationRun.repo_id == repo_id,
                IntegrationRun.kind == "series",
                IntegrationRun.series_key == series_key,
                IntegrationRun.base_sha == base_sha,
            )
        ).first()
        is not None
    )


LEFT_OUT = ("conflict", "skipped")


def left_out_of_run(session: Session, *, run_id: int) -> dict[int, str]:
    """The PRs an integration run left out of its tree, with why (in words)."""
    steps = session.exec(
        select(IntegrationStep).where(
            IntegrationStep.run_id == run_id, col(IntegrationStep.outcome).in_(LEFT_OUT)
        )
    ).all()
    found: dict[int, str] = {}
    for step in steps:
        if step.outcome == "skipped":
            found[step.pr_number] = step.skipped_reason or "left out"
            continue
        others = ", ".join(f"#{n}" for n in step.conflicts_with)
        found[step.pr_number] = f"it conflicts with {others or 'the base'}"
    return found


def left_out_of_series(session: Session, *, repo_id: int, series_key: str) -> dict[int, str]:
    """The PRs the newest finished integration of the series left out of its tree."""
    run = session.exec(
        select(IntegrationRun)
        .where(
            IntegrationRun.repo_id == repo_id,
            IntegrationRun.kind == "series",
            IntegrationRun.series_key == series_key,
            col(IntegrationRun.status).not_in(("pending", "running")),
        )
        .order_by(col(IntegrationRun.id).desc())
    ).first()
    if run is None or run.id is None:
        return {}
    return left_out_of_run(session, run_id=run.id)


def tree_jobs_and_findings(session: Session, *, run_id: int) -> tuple[list[Job], list[TestFinding]]:
    """The run's jobs on its final tree (test sets and own test files, with their confirming
    reruns and infra retries) and its findings."""
    jobs = session.exec(
        select(Job).where(Job.integration_run_id == run_id, col(Job.purpose) != "bisect")
    ).all()
    findings = session.exec(select(TestFinding).where(TestFinding.run_id == run_id)).all()
    return list(jobs), list(findings)


# -- the dashboard's landing page ---------------------------------------------------------------


def active_landings(session: Session) -> list[Landing]:
    """Every repository's gate at once: waiting and merging landings, oldest first."""
    return list(
        session.exec(
            select(Landing).where(col(Landing.state).in_(ACTIVE)).order_by(col(Landing.id))
        )
    )


def finished_landings(session: Session, *, limit: int) -> list[Landing]:
    """The ``limit`` landings that finished last (landed, stopped or cancelled), newest first."""
    return list(
        session.exec(
            select(Landing)
            .where(col(Landing.state).not_in(ACTIVE))
            .order_by(col(Landing.finished_at).desc(), col(Landing.id).desc())
            .limit(limit)
        )
    )


def landing_run_ids(session: Session) -> list[int]:
    """The integration runs whose jobs ``/metrics`` counts as landing GPU-hours: every gate run
    (a tree a landing asked for: its own PRs on a new main, or speculatively on top of the
    landings ahead) and every landing's tested run (the tree it merged or was to merge, even
    when that series run was made before ``/stackbot land``)."""
    gates = session.exec(select(IntegrationRun.id).where(IntegrationRun.kind == "gate")).all()
    tested = session.exec(
        select(Landing.tested_run_id).where(col(Landing.tested_run_id).is_not(None))
    ).all()
    return sorted({int(i) for i in (*gates, *tested) if i is not None})
