"""result key (issue 24): the runner environment a job's result was obtained with, and its key

``jobs.runner_env``: what the nodes reported running the tests with (python, torch, CUDA,
container image digest). ``jobs.result_key``: sha256 of tree + test-set definition (the
configuration hash: targets, markers, conventions, env, image) + shape + runner environment;
a result is reused only where every part matches. Existing rows keep NULL in both (their
environment was never reported): they are reused as before until a node reports one.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 17:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

from stackbot.db import read_clock

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("runner_env", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("result_key", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True)
        )
    read_clock.install(op.get_bind(), ("jobs",))  # SQLite's batch may recreate the table


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("result_key")
        batch.drop_column("runner_env")
    read_clock.install(op.get_bind(), ("jobs",))
