"""``/stackbot depends-on #N`` and ``/stackbot no-dependency #N``: what a PR's author or a vetter
said about one of its dependencies, stronger than what was read from text."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import text_column, time_column, utcnow


class DependencyOverrideRow(SQLModel, table=True):
    """The latest override for one (child, parent) pair of a repository (a later command about
    the same pair replaces it)."""

    __tablename__ = "dependency_overrides"
    __table_args__ = (
        UniqueConstraint("repo_id", "child", "parent", name="uq_dependency_overrides"),
    )

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    child: int
    parent: int
    kind: str = Field(max_length=20)  # depends_on | no_dependency
    login: str = Field(max_length=200)  # who said it (the author or a vetter)
    comment_id: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    text: str | None = Field(default=None, sa_column=text_column())  # the command line
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
