"""quarantines: tests of a repository quarantined on evidence or by a maintainer (issue 26)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 17:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

from stackbot.db import read_clock

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "quarantines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("nodeid", sqlmodel.sql.sqltypes.AutoString(length=1000), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("requested_by", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("renewed_by", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_by", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("end_note", sa.Text(), nullable=True),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("owners", sa.JSON(), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["repo_id"], ["repositories.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo_id", "nodeid", name="uq_quarantines"),
    )
    with op.batch_alter_table("quarantines") as batch:
        batch.create_index(batch.f("ix_quarantines_repo_id"), ["repo_id"], unique=False)
    read_clock.install(op.get_bind(), ("quarantines",))


def downgrade() -> None:
    # The table's clock triggers go with it (the shared PostgreSQL function stays).
    with op.batch_alter_table("quarantines") as batch:
        batch.drop_index(batch.f("ix_quarantines_repo_id"))
    op.drop_table("quarantines")
