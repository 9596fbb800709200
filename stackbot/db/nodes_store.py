"""Excluded nodes (issue 26 point 4) and the finished jobs they are decided on."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import select as select_columns
from sqlmodel import Session, col, select

from stackbot.db.models import Job, NodeExclusion
from stackbot.domain.broken_nodes import CLEAN, EXCLUDED, INFRA


def exclusions(session: Session) -> list[NodeExclusion]:
    """Every node ever excluded: the excluded ones first, newest first."""
    rows = list(session.exec(select(NodeExclusion).order_by(col(NodeExclusion.node))))
    return sorted(rows, key=lambda r: (r.state != EXCLUDED, -r.excluded_at.timestamp()))


def entry(session: Session, *, node: str) -> NodeExclusion | None:
    return session.exec(select(NodeExclusion).where(NodeExclusion.node == node)).first()


def excluded(session: Session) -> list[str]:
    return list(
        session.exec(
            select(NodeExclusion.node)
            .where(NodeExclusion.state == EXCLUDED)
            .order_by(col(NodeExclusion.node))
        ).all()
    )


class FinishedJob(NamedTuple):
    """What the broken-node rule reads of a job (not its results: they can be large)."""

    id: int
    status: str
    node: str | None
    error: str | None
    finished_at: datetime
    external_id: str | None


def finished_on_nodes(session: Session, *, since: datetime) -> list[FinishedJob]:
    """Jobs that ran (not reused copies) and finished since ``since``, infra or clean."""
    rows = session.execute(
        select_columns(
            col(Job.id),
            col(Job.status),
            col(Job.node),
            col(Job.error),
            col(Job.finished_at),
            col(Job.external_id),
        )
        .where(col(Job.reused_from_job_id).is_(None))
        .where(col(Job.status).in_([INFRA, *sorted(CLEAN)]))
        .where(col(Job.finished_at) >= since)
        .order_by(col(Job.finished_at), col(Job.id))
    ).all()
    return [FinishedJob(*row) for row in rows if row[0] is not None and row[4] is not None]
