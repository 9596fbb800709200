"""Dependency overrides (``/stackbot depends-on #N``, ``/stackbot no-dependency #N``): the
latest one per (child, parent) pair of a repository."""

from __future__ import annotations

from sqlmodel import Session, col, select

from stackbot.db.models import DependencyOverrideRow
from stackbot.db.models._columns import utcnow
from stackbot.domain.series import DependencyOverride
from stackbot.domain.types import PrNumber


def save_override(
    session: Session,
    *,
    repo_id: int,
    child: int,
    parent: int,
    kind: str,
    login: str,
    comment_id: int | None,
    text: str,
) -> bool:
    """Store an override, replacing an earlier one for the pair; whether anything changed (a
    redone task stores the same override again and changes nothing)."""
    row = session.exec(
        select(DependencyOverrideRow).where(
            DependencyOverrideRow.repo_id == repo_id,
            DependencyOverrideRow.child == child,
            DependencyOverrideRow.parent == parent,
        )
    ).first()
    if row is not None and (row.kind, row.comment_id) == (kind, comment_id):
        return False
    if row is None:
        row = DependencyOverrideRow(
            repo_id=repo_id, child=child, parent=parent, kind=kind, login=""
        )
    row.kind = kind
    row.login = login[:200]
    row.comment_id = comment_id
    row.text = text.replace("\x00", "\ufffd")[:500]
    row.created_at = utcnow()
    session.add(row)
    session.flush()
    return True


def list_overrides(session: Session, *, repo_id: int) -> list[DependencyOverride]:
    """The repository's overrides, oldest first (the order the graph build applies them in)."""
    rows = session.exec(
        select(DependencyOverrideRow)
        .where(DependencyOverrideRow.repo_id == repo_id)
        .order_by(col(DependencyOverrideRow.created_at), col(DependencyOverrideRow.id))
    )
    return [
        DependencyOverride(
            child=PrNumber(row.child),
            parent=PrNumber(row.parent),
            kind="no_dependency" if row.kind == "no_dependency" else "depends_on",
            by=row.login,
            comment_id=row.comment_id,
            text=row.text or "",
        )
        for row in rows
    ]
