"""Commands in PR comments stackbot has acted on, and how far reconcile has read each PR's
comments: a command is acted on once, whether the webhook or reconcile saw it first."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import time_column, utcnow


class ActedCommand(SQLModel, table=True):
    """One comment version (id, updated_at and the body's SHA-256: an edit is a new request, and
    GitHub's times have whole seconds) claimed by one ``pr_command`` task; another task for the
    same version finds the row and does nothing."""

    __tablename__ = "acted_commands"
    __table_args__ = (
        UniqueConstraint(
            "repo", "comment_id", "updated_at", "body_sha", name="uq_acted_commands_comment"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    repo: str = Field(max_length=200)  # owner/name
    pr_number: int
    comment_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    updated_at: str = Field(max_length=40)  # GitHub's ISO 8601 text, "" when unknown
    body_sha: str = Field(max_length=64)  # hex SHA-256 of the comment's body
    task_id: int = Field(sa_column=Column(BigInteger, nullable=False))  # the claiming task
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column())


class CommentCursor(SQLModel, table=True):
    """The newest ``updated_at`` of a PR's comments that reconcile has read (its next read asks
    GitHub for the comments ``since`` then)."""

    __tablename__ = "comment_cursors"
    __table_args__ = (UniqueConstraint("repo", "pr_number", name="uq_comment_cursors_pr"),)

    id: int | None = Field(default=None, primary_key=True)
    repo: str = Field(max_length=200)
    pr_number: int
    seen_until: str = Field(max_length=40)
