"""The reply limits on commands in PR comments (``command_replies``).

Every reply to a command is recorded here before it is posted, so the limits hold across
workers and restarts: a non-vetter gets at most one reply per PR, and each user at most
``per_hour`` replies an hour per repository. A redo of the same comment's task finds its own row
and may post the reply it reserved.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func
from sqlmodel import Session, col, select

from stackbot.db.models import CommandReply
from stackbot.db.models._columns import utcnow


def reserve_reply(
    session: Session,
    *,
    repo: str,
    pr_number: int,
    login: str,
    comment_id: int,
    vetter: bool,
    per_hour: int,
    now: datetime | None = None,
) -> bool:
    """Whether the reply to comment ``comment_id`` may be posted; records it when it may."""
    login = login.lower()
    mine = session.exec(
        select(CommandReply).where(CommandReply.repo == repo, CommandReply.comment_id == comment_id)
    ).first()
    if mine is not None:
        return True  # reserved by an earlier attempt of this comment's task
    if not vetter:
        earlier = session.exec(
            select(CommandReply.id).where(
                CommandReply.repo == repo,
                CommandReply.pr_number == pr_number,
                CommandReply.login == login,
            )
        ).first()
        if earlier is not None:
            return False
    now = now or utcnow()
    recent = session.exec(
        select(func.count())
        .select_from(CommandReply)
        .where(
            CommandReply.repo == repo,
            CommandReply.login == login,
            col(CommandReply.created_at) > now - timedelta(hours=1),
        )
    ).one()
    if recent >= per_hour:
        return False
    session.add(
        CommandReply(
            repo=repo,
            pr_number=pr_number,
            login=login,
            comment_id=comment_id,
            vetter=vetter,
            created_at=now,
        )
    )
    session.flush()
    return True
