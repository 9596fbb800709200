"""landings: ``/stackbot land [#N]`` requests and what became of each PR

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 17:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

from stackbot.db import read_clock

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "landings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("series_key", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("up_to", sa.Integer(), nullable=True),
        sa.Column("requested_on", sa.Integer(), nullable=False),
        sa.Column("requested_by", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("merge_method", sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
        sa.Column("entries", sa.JSON(), nullable=False),
        sa.Column("waiting_for", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("main_sha", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("tested_run_id", sa.Integer(), nullable=True),
        sa.Column("tested_tree", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("landed_tree", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["repo_id"], ["repositories.id"]),
        sa.ForeignKeyConstraint(["tested_run_id"], ["integration_runs.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo_id", "comment_id", name="uq_landings_comment"),
    )
    with op.batch_alter_table("landings") as batch:
        batch.create_index(batch.f("ix_landings_repo_id"), ["repo_id"], unique=False)
        batch.create_index(batch.f("ix_landings_series_key"), ["series_key"], unique=False)
        batch.create_index(batch.f("ix_landings_state"), ["state"], unique=False)
    read_clock.install(op.get_bind(), ("landings",))  # the series page shows its landing


def downgrade() -> None:
    # The clock's triggers on landings go with the table (the function stays: 0008's tables
    # still use it).
    with op.batch_alter_table("landings") as batch:
        batch.drop_index(batch.f("ix_landings_state"))
        batch.drop_index(batch.f("ix_landings_series_key"))
        batch.drop_index(batch.f("ix_landings_repo_id"))
    op.drop_table("landings")
