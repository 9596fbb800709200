"""Quarantined tests of a repository (issue 26): a test seen flaky often enough still runs and
is shown, but decides no verdict; released after a run of clean results, expires unless a
maintainer renews it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import json_column, text_column, time_column, utcnow


class QuarantineEntry(SQLModel, table=True):
    """One test's quarantine in one repository (one row per test: a later quarantine of the
    same test starts it again and keeps the earlier ones in ``history``)."""

    __tablename__ = "quarantines"
    __table_args__ = (UniqueConstraint("repo_id", "nodeid", name="uq_quarantines"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    nodeid: str = Field(max_length=1000)
    state: str = Field(max_length=20)  # active | released | expired | lifted
    reason: str = Field(max_length=20)  # evidence | maintainer
    requested_by: str | None = Field(default=None, max_length=200)  # a maintainer's login
    started_at: datetime = Field(default_factory=utcnow, sa_column=time_column())
    expires_at: datetime = Field(sa_column=time_column())
    renewed_by: str | None = Field(default=None, max_length=200)
    ended_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
    ended_by: str | None = Field(default=None, max_length=200)  # a login, or None (evidence)
    end_note: str | None = Field(default=None, sa_column=text_column())
    # [{"test_set", "shape", "tree", "failed_job", "passed_job", "at"}]: the flaky events
    evidence: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    # Who may release it: the authors of the test file's last changes (git), logins or names
    owners: list[str] = Field(default_factory=list, sa_column=json_column())
    history: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
