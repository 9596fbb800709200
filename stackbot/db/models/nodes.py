"""Nodes excluded from job submissions for repeated infra failures (issue 26 point 4)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import json_column, text_column, time_column, utcnow


class NodeExclusion(SQLModel, table=True):
    """One node's exclusion (one row per node: a later exclusion of the same node starts it
    again and keeps the earlier ones in ``history``). Nodes belong to the executor, not to a
    repository: a broken node is left out of every repository's jobs."""

    __tablename__ = "node_exclusions"

    id: int | None = Field(default=None, primary_key=True)
    node: str = Field(max_length=200, unique=True)
    state: str = Field(max_length=20)  # excluded | readmitted
    excluded_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
    # [{"job", "at", "signature", "line"}]: the infra jobs in a row that excluded it
    evidence: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    # [{"at", "status", "message"}]: the node checks submitted to it since, oldest first
    checks: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    # The node check running now (its gpu_jobs handle), if any.
    check_handle: str | None = Field(default=None, sa_column=text_column())
    # A maintainer asked for a check now (``stackbot nodes check NODE``).
    check_asked: bool = Field(default=False)
    last_check_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
    ended_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
    ended_by: str | None = Field(default=None, max_length=200)  # who re-admitted it by hand
    end_note: str | None = Field(default=None, sa_column=text_column())
    history: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
