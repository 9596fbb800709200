"""Commands acted on (``acted_commands``) and reconcile's comment cursors (``comment_cursors``).

A ``pr_command`` task claims its comment version before acting, in a transaction of its own:
the first task to claim it acts, a redo of that task finds its own claim and goes on, and any
other task (the webhook's and reconcile's for one comment) finds the claim and does nothing.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from stackbot.db.engine import session_scope
from stackbot.db.models import ActedCommand, CommentCursor


def claim_command(
    engine: Engine,
    *,
    repo: str,
    pr_number: int,
    comment_id: int,
    updated_at: str,
    body: str,
    task_id: int,
) -> bool:
    """Whether task ``task_id`` is the one to act on this comment version (claimed if so)."""
    body_sha = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()

    def holder() -> int | None:
        with session_scope(engine) as session:
            row = session.exec(
                select(ActedCommand.task_id).where(
                    ActedCommand.repo == repo,
                    ActedCommand.comment_id == comment_id,
                    ActedCommand.updated_at == updated_at,
                    ActedCommand.body_sha == body_sha,
                )
            ).first()
        return row

    found = holder()
    if found is not None:
        return found == task_id
    try:
        with session_scope(engine) as session:
            session.add(
                ActedCommand(
                    repo=repo,
                    pr_number=pr_number,
                    comment_id=comment_id,
                    updated_at=updated_at,
                    body_sha=body_sha,
                    task_id=task_id,
                )
            )
    except IntegrityError:
        return holder() == task_id  # another task claimed it between our read and write
    return True


def cursor(session: Session, *, repo: str, pr_number: int) -> str | None:
    """The newest comment ``updated_at`` reconcile has read on this PR (None: none yet)."""
    return session.exec(
        select(CommentCursor.seen_until).where(
            CommentCursor.repo == repo, CommentCursor.pr_number == pr_number
        )
    ).first()


def move_cursor(session: Session, *, repo: str, pr_number: int, seen_until: str) -> None:
    row = session.exec(
        select(CommentCursor).where(
            CommentCursor.repo == repo, CommentCursor.pr_number == pr_number
        )
    ).first()
    if row is None:
        session.add(CommentCursor(repo=repo, pr_number=pr_number, seen_until=seen_until))
    elif seen_until > row.seen_until:
        row.seen_until = seen_until
        session.add(row)
