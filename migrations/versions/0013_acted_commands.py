"""acted commands: a comment's command acted on once, whichever path (webhook or reconcile) saw
it first; comment cursors: how far reconcile has read each PR's comments

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 15:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "acted_commands",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repo", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("body_sha", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "repo", "comment_id", "updated_at", "body_sha", name="uq_acted_commands_comment"
        ),
    )
    op.create_table(
        "comment_cursors",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repo", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("pr_number", sa.Integer(), nullable=False),
        sa.Column("seen_until", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo", "pr_number", name="uq_comment_cursors_pr"),
    )


def downgrade() -> None:
    op.drop_table("comment_cursors")
    op.drop_table("acted_commands")
