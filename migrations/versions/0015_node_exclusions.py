"""node exclusions: nodes left out of job submissions after repeated infra failures, until a
node check passes (issue 26 point 4)

Revision ID: 0015
Revises: 0013
Create Date: 2026-12-04 21:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

from stackbot.db import read_clock

revision: str = "0015"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "node_exclusions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("node", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("excluded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("checks", sa.JSON(), nullable=False),
        sa.Column("check_handle", sa.Text(), nullable=True),
        sa.Column("check_asked", sa.Boolean(), nullable=False),
        sa.Column("last_check_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_by", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("end_note", sa.Text(), nullable=True),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("node"),
    )
    read_clock.install(op.get_bind(), ("node_exclusions",))


def downgrade() -> None:
    # The table's clock triggers go with it (the shared PostgreSQL function stays).
    op.drop_table("node_exclusions")
