"""approvals.carried_from: the approved head a carried approval came from

An approval carried to a new head whose own patch is the approved head's (issue 24 point 5,
``stackbot.domain.approval_carry``) is stored with kind ``carried`` and the approved SHA here.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN (no batch copy): SQLite keeps the read clock's triggers on the table.
    op.add_column(
        "approvals",
        sa.Column("carried_from", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("approvals", "carried_from")  # SQLite 3.35+: in place, triggers kept
