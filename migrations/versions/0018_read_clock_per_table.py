"""read clock per table: each watched table gets a clock of its own (a row of read_clock),
moved by the same triggers as the global one

The dashboard keeps what it derives from a few tables (a series' test rows: its runs, steps,
jobs and results) while those tables' clocks stand still, so a write to a PR's title no longer
recomputes 5,000 jobs' rows. See ``stackbot/db/read_clock.py``.

Revision ID: 0018
Revises: 0015
Create Date: 2026-12-04 21:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from stackbot.db import read_clock

revision: str = "0018"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The watched tables as of this revision.
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
    "quarantines",
    "landings",
    "node_exclusions",
)


def upgrade() -> None:
    read_clock.install(op.get_bind(), TABLES)  # the tables' rows, triggers that move them


def downgrade() -> None:
    # Without their rows the per-table triggers move the global clock only, as before.
    op.get_bind().execute(sa.text("DELETE FROM read_clock WHERE id <> 1"))
