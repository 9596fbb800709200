"""test planning (issue 13): why each job exists, GPU-seconds, and the plan's findings

``jobs``: ``purpose`` (tree | confirm | bisect | retry | baseline), ``step_position`` (the
prefix of the series order a bisect job tests), ``attempt``, ``retry_of_job_id``,
``excluded_nodes``, ``targets`` (a PR's own test files), ``series_key``, ``gpu_seconds``.
``integration_steps.own_test_files``: the test files a step adds or modifies.
``test_findings``: per run, test set, shape and test, the failure class and the PR that
introduced a new failure, with the jobs that show it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column(
                "purpose",
                sqlmodel.sql.sqltypes.AutoString(length=20),
                nullable=False,
                server_default="tree",
            )
        )
        batch.add_column(sa.Column("step_position", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("attempt", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("retry_of_job_id", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("excluded_nodes", sa.JSON(), nullable=False, server_default="[]")
        )
        batch.add_column(sa.Column("targets", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("series_key", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True)
        )
        batch.add_column(sa.Column("gpu_seconds", sa.Float(), nullable=True))
        batch.create_foreign_key("fk_jobs_retry_of_job_id", "jobs", ["retry_of_job_id"], ["id"])
        batch.create_index(batch.f("ix_jobs_series_key"), ["series_key"], unique=False)
    with op.batch_alter_table("integration_steps") as batch:
        batch.add_column(
            sa.Column("own_test_files", sa.JSON(), nullable=False, server_default="[]")
        )
    op.execute("UPDATE jobs SET purpose = 'baseline' WHERE kind = 'baseline'")
    op.create_table(
        "test_findings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("test_set", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("shape", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("nodeid", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
        sa.Column("failure_class", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=True),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["integration_runs.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "test_set", "shape", "nodeid", name="uq_test_findings"),
    )
    with op.batch_alter_table("test_findings") as batch:
        batch.create_index(batch.f("ix_test_findings_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("test_findings") as batch:
        batch.drop_index(batch.f("ix_test_findings_run_id"))
    op.drop_table("test_findings")
    with op.batch_alter_table("integration_steps") as batch:
        batch.drop_column("own_test_files")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index(batch.f("ix_jobs_series_key"))
        batch.drop_constraint("fk_jobs_retry_of_job_id", type_="foreignkey")
        for column in (
            "gpu_seconds",
            "series_key",
            "targets",
            "excluded_nodes",
            "retry_of_job_id",
            "attempt",
            "step_position",
            "purpose",
        ):
            batch.drop_column(column)
