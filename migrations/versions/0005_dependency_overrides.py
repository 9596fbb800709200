"""dependency edges keep their declaring text and origin; dependency overrides

``dependency_edges.text`` / ``origin``: the exact words that declared an edge and where they
were. ``dependency_overrides``: ``/stackbot depends-on #N`` and ``/stackbot no-dependency #N``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 09:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("dependency_edges") as batch:
        batch.add_column(sa.Column("text", sa.Text(), nullable=True))
        batch.add_column(sa.Column("origin", sa.Text(), nullable=True))
    op.create_table(
        "dependency_overrides",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("repo_id", sa.Integer(), nullable=False),
        sa.Column("child", sa.Integer(), nullable=False),
        sa.Column("parent", sa.Integer(), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column("login", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["repo_id"], ["repositories.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("repo_id", "child", "parent", name="uq_dependency_overrides"),
    )
    with op.batch_alter_table("dependency_overrides") as batch:
        batch.create_index(batch.f("ix_dependency_overrides_repo_id"), ["repo_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("dependency_overrides") as batch:
        batch.drop_index(batch.f("ix_dependency_overrides_repo_id"))
    op.drop_table("dependency_overrides")
    with op.batch_alter_table("dependency_edges") as batch:
        batch.drop_column("origin")
        batch.drop_column("text")
