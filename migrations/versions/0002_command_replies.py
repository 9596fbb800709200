"""command replies: what the per-PR and per-user reply limits count

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03 07:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "command_replies",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repo", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("login", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=False),
        sa.Column("vetter", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo", "comment_id", name="uq_command_replies_comment"),
    )
    with op.batch_alter_table("command_replies", schema=None) as batch_op:
        batch_op.create_index(
            "ix_command_replies_user", ["repo", "login", "created_at"], unique=False
        )
        batch_op.create_index("ix_command_replies_pr", ["repo", "pr_number", "login"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("command_replies", schema=None) as batch_op:
        batch_op.drop_index("ix_command_replies_pr")
        batch_op.drop_index("ix_command_replies_user")
    op.drop_table("command_replies")
