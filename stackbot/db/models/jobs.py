"""GPU jobs (one test set x shape x tree) and their per-test results."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from gpu_jobs.result import JOB_STATUSES
from stackbot.db.models._columns import json_column, text_column, time_column, utcnow

# A job's status: queued → starting → submitted → running → one of FINISHED_STATES.
# ``starting`` is the intent, committed before the executor is asked to start anything: a job
# found ``starting`` may already run, so it is adopted (the executor's submit is idempotent for
# its out_dir), never started afresh.
STARTING = "starting"
FINISHED_STATES = frozenset(JOB_STATUSES)  # every status a job result can have
IN_FLIGHT_STATES = frozenset({"submitted", "running"})
# Outcomes that say nothing about the tree: never reused, so the next run tries again.
NOT_REUSABLE_STATES = frozenset({"infra", "cancelled"})


class Job(SQLModel, table=True):
    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_tree_config", "tree_sha", "config_hash"),)

    id: int | None = Field(default=None, primary_key=True)
    repo_id: int = Field(foreign_key="repositories.id", index=True)
    # The integration run whose tree this job tests; None for a baseline job on the base branch.
    integration_run_id: int | None = Field(
        default=None, foreign_key="integration_runs.id", index=True
    )
    kind: str = Field(default="integration", max_length=20)  # integration | baseline
    base_ref: str | None = Field(default=None, max_length=255)
    test_set: str = Field(max_length=100)
    shape: str = Field(max_length=20)  # "1x4": nodes x GPUs per node
    tree_sha: str = Field(max_length=40)
    commit_sha: str = Field(max_length=40)
    # sha256 of the job configuration (targets, shape, env, image): results are reusable
    # across integrations with the same tree and the same configuration.
    config_hash: str = Field(max_length=64)
    # queued | starting | submitted | running | passed | failed | error | timeout | infra | cancelled
    status: str = Field(default="queued", max_length=20, index=True)
    executor: str = Field(default="local", max_length=20)
    # The executor's handle (``JobHandle.to_str()``: JSON naming the out_dir, pids or the Slurm
    # id). Unbounded text: a local handle is ~190 characters and grows with the path.
    external_id: str | None = Field(default=None, sa_column=text_column())
    node: str | None = Field(default=None, max_length=200)
    out_dir: str | None = Field(default=None, max_length=1000)
    reused_from_job_id: int | None = Field(default=None, foreign_key="jobs.id")
    counts: dict[str, int] = Field(default_factory=dict, sa_column=json_column())
    result: dict[str, Any] | None = Field(default=None, sa_column=json_column(nullable=True))
    error: str | None = Field(default=None, sa_column=text_column())
    created_at: datetime = Field(default_factory=utcnow, sa_column=time_column(index=True))
    submitted_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
    started_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))
    finished_at: datetime | None = Field(default=None, sa_column=time_column(nullable=True))


class TestResult(SQLModel, table=True):
    __tablename__ = "test_results"
    __test__ = False  # not a pytest class

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True)
    nodeid: str = Field(max_length=1000)
    outcome: str = Field(max_length=20)  # passed | failed | error | skipped
    duration_s: float = 0.0
    failed_ranks: list[int] = Field(default_factory=list, sa_column=json_column())
    message: str | None = Field(default=None, sa_column=text_column())
