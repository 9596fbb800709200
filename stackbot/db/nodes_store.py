"""Excluded nodes (issue 26 point 4) and the finished jobs they are decided on."""

from __future__ import annotations

from datetime import datetime

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


def finished_on_nodes(session: Session, *, since: datetime) -> list[Job]:
    """Jobs that ran (not reused copies) and finished since ``since``, infra or clean."""
    return list(
        session.exec(
            select(Job)
            .where(col(Job.reused_from_job_id).is_(None))
            .where(col(Job.status).in_([INFRA, *sorted(CLEAN)]))
            .where(col(Job.finished_at) >= since)
            .order_by(col(Job.finished_at), col(Job.id))
        )
    )
