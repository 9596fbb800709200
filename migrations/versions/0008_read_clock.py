"""read_clock: a counter that database triggers move with every change the dashboard shows

The dashboard keeps a computed page while the clock has not moved (a 500-PR series page is
computed once per change, not once per request). See ``stackbot/db/read_clock.py``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 06:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from stackbot.db import read_clock

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The watched tables as of this revision (read_clock.WATCHED may grow in later revisions).
TABLES = (
    "repositories",
    "pull_requests",
    "dependency_edges",
    "dependency_overrides",
    "series",
    "series_members",
    "approvals",
    "reports",
    "command_replies",
    "integration_runs",
    "integration_steps",
    "jobs",
    "test_results",
    "test_findings",
    "maintenance_runs",
)


def upgrade() -> None:
    op.create_table(
        "read_clock",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("ticks", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("txid", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    read_clock.install(op.get_bind(), TABLES)


def downgrade() -> None:
    read_clock.uninstall(op.get_bind(), TABLES)
    op.drop_table("read_clock")
