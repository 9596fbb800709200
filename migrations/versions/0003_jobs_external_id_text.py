"""jobs.external_id holds an executor handle: TEXT, not VARCHAR(100)

A local executor's handle is ~190 characters of JSON (and grows with the out_dir's path);
PostgreSQL refused it, SQLite silently kept it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03 07:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column(
            "external_id",
            existing_type=sqlmodel.sql.sqltypes.AutoString(length=100),
            type_=sa.Text(),
            existing_nullable=True,
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column(
            "external_id",
            existing_type=sa.Text(),
            type_=sqlmodel.sql.sqltypes.AutoString(length=100),
            existing_nullable=True,
        )
