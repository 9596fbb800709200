"""The durable task queue: tasks claimed by workers under leases."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import json_column, text_column, time_column, utcnow


class Task(SQLModel, table=True):
    __tablename__ = "tasks"
    __table_args__ = (Index("ix_tasks_claim", "status", "run_after", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=60, index=True)
    # Set while the task is pending and NULL afterwards: a unique index on it collapses a burst
    # of identical requests into one pending task (NULLs never collide, on SQLite and PostgreSQL).
    dedupe_key: str | None = Field(default=None, max_length=300, unique=True)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    # Progress the task recorded, so a retry resumes instead of starting over.
    state: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    status: str = Field(default="pending", max_length=20)  # pending | running | done | dead
    attempts: int = 0
    max_attempts: int = 6
    run_after: datetime = Field(default_factory=utcnow, sa_column=time_column())
    lease_owner: str | None = Field(default=None, max_length=200)
    lease_expires_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
    last_error: str | None = Field(default=None, sa_column=text_column())
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
    finished_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
