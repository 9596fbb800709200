"""Replies stackbot posted to commands in PR comments: what the reply limits count."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import time_column, utcnow


class CommandReply(SQLModel, table=True):
    """One reply to one command comment (recorded before it is posted).

    A non-vetter gets at most one reply per PR, and everyone at most
    ``settings.command_replies_per_hour`` per repository: both read these rows. The repository is
    kept by name, as the command may come before stackbot has stored the repository.
    """

    __tablename__ = "command_replies"
    __table_args__ = (
        UniqueConstraint("repo", "comment_id", name="uq_command_replies_comment"),
        Index("ix_command_replies_user", "repo", "login", "created_at"),
        Index("ix_command_replies_pr", "repo", "pr_number", "login"),
    )

    id: int | None = Field(default=None, primary_key=True)
    repo: str = Field(max_length=200)  # owner/name
    pr_number: int
    login: str = Field(max_length=200)  # lower case
    comment_id: int = Field(sa_column=Column(BigInteger, nullable=False))  # GitHub ids pass 2**31
    vetter: bool = False
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
