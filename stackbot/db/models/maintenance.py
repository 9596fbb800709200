"""Rounds of the ``maintenance`` task: what each removed and the disk use it measured."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import json_column, text_column, time_column, utcnow


class MaintenanceRun(SQLModel, table=True):
    """One maintenance round. A scheduled round claims its ``period`` (unique), so two workers
    never run one period twice; a round started by hand (``stackbot maintenance run``) has no
    period. The dashboard shows the newest finished row's figures, measured by the round."""

    __tablename__ = "maintenance_runs"

    id: int | None = Field(default=None, primary_key=True)
    # floor(epoch seconds / interval_s) of a scheduled round; None for a round run by hand.
    period: int | None = Field(
        default=None, sa_column=Column(BigInteger, nullable=True, unique=True)
    )
    task_id: int | None = Field(default=None)  # the queue task that claimed the period
    trigger: str = Field(default="schedule", max_length=20)  # schedule | cli
    started_at: datetime = Field(default_factory=utcnow, sa_column=time_column(index=True))
    finished_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
    # {area: bytes freed}, areas: run_refs (objects dropped by the repack), job_output,
    # runner_cache.
    freed: dict[str, int] = Field(default_factory=dict, sa_column=json_column())
    # {area: {"bytes": n, "count": n}} measured after the round: mirrors, run_refs, job_output,
    # runner_cache, database.
    usage: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    # What was removed or kept, counted ({"run_refs_removed": 3, ...}), and per-mirror notes.
    summary: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    error: str | None = Field(default=None, sa_column=text_column())
