"""Landings: ``/stackbot land [#N]`` requests and what became of each PR of them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, UniqueConstraint
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import json_column, text_column, time_column, utcnow


class Landing(SQLModel, table=True):
    """One landing of a series (or of its prefix up to ``up_to``).

    ``entries`` is the landing order with each PR's tested head and what happened to it:
    ``[{"number", "head_sha", "state": "pending" | "merged" | "not merged", "merge_sha",
    "note"}]``. A task redone after a crash reads it to skip what is done.
    """

    __tablename__ = "landings"
    __table_args__ = (UniqueConstraint("repo_id", "comment_id", name="uq_landings_comment"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    series_key: str = Field(max_length=100, index=True)
    up_to: int | None = None  # the PR named by ``/stackbot land #N``
    requested_on: int  # the PR the command was written on
    requested_by: str = Field(max_length=200)
    comment_id: int = Field(sa_column=Column(BigInteger, nullable=False))
    # waiting | merging | landed | stopped | cancelled
    state: str = Field(default="waiting", max_length=20, index=True)
    merge_method: str = Field(default="merge", max_length=10)
    entries: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    # What the landing waits for or why it stopped, in words shown on the PRs.
    waiting_for: str | None = Field(default=None, sa_column=text_column())
    reason: str | None = Field(default=None, sa_column=text_column())
    main_sha: str | None = Field(default=None, max_length=40)  # the main the tree was tested on
    tested_run_id: int | None = Field(default=None, foreign_key="integration_runs.id")
    tested_tree: str | None = Field(default=None, max_length=40)
    landed_tree: str | None = Field(default=None, max_length=40)
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
    finished_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
