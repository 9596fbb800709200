"""Integration runs: a base ref plus PR heads merged one by one, and each step's outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from stackbot.db.models._columns import json_column, text_column, time_column, utcnow


class IntegrationRun(SQLModel, table=True):
    __tablename__ = "integration_runs"

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    kind: str = Field(max_length=10)  # stack | series
    # The run's name: its refs live under refs/stackbot/<kind>/<name>/.
    name: str = Field(default="", max_length=100)
    series_key: str | None = Field(default=None, max_length=100, index=True)
    target_pr: int | None = Field(default=None, index=True)  # the PR whose stack this is
    base_ref: str = Field(max_length=255)
    base_sha: str = Field(default="", max_length=40)
    # clean | resolved | conflict | error | pending | running
    status: str = Field(default="pending", max_length=20)
    final_tree: str | None = Field(default=None, max_length=40, index=True)
    final_commit: str | None = Field(default=None, max_length=40)
    ref_name: str | None = Field(default=None, max_length=255)
    # "<remote> <branch>" the final commit was pushed to, when it was.
    pushed_to: str | None = Field(default=None, max_length=1000)
    # PR number -> head sha the run used (what makes two runs "the same").
    heads: dict[str, str] = Field(default_factory=dict, sa_column=json_column())
    # The allowlist on the final tree: {"total", "new": [...], "stale": [...], "unparsed": [...]}.
    allowlist: dict[str, Any] | None = Field(default=None, sa_column=json_column(nullable=True))
    error: str | None = Field(default=None, sa_column=text_column())
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column(index=True))
    finished_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))


class IntegrationStep(SQLModel, table=True):
    __tablename__ = "integration_steps"
    __table_args__ = (UniqueConstraint("run_id", "position", name="uq_integration_steps"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="integration_runs.id", index=True)
    position: int
    pr_number: int
    head_sha: str = Field(max_length=40)
    outcome: str = Field(max_length=20)  # clean | resolved | conflict | skipped
    tree: str | None = Field(default=None, max_length=40)
    commit: str | None = Field(default=None, max_length=40)
    # [{"path", "type"}] git's conflicts for this step (generated files included).
    conflicts: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
    # The PRs already merged that touched the conflicting paths, when known.
    conflicts_with: list[int] = Field(default_factory=list, sa_column=json_column())
    messages: str | None = Field(default=None, sa_column=text_column())
    resolution: str | None = Field(default=None, sa_column=text_column())
    skipped_reason: str | None = Field(default=None, sa_column=text_column())
    # What regenerating the allowlist did on this step's tree: {"total_before", "total_after",
    # "new_reads", "stale", "unparsed", "rewritten", "path"}.
    allowlist: dict[str, Any] | None = Field(default=None, sa_column=json_column(nullable=True))
    # The PR's own test files as this step brought them into the tree (issue 13): test files
    # under the configured roots that the step's PR adds or modifies relative to its base,
    # [{"path", "status": "added" | "modified", "on_main": bool}] (stackbot.services.own_tests).
    own_test_files: list[dict[str, Any]] = Field(default_factory=list, sa_column=json_column())
