"""maintenance_runs: what each maintenance round removed and the disk use it measured

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 09:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "maintenance_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("period", sa.BigInteger(), nullable=True),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("trigger", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("freed", sa.JSON(), nullable=False),
        sa.Column("usage", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("period"),
    )
    op.create_index("ix_maintenance_runs_started_at", "maintenance_runs", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_maintenance_runs_started_at", table_name="maintenance_runs")
    op.drop_table("maintenance_runs")
