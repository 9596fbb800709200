"""GPU jobs (one test set x shape x tree) and their per-test results."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, UniqueConstraint
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
    # Why the test plan made this job (issue 13): tree (a run's final tree: the series run
    # under series-first, every stack under every-stack), confirm (a rerun of the same tree to
    # confirm new failures), bisect (a prefix of the series order), retry (an infra failure
    # retried on another node), baseline (the base commit).
    purpose: str = Field(default="tree", max_length=20)
    # For a bisect job: how many steps of the series run its tree holds (the prefix length);
    # None for a run's final tree.
    step_position: int | None = Field(default=None)
    attempt: int = Field(default=1)  # 2 for the confirming rerun of the same tree
    # The job that this one confirms or retries (same tree and configuration).
    retry_of_job_id: int | None = Field(default=None, foreign_key="jobs.id")
    # Nodes an infra retry must not use (where the earlier attempts failed).
    excluded_nodes: list[str] = Field(default_factory=list, sa_column=json_column())
    # The pytest targets when they are not the test set's: a PR's own test files.
    targets: list[str] | None = Field(default=None, sa_column=json_column(nullable=True))
    series_key: str | None = Field(default=None, max_length=100, index=True)
    # nodes x GPUs per node x wall seconds, once finished (0 for a reused result).
    gpu_seconds: float | None = Field(default=None)
    # What the nodes ran the tests with (gpu_jobs.environment: python, torch, cuda, image), as
    # the result reported it; None until it finished (or for a result from before issue 24).
    runner_env: dict[str, str] | None = Field(default=None, sa_column=json_column(nullable=True))
    # sha256 of tree + test-set definition (config_hash) + shape + runner environment: what
    # decides the result (stackbot.services.jobs.result_key). None until the result is known.
    result_key: str | None = Field(default=None, max_length=64)


class TestFinding(SQLModel, table=True):
    """What the test plan concluded about one failing test of one configuration on a run's
    tree: its failure class and, for a new failure, the PR that introduced it."""

    __tablename__ = "test_findings"
    __table_args__ = (
        UniqueConstraint("run_id", "test_set", "shape", "nodeid", name="uq_test_findings"),
    )
    __test__ = False

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="integration_runs.id", index=True)
    test_set: str = Field(max_length=100)
    shape: str = Field(max_length=20)
    nodeid: str = Field(max_length=1000)
    # new | pre-existing | flaky | suspect (failed once, rerun pending) | bisecting
    failure_class: str = Field(max_length=20)
    pr_number: int | None = Field(default=None)  # the PR that introduced a new failure
    # {"jobs": [ids...], "passes_at": position, "fails_at": position, "note": "..."}
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=json_column())
    updated_at: datetime = Field(default_factory=utcnow, sa_column=time_column())


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
